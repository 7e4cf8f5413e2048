"""CPU benchmark of the numpy API, with ratios against baselines run alongside.

    python benchmarks/bench_cpu.py [--n 1000000] [--repeat 5] [--out FILE.md]

1. Both KL bounds for n float64 probabilities against the paper's algorithm
   (``baseline.py``: bisection, 50 iterations, tol 1e-6, early exit).
2. Closed forms (tv, chi2, neyman_chi2, hellinger) against ``np.copy`` of the
   same array: the floor for any function that reads p and writes arrays.
3. Scaling of the KL bounds from 1e4 to 1e7 elements (time per element).

Timings are the best of ``--repeat`` runs after a warm-up (which compiles or
loads the numba cache); every ratio compares timings taken in this run.
Probabilities are log-uniform in [1e-6, 1], as token probabilities spread
over many decades; delta = 0.05 as in the paper's runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baseline import bisect_kl_band  # noqa: E402

import bandsolve as bs  # noqa: E402

DELTA = 0.05


def best_time(fn, repeat):
    fn()  # warm-up: numba compilation or cache load, page faults
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def probabilities(n, seed=0):
    return np.exp(np.random.default_rng(seed).uniform(np.log(1e-6), 0.0, n))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", help="also write the Markdown tables here")
    args = parser.parse_args(argv)
    lines = []

    def emit(text=""):
        print(text, flush=True)
        lines.append(text)

    import numba
    emit(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
         f"numba threads {numba.get_num_threads()}, numpy {np.__version__}, "
         f"numba {numba.__version__}")
    emit(f"n = {args.n:,}, delta = {DELTA}, best of {args.repeat} runs")
    emit()
    p = probabilities(args.n)

    t_base = best_time(lambda: bisect_kl_band(p, DELTA), max(1, args.repeat // 2))
    t_ours = best_time(lambda: bs.band(p, DELTA, "kl"), args.repeat)
    t_logp = best_time(lambda: bs.band_from_logp(np.log(p), DELTA, "kl"), args.repeat)
    lo_b, hi_b = bisect_kl_band(p, DELTA)
    lo, hi = bs.band(p, DELTA, "kl")
    emit("| KL, both bounds | time (ms) | vs bisection |")
    emit("|---|---:|---:|")
    emit(f"| bisection baseline (paper's algorithm) | {1e3 * t_base:.1f} | 1.0x |")
    emit(f"| `bandsolve.band` | {1e3 * t_ours:.1f} | {t_base / t_ours:.1f}x |")
    emit(f"| `bandsolve.band_from_logp` (incl. np.log) | {1e3 * t_logp:.1f} | "
         f"{t_base / t_logp:.1f}x |")
    emit()
    emit(f"Max |difference| from the baseline: lower {np.max(abs(lo - lo_b)):.2g}, "
         f"upper {np.max(abs(hi - hi_b)):.2g} (the baseline's tolerance is 1e-6 absolute).")
    emit()

    t_copy = best_time(lambda: np.copy(p), args.repeat)
    emit("| closed form | time (ms) | vs np.copy |")
    emit("|---|---:|---:|")
    emit(f"| `np.copy(p)` | {1e3 * t_copy:.2f} | 1.0x |")
    for name in ("tv", "chi2", "neyman_chi2", "hellinger"):
        t = best_time(lambda: bs.band(p, DELTA, name), args.repeat)
        emit(f"| `band(p, {DELTA}, '{name}')` | {1e3 * t:.2f} | {t / t_copy:.1f}x |")
    emit()

    # with out=: no allocation and no page faults, against a warm copyto of
    # the same array into a preallocated buffer (the two bounds are two writes)
    buffer, lower_out, upper_out = np.empty_like(p), np.empty_like(p), np.empty_like(p)
    t_copyto = best_time(lambda: np.copyto(buffer, p), args.repeat)
    emit("| closed form, preallocated `out=` | time (ms) | vs np.copyto |")
    emit("|---|---:|---:|")
    emit(f"| `np.copyto(buffer, p)` | {1e3 * t_copyto:.2f} | 1.0x |")
    for name in ("tv", "chi2", "neyman_chi2", "hellinger"):
        t = best_time(lambda: bs.band(p, DELTA, name, out=(lower_out, upper_out)), args.repeat)
        emit(f"| `band(p, {DELTA}, '{name}', out=...)` | {1e3 * t:.2f} | "
             f"{t / t_copyto:.1f}x |")
    emit()

    emit("| n | KL both bounds (ms) | ns per element | np.copy (ms) |")
    emit("|---:|---:|---:|---:|")
    for n in (10_000, 100_000, 1_000_000, 10_000_000):
        q = probabilities(n, seed=1)
        t = best_time(lambda: bs.band(q, DELTA, "kl"), 3)
        tc = best_time(lambda: np.copy(q), 3)
        emit(f"| {n:,} | {1e3 * t:.2f} | {1e9 * t / n:.0f} | {1e3 * tc:.2f} |")

    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
