"""kl: f(u) = u - 1 - log u, KL(pi_old || pi_new), the paper's divergence.

Edges: f(0) = inf (the band never saturates), f'(inf) = 1, f''(1) = 1. At
p = 1 the lower bound is exp(-delta). Possible issues: the lower bound
exp(-delta/p) underflows float64 for delta/p > 745 (it is then 0, and the
convex check works in log r).
"""

import math

from .._kernels import _vecmath as vm
from .._kernels._special import log1pmx, xlogx_m_xm1
from .._kernels._util import generator
from . import _exact
from ._record import Divergence, LogForm, MpGenerator, VectorForms


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):
    return -log1pmx(u, x)


@generator
def df(u, x, theta):
    # 1 - 1/u; x/u is exact near 1, and the plain form survives u = inf
    if u > 2.0:
        return 1.0 - 1.0 / u
    return x / u


@generator
def conjugate(v, x, theta):
    # f*(v) = v f(1/v) = v log v - v + 1
    return xlogx_m_xm1(v, x)


# --- vector (the fast path's SIMD loop) ---------------------------------------------
@vm.vector_form
def value_and_slope(u, x, theta):
    # f' = x/u, with the 1/u the logarithm's rounding correction forms anyway
    log_u, log_minus_x, inv_u = vm.vlog_pair_and_reciprocal(u, x)
    return -log_minus_x, x * inv_u


@vm.vector_form
def value_and_slope_at_log(log_u, u, x, x_m_log_u, theta):
    # f(e^L) = e^L - 1 - L, given, and its slope in L, e^L - 1: no
    # logarithm, no division
    return x_m_log_u, x


VECTOR_FORMS = VectorForms(value_and_slope, value_and_slope_at_log=value_and_slope_at_log,
                           g_rel_error=8 * vm.EPS)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return w - 1 - cp.log(w)


def convex_perspective(q, s, a):
    import cvxpy as cp

    return q - s + cp.rel_entr(s, q), []  # q - s - s log(q/s)


def convex_log(a):
    return LogForm(0.0, 0.0, -1.0)  # h(u) = -log u


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: x - _exact.log(u, x), lambda u, x: 1 - 1 / u,
                       mp.inf, -mp.inf, mp.mpf(1))


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: u - 1 - mp.log(u) if u > 0 else mp.inf), mp.mpf(1)


DIVERGENCE = Divergence(
    "kl", "u - 1 - log u", f, df, conjugate,
    f_at_zero=math.inf, slope_at_infinity=1.0, curvature_at_one=1.0,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    convex_log=convex_log, exact_form=exact_form, vector_forms=VECTOR_FORMS,
    textbook=textbook, verify_tolerance=1e-8)
