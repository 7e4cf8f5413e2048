"""The studies' tables: one CSV writer, atomic, for every study's table, and
the markdown tables of the report and of a study's page."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence

from .._files import atomic_write

__all__ = ["history_rows", "markdown_table", "write_csv"]


def write_csv(path: str, header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """Write ``header`` and ``rows`` to ``path`` (its folder made if missing),
    atomically: a run stopped mid-write leaves the old file or the new one."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic_write(path, newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> list[str]:
    """A markdown table's lines (each cell as ``str`` writes it), then an empty line."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(x) for x in row) + " |" for row in rows), ""]


def history_rows(key: Sequence, history: dict, metrics: Sequence[str], first: int = 1):
    """One row per (seed, step) of a history ({metric: array (steps, seeds)}):
    ``key``, the seed, the step (counted from ``first``) and every metric to
    6 significant digits."""
    steps, seeds = history[metrics[0]].shape
    for s in range(seeds):
        for t in range(steps):
            yield [*key, s, t + first, *(f"{history[m][t, s]:.6g}" for m in metrics)]
