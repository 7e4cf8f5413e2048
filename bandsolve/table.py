"""Bound tables: the band for one (divergence, delta) as a certified spline.

A trainer that runs one divergence and one delta for a whole run can skip the
solver: the bounds are smooth functions of z = logit p, apart from the
saturation thresholds, so a piecewise polynomial in z reproduces them at the
cost of a gather and a few multiply-adds per element. ``bandsolve.torch``
evaluates these tables on the device; ``bandsolve export`` writes them to a
file for trainers in other frameworks.

What is tabulated
-----------------
For each bound, y(z) = log s, where s is the bound's margin as a share of the
room the simplex leaves it:

* upper: s = m / (1 - p) with m = p (r - 1), so r = 1 + s (1 - p) / p;
* lower: s = 1 - r, so r = -expm1(y).

y <= 0 is smooth where the bound is interior, tends to 0 at a saturation
threshold (s = 1; like a power of the distance to it, or d log d) and is close
to linear in both tails. Beyond its threshold a bound is saturated exactly
(r = 1/p or r = 0); the file stores the threshold to the last bit.

The grid: octaves of the distance to a center
----------------------------------------------
With d = |z - center| (the center is the threshold, or 0 where there is
none), the grid is uniform within each octave [2^(e-1), 2^e) of d, with
``PER_OCTAVE`` intervals, for e from ``OCTAVE_MIN`` to ``OCTAVE_MAX``, plus
one uniform segment [0, 2^(OCTAVE_MIN - 1)). So nodes are dense where y
bends (next to a threshold) and sparse in the nearly linear tails, and the
interval of an element and its position in it come from ``frexp(d)`` with
no rounding at all: ``d = m 2^e`` with m in [1/2, 1), and (2m - 1)
PER_OCTAVE splits into the interval (integer part) and the local coordinate
t in [0, 1) (fraction), both exact in float32 as in float64. Each interval
holds the quintic spline's piece as coefficients of t^0 .. t^5.

Certificate
-----------
``build`` checks the table against the float64 root finder at four points
inside every interval and at both ends of the range (p and 1 - p from 1e-300
to 1), evaluating the table as the devices do (from log p, in float64), and
stores the smallest ``rtol`` with

    |r_table - r| <= max(rtol * min(r, |r - 1|), atol * max(r, 1))

at every point checked, atol = 1e-12. That is a dense check, not a proof:
between the points the spline and the bound are both smooth.

Accuracy of a float64 table (``evaluate_numpy``, ``BandTable`` in float64 on
any device, ``bandsolve.torch`` float64 off the CPU), against the float64 root
finder r = ``bandsolve.band_from_logp`` at the same log p, with the table's
stored certificate:

    |r_table - r| <= max(rtol * min(r, |r - 1|), atol * max(r, 1)) + 8 eps * max(r, 1)

(rtol = 0 and atol = 1e-12 for the built-in divergences at delta from 1e-6
to 10; against the exact bound add the root finder's own
max(1e-12 min(r, |r-1|), 4 eps max(r, 1))). The float64 evaluation's own
rounding is inside the certificate, since the check evaluates the table as
the devices do; the 8 eps allow for a device whose exp, log and expm1 round
differently. Measured at 10^5 random log p per table (tails and threshold
neighbourhoods included), the worst error is 0.23 of the certificate, and
moving every exp / log / expm1 result by 2 ulp or evaluating Horner's rule
without rounding changes it by under 0.002 of it. A float32 evaluation is
within max(1e-5 min(r, |r-1|), 16 eps32 max(r, 1)) of the float64 root finder
at the same float32 input for log p >= -80 (worst measured: 0.56 of that).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.interpolate import make_interp_spline

from . import _validate, api
from ._kernels._bind import kernels_for
from .divergences import Divergence, DivergenceLike, get_divergence

__all__ = ["TableSide", "BandTableData", "TableIntegrityError", "build", "save", "load",
           "evaluate_numpy", "to_arrays", "from_arrays", "check_against_solver", "ATOL"]

FORMAT = "bandsolve.table"
# 2: a sha256 checksum of every field (version 1 had none and is refused)
FORMAT_VERSION = 2
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
# The solver's range: sigmoid(-745) is the smallest subnormal.
_Z_EDGE = 745.0
# Certified for p and 1 - p down to 1e-300, the numpy core's own range: the
# check points reach |logit p| = -log(1e-300) = 690.78, the range's edge
_CERTIFIED_Z = -math.log(1e-300)
_EPS = float(np.finfo(np.float64).eps)


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


def _distance_nodes() -> np.ndarray:
    """The grid's nodes in d, from 0 to 2^OCTAVE_MAX (INTERVALS_PER_SIGN + 1)."""
    j = np.arange(PER_OCTAVE) / PER_OCTAVE
    parts = [j * 2.0 ** (OCTAVE_MIN - 1)]
    for e in range(OCTAVE_MIN, OCTAVE_MAX + 1):
        parts.append(2.0 ** (e - 1) * (1.0 + j))
    parts.append(np.array([2.0 ** OCTAVE_MAX]))
    return np.concatenate(parts)


