"""The search: for one bound, charts x solver ladder, each answer certified
in mpmath, the best kept; re-centred on the solver's answer."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import certificate
from ..divergences import Divergence
from .charts import CHARTS, Chart, Role, chart_for, natural_margin, same_chart
from .ladder import ACCEPT_WIDTH, SolverLadder, run_rung
from .programs import Program, VocabularyOthers, log_form_of, scalar

__all__ = ["Answer", "BoundSolver", "ConvexSolveError", "exact_bound",
           "vocabulary_answer_at_end"]


class ConvexSolveError(RuntimeError):
    """No rung of the solver ladder ended 'optimal'."""


class Answer(NamedTuple):
    value: float  # the bound r
    falling: tuple[float, float | None]  # (v, log v or None): the charted ratio, to re-centre on
    dual: float
    mass_dual: float
    others: np.ndarray | None
    certificate: certificate.Certificate


def rank(answer: Answer) -> tuple:
    cert = answer.certificate
    return (not cert.passes(ACCEPT_WIDTH), cert.width)


def read(program: Program, chart: Chart, role: Role, p: float, delta: float,
         side: str) -> tuple:
    """([(r, (v, log v)), ...], lambda, nu): the bound, first snapped to the
    simplex end where the optimum lies there to the solver's tolerance, then
    as solved; the multipliers in the units of the program in r. Both
    candidates go to the certificate, which tells saturation from a bound
    just inside the end."""
    x = scalar(program.x.value)
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
    dual = scalar(program.divergence_ok.dual_value) * dr_dx / delta
    mass_dual = scalar(program.mass_ok.dual_value) * dr_dx
    if chart.log:
        # the log chart's tokens carry h = f - f'(inf) (w - 1): its mass
        # multiplier is the original one plus lambda f'(inf)
        mass_dual -= dual * program.slope_at_infinity
    return candidates, dual, mass_dual


class BoundSolver:
    """Solves the bounds of one divergence, compiling each program once.

    ``vocabulary``: the other tokens' old probabilities (the vocabulary
    program), or None (the binary program, for any p).
    """

    def __init__(self, div: Divergence, ladder: SolverLadder,
                 vocabulary: np.ndarray | None = None):
        self.div = div
        self.ladder = ladder
        self.vocabulary = vocabulary
        self.generator = certificate.mp_generator(div)
        self.log_ok = log_form_of(div) is not None
        self.programs: dict[tuple, Program] = {}
        self.seconds, self.solves = 0.0, 0

    def _program(self, chart: Chart, rest_count: int | None) -> Program:
        # a linear chart anchored at 0 charts a ratio far below 1: the
        # divergence's scaled form, where it has one, keeps it in scale
        scaled = self.div.convex_scaled is not None and not chart.log and chart.anchor == 0.0
        key = (chart.log, scaled, rest_count)
        if key not in self.programs:
            self.programs[key] = Program(self.div, chart.log, rest_count, scaled)
        return self.programs[key]

    def _role(self, p: float, side: str, estimate: float) -> tuple:
        """(role, the charted ratio's estimate, the program's rest count)."""
        pc = 1.0 - p
        if self.vocabulary is not None:
            role = Role(p, self.vocabulary, side == "lower", 1.0)
            return role, estimate, self.vocabulary.size
        if side == "lower":  # at p = 1 the other token is the limit term
            return Role(p, np.array([pc]), True, 1.0), estimate, None if pc > 0 else 0
        if estimate >= 1.0 / p:  # saturated: exactly 0, where rounding leaves 1e-11
            v = 0.0
        else:
            v = 1.0 - p * (estimate - 1.0) / pc if math.isfinite(estimate) else math.nan
        return Role(pc, np.array([p]), True, pc / p), min(max(v, 0.0), 1.0), None

    def solve(self, p: float, delta: float, side: str, estimate: float) -> Answer:
        """The certified best of up to CHARTS charts x the solver ladder.

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
            if linear is not None and (best is None or rank(linear) < rank(best)):
                best = linear
        if best is None:
            raise ConvexSolveError(
                f"{self.div.name}: the program for the {side} bound of p = {p!r}, "
                f"delta = {delta!r}: status {', then '.join(outcomes)}; not 'optimal'")
        return best

    def _accepted(self, answer: Answer | None) -> bool:
        return answer is not None and (self.generator is None
                                       or answer.certificate.passes(ACCEPT_WIDTH))

    def _charted(self, role: Role, v_estimate: float, rest_count: int | None, p: float,
                 delta: float, side: str, log_ok: bool) -> tuple:
        """(the best answer or None, the statuses of the failed solves) over
        the estimate's chart (or, if no rung solves it, the natural one) and
        up to two re-centred ones."""
        natural = natural_margin(self.div, role.weight, delta)
        chart = chart_for(role.falls, v_estimate, None, natural, log_ok)
        fallback = chart_for(role.falls, math.nan, None, natural, log_ok)
        best, outcomes = None, []
        for _ in range(CHARTS):
            program = self._program(chart, rest_count)
            program.token.set(role.weight, delta, chart)
            program.others.set(role.rest, delta)
            for name, options in self.ladder.rungs:
                status, seconds = run_rung(program.problems[chart.sense], name, options)
                self.seconds += seconds
                self.solves += 1
                if status != "optimal":
                    outcomes.append(f"{name}: {status!r}")
                    continue
                candidates, dual, mass_dual = read(program, chart, role, p, delta, side)
                others = (np.array(program.others.w.value, dtype=np.float64)
                          if isinstance(program.others, VocabularyOthers) else None)
                for r, falling in candidates:
                    cert = certificate.certify(p, delta, self.div, side, r, dual,
                                               generator=self.generator)
                    answer = Answer(r, falling, dual, mass_dual, others, cert)
                    if best is None or rank(answer) < rank(best):
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
            following = chart_for(role.falls, *best.falling, natural, log_ok)
            if same_chart(chart, following) or best.certificate.saturated:
                break
            chart = following
        return best, outcomes


def exact_bound(p: float, side: str, div: Divergence) -> float | None:
    """Bounds fixed without a program: p = 0, and p = 1 (upper 1; lower 1
    where f'(inf) = inf)."""
    if p == 0.0:
        return 0.0 if side == "lower" else math.inf
    if p == 1.0 and (side == "upper" or div.slope_at_infinity == math.inf):
        return 1.0
    return None


def vocabulary_answer_at_end(bounds: BoundSolver, p: float, delta: float, side: str,
                             others_count: int) -> Answer | None:
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
    return Answer(end, (0.0, None), 0.0, 0.0 if side == "lower" else 1.0 / p, others, cert)
