"""Generators f as DCP expressions, for the cvxpy backend, in three forms.

* **Ratio form** ``f(w)``, elementwise in the ratios w = pi_new / pi_old:
  ``Divergence.convex_generator``. A divergence is then
  sum_b pi_old(b) f(w_b), a nonnegative Parameter times a convex expression.
  Every form is the normalised generator (f(1) = f'(1) = 0), so each term is
  >= 0 and small deltas are not lost to cancelling first-order terms.
* **Perspective form** ``s f(q / s)``, jointly convex in a token's scaled new
  and old probabilities (q, s). A token of small probability whose ratio is
  large (1e6 at p = 1e-6) keeps every cone entry of order q, where the ratio
  form puts 1e6 (or its square) inside the cone next to a weight of 1e-6,
  and interior-point tolerances, which scale with the largest entry, lose
  that many digits. At s = 0 it is the recession term q f'(inf), the p = 1
  limit, with no special case.
* **Log form**, for generators with a finite slope f'(inf): the reduced
  generator h(u) = f(u) - f'(inf) (u - 1) is convex and nonincreasing, and
  h(e^y) = A e^(k y) + B y - A is convex in y. Since sum_b pi_old(b) (w_b - 1) = 0,
  D_f = sum_b pi_old(b) h(w_b): a lower bound near 0 can be solved for y = log r,
  whose absolute tolerance is a relative one on r, down to ratios below the
  float64 range (kl's lower bound, exp(-delta/p), reaches 1e-4343 at p = 1e-5).
  The other tokens enter through h too (their form minus f'(inf) times the
  linear term): nonincreasing, so the mass constraint, which e^y makes
  convex, may be relaxed to <= 1 without changing the optimum.

cvxpy is imported inside the functions: importing bandsolve does not.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import NamedTuple

# --- ratio forms: Divergence.convex_generator --------------------------------

def kl_generator(w, a):
    import cvxpy as cp

    return w - 1 - cp.log(w)  # u - 1 - log u


def rkl_generator(w, a):
    import cvxpy as cp

    return cp.kl_div(w, 1)  # u log u - u + 1


def tv_generator(w, a):
    import cvxpy as cp

    return cp.abs(w - 1) / 2


def chi2_generator(w, a):
    import cvxpy as cp

    return cp.square(w - 1)


def neyman_generator(w, a):
    import cvxpy as cp

    return w - 2 + cp.inv_pos(w)  # (u - 1)^2 / u


def hellinger_generator(w, a):
    import cvxpy as cp

    return w + 1 - 2 * cp.sqrt(w)  # (sqrt u - 1)^2


def js_generator(w, a):
    import cvxpy as cp

    mix = (w + 1) / 2  # the Jensen-Shannon midpoint, in ratio units
    return (cp.kl_div(w, mix) + cp.kl_div(1, mix)) / 2


def alpha_generator(w, a):
    import cvxpy as cp

    # w^a is convex for a > 1 or a < 0 and concave for 0 < a < 1, where the
    # sign of a (a - 1) flips it: convex for every a not 0 or 1
    return (cp.power(w, a) - 1 - a * (w - 1)) / (a * (a - 1))


# --- perspective forms: (q, s, a) -> (s f(q/s), extra constraints) ----------
# q and s are scalar cvxpy Variables, s >= 0.

def _kl_perspective(q, s, a):
    import cvxpy as cp

    return q - s + cp.rel_entr(s, q), []  # q - s - s log(q/s)


def _rkl_perspective(q, s, a):
    import cvxpy as cp

    return cp.kl_div(q, s), []  # q log(q/s) - q + s


def _tv_perspective(q, s, a):
    import cvxpy as cp

    return cp.abs(q - s) / 2, []


def _chi2_perspective(q, s, a):
    import cvxpy as cp

    return cp.quad_over_lin(q - s, s), []  # (q - s)^2 / s


def _neyman_perspective(q, s, a):
    import cvxpy as cp

    return cp.quad_over_lin(q - s, q), []  # (q - s)^2 / q


def _hellinger_perspective(q, s, a):
    import cvxpy as cp

    return q + s - 2 * cp.geo_mean(cp.hstack([q, s])), []  # (sqrt q - sqrt s)^2


def _js_perspective(q, s, a):
    import cvxpy as cp

    mix = (q + s) / 2
    return (cp.kl_div(q, mix) + cp.kl_div(s, mix)) / 2, []


def _alpha_perspective(q, s, a):
    """(q^a s^(1-a) - s - a (q - s)) / (a (a - 1)) through one power cone,
    PowCone3D(x, y, z, t): x^t y^(1-t) >= |z|, with the exponent exact (cvxpy's
    power and geo_mean round it to a fraction)."""
    import cvxpy as cp

    t = cp.Variable(nonneg=True)
    if a > 1:  # t >= q^a s^(1-a)  <=>  t^(1/a) s^(1-1/a) >= q
        cone = cp.PowCone3D(t, s, q, 1.0 / a)
    elif a < 0:  # t >= q^a s^(1-a)  <=>  t^(1/(1-a)) q^(-a/(1-a)) >= s
        cone = cp.PowCone3D(t, q, s, 1.0 / (1.0 - a))
    else:  # 0 < a < 1: t <= q^a s^(1-a), and the term decreases in t
        cone = cp.PowCone3D(q, s, t, a)
    return (t - s - a * (q - s)) / (a * (a - 1)), [cone]


# --- log forms ---------------------------------------------------------------

class LogForm(NamedTuple):
    """h(e^y) = exp_coefficient e^(exponent y) + log_coefficient y - exp_coefficient,
    with h(u) = f(u) - f'(inf) (u - 1), convex in y."""

    exp_coefficient: float
    exponent: float
    log_coefficient: float


_PERSPECTIVES = MappingProxyType({
    kl_generator: _kl_perspective, rkl_generator: _rkl_perspective,
    tv_generator: _tv_perspective, chi2_generator: _chi2_perspective,
    neyman_generator: _neyman_perspective, hellinger_generator: _hellinger_perspective,
    js_generator: _js_perspective, alpha_generator: _alpha_perspective,
})


def perspective_form(generator) -> Callable | None:
    """The perspective form of a built-in ratio form, or None (a user's form:
    the caller falls back to ``cvxpy.perspective``)."""
    return _PERSPECTIVES.get(generator)


def log_form(generator, a: float) -> LogForm | None:
    """The log form of a built-in ratio form where one exists: kl, neyman_chi2
    and alpha with a < 0 (the generators with f(0) = inf and a finite f'(inf),
    whose lower bounds get arbitrarily small); None otherwise."""
    if generator is kl_generator:  # h(u) = -log u
        return LogForm(0.0, 0.0, -1.0)
    if generator is neyman_generator:  # h(u) = 1/u - 1
        return LogForm(1.0, -1.0, 0.0)
    if generator is alpha_generator and a < 0:  # h(u) = (u^a - 1) / (a (a - 1))
        return LogForm(1.0 / (a * (a - 1)), a, 0.0)
    return None
