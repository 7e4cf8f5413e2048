"""The table evaluated, written once for any array library.

:func:`bounds` is the evaluation every backend runs: numpy here (for the
certificate and for readers of an exported file) and torch on the device
(``bandsolve.torch.BandTable``), each through an :class:`ArrayOps` of the few
operations it needs (frexp, where, floor, a gather, exp, expm1, log). So the
certificate checks the very code the device runs, not a copy of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validate import check_log_probability
from .data import (
    DEGREE,
    INTERVALS_PER_SIGN,
    OCTAVE_MIN,
    PER_OCTAVE,
    BandTableData,
    check_table,
)

__all__ = ["ArrayOps", "NUMPY_OPS", "bounds", "simplex_cap", "log_share", "evaluate_numpy"]


@dataclasses.dataclass(frozen=True)
class ArrayOps:
    """The operations the evaluation needs, from one array library.

    ``gather(coefficients, k)`` returns c with c[j] the t^j coefficient of
    interval k at every element, in the layout the library stores its
    coefficients in; ``to_index`` casts to int64; ``clamp(x, low, high)``
    takes Python numbers (None: no bound); ``eps(x)`` is the machine epsilon
    of x's dtype, a Python float."""

    frexp: Callable
    where: Callable
    floor: Callable
    abs: Callable
    exp: Callable
    expm1: Callable
    log: Callable
    isnan: Callable
    minimum: Callable
    clamp: Callable
    to_index: Callable
    gather: Callable
    eps: Callable


NUMPY_OPS = ArrayOps(
    frexp=np.frexp, where=np.where, floor=np.floor, abs=np.abs, exp=np.exp, expm1=np.expm1,
    log=np.log, isnan=np.isnan, minimum=np.minimum,
    clamp=lambda x, low, high: np.clip(x, low, high),
    to_index=lambda x: x.astype(np.int64),
    # coefficients as stored, (intervals, DEGREE + 1): rows, then one array per power
    gather=lambda coefficients, k: np.moveaxis(coefficients[k], -1, 0),
    eps=lambda x: float(np.finfo(x.dtype).eps))


def interval_of(ops: ArrayOps, distance):
    """(interval index, t in [0, 1)) of distances d >= 0 on one side's grid;
    d beyond the grid maps to the end of the last interval. Exact: d = m 2^e
    with m in [1/2, 1), and (2m - 1) PER_OCTAVE splits into the interval
    (integer part) and t (fraction)."""
    mantissa, exponent = ops.frexp(distance)
    in_octaves = (exponent >= OCTAVE_MIN) & (distance > 0.0)  # frexp(0) = (0, 0)
    # both products are by powers of two: exact
    position = ops.where(in_octaves, (2.0 * mantissa - 1.0) * PER_OCTAVE,
                         distance * (2.0 ** (1 - OCTAVE_MIN) * PER_OCTAVE))
    segment = ops.where(in_octaves, exponent - (OCTAVE_MIN - 1), 0)
    j = ops.floor(position)
    k = ops.to_index(segment) * PER_OCTAVE + ops.to_index(j)
    beyond = k >= INTERVALS_PER_SIGN
    # the index by a clamp, not where(beyond, last, k): torch.compile's AVX2
    # code (inductor, torch 2.13) selected the grid's end for every element
    # from that where on int64, and the gather then read out of bounds (a
    # crash, or wrong bounds: tests/test_torch_fused.py, AVX2 regression)
    return ops.clamp(k, None, INTERVALS_PER_SIGN - 1), ops.where(beyond, 1.0, position - j)


def log_share(ops: ArrayOps, side, z):
    """y = log s at z = logit p for one bound (a ``TableSide``, or the same
    fields with ``coefficients`` in ``ops``' layout)."""
    d = z - side.center
    k, t = interval_of(ops, ops.abs(d))
    # two_sided is a bool, or (torch, bandsolve.torch.device_table) a 0/1
    # integer tensor beside coefficients padded to both signs: the choice as
    # data, so that one compiled graph serves every table
    if side.two_sided is not False:
        k = k + ops.to_index(d < 0.0) * (INTERVALS_PER_SIGN * side.two_sided)
    # NaN z casts to an arbitrary integer: keep every gather in bounds
    last = (1 if side.two_sided is False else 2) * INTERVALS_PER_SIGN - 1
    c = ops.gather(side.coefficients, ops.clamp(k, 0, last))
    y = c[DEGREE]
    for j in range(DEGREE - 1, -1, -1):
        y = y * t + c[j]
    return ops.clamp(y, None, 0.0)