def interval_of(d: np.ndarray):
    """(interval index, t in [0, 1)) of distances d >= 0 on one side's grid;
    d beyond the grid maps to the end of the last interval. Exact."""
    mantissa, exponent = np.frexp(d)
    in_octaves = (exponent >= OCTAVE_MIN) & (d > 0.0)  # frexp(0) = (0, 0)
    position = np.where(in_octaves, (2.0 * mantissa - 1.0) * PER_OCTAVE,
                        d * (2.0 ** (1 - OCTAVE_MIN) * PER_OCTAVE))  # exact
    segment = np.where(in_octaves, exponent - OCTAVE_MIN + 1, 0)
    j = np.floor(position)
    k = segment * PER_OCTAVE + j.astype(np.int64)
    t = position - j
    beyond = k >= INTERVALS_PER_SIGN
    return np.where(beyond, INTERVALS_PER_SIGN - 1, k), np.where(beyond, 1.0, t)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log sigmoid(x) = -log(1 + e^-x), exactly; NaN stays NaN. It gives log s
    from the solver's x = logit s, and log p from z = logit p."""
    with np.errstate(invalid="ignore"):
        return -np.logaddexp(0.0, -x)


def _interval_coefficients(spline, z_left, z_right) -> np.ndarray:
    """Coefficients of t^0..t^5 for the spline on each [z_left, z_right]
    (t = 0 at z_left; z_right may lie below z_left), from its Taylor
    expansion at the midpoint, which lies inside one polynomial piece."""
    mid = 0.5 * (z_left + z_right)
    width = z_right - z_left
    # about the midpoint, in u = t - 1/2: a_j = y^(j)(mid) width^j / j!
    a = np.stack([spline(mid, nu=j) * width ** j / math.factorial(j)
                  for j in range(DEGREE + 1)], axis=1)
    # (t - 1/2)^j = sum_i C(j, i) t^i (-1/2)^(j - i)
    shift = np.zeros((DEGREE + 1, DEGREE + 1))
    for j in range(DEGREE + 1):
        for i in range(j + 1):
            shift[j, i] = math.comb(j, i) * (-0.5) ** (j - i)
    return a @ shift


def _fit_side(div: Divergence, delta: float, upper: bool) -> TableSide:
    threshold = float(kernels_for(div).saturation_threshold(upper, delta))
    if threshold == (-math.inf if upper else math.inf):  # always saturated: never read
        return TableSide(center=0.0, threshold=threshold,
                         coefficients=np.zeros((INTERVALS_PER_SIGN, DEGREE + 1)))
    d = _distance_nodes()
    if math.isfinite(threshold):
        center = threshold
        signs: tuple[float, ...] = (-1.0,) if upper else (1.0,)  # the interior side
    else:
        center = 0.0
        signs = (1.0, -1.0)
    z_all = np.unique(np.concatenate([center + sign * d for sign in signs]))
    z_solve = np.clip(z_all, -_Z_EDGE, _Z_EDGE)
    x_upper = np.empty(z_all.size)
    x_lower = np.empty(z_all.size)
    kernels_for(div).margins_at(np.ascontiguousarray(z_solve), delta, x_upper, x_lower)
    y = _log_sigmoid(x_upper if upper else x_lower)
    # At the threshold s = 1 exactly; the solver reports that node (and maybe
    # its neighbour, by rounding) as saturated, NaN.
    y[~np.isfinite(y)] = 0.0
    spline = make_interp_spline(z_all, y, k=DEGREE)
    coefficients = np.concatenate([
        _interval_coefficients(spline, center + sign * d[:-1], center + sign * d[1:])
        for sign in signs])
    return TableSide(center=center, threshold=threshold,
                     coefficients=np.ascontiguousarray(coefficients))


