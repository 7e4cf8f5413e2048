"""alpha:<a>, the Amari family: f(u) = (u^a - 1 - a (u - 1)) / (a (a - 1)).

``a -> 0`` gives kl, ``a -> 1`` gives rkl, and ``a = 2`` gives chi2 / 2. One
set of compiled kernels serves every a: it is a run-time argument (the
``parameter`` of every form).

Edges::

    f(0)    = 1/a        (a > 0),    inf      (a < 0)
    f'(inf) = 1/(1 - a)  (a < 1),    inf      (a > 1)

so only a > 0 saturates, and the lower bound at p = 1 is 1 for a >= 1.
Possible issues: for a > 1, g overflows float64 next to the root at radii
far beyond any trust region (delta near 1e300 at tiny p, docs/accuracy.md);
``band`` reports it.
"""

import dataclasses
import math

from .._kernels import _vecmath as vm
from .._kernels._special import expm1mx, log1pmx, log_exact
from .._kernels._util import generator
from .._kernels._util import scaled_conjugate as _scaled_conjugate_form
from . import _exact
from . import kl as _kl
from ._record import Divergence, LogForm, MpGenerator, VectorForms


# --- numba ---------------------------------------------------------------------
@generator
def _core(u, x, a):
    # Valid for a <= 1/2, a != 0. There the two pieces below cancel by at most
    # a factor 2; for a near 1 the caller uses the conjugate instead.
    if u == 0.0:
        return 1.0 / a if a > 0.0 else math.inf
    if u == math.inf:
        return math.inf
    log_u = log_exact(u, x)
    if a * log_u > 700.0:
        # (a < 0, u < 1) u^a overflows float64 before the division by
        # a (a - 1) brings f back into range (a = -1e9 divides by 1e18, and
        # u = 1 - 7e-7 already gives u^a = e^700): form u^a / (a (a - 1))
        # as w (w / (a (a - 1))) with w = u^(a/2). The other terms are below
        # 1e-290 relative to it.
        scale = a * (a - 1.0)
        half_power = u ** (0.5 * a)
        return (half_power / scale) * half_power
    if abs(log_u) <= 3.0:
        # u^a - 1 - a x = (e^{aL} - 1 - aL) + a (L - x)
        numerator = expm1mx(a * log_u) + a * log1pmx(u, x)
    elif abs(a * log_u) < 1.0:
        # a small: u^a - 1 = expm1(a log u) keeps the digits that u**a - 1
        # would cancel (a factor 1 / |a log u|)
        numerator = math.expm1(a * log_u) - a * x
    else:
        # u ** a rather than exp(a log u): the latter amplifies the rounding
        # of log u by |a log u|, up to 1e-13 at u = 1e-300
        numerator = u**a - 1.0 - a * x
    return numerator / (a * (a - 1.0))


@generator
def f(u, x, a):
    if a <= 0.5:
        return _core(u, x, a)
    # f_a(u) = u f_{1-a}(1/u), and 1 - a < 1/2 is evaluated without cancellation
    if u < 1e-290:
        # f(u) = f(0) + O(u^a) with a > 1/2: below 1e-145 relative, and 1/u
        # would overflow for subnormal u
        return 1.0 / a
    return u * _core(1.0 / u, -x / u, 1.0 - a)


@generator
def df(u, x, a):
    # f'(u) = (u^(a-1) - 1) / (a - 1)
    return math.expm1((a - 1.0) * log_exact(u, x)) / (a - 1.0)


@generator
def conjugate(v, x, a):
    # f*_a = f_(1 - a)
    return f(v, x, 1.0 - a)


@_scaled_conjugate_form
def scaled_conjugate(s, v, x, a):
    """s f*(v) where f*(v) overflows: a > 1, v tiny. With c = 1 - a < 0,
    f*(v) = (v^c - 1 - c (v - 1)) / (c (c - 1)), and s v^c is formed as
    exp(log s + c log v - log(c (c - 1))), finite where the product is
    (p = 1e-300 at delta = 1e75: v^c = 1e313, s v^c = 1e77). Its error is
    eps times |log s| + |c log v|, about 1e-13 relative in g, a / 1e-13 in
    the bound. +inf only where s f*(v) itself exceeds float64."""
    c = 1.0 - a
    if c >= 0.0:  # a <= 1: f*(v) <= f*(0) is finite, nothing to rescale
        return s * f(v, x, c)
    scale = c * (c - 1.0)
    return math.exp(math.log(s) + c * math.log(v) - math.log(scale)) \
        - s * ((1.0 + c * x) / scale)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    # w^a is convex for a > 1 or a < 0 and concave for 0 < a < 1, where the
    # sign of a (a - 1) flips it: convex for every a not 0 or 1
    return (cp.power(w, a) - 1 - a * (w - 1)) / (a * (a - 1))


