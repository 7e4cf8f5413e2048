"""le_cam: f(u) = (1 - u)^2 / (2 (1 + u)), Le Cam's triangular discrimination.

D(P||Q) = sum_b (P(b) - Q(b))^2 / (2 (P(b) + Q(b))): symmetric in P and Q,
bounded (by 1), and self-conjugate (v f(1/v) = f(v)). Within a factor 2 of
the squared Hellinger distance.

Edges: f(0) = 1/2, f'(inf) = 1/2, f''(1) = 1/2. The upper bound saturates
(r = 1/p) where g at the simplex end, (1 - p) / (1 + p), is at most delta,
the lower (r = 0) where p / (2 - p) is; at p = 1 the lower bound is the root
of f(r) + (1 - r)/2 = delta, r = (1 - delta) / (1 + delta) (0 for delta >= 1).
"""


from .._kernels import _vecmath as vm
from .._kernels._util import generator
from ._record import Divergence, MpGenerator, VectorForms


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):  # self-conjugate: v f(1/v) = (1 - v)^2 / (2 (1 + v)) = f(v)
    # x^2 / (2 (2 + x)), with x = u - 1 exact: no cancellation; x / (2 + x)
    # first so that x^2 cannot overflow, and its limit 1 where 2 + x is inf
    if u > 1e300:
        return 0.5 * x
    return 0.5 * x * (x / (2.0 + x))


@generator
def df(u, x, theta):
    # f'(u) = (u - 1)(u + 3) / (2 (u + 1)^2) = x (x + 4) / (2 (x + 2)^2)
    if u > 1e300:
        return 0.5
    return 0.5 * (x / (2.0 + x)) * ((4.0 + x) / (2.0 + x))


# --- vector (the fast path's SIMD loop) ---------------------------------------------
@vm.vector_form
def value_and_slope(u, x, theta):
    # u in [0, 2^61]: no overflow, so no select; one division shared
    ratio = x / (2.0 + x)
    return 0.5 * x * ratio, 0.5 * ratio * ((4.0 + x) / (2.0 + x))


@vm.vector_form
def value_and_slope_at_log(log_u, u, x, x_m_log_u, theta):
    # f has no logarithm to save; the slope in L is u f'(u)
    value, slope = value_and_slope(u, x, theta)
    return value, u * slope


VECTOR_FORMS = VectorForms(value_and_slope, value_and_slope_at_log=value_and_slope_at_log,
                           g_rel_error=8 * vm.EPS)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    # elementwise and DCP: (1 - w)^2 / (2 (1 + w)) = (w + 1)/2 - 2 + 2/(w + 1)
    return (w + 1) / 2 - 2 + 2 * cp.inv_pos(w + 1)


def convex_perspective(q, s, a):
    import cvxpy as cp

    return cp.quad_over_lin(q - s, 2 * (q + s)), []  # (q - s)^2 / (2 (q + s))


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: x * x / (2 * (2 + x)),
                       lambda u, x: x * (x + 4) / (2 * (x + 2) ** 2),
                       mp.mpf(1) / 2, -mp.mpf(3) / 2, mp.mpf(1) / 2)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: (1 - u) ** 2 / (2 * (1 + u))), mp.mpf(1) / 2


DIVERGENCE = Divergence(
    "le_cam", "(1 - u)^2 / (2 (1 + u))", f, df, f,
    f_at_zero=0.5, slope_at_infinity=0.5, curvature_at_one=0.5,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    exact_form=exact_form, vector_forms=VECTOR_FORMS,
    textbook=textbook, verify_tolerance=3e-9)
