"""What a table is: its grid, one bound's pieces (:class:`TableSide`) and the
whole certified table (:class:`BandTableData`). Data only, no computation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

ATOL = 1e-12
DEGREE = 5
# Octaves of d = |z - center|: [2^(e-1), 2^e) for e in [OCTAVE_MIN, OCTAVE_MAX],
# below them one uniform segment. 2^-25 = 3e-8 and 512 intervals per octave
# resolve the d log d shapes next to thresholds and the tails to 1e-12
# (tried: 256 per octave left 1e-5 for kl at delta = 1e-6); 2^11 = 2048 covers
# every float64 z = logit p (|z| < 745) whatever the center.
OCTAVE_MIN = -24
OCTAVE_MAX = 11
PER_OCTAVE = 512
SEGMENTS = OCTAVE_MAX - OCTAVE_MIN + 2
INTERVALS_PER_SIGN = SEGMENTS * PER_OCTAVE


class TableIntegrityError(ValueError):
    """A table file whose contents are not those that were certified: its
    checksum does not match, or its bounds disagree with the solver."""


@dataclasses.dataclass(frozen=True)
class TableSide:
    """One bound: y = log s on the octave grid around ``center``.

    ``threshold``: the upper bound is saturated for z >= threshold, the lower
    for z <= threshold (+inf / -inf: never, or always). With a finite
    threshold the grid is one-sided (the interior side of the center);
    without one, ``coefficients`` holds the side z >= center first, then
    z < center. ``coefficients[k, j]`` multiplies t^j in interval k.
    """

    center: float
    threshold: float
    coefficients: np.ndarray

    @property
    def two_sided(self) -> bool:
        return self.coefficients.shape[0] == 2 * INTERVALS_PER_SIGN


@dataclasses.dataclass(frozen=True)
class BandTableData:
    """A certified table of the band for one divergence and one delta."""

    divergence: str
    delta: float
    max_ratio: float  # inf for no cap
    upper: TableSide
    lower: TableSide
    lower_at_one: float  # the lower bound at p = 1 (a limit the grid only approaches)
    rtol: float
    atol: float = ATOL

    def describe(self) -> str:
        cap = "none" if self.max_ratio == math.inf else f"{self.max_ratio:g}"
        bound = f"{self.atol:g} max(r, 1)"
        if self.rtol > 0:
            bound = f"max({self.rtol:.2g} min(r, |r-1|), {bound})"
        return (f"Band-{self.divergence} table, delta={self.delta:g}, max_ratio={cap}, "
                f"{self.upper.coefficients.shape[0]} + {self.lower.coefficients.shape[0]} "
                f"intervals; certified |r_table - r| <= {bound} for p and 1 - p in "
                f"[1e-300, 1]")


def distance_nodes() -> np.ndarray:
    """The grid's nodes in d, from 0 to 2^OCTAVE_MAX (INTERVALS_PER_SIGN + 1)."""
    j = np.arange(PER_OCTAVE) / PER_OCTAVE
    parts = [j * 2.0 ** (OCTAVE_MIN - 1)]
    for e in range(OCTAVE_MIN, OCTAVE_MAX + 1):
        parts.append(2.0 ** (e - 1) * (1.0 + j))
    parts.append(np.array([2.0 ** OCTAVE_MAX]))
    return np.concatenate(parts)


def check_table(table) -> BandTableData:
    """``table`` if it is a :class:`BandTableData`, else a TypeError that names
    what to pass (a wrong object used to fail deep inside, as AttributeError)."""
    if not isinstance(table, BandTableData):
        raise TypeError("table must be a BandTableData (from bandsolve.table.build or "
                        f"bandsolve.table.load), got {type(table).__name__}")
    return table
