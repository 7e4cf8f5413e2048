"""The programs: the sampled token (linear or log chart) and the other
tokens (the binary program's one, its p = 1 limit, or a vocabulary), in
perspective or ratio form, built once per shape with cvxpy Parameters (DPP).
cvxpy is imported inside, on first use."""

from __future__ import annotations

import math

import numpy as np

from ..divergences import Divergence, LogForm
from .charts import Chart

__all__ = ["Program", "VocabularyOthers", "log_form_of", "perspective_of", "scalar"]


def scalar(value) -> float:
    """A cvxpy value (0-d, or of shape (1,) for some duals) as a float."""
    return float(np.asarray(value, dtype=float).reshape(-1)[0])


def log_form_of(div: Divergence) -> LogForm | None:
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


def perspective_of(div: Divergence):
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
        self.term, extra = perspective_of(div)(q, s)
        self.simplex = self.q_base + self.q_step * x >= 0
        self.constraints = [q == self.q_base + self.q_step * x, s == self.weight,
                            self.simplex, *extra]
        self.mass = self.mass_base + self.mass_step * x

    def set(self, p: float, delta: float, chart: Chart) -> None:
        s = p / delta
        self.weight.value = s
        self.q_base.value, self.q_step.value = s * chart.anchor, s * chart.step
        self.mass_base.value, self.mass_step.value = p * chart.anchor, p * chart.step

    def simplex_share(self) -> float:
        """The share of the objective's gradient the simplex carries (1 at
        saturation, 0 where the divergence binds)."""
        return scalar(self.simplex.dual_value) * abs(scalar(self.q_step.value))


class _ScaledToken:
    """The sampled token in a linear chart anchored at 0, r = c x (c = the
    chart's step > 0), through the divergence's scaled form
    (``Divergence.convex_scaled``): (p/delta) f(c x) with cone entries of
    x's size, however far below 1 the ratio lies."""

    log = False

    def __init__(self, div: Divergence, x):
        import cvxpy as cp

        assert div.convex_scaled is not None  # a scaled chart is only drawn where one exists
        self.term, self._assign = div.convex_scaled(x, div.parameter)
        self.simplex = x >= 0
        self.constraints = [self.simplex]
        self.mass_step = cp.Parameter(nonneg=True)
        self.mass = self.mass_step * x

    def set(self, p: float, delta: float, chart: Chart) -> None:
        self._assign(p / delta, chart.step)
        # its mass p c x, below 1e-17 of the total 1, is one no float64 sum
        # sees; a coefficient like 1e-200 stalls the solver
        mass_step = p * chart.step
        self.mass_step.value = mass_step if mass_step >= 1e-17 else 0.0

    def simplex_share(self) -> float:
        # the multiplier of x >= 0 is that of q = (p/delta) c x >= 0 times
        # (p/delta) c: the share as _LinearToken reads it
        return scalar(self.simplex.dual_value)


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

    def set(self, p: float, delta: float, chart: Chart) -> None:
        a, k, b = self.form
        s, y0 = p / delta, chart.anchor
        self.shift.value = k * y0 + math.log(s * a) if a > 0 else 0.0
        self.slope.value, self.offset.value = s * b, s * (b * y0 - a)
        self.mass_shift.value = y0 + math.log(p)

    def simplex_share(self) -> float:
        return 0.0  # f(0) = inf: a log-form bound never saturates


class _PairOther:
    """The other token of the binary program, in perspective form; reduced
    by f'(inf) (q - s) in a log chart (``log_form_of``)."""

    def __init__(self, div: Divergence, reduced: bool):
        import cvxpy as cp

        self.weight, self.delta = cp.Parameter(nonneg=True), cp.Parameter(nonneg=True)
        self.q, s = cp.Variable(), cp.Variable(nonneg=True)
        term, extra = perspective_of(div)(self.q, s)
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


class VocabularyOthers:
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


class Program:
    """max / min x s.t. (token + others) / delta <= 1, mass = 1 (<= 1 in a
    log chart, where it is convex and the relaxation is exact)."""

    def __init__(self, div: Divergence, log: bool, others_count: int | None,
                 scaled: bool = False):
        """``others_count``: the vocabulary's other tokens, or None for the
        binary program's other one, or 0 for that one at probability 0.
        ``scaled``: the sampled token in the divergence's scaled form (a
        linear chart anchored at 0)."""
        import cvxpy as cp

        self.x = cp.Variable()
        self.slope_at_infinity = div.slope_at_infinity
        self.token: _LogToken | _LinearToken | _ScaledToken
        if log:
            log_form = log_form_of(div)
            assert log_form is not None  # a log chart is only drawn where one exists
            self.token = _LogToken(log_form, self.x)
        elif scaled:
            self.token = _ScaledToken(div, self.x)
        else:
            self.token = _LinearToken(div, self.x)
        self.others: _PairOther | _LimitOther | VocabularyOthers
        if others_count is None:
            self.others = _PairOther(div, log)
        elif others_count == 0:
            self.others = _LimitOther(div, log)
        else:
            self.others = VocabularyOthers(div, others_count, log)
        self.divergence_ok = self.token.term + self.others.term <= 1
        mass = self.token.mass + self.others.mass
        self.mass_ok = mass <= 1 if log else mass == 1
        constraints = [self.divergence_ok, self.mass_ok, *self.token.constraints,
                       *self.others.constraints]
        self.problems = {1: cp.Problem(cp.Maximize(self.x), constraints),
                         -1: cp.Problem(cp.Minimize(self.x), constraints)}
