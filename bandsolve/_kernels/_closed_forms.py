"""Closed-form upper margins for the divergences that have one.

Each returns the margin m = q - a in probability space for the pair
(a, b) = (p, 1 - p): the largest m in [0, b] with g(m) <= delta, where
g(m) = a f(1 + m/a) + b f(1 - m/b). The lower bound is the same function with
a and b swapped (see ``_solver``). Saturation (m = b) is decided by the
caller from the divergence's f(0), identically for every backend; these
formulas are only evaluated where the band is not saturated, and they are
written so that nothing cancels when a or b is small.
"""

import math

from ._util import closed_form


@closed_form
def tv_upper(a, b, delta, theta):
    # g(m) = m
    return min(delta, b)


@closed_form
def chi2_upper(a, b, delta, theta):
    # g(m) = m^2 / (a b)
    return min(math.sqrt(delta * a) * math.sqrt(b), b)


@closed_form
def neyman_upper(a, b, delta, theta):
    # g(m) = m^2 / (q (1 - q)), q = a + m: (1 + d) m^2 - d (b - a) m - d a b = 0,
    # with discriminant d (d + 4ab) since (b - a)^2 + 4ab = 1.
    root = math.sqrt(delta) * math.sqrt(delta + 4.0 * a * b)
    if b >= a:
        return (delta * (b - a) + root) / (2.0 * (1.0 + delta))
    # the two terms above would cancel: use the product of the roots instead
    return 2.0 * delta * a * b / (root + delta * (a - b))


@closed_form
def hellinger_upper(a, b, delta, theta):
    # With t = angle of sqrt(a), w = arccos(1 - delta/2): q = sin^2(t + w), so
    # m = sin^2(t + w) - sin^2(t) = sin(w) sin(2t + w). Both the angle t and its
    # complement tc = pi/2 - t come from atan2, exact on both sides.
    if delta >= 2.0:
        return b
    t = math.atan2(math.sqrt(a), math.sqrt(b))
    tc = math.atan2(math.sqrt(b), math.sqrt(a))
    w = 2.0 * math.asin(0.5 * math.sqrt(delta))
    if w >= tc:
        return b
    sin_w = math.sqrt(delta) * math.sqrt(1.0 - 0.25 * delta)
    if t <= tc:
        return min(sin_w * math.sin(2.0 * t + w), b)
    # sin(2t + w) = sin(2 tc - w), and 2 tc - w > tc does not cancel
    return min(sin_w * math.sin(2.0 * tc - w), b)
