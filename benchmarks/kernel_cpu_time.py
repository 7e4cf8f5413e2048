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
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np

import bandsolve as bs

DELTA = 0.05


def cpu_ms(fn, calls):
    fn()  # compile or load, fault the pages in
    times = []
    for _ in range(calls):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return round(1e3 * min(times), 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=7)
    args = parser.parse_args(argv)
    numba.set_num_threads(1)
    p = np.exp(np.random.default_rng(0).uniform(np.log(1e-6), 0.0, args.n))
    out = (np.empty_like(p), np.empty_like(p))
    result = {}
    for name in ("kl", "rkl", "js", "alpha:2"):
        solver = bs.FastBand(name, DELTA)
        result["FastBand " + name] = cpu_ms(lambda: solver.band(p, out=out), args.calls)
    for name in ("tv", "chi2", "hellinger"):
        result["band " + name] = cpu_ms(lambda: bs.band(p, DELTA, name, out=out), 2 * args.calls)
    buffer = np.empty_like(p)
    result["np.copyto"] = cpu_ms(lambda: np.copyto(buffer, p), 2 * args.calls)
    print(json.dumps({"bandsolve": bs.__file__, "ms": result}))


if __name__ == "__main__":
    main()
