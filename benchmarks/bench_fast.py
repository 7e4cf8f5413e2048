"""The fast path (issue 20) against the paper's bisection and np.copyto, in one process.

    python benchmarks/bench_fast.py [--n 1000000] [--rounds 5] [--repeat 3] [--out FILE.md]

For each round, with 1 and with 2 threads (``numba.set_num_threads``; numpy's
bisection is single-threaded either way):

* the 50-iteration bisection of ``baseline.py`` (KL, both bounds);
* ``FastBand(div, 0.05).band(p, out=...)`` for kl, rkl, js and alpha:2, the
  table built once beforehand, and ``band(p, 0.05, div, out=...)`` (the
  root finder below the fast path's threshold, above it the tables of
  ``_solve.BAND_TABLES``, built in the warm-up call);
* the closed forms with ``out=`` against ``np.copyto`` into a buffer;
* the cost of a new delta (building the table, its warm-start grid
  included) and the share of elements that fell back to the root finder;
* where ``band()`` should switch to the fast path
  (``_solve.FAST_MIN_SIZE``): band() with the switch forced off and on, the
  tables built in the call (the first call with a delta) and cached, in the
  same round, from 2^15 to 2^21 elements;
* issue 33's targets at 1 thread, each a ratio per round, with a verdict;
* issue 41's: KL at 1 thread, ns per element and against the bisection.

Every ratio compares times from the same round; the table gives the median
over rounds with the lowest and highest in brackets. The scaling section
times kl from 1e4 to 1e7 elements at 1 and 2 threads. p is log-uniform in [1e-6, 1], delta 0.05.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys

import numba
import numpy as np
from _report import Report, best_time, probabilities, spread, verdict
from baseline import bisect_kl_band

import bandsolve as bs
from bandsolve import _solve
from bandsolve._kernels._bind import kernels_for

DELTA = 0.05
ROOT = ("kl", "rkl", "js", "alpha:2")
CLOSED = ("tv", "chi2", "hellinger")


def one_round(p, solvers, repeat, threads):
    numba.set_num_threads(threads)
    out = (np.empty_like(p), np.empty_like(p))
    buffer = np.empty_like(p)
    t = {"bisection": best_time(lambda: bisect_kl_band(p, DELTA), 1),
         "copyto": best_time(lambda: np.copyto(buffer, p), repeat)}
    for name, solver in solvers.items():
        t["fast " + name] = best_time(lambda: solver.band(p, out=out), repeat)
        t["band " + name] = best_time(lambda: bs.band(p, DELTA, name, out=out), repeat)
    for name in CLOSED:
        t["closed " + name] = best_time(lambda: bs.band(p, DELTA, name, out=out), repeat)
    return t


#: issue 33's targets at 1 thread: (what, the per-round figure, the limit,
#: "min" where the figure must reach the limit or "max" where it must stay below,
#: the unit)
TARGETS = (
    ("FastBand kl vs bisection", lambda x: x["bisection"] / x["fast kl"], 100.0, "min", "x"),
    ("band() kl / FastBand kl", lambda x: x["band kl"] / x["fast kl"], 1.1, "max", "x"),
    ("FastBand rkl vs bisection", lambda x: x["bisection"] / x["fast rkl"], 60.0, "min", "x"),
    ("FastBand js vs bisection", lambda x: x["bisection"] / x["fast js"], 60.0, "min", "x"),
    ("FastBand alpha:2 vs bisection", lambda x: x["bisection"] / x["fast alpha:2"], 30.0, "min", "x"),
    ("tv / np.copyto", lambda x: x["closed tv"] / x["copyto"], 3.0, "max", "x"),
    ("chi2 / np.copyto", lambda x: x["closed chi2"] / x["copyto"], 3.0, "max", "x"),
    ("hellinger / np.copyto", lambda x: x["closed hellinger"] / x["copyto"], 5.0, "max", "x"),
)


def verdicts(rounds, targets=TARGETS, digits=2):
    """One row per target: the median figure over rounds, its spread, and
    whether the median meets the target (else by how much it misses)."""
    rows = []
    for what, figure, limit, kind, unit in targets:
        values = [figure(x) for x in rounds]
        rows.append(f"| {what} | {spread(values, digits, unit)} | {'>=' if kind == 'min' else '<='} "
                    f"{limit:g}{unit} | {verdict(statistics.median(values), limit, kind == 'min')} |")
    return rows


def fallback_share(solver, p):
    """The share of elements the fast path left to the root finder."""
    lower, upper = np.empty_like(p), np.empty_like(p)
    status = np.empty(p.size, dtype=np.int8)
    flagged, _ = kernels_for(solver.divergence).band_fast(solver._tables, p, False, lower,
                                                          upper, status)
    return flagged / p.size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    emit = Report()

    p = probabilities(args.n)
    solvers = {name: bs.FastBand(name, DELTA) for name in ROOT}
    emit(f"# bench_fast: n = {args.n:,}, delta = {DELTA}, {args.rounds} rounds, "
         f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
         f"numba {numba.__version__}, numpy {np.__version__}, "
         f"load average at start {os.getloadavg()[0]:.2f}")
    emit()
    rounds = {1: [], 2: []}
    for r in range(args.rounds):
        for threads in (1, 2):
            rounds[threads].append(one_round(p, solvers, args.repeat, threads))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    numba.set_num_threads(2)

    for threads in (1, 2):
        t = rounds[threads]
        emit(f"## {threads} thread{'s' if threads > 1 else ''}: both bounds, speed-up over "
             "the 50-iteration bisection (KL)")
        emit()
        emit("| divergence | FastBand (ms, median) | vs bisection | band() (ms) | band() vs bisection "
             "| band() / FastBand |")
        emit("|---|---:|---:|---:|---:|---:|")
        for name in ROOT:
            fast = [x["bisection"] / x["fast " + name] for x in t]
            band = [x["bisection"] / x["band " + name] for x in t]
            over = [x["band " + name] / x["fast " + name] for x in t]
            emit(f"| {name} | {1e3 * statistics.median(x['fast ' + name] for x in t):.1f} | "
                 f"{spread(fast)} | {1e3 * statistics.median(x['band ' + name] for x in t):.1f} | "
                 f"{spread(band)} | {spread(over, 2)} |")
        emit(f"| (bisection itself) | {1e3 * statistics.median(x['bisection'] for x in t):.0f} | | | |")
        emit()
        emit("| closed form, `out=` | median (ms) | cost vs np.copyto |")
        emit("|---|---:|---:|")
        emit(f"| np.copyto | {1e3 * statistics.median(x['copyto'] for x in t):.2f} | 1.0x |")
        for name in CLOSED:
            emit(f"| {name} | {1e3 * statistics.median(x['closed ' + name] for x in t):.2f} | "
                 f"{spread([x['closed ' + name] / x['copyto'] for x in t])} |")
        emit()

    emit("## Issue 33's targets, 1 thread (median over rounds [lowest-highest])")
    emit()
    emit("| target | ratio | limit | verdict |")
    emit("|---|---:|---:|---|")
    for row in verdicts(rounds[1]):
        emit(row)
    emit()

    emit("## Issue 41's targets, 1 thread, KL, both bounds (median over rounds [lowest-highest])")
    emit()
    emit("| target | figure | limit | verdict |")
    emit("|---|---:|---:|---|")
    for row in verdicts(rounds[1], digits=1, targets=(
            ("ns per element", lambda x: 1e9 * x["fast kl"] / args.n, 17.0, "max", " ns"),
            ("vs the bisection", lambda x: x["bisection"] / x["fast kl"], 60.0, "min", "x"))):
        emit(row)
    emit()

    emit("## A new delta, and the fallback")
    emit()
    emit("| divergence | table build (ms, median of 5 deltas) | elements that fell back |")
    emit("|---|---:|---:|")
    for name in ROOT:
        builds_ms = [1e3 * bs.FastBand(name, d).build_seconds for d in (0.01, 0.02, 0.03, 0.04, 0.06)]
        emit(f"| {name} | {spread(builds_ms, unit='')} | {100 * fallback_share(solvers[name], p):.2f}% |")
    emit()

    emit("## band() on the fast path against the root finder, kl, 2 threads")
    emit()
    emit("| n | root finder (ms) | fast, tables built in the call (ms) | ratio | "
         "fast, tables from BAND_TABLES (ms) | ratio |")
    emit("|---:|---:|---:|---:|---:|---:|")
    threshold = _solve.FAST_MIN_SIZE
    try:
        for n in (1 << 15, 1 << 17, 1 << 18, 1 << 19, 1 << 21):
            q = probabilities(n, seed=2)
            out = (np.empty_like(q), np.empty_like(q))
            _solve.FAST_MIN_SIZE = 1 << 62
            root = best_time(lambda: bs.band(q, DELTA, "kl", out=out), args.repeat)
            _solve.FAST_MIN_SIZE = 0

            def cold():
                _solve.BAND_TABLES.clear()
                bs.band(q, DELTA, "kl", out=out)

            fresh = best_time(cold, args.repeat)
            cached = best_time(lambda: bs.band(q, DELTA, "kl", out=out), args.repeat)
            emit(f"| {n:,} | {1e3 * root:.2f} | {1e3 * fresh:.2f} | {root / fresh:.2f}x | "
                 f"{1e3 * cached:.2f} | {root / cached:.2f}x |")
    finally:
        _solve.FAST_MIN_SIZE = threshold
    emit()

    emit("## Scaling, kl, FastBand (ns per element, best of repeats)")
    emit()
    emit("| n | 1 thread | 2 threads |")
    emit("|---:|---:|---:|")
    for n in (10_000, 100_000, 1_000_000, 10_000_000):
        q = probabilities(n, seed=1)
        out = (np.empty_like(q), np.empty_like(q))
        per_element = []
        for threads in (1, 2):
            numba.set_num_threads(threads)
            seconds = best_time(lambda: solvers["kl"].band(q, out=out), args.repeat)
            per_element.append(f"{1e9 * seconds / n:.1f}")
        emit(f"| {n:,} | {' | '.join(per_element)} |")
    numba.set_num_threads(2)
    emit()
    emit.finish(args.out)


if __name__ == "__main__":
    main()
