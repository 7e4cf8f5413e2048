"""Measured float64 accuracy of the numpy API against the mpmath reference.

    python benchmarks/accuracy.py [--random 200] [--out FILE.md]

For each divergence: the grid of tests/problems.py (from p and from log p),
random log-uniform cases, cases next to both saturation thresholds (logit p
within 1e-14..1e-1 of them, on the interior side), and the extreme deltas the
API accepts (5e-324 to float64's maximum); then the alpha family at random a
in (-4, 8) with threshold cases. For each: the worst error as a fraction of
the tolerance max(1e-12 min(r, |r-1|), 4 eps max(r, 1)), the worst relative
error of the margin |r - 1| (where |r - 1| > 1e-3, so that the float64
rounding of r itself does not dominate), and how many cases raised
BandSolveError because g overflows float64 (never a wrong number).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import mpmath as mp
import numpy as np
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import reference as ref  # noqa: E402
from problems import (  # noqa: E402
    ALL_DIVERGENCES,
    DELTA_GRID,
    LOGP_DELTA_GRID,
    LOGP_GRID,
    P_GRID,
    SUBNORMAL_LIMIT,
)

import bandsolve as bs  # noqa: E402
from bandsolve._kernels._bind import kernels_for  # noqa: E402

EXTREME_DELTAS = (5e-324, 1e-300, 1e-100, 1e30, 1e100, 1e300, 1.7976931348623157e308)
EXTREME_P = (1e-300, 1e-100, 1e-12, 1e-3, 0.3, 0.9, 1 - 1e-9, 1.0)


def near_thresholds(div, delta, rng, count):
    """p next to each saturation threshold, on the interior side."""
    for upper in (True, False):
        z = kernels_for(div).saturation_threshold(upper, delta)
        if not math.isfinite(z):
            continue
        for _ in range(count):
            gap = 10.0 ** rng.uniform(-14, -1)
            zz = z - gap if upper else z + gap
            yield 1.0 / (1.0 + math.exp(-zz)), delta, False


def cases(name, n_random, rng):
    div = bs.get_divergence(name)
    for _ in range(max(n_random // 10, 1)):
        yield from near_thresholds(div, float(10 ** rng.uniform(-8, 1)), rng, 2)
    for p in EXTREME_P:
        for d in EXTREME_DELTAS:
            yield p, d, False
    for p in P_GRID:
        for d in DELTA_GRID:
            yield p, d, False
    for lp in LOGP_GRID:
        if lp != 0.0 and -lp < SUBNORMAL_LIMIT.get(name, 0.0) or lp == -np.inf:
            continue
        for d in LOGP_DELTA_GRID:
            yield lp, d, True
    for _ in range(n_random):
        d = float(np.exp(rng.uniform(np.log(1e-8), np.log(10))))
        yield -float(np.exp(rng.uniform(np.log(1e-30), np.log(690)))), d, True
        yield float(np.exp(rng.uniform(np.log(1e-300), 0.0))), d, False


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--random", type=int, default=200)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = ["| divergence | cases | worst error / tolerance | worst rel. error of r - 1 "
            "| raised (g overflows) |", "|---|---:|---:|---:|---:|"]

    def measure(label, spec, reference_name, case_list):
        worst_tol = worst_margin = 0.0
        count = raised = 0
        for x, d, from_logp in case_list:
            try:
                lo, hi = (bs.band_from_logp if from_logp else bs.band)(x, d, spec)
            except bs.BandSolveError:
                raised += 1
                continue
            for side, value in (("lower", float(lo)), ("upper", float(hi))):
                truth, _ = ref.bound(reference_name, x, d, side, from_logp=from_logp)
                count += 1
                worst_tol = max(worst_tol, ref.error_ratio(value, truth))
                if mp.isfinite(truth) and abs(truth - 1) > 1e-3 and truth < 1e300:
                    with mp.workdps(ref.DPS):
                        rel = abs((mp.mpf(value) - 1) - (truth - 1)) / abs(truth - 1)
                    worst_margin = max(worst_margin, float(rel))
        rows.append(f"| {label} | {count} | {worst_tol:.2f} | {worst_margin:.1e} | {raised} |")

    for name in tqdm(ALL_DIVERGENCES, desc="divergences"):
        measure(f"`{name}`", name, name, list(cases(name, args.random, rng)))
    alpha_cases = []
    for _ in tqdm(range(args.random), desc="alpha, random a"):
        a = float(rng.choice([rng.uniform(-4, -0.001), rng.uniform(0.001, 0.999),
                              rng.uniform(1.001, 8.0)]))
        div = bs.alpha_divergence(a)
        for p, d, _ in near_thresholds(div, float(10 ** rng.uniform(-8, 1)), rng, 1):
            alpha_cases.append((a, p, d))
        alpha_cases.append((a, float(np.exp(rng.uniform(np.log(1e-300), 0.0))),
                            float(10 ** rng.uniform(-8, 1))))
    worst = 0.0
    count = 0
    for a, p, d in alpha_cases:
        lo, hi = bs.band(p, d, bs.alpha_divergence(a))
        for side, value in (("lower", float(lo)), ("upper", float(hi))):
            truth, _ = ref.bound(f"alpha:{a!r}", p, d, side)
            count += 1
            worst = max(worst, ref.error_ratio(value, truth))
    rows.append(f"| `alpha:<a>`, a random in (-4, 8), thresholds | {count} | {worst:.2f} | - | 0 |")
    text = "\n".join(rows)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
