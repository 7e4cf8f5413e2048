"""The band as a convex program, solved with cvxpy: a check on the fast backends.

``band`` solves, per element, ``max / min r subject to g_f(p, r) <= delta,
0 <= r <= 1/p``: a convex program with a unique optimum (MATH.md). Both programs
take the ratios w = pi_new / pi_old as variables, so the divergence is
sum_b pi_old(b) f(w_b) with f in DCP form (``Divergence.convex_generator``)
and w of order 1; ``band`` is the two-element vocabulary (p, 1 - p), the
ratios moving by a scaled step. ``simplex_band`` solves the program over a whole vocabulary,
which checks the one-dimensional reduction (the worst case rescales the rest
of the mass in proportion) without assuming it.

Both use cvxpy Parameters throughout (DPP): a sweep compiles each program once.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from . import _validate
from .divergences import Divergence, get_divergence

__all__ = ["band", "simplex_band", "ConvexBand", "ConvexSolveError", "SOLVER_LADDER"]

#: (solver, settings) tried in turn until one ends 'optimal'. For Clarabel:
#: its tolerances tightened from the 1e-8 defaults first, since the convex
#: path is a reference; then its defaults; then two variants for badly scaled
#: data (cones near the simplex boundary often stop at 'optimal_inaccurate');
#: last SCS at tight tolerances, which certified every such program we met.
#: README, "Verification", states the accuracy this reaches.
SOLVER_LADDER = {"CLARABEL": (
    ("CLARABEL", dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, tol_ktratio=1e-8,
                      max_iter=500)),
    ("CLARABEL", dict(max_iter=500)),
    ("CLARABEL", dict(max_iter=2000, static_regularization_constant=1e-10)),
    ("CLARABEL", dict(max_iter=500, equilibrate_enable=False)),
    ("SCS", dict(eps_abs=1e-10, eps_rel=1e-10, max_iters=500_000, time_limit_secs=5.0)),
)}


class ConvexBand(NamedTuple):
    """Bounds and the optimality certificate of each program.

    ``*_dual`` is the multiplier of the divergence constraint g_f / delta <= 1:
    positive where that constraint binds, zero (to solver precision) where
    the simplex bound binds instead (saturation). ``solve_seconds`` is the
    total solver time.
    """

    lower: np.ndarray
    upper: np.ndarray
    lower_dual: np.ndarray
    upper_dual: np.ndarray
    solve_seconds: float


class ConvexSolveError(RuntimeError):
    """A convex program did not end with status 'optimal'."""


def _require_form(div: Divergence) -> None:
    if div.convex_generator is None:
        raise ValueError(f"divergence {div.name!r} has no convex form; pass convex_generator= "
                         "to Divergence.from_generator (see bandsolve._convex_forms)")


def _solve(problem, solver: str, what: str) -> float:
    """Solve with each rung of SOLVER_LADDER[solver] in turn until 'optimal'."""
    import warnings

    import cvxpy as cp

    start = time.perf_counter()
    outcomes = []
    for name, options in SOLVER_LADDER.get(solver.upper(), ((solver, {}),)):
        try:
            with warnings.catch_warnings():
                # 'solution may be inaccurate': handled through the status
                warnings.simplefilter("ignore", UserWarning)
                # no warm start: from the previous element's optimum Clarabel
                # often stops at 'optimal_inaccurate' or less accurate
                problem.solve(solver=name, warm_start=False, **options)
        except cp.error.SolverError:
            outcomes.append(f"{name}: solver error")
            continue
        if problem.status == cp.OPTIMAL:
            return time.perf_counter() - start
        outcomes.append(f"{name}: {problem.status!r}")
    raise ConvexSolveError(f"{what}: status {', then '.join(outcomes)}; not 'optimal'")


class _MarginProgram:
    """max t >= 0 s.t. [a f(1 + s t / a) + b f(1 - s t / b)] / delta <= 1.

    For the pair (a, b) = (p, 1 - p) the margin s t* is the upper margin,
    for (1 - p, p) the lower one. Variables are the two ratios, so the data
    enter as the weights (a, b) / delta and the steps (s/a, s/b), all cvxpy
    Parameters (DPP); s makes t of order 1 at the optimum, and dividing the
    weights by delta makes the solver's absolute tolerance relative.
    """

    def __init__(self, div: Divergence):
        import cvxpy as cp

        self.div = div
        self.weights = cp.Parameter(2, nonneg=True)  # (a, b) / delta
        self.steps = cp.Parameter(2, nonneg=True)  # (s/a, s/b)
        # at a = 0 the first term is its limit m f'(inf) = (s/delta) f'(inf) t
        self.edge = cp.Parameter(nonneg=True)
        self.t = cp.Variable(nonneg=True)
        ratios = 1 + cp.multiply(self.t * np.array([1.0, -1.0]), self.steps)
        terms = div.convex_generator(ratios, div.parameter)
        self.constraint = self.weights @ terms + self.edge * self.t <= 1
        self.problem = cp.Problem(cp.Maximize(self.t), [self.constraint, ratios >= 0])

    def margin(self, a: float, b: float, delta: float, solver: str):
        """(margin, dual, seconds) for the pair (a, b): the move from a toward 1."""
        curvature = self.div.curvature_at_one
        natural = math.sqrt(2.0 * delta * a * b / curvature) if curvature > 0 else math.inf
        scale = natural if 0.0 < natural < b else b  # t is O(1) at the optimum
        self.weights.value = np.array([a, b]) / delta
        # a = 0 (the lower bound at p = 1, where f'(inf) is finite): the first
        # ratio's term is replaced by its limit
        self.steps.value = np.array([scale / a if a > 0 else 0.0, scale / b])
        self.edge.value = 0.0 if a > 0 else self.div.slope_at_infinity * scale / delta
        what = f"{self.div.name}: the program for (a, b) = ({a!r}, {b!r}), delta = {delta!r}"
        seconds = _solve(self.problem, solver, what)
        return min(scale * float(self.t.value), b), float(self.constraint.dual_value), seconds


def band(p, delta, divergence="kl", *, solver: str = "CLARABEL") -> ConvexBand:
    """Ratio bounds by convex optimisation, element by element.

    Parameters and validation are those of :func:`bandsolve.band`
    (``max_ratio`` aside): the same inputs raise the same errors.

    Returns
    -------
    ConvexBand
        ``lower``, ``upper`` and the duals, shaped like the broadcast inputs.
        p = 0 gives (0, inf); at p = 1 the upper bound is 1 and the lower bound
        is 1 where f'(inf) = inf, else the program's limit at p = 1.

    Accuracy
    --------
    About 1e-9 relative in the margin r - 1 with the default tolerances
    (README, "Verification"); much looser than the numba backend, which is
    why it serves as an independent check, not a replacement.

    Raises
    ------
    ValueError, TypeError
        Bad input, as in :func:`bandsolve.band`, or a divergence without a
        convex form.
    ConvexSolveError
        If a program ends in any status other than 'optimal'; the message
        names the divergence, the inputs and the status.
    """
    div = get_divergence(divergence)
    _require_form(div)
    p_arr = _validate.check_probability(p)
    delta_arr = _validate.check_delta(delta)
    shape = np.broadcast_shapes(p_arr.shape, delta_arr.shape)
    p_full = np.broadcast_to(p_arr, shape).ravel()
    d_full = np.broadcast_to(delta_arr, shape).ravel()
    n = p_full.size
    out = {k: np.full(n, np.nan) for k in ("lower", "upper", "lower_dual", "upper_dual")}
    program = _MarginProgram(div) if n else None
    seconds = 0.0
    for i in range(n):
        pi, d = float(p_full[i]), float(d_full[i])
        if pi == 0.0:
            out["lower"][i], out["upper"][i] = 0.0, math.inf
            continue
        pc = 1.0 - pi
        if pc == 0.0:
            out["upper"][i] = 1.0
        else:
            m, out["upper_dual"][i], s = program.margin(pi, pc, d, solver)
            out["upper"][i] = 1.0 / pi if m >= pc else 1.0 + m / pi
            seconds += s
        if pc == 0.0 and div.slope_at_infinity == math.inf:
            out["lower"][i] = 1.0
        else:
            m, out["lower_dual"][i], s = program.margin(pc, pi, d, solver)
            out["lower"][i] = max(1.0 - m / pi, 0.0)
            seconds += s
    return ConvexBand(*(out[k].reshape(shape) for k in
                        ("lower", "upper", "lower_dual", "upper_dual")), seconds)


def simplex_band(pi_old, index: int, delta: float, divergence="kl", *,
                 solver: str = "CLARABEL") -> ConvexBand:
    """The band of token ``index`` from the program over the whole vocabulary.

    max (and min) of pi_new[index] / pi_old[index] subject to
    D_f(pi_new || pi_old) <= delta and pi_new in the simplex. It does not
    assume the one-dimensional reduction, so agreement with
    :func:`bandsolve.band` at p = pi_old[index] checks that reduction.

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
        0-d fields; the ratio is the program's variable, so its accuracy is
        that of ``band`` (README, "Verification").

    Raises
    ------
    ValueError, TypeError
        For a pi_old that is not a positive distribution, an index out of
        range, a bad delta, or a divergence without a convex form.
    ConvexSolveError
        As in :func:`band`.
    """
    import cvxpy as cp

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

    weights = cp.Parameter(old.size, nonneg=True)
    weights.value = old / d  # dividing by delta makes the tolerance relative
    ratios = cp.Variable(old.size, nonneg=True)  # pi_new / pi_old
    divergence_ok = weights @ div.convex_generator(ratios, div.parameter) <= 1
    constraints = [old @ ratios == 1, divergence_ok]
    results, seconds = {}, 0.0
    for sense, objective in (("upper", cp.Maximize(ratios[index])),
                             ("lower", cp.Minimize(ratios[index]))):
        problem = cp.Problem(objective, constraints)
        seconds += _solve(problem, solver, f"{div.name}: the {sense} program over "
                                           f"{old.size} tokens, delta = {d!r}")
        results[sense] = (max(float(ratios.value[index]), 0.0), float(divergence_ok.dual_value))
    return ConvexBand(np.float64(results["lower"][0]), np.float64(results["upper"][0]),
                      np.float64(results["lower"][1]), np.float64(results["upper"][1]),
                      seconds)
