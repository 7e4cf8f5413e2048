"""CPU benchmark of the numpy API, with ratios against baselines run alongside.

    python benchmarks/bench_cpu.py [--n 1000000] [--repeat 5] [--rounds 3] [--out FILE.md]

1. Both KL bounds for n float64 probabilities against the paper's algorithm
   (``baseline.py``: bisection, 50 iterations, tol 1e-6, early exit).
2. Closed forms (tv, chi2, neyman_chi2, hellinger) against ``np.copy`` of the
   same array (the floor for any function that reads p and writes arrays),
   and with ``out=`` against ``np.copyto`` into a preallocated buffer, beside
   a numba parallel loop that only writes p into the two outputs (the floor
   for a kernel of that shape).
3. Scaling of the KL bounds from 1e4 to 1e7 elements (time per element).
4. First-call times: ``import bandsolve`` and a first ``band`` per divergence
   in a fresh process, cold (an empty numba cache: everything compiles) and
   warm (the cache the cold run wrote).

Timings are the best of ``--repeat`` runs after a warm-up (which compiles or
loads the numba cache); every ratio compares timings taken in the same
round. Sections 1 and 2 run ``--rounds`` times and report the median ratio
with the lowest and highest round, the run-to-run spread on a shared machine.
Probabilities are log-uniform in [1e-6, 1], as token probabilities spread
over many decades; delta = 0.05 as in the paper's runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import numba
import numpy as np
from _report import Report, best_time, probabilities, spread
from baseline import bisect_kl_band
from tqdm import tqdm

import bandsolve as bs

DELTA = 0.05


#: every built-in with a closed form (the registry's order)
CLOSED_FORMS = tuple(name for name, div in bs.BUILTIN_DIVERGENCES.items() if div.has_closed_form)

# A fresh interpreter's first call: the import, then one small band per
# divergence, each timed on its own.
_FIRST_CALL = """
import time
start = time.perf_counter()
import numpy as np
import bandsolve as bs
print("import", time.perf_counter() - start)
for name in {names!r}:
    start = time.perf_counter()
    bs.band(np.array([0.1, 0.5]), 0.05, name)
    print(name, time.perf_counter() - start)
"""
FIRST_CALL_DIVERGENCES = ("kl", "tv", "hellinger", "alpha:0.5", "js")


def first_call_times(cache_dir):
    """{what: seconds} from a fresh process using numba cache folder ``cache_dir``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    code = _FIRST_CALL.format(names=FIRST_CALL_DIVERGENCES)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}


@numba.njit(parallel=True)
def write_both(x, first, second):
    """A numba parallel loop that only writes p into two outputs: what any
    kernel of the same shape (one read, two writes, a thread launch) costs."""
    for i in numba.prange(x.size):
        first[i] = x[i]
        second[i] = x[i]


