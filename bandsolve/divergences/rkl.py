"""rkl: f(u) = u log u - u + 1, KL(pi_new || pi_old).

Edges: f(0) = 1, f'(inf) = inf, f''(1) = 1. The upper bound saturates
(r = 1/p) iff -log p <= delta, the lower (r = 0) iff -log(1 - p) <= delta; at
p = 1 the lower bound is 1. Possible issues: for 1 - p below 1e-312 the lower
bound loses digits (docs/accuracy.md).
"""

import math

from .._kernels import _vecmath as vm
from .._kernels._special import log1pmx, log_exact, xlogx_m_xm1
from .._kernels._util import generator
from . import _exact
from ._record import Divergence, MpGenerator, VectorForms


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):
    return xlogx_m_xm1(u, x)


@generator
def df(u, x, theta):
    return log_exact(u, x)


@generator
def conjugate(v, x, theta):
    # f*(v) = v f(1/v) = v - 1 - log v
    return -log1pmx(v, x)


# --- vector (the fast path's SIMD loop) ---------------------------------------------
@vm.vector_form
def value_and_slope(u, x, theta):
    # f = u log u - x and f' = log u, from one logarithm
    return vm.vxlogx_m_xm1_and_log(u, x)


@vm.vector_form
def value_and_slope_at_log(log_u, u, x, x_m_log_u, theta):
    # f from the given L with no logarithm, and its slope in L, u f'(u) = u L
    return vm.vxlogx_m_xm1_at_log(log_u, u, x, x_m_log_u), u * log_u


VECTOR_FORMS = VectorForms(value_and_slope, value_and_slope_at_log=value_and_slope_at_log,
                           g_rel_error=8 * vm.EPS)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return cp.kl_div(w, 1)  # u log u - u + 1


def convex_perspective(q, s, a):
    import cvxpy as cp

    return cp.kl_div(q, s), []  # q log(q/s) - q + s


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: _exact.xlog(u, x) - x, _exact.log,
                       mp.mpf(1), -mp.inf, mp.inf)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: (u * mp.log(u) if u > 0 else mp.mpf(0)) - u + 1), mp.inf


DIVERGENCE = Divergence(
    "rkl", "u log u - u + 1", f, df, conjugate,
    f_at_zero=1.0, slope_at_infinity=math.inf, curvature_at_one=1.0,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    exact_form=exact_form, vector_forms=VECTOR_FORMS,
    textbook=textbook, verify_tolerance=3e-8)
