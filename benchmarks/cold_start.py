"""A new user's first call, per public path: a fresh process with empty caches
(cold) against the same process with the caches it left (warm).

    python benchmarks/cold_start.py [--rounds 3] [--case NAME ...] [--out FILE.md]

Each case is one fresh interpreter that imports what it needs and makes its
call (the CLI case runs the ``bandsolve`` command). Per round, each case
runs once cold (new, empty ``NUMBA_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR``)
and then once warm (the same folders again), so that cold and warm of a round
see the same machine load. Reported, as the median over rounds with the
lowest and highest in brackets:

* the process's CPU seconds (user + system of the child: what a shared
  machine's load does not inflate the way it inflates wall time) and its
  wall seconds;
* the call alone, inside the process: its CPU and wall seconds (the
  interpreter's start and the imports left out);
* cold / warm, of the process's CPU seconds in one round.

The load average is printed at the start of each round. Targets (issue 41)
are checked per round and printed with the worst round's figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from _report import Report, spread, verdict

_LOGP = "logp = -torch.rand(32768, generator=torch.Generator().manual_seed(0)) * 10 - 1e-6"

#: case -> (setup, timed call). The setup is outside the inner timing but
#: inside the process's figures; a setup of None runs the call as a command.
CASES = {
    "import bandsolve.api": ("import numpy as np", "import bandsolve.api"),
    "band(p, 0.05) on 3 values": ("import numpy as np, bandsolve as bs; "
                                  "p = np.array([0.1, 0.5, 0.9])", "bs.band(p, 0.05)"),
    "band(p, 0.05) on 2e5 values": ("import numpy as np, bandsolve as bs; "
                                    "p = np.geomspace(1e-6, 1.0, 200_000)", "bs.band(p, 0.05)"),
    "band_from_logp(logp, 0.05) on 2e5 values": (
        "import numpy as np, bandsolve as bs; logp = np.log(np.geomspace(1e-6, 1.0, 200_000))",
        "bs.band_from_logp(logp, 0.05)"),
    "band(p, 0.05, 'tv') on 2e5 values": ("import numpy as np, bandsolve as bs; "
                                          "p = np.geomspace(1e-6, 1.0, 200_000)",
                                          "bs.band(p, 0.05, 'tv')"),
    "FastBand('kl', 0.05) construction": ("import numpy as np, bandsolve as bs",
                                          "solver = bs.FastBand('kl', 0.05)"),
    "FastBand('kl', 0.05).band(p) on 1e6 values": (
        "import numpy as np, bandsolve as bs; p = np.geomspace(1e-6, 1.0, 1_000_000); "
        "solver = bs.FastBand('kl', 0.05)", "solver.band(p)"),
    "bandsolve bounds --p 0.08 0.5 0.9": (None, "bounds --p 0.08 0.5 0.9"),
    "torch band_from_logp, 32,768 float32 CPU tokens": (
        f"import torch, bandsolve.torch as bt; {_LOGP}", "bt.band_from_logp(logp, 0.05)"),
    "torch, then 1 token (a new batch size)": (
        f"import torch, bandsolve.torch as bt; {_LOGP}; bt.band_from_logp(logp, 0.05)",
        "bt.band_from_logp(logp[:1], 0.05)"),
    "plug-ins' band: BandSettings().bounds, 32,768 tokens": (
        f"import torch, bandsolve.torch as bt; {_LOGP}", "bt.BandSettings().bounds(logp)"),
}

#: (case, what is compared, limit, how the figure reads) for issue 41's targets
TARGETS = (
    ("bandsolve bounds --p 0.08 0.5 0.9", "cold process wall", 1.5, "s"),
    ("band(p, 0.05) on 3 values", "cold / warm", 2.0, "x"),
    ("band(p, 0.05) on 2e5 values", "cold / warm", 4.0, "x"),
    ("FastBand('kl', 0.05) construction", "cold call wall", 2.0, "s"),
    ("torch band_from_logp, 32,768 float32 CPU tokens", "cold call wall", 10.0, "s"),
    ("torch band_from_logp, 32,768 float32 CPU tokens", "warm call wall", 2.0, "s"),
    ("torch, then 1 token (a new batch size)", "cold call wall", 0.1, "s"),
)

_PROBE = """
import json, time
{setup}
start, cpu = time.perf_counter(), time.process_time()
{call}
print(json.dumps({{"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu}}))
"""


def run_case(case, cache_dir):
    """(process CPU s, process wall s, call CPU s, call wall s)."""
    setup, call = CASES[case]
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(cache_dir, "numba"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"))
    if setup is None:
        argv = [sys.executable, "-m", "bandsolve", *call.split()]
    else:
        argv = [sys.executable, "-c", _PROBE.format(setup=setup, call=call)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if setup is None:
        return cpu, wall, cpu, wall
    inner = json.loads(out.stdout.strip().splitlines()[-1])
    return cpu, wall, inner["cpu"], inner["wall"]


_FIGURES = ("process cpu", "process wall", "call cpu", "call wall")


def measure(cases, rounds, emit):
    """{case: {"cold process cpu": [...], ..., "warm call wall": [...]}}."""
    results = {case: {f"{kind} {figure}": [] for kind in ("cold", "warm") for figure in _FIGURES}
               for case in cases}
    for r in range(rounds):
        emit(f"round {r + 1}: load average {os.getloadavg()[0]:.2f}")
        for case in cases:
            with tempfile.TemporaryDirectory(prefix="bandsolve-cold-") as cache_dir:
                for kind in ("cold", "warm"):
                    for figure, value in zip(_FIGURES, run_case(case, cache_dir)):
                        results[case][f"{kind} {figure}"].append(value)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return results


def _figure(t, what):
    if what == "cold / warm":
        return [c / w for c, w in zip(t["cold process cpu"], t["warm process cpu"])]
    return t[what]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="run only this case (repeatable)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cases = args.case or list(CASES)
    emit = Report()
    emit(f"# cold_start: {args.rounds} rounds, {platform.processor() or platform.machine()}, "
         f"{os.cpu_count()} CPUs, python {platform.python_version()}")
    emit()
    results = measure(cases, args.rounds, emit)
    emit()
    emit("| fresh process whose one call is | cold: process CPU (s) | warm: process CPU (s) "
         "| cold / warm (CPU) | cold: process wall (s) | the call alone, cold: CPU / wall (s) "
         "| the call alone, warm: CPU / wall (s) |")
    emit("|---|---:|---:|---:|---:|---:|---:|")
    for case in cases:
        t = results[case]
        emit(f"| `{case}` | {spread(t['cold process cpu'], 2, '')} | "
             f"{spread(t['warm process cpu'], 2, '')} | {spread(_figure(t, 'cold / warm'), 2)} | "
             f"{spread(t['cold process wall'], 2, '')} | "
             f"{statistics.median(t['cold call cpu']):.2f} / "
             f"{statistics.median(t['cold call wall']):.2f} | "
             f"{statistics.median(t['warm call cpu']):.2f} / "
             f"{statistics.median(t['warm call wall']):.2f} |")
    emit()
    emit("| target (issue 41) | figure | limit | worst round | verdict |")
    emit("|---|---|---:|---:|---|")
    for case, what, limit, unit in TARGETS:
        if case not in results:
            continue
        worst = max(_figure(results[case], what))
        emit(f"| `{case}` | {what} | {limit:g}{unit} | {worst:.2f}{unit} | {verdict(worst, limit)} |")
    emit()
    emit.finish(args.out)


if __name__ == "__main__":
    main()
