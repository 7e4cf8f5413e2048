"""``bandsolve verify``: the fast backend against the convex programs.

Sweeps divergences x p (log-spaced, and close to 0 and 1) x delta, comparing
:func:`bandsolve.band` with :func:`bandsolve.convex.band`, and runs
:func:`bandsolve.convex.simplex_band` on random vocabularies (peaked and
near-uniform, up to 1,000 tokens). The discrepancy of a bound r is

    |r_convex - r_fast| / max(|r_fast - 1|, 1e-12),

the error relative to the margin r - 1 (absolute near r = 0). Each divergence
has a stated tolerance (``TOLERANCES``): what the convex path reaches,
measured on this sweep with headroom. The fast backend is far more accurate
(1e-12, against mpmath), so a breach means a bug in one of them, and the
command exits 1. A program that no rung of the solver ladder certifies as
optimal is listed as unverified (the convex path's limit, not a discrepancy).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import numpy as np
from tqdm import tqdm

from . import api, convex

DIVERGENCES = ("kl", "rkl", "tv", "chi2", "neyman_chi2", "hellinger", "js",
               "alpha:0.5", "alpha:2", "alpha:-1")
P_SWEEP = tuple(np.r_[np.logspace(-6, np.log10(0.5), 10), 1 - np.logspace(-6, -1, 5), 1.0])
DELTA_SWEEP = (0.01, 0.05, 0.1, 0.5, 1.0)
VOCAB_SIZES = (2, 10, 50, 200, 1000)

#: The convex path's accuracy (relative to the margin), as measured on the
#: default sweep with the solver ladder of ``convex.SOLVER_LADDER``, rounded
#: up with headroom. Exponential and second-order cones verify to 1e-7..1e-6;
#: power cones (alpha with a > 1 or a < 0, neyman_chi2's 1/w) to 1e-4..1e-2,
#: and chi2's square far in the tail (p = 1e-6, delta = 1, where the ratio
#: reaches 1e3 on a weight of 1e-6) to 3e-3: the solver's limits, not the
#: fast backend's, which mpmath checks to 1e-12.
# hellinger: 1.85e-6 on the full-vocabulary program (200 tokens, p = 1.6e-6,
# delta = 0.05) with cvxpy 1.9.3 / Clarabel 0.11, where earlier releases
# reached 1.4e-7; the fast closed form there agrees with mpmath to 1e-12
TOLERANCES = {"kl": 1e-7, "rkl": 1e-6, "tv": 1e-6, "chi2": 1e-2, "neyman_chi2": 1e-3,
              "hellinger": 3e-6, "js": 1e-7, "alpha:0.5": 1e-5, "alpha:2": 5e-2,
              "alpha:-1": 1e-3}
DEFAULT_TOLERANCE = 1e-6


def discrepancy(convex_value, fast_value):
    fast = np.asarray(fast_value, dtype=float)
    conv = np.asarray(convex_value, dtype=float)
    both_inf = np.isinf(fast) & np.isinf(conv)
    err = np.abs(conv - fast) / np.maximum(np.abs(fast - 1.0), 1e-12)
    return np.where(both_inf, 0.0, err)


@dataclasses.dataclass
class Row:
    divergence: str
    tolerance: float
    band_max: float = 0.0
    band_where: str = ""
    simplex_max: float = 0.0
    simplex_where: str = ""
    solves: int = 0
    solver_seconds: float = 0.0
    failures: list = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Within tolerance; programs the solvers could not certify are
        reported (``failures``) but are no discrepancy."""
        return max(self.band_max, self.simplex_max) <= self.tolerance


