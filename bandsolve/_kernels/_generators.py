"""Generators f(u), their derivatives and their conjugates, one per divergence.

All take ``(u, x, theta)`` with ``x = u - 1`` passed exactly, so each formula
can avoid cancellation on both sides: near u = 1 it works from x, near u = 0
from u. Every generator here is normalised to f(1) = f'(1) = 0, so f >= 0 and
the two terms of the binary divergence never cancel each other.

The conjugate ``f*(v) = v f(1/v)`` is what the solver evaluates where the
argument of f would be large: ``t f(1 + y/t) = (t + y) f*(t/(t + y))``. For
the built-in divergences f* is itself a built-in generator (kl <-> rkl,
chi2 <-> neyman_chi2, alpha(a) <-> alpha(1 - a); tv, hellinger and js are
self-conjugate), so it is evaluated without overflow or cancellation too.
"""

import math

from ._special import expm1mx, log1pmx, log_exact, xlogx_m_xm1
from ._util import generator, scaled_conjugate

_LOG2 = math.log(2.0)


# --- kl: f(u) = u - 1 - log u --------------------------------------------------
@generator
def kl_f(u, x, theta):
    return -log1pmx(u, x)


@generator
def kl_df(u, x, theta):
    # 1 - 1/u; x/u is exact near 1, and the plain form survives u = inf
    if u > 2.0:
        return 1.0 - 1.0 / u
    return x / u


# --- rkl: f(u) = u log u - u + 1 ------------------------------------------------
@generator
def rkl_f(u, x, theta):
    return xlogx_m_xm1(u, x)


@generator
def rkl_df(u, x, theta):
    return log_exact(u, x)


# --- tv: f(u) = |u - 1| / 2 -----------------------------------------------------
@generator
def tv_f(u, x, theta):
    return 0.5 * abs(x)


@generator
def tv_df(u, x, theta):
    if x == 0.0:
        return 0.0
    return math.copysign(0.5, x)


# --- chi2 (Pearson): f(u) = (u - 1)^2 -------------------------------------------
@generator
def chi2_f(u, x, theta):
    return x * x


@generator
def chi2_df(u, x, theta):
    return 2.0 * x


# --- neyman_chi2: f(u) = (u - 1)^2 / u ------------------------------------------
@generator
def neyman_f(u, x, theta):
    return x * x / u


@generator
def neyman_df(u, x, theta):
    # 1 - 1/u^2 = x (1 + u) / u^2, exact near u = 1
    if u > 2.0:
        return 1.0 - 1.0 / (u * u)
    return x * (1.0 + u) / (u * u)


# --- hellinger (squared, no 1/2): f(u) = (sqrt(u) - 1)^2 -------------------------
@generator
def hellinger_f(u, x, theta):
    s = math.sqrt(u) + 1.0
    return (x / s) * (x / s)


@generator
def hellinger_df(u, x, theta):
    # 1 - 1/sqrt(u) = x / ((sqrt(u) + 1) sqrt(u))
    r = math.sqrt(u)
    if u > 2.0:
        return 1.0 - 1.0 / r
    return x / ((r + 1.0) * r)


# --- js: f(u) = (u log u - (1 + u) log((1 + u)/2)) / 2 ---------------------------
@generator
def js_f(u, x, theta):
    # With phi(x) = (1+x) log(1+x) - x: f = (phi(x) - 2 phi(x/2)) / 2, where the
    # linear parts cancel exactly and the rest cancels by at most a factor 2.
    return 0.5 * (xlogx_m_xm1(u, x) - 2.0 * xlogx_m_xm1(0.5 + 0.5 * u, 0.5 * x))


@generator
def js_df(u, x, theta):
    # f'(u) = log(2u / (1 + u)) / 2 = log1p(x / (1 + u)) / 2
    if u > 1e300:
        return 0.5 * _LOG2
    return 0.5 * math.log1p(x / (1.0 + u))


# --- alpha (Amari): f(u) = (u^a - 1 - a (u - 1)) / (a (a - 1)) -------------------
def _alpha_core_py(u, x, a):
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


_alpha_core = generator(_alpha_core_py)


@generator
def alpha_f(u, x, a):
    if a <= 0.5:
        return _alpha_core(u, x, a)
    # f_a(u) = u f_{1-a}(1/u), and 1 - a < 1/2 is evaluated without cancellation
    if u < 1e-290:
        # f(u) = f(0) + O(u^a) with a > 1/2: below 1e-145 relative, and 1/u
        # would overflow for subnormal u
        return 1.0 / a
    return u * _alpha_core(1.0 / u, -x / u, 1.0 - a)


@generator
def alpha_df(u, x, a):
    # f'(u) = (u^(a-1) - 1) / (a - 1)
    return math.expm1((a - 1.0) * log_exact(u, x)) / (a - 1.0)


@generator
def alpha_conjugate_f(v, x, a):
    return alpha_f(v, x, 1.0 - a)


@scaled_conjugate
def alpha_scaled_conjugate(s, v, x, a):
    """s f*(v) where f*(v) overflows: a > 1, v tiny. With c = 1 - a < 0,
    f*(v) = (v^c - 1 - c (v - 1)) / (c (c - 1)), and s v^c is formed as
    exp(log s + c log v - log(c (c - 1))), finite where the product is
    (p = 1e-300 at delta = 1e75: v^c = 1e313, s v^c = 1e77). Its error is
    eps times |log s| + |c log v|, about 1e-13 relative in g, a / 1e-13 in
    the bound. +inf only where s f*(v) itself exceeds float64."""
    c = 1.0 - a
    if c >= 0.0:  # a <= 1: f*(v) <= f*(0) is finite, nothing to rescale
        return s * alpha_f(v, x, c)
    scale = c * (c - 1.0)
    return math.exp(math.log(s) + c * math.log(v) - math.log(scale)) \
        - s * ((1.0 + c * x) / scale)


@scaled_conjugate
def scaled_conjugate_unknown(s, v, x, theta):
    """The default: no overflow-free form, so an overflow stays unresolved
    (NaN: the solver reports a bound next to it as OVERFLOW)."""
    return math.nan
