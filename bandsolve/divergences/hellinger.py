"""hellinger (squared, without the 1/2): f(u) = (sqrt(u) - 1)^2; a closed form.

Edges: f(0) = 1, f'(inf) = 1, f''(1) = 1/2. With sin t = sqrt(p) and
cos w = 1 - delta/2 the bounds move to the angle t +- w and saturate when it
leaves [0, pi/2]; at p = 1 the lower bound is (1 - delta/2)^2.
"""

import math

from .._kernels._util import closed_form, generator, jit
from ._record import Divergence, MpGenerator


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):  # self-conjugate: v f(1/v) = f(v)
    s = math.sqrt(u) + 1.0
    return (x / s) * (x / s)


@generator
def df(u, x, theta):
    # 1 - 1/sqrt(u) = x / ((sqrt(u) + 1) sqrt(u))
    r = math.sqrt(u)
    if u > 2.0:
        return 1.0 - 1.0 / r
    return x / ((r + 1.0) * r)


@jit
def _margin(sin_t, cos_t, cos_2t, cross, sin_w, cos_w, end):
    """sin(w) sin(2t + w), the move from the angle t by w, or ``end`` once it
    saturates (w >= pi/2 - t), from sines and cosines alone.

    sin(2t + w) = sin(2t) cos(w) + cos(2t) sin(w), with cross = sin(2t) cos(w).
    For t > pi/4 the two terms have opposite signs, but before saturation the
    sum is at least half the larger one: at most one bit is lost. Saturation
    compares whichever function is small at w (the sine below pi/4, the cosine
    above it), so that no comparison rounds to 1 = 1 for tiny p or delta.
    """
    if cos_w >= sin_w:
        saturated = sin_w >= cos_t  # sin(w) >= sin(pi/2 - t)
    else:
        saturated = cos_w <= sin_t  # cos(w) <= cos(pi/2 - t)
    if saturated:
        return end
    return min(sin_w * (cross + cos_2t * sin_w), end)


@closed_form
def margins(a, b, delta, theta):
    # With t the angle of sqrt(a) (sin t = sqrt(a), cos t = sqrt(b)) and
    # w = arccos(1 - delta/2): q = sin^2(t + w), so m_hi = sin^2(t + w) - sin^2(t)
    # = sin(w) sin(2t + w), saturating once w >= pi/2 - t. The lower margin
    # swaps t and its complement. All in square roots: no trigonometric call.
    if delta >= 2.0:
        return b, a
    sin_t = math.sqrt(a)
    cos_t = math.sqrt(b)
    cos_w = 1.0 - 0.5 * delta
    sin_w = math.sqrt(delta) * math.sqrt(1.0 - 0.25 * delta)
    cross = 2.0 * sin_t * cos_t * cos_w  # sin(2t) cos(w), the same for both
    # cos(2t) = b - a; the complement's is a - b
    return (_margin(sin_t, cos_t, b - a, cross, sin_w, cos_w, b),
            _margin(cos_t, sin_t, a - b, cross, sin_w, cos_w, a))


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return w + 1 - 2 * cp.sqrt(w)  # (sqrt u - 1)^2


def convex_perspective(q, s, a):
    import cvxpy as cp

    return q + s - 2 * cp.geo_mean(cp.hstack([q, s])), []  # (sqrt q - sqrt s)^2


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    def exact_f(u, x):
        root = mp.sqrt(u)
        return (x / (root + 1)) ** 2  # (sqrt u - 1)^2, without cancelling

    return MpGenerator(exact_f, lambda u, x: 1 - 1 / mp.sqrt(u), mp.mpf(1), -mp.inf, mp.mpf(1))


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: (mp.sqrt(u) - 1) ** 2), mp.mpf(1)


DIVERGENCE = Divergence(
    "hellinger", "(sqrt(u) - 1)^2", f, df, f,
    f_at_zero=1.0, slope_at_infinity=1.0, curvature_at_one=0.5, margins=margins,
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    exact_form=exact_form, textbook=textbook, verify_tolerance=3e-8)
