"""What the benchmark scripts share: their input, their timing loop, the
spread and verdict of a per-round figure, and a markdown report printed as it
comes and written to a file at the end, with the machine's load where the
script reports it, so a loaded run says so."""

from __future__ import annotations

import os
import pathlib
import statistics
import time


def probabilities(n, seed=0):
    """n probabilities log-uniform in [1e-6, 1], as token probabilities spread
    over many decades."""
    # numpy is imported here: the scripts that time fresh processes leave it
    # out of theirs, as a child's peak memory (max RSS) starts at its parent's
    import numpy as np

    return np.exp(np.random.default_rng(seed).uniform(np.log(1e-6), 0.0, n))


def best_time(fn, repeat, clock=time.perf_counter):
    """The fastest of ``repeat`` calls of ``fn``, in seconds of ``clock``."""
    fn()  # warm-up: numba compilation or cache load, page faults
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def spread(values, digits=1, unit="x"):
    """'median [lowest-highest]' of a figure over rounds, the unit after the median."""
    return (f"{statistics.median(values):.{digits}f}{unit} "
            f"[{min(values):.{digits}f}-{max(values):.{digits}f}]")


def verdict(figure, limit, at_least=False, digits=2):
    """'met' where ``figure`` keeps to ``limit`` (stays at or below it, or
    reaches it where ``at_least``), else by what factor it misses."""
    met = figure >= limit if at_least else figure <= limit
    if met:
        return "met"
    return f"missed by {limit / figure if at_least else figure / limit:.{digits}f}x"


class Report:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def write(self, out: str | None) -> None:
        """The report so far, written to ``out`` where given."""
        if out:
            pathlib.Path(out).write_text("\n".join(self.lines) + "\n")

    def finish(self, out: str | None) -> None:
        """The closing load line, and the report written to ``out`` where given."""
        self(f"load average at the end {os.getloadavg()[0]:.2f}")
        self.write(out)
