"""The public convex programs: ``band`` (per token) and ``simplex_band``
(over a whole vocabulary), validated once and solved by the search."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .. import _validate, certificate
from .._solve import solve
from ..divergences import Divergence, DivergenceLike, get_divergence
from .ladder import SolverLadder
from .search import BoundSolver, ConvexSolveError, exact_bound, vocabulary_answer_at_end

__all__ = ["ConvexBand", "band", "simplex_band"]


class ConvexBand(NamedTuple):
    """Bounds, multipliers and certificates of each program.

    ``*_dual`` is the multiplier lambda >= 0 of g_f(p, r) <= delta in
    max r (upper) or min r (lower): where the divergence constraint binds,
    1 = lambda |g_f'(r)|; where the simplex binds instead (saturation) it
    vanishes. ``*_certificate`` are :class:`bandsolve.certificate.Certificate`
    objects (object arrays). ``vocabulary_kkt`` (``simplex_band`` only) holds
    the (lower, upper) KKT residuals of the vocabulary program.
    ``failures`` lists the programs no rung solved (``on_failure="nan"``).
    """

    lower: np.ndarray
    upper: np.ndarray
    lower_dual: np.ndarray
    upper_dual: np.ndarray
    solve_seconds: float
    lower_certificate: np.ndarray | None = None
    upper_certificate: np.ndarray | None = None
    vocabulary_kkt: tuple | None = None
    solves: int = 0
    failures: tuple = ()


def _require_form(div: Divergence) -> None:
    if div.convex_generator is None:
        raise ValueError(f"divergence {div.name!r} has no convex form; pass convex_generator= "
                         "to Divergence.from_generator (see docs/divergences.md)")


def band(p: ArrayLike, delta: ArrayLike, divergence: DivergenceLike = "kl", *,
         solver: str = "CLARABEL", ladder: SolverLadder | None = None,
         on_failure: str = "raise") -> ConvexBand:
    """Ratio bounds by convex optimisation, element by element, certified.

    Parameters and validation are those of :func:`bandsolve.band`
    (``max_ratio`` aside): the same inputs raise the same errors.
    ``on_failure="nan"`` gives NaN bounds (and a message in ``failures``)
    for elements no solver rung solved, instead of raising. ``ladder``: the
    solvers tried in turn (default :data:`SOLVER_LADDER` for ``solver="CLARABEL"``,
    else ``solver`` alone, ``SolverLadder.of(solver)``).

    Returns
    -------
    ConvexBand
        ``lower``, ``upper``, the duals and the certificates, shaped like the
        broadcast inputs. p = 0 gives (0, inf); at p = 1 the upper bound is
        1 and the lower bound is 1 where f'(inf) = inf, else the program's
        limit at p = 1.

    Accuracy
    --------
    Each bound's certificate proves ``lo <= r_true <= hi`` exactly; with
    ``cert.width = (hi - lo) / min(r, |r - 1|)``, the bound r satisfies
    ``|r - r_true| <= cert.width * min(r, |r - 1|)``. On ``bandsolve
    verify``'s sweep the width is at most ``verify.TOLERANCES`` (1e-9 to
    1e-7 by divergence); a bound whose width exceeds ``ACCEPT_WIDTH`` after
    the whole ladder is returned with its (wider) certificate. A user's
    divergence without an mpmath form is not certified (its certificate
    says so) and is only as good as the solver's status.

    Raises
    ------
    ValueError, TypeError
        Bad input, as in :func:`bandsolve.band`, a divergence without a
        convex form, or an ``on_failure`` other than "raise" or "nan".
    ConvexSolveError
        With ``on_failure="raise"``, if no rung ends 'optimal'; the message
        names the divergence, the inputs and the statuses.
    """
    _require_form(get_divergence(divergence))
    request = _validate.band_request(p, delta, divergence, on_failure=on_failure)
    div, shape, n = request.divergence, request.shape, request.size
    p_full = np.broadcast_to(request.x, (n,))
    d_full = np.broadcast_to(request.delta, (n,))
    out = {k: np.full(n, np.nan) for k in ("lower", "upper", "lower_dual", "upper_dual")}
    certs = {side: np.empty(n, dtype=object) for side in ("lower", "upper")}
    # the fast path's bounds centre the charts (a NaN where it failed: the
    # natural chart instead); flattened, as the loop reads them
    estimates = [bound.reshape(-1) for bound in solve(request)]
    bounds = BoundSolver(div, ladder or SolverLadder.of(solver))
    failures = []
    for i in range(n):
        pi, d = float(p_full[i]), float(d_full[i])
        for side, estimate in zip(("lower", "upper"), estimates):
            fixed = exact_bound(pi, side, div)
            if fixed is not None:
                out[side][i], out[f"{side}_dual"][i] = fixed, 0.0
                certs[side][i] = certificate.certify(pi, d, div, side, fixed,
                                                     generator=bounds.generator)
                continue
            try:
                answer = bounds.solve(pi, d, side, float(estimate[i]))
            except ConvexSolveError as exc:
                if on_failure == "raise":
                    raise
                failures.append(str(exc))
                continue
            out[side][i], out[f"{side}_dual"][i] = answer.value, answer.dual
            certs[side][i] = answer.certificate
    return ConvexBand(out["lower"].reshape(shape), out["upper"].reshape(shape),
                      out["lower_dual"].reshape(shape), out["upper_dual"].reshape(shape),
                      bounds.seconds, certs["lower"].reshape(shape),
                      certs["upper"].reshape(shape), None, bounds.solves, tuple(failures))


def simplex_band(pi_old: ArrayLike, index: int, delta: float,
                 divergence: DivergenceLike = "kl", *,
                 solver: str = "CLARABEL", ladder: SolverLadder | None = None) -> ConvexBand:
    """The band of token ``index`` from the program over the whole vocabulary.

    max (and min) of pi_new[index] / pi_old[index] subject to
    D_f(pi_new || pi_old) <= delta and pi_new in the simplex. It does not
    assume the one-dimensional reduction, so agreement with
    :func:`bandsolve.band` at p = pi_old[index] checks that reduction. The
    sampled token is charted as in :func:`band`; the other tokens' ratios
    are variables in ratio form.

    Parameters
    ----------
    pi_old : 1-d array_like
        A distribution: finite, positive entries summing to 1 (within 1e-9).
        Zero entries are not accepted: a token of probability 0 has no ratio
        (drop it; for f'(inf) = inf it must stay at 0 anyway).
    index : int
        The sampled token.
    delta : float
        Trust-region radius, > 0.

    Returns
    -------
    ConvexBand
        0-d fields; the certificates certify each bound as a bound of the
        one-dimensional band at p = pi_old[index] (the reduction, exact by
        Jensen's inequality), and ``vocabulary_kkt`` holds the (lower, upper)
        KKT residuals of the vocabulary program itself, at 50 digits
        (:func:`bandsolve.certificate.vocabulary_kkt`; None without an
        mpmath form).

    Accuracy
    --------
    As in :func:`band`: ``|r - r_true| <= cert.width * min(r, |r - 1|)``,
    with widths on ``bandsolve verify``'s sweep up to 10x the 1-d ones.

    Raises
    ------
    ValueError, TypeError
        For a pi_old that is not a positive distribution, an index out of
        range, a bad delta, or a divergence without a convex form.
    ConvexSolveError
        As in :func:`band`, except where the bound is the simplex end to
        float64 (saturation, or a lower bound below float64's range): there
        the end is proved optimal in mpmath and returned with its
        certificate, whatever the solvers did.
    """
    div = get_divergence(divergence)
    _require_form(div)
    old = _validate.check_probability(pi_old, "pi_old")
    if old.ndim != 1 or old.size < 2:
        raise ValueError(f"pi_old must be a 1-d distribution of at least 2 entries "
                         f"(got shape {old.shape})")
    if np.any(old <= 0):
        raise ValueError(f"pi_old must be positive: {int(np.sum(old <= 0))} entries are 0")
    if abs(old.sum() - 1.0) > 1e-9:
        raise ValueError(f"pi_old must sum to 1 (got {old.sum()!r})")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) \
            or not -old.size <= index < old.size:
        raise ValueError(f"index must be an integer in [0, {old.size}) (got {index!r})")
    delta_arr = _validate.check_delta(delta)
    if delta_arr.ndim != 0:
        raise ValueError("simplex_band takes one delta")
    d = float(delta_arr)
    index = int(index) % old.size
    p = float(old[index])
    others = np.delete(old, index)

    bounds = BoundSolver(div, ladder or SolverLadder.of(solver), vocabulary=others)
    # the fast path's bounds centre the charts; p and d are checked already
    estimates = solve(_validate.checked_request(np.array([p]), False, d, div, np.inf))
    results, kkt = {}, {}
    for side, estimate in zip(("lower", "upper"), estimates):
        try:
            answer = bounds.solve(p, d, side, float(estimate[0]))
        except ConvexSolveError:
            at_end = vocabulary_answer_at_end(bounds, p, d, side, others.size)
            if at_end is None:
                raise
            answer = at_end
        results[side] = answer
        others_ratios = answer.others
        assert others_ratios is not None  # the vocabulary program's answers carry them
        if side == "upper" and answer.value == 1.0 / p:
            # snapped to saturation: the others' ratios are at their bound 0
            # (the solver leaves them at its tolerance, where their
            # multipliers mu_b > 0 would read as violations)
            others_ratios = np.zeros_like(others_ratios)
        ratios = np.insert(others_ratios, index, answer.value)
        kkt[side] = certificate.vocabulary_kkt(old, index, d, div, side, ratios, answer.dual,
                                               answer.mass_dual, generator=bounds.generator)
    lo, hi = results["lower"], results["upper"]
    return ConvexBand(np.float64(lo.value), np.float64(hi.value), np.float64(lo.dual),
                      np.float64(hi.dual), bounds.seconds, np.array(lo.certificate, dtype=object),
                      np.array(hi.certificate, dtype=object), (kkt["lower"], kkt["upper"]),
                      bounds.solves)
