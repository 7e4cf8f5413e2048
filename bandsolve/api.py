"""The public numpy API: validate -> dispatch -> kernels."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _validate
from ._kernels._bind import kernels_for
from ._solve import BandSolveError, solve
from .divergences import DivergenceLike, get_divergence

#: (lower, upper) ratio bounds, float64 arrays of the broadcast shape
Bounds = tuple[NDArray[np.float64], NDArray[np.float64]]

__all__ = ["band", "band_from_logp", "binary_divergence", "BandSolveError"]


def _validated_band(x, from_logp: bool, delta, divergence, max_ratio, out, on_failure, *,
                    warm_start=None, fast=None) -> Bounds:
    """Validate once, then solve: :func:`band` and :func:`band_from_logp`, and
    ``FastBand``'s, which passes its warm start and fast-path tables."""
    request = _validate.band_request(x, delta, divergence, from_logp=from_logp,
                                     max_ratio=max_ratio, on_failure=on_failure,
                                     defer_range_check=True)
    return solve(request, warm_start, _validate.check_numpy_out(out, request), fast=fast)


def band(p: ArrayLike, delta: ArrayLike, divergence: DivergenceLike = "kl", *,
         max_ratio: float | None = None, out: tuple | None = None,
         on_failure: str = "raise") -> Bounds:
    """Ratio bounds [lower, upper] of the f-divergence trust region.

    The band of a token with old probability p is the set of ratios
    r = pi_new / pi_old that some pi_new within D_f(pi_new || pi_old) <= delta
    gives it: ``{r in [0, 1/p] : g_f(p, r) <= delta}``, with the binary
    divergence g_f of :func:`binary_divergence`.

    Parameters
    ----------
    p : array_like
        Old probabilities of the sampled tokens, in [0, 1].
    delta : array_like
        Trust-region radius, > 0. Broadcasts with ``p`` like a ufunc.
    divergence : str or Divergence
        A built-in's name (``bandsolve.BUILTIN_DIVERGENCES``; ``"kl"``,
        KL(pi_old||pi_new), is the paper's choice), ``"alpha:<a>"``, or a
        :class:`~bandsolve.Divergence`.
    max_ratio : float, optional
        Cap on the upper bound (the paper's runs use 10). A policy of the
        caller, not part of the band; must be >= 1.
    out : (ndarray, ndarray), optional
        Arrays to write (lower, upper) into, as with a ufunc's ``out``: float64,
        writable, of the broadcast shape, overlapping neither each other nor
        ``p`` or ``delta``. C-contiguous arrays are written in place by the
        kernels (no allocation); other layouts are filled by one copy. They
        are returned. If an error is raised, their contents are unspecified.
    on_failure : {"raise", "nan"}, default "raise"
        What a bound the root finder cannot resolve gives (see BandSolveError):
        "raise" raises BandSolveError; "nan" returns NaN for that bound and
        the other bounds as usual, for callers that mask such elements.

    Returns
    -------
    lower, upper : ndarray of float64
        ``out`` if given, else new arrays: the same shape as the broadcast
        inputs (0-d for scalars), with
        ``0 <= lower <= 1 <= upper <= 1/p``.

        * Saturation is exact: ``upper == 1/p`` where g_f(p, 1/p) <= delta
          and ``lower == 0`` where g_f(p, 0) <= delta. From log p, where
          1/p = e^(-log p) is rarely a float64, the cap is that value
          rounded down (within 2 ulp), so ``upper <= 1/p`` holds exactly.
        * p = 1: ``upper == 1``, ``lower`` the limit from the left.
        * p = 0: ``lower == 0``, ``upper == inf`` (or ``max_ratio``).

    Accuracy
    --------
    For the built-in divergences, with r the exact bound,
    ``|lower - r| <= max(1e-12 * min(r, |r - 1|), 4 * eps * max(r, 1))``,
    likewise for ``upper``, with eps = 2.2e-16, for p in [1e-300, 1] and
    every delta the API accepts (5e-324 to float64's maximum), from p and
    from log p (tested against mpmath at 60 digits or more, next to the
    saturation thresholds too, and at 1 - p subnormal; docs/accuracy.md has
    the measured worst cases). Where g overflows float64 next to a root, BandSolveError is
    raised instead. A user-defined divergence is as accurate as its formula.

    Raises
    ------
    TypeError
        Non-real input (booleans, complex, strings, objects), a divergence
        that is neither a name nor a Divergence, or an ``out`` that is not a
        pair of float64 numpy arrays.
    ValueError
        NaN or inf in p or delta, p outside [0, 1], delta <= 0, max_ratio < 1,
        shapes that do not broadcast, or an unknown divergence name. The
        message gives the count of bad elements and the first index. Also an
        ``out`` array of the wrong shape, read-only, or overlapping an input
        or the other ``out`` array.
    BandSolveError
        If a bound cannot be resolved: g overflows float64 next to it (a
        user generator at delta near 1e300 and tiny p), or
        the root finder does not converge (never observed for the built-in
        divergences). Never a silent NaN or a wrong bound, unless
        ``on_failure="nan"`` asks for NaN.
    """
    return _validated_band(p, False, delta, divergence, max_ratio, out, on_failure)


