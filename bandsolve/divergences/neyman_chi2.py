"""neyman_chi2: f(u) = (u - 1)^2 / u, Neyman's chi-square; a closed form.

Edges: f(0) = inf (never saturates), f'(inf) = 1, f''(1) = 2. At p = 1 the
lower bound is 1 / (1 + delta).
"""

import math

from .._kernels._util import closed_form, generator
from ._record import Divergence, LogForm, MpGenerator


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):
    return x * x / u


@generator
def df(u, x, theta):
    # 1 - 1/u^2 = x (1 + u) / u^2, exact near u = 1
    if u > 2.0:
        return 1.0 - 1.0 / (u * u)
    return x * (1.0 + u) / (u * u)


@generator
def conjugate(v, x, theta):
    # f*(v) = v f(1/v) = (v - 1)^2
    return x * x


@closed_form
def margins(a, b, delta, theta):
    # g(m) = m^2 / (q (1 - q)), q = a + m: (1 + d) m^2 - d (b - a) m - d a b = 0,
    # with discriminant d (d + 4ab) since (b - a)^2 + 4ab = 1. Of the two
    # roots' formulas, the one whose terms do not cancel is used for each.
    # Both are written in k = 1/d with the root sqrt(1 + 4ab k): the same
    # algebra divided through by d, so that no product overflows for any
    # finite d (at d near float64's maximum, d (b - a) + d would be inf).
    if delta <= 1.0:
        root = math.sqrt(delta) * math.sqrt(delta + 4.0 * a * b)
        direct_hi = (delta * (b - a) + root) / (2.0 * (1.0 + delta))
        direct_lo = (delta * (a - b) + root) / (2.0 * (1.0 + delta))
        if b >= a:  # the upper formula adds, the lower one would cancel
            # the smaller of a, b multiplies last, so a subnormal one does not underflow
            return direct_hi, (2.0 * delta * b / (root + delta * (b - a))) * a
        return (2.0 * delta * a / (root + delta * (a - b))) * b, direct_lo
    k = 1.0 / delta
    root = math.sqrt(1.0 + 4.0 * a * b * k)
    if b >= a:
        return ((b - a) + root) / (2.0 * (k + 1.0)), (2.0 * b / (root + (b - a))) * a
    return (2.0 * a / (root + (a - b))) * b, ((a - b) + root) / (2.0 * (k + 1.0))


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return w - 2 + cp.inv_pos(w)  # (u - 1)^2 / u


def convex_perspective(q, s, a):
    import cvxpy as cp

    return cp.quad_over_lin(q - s, q), []  # (q - s)^2 / q


def convex_log(a):
    return LogForm(1.0, -1.0, 0.0)  # h(u) = 1/u - 1


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: x * x / u, lambda u, x: 1 - 1 / (u * u),
                       mp.inf, -mp.inf, mp.mpf(1))


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: (u - 1) ** 2 / u if u > 0 else mp.inf), mp.mpf(1)


def textbook_band(parameter):
    """The band in closed form, in mpmath: the two roots r of
    p (r - 1)^2 = d r (1 - p r) (g(r) = delta), by the quadratic formula."""
    import mpmath as mp

    def band(p, d):
        p, d = mp.mpf(p), mp.mpf(d)
        root = mp.sqrt(d * (d + 4 * p * (1 - p)))
        return (2 * p + d - root) / (2 * p * (1 + d)), (2 * p + d + root) / (2 * p * (1 + d))

    return band


DIVERGENCE = Divergence(
    "neyman_chi2", "(u - 1)^2 / u", f, df, conjugate,
    f_at_zero=math.inf, slope_at_infinity=1.0, curvature_at_one=2.0, margins=margins,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    convex_log=convex_log, exact_form=exact_form, textbook=textbook, verify_tolerance=3e-8,
    textbook_band=textbook_band,
    # issue 18: a 6.6e-8 difference inside a 1e-7 wide certified interval,
    # and a program whose every rung ended 'optimal_inaccurate'
    hard_points=((2.6999999999999975e-05, 0.00586), (1 - 2.9e-05, 0.005)))
