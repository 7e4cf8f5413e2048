"""A new user's first call, per public path: a fresh process with an empty
numba cache (cold) against the same process with the cache it left (warm).

    python benchmarks/cold_start.py [--rounds 2] [--out FILE.md]

Each case is one fresh interpreter that imports bandsolve and makes one
call; the time is the whole process's wall time (interpreter start, imports,
compiles or cache loads, the call). Per round, each case runs once cold (a
new, empty ``NUMBA_CACHE_DIR``) and then once warm (the same folder again),
so cold and warm of a round see the same machine load. The table gives the
median over rounds with the lowest and highest in brackets; the ratio
compares the cold and warm runs of one round. ``--inside`` also prints what
the call alone took inside the process (the import excluded).

Targets (issue 33): ``band`` on 3 values <= 3x warm, on 2e5 values (the
fast path) <= 4x warm, and ``FastBand`` construction <= 2 s cold.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import Report  # noqa: E402

#: case -> (setup, timed call): the setup is outside the inner timing but
#: inside the process's wall time
CASES = {
    "import bandsolve.api": ("", "import bandsolve.api"),
    "band(p, 0.05) on 3 values": ("p = np.array([0.1, 0.5, 0.9])", "bs.band(p, 0.05)"),
    "band(p, 0.05) on 2e5 values": ("p = np.geomspace(1e-6, 1.0, 200_000)",
                                    "bs.band(p, 0.05)"),
    "band_from_logp(logp, 0.05) on 2e5 values": (
        "logp = np.log(np.geomspace(1e-6, 1.0, 200_000))", "bs.band_from_logp(logp, 0.05)"),
    "band(p, 0.05, 'tv') on 2e5 values": ("p = np.geomspace(1e-6, 1.0, 200_000)",
                                          "bs.band(p, 0.05, 'tv')"),
    "FastBand('kl', 0.05)": ("", "solver = bs.FastBand('kl', 0.05)"),
    "FastBand('kl', 0.05).band(p) on 1e6 values": (
        "p = np.geomspace(1e-6, 1.0, 1_000_000); solver = bs.FastBand('kl', 0.05)",
        "solver.band(p)"),
}

_PROBE = """
import json, time
import numpy as np
import bandsolve as bs
{setup}
start = time.perf_counter()
{call}
print(json.dumps({{"call": time.perf_counter() - start}}))
"""


def run_case(case, cache_dir):
    """(wall seconds of the whole process, seconds of the call inside it)."""
    setup, call = CASES[case]
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup, call=call)],
                         env=env, capture_output=True, text=True, check=True, timeout=900)
    wall = time.perf_counter() - start
    return wall, json.loads(out.stdout.strip().splitlines()[-1])["call"]


def spread(values, unit=""):
    return (f"{statistics.median(values):.2f}{unit} "
            f"[{min(values):.2f}-{max(values):.2f}]")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="run only this case (repeatable)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cases = args.case or list(CASES)
    emit = Report()

    emit(f"# cold_start: {args.rounds} rounds, {platform.processor() or platform.machine()}, "
         f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}")
    emit()
    results = {case: {"cold": [], "warm": [], "cold call": [], "warm call": []}
               for case in cases}
    for r in range(args.rounds):
        for case in cases:
            with tempfile.TemporaryDirectory(prefix="bandsolve-cold-") as cache_dir:
                for kind in ("cold", "warm"):
                    wall, call = run_case(case, cache_dir)
                    results[case][kind].append(wall)
                    results[case][kind + " call"].append(call)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    emit("| fresh process whose one call is | cold (s) | warm (s) | cold / warm | "
         "the call alone, cold (s) | the call alone, warm (s) |")
    emit("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        t = results[case]
        ratios = [c / w for c, w in zip(t["cold"], t["warm"])]
        emit(f"| `{case}` | {spread(t['cold'])} | {spread(t['warm'])} | {spread(ratios, 'x')} | "
             f"{spread(t['cold call'])} | {spread(t['warm call'])} |")
    emit()
    emit.finish(args.out)


if __name__ == "__main__":
    main()
