"""Cancellation-free elementary functions used by the generators.

Each one is accurate to a few ulp in relative terms over its whole domain,
where the naive formula loses digits near 0.
"""

import math

from ._util import jit

# Below this |x| the series is used; above it the direct formula loses at most
# a factor of about 10 to cancellation (see the test against mpmath).
_LOG1PMX_SERIES_MAX = 0.25
_EXPM1MX_SERIES_MAX = 0.5


@jit
def log1pmx(u, x):
    """log(u) - (u - 1), given u and x = u - 1 both exactly.

    For |x| <= 0.25 it uses t = x / (2 + x): log1p(x) = 2 atanh(t), and
    x - 2t = x t, so log1p(x) - x = -x t + 2 t^3 (1/3 + t^2/5 + ...), with no
    cancellation. Elsewhere log(u) - x, where log(u) is exact even for tiny u.
    """
    if abs(x) > _LOG1PMX_SERIES_MAX:
        return math.log(u) - x
    t = x / (2.0 + x)
    t2 = t * t
    # |t| <= 1/7, so t2^10 / 21 < 1e-18: ten terms reach full precision.
    s = 1.0 / 21.0
    s = s * t2 + 1.0 / 19.0
    s = s * t2 + 1.0 / 17.0
    s = s * t2 + 1.0 / 15.0
    s = s * t2 + 1.0 / 13.0
    s = s * t2 + 1.0 / 11.0
    s = s * t2 + 1.0 / 9.0
    s = s * t2 + 1.0 / 7.0
    s = s * t2 + 1.0 / 5.0
    s = s * t2 + 1.0 / 3.0
    return -x * t + 2.0 * t * t2 * s


@jit
def log_exact(u, x):
    """log(u) given u and x = u - 1: log1p(x) near 1, log(u) elsewhere."""
    if abs(x) < 0.5:
        return math.log1p(x)
    return math.log(u)


@jit
def expm1mx(y):
    """exp(y) - 1 - y without cancellation near y = 0 (Taylor for |y| < 1/2)."""
    if abs(y) >= _EXPM1MX_SERIES_MAX:
        return math.expm1(y) - y
    # sum_{k>=2} y^k / k!, Horner from k = 17; 0.5^16 / 17! is far below eps.
    s = 1.0 / 355687428096000.0  # 1/17!
    s = s * y + 1.0 / 20922789888000.0
    s = s * y + 1.0 / 1307674368000.0
    s = s * y + 1.0 / 87178291200.0
    s = s * y + 1.0 / 6227020800.0
    s = s * y + 1.0 / 479001600.0
    s = s * y + 1.0 / 39916800.0
    s = s * y + 1.0 / 3628800.0
    s = s * y + 1.0 / 362880.0
    s = s * y + 1.0 / 40320.0
    s = s * y + 1.0 / 5040.0
    s = s * y + 1.0 / 720.0
    s = s * y + 1.0 / 120.0
    s = s * y + 1.0 / 24.0
    s = s * y + 1.0 / 6.0
    s = s * y + 0.5
    return s * y * y


@jit
def xlogx_m_xm1(u, x):
    """u log u - (u - 1) >= 0, given u and x = u - 1 (0 at u = 1, 1 at u = 0).

    Near 1 it is (1 + x) log1pmx + x^2, which cancels by at most a factor 2.
    """
    if u == 0.0:
        return 1.0
    if abs(x) > _LOG1PMX_SERIES_MAX:
        return u * math.log(u) - x
    return u * log1pmx(u, x) + x * x


_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's split of a float64 into two 26-bit halves
_SCALE_AT = 2.0**500  # beyond it the split's 2^27 a could overflow
_SCALE = 2.0**-512


@jit
def one_minus_product(a, b):
    """1 - a b for a, b >= 0, to about 1 ulp of the result even where a b ~ 1.

    fl(a b) carries a relative error of eps/2, which 1 - a b amplifies
    without bound as a b -> 1 (the simplex end of the band, p r -> 1). Dekker's
    product gives a b = h + l exactly; 1 - h is then exact (Sterbenz, for h
    in [1/2, 2]) and (1 - h) - l rounds once. A power-of-two rescaling,
    itself exact, keeps the split finite when one factor is huge (p tiny,
    r ~ 1/p).
    """
    h = a * b
    if not (0.5 <= h <= 2.0):
        return 1.0 - h  # no cancellation: one rounding of a well-conditioned difference
    if b > _SCALE_AT:
        a, b = a / _SCALE, b * _SCALE
    elif a > _SCALE_AT:
        a, b = a * _SCALE, b / _SCALE
    c = _SPLIT * a
    a_hi = c - (c - a)
    a_lo = a - a_hi
    c = _SPLIT * b
    b_hi = c - (c - b)
    b_lo = b - b_hi
    low = ((a_hi * b_hi - h) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return (1.0 - h) - low