def convex_perspective(q, s, a):
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


def convex_log(a):
    # h(u) = (u^a - 1) / (a (a - 1)) for a < 0, where f(0) = inf and f'(inf) is finite
    return LogForm(1.0 / (a * (a - 1)), a, 0.0) if a < 0 else None


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    a = mp.mpf(a)

    def exact_f(u, x):  # (u^a - 1 - a x) / (a (a - 1)), u^a - 1 = expm1(a log1p(x))
        if u == 0:
            return 1 / a if a > 0 else mp.inf
        return (mp.expm1(a * _exact.log(u, x)) - a * x) / (a * (a - 1))

    def exact_df(u, x):  # (u^(a-1) - 1) / (a - 1)
        if u == 0:
            return -1 / (a - 1) if a > 1 else -mp.inf
        return mp.expm1((a - 1) * _exact.log(u, x)) / (a - 1)

    return MpGenerator(exact_f, exact_df, 1 / a if a > 0 else mp.inf,
                       -1 / (a - 1) if a > 1 else -mp.inf, 1 / (1 - a) if a < 1 else mp.inf)


# --- vector (the fast path's SIMD loop) ---------------------------------------------
# With L = log u: (e^{aL} - 1 - aL) + a (L - x) near u = 1, expm1(aL) - a x
# elsewhere, both computed and one selected (no branch)
@vm.vector_form
def value_and_slope(u, x, a):
    # f' = (u^(a-1) - 1) / (a - 1) = expm1((a - 1) L) / (a - 1), from the same L
    log_u, log_minus_x = vm.vlog_pair(u, x)
    y = a * log_u
    # one expm1 for both (e^y - 1 - y on its own would take its own expm1)
    expm1_y = vm.vexpm1(y)
    near = (y * y * vm.taylor_tail(y) if abs(y) < 0.5 else expm1_y - y) + a * log_minus_x
    far = expm1_y - a * x
    value = (near if abs(log_u) <= 3.0 else far) / (a * (a - 1.0))
    return value, vm.vexpm1((a - 1.0) * log_u) / (a - 1.0)


@vm.vector_form
def value_and_slope_at_log(log_u, u, x, x_m_log_u, a):
    # as value_and_slope, from the given L: near u = 1 the second term is
    # a (L - x) = -a (u - 1 - L); no logarithm. The slope in L is
    # u f'(u) = (u^a - u) / (a - 1): u expm1((a - 1) L) near u = 1, and
    # e^(aL) - u beyond, where u^(a-1) alone may overflow (a < 0, u tiny)
    y = a * log_u
    exp_y, expm1_y, _ = vm.vexp_parts(y)
    near = (y * y * vm.taylor_tail(y) if abs(y) < 0.5 else expm1_y - y) - a * x_m_log_u
    far = expm1_y - a * x
    is_near = abs(log_u) <= 3.0
    value = (near if is_near else far) / (a * (a - 1.0))
    slope = u * vm.vexpm1((a - 1.0) * log_u) if is_near else exp_y - u
    return value, slope / (a - 1.0)


def vector_forms(a: float) -> VectorForms:
    """The vector forms at ``a``: e^{aL} carries L's rounding times |a L|
    (|L| <= 43 where the fast path evaluates f), and near u = 1 the two terms
    cancel by up to 1 / |1 - a|; a large bound only sends more elements to
    the root finder."""
    return VectorForms(value_and_slope, value_and_slope_at_log=value_and_slope_at_log,
                       g_rel_error=(16.0 + 90.0 * abs(a) + 8.0 / abs(1.0 - a)) * vm.EPS)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    a = mp.mpf(parameter)

    def f(u):
        if u == 0:
            return 1 / a if a > 0 else mp.inf
        return (u**a - 1 - a * (u - 1)) / (a * (a - 1))

    return f, (1 / (1 - a) if a < 1 else mp.inf)


