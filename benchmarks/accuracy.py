"""Measured float64 accuracy of the numpy API against the mpmath reference.

    python benchmarks/accuracy.py [--random 200] [--out FILE.md]

For each divergence: the grid of tests/problems.py (from p and from log p)
plus random log-uniform cases, and the worst error as a fraction of the
issue's tolerance max(1e-12 min(r, |r-1|), 4 eps max(r, 1)), along with the
worst relative error of the margin |r - 1| (where |r - 1| > 1e-3, so that the
float64 rounding of r itself does not dominate).
"""

from __future__ import annotations

import argparse
import os
import sys

import mpmath as mp
import numpy as np
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import bandsolve as bs  # noqa: E402
import reference as ref  # noqa: E402
from problems import (ALL_DIVERGENCES, DELTA_GRID, LOGP_DELTA_GRID, LOGP_GRID,  # noqa: E402
                      P_GRID, SUBNORMAL_LIMIT)


def cases(name, n_random, rng):
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
    rows = ["| divergence | cases | worst error / tolerance | worst rel. error of r - 1 |",
            "|---|---:|---:|---:|"]
    for name in tqdm(ALL_DIVERGENCES, desc="divergences"):
        worst_tol = worst_margin = 0.0
        count = 0
        for x, d, from_logp in cases(name, args.random, rng):
            lo, hi = (bs.band_from_logp if from_logp else bs.band)(x, d, name)
            for side, value in (("lower", float(lo)), ("upper", float(hi))):
                truth, _ = ref.bound(name, x, d, side, from_logp=from_logp)
                count += 1
                worst_tol = max(worst_tol, ref.error_ratio(value, truth))
                if mp.isfinite(truth) and abs(truth - 1) > 1e-3 and truth < 1e300:
                    with mp.workdps(ref.DPS):
                        rel = abs((mp.mpf(value) - 1) - (truth - 1)) / abs(truth - 1)
                    worst_margin = max(worst_margin, float(rel))
        rows.append(f"| `{name}` | {count} | {worst_tol:.2f} | {worst_margin:.1e} |")
    text = "\n".join(rows)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
