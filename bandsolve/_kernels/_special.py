"""Cancellation-free elementary functions used by the generators.

Each one is accurate to a few ulp in relative terms over its whole domain,
where the naive formula loses digits near 0.
"""

import math

from . import _vecmath
from ._util import jit

# the series the fast path shares, as IEEE arithmetic (no fused multiply-add):
# the scalar kernels must give what the interpreter gives (_vecmath.ieee)
log1pmx_series = _vecmath.ieee(_vecmath.log1pmx_series)
taylor_tail = _vecmath.ieee(_vecmath.taylor_tail)

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
    return log1pmx_series(x)


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
    # sum_{k>=2} y^k / k!, Horner from k = 17; 0.5^16 / 17! is far below eps
    return taylor_tail(y) * y * y


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
