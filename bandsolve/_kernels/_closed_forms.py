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

_HALF_PI = 0.5 * math.pi


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
def _hellinger_margin(t, tc, w, sin_w, end):
    """sin(w) sin(2t + w), the move from the angle t by w, or ``end`` once
    it saturates (w >= tc); the sine's argument is the one that does not cancel."""
    if w >= tc:
        return end
    if t <= tc:
        return min(sin_w * math.sin(2.0 * t + w), end)
    return min(sin_w * math.sin(2.0 * tc - w), end)  # = sin(2t + w), tc = pi/2 - t


@closed_form
def hellinger_margins(a, b, delta, theta):
    # With t the angle of sqrt(a) and w = arccos(1 - delta/2): q = sin^2(t + w),
    # so m_hi = sin^2(t + w) - sin^2(t) = sin(w) sin(2t + w), saturating once
    # w >= pi/2 - t. The lower margin swaps t and its complement. Both angles
    # come from atan2, exact on both sides.
    if delta >= 2.0:
        return b, a
    # one atan2 for the smaller angle (<= pi/4); its complement pi/2 - t is
    # >= pi/4 and so does not cancel
    if a <= b:
        t = math.atan2(math.sqrt(a), math.sqrt(b))
        tc = _HALF_PI - t
    else:
        tc = math.atan2(math.sqrt(b), math.sqrt(a))
        t = _HALF_PI - tc
    w = 2.0 * math.asin(0.5 * math.sqrt(delta))
    sin_w = math.sqrt(delta) * math.sqrt(1.0 - 0.25 * delta)
    return _hellinger_margin(t, tc, w, sin_w, b), _hellinger_margin(tc, t, w, sin_w, a)
