"""The clipping rules BandPO is compared with, as ratio bounds (numpy).

Each returns ``(lower, upper)`` ratio bounds for old probabilities ``p``,
shaped like ``p`` (MATH.md, "Clipping rules that bandsolve compares against").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from . import _validate
from .api import Bounds

__all__ = ["ppo_bounds", "clip_higher_bounds", "dcpo_bounds"]


def ppo_bounds(p: ArrayLike, eps: float = 0.2) -> Bounds:
    """PPO / GRPO clip: [1 - eps, 1 + eps] for every p."""
    return clip_higher_bounds(p, eps, eps)


def clip_higher_bounds(p: ArrayLike, eps_low: float = 0.2, eps_high: float = 0.28) -> Bounds:
    """Clip-Higher (DAPO): [1 - eps_low, 1 + eps_high] for every p."""
    p = _validate.check_probability(p)
    return np.full(p.shape, 1.0 - eps_low), np.full(p.shape, 1.0 + eps_high)


def dcpo_bounds(p: ArrayLike, eps_low: float = 0.16, eps_high: float = 0.2,
                max_ratio: float = 10.0) -> Bounds:
    """DCPO's dynamic-adaptive clipping.

    lower = 1/2 + sqrt(max(1 - 4 eps_low / p, 0)) / 2,
    upper = min(1/2 + sqrt(1 + 4 eps_high / p) / 2, max_ratio);
    p = 0 gives (1/2, max_ratio).
    """
    p = _validate.check_probability(p)
    with np.errstate(divide="ignore"):
        lower = 0.5 + 0.5 * np.sqrt(np.maximum(1.0 - 4.0 * eps_low / p, 0.0))
        upper = np.minimum(0.5 + 0.5 * np.sqrt(1.0 + 4.0 * eps_high / p), max_ratio)
    return lower, upper
