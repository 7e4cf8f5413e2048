"""Closed-form margins for the divergences that have one.

Each returns both margins in probability space for (p, 1 - p) = (a, b):
the upper margin m_hi, the largest m in [0, b] with g(m) <= delta, where
g(m) = a f(1 + m/a) + b f(1 - m/b), and the lower margin m_lo, the same for
(b, a) (the mirror image; r_lo = 1 - m_lo/p). A margin equal to its end
(b, resp. a) means saturation, which each formula reaches exactly by itself.
The two share most of their work, hence one function for both. Everything is
written so that nothing cancels when a or b is small.
"""

import math

from ._util import closed_form, jit


@closed_form
def tv_margins(a, b, delta, theta):
    # g(m) = |m|
    return min(delta, b), min(delta, a)


@closed_form
def chi2_margins(a, b, delta, theta):
    # g(m) = m^2 / (a b); where delta a b could underflow (a or b tiny or
    # subnormal), separate square roots keep it
    product = delta * a * b
    if product > 1e-280:
        m = math.sqrt(product)
    else:
        m = math.sqrt(delta) * math.sqrt(a) * math.sqrt(b)
    return min(m, b), min(m, a)


@closed_form
def neyman_margins(a, b, delta, theta):
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


@jit
def _hellinger_margin(sin_t, cos_t, cos_2t, cross, sin_w, cos_w, end):
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
def hellinger_margins(a, b, delta, theta):
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
    return (_hellinger_margin(sin_t, cos_t, b - a, cross, sin_w, cos_w, b),
            _hellinger_margin(cos_t, sin_t, a - b, cross, sin_w, cos_w, a))
