"""Clipping rules: each turns old log-probabilities into ratio bounds.

A rule is a small frozen dataclass with ``bounds(old_log_prob) -> (lower,
upper)``, tensors shaped like the input, without gradient. ``Band`` is
BandPO's rule; the others are the baselines of MATH.md.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from .settings import BandSettings


def _full_like(x: torch.Tensor, value: float) -> torch.Tensor:
    return torch.full_like(x, value, dtype=torch.float32 if x.dtype != torch.float64 else x.dtype)


@dataclasses.dataclass(frozen=True)
class NoClip:
    """No clipping at all: the plain policy gradient (a reference in studies)."""

    def bounds(self, old_log_prob: torch.Tensor):
        return _full_like(old_log_prob, 0.0), _full_like(old_log_prob, math.inf)


@dataclasses.dataclass(frozen=True)
class PPOClip:
    """PPO / GRPO: [1 - eps, 1 + eps]."""

    eps: float = 0.2

    def bounds(self, old_log_prob):
        return _full_like(old_log_prob, 1 - self.eps), _full_like(old_log_prob, 1 + self.eps)


@dataclasses.dataclass(frozen=True)
class ClipHigher:
    """Clip-Higher (DAPO): [1 - eps_low, 1 + eps_high]."""

    eps_low: float = 0.2
    eps_high: float = 0.28

    def bounds(self, old_log_prob):
        return (_full_like(old_log_prob, 1 - self.eps_low),
                _full_like(old_log_prob, 1 + self.eps_high))


@dataclasses.dataclass(frozen=True)
class DCPO:
    """DCPO's dynamic-adaptive clipping (see ``bandsolve.baselines.dcpo_bounds``)."""

    eps_low: float = 0.16
    eps_high: float = 0.2
    max_ratio: float = 10.0

    def bounds(self, old_log_prob):
        with torch.no_grad():
            p = old_log_prob.detach().float().exp() if old_log_prob.dtype != torch.float64 \
                else old_log_prob.detach().exp()
            lower = 0.5 + 0.5 * torch.sqrt(torch.clamp(1 - 4 * self.eps_low / p, min=0.0))
            upper = torch.clamp(0.5 + 0.5 * torch.sqrt(1 + 4 * self.eps_high / p),
                                max=self.max_ratio)
        return lower, upper


#: BandPO: the f-divergence trust region's ratio bounds, capped at max_ratio.
#: The rule is its settings, checked when made (:class:`BandSettings`), under
#: the name the other rules go by.
Band = BandSettings
