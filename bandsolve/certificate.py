"""Exact certificates for the band, in mpmath at 50 significant digits.

A convex solver returns floating-point iterates that satisfy its optimality
conditions only to its tolerances, and its status word ('optimal') is no
proof: Clarabel reported 'optimal' for bounds that were 6% off. This module
turns a solver's answer into statements that hold exactly:

* **Certified interval** (:func:`certify`). g_f(p, .) is convex with
  g_f(p, 1) = 0, so {r : g_f(p, r) <= delta} is an interval around 1. Two
  evaluations of g_f at points near the solver's r* (exact rationals,
  evaluated at 50 digits) with g(inner) <= delta < g(outer) prove that the
  true bound lies between them; g_f(p, end) <= delta at the simplex end
  (1/p or 0) proves saturation exactly. Only convexity is used, no
  solver tolerance.
* **KKT residuals** of the one-dimensional program max (min) r s.t.
  g_f(p, r) <= delta, 0 <= r <= 1/p, from the solver's r* and multiplier
  lambda: primal feasibility, dual feasibility, complementary slackness and
  stationarity 1 = lambda |g'(r*)| + mu, with the simplex multiplier mu >= 0
  allowed only at the simplex end. And of the full-vocabulary program
  (:func:`vocabulary_kkt`), per token, with the multiplier of the mass
  constraint.

Every size is measured in the unit the band's accuracy is stated in,
``measure(r) = max(min(r, |r - 1|), MEASURE_FLOOR)``: a width of 1e-8 means
|hi - lo| <= 1e-8 min(r, |r - 1|). The floor (1e-300) applies only where r
is 0 (saturation) or below the float64 range (kl's lower bound underflows).

The generators are each divergence's ``exact_form``, written in mpmath from
their textbook formulas beside (and independently of) its numba and cvxpy
forms (``bandsolve/divergences/<family>.py``). A Divergence without one (a
user's, unless given ``exact_form=``) gets "no certificate" from
:func:`certify` unless an :class:`MpGenerator` is passed.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from ._extras import require

require("verify", "bandsolve.certificate")

import mpmath as mp  # noqa: E402
import numpy as np  # noqa: E402
from numpy.typing import ArrayLike  # noqa: E402

from .divergences import DivergenceLike, MpGenerator, get_divergence  # noqa: E402

__all__ = ["Certificate", "KKTResiduals", "MpGenerator", "certify", "mp_generator",
           "measure", "vocabulary_kkt", "DIGITS", "KKT_TOLERANCE", "MEASURE_FLOOR"]

DIGITS = 50
MEASURE_FLOOR = 1e-300
#: KKT residuals pass below this. The multipliers are the solvers' least
#: accurate output: on ``bandsolve verify``'s sweep stationarity reaches
#: 3e-4 (1e-7 typically), where the bounds themselves certify to 1e-8; a
#: multiplier of the wrong sign gives 1 or more. The certified interval, not
#: this check, is what bounds the error of r.
KKT_TOLERANCE = 1e-3
#: Bracket half-widths tried in turn, in units of the measure: half a decade
#: apart, so a certified width is at most about 3x (inner + outer) the
#: solver's error.
_STEPS = tuple(10.0 ** (-13 + k / 2) for k in range(26)) + (0.9,)


def mp_generator(divergence: DivergenceLike) -> MpGenerator | None:
    """The divergence's exact (mpmath) form at :data:`DIGITS` digits, or None
    where it has none (a user's Divergence, unless it was given one)."""
    div = get_divergence(divergence)
    if div.exact_form is None:
        return None
    with mp.workdps(DIGITS):
        return div.exact_form(div.parameter)


def measure(r: float) -> float:
    """max(min(r, |r - 1|), MEASURE_FLOOR): the unit of the band's accuracy."""
    r = float(r)
    if np.isinf(r):
        return np.inf
    return max(min(r, abs(r - 1.0)), MEASURE_FLOOR)


class _Binary:
    """g_f(p, r) = p f(r) + (1 - p) f(u2), u2 = 1 - p (r - 1) / (1 - p), and
    its derivative, at working precision; at p = 1 the limit
    f(r) + (1 - r) f'(inf)."""

    def __init__(self, gen: MpGenerator, p: float, delta: float):
        self.gen = gen
        self.p = mp.mpf(p)
        self.pc = 1 - self.p  # exact: p is a float64 in [0, 1]
        self.delta = mp.mpf(delta)
        self.end = 1 / self.p if p > 0 else mp.inf

    def _u2(self, r):
        if r >= self.end:  # exactly 0 there: rounding must not leave a tiny u2 > 0
            return mp.mpf(0), mp.mpf(-1)
        x2 = -self.p * (r - 1) / self.pc
        return 1 + x2, x2

    def value(self, r):
        gen = self.gen
        fr = gen.f_at_zero if r == 0 else gen.f(r, r - 1)
        if self.pc == 0:
            return fr + (1 - r) * gen.slope_at_infinity if r < 1 else fr
        u2, x2 = self._u2(r)
        fu = gen.f_at_zero if u2 <= 0 else gen.f(u2, x2)
        return self.p * fr + self.pc * fu

    def slope(self, r):
        gen = self.gen
        dr = gen.df_at_zero if r == 0 else gen.df(r, r - 1)
        if self.pc == 0:
            return dr - gen.slope_at_infinity
        u2, x2 = self._u2(r)
        du = gen.df_at_zero if u2 <= 0 else gen.df(u2, x2)
        return self.p * (dr - du)


class KKTResiduals(NamedTuple):
    """KKT residuals, each >= 0 and in units of the measure (relative
    distances in r to first order), except ``stationarity`` and ``dual``,
    which are shares of the objective's unit gradient."""

    primal: float
    dual: float
    complementarity: float
    stationarity: float

    def worst(self) -> float:
        return max(self)


@dataclasses.dataclass(frozen=True)
class Certificate:
    """What 50-digit arithmetic proves about one bound.

    ``interval`` (mpmath numbers) contains the true bound, or is None with
    ``reason`` saying why no bracket was found. ``width`` is its length in
    units of the measure of the solver's value; where saturation (or
    p in {0, 1}) fixes the bound exactly (``saturated``), the interval is that
    point and ``width`` the value's distance from it. ``kkt`` holds the
    residuals where a multiplier was given.
    """

    side: str
    value: float
    interval: tuple | None
    width: float
    saturated: bool
    kkt: KKTResiduals | None
    reason: str = ""

    @property
    def certified(self) -> bool:
        return self.interval is not None

    @property
    def bounds(self) -> tuple:
        """The interval as floats (nearest), or (nan, nan)."""
        if self.interval is None:
            return (np.nan, np.nan)
        return tuple(float(b) for b in self.interval)

    def contains(self, r: float, slack: float = 1e-12) -> bool:
        """Whether r lies in the interval widened by
        max(slack * measure(r), 4 eps max(r, 1)): the second term is the
        rounding of r itself, which exceeds the first once |r - 1| < 1e-3."""
        if self.interval is None:
            return False
        lo, hi = self.interval
        if mp.isinf(hi) or mp.isinf(lo):
            return float(r) == float(hi)
        r = float(r)
        with mp.workdps(DIGITS):
            pad = max(mp.mpf(slack) * mp.mpf(measure(r)), 4 * mp.mpf(2.0**-52) * max(r, 1.0))
            return lo - pad <= mp.mpf(r) <= hi + pad

    def passes(self, width_tolerance: float, kkt_tolerance: float = KKT_TOLERANCE) -> bool:
        """Certified to width <= width_tolerance, with KKT residuals (where a
        multiplier was given) <= kkt_tolerance."""
        kkt_ok = self.kkt is None or self.kkt.worst() <= kkt_tolerance
        return self.certified and self.width <= width_tolerance and kkt_ok


def certify(p: float, delta: float, divergence: DivergenceLike, side: str, value: float,
            dual: float | None = None, *, generator: MpGenerator | None = None
            ) -> Certificate:
    """Certify a solver's bound r* = ``value`` for the band of p.

    The interval is proved, not estimated: ``certify(...).interval`` holds the
    exact bound whenever it is not None, whatever the solver did. A value off
    by eps min(r, |r - 1|) gets a width of at least eps (about 3 eps at most).

    Parameters
    ----------
    p, delta : float
        The token's old probability, in [0, 1], and the radius, > 0.
    divergence : str or Divergence
    side : {"lower", "upper"}
    value : float
        The solver's bound.
    dual : float, optional
        The solver's multiplier of g_f(p, r) <= delta in max r (upper) or
        min r (lower); with it, the KKT residuals are computed.
    generator : MpGenerator, optional
        An mpmath form for a user's divergence.

    Returns
    -------
    Certificate
        ``certified`` is False (``reason`` says why) for a divergence without
        an mpmath form, or where no bracket within 0.9 measure of ``value``
        proves anything (a value on the wrong side of 1, or far off).

    Raises
    ------
    ValueError
        For a side other than "lower" or "upper".
    """
    if side not in ("lower", "upper"):
        raise ValueError(f"side must be 'lower' or 'upper' (got {side!r})")
    gen = generator if generator is not None else mp_generator(divergence)
    value = float(value)
    if gen is None:
        name = getattr(divergence, "name", divergence)
        return Certificate(side, value, None, np.inf, False, None,
                           f"no certificate: {name!r} has no mpmath form (pass generator=)")
    with mp.workdps(DIGITS):
        g = _Binary(gen, p, delta)
        exact = _exact_bound(g, side)
        if exact is not None:
            # the interval is a point: the width is the value's distance from it
            if _close(value, exact):
                width = 0.0
            elif mp.isinf(exact):
                width = np.inf
            else:
                width = float(abs(mp.mpf(value) - exact) / mp.mpf(measure(float(exact))))
            kkt = None if dual is None else _kkt(g, side, exact, dual, at_end=True)
            return Certificate(side, value, (exact, exact), width, True, kkt,
                               "" if width == 0.0 else f"the bound is exactly {float(exact)!r}")
        end = g.end if side == "upper" else mp.mpf(0)
        at_end = _close(value, end)
        r = end if at_end else mp.mpf(value)  # float(1/p) may round above the end
        interval, width, reason = _bracket(g, side, r, value)
        # no KKT point where float64 cannot resolve the optimum: below its
        # range (the multiplier in r units underflows too), or so close to an
        # end where f(0) = inf that r rounds onto it (g is infinite there)
        resolved = value >= MEASURE_FLOOR and mp.isfinite(g.value(r))
        kkt = None if dual is None or not resolved else _kkt(g, side, r, dual, at_end)
        return Certificate(side, value, interval, width, False, kkt, reason)


def _close(value: float, exact) -> bool:
    if mp.isinf(exact) or exact == 0:  # the ends 0 and inf are floats
        return value == float(exact)
    return abs(mp.mpf(value) - exact) <= 4 * mp.mpf(2.0**-52) * max(abs(exact), 1)


def _exact_bound(g: _Binary, side: str):
    """The bound where no root finding is needed: p = 0, the p = 1 limits
    fixed at 1, and simplex saturation (g_f at the end <= delta)."""
    if g.p == 0:
        return mp.mpf(0) if side == "lower" else mp.inf
    if side == "upper":
        if g.pc == 0:
            return mp.mpf(1)
        end = g.end
    else:
        if g.pc == 0 and mp.isinf(g.gen.slope_at_infinity):
            return mp.mpf(1)
        end = mp.mpf(0)
    return end if g.value(end) <= g.delta else None


def _bracket(g: _Binary, side: str, r, value: float):
    """(interval, width, reason): inner and outer points at value -+ h m,
    with g(inner) <= delta < g(outer), for the smallest h of _STEPS on each
    side. The end of the feasible range stands in for an outer point beyond it
    (g there exceeds delta, or _exact_bound would have returned)."""
    m = mp.mpf(measure(value))
    toward_one = -1 if side == "upper" else 1
    end = g.end if side == "upper" else mp.mpf(0)
    if (side == "upper" and not 1 <= r <= end) or (side == "lower" and not 0 <= r <= 1):
        return None, np.inf, f"no certificate: {value!r} lies outside the {side} range"

    def on_range(x):  # points stay between 1 and the simplex end
        return min(max(x, 1), end) if side == "upper" else min(max(x, end), 1)

    def first(direction, feasible):
        for h in _STEPS:
            x = on_range(r + direction * h * m)
            if (g.value(x) <= g.delta) == feasible:
                return x
        return None

    inner, outer = first(toward_one, True), first(-toward_one, False)
    if inner is None or outer is None:
        which = "inner (feasible)" if inner is None else "outer (infeasible)"
        return None, np.inf, f"no certificate: no {which} point within 0.9 measure of {value!r}"
    interval = (min(inner, outer), max(inner, outer))
    return interval, float((interval[1] - interval[0]) / m), ""


def _kkt(g: _Binary, side: str, r, dual: float, at_end: bool) -> KKTResiduals:
    """Residuals of max (min) r s.t. g(r) <= delta, r in [0, 1/p], at (r, dual).

    With kappa = dual |g'(r)| the share of the objective's gradient the
    divergence constraint carries, stationarity is 1 = kappa + mu with mu >= 0
    the simplex multiplier, which may be nonzero only at the simplex end.
    Where |g'| is infinite there (rkl's upper end), only dual = 0 is a KKT
    point, and the residual is the multiplier's size in the units of the
    measure, dual delta / m.
    """
    lam = mp.mpf(dual)
    # at r = 0 (lower saturation) the measure vanishes: there the residuals
    # are absolute, in units of the lower side's range [0, 1]
    m = mp.mpf(measure(float(r))) if r > 0 else mp.mpf(1)
    gr = g.value(r)
    slope = abs(g.slope(r))
    slack = gr - g.delta
    if slack > 0:
        primal = mp.inf if slope == 0 else slack / (slope * m)
    else:
        primal = mp.mpf(0)
    complementarity = abs(lam) * abs(slack) / m
    if mp.isinf(slope):
        kappa = mp.mpf(0) if lam == 0 else mp.sign(lam) * mp.inf
        size = abs(lam) * g.delta / m
        stationarity = size if at_end else mp.inf
        dual_res = size if lam < 0 else mp.mpf(0)
    else:
        kappa = lam * slope
        stationarity = max(kappa - 1, 0) if at_end else abs(1 - kappa)
        dual_res = max(-kappa, 0)
    return KKTResiduals(*(float(v) for v in (primal, dual_res, complementarity, stationarity)))


def vocabulary_kkt(pi_old: ArrayLike, index: int, delta: float, divergence: DivergenceLike,
                   side: str, ratios: ArrayLike,
                   divergence_dual: float, mass_dual: float, *,
                   generator: MpGenerator | None = None) -> KKTResiduals | None:
    """KKT residuals of the full-vocabulary program at 50 digits, or None
    for a divergence without an mpmath form, or where the sampled token's
    ratio is below the float64 range (kl's lower bound at small p).

    The program is max (side "upper") or min ("lower") of w[index] subject to
    sum_b pi_old(b) w_b = 1 (multiplier ``mass_dual``, nu),
    D = sum_b pi_old(b) f(w_b) <= delta (``divergence_dual``, lambda >= 0) and
    w >= 0. Stationarity per token, with c = +-e_index:
    c_b = pi_old(b) (nu + lambda f'(w_b)) - mu_b, mu_b >= 0, mu_b = 0 unless
    w_b = 0. Residuals: ``primal`` max(|mass - 1|, (D - delta)/delta);
    ``dual`` max(-lambda, 0) delta / m and ``complementarity``
    lambda |D - delta| / m, first-order moves of w[index] in units of its
    measure m (as in :func:`certify`);
    ``stationarity`` the largest violation of a row, relative to the larger
    of its terms pi_old(b) (|nu| + |lambda f'(w_b)|) and the objective's unit
    gradient. Rows keep their probability, as the ratios' weights in the
    program do (the ratios of tokens of probability 1e-5 are determined
    only to that weight); the floor of 1 keeps 1e-9 against 2e-9 from
    reading as a violation of 1 where both multipliers vanish at saturation.
    """
    gen = generator if generator is not None else mp_generator(divergence)
    old, w = np.asarray(pi_old, dtype=float), np.maximum(np.asarray(ratios, dtype=float), 0.0)
    index = index % old.size
    if gen is None or (0 < w[index] < MEASURE_FLOOR) or (
            w[index] == 0 and side == "lower" and float(gen.f_at_zero) == np.inf):
        return None
    sign = 1 if side == "upper" else -1
    with mp.workdps(DIGITS):
        lam, nu, d = mp.mpf(divergence_dual), mp.mpf(mass_dual), mp.mpf(delta)
        mass, div_value, worst = mp.mpf(0), mp.mpf(0), mp.mpf(0)
        for b, (pb, wb) in enumerate(zip(old, w)):
            pb, wb = mp.mpf(pb), mp.mpf(wb)
            mass += pb * wb
            div_value += pb * (gen.f_at_zero if wb == 0 else gen.f(wb, wb - 1))
            slope = gen.df_at_zero if wb == 0 else gen.df(wb, wb - 1)
            target = sign if b == index else 0
            if mp.isinf(slope):  # w_b = 0 with f'(0) = -inf: only lambda = 0 is exact
                needed = pb * nu - target  # mu_b, must be >= 0
                violation = max(-needed, 0) + abs(lam) * d
            else:
                needed = pb * (nu + lam * slope) - target
                violation = max(-needed, 0) if wb == 0 else abs(needed)
            size = pb * (abs(nu) + (0 if mp.isinf(slope) else abs(lam * slope)))
            worst = max(worst, violation / max(size, 1))
        primal = max(abs(mass - 1), max(div_value - d, 0) / d)
        m = mp.mpf(measure(float(w[index]))) if w[index] > 0 else mp.mpf(1)
        return KKTResiduals(float(primal), float(max(-lam, 0) * d / m),
                            float(abs(lam) * abs(div_value - d) / m), float(worst))
