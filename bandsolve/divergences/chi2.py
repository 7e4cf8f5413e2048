"""chi2 (Pearson): f(u) = (u - 1)^2; a closed form.

Edges: f(0) = 1, f'(inf) = inf, f''(1) = 2. The band is
r = 1 -/+ sqrt(delta (1 - p) / p), clipped to [0, 1/p]; at p = 1 the lower
bound is 1. The upward margin p (r_hi - 1) = sqrt(delta p (1 - p)) vanishes
as p -> 0.
"""

import math

from .._kernels._util import closed_form, generator
from ._record import Divergence, MpGenerator


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):
    return x * x


@generator
def df(u, x, theta):
    return 2.0 * x


@generator
def conjugate(v, x, theta):
    # f*(v) = v f(1/v) = (v - 1)^2 / v
    return x * x / v


@closed_form
def margins(a, b, delta, theta):
    # g(m) = m^2 / (a b) = delta at m = sqrt(delta) sqrt(a b). sqrt(delta) is
    # the same for every element of a one-delta batch (LLVM hoists it out of
    # the loop), so the loop takes one root per element, and no branch. a b
    # is exact wherever it could be subnormal (a + b = 1: the smaller of the
    # two is below 2^-54 there, and the larger rounds to 1), and delta no
    # longer multiplies into it, so nothing underflows early
    m = math.sqrt(delta) * math.sqrt(a * b)
    return min(m, b), min(m, a)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return cp.square(w - 1)


def convex_perspective(q, s, a):
    import cvxpy as cp

    return cp.quad_over_lin(q - s, s), []  # (q - s)^2 / s


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: x * x, lambda u, x: 2 * x, mp.mpf(1), mp.mpf(-2), mp.inf)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: (u - 1) ** 2), mp.inf


DIVERGENCE = Divergence(
    "chi2", "(u - 1)^2", f, df, conjugate,
    f_at_zero=1.0, slope_at_infinity=math.inf, curvature_at_one=2.0, margins=margins,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    # (r - 1)^2 <= r^2, equal to 2/r relative (below e^-690 where r^2 > e^1390)
    growth_at_infinity=(2.0, 0.0),
    exact_form=exact_form, textbook=textbook, verify_tolerance=1e-7)