def _parameter_text(a: float) -> str:
    """The shortest text that reads back as ``a`` (repr), without a trailing
    ".0": a name that rounds (":g" made 2.0000001 "alpha:2") resolves to
    another divergence, and a table exported under it failed its own check."""
    text = repr(a)
    return text[:-2] if text.endswith(".0") else text


#: The parameters every backend's tests and ``bandsolve verify`` sample the
#: family at (a > 1, 0 < a < 1, a < 0), each with its verify tolerance
#: (``Divergence.verify_tolerance``; 1e-7 for any other a).
SAMPLES = {0.5: 1e-7, 2.0: 3e-7, -1.0: 3e-8}


#: The largest |a| accepted: verified against an mpmath reference up to it
#: (an outside tester's sweep); at |a| = 1e20 g overflows next to the root.
ALPHA_MAX = 1e12


def alpha_divergence(a: float) -> Divergence:
    """The Amari alpha-divergence, f(u) = (u^a - 1 - a (u - 1)) / (a (a - 1)).

    ``a -> 0`` gives kl, ``a -> 1`` gives rkl, and ``a = 2`` gives chi2 / 2.
    Where 1 - a rounds to 1 (0 < |a| <= about 1e-16) the result is kl under
    the name ``alpha:<a>``: the two agree there to float64 precision.

    Raises
    ------
    ValueError
        If a is 0, 1, or not finite (use ``"kl"`` / ``"rkl"`` for the limits),
        or |a| > ALPHA_MAX = 1e12, the range verified against mpmath.
    """
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise TypeError(f"the alpha parameter must be a real number (got {a!r})") from None
    if not math.isfinite(a) or a in (0.0, 1.0):
        raise ValueError(
            f"the alpha parameter must be finite and not 0 or 1 (got {a}); "
            "use divergence='kl' for a -> 0 and 'rkl' for a -> 1"
        )
    if not abs(a) <= ALPHA_MAX:
        raise ValueError(
            f"the alpha parameter must satisfy |a| <= {ALPHA_MAX:g} (got {a:g}): beyond "
            "that u^a leaves float64 for u within 1e-10 of 1, so g cannot be evaluated "
            "next to the root, and the band is 1 to within O(1/|a|) anyway")
    if 1.0 - a == 1.0:
        # |a| <= 2^-54 (2^-53 for a < 0): 1 - a rounds to 1, so the conjugate
        # alpha(1 - a) would divide by zero. Such an f_a differs from the kl
        # generator by a |log u|^2 / 2, below 5e-14 relative for every float64
        # u > 0, so kl is f_a to within the bounds' tolerance. (f_a(0) = 1/a
        # > 1e16 is finite, but saturating on it needs delta > 1e16 b, where
        # kl's bound is the same float: its u2 = e^(-delta/b) underflows.)
        kl = _kl.DIVERGENCE
        return dataclasses.replace(kl, name=f"alpha:{_parameter_text(a)}",
                                   formula=f"{kl.formula} (the a -> 0 limit, a = {a:g})")
    return Divergence(
        name=f"alpha:{_parameter_text(a)}",
        formula=f"(u^a - 1 - a(u - 1)) / (a(a - 1)), a = {a:g}",
        f=f, df=df, f_conjugate=conjugate, scaled_conjugate=scaled_conjugate,
        f_at_zero=1.0 / a if a > 0 else math.inf,
        slope_at_infinity=1.0 / (1.0 - a) if a < 1 else math.inf,
        curvature_at_one=1.0,
        parameter=a,
        convex_generator=convex_generator, convex_perspective=convex_perspective,
        convex_log=convex_log, exact_form=exact_form, vector_forms=vector_forms(a),
        # for a > 1, f(r) <= r^a / (a (a - 1)), short by (1 - a + a r) / r^a,
        # below e^-600 wherever r^a / (a (a - 1)) > e^1390 at r < 1.8e308
        growth_at_infinity=(a, -math.log(a * (a - 1.0))) if a > 1.0 else None,
        verify_tolerance=SAMPLES.get(a, 1e-7), textbook=textbook,
    )
