"""js: Jensen-Shannon, f(u) = (u log u - (1 + u) log((1 + u)/2)) / 2.

Edges: f(0) = log(2)/2, f'(inf) = log(2)/2, f''(1) = 1/4. Saturates where g
at the simplex end is <= delta; at p = 1 the lower bound is the root of
f(r) + (1 - r) log(2)/2 = delta.
"""

import math

from .._kernels import _vecmath as vm
from .._kernels._special import xlogx_m_xm1
from .._kernels._util import generator
from . import _exact
from ._record import Divergence, MpGenerator, VectorForms

_LOG2 = math.log(2.0)


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):  # self-conjugate: v f(1/v) = f(v)
    # With phi(x) = (1+x) log(1+x) - x: f = (phi(x) - 2 phi(x/2)) / 2, where the
    # linear parts cancel exactly and the rest cancels by at most a factor 2.
    return 0.5 * (xlogx_m_xm1(u, x) - 2.0 * xlogx_m_xm1(0.5 + 0.5 * u, 0.5 * x))


@generator
def df(u, x, theta):
    # f'(u) = log(2u / (1 + u)) / 2 = log1p(x / (1 + u)) / 2
    if u > 1e300:
        return 0.5 * _LOG2
    return 0.5 * math.log1p(x / (1.0 + u))


# --- vector (the fast path's SIMD loop) ---------------------------------------------
@vm.vector_form
def value_and_slope(u, x, theta):
    # f = (phi(x) - 2 phi(x/2)) / 2 with phi(x) = (1+x) log(1+x) - x, and
    # f' = (log u - log((1 + u)/2)) / 2, from the same two logarithms
    phi_u, log_u = vm.vxlogx_m_xm1_and_log(u, x)
    phi_mid, log_mid = vm.vxlogx_m_xm1_and_log(0.5 + 0.5 * u, 0.5 * x)
    return 0.5 * (phi_u - 2.0 * phi_mid), 0.5 * (log_u - log_mid)


@vm.vector_form
def value_and_slope_at_log(log_u, u, x, x_m_log_u, theta):
    # as value_and_slope, with phi(x) and log u from the given log u: one
    # logarithm, of the midpoint (1 + u)/2; the slope in L is u f'(u)
    phi_u = vm.vxlogx_m_xm1_at_log(log_u, u, x, x_m_log_u)
    phi_mid, log_mid = vm.vxlogx_m_xm1_and_log(0.5 + 0.5 * u, 0.5 * x)
    return 0.5 * (phi_u - 2.0 * phi_mid), 0.5 * u * (log_u - log_mid)


# 64 eps, not 16: phi(u) - 2 phi((1 + u)/2) cancels where u is large (an
# mpmath check of g found 47 eps at u = 7e14); a larger bound only sends
# more elements to the root finder (0.8% to 1.3% of a 1e6 sample)
VECTOR_FORMS = VectorForms(value_and_slope, value_and_slope_at_log=value_and_slope_at_log,
                           g_rel_error=64 * vm.EPS)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    mix = (w + 1) / 2  # the Jensen-Shannon midpoint, in ratio units
    return (cp.kl_div(w, mix) + cp.kl_div(1, mix)) / 2


def convex_perspective(q, s, a):
    import cvxpy as cp

    mix = (q + s) / 2
    return (cp.kl_div(q, mix) + cp.kl_div(s, mix)) / 2, []


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    def exact_f(u, x):  # (u log u - (1 + u) log((1 + u)/2)) / 2
        return (_exact.xlog(u, x) - (2 + x) * mp.log1p(x / 2)) / 2

    def exact_df(u, x):  # log(2u / (1 + u)) / 2
        return (_exact.log(u, x) - mp.log1p(x / 2)) / 2

    return MpGenerator(exact_f, exact_df, mp.log(2) / 2, -mp.inf, mp.log(2) / 2)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    def f(u):
        u_log_u = u * mp.log(u) if u > 0 else mp.mpf(0)
        return (u_log_u - (1 + u) * mp.log((1 + u) / 2)) / 2

    return f, mp.log(2) / 2


DIVERGENCE = Divergence(
    "js", "(u log u - (1 + u) log((1 + u)/2)) / 2", f, df, f,
    f_at_zero=_LOG2 / 2, slope_at_infinity=_LOG2 / 2, curvature_at_one=0.25,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    exact_form=exact_form, vector_forms=VECTOR_FORMS,
    textbook=textbook, verify_tolerance=3e-8)