def one_round(p, repeat):
    """Times (seconds) of one round of sections 1 and 2."""
    t = {"bisection": best_time(lambda: bisect_kl_band(p, DELTA), max(1, repeat // 2)),
         "band kl": best_time(lambda: bs.band(p, DELTA, "kl"), repeat),
         "band_from_logp kl": best_time(lambda: bs.band_from_logp(np.log(p), DELTA, "kl"),
                                        repeat),
         "copy": best_time(lambda: np.copy(p), repeat)}
    for name in CLOSED_FORMS:
        t[name] = best_time(lambda: bs.band(p, DELTA, name), repeat)
    # with out=: no allocation and no page faults, against a warm copyto of
    # the same array into a preallocated buffer (the two bounds are two writes)
    buffer, lower_out, upper_out = np.empty_like(p), np.empty_like(p), np.empty_like(p)
    t["copyto"] = best_time(lambda: np.copyto(buffer, p), repeat)
    t["floor"] = best_time(lambda: write_both(p, lower_out, upper_out), repeat)
    for name in CLOSED_FORMS:
        t[name + " out"] = best_time(lambda: bs.band(p, DELTA, name, out=(lower_out, upper_out)),
                                     repeat)
    return t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="also write the Markdown tables here")
    args = parser.parse_args(argv)
    emit = Report()
    emit(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
         f"numba threads {numba.get_num_threads()}, numpy {np.__version__}, "
         f"numba {numba.__version__}")
    emit(f"n = {args.n:,}, delta = {DELTA}, best of {args.repeat} runs per round, "
         f"{args.rounds} rounds; ratios: median [lowest-highest round]")
    emit()
    p = probabilities(args.n)
    rounds = [one_round(p, args.repeat) for _ in tqdm(range(args.rounds), desc="rounds")]

    def ms(key):
        return f"{1e3 * statistics.median(r[key] for r in rounds):.2f}"

    def ratio(key, base, invert=False):
        return spread([(r[base] / r[key]) if invert else (r[key] / r[base]) for r in rounds])

    emit("| KL, both bounds | median time (ms) | vs bisection (speed-up) |")
    emit("|---|---:|---:|")
    emit(f"| bisection baseline (paper's algorithm) | {ms('bisection')} | 1.0x |")
    emit(f"| `bandsolve.band` | {ms('band kl')} | {ratio('band kl', 'bisection', True)} |")
    emit(f"| `bandsolve.band_from_logp` (incl. np.log) | {ms('band_from_logp kl')} | "
         f"{ratio('band_from_logp kl', 'bisection', True)} |")
    emit()
    lo_b, hi_b = bisect_kl_band(p, DELTA)
    lo, hi = bs.band(p, DELTA, "kl")
    emit(f"Max |difference| from the baseline: lower {np.max(abs(lo - lo_b)):.2g}, "
         f"upper {np.max(abs(hi - hi_b)):.2g} (the baseline's tolerance is 1e-6 absolute).")
    emit()

    emit("| closed form | median time (ms) | vs np.copy (cost) |")
    emit("|---|---:|---:|")
    emit(f"| `np.copy(p)` | {ms('copy')} | 1.0x |")
    for name in CLOSED_FORMS:
        emit(f"| `band(p, {DELTA}, '{name}')` | {ms(name)} | {ratio(name, 'copy')} |")
    emit()
    emit("| closed form, preallocated `out=` | median time (ms) | vs np.copyto (cost) |")
    emit("|---|---:|---:|")
    emit(f"| `np.copyto(buffer, p)` | {ms('copyto')} | 1.0x |")
    emit(f"| numba parallel loop writing p to both outputs (floor) | {ms('floor')} | "
         f"{ratio('floor', 'copyto')} |")
    for name in CLOSED_FORMS:
        emit(f"| `band(p, {DELTA}, '{name}', out=...)` | {ms(name + ' out')} | "
             f"{ratio(name + ' out', 'copyto')} |")
    emit()

    emit("| n | KL both bounds (ms) | ns per element | np.copy (ms) |")
    emit("|---:|---:|---:|---:|")
    for n in tqdm((10_000, 100_000, 1_000_000, 10_000_000), desc="scaling"):
        q = probabilities(n, seed=1)
        t = best_time(lambda: bs.band(q, DELTA, "kl"), 3)
        tc = best_time(lambda: np.copy(q), 3)
        emit(f"| {n:,} | {1e3 * t:.2f} | {1e9 * t / n:.0f} | {1e3 * tc:.2f} |")
    emit()

    with tempfile.TemporaryDirectory() as cache_dir:
        cold = first_call_times(cache_dir)
        warm = first_call_times(cache_dir)
    emit("| first call in a fresh process | cold: empty numba cache (s) | "
         "warm: cache on disk (s) |")
    emit("|---|---:|---:|")
    for key in cold:
        what = "`import bandsolve`" if key == "import" else f"first `band(p, 0.05, '{key}')`"
        emit(f"| {what} | {cold[key]:.2f} | {warm[key]:.3f} |")
    emit.write(args.out)


if __name__ == "__main__":
    main()
