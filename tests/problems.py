"""The shared reference problems, each with an ID, for every backend.

A backend's test imports ``PROBLEMS`` (or the grids) and compares against
``reference.bound`` (mpmath, 60 digits). Nothing here calls bandsolve; the divergences are the registry's.
"""

from __future__ import annotations

import dataclasses

from bandsolve.divergences import BUILTIN_NAMES, SAMPLE_NAMES

BUILTIN = BUILTIN_NAMES
#: the registry's alpha samples, and two more (a near rkl's 1, and a > 2)
ALPHAS = (*SAMPLE_NAMES[len(BUILTIN_NAMES):], "alpha:0.9", "alpha:3")
ALL_DIVERGENCES = BUILTIN + ALPHAS

#: p from the issue's range [1e-300, 1], both ends and the float64 edges included
P_GRID = (0.0, 1e-300, 1e-200, 1e-100, 1e-30, 1e-12, 1e-6, 1e-3, 0.01, 0.08, 0.3,
          0.5, 0.7, 0.9, 0.99, 1 - 1e-6, 1 - 1e-12, 1 - 2.0**-52, 1.0)
#: delta from the issue's range [1e-8, 10]
DELTA_GRID = (1e-8, 1e-5, 1e-3, 0.05, 0.1, 0.5, 1.0, 3.0, 10.0)
#: float64 log p, down to the smallest subnormal 1 - p
LOGP_GRID = (float("-inf"), -690.7, -400.0, -50.0, -10.0, -2.5, -0.69, -0.1, -1e-3,
             -1e-8, -1e-12, -1e-16, -1e-100, -1e-300, -1e-310, -5e-324, 0.0)
LOGP_DELTA_GRID = (1e-8, 1e-3, 0.05, 1.0, 10.0)

#: Documented limit (README, "Accuracy"): rkl's lower bound at p = 1 - eps
#: with eps a deep float64 subnormal (< 1e-312, reachable only from log p):
#: the conjugate argument eps / (eps + m) is itself subnormal and keeps few
#: digits. Everything else is within the stated tolerance.
SUBNORMAL_LIMIT = {"rkl": 1e-312}


@dataclasses.dataclass(frozen=True)
class Problem:
    id: str
    divergence: str
    p: float
    delta: float


def _named(divergence, p, delta):
    return Problem(f"{divergence}-p{p:.3g}-d{delta:g}", divergence, p, delta)


#: the paper's and MATH.md's worked cases
PROBLEMS = (
    _named("kl", 0.08, 0.05),  # the tail token of the worked example
    _named("kl", 1.0, 0.05),  # r_lo(1) = exp(-delta)
    _named("tv", 1.0, 0.3),  # r_lo(1) = 1 - delta
    _named("rkl", 1.0, 0.05),  # f'(inf) = inf: r_lo(1) = 1
    _named("rkl", 0.5, 0.8),  # upper saturates: -log p <= delta
    _named("hellinger", 0.9, 0.2),
    _named("chi2", 0.3, 0.1),
    _named("js", 0.6, 0.05),
    _named("alpha:0.5", 0.08, 0.05),
    # every built-in at a mid-range case
    *(_named(name, 0.02, 0.1) for name in BUILTIN),
)


def policy_batch(seed=0, shape=(4, 7), *, min_p=1e-4, spread=0.6, keep=0.8):
    """(old log-probs, new log-probs, advantages, 0/1 mask) as numpy arrays: a
    random batch for the policy-loss tests; every sequence keeps its first token."""
    import numpy as np

    rng = np.random.default_rng(seed)
    old = np.log(rng.uniform(min_p, 1.0, shape))
    new = old + rng.normal(0.0, spread, shape)
    advantages = rng.normal(0.0, 1.0, shape)
    mask = (rng.uniform(size=shape) < keep).astype(float)
    mask[:, 0] = 1.0
    return old, new, advantages, mask


def clipped_surrogate_reference(ratio, adv, lower, upper, dual_clip=None):
    """BandPO's per-token loss -min(r A, clip(r, lo, hi) A), with the dual clip
    -A c for A < 0 where it binds, written out in numpy for the plug-in tests.

    Returns (per-token loss, its derivative in log p, where the clipped term
    is the active one, where the dual clip binds)."""
    import numpy as np

    unclipped = -adv * ratio
    clipped = -adv * np.clip(ratio, lower, upper)
    per_token = np.maximum(unclipped, clipped)
    # gradient of max(.): flows through -A r only where that term is the larger
    grad = np.where(unclipped >= clipped, -adv * ratio, 0.0)
    if dual_clip is None:
        dual = np.zeros(np.shape(per_token), dtype=bool)
    else:
        dual = (adv < 0) & (per_token > -adv * dual_clip)
        per_token = np.where(dual, -adv * dual_clip, per_token)
    grad = np.where(dual, 0.0, grad)
    return per_token, grad, clipped > unclipped, dual
