"""Measured figures for the exceptions listed in docs/accuracy.md.

    python benchmarks/accuracy_edges.py

1. 1 - p subnormal (band_from_logp with 0 < -log p < 2.2e-308): the lower
   bound of divergences whose conjugate behaves like log v at v -> 0 (rkl,
   alpha near a = 1), as a multiple of the tolerance, against the mpmath
   reference of tests/reference.py.
2. alpha with a > 1 where g overflows float64 next to the root: which
   inputs raise BandSolveError, next to the exact bound and the quantity
   that decides it, q^(a - 1) / (a (a - 1)) with q = r (upper bound) or
   q = (1 - r) p / (1 - p) (lower bound): above float64's maximum, 1.8e308,
   the conjugate's value overflows. (The lower bound's q is shown as 0 where
   the reference's 60 digits do not resolve 1 - r.)
"""

from __future__ import annotations

import os
import sys

import mpmath as mp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import reference as ref  # noqa: E402

import bandsolve as bs  # noqa: E402

LOG_P = [-5e-324, -1e-320, -1e-315, -1e-310, -3e-308, -1e-300]
DELTAS = [1e-6, 0.05, 50.0]
NAMES = ["rkl", "alpha:0.99", "alpha:0.999999", "alpha:1.000001", "alpha:1.001", "alpha:2",
         "kl", "alpha:0.5"]


def subnormal_one_minus_p() -> None:
    print("## 1 - p subnormal: worst lower-bound error / tolerance over delta in", DELTAS)
    print("| divergence | " + " | ".join(f"log p = {lp:g}" for lp in LOG_P) + " |")
    print("|---" * (len(LOG_P) + 1) + "|")
    for name in NAMES:
        cells = []
        for log_p in LOG_P:
            worst, raised = 0.0, 0
            for delta in DELTAS:
                exact, _ = ref.bound(name, log_p, delta, "lower", from_logp=True)
                try:
                    lower, _ = bs.band_from_logp(log_p, delta, name)
                except bs.BandSolveError:
                    raised += 1
                    continue
                worst = max(worst, ref.error_ratio(float(lower), exact))
            cells.append(f"{worst:.2g}" + (f" ({raised} raised)" if raised else ""))
        print(f"| `{name}` | " + " | ".join(cells) + " |")


OVERFLOW_CASES = [  # (divergence, p or log p, from log p, delta)
    ("alpha:5.839198478431584", 1e-300, False, 1e75),
    ("alpha:5.839198478431584", 1e-100, False, 1e90),
    ("alpha:5.839198478431584", 1e-120, False, 1e300),
    ("alpha:3", 1e-300, False, 1e300),
    ("alpha:3", 0.3, False, 1e300),
    ("alpha:3", 0.9, False, 1e300),
    ("alpha:3", -1e-300, True, 1e200),
    ("alpha:7.5", 1e-6, False, 1e50),
    ("alpha:7.5", 0.3, False, 1e50),
    ("alpha:7.5", 0.3, False, 1e40),
    ("alpha:2", 1e-300, False, 1e300),
]


def overflow_region() -> None:
    print("\n## alpha with a > 1 where the conjugate overflows: error against q^(a-1) / (a (a-1))")
    print("| divergence | input | delta | side | exact bound | q^(a-1)/(a(a-1)) | "
          "error / tolerance |")
    print("|---|---|---|---|---|---|---:|")
    for name, x, from_logp, delta in OVERFLOW_CASES:
        a = mp.mpf(name.split(":")[1])
        with mp.workdps(60):
            p = mp.exp(x) if from_logp else mp.mpf(x)
            pc = -mp.expm1(x) if from_logp else 1 - p
        call = bs.band_from_logp if from_logp else bs.band
        try:
            got = dict(zip(("lower", "upper"), call(x, delta, name)))
        except bs.BandSolveError:
            got = None
        for side in ("lower", "upper"):
            exact, saturated = ref.bound(name, x, delta, side, from_logp=from_logp)
            with mp.workdps(60):
                q = exact if side == "upper" else (1 - exact) * p / pc
                measure = q ** (a - 1) / (a * (a - 1)) if not saturated else mp.mpf(0)
            label = f"log p = {x:g}" if from_logp else f"p = {x:g}"
            error = "raised" if got is None else f"{ref.error_ratio(float(got[side]), exact):.2g}"
            print(f"| `{name}` | {label} | {delta:g} | {side} | {mp.nstr(exact, 6)} "
                  f"{'(saturated)' if saturated else ''} | {mp.nstr(measure, 3)} | {error} |")


if __name__ == "__main__":
    np.seterr(all="ignore")
    subnormal_one_minus_p()
    overflow_region()
