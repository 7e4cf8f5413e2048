"""A table checked against the float64 root finder: the certificate ``build``
stores (:func:`certify`, fixed points) and the re-check of a loaded file
(:func:`check_against_solver`, points drawn afresh)."""

from __future__ import annotations

import math

import numpy as np

from .. import api
from ..divergences import Divergence, DivergenceLike, get_divergence
from .data import ATOL, INTERVALS_PER_SIGN, BandTableData, TableIntegrityError, TableSide, distance_nodes
from .evaluate import NUMPY_OPS, evaluate_numpy, interval_of

__all__ = ["certify", "check_against_solver", "table_divergence", "log_sigmoid"]

# Certified for p and 1 - p down to 1e-300, the numpy core's own range: the
# check points reach |logit p| = -log(1e-300) = 690.78, the range's edge
CERTIFIED_Z = -math.log(1e-300)
_EPS = float(np.finfo(np.float64).eps)


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log sigmoid(x) = -log(1 + e^-x), exactly; NaN stays NaN. It gives log s
    from the solver's x = logit s, and log p from z = logit p."""
    with np.errstate(invalid="ignore"):
        return -np.logaddexp(0.0, -x)


def _check_points(table: BandTableData) -> np.ndarray:
    """Four points in every interval of both grids, and the far tails."""
    d = distance_nodes()
    frac = np.array([0.125, 0.375, 0.625, 0.875])
    inside = np.concatenate([(d[:-1, None] + frac * np.diff(d)[:, None]).ravel(), d])
    points = [np.geomspace(1.0, CERTIFIED_Z, 200), -np.geomspace(1.0, CERTIFIED_Z, 200)]
    for side in (table.upper, table.lower):
        points += [side.center + inside, side.center - inside]
    z = np.concatenate(points)
    # p = 0 and p = 1, and p beyond the grid (log p = -1e300): there the
    # evaluation reads the last interval's end, which must hold the limit
    return np.concatenate([z[np.abs(z) <= CERTIFIED_Z], [-np.inf, np.inf, FAR_LOGP]])


#: log p of the check point beyond the grid
FAR_LOGP = -1e300


def _reference(table: BandTableData, div: Divergence, logp: np.ndarray):
    """The solver's bounds at ``logp``. At log p = FAR_LOGP the upper bound of
    a user generator that grows like r^2 or faster is past float64
    (delta/p = e^1e300), where the solver cannot tell inf from a finite
    bound without the divergence's growth form and says so; there the
    upper bound's limit as p -> 0, +inf (every fixed r is eventually inside
    the band), capped at max_ratio, is the reference."""
    try:
        return api.band_from_logp(logp, table.delta, div, max_ratio=table.max_ratio)
    except api.BandSolveError:
        lower, upper = api.band_from_logp(logp, table.delta, div, max_ratio=table.max_ratio,
                                          on_failure="nan")
        far = logp == FAR_LOGP
        if np.isnan(lower).any() or np.isnan(upper[~far]).any():
            raise
        upper[far & np.isnan(upper)] = table.max_ratio
        return lower, upper


def certify(table: BandTableData, div: Divergence) -> float:
    """The smallest rtol with |r_table - r| <= max(rtol min(r, |r-1|), atol
    max(r, 1)) at every checked point (inf where an infinite or saturated
    bound is missed)."""
    logp = log_sigmoid(_check_points(table))
    lower, upper = evaluate_numpy(table, logp)
    ref_lower, ref_upper = _reference(table, div, logp)
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
    div = table_divergence(table, divergence, source)
    rng = np.random.default_rng(seed)
    d = distance_nodes()
    offsets = d[:-1] + rng.uniform(0.05, 0.95, d.size - 1) * np.diff(d)
    pieces = [np.geomspace(1.0, CERTIFIED_Z, 32), -np.geomspace(1.0, CERTIFIED_Z, 32)]
    for side in (table.upper, table.lower):
        pieces += [side.center + offsets, side.center - offsets]
        if math.isfinite(side.threshold):
            pieces.append(side.threshold + np.array([-1e-9, 0.0, 1e-9]))
    z = np.concatenate(pieces)
    z_checked = np.concatenate([z[np.abs(z) <= CERTIFIED_Z], [np.inf, -np.inf]])
    logp = np.concatenate([log_sigmoid(z_checked[:-2]), [0.0, -np.inf]])
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


def table_divergence(table: BandTableData, divergence: DivergenceLike | None,
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
    k, _ = interval_of(NUMPY_OPS, np.array([abs(d)]))
    k = int(k[0]) + (INTERVALS_PER_SIGN if side.two_sided and d < 0.0 else 0)
    return f"interval {k} of the {name} table, z = logit p = {z!r}"
