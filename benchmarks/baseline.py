"""The paper's KL solver, re-implemented as the baseline: vectorised bisection
in numpy, 50 iterations, absolute tolerance 1e-6 on the ratio, and an early
exit that checks the whole array each iteration (the host synchronisation of
the original). Written from MATH.md's description, not from the paper's code.
"""

import numpy as np


def bisect_kl(p, delta, *, upper, iterations=50, tol=1e-6):
    p = np.asarray(p, dtype=np.float64)
    pc = 1.0 - p
    lo = np.ones_like(p) if upper else np.zeros_like(p)
    hi = 1.0 / p if upper else np.ones_like(p)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        q = np.clip(p * mid, 1e-12, 1.0 - 1e-12)  # the original clamps at 1e-12
        kl = p * np.log(p / q) + pc * np.log(pc / (1.0 - q))
        inside = kl <= delta
        if upper:
            lo = np.where(inside, mid, lo)
            hi = np.where(inside, hi, mid)
        else:
            hi = np.where(inside, mid, hi)
            lo = np.where(inside, lo, mid)
        if np.max(hi - lo) < tol:
            break
    return lo if upper else hi


def bisect_kl_band(p, delta):
    """(lower, upper) by two bisections, as the baseline's caller would."""
    return bisect_kl(p, delta, upper=False), bisect_kl(p, delta, upper=True)