def _side_numpy(side: TableSide, z: np.ndarray) -> np.ndarray:
    """y = log s at z (float64, numpy): the device evaluation, line for line."""
    d = z - side.center
    k, t = interval_of(np.abs(d))
    if side.two_sided:
        k = k + np.where(d < 0.0, INTERVALS_PER_SIGN, 0)
    c = side.coefficients[k]
    y = c[:, DEGREE]
    for j in range(DEGREE - 1, -1, -1):
        y = y * t + c[:, j]
    return np.minimum(y, 0.0)


def evaluate_numpy(table: BandTableData, logp: ArrayLike
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(lower, upper) from the table in float64 numpy (for certification and
    for readers of an exported file; the device path is ``bandsolve.torch``).

    Within the table's certificate of the float64 root finder, plus 8 eps
    max(r, 1) (see "Accuracy of a float64 table" above)."""
    logp = np.asarray(logp, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        q = -np.expm1(logp)
        z = np.clip(logp - np.log(q), -1e300, 1e300)
        inv_p = np.exp(-logp)
        y_hi = _side_numpy(table.upper, z)
        upper = np.where(z >= table.upper.threshold, inv_p,
                         np.minimum(1.0 + np.exp(y_hi - logp) * q, inv_p))
        upper = np.where(logp == -np.inf, np.inf, upper)
        upper = np.minimum(upper, table.max_ratio)
        y_lo = _side_numpy(table.lower, z)
        lower = np.where(z <= table.lower.threshold, 0.0, 0.0 - np.expm1(y_lo))
        lower = np.where(q == 0.0, table.lower_at_one, lower)
    return lower, upper


def _check_points(table: BandTableData) -> np.ndarray:
    """Four points in every interval of both grids, and the far tails."""
    d = _distance_nodes()
    frac = np.array([0.125, 0.375, 0.625, 0.875])
    inside = np.concatenate([(d[:-1, None] + frac * np.diff(d)[:, None]).ravel(), d])
    points = [np.geomspace(1.0, _CERTIFIED_Z, 200), -np.geomspace(1.0, _CERTIFIED_Z, 200)]
    for side in (table.upper, table.lower):
        points += [side.center + inside, side.center - inside]
    z = np.concatenate(points)
    return np.concatenate([z[np.abs(z) <= _CERTIFIED_Z], [-np.inf, np.inf]])


def _certify(table: BandTableData, div: Divergence) -> float:
    logp = _log_sigmoid(_check_points(table))
    lower, upper = evaluate_numpy(table, logp)
    ref_lower, ref_upper = api.band_from_logp(logp, table.delta, div,
                                              max_ratio=table.max_ratio)
    worst = 0.0
    for got, ref in ((lower, ref_lower), (upper, ref_upper)):
        finite = np.isfinite(ref)
        if np.any(got[~finite] != ref[~finite]):
            return math.inf
        r, g = ref[finite], got[finite]
        error = np.abs(g - r)
        beyond_floor = error > ATOL * np.maximum(r, 1.0)
        if np.any(beyond_floor):
            scale = np.minimum(r, np.abs(r - 1.0))[beyond_floor]
            # an error at r = 1 exactly (or at a subnormal distance): rtol inf
            with np.errstate(divide="ignore", over="ignore"):
                worst = max(worst, float(np.max(error[beyond_floor] / scale)))
    return worst


def build(divergence: DivergenceLike = "kl", delta: float = 0.05, *,
          max_ratio: float | None = None) -> BandTableData:
    """Tabulate and certify the band of ``divergence`` at radius ``delta``.

    Parameters
    ----------
    divergence : str or Divergence
    delta : float
        Trust-region radius, > 0.
    max_ratio : float, optional
        Cap on the upper bound, >= 1.

    Raises
    ------
    TypeError, ValueError
        As :func:`bandsolve.band` for delta, max_ratio and the divergence;
        ValueError for an array delta, and where the certificate is not
        finite (the table misses the root finder without bound somewhere,
        e.g. kl at a subnormal delta), so that no table certifies nothing.
    """
    div = get_divergence(divergence)
    delta_arr = _validate.check_delta(delta)
    if delta_arr.ndim != 0:
        raise ValueError(f"a table holds one delta; got an array of shape {delta_arr.shape}")
    cap = float(_validate.check_max_ratio(max_ratio))
    d = float(delta_arr)
    draft = BandTableData(divergence=div.name, delta=d, max_ratio=cap,
                          upper=_fit_side(div, d, True), lower=_fit_side(div, d, False),
                          lower_at_one=float(api.band(1.0, d, div)[0]), rtol=math.nan)
    rtol = _certify(draft, div)
    if not math.isfinite(rtol):
        raise ValueError(f"the table of {div.name} at delta={d!r} cannot be certified: it "
                         "misses the root finder without bound at some checked point "
                         "(certified exactly for delta from 1e-6 to 10); use the numpy "
                         "API bandsolve.band for this delta")
    return dataclasses.replace(draft, rtol=rtol)


_SIDE_FIELDS = ("center", "threshold")
_GRID = {"octave_min": OCTAVE_MIN, "octave_max": OCTAVE_MAX, "per_octave": PER_OCTAVE}


def to_arrays(table: BandTableData) -> dict:
    """The table as a flat dict of numpy arrays and scalars (the file layout),
    with ``checksum``: the sha256 of every other field (see :func:`checksum`)."""
    out = {"format": np.array(FORMAT), "format_version": np.array(FORMAT_VERSION),
           "divergence": np.array(table.divergence), "delta": np.array(table.delta),
           "max_ratio": np.array(table.max_ratio), "rtol": np.array(table.rtol),
           "lower_at_one": np.array(table.lower_at_one),
           "atol": np.array(table.atol), **{k: np.array(v) for k, v in _GRID.items()}}
    for name in ("upper", "lower"):
        side = getattr(table, name)
        out[f"{name}_coefficients"] = side.coefficients
        for field in _SIDE_FIELDS:
            out[f"{name}_{field}"] = np.array(getattr(side, field))
    out["checksum"] = np.array(checksum(out))
    return out


def checksum(arrays) -> str:
    """sha256, in hex, of every field but ``checksum``: names in sorted order,
    each with its dtype, shape and little-endian bytes, so that the digest
    is the same for the .npz and the .pt layout and on any machine."""
    digest = hashlib.sha256()
    for name in sorted(k for k in arrays if k != "checksum"):
        value = np.asarray(arrays[name])
        if value.dtype.kind in "US":
            data = str(value).encode()
            kind = "str"
        else:
            canonical = value.astype(value.dtype.newbyteorder("<"), copy=False)
            data = np.ascontiguousarray(canonical).tobytes()
            kind = canonical.dtype.kind + str(canonical.dtype.itemsize)
        digest.update(f"{name}:{kind}:{value.shape}:".encode())
        digest.update(data)
    return digest.hexdigest()


def from_arrays(arrays: Mapping[str, np.ndarray], *, source: str = "the table") -> BandTableData:
    """Inverse of :func:`to_arrays`. ValueError for anything that is not a
    table of this format version; TableIntegrityError when the checksum
    does not match the fields (``source`` names the file in the message)."""
    try:
        if str(arrays["format"]) != FORMAT:
            raise ValueError(f"not a bandsolve table (format {str(arrays['format'])!r})")
        version = int(arrays["format_version"])
        if version != FORMAT_VERSION:
            raise ValueError(f"{source} has table format version {version}; this bandsolve "
                             f"reads version {FORMAT_VERSION} (version 1 files carry no "
                             "checksum: export the table again with bandsolve export)")
        if str(arrays["checksum"]) != checksum(arrays):
            raise TableIntegrityError(
                f"{source} was modified or corrupted: its checksum does not match its "
                "contents, so its bounds are not the ones that were certified. Export "
                "the table again with bandsolve export")
        for field, expected in _GRID.items():
            if int(arrays[field]) != expected:
                raise ValueError(f"table grid {field} = {int(arrays[field])}; this bandsolve "
                                 f"reads {expected}")
        sides = {}
        for name in ("upper", "lower"):
            coefficients = np.ascontiguousarray(arrays[f"{name}_coefficients"], dtype=np.float64)
            if coefficients.ndim != 2 or coefficients.shape[1] != DEGREE + 1 or \
                    coefficients.shape[0] not in (INTERVALS_PER_SIGN, 2 * INTERVALS_PER_SIGN):
                raise ValueError(f"{name} coefficients have shape {coefficients.shape}")
            sides[name] = TableSide(coefficients=coefficients,
                                    **{f: float(arrays[f"{name}_{f}"]) for f in _SIDE_FIELDS})
        scalars = {}
        for field in ("delta", "max_ratio", "lower_at_one", "rtol", "atol"):
            value = np.asarray(arrays[field])
            if value.shape != () or value.dtype.kind != "f":
                raise TableIntegrityError(f"{source}: field {field!r} is not a float scalar "
                                          f"(shape {value.shape}, dtype {value.dtype})")
            scalars[field] = float(value)
        _check_metadata(scalars, source)
        return BandTableData(divergence=str(arrays["divergence"]), delta=scalars["delta"],
                             max_ratio=scalars["max_ratio"],
                             lower_at_one=scalars["lower_at_one"], rtol=scalars["rtol"],
                             atol=scalars["atol"], upper=sides["upper"], lower=sides["lower"])
    except KeyError as exc:
        raise ValueError(f"not a bandsolve table: no field {exc}") from None


#: the range a stored certificate tolerance can have at all; whether it is
#: the honest one is checked by rebuilding it (load with verify=True)
MAX_STORED_TOLERANCE = 1.0


def _check_metadata(scalars: dict, source: str) -> None:
    """Every stored number inside the range a table built here can have."""
    delta, cap = scalars["delta"], scalars["max_ratio"]
    if not (np.isfinite(delta) and delta >= np.finfo(np.float64).tiny):
        raise TableIntegrityError(f"{source}: delta {delta!r} is not a positive normal float")
    if not cap >= 1.0:
        raise TableIntegrityError(f"{source}: max_ratio {cap!r} is below 1")
    for field in ("rtol", "atol"):
        value = scalars[field]
        if not 0.0 <= value <= MAX_STORED_TOLERANCE:
            raise TableIntegrityError(f"{source}: its certificate {field} = {value!r} lies "
                                      f"outside [0, {MAX_STORED_TOLERANCE:g}]: no table built "
                                      "by bandsolve carries it")
    if not 0.0 <= scalars["lower_at_one"] <= 1.0:
        raise TableIntegrityError(f"{source}: lower_at_one {scalars['lower_at_one']!r} lies "
                                  "outside [0, 1]")


def check_against_solver(table: BandTableData, divergence: DivergenceLike | None = None, *,
                         source: str = "the table",
                         seed: int | None = None) -> None:
    """Re-check a sample of the table against the float64 root finder.

    One point in every interval of both grids, at a position drawn from
    ``seed`` (None: fresh each call, so that a rewritten interval cannot
    hide between points known in advance), both
    thresholds and the tails; about 0.1 s. Every bound must lie within
    twice the table's own certificate, max(rtol min(r, |r-1|), atol max(r, 1)),
    plus 8 eps max(r, 1) for the evaluation's rounding: the certificate was
    measured at fixed points, and fresh points may exceed it slightly (a user
    generator's solves carry about 1e-10 of noise of their own). A file
    changed by more than that is refused.

    Raises
    ------
    TableIntegrityError
        At the first bound beyond that, naming the interval, log p and both values.
    ValueError
        If the divergence cannot be resolved by its stored name (a
        user-defined one): pass ``divergence=``.
    """
    div = _table_divergence(table, divergence, source)
    rng = np.random.default_rng(seed)
    d = _distance_nodes()
    offsets = d[:-1] + rng.uniform(0.05, 0.95, d.size - 1) * np.diff(d)
    pieces = [np.geomspace(1.0, _CERTIFIED_Z, 32), -np.geomspace(1.0, _CERTIFIED_Z, 32)]
    for side in (table.upper, table.lower):
        pieces += [side.center + offsets, side.center - offsets]
        if math.isfinite(side.threshold):
            pieces.append(side.threshold + np.array([-1e-9, 0.0, 1e-9]))
    z = np.concatenate(pieces)
    z_checked = np.concatenate([z[np.abs(z) <= _CERTIFIED_Z], [np.inf, -np.inf]])
    logp = np.concatenate([_log_sigmoid(z_checked[:-2]), [0.0, -np.inf]])
    got = evaluate_numpy(table, logp)
    expected = api.band_from_logp(logp, table.delta, div, max_ratio=table.max_ratio)
    for name, g, r in zip(("lower", "upper"), got, expected):
        finite = np.isfinite(r)
        with np.errstate(invalid="ignore"):
            allowed = 2.0 * np.maximum(table.rtol * np.minimum(r, np.abs(r - 1.0)),
                                       table.atol * np.maximum(r, 1.0)) \
                + 8 * _EPS * np.maximum(r, 1.0)
            bad = np.where(finite, ~(np.abs(g - r) <= allowed), g != r)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TableIntegrityError(
                f"{source}: the {name} bound at log p = {float(logp[i])!r} "
                f"({_where(getattr(table, name), float(z_checked[i]), name)}) is "
                f"{float(g[i])!r} from the table but {float(r[i])!r} from the solver, beyond "
                "the table's certificate; the table does not hold the band it claims. "
                "Export it again")


def _table_divergence(table: BandTableData, divergence: DivergenceLike | None,
                      source: str) -> Divergence:
    """The divergence a table holds: by its stored name, or the one passed."""
    if divergence is None:
        try:
            return get_divergence(table.divergence)
        except ValueError:
            raise ValueError(f"{source} holds the user-defined divergence "
                             f"{table.divergence!r}: pass divergence= to check it against "
                             "the solver, or verify=False to skip that check") from None
    div = get_divergence(divergence)
    if div.name != table.divergence:
        raise ValueError(f"{source} holds divergence {table.divergence!r}, not {div.name!r}")
    return div


def _where(side: TableSide, z: float, name: str) -> str:
    """Where z = logit p falls in one bound's table, for error messages."""
    if math.isinf(z):
        return "p = 1" if z > 0 else "p = 0"
    if (z >= side.threshold) if name == "upper" else (z <= side.threshold):
        return f"beyond the saturation threshold z = {side.threshold!r}"
    d = z - side.center
    k, _ = interval_of(np.array([abs(d)]))
    k = int(k[0]) + (INTERVALS_PER_SIGN if side.two_sided and d < 0.0 else 0)
    return f"interval {k} of the {name} table, z = logit p = {z!r}"


def save(table: BandTableData, path: str | os.PathLike) -> Path:
    """Write ``table`` as ``.npz`` (numpy) or ``.pt`` (torch, needs torch)."""
    path = Path(path)
    arrays = to_arrays(table)
    if path.suffix == ".npz":
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
    elif path.suffix == ".pt":
        import torch

        torch.save({k: (torch.from_numpy(v) if v.dtype.kind == "f" and v.ndim else v.item())
                    for k, v in arrays.items()}, path)
    else:
        raise ValueError(f"unknown table format {path.suffix!r}: use .npz or .pt")
    return path


def load(path: str | os.PathLike, *, verify: bool = True,
         divergence: DivergenceLike | None = None) -> BandTableData:
    """Read a table written by :func:`save` (``.npz`` or ``.pt``).

    The stored checksum is always checked. With ``verify=True`` (the
    default) a sample of the table is also re-checked against the solver
    (:func:`check_against_solver`, a few hundred milliseconds), which catches
    a file rewritten with a matching checksum. ``divergence`` is needed for
    that when the table holds a user-defined divergence.

    Raises
    ------
    TableIntegrityError
        The checksum does not match, or the sample disagrees with the solver.
    ValueError
        Not a table, another format version, or an unknown suffix.
    """
    path = Path(path)
    source = f"table file {str(path)!r}"
    if path.suffix not in (".npz", ".pt"):
        raise ValueError(f"unknown table format {path.suffix!r}: use .npz or .pt")
    try:
        if path.suffix == ".npz":
            # our own handle: np.load(path) leaks its file when the zip is damaged
            with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        else:
            import torch

            raw = torch.load(path, map_location="cpu", weights_only=True)
            arrays = {k: (v.numpy() if hasattr(v, "numpy") else np.array(v))
                      for k, v in raw.items()}
    except (OSError, EOFError, ValueError, RuntimeError, zipfile.BadZipFile) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        # truncated, byte-flipped or foreign files: each loader has its own
        # exception; none of them is a table
        raise TableIntegrityError(f"{source} cannot be read as a table: it is damaged or not "
                                  f"a bandsolve table ({type(exc).__name__}: {exc})") from exc
    table = from_arrays(arrays, source=source)
    if verify:
        _check_certificate(table, divergence, source)
        check_against_solver(table, divergence, source=source)
    return table


def _check_certificate(table: BandTableData, divergence: DivergenceLike | None,
                       source: str) -> None:
    """The certificate a file states must be the one its settings earn: the
    loader rebuilds the table for the same divergence, delta and max_ratio
    (about 0.3 s) and compares. A file cannot loosen its own tolerance, so
    the solver check that follows holds it to the honest one."""
    div = _table_divergence(table, divergence, source)
    honest = build(div, table.delta, max_ratio=None if table.max_ratio == math.inf
                   else table.max_ratio)
    for field in ("rtol", "atol"):
        stated, earned = getattr(table, field), getattr(honest, field)
        if stated > earned:
            raise TableIntegrityError(
                f"{source} states a certificate {field} = {stated!r}, but a table of "
                f"{table.divergence} at delta = {table.delta!r} is certified to {earned!r}: "
                "the file was rewritten. Export it again")
