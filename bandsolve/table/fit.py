"""Fitting: the quintic spline of y = log s on the octave grid, per bound,
and :func:`build`, which fits, certifies and refuses what it cannot certify."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import _validate, api
from .._kernels._bind import kernels_for
from ..divergences import Divergence, DivergenceLike, get_divergence
from .certify import certify, log_sigmoid
from .data import DEGREE, INTERVALS_PER_SIGN, BandTableData, TableSide, distance_nodes

__all__ = ["build"]

# The solver's range: sigmoid(-745) is the smallest subnormal.
_Z_EDGE = 745.0


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
    d = distance_nodes()
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
    y = log_sigmoid(x_upper if upper else x_lower)
    # At the threshold s = 1 exactly; the solver reports that node (and maybe
    # its neighbour, by rounding) as saturated, NaN.
    y[~np.isfinite(y)] = 0.0
    # here, not at the top: importing bandsolve.torch (every trainer process)
    # then loads no scipy; a table is fitted once per (divergence, delta)
    from scipy.interpolate import make_interp_spline

    spline = make_interp_spline(z_all, y, k=DEGREE)
    coefficients = np.concatenate([
        _interval_coefficients(spline, center + sign * d[:-1], center + sign * d[1:])
        for sign in signs])
    return TableSide(center=center, threshold=threshold,
                     coefficients=np.ascontiguousarray(coefficients))


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
        e.g. kl at the smallest subnormal delta), so that no table
        certifies nothing.
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
    rtol = certify(draft, div)
    if not math.isfinite(rtol):
        raise ValueError(f"the table of {div.name} at delta={d!r} cannot be certified: it "
                         "misses the root finder without bound at some checked point "
                         "(certified exactly for delta from 1e-6 to 10); use the numpy "
                         "API bandsolve.band for this delta")
    return dataclasses.replace(draft, rtol=rtol)
