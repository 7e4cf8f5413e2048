"""tv: f(u) = |u - 1| / 2, total variation; a closed form.

Edges: f(0) = 1/2, f'(inf) = 1/2, f''(1) = 0 (f is not smooth at 1). The band
is r = 1 -/+ delta/p, clipped to [0, 1/p]; at p = 1 the lower bound is
max(1 - delta, 0).
"""

import math

from .._kernels._util import closed_form, generator
from ._record import Divergence, MpGenerator


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):  # self-conjugate: v f(1/v) = f(v)
    return 0.5 * abs(x)


@generator
def df(u, x, theta):
    if x == 0.0:
        return 0.0
    return math.copysign(0.5, x)


@closed_form
def margins(a, b, delta, theta):
    # g(m) = |m|
    return min(delta, b), min(delta, a)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return cp.abs(w - 1) / 2


def convex_perspective(q, s, a):
    import cvxpy as cp

    return cp.abs(q - s) / 2, []


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: abs(x) / 2, lambda u, x: mp.sign(x) / 2,
                       mp.mpf(1) / 2, -mp.mpf(1) / 2, mp.mpf(1) / 2)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: abs(u - 1) / 2), mp.mpf(1) / 2


DIVERGENCE = Divergence(
    "tv", "|u - 1| / 2", f, df, f,
    f_at_zero=0.5, slope_at_infinity=0.5, curvature_at_one=0.0, margins=margins,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    exact_form=exact_form, textbook=textbook, verify_tolerance=1e-8)
