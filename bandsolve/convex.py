"""The band as a convex program, solved with cvxpy: a check on the fast backends.

``band`` solves, per element, ``max / min r subject to g_f(p, r) <= delta,
0 <= r <= 1/p``: a convex program with a unique optimum (MATH.md).
``simplex_band`` solves it over a whole vocabulary, which checks the
one-dimensional reduction (the worst case rescales the rest of the mass in
proportion) without assuming it.

**Scaling.** The band's accuracy is stated relative to min(r, |r - 1|), so
the programs are written in a variable x whose absolute tolerance is one
relative to that measure (a *chart*):

* r = anchor + step x, with step = r_est - 1 (upper), -(1 - r_est) (lower,
  r_est > 1/2) or r_est (lower, r_est <= 1/2): x is 1 at the optimum;
* r = exp(y0 + x) for a lower bound <= 1/2 of a divergence with a log form
  (kl, neyman_chi2, alpha with a < 0: ``Divergence.convex_log``), whose lower bounds
  reach far below the float64 range.

The estimate r_est is the fast path's (:func:`bandsolve.band`); a poor one
costs accuracy, never correctness, and the chart is re-centred on the
solver's own answer when that lands more than 1% away. Tokens enter in
perspective form, s f(q/s) in scaled probabilities, which keeps every cone
entry of the size of the term it carries.

**Certified answers.** A solver's 'optimal' is no proof (Clarabel reported
'optimal' 6% away from the optimum on such programs). Each answer is
certified in mpmath (:mod:`bandsolve.certificate`); the solver ladder moves
to its next rung until the answer is certified to ``ACCEPT_WIDTH``, and the
certificates come back with the bounds.

Both programs use cvxpy Parameters throughout (DPP): a call compiles each
program once, whatever the number of elements.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import _validate, api, certificate
from .divergences import Divergence, DivergenceLike, LogForm, get_divergence

__all__ = ["band", "simplex_band", "ConvexBand", "ConvexSolveError", "SOLVER_LADDER",
           "ACCEPT_WIDTH"]


def _clarabel(tol: float, regularization: float | None = None, **extra):
    options = dict(tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, tol_ktratio=100 * tol,
                   max_iter=500, **extra)
    if regularization is not None:
        options["static_regularization_constant"] = regularization
    return "CLARABEL", options


#: (solver, settings) tried in turn until one's answer is certified (or, for
#: a divergence without an mpmath form, ends 'optimal'). First Clarabel with
#: its tolerances tightened from the 1e-8 defaults and its static
#: regularisation lowered from 1e-8 (which shifts the optimum of these
#: badly scaled programs by up to 1e-3); then variants that certified the
#: programs the first did not (measured on ``bandsolve verify``'s sweep);
#: last SCS at tight tolerances.
SOLVER_LADDER = {"CLARABEL": (
    _clarabel(1e-10, 1e-12),
    _clarabel(1e-11, 1e-11),
    _clarabel(1e-10),
    _clarabel(1e-12, 1e-12),
    _clarabel(1e-9, 1e-10, equilibrate_enable=False),
    ("SCS", dict(eps_abs=1e-10, eps_rel=1e-10, max_iters=100_000, time_limit_secs=2.0)),
)}

#: An answer certified to this width (in units of min(r, |r - 1|)) with KKT
#: residuals under ``certificate.KKT_TOLERANCE`` ends the ladder.
ACCEPT_WIDTH = 1e-8
_CHARTS = 3  # charts tried per bound: the estimate's, then re-centred twice
_RECENTRE = 1e-2  # re-centre when the answer lands this far (relative) from the chart


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


class ConvexSolveError(RuntimeError):
    """No rung of the solver ladder ended 'optimal'."""


def _scalar(value) -> float:
    """A cvxpy value (0-d, or of shape (1,) for some duals) as a float."""
    return float(np.asarray(value, dtype=float).reshape(-1)[0])


def _require_form(div: Divergence) -> None:
    if div.convex_generator is None:
        raise ValueError(f"divergence {div.name!r} has no convex form; pass convex_generator= "
                         "to Divergence.from_generator (see docs/divergences.md)")


# --- charts ------------------------------------------------------------------

class _Chart(NamedTuple):
    """v = anchor + step x (``log`` False) or v = exp(anchor + x) (``log``
    True), for the ratio v of the charted token; ``sense`` +1 maximises x,
    -1 minimises it."""

    log: bool
    anchor: float
    step: float
    sense: int


class _Role(NamedTuple):
    """Which token the program charts, and how its ratio v gives the bound r.

    The binary program charts the token whose ratio falls: the sampled one
    for the lower bound (r = v), the other for the upper one
    (r = 1 + ((1 - p)/p)(1 - v)), so that a bound near the simplex end 1/p,
    where v is near 0, is solved relative to v too. The vocabulary program
    charts the sampled token on both sides (``falls`` False for its upper).
    """

    weight: float  # the charted token's old probability
    rest: np.ndarray  # the other tokens'
    falls: bool
    gain: float  # |dr/dv|: 1, or (1 - p)/p for the binary upper bound


def _natural_margin(div: Divergence, p: float, delta: float) -> float:
    """|r - 1| of the quadratic approximation (MATH.md, "Local shape"), or
    delta / p without curvature, capped at 1: a falling ratio's chart for
    when there is no estimate."""
    pc = 1.0 - p
    c = div.curvature_at_one
    margin = math.sqrt(2.0 * delta * pc / (c * p)) if c > 0 and pc > 0 else delta / p
    return min(margin, 1.0) if margin > 0 else 0.5


def _chart_for(falls: bool, v: float, log_v: float | None, natural: float,
               log_ok: bool) -> _Chart:
    if not falls:
        return _Chart(False, 1.0, v - 1.0 if 1.0 < v < math.inf else natural, 1)
    if not 0.0 <= v <= 1.0:  # no usable estimate
        v, log_v = max(1.0 - natural, 0.0), None
    if log_ok and v <= 0.5:
        return _Chart(True, log_v if log_v is not None else math.log(max(v, 5e-324)), 1.0, -1)
    if 0.0 < v <= 0.5:
        return _Chart(False, 0.0, v, -1)
    if 0.5 < v < 1.0:
        return _Chart(False, 1.0, -(1.0 - v), 1)
    return _Chart(False, 1.0, -1.0 if v == 0.0 else -natural, 1)


def _same_chart(a: _Chart, b: _Chart) -> bool:
    if a.log != b.log or (not a.log and a.anchor != b.anchor):
        return False
    if a.log:
        return abs(a.anchor - b.anchor) <= _RECENTRE
    return abs(a.step - b.step) <= _RECENTRE * abs(a.step)


# --- the pieces of a program -------------------------------------------------

def _log_form(div: Divergence) -> LogForm | None:
    """The divergence's log form, where it has one.

    For a generator with a finite slope f'(inf), the reduced generator
    h(u) = f(u) - f'(inf) (u - 1) is convex and nonincreasing, and h(e^y) is
    convex in y. Since sum_b pi_old(b) (w_b - 1) = 0, D_f = sum_b pi_old(b)
    h(w_b): a lower bound near 0 can be solved for y = log r, whose absolute
    tolerance is a relative one on r, down to ratios below the float64 range
    (kl's lower bound, exp(-delta/p), reaches 1e-4343 at p = 1e-5). The
    other tokens enter through h too: nonincreasing, so the mass constraint,
    which e^y makes convex, may be relaxed to <= 1 without changing the
    optimum.
    """
    return None if div.convex_log is None else div.convex_log(div.parameter)


def _perspective(div: Divergence):
    """(q, s) -> (s f(q/s), constraints): the divergence's perspective form,
    or cvxpy's perspective of its convex_generator where it has none."""
    form = div.convex_perspective
    if form is not None:
        return lambda q, s: form(q, s, div.parameter)

    generator = div.convex_generator
    assert generator is not None  # callers check _require_form

    def user_form(q, s):
        import cvxpy as cp

        return cp.perspective(generator(q, div.parameter), s), []

    return user_form


class _LinearToken:
    """The sampled token in a linear chart: q = (p/delta)(anchor + step x) in
    perspective form; its simplex constraint q >= 0 is explicit, for its dual."""

    log = False

    def __init__(self, div: Divergence, x):
        import cvxpy as cp

        self.weight = cp.Parameter(nonneg=True)  # p / delta
        self.q_base, self.q_step = cp.Parameter(), cp.Parameter()
        self.mass_base, self.mass_step = cp.Parameter(), cp.Parameter()
        q, s = cp.Variable(), cp.Variable(nonneg=True)
        self.term, extra = _perspective(div)(q, s)
        self.simplex = self.q_base + self.q_step * x >= 0
        self.constraints = [q == self.q_base + self.q_step * x, s == self.weight,
                            self.simplex, *extra]
        self.mass = self.mass_base + self.mass_step * x

    def set(self, p: float, delta: float, chart: _Chart) -> None:
        s = p / delta
        self.weight.value = s
        self.q_base.value, self.q_step.value = s * chart.anchor, s * chart.step
        self.mass_base.value, self.mass_step.value = p * chart.anchor, p * chart.step

    def simplex_share(self) -> float:
        """The share of the objective's gradient the simplex carries (1 at
        saturation, 0 where the divergence binds)."""
        return _scalar(self.simplex.dual_value) * abs(_scalar(self.q_step.value))


class _LogToken:
    """The sampled token in a log chart, y = log r = y0 + x:
    (p/delta) h(e^y) = exp(k x + shift) + slope x + offset, mass p e^y."""

    log = True

    def __init__(self, log_form: LogForm, x):
        import cvxpy as cp

        self.form = log_form
        self.shift, self.slope, self.offset = cp.Parameter(), cp.Parameter(), cp.Parameter()
        self.mass_shift = cp.Parameter()
        log_mass = cp.Variable()  # auxiliary: keeps the Parameters outside exp (DPP)
        self.constraints = [log_mass == x + self.mass_shift]
        self.term = self.slope * x + self.offset
        if log_form.exp_coefficient != 0:
            exponent = cp.Variable()
            self.constraints.append(exponent == log_form.exponent * x + self.shift)
            self.term = self.term + cp.exp(exponent)
        self.mass = cp.exp(log_mass)

    def set(self, p: float, delta: float, chart: _Chart) -> None:
        a, k, b = self.form
        s, y0 = p / delta, chart.anchor
        self.shift.value = k * y0 + math.log(s * a) if a > 0 else 0.0
        self.slope.value, self.offset.value = s * b, s * (b * y0 - a)
        self.mass_shift.value = y0 + math.log(p)

    def simplex_share(self) -> float:
        return 0.0  # f(0) = inf: a log-form bound never saturates


class _PairOther:
    """The other token of the binary program, in perspective form; reduced
    by f'(inf) (q - s) in a log chart (``_log_form``)."""

    def __init__(self, div: Divergence, reduced: bool):
        import cvxpy as cp

        self.weight, self.delta = cp.Parameter(nonneg=True), cp.Parameter(nonneg=True)
        self.q, s = cp.Variable(), cp.Variable(nonneg=True)
        term, extra = _perspective(div)(self.q, s)
        self.term = term - div.slope_at_infinity * (self.q - s) if reduced else term
        self.constraints = [s == self.weight, self.q >= 0, *extra]
        self.mass = self.delta * self.q

    def set(self, weights: np.ndarray, delta: float) -> None:
        self.weight.value, self.delta.value = float(weights[0]) / delta, delta


class _LimitOther:
    """The other token at p = 1, where its old probability is 0: the
    perspective's limit, the linear recession term f'(inf) q (finite here:
    where f'(inf) = inf the lower bound is 1 and no program is solved),
    and 0 once reduced by f'(inf) q in a log chart."""

    def __init__(self, div: Divergence, reduced: bool):
        import cvxpy as cp

        self.delta = cp.Parameter(nonneg=True)
        q = cp.Variable(nonneg=True)
        self.term = 0 * q if reduced else div.slope_at_infinity * q
        self.constraints: list = []
        self.mass = self.delta * q

    def set(self, weights: np.ndarray, delta: float) -> None:
        self.delta.value = delta


class _VocabularyOthers:
    """The other tokens of the vocabulary program, in ratio form (their
    ratios stay of order 1); reduced by f'(inf) (w - 1) in a log chart."""

    def __init__(self, div: Divergence, n: int, reduced: bool):
        import cvxpy as cp

        self.weights = cp.Parameter(n, nonneg=True)  # pi_old / delta
        self.probabilities = cp.Parameter(n, nonneg=True)
        self.w = cp.Variable(n)
        assert div.convex_generator is not None  # callers check _require_form
        term = self.weights @ div.convex_generator(self.w, div.parameter)
        if reduced:
            term = term - div.slope_at_infinity * (self.weights @ self.w - cp.sum(self.weights))
        self.term = term
        self.constraints = [self.w >= 0]
        self.mass = self.probabilities @ self.w

    def set(self, weights: np.ndarray, delta: float) -> None:
        self.weights.value, self.probabilities.value = weights / delta, weights


class _Program:
    """max / min x s.t. (token + others) / delta <= 1, mass = 1 (<= 1 in a
    log chart, where it is convex and the relaxation is exact)."""

    def __init__(self, div: Divergence, log: bool, others_count: int | None):
        """``others_count``: the vocabulary's other tokens, or None for the
        binary program's other one, or 0 for that one at probability 0."""
        import cvxpy as cp

        self.x = cp.Variable()
        self.slope_at_infinity = div.slope_at_infinity
        self.token: _LogToken | _LinearToken
        if log:
            log_form = _log_form(div)
            assert log_form is not None  # a log chart is only drawn where one exists
            self.token = _LogToken(log_form, self.x)
        else:
            self.token = _LinearToken(div, self.x)
        self.others: _PairOther | _LimitOther | _VocabularyOthers
        if others_count is None:
            self.others = _PairOther(div, log)
        elif others_count == 0:
            self.others = _LimitOther(div, log)
        else:
            self.others = _VocabularyOthers(div, others_count, log)
        self.divergence_ok = self.token.term + self.others.term <= 1
        mass = self.token.mass + self.others.mass
        self.mass_ok = mass <= 1 if log else mass == 1
        constraints = [self.divergence_ok, self.mass_ok, *self.token.constraints,
                       *self.others.constraints]
        self.problems = {1: cp.Problem(cp.Maximize(self.x), constraints),
                         -1: cp.Problem(cp.Minimize(self.x), constraints)}


class _Answer(NamedTuple):
    value: float  # the bound r
    falling: tuple[float, float | None]  # (v, log v or None): the charted ratio, to re-centre on
    dual: float
    mass_dual: float
    others: np.ndarray | None
    certificate: certificate.Certificate


def _rank(answer: _Answer) -> tuple:
    cert = answer.certificate
    return (not cert.passes(ACCEPT_WIDTH), cert.width)


def _read(program: _Program, chart: _Chart, role: _Role, p: float, delta: float,
          side: str) -> tuple:
    """([(r, (v, log v)), ...], lambda, nu): the bound, first snapped to the
    simplex end where the optimum lies there to the solver's tolerance, then
    as solved; the multipliers in the units of the program in r. Both
    candidates go to the certificate, which tells saturation from a bound
    just inside the end."""
    x = _scalar(program.x.value)
    if chart.log:
        log_v = chart.anchor + x
        v, rest_of_v, dv_dx = math.exp(log_v), -math.expm1(log_v), math.exp(log_v)
    else:
        log_v, dv_dx = None, abs(chart.step)
        v = chart.anchor + chart.step * x
        rest_of_v = (1.0 - chart.anchor) - chart.step * x  # 1 - v, without cancelling
    end = 1.0 / p if side == "upper" else 0.0
    if side == "lower":
        r = min(max(v, 0.0), 1.0)
    elif role.falls:  # the binary upper bound, from the other token's ratio
        r = min(1.0 + role.gain * rest_of_v, end)
    else:
        r = min(max(v, 1.0), end)
    if role.falls:
        near_end = program.token.simplex_share() > 0.5 or (
            not chart.log and abs(v) <= 1e-9 * abs(chart.step))
    else:
        near_end = r >= end - 1e-7 * (end - 1.0)
    candidates = [(r, (v, log_v))]
    if near_end and r != end:
        candidates.insert(0, (end, (0.0, None) if role.falls else (end, None)))
    # the program in x is the program in r divided by |dr/dx| (and its
    # divergence constraint divided by delta): so are the multipliers
    dr_dx = dv_dx * role.gain
    dual = _scalar(program.divergence_ok.dual_value) * dr_dx / delta
    mass_dual = _scalar(program.mass_ok.dual_value) * dr_dx
    if chart.log:
        # the log chart's tokens carry h = f - f'(inf) (w - 1): its mass
        # multiplier is the original one plus lambda f'(inf)
        mass_dual -= dual * program.slope_at_infinity
    return candidates, dual, mass_dual


def _run(problem, name: str, options: dict) -> tuple:
    """(status, seconds) of one solve."""
    import cvxpy as cp

    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # handled through the status and the certificate
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            # no warm start: from the previous element's optimum Clarabel
            # often stops at 'optimal_inaccurate' or less accurate
            problem.solve(solver=name, warm_start=False, **options)
        status = problem.status
    except cp.error.SolverError:
        status = "solver error"
    return status, time.perf_counter() - start


class _BoundSolver:
    """Solves the bounds of one divergence, compiling each program once.

    ``vocabulary``: the other tokens' old probabilities (the vocabulary
    program), or None (the binary program, for any p).
    """

    def __init__(self, div: Divergence, solver: str, vocabulary: np.ndarray | None = None):
        self.div = div
        self.solver = solver
        self.vocabulary = vocabulary
        self.generator = certificate.mp_generator(div)
        self.log_ok = _log_form(div) is not None
        self.programs: dict[tuple, _Program] = {}
        self.seconds, self.solves = 0.0, 0

    def _program(self, log: bool, rest_count: int | None) -> _Program:
        if (log, rest_count) not in self.programs:
            self.programs[log, rest_count] = _Program(self.div, log, rest_count)
        return self.programs[log, rest_count]

    def _role(self, p: float, side: str, estimate: float) -> tuple:
        """(role, the charted ratio's estimate, the program's rest count)."""
        pc = 1.0 - p
        if self.vocabulary is not None:
            role = _Role(p, self.vocabulary, side == "lower", 1.0)
            return role, estimate, self.vocabulary.size
        if side == "lower":  # at p = 1 the other token is the limit term
            return _Role(p, np.array([pc]), True, 1.0), estimate, None if pc > 0 else 0
        if estimate >= 1.0 / p:  # saturated: exactly 0, where rounding leaves 1e-11
            v = 0.0
        else:
            v = 1.0 - p * (estimate - 1.0) / pc if math.isfinite(estimate) else math.nan
        return _Role(pc, np.array([p]), True, pc / p), min(max(v, 0.0), 1.0), None

    def solve(self, p: float, delta: float, side: str, estimate: float) -> _Answer:
        """The certified best of up to _CHARTS charts x the solver ladder.

        Raises ConvexSolveError if no rung ends 'optimal'.
        """
        role, v_estimate, rest_count = self._role(p, side, estimate)
        log_ok = self.log_ok and role.falls
        best, outcomes = self._charted(role, v_estimate, rest_count, p, delta, side, log_ok)
        if log_ok and self.vocabulary is not None and not self._accepted(best):
            # with a thousand other tokens Clarabel can stop at 'solver
            # error' in the log chart (measured: kl's lower bound 3.8e-5 on a
            # near-uniform vocabulary); r = r_est x resolves such a bound
            # relative to itself too, if less far below 1e-10
            linear, more = self._charted(role, v_estimate, rest_count, p, delta, side, False)
            outcomes += more
            if linear is not None and (best is None or _rank(linear) < _rank(best)):
                best = linear
        if best is None:
            raise ConvexSolveError(
                f"{self.div.name}: the program for the {side} bound of p = {p!r}, "
                f"delta = {delta!r}: status {', then '.join(outcomes)}; not 'optimal'")
        return best

    def _accepted(self, answer: _Answer | None) -> bool:
        return answer is not None and (self.generator is None
                                       or answer.certificate.passes(ACCEPT_WIDTH))

    def _charted(self, role: _Role, v_estimate: float, rest_count: int | None, p: float,
                 delta: float, side: str, log_ok: bool) -> tuple:
        """(the best answer or None, the statuses of the failed solves) over
        the estimate's chart (or, if no rung solves it, the natural one) and
        up to two re-centred ones."""
        natural = _natural_margin(self.div, role.weight, delta)
        chart = _chart_for(role.falls, v_estimate, None, natural, log_ok)
        fallback = _chart_for(role.falls, math.nan, None, natural, log_ok)
        best, outcomes = None, []
        ladder: tuple = SOLVER_LADDER.get(self.solver.upper(), ((self.solver, {}),))
        for _ in range(_CHARTS):
            program = self._program(chart.log, rest_count)
            program.token.set(role.weight, delta, chart)
            program.others.set(role.rest, delta)
            for name, options in ladder:
                status, seconds = _run(program.problems[chart.sense], name, options)
                self.seconds += seconds
                self.solves += 1
                if status != "optimal":
                    outcomes.append(f"{name}: {status!r}")
                    continue
                candidates, dual, mass_dual = _read(program, chart, role, p, delta, side)
                others = (np.array(program.others.w.value, dtype=np.float64)
                          if isinstance(program.others, _VocabularyOthers) else None)
                for r, falling in candidates:
                    cert = certificate.certify(p, delta, self.div, side, r, dual,
                                               generator=self.generator)
                    answer = _Answer(r, falling, dual, mass_dual, others, cert)
                    if best is None or _rank(answer) < _rank(best):
                        best = answer
                    if self._accepted(answer):
                        break
                if self._accepted(best):
                    break
            if best is None and chart != fallback:
                chart = fallback  # the estimate's chart may be degenerate
                continue
            if best is None:
                break
            following = _chart_for(role.falls, *best.falling, natural, log_ok)
            if _same_chart(chart, following) or best.certificate.saturated:
                break
            chart = following
        return best, outcomes


def _exact(p: float, side: str, div: Divergence) -> float | None:
    """Bounds fixed without a program: p = 0, and p = 1 (upper 1; lower 1
    where f'(inf) = inf)."""
    if p == 0.0:
        return 0.0 if side == "lower" else math.inf
    if p == 1.0 and (side == "upper" or div.slope_at_infinity == math.inf):
        return 1.0
    return None


def band(p: ArrayLike, delta: ArrayLike, divergence: DivergenceLike = "kl", *,
         solver: str = "CLARABEL",
         on_failure: str = "raise") -> ConvexBand:
    """Ratio bounds by convex optimisation, element by element, certified.

    Parameters and validation are those of :func:`bandsolve.band`
    (``max_ratio`` aside): the same inputs raise the same errors.
    ``on_failure="nan"`` gives NaN bounds (and a message in ``failures``)
    for elements no solver rung solved, instead of raising.

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
    div = get_divergence(divergence)
    _require_form(div)
    if on_failure not in ("raise", "nan"):
        raise ValueError(f"on_failure must be 'raise' or 'nan' (got {on_failure!r})")
    p_arr = _validate.check_probability(p)
    delta_arr = _validate.check_delta(delta)
    shape = np.broadcast_shapes(p_arr.shape, delta_arr.shape)
    p_full = np.broadcast_to(p_arr, shape).ravel()
    d_full = np.broadcast_to(delta_arr, shape).ravel()
    n = p_full.size
    out = {k: np.full(n, np.nan) for k in ("lower", "upper", "lower_dual", "upper_dual")}
    certs = {side: np.empty(n, dtype=object) for side in ("lower", "upper")}
    estimates = api.band(p_full, d_full, div) if n else (np.empty(0), np.empty(0))
    bounds = _BoundSolver(div, solver)
    failures = []
    for i in range(n):
        pi, d = float(p_full[i]), float(d_full[i])
        for side, estimate in zip(("lower", "upper"), estimates):
            fixed = _exact(pi, side, div)
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


def _vocabulary_answer_at_end(bounds: _BoundSolver, p: float, delta: float, side: str,
                              others_count: int) -> _Answer | None:
    """The vocabulary program's answer at the simplex end, without a solver,
    where 50-digit arithmetic proves it; None otherwise.

    The vocabulary point with the sampled ratio r and the other tokens
    rescaled in proportion has divergence g_f(p, r) exactly. So where the
    certificate of the end (r = 0, the others at 1/(1 - p); or r = 1/p, the
    others at 0) passes, the end is the vocabulary optimum too: either
    feasible (saturation: no ratio lies beyond it), or, for a lower bound
    below float64's range (kl's exp(-delta/p)), within the certificate's
    interval [0, 1e-313] of a feasible point. The multipliers of a saturated
    end are lambda = 0 and nu = 0 (lower) or 1/p (upper), which
    ``vocabulary_kkt`` re-checks in the vocabulary itself. Clarabel stops at
    'solver error' on some such programs (measured: alpha:0.5 at
    p = 1.6e-6 on 200 tokens, kl at p = 8e-7 on 1,000).
    """
    end = 0.0 if side == "lower" else 1.0 / p
    cert = certificate.certify(p, delta, bounds.div, side, end, 0.0, generator=bounds.generator)
    if not cert.passes(ACCEPT_WIDTH):
        return None
    others = np.full(others_count, 1.0 / (1.0 - p) if side == "lower" else 0.0)
    return _Answer(end, (0.0, None), 0.0, 0.0 if side == "lower" else 1.0 / p, others, cert)


def simplex_band(pi_old: ArrayLike, index: int, delta: float,
                 divergence: DivergenceLike = "kl", *,
                 solver: str = "CLARABEL") -> ConvexBand:
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

    bounds = _BoundSolver(div, solver, vocabulary=others)
    estimates = api.band(p, d, div)
    results, kkt = {}, {}
    for side, estimate in zip(("lower", "upper"), estimates):
        try:
            answer = bounds.solve(p, d, side, float(estimate))
        except ConvexSolveError:
            at_end = _vocabulary_answer_at_end(bounds, p, d, side, others.size)
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