def band_from_logp(logp: ArrayLike, delta: ArrayLike, divergence: DivergenceLike = "kl", *,
                   max_ratio: float | None = None, out: tuple | None = None,
                   on_failure: str = "raise") -> Bounds:
    """:func:`band` from log-probabilities, as trainers hold them.

    The exact input is taken to be p = exp(logp). Working from logp is more
    exact near p = 1: 1 - p is computed as -expm1(logp), so logp = -1e-12
    gives the band of p = 1 - 1e-12 to full precision, where ``band(exp(logp))``
    would see p rounded.

    Parameters
    ----------
    logp : array_like
        log p <= 0; -inf means p = 0.
    delta : array_like
        Trust-region radius, > 0, as in :func:`band`.
    divergence : str or Divergence, default "kl"
        As in :func:`band`.
    max_ratio : float, optional
        Cap on the upper bound, as in :func:`band`.
    out : tuple of two ndarrays, optional
        Output arrays ``(lower, upper)``, as in :func:`band`.
    on_failure : {"raise", "nan"}, default "raise"
        As in :func:`band`.

    Returns
    -------
    lower, upper : ndarray of float64
        As in :func:`band`, with the same accuracy statement.

    Raises
    ------
    TypeError, ValueError, BandSolveError
        As in :func:`band`; ValueError for logp > 0, NaN or +inf.
    """
    return _validated_band(logp, True, delta, divergence, max_ratio, out, on_failure)


def binary_divergence(p: ArrayLike, r: ArrayLike,
                      divergence: DivergenceLike = "kl") -> NDArray[np.float64]:
    """g_f(p, r) = p f(r) + (1 - p) f((1 - p r) / (1 - p)) = D_f(Bern(p r) || Bern(p)).

    The divergence of the closest pi_new that gives the token ratio r: the
    remaining mass is rescaled in proportion to pi_old.

    Parameters
    ----------
    p : array_like
        Probabilities in [0, 1].
    r : array_like
        Ratios in [0, 1/p] (p r <= 1 up to 4 ulp, which is clipped).
    divergence : str or Divergence

    Returns
    -------
    ndarray of float64, possibly inf (e.g. kl at r = 0).
    At p = 1, g(1, r) = f(r) + (1 - r) f'(inf); at p = 0 it is 0.

    Accuracy
    --------
    For the built-in divergences, within 4e-15 relative of g at the float64
    inputs taken exactly (measured worst 8.5e-16, tests/test_accuracy_edges.py),
    also where r lies within an ulp of 1/p: the remaining mass 1 - p r is
    formed with one rounding, never as a difference of rounded terms.

    Raises
    ------
    TypeError, ValueError
        As in :func:`band`; ValueError also for r < 0, r > 1/p, NaN or inf.
    """
    div = get_divergence(divergence)
    p_arr = _validate.check_probability(p)
    r_arr = _validate.check_ratio(r)
    shape, p_flat, r_flat = _validate.flat_operands(p_arr, r_arr)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n)
    if n:
        p_full = np.broadcast_to(p_arr, shape)
        r_full = np.broadcast_to(r_arr, shape)
        q = p_full * r_full
        # p r may exceed 1 by rounding when r = 1/p was computed in floating point
        too_big = q > 1.0 + 4 * np.finfo(np.float64).eps
        if too_big.any():
            i = int(np.flatnonzero(too_big)[0])
            index = np.unravel_index(i, shape) if shape else ()
            raise ValueError(
                f"r must be <= 1/p (the new probability p r cannot exceed 1): "
                f"{int(too_big.sum())} of {n} elements, the first at index {tuple(map(int, index))} "
                f"(p = {float(p_full.flat[i])!r}, r = {float(r_full.flat[i])!r})")
        if (q > 1.0).any():
            r_flat = np.require(np.where(q > 1.0, 1.0 / np.where(p_full > 0, p_full, 1.0),
                                         r_full), np.float64, ["C", "W"]).reshape(-1)
        kernels_for(div).binary_divergence(p_flat, r_flat, out)
    return out.reshape(shape)