def simplex_cap(ops: ArrayOps, logp, p=None):
    """At most e^(-log p), the cap 1/p, and within a few ulp of it; from p
    itself where given: from log p rounded in float32 (band(p) in torch),
    e^(-log p) was up to 16 ulp off 1/p, either way.

    exp rounds to nearest (ATen's and inductor's float32 exp within an ulp),
    so fl(e^(-log p)) could exceed 1/p and an upper bound at the cap broke
    r <= 1/p by up to an ulp. Times (1 - 2 eps) it is 1 to 4 ulp below,
    never below 1 (the cap at p = 1 is 1 exactly); inf stays inf. The
    float64 root finder caps the same way (``simplex_cap_from_logp``)."""
    cap = ops.exp(-logp) if p is None else 1.0 / p
    # within an ulp of the cap, times (1 - 2 eps): 1 to 4 ulp below it, and
    # at least 1 (1/p >= 1); inf, a cap past the dtype's range, stays inf
    return ops.clamp(cap * (1.0 - 2.0 * ops.eps(cap)), 1.0, None)


def bounds(ops: ArrayOps, lower_side, upper_side, logp, q, *, lower_at_one: float,
           max_ratio: float, p=None):
    """(lower, upper) from log p and q = 1 - p (both given, so that p near 1
    keeps its digits whichever the caller has), and p itself where the caller
    has it (the cap 1/p is then taken from p, not from a rounded log p).

    upper: r = 1 + e^y (1 - p) / p below its threshold, 1/p beyond; lower:
    r = -expm1(y) above its threshold, 0 beyond (see ``bandsolve.table``).
    Invalid input (NaN, +inf, log p > 0, p outside [0, 1]) makes z NaN:
    both bounds say so rather than a number."""
    # z = logit p; clamped so that p = 0 and p = 1 stay finite in the tails
    z = ops.clamp(logp - ops.log(q), -1e30, 1e30)
    inv_p = simplex_cap(ops, logp, p)
    upper = ops.minimum(1.0 + ops.exp(log_share(ops, upper_side, z) - logp) * q, inv_p)
    upper = ops.where(z >= upper_side.threshold, inv_p, upper)
    upper = ops.where(logp == -math.inf, math.inf, upper)
    if not (isinstance(max_ratio, float) and max_ratio == math.inf):
        # a float cap, or a 0-dim tensor (inf for none: the clamp is then exact)
        upper = ops.clamp(upper, None, max_ratio)
    lower = ops.where(z <= lower_side.threshold, 0.0,
                      0.0 - ops.expm1(log_share(ops, lower_side, z)))
    lower = ops.where(q == 0.0, lower_at_one, lower)
    # p = 0 is the limit the grid only approaches (z clamped): exactly 0,
    # as in the numpy API
    lower = ops.where(logp == -math.inf, 0.0, lower)
    invalid = ops.isnan(z)
    return ops.where(invalid, math.nan, lower), ops.where(invalid, math.nan, upper)


#: A table is certified for p and 1 - p down to this; only a float64 log p
#: can come closer to 0 (1 - p = 5e-324 at log p = -5e-324), where the table
#: extrapolates its last interval (rkl at delta 10: off by 6e-6).
CERTIFIED_ONE_MINUS_P = 1e-300


def beyond_certified_range(logp):
    """Where 1 - p < 1e-300 but p < 1: log p in (-1e-300, 0) (numpy or torch)."""
    return (logp > -CERTIFIED_ONE_MINUS_P) & (logp < 0.0)


def evaluate_numpy(table: BandTableData, logp: ArrayLike, *, validate: bool = True
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(lower, upper) from the table in float64 numpy (for certification and
    for readers of an exported file; the device path is ``bandsolve.torch``,
    the same :func:`bounds`).

    Within the table's certificate of the float64 root finder, plus 8 eps
    max(r, 1) (see "Accuracy of a float64 table" in ``bandsolve.table``).
    ``validate`` (default True) refuses what the table cannot answer, as
    ``BandTable(validate=True)`` does: NaN, +inf, log p > 0, and log p within
    1e-300 of 0 (outside the certified range). With ``validate=False`` those
    give what the device gives: NaN, or the extrapolated last interval."""
    check_table(table)
    if validate:
        _check_inside_certified_range(check_log_probability(logp))
    logp = np.asarray(logp, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return bounds(NUMPY_OPS, table.lower, table.upper, logp, -np.expm1(logp),
                      lower_at_one=table.lower_at_one, max_ratio=table.max_ratio)


def _check_inside_certified_range(logp: np.ndarray) -> None:
    outside = beyond_certified_range(logp)
    if outside.any():
        raise ValueError(
            f"logp has {int(outside.sum())} elements within 1e-300 of 0 (1 - p below "
            f"1e-300, the first {float(logp.reshape(-1)[np.flatnonzero(outside)[0]])!r}): "
            "outside the range a table is certified for; bandsolve.band_from_logp "
            "solves them")
