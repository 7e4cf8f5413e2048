"""CPU time of the kernels on one thread: a comparison between two trees
that a loaded machine does not blur as much as wall time does.

    python benchmarks/kernel_cpu_time.py                 # this tree
    cd OTHER_TREE && PYTHONPATH=. python /path/to/kernel_cpu_time.py

Run it in each tree, alternating, and compare the lines. Per divergence, the
minimum ``time.process_time`` over ``--calls`` calls of
``FastBand(div, 0.05).band(p, out=...)`` (kl, rkl, js, alpha:2) and of
``band(p, 0.05, div, out=...)`` (tv, chi2, hellinger), and of ``np.copyto``
into a buffer, in ms; p is 1e6 float64, log-uniform in [1e-6, 1]. Only the
public API is used, so it runs on any tree that has ``FastBand``.

``--rounds R`` repeats the whole measurement R times in the process, with
``baseline.py``'s bisection (KL, both bounds, CPU time too) in each round,
and prints issue 41's figures per round: FastBand kl's ns per element and
its speed-up over the bisection, both in CPU time (what a loaded machine
does not inflate the way it inflates wall time), with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numba
import numpy as np
from _report import best_time, probabilities
from baseline import bisect_kl_band

import bandsolve as bs

DELTA = 0.05


def cpu_ms(fn, calls):
    return round(1e3 * best_time(fn, calls, clock=time.process_time), 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    numba.set_num_threads(1)
    p = probabilities(args.n)
    out = (np.empty_like(p), np.empty_like(p))
    solvers = {name: bs.FastBand(name, DELTA) for name in ("kl", "rkl", "js", "alpha:2")}
    buffer = np.empty_like(p)
    for _ in range(args.rounds):
        load = os.getloadavg()[0]
        result = {}
        for name, solver in solvers.items():
            result["FastBand " + name] = cpu_ms(lambda: solver.band(p, out=out), args.calls)
        for name in ("tv", "chi2", "hellinger"):
            result["band " + name] = cpu_ms(lambda: bs.band(p, DELTA, name, out=out),
                                            2 * args.calls)
        result["np.copyto"] = cpu_ms(lambda: np.copyto(buffer, p), 2 * args.calls)
        if args.rounds > 1:
            result["bisection"] = cpu_ms(lambda: bisect_kl_band(p, DELTA), 1)
            result["issue 41: FastBand kl ns per element"] = round(
                1e6 * result["FastBand kl"] / args.n, 1)
            result["issue 41: FastBand kl vs bisection"] = round(
                result["bisection"] / result["FastBand kl"], 1)
        print(json.dumps({"bandsolve": bs.__file__, "load": round(load, 2), "ms": result}))


if __name__ == "__main__":
    main()