def _vocabularies(rng, sizes):
    """(pi_old, index, kind) for peaked and near-uniform vocabularies."""
    for n in sizes:
        for kind in ("peaked", "near-uniform"):
            logits = rng.normal(0, 4.0 if kind == "peaked" else 0.1, n)
            pi = np.exp(logits - logits.max())
            pi /= pi.sum()
            # the sampled token: the mode for a peaked one, else a random one
            index = int(np.argmax(pi)) if kind == "peaked" and n > 2 else int(rng.integers(n))
            yield pi, index, kind
            if kind == "peaked" and n > 2:
                yield pi, int(np.argsort(pi)[n // 2]), "peaked, median token"


def run(divergences=DIVERGENCES, p_values=P_SWEEP, deltas=DELTA_SWEEP, sizes=VOCAB_SIZES,
        seed=0, progress=True):
    rng = np.random.default_rng(seed)
    vocab = list(_vocabularies(rng, sizes))
    rows = []
    total = len(divergences) * (len(p_values) * len(deltas) + len(vocab))
    bar = tqdm(total=total, desc="verify", unit="program", disable=not progress)
    for name in divergences:
        row = Row(name, TOLERANCES.get(name, DEFAULT_TOLERANCE))
        for d in deltas:
            for p in p_values:
                try:
                    res = convex.band(p, d, name)
                except convex.ConvexSolveError as exc:
                    row.failures.append(str(exc))
                    bar.update(1)
                    continue
                lo, hi = api.band(p, d, name)
                row.solver_seconds += res.solve_seconds
                row.solves += 2
                for side, c, f in (("lower", res.lower, lo), ("upper", res.upper, hi)):
                    err = float(discrepancy(c, f))
                    if err > row.band_max:
                        row.band_max = err
                        row.band_where = f"{side}, p={p:.6g}, delta={d:g}"
                bar.update(1)
        for pi, index, kind in vocab:
            d = float(rng.choice(deltas))
            try:
                res = convex.simplex_band(pi, index, d, name)
            except convex.ConvexSolveError as exc:
                row.failures.append(str(exc))
                bar.update(1)
                continue
            lo, hi = api.band(pi[index], d, name)
            row.solver_seconds += res.solve_seconds
            row.solves += 2
            for side, c, f in (("lower", res.lower, lo), ("upper", res.upper, hi)):
                err = float(discrepancy(c, f))
                if err > row.simplex_max:
                    row.simplex_max = err
                    row.simplex_where = (f"{side}, n={pi.size} {kind}, "
                                         f"p={pi[index]:.4g}, delta={d:g}")
            bar.update(1)
        rows.append(row)
    bar.close()
    return rows


def markdown(rows) -> str:
    lines = ["| divergence | tolerance | 1-d program: max discrepancy | where | "
             "full vocabulary: max discrepancy | where | solves | solver s | result |",
             "|---|---:|---:|---|---:|---|---:|---:|---|"]
    for r in rows:
        verdict = "pass" if r.passed else "FAIL"
        if r.failures:
            verdict += f" ({len(r.failures)} unverified)"
        lines.append(f"| `{r.divergence}` | {r.tolerance:.0e} | {r.band_max:.2e} | {r.band_where} "
                     f"| {r.simplex_max:.2e} | {r.simplex_where} | {r.solves} | "
                     f"{r.solver_seconds:.1f} | {verdict} |")
    return "\n".join(lines)


def main(args) -> int:
    start = time.perf_counter()
    rows = run(progress=not args.quiet)
    table = markdown(rows)
    print(table)
    for r in rows:
        for failure in r.failures[:3]:
            print(f"  unverified: {failure}")
    elapsed = time.perf_counter() - start
    ok = all(r.passed for r in rows)
    unverified = sum(len(r.failures) for r in rows)
    print(f"\n{'PASS' if ok else 'FAIL'}: {len(rows)} divergences, "
          f"{sum(r.solves for r in rows)} convex programs ({unverified} unverified), "
          f"{elapsed:.0f} s")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        header = ("# bandsolve verify\n\nThe numba backend against Clarabel's convex programs "
                  "(`bandsolve verify`). Discrepancy: |r_convex - r_fast| / max(|r_fast - 1|, "
                  f"1e-12).\n\nSweep: {len(P_SWEEP)} values of p from 1e-6 to 1, delta in "
                  f"{list(DELTA_SWEEP)}; full-vocabulary programs on peaked and near-uniform "
                  f"vocabularies of {list(VOCAB_SIZES)} tokens.\n\n")
        with open(os.path.join(args.out, "verify.md"), "w") as fh:
            fh.write(header + table + f"\n\n{'PASS' if ok else 'FAIL'} in {elapsed:.0f} s\n")
        with open(os.path.join(args.out, "verify.json"), "w") as fh:
            json.dump({"passed": ok, "seconds": elapsed,
                       "rows": [dict(dataclasses.asdict(r), passed=r.passed) for r in rows]},
                      fh, indent=2, default=float)
    return 0 if ok else 1


def add_subcommand(sub) -> None:
    parser = sub.add_parser("verify", help="check the fast bounds against convex programs",
                            description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="figures",
                        help="folder for verify.md and verify.json ('' for none)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=main)


