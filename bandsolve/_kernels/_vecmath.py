"""exp, expm1, log and log1p that LLVM vectorises: bit casts and polynomials.

numba calls libm for ``math.log`` and friends, one element at a time (PyPI's
llvmlite has no SVML), and a loop with such a call stays scalar. These are
written from integer bit operations, selects and polynomials only, so a loop
that calls them becomes SIMD code. Accuracy, measured against mpmath over the
whole float64 domain (tests/test_vecmath.py): at most ``ULP_BOUND`` ulp of
the correctly rounded result, with libm's special values (NaN in gives NaN;
exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x < 0) = NaN, log1p(-1) =
-inf, overflow to inf and gradual underflow to subnormals and 0).

* exp, expm1: x = k ln2 + r with |r| <= ln2 / 2 (Cody and Waite's two-part
  ln2, k found by the 1.5 2^52 shifter, so no float-to-int conversion), then
  Taylor to r^13. 2^k is built from its bit
  pattern in two factors, so that overflow and gradual underflow round once.
* log and log1p, one function (``vlog_exact(u, x)``, given u and x = u - 1):
  u = 2^k m with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals
  scaled by 2^54 first), then fdlibm's minimax polynomial in s = (m-1)/(m+1),
  plus the first-order correction (x - (u - 1)) / u for the rounding of
  u = 1 + x.

fastmath is limited to ``contract`` (fused multiply-adds): no flag that
assumes away NaN, inf or signed zeros.
"""

import functools
import math
import types

from llvmlite import ir
from numba import types as nbtypes
from numba.extending import intrinsic

from ._util import CONTRACT, jit

#: Worst error of every function here, in ulp of the exact result (the tests
#: assert it over the whole domain).
ULP_BOUND = 2.0


@intrinsic
def _bits(typingctx, x):
    """The IEEE-754 bit pattern of a float64, as an int64 (no conversion)."""
    if x != nbtypes.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return nbtypes.int64(nbtypes.float64), codegen


@intrinsic
def _float(typingctx, n):
    """The float64 whose bit pattern is the int64 ``n``."""
    if n != nbtypes.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return nbtypes.float64(nbtypes.int64), codegen


def vjit(fn):
    """``jit`` for element functions meant to be inlined into SIMD loops:
    compiled once each and inlined by LLVM (``forceinline``), which leaves
    the caller's loop the one a person would write. numba's own inlining
    (``inline="always"``) gives the same loop within 2% but types each
    function again at every call site: the fast path's polish took 2.5 s to
    compile that way on a first call, 1.4 s this way (issue 41). Scalar
    kernels call :func:`ieee` of these instead."""
    dispatcher = jit(fastmath=CONTRACT, forceinline=True)(fn)
    _VJIT.add(dispatcher)
    return dispatcher


_VJIT: set = set()


@functools.cache
def ieee(dispatcher):
    """A :func:`vjit` function's own source compiled without ``contract``
    (its vjit callees likewise), for the scalar kernels, whose results the
    interpreter (``_interpret``) reproduces bit for bit. A flag travels with
    the instructions LLVM inlines: through ``vjit``, the series inside
    log1pmx and expm1mx became fused multiply-adds (one rounding, where the
    interpreter rounds twice), and kl's compiled root finder was an ulp off
    the interpreted one near p = 1, on every machine with FMA."""
    fn = dispatcher.py_func
    namespace = dict(fn.__globals__)
    for name in fn.__code__.co_names:
        if namespace.get(name) in _VJIT:
            namespace[name] = ieee(namespace[name])
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__doc__ = fn.__doc__
    copy.__module__ = fn.__module__
    copy.__qualname__ = f"{fn.__qualname__}[ieee]"  # its own cache entry
    return jit(forceinline=True)(copy)


def ir_inlined(fn):
    """``jit`` for a small element function inlined into its caller's numba
    IR (no function of its own): the fast path's row lookup, 0.35 ns an
    element faster so than through ``vjit``."""
    return jit(fastmath=CONTRACT, inline="always")(fn)


def vector_form(fn):
    """A divergence's vector form (``VectorForms.value_and_slope``,
    ``(u, u - 1, parameter) -> (f(u), f'(u))``): inlined into its caller by
    LLVM, as ``vjit`` (a call across compiled functions left in place keeps
    the loop scalar: measured 47 ns against 1.8 ns per element for kl's f), and
    compiled where a kernel first calls it, never at import (where it cost
    3.4 s with an empty cache)."""
    return jit(fastmath=CONTRACT, forceinline=True)(fn)


#: float64's machine epsilon, the unit of ``VectorForms.g_rel_error``
EPS = 2.220446049250313e-16


# --- exp and expm1 ------------------------------------------------------------
_INV_LN2 = 1.4426950408889634
# fdlibm's split of ln2: the high part has 32 significant bits, so k * _LN2_HI
# is exact for |k| < 2^21
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: x + it rounds x to an integer in its low bits
_SHIFTER_BITS = 0x4338000000000000
# Beyond these, exp is 0 or inf and expm1 is -1 or inf (arguments are clamped
# here, with NaN kept, so that 2^k stays in two normal factors)
_EXP_CLAMP = 800.0
_EXPM1_LOW = -50.0  # expm1(-50) rounds to -1
_EXPM1_EXACT_K = 53  # above this k, 2^k - 1 rounds to 2^k
_TINY = 2.0**-60


@vjit
def _pow2(k):
    """2^k for an int64 k in [-1022, 1023], from its exponent bits."""
    return _float((k + 1023) << 52)


@vjit
def _reduce(x):
    """(k, r) with x = k ln2 + r, |r| <= ln2/2 + tiny, k an int64 (|x| <= 800)."""
    t = x * _INV_LN2 + _SHIFTER
    k_float = t - _SHIFTER
    r = (x - k_float * _LN2_HI) - k_float * _LN2_LO
    return _bits(t) - _SHIFTER_BITS, r


#: 1/k! for k from 17 down to 3: Horner's coefficients of
#: (e^y - 1 - y) / y^2 = 1/2 + y/3! + y^2/4! + ..., highest degree first
_INVERSE_FACTORIALS = tuple(1.0 / math.factorial(k) for k in range(17, 2, -1))


@vjit
def _exp_tail(coefficients, y):
    """(e^y - 1 - y) / y^2 by Horner's rule from ``coefficients`` (a tail
    of _INVERSE_FACTORIALS: the highest degree kept first) down to 1/2."""
    s = coefficients[0]
    for c in coefficients[1:]:
        s = s * y + c
    return s * y + 0.5


@vjit
def taylor_tail(y):
    """(e^y - 1 - y) / y^2 = sum_{k >= 2} y^(k-2) / k!, Horner from 1/17!:
    for |y| <= 1/2 the first term left out is below 2e-17 of the sum."""
    return _exp_tail(_INVERSE_FACTORIALS, y)


@vjit
def _reduced_tail(r):
    """(e^r - 1 - r) / r^2 for the reduced argument, |r| <= ln2/2 + tiny:
    Taylor to r^13/13!, the degree the accuracy needs there (issue 41). The
    first term left out, r^14/14!, is below 4.3e-18 (0.04 ulp of e^r) and
    below 7e-17 of the tail itself (0.6 ulp), where taylor_tail's r^17 cost
    1.6 ns an element of the fast path's polish."""
    return _exp_tail(_INVERSE_FACTORIALS[4:], r)


@vjit
def _expm1_poly(r):
    """e^r - 1 for |r| <= 0.35."""
    return r + r * (r * _reduced_tail(r))


@vjit
def _clamp(x, low, high):
    # written so that NaN passes through (both comparisons are false)
    x = low if x < low else x
    return high if x > high else x


@vjit
def vexp(x):
    """e^x."""
    k, r = _reduce(_clamp(x, -_EXP_CLAMP, _EXP_CLAMP))
    half = k >> 1
    return ((1.0 + _expm1_poly(r)) * _pow2(half)) * _pow2(k - half)


@vjit
def vexpm1(x):
    """e^x - 1, to full relative precision near 0 (exact: r = x for |x| < ln2/2)."""
    k, r = _reduce(_clamp(x, _EXPM1_LOW, _EXP_CLAMP))
    p = _expm1_poly(r)
    half = k >> 1
    large = ((1.0 + p) * _pow2(half)) * _pow2(k - half) - 1.0
    scale = _pow2(min(k, _EXPM1_EXACT_K))
    small = scale * p + (scale - 1.0)
    result = large if k > _EXPM1_EXACT_K else small
    # x itself where e^x - 1 = x (1 + x/2) rounds to x, keeping the sign of -0.0
    return x if abs(x) < _TINY else result


# --- log and log1p ------------------------------------------------------------
_SMALLEST_NORMAL = 2.2250738585072014e-308
_TWO_TO_54 = 18014398509481984.0
# m is taken in [sqrt(1/2), sqrt(2)): adding this to the bits moves the binade
# edge from 1 to sqrt(1/2) (musl's log)
_SQRT_HALF_HIGH = 0x3FE6A09E00000000
_ONE_BITS = 0x3FF0000000000000
_MANTISSA = 0x000FFFFFFFFFFFFF
# fdlibm's minimax coefficients for (log(1+f) - f + f^2/2) / s, s = f/(2+f)
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01


@vjit
def _int_to_float(k):
    """float(k) for |k| < 2^51 without a conversion instruction."""
    return _float(k + _SHIFTER_BITS) - _SHIFTER


@vjit
def _log_parts(u):
    """(k, f, rest) with log(u) = (rest + f) + k ln2_hi for finite u > 0:
    u = 2^k m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^54
    first), f = m - 1, and rest = s (f^2/2 + R(s^2)) + k ln2_lo - f^2/2 with
    s = f / (2 + f) and fdlibm's minimax R."""
    subnormal = u < _SMALLEST_NORMAL
    scaled = u * _TWO_TO_54 if subnormal else u
    shifted = _bits(scaled) + (_ONE_BITS - _SQRT_HALF_HIGH)
    k = (shifted >> 52) - (1023 + 54 if subnormal else 1023)
    m = _float((shifted & _MANTISSA) + _SQRT_HALF_HIGH)
    f = m - 1.0
    half_f2 = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    tail = w * (_LG2 + w * (_LG4 + w * _LG6)) + z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    dk = _int_to_float(k)
    return dk, f, s * (half_f2 + tail) + dk * _LN2_LO - half_f2


# --- cancellation-free pieces of the generators -------------------------------
_SERIES_MAX = 0.25  # below this |x|, u log u - x as u (log u - x) + x^2


@vjit
def vlog_pair(u, x):
    """(log(u), log(u) - (u - 1)) given u and x = u - 1, where either may be
    the rounded one, from one reduction and one division.

    u = 2^k m with m in [sqrt(1/2), sqrt(2)) and f = m - 1, and fdlibm's
    log(m) = f - (f^2/2 - s (f^2/2 + R(s^2))), s = f / (2 + f). Subtracting x
    inside that sum rather than from log(u) is what keeps the second value
    exact near u = 1: there k = 0 and f = u - 1 exactly, so f - x is minus
    the rounding difference c = x - (u - 1), and the sum is
    -(f^2/2 - s (f^2/2 + R)) - c f/u - (c/u)^2/2, with no cancellation. The
    correction log1p(c/u) ~ c/u - (c/u)^2/2 for the rounding of u against x
    (0 where they agree) is added to both, so log1p(x) near 1 and log(u) near 0.
    """
    return _log_pair_corrected(u, x, (x - (u - 1.0)) / u)


@vjit
def vlog_pair_and_reciprocal(u, x):
    """(log(u), log(u) - (u - 1), 1/u): ``vlog_pair`` with its correction c/u
    formed as c (1/u), for a caller that needs 1/u too (kl's f' = x/u): one
    division fewer. The first two differ from ``vlog_pair``'s by at most the
    rounding of c/u, itself below an ulp of u's."""
    inv_u = 1.0 / u
    c = x - (u - 1.0)
    # c = 0 where x and u agree, also where 1/u overflows (u subnormal)
    log_u, log_minus_x = _log_pair_corrected(u, x, 0.0 if c == 0.0 else c * inv_u)
    return log_u, log_minus_x, inv_u


@vjit
def _log_pair_corrected(u, x, relative):
    """``vlog_pair`` given relative = c/u."""
    dk, f, poly = _log_parts(u)
    d = u - 1.0
    finite = u > 0.0 and u != math.inf
    relative = relative if finite else 0.0
    second = 0.5 * relative * relative
    log_u = ((poly + (relative - second)) + f) + dk * _LN2_HI
    # f - x + c/u regrouped as (f - d) - (c/u) d: at k = 0, f = d exactly, so
    # nothing cancels even where x rounds u to 1 (log1p(x) - x = -x^2/2)
    log_minus_x = (poly - second) + ((dk * _LN2_HI + (f - d)) - relative * d)
    if not finite:
        edge = math.inf if u == math.inf else (-math.inf if u == 0.0 else math.nan)
        log_u = edge
        log_minus_x = edge - x
    return log_u, log_minus_x


@vjit
def vlog_exact(u, x):
    """log(u) given u and x = u - 1, where either may be the rounded one:
    log1p(x) near 1 and log(u) near 0 (``vlog_pair``)."""
    return vlog_pair(u, x)[0]


#: 1/21, 1/19, ..., 1/3: Horner's coefficients of the series in t^2 below,
#: highest degree first
_ODD_RECIPROCALS = tuple(1.0 / k for k in range(21, 2, -2))


@vjit
def log1pmx_series(x):
    """log(1 + x) - x for |x| <= 1/4 by t = x / (2 + x):
    log1p(x) - x = -x t + 2 t^3 (1/3 + t^2/5 + ...), with no cancellation;
    ten terms, as |t| <= 1/7 makes t^20 / 21 below 1e-18."""
    t = x / (2.0 + x)
    t2 = t * t
    s = _ODD_RECIPROCALS[0]
    for c in _ODD_RECIPROCALS[1:]:
        s = s * t2 + c
    return -x * t + 2.0 * t * t2 * s


_EXPM1_LOW_K = -100  # below this k, 2^k (1 + p) - 1 rounds to -1


@vjit
def vexp_parts(y):
    """(e^y, e^y - 1, e^y - 1 - y) from one reduction, each to full relative
    precision: the first two are ``vexp(y)`` and ``vexpm1(y)`` bit for bit;
    the third is r^2 T(r) with the reduction's own Taylor tail T where k = 0
    (|y| <= ln2/2, where r = y exactly), else (e^y - 1) - y, which cancels
    by at most a factor 6 (at |y| = ln2/2). The fast path's polish evaluates
    f at u2 = e^-v from them, with log u2 = -v known
    (``VectorForms.value_and_slope_at_log``)."""
    k, r = _reduce(_clamp(y, -_EXP_CLAMP, _EXP_CLAMP))
    square_tail = r * (r * _reduced_tail(r))
    p = r + square_tail  # _expm1_poly(r)
    half = k >> 1
    exp_y = ((1.0 + p) * _pow2(half)) * _pow2(k - half)
    # e^y - 1 as vexpm1 forms it; vexpm1 clamps y at -50 instead, where it
    # also rounds to -1
    scale = _pow2(min(max(k, _EXPM1_LOW_K), _EXPM1_EXACT_K))
    small = scale * p + (scale - 1.0)
    expm1_y = exp_y - 1.0 if k > _EXPM1_EXACT_K else small
    expm1_y = y if abs(y) < _TINY else expm1_y
    return exp_y, expm1_y, square_tail if k == 0 else expm1_y - y


@vjit
def vxlogx_m_xm1_and_log(u, x):
    """(u log u - (u - 1), log u) given u and x = u - 1 (1 and -inf at u = 0):
    u (log u - x) + x^2 near 1, where it has no cancellation, u log u - x
    elsewhere, both from one ``vlog_pair``."""
    log_u, log_minus_x = vlog_pair(u, x)
    near = u * log_minus_x + x * x
    far = u * log_u - x
    value = near if abs(x) <= _SERIES_MAX else far
    return (1.0 if u == 0.0 else value), log_u


@vjit
def vxlogx_m_xm1_at_log(log_u, u, x, x_m_log_u):
    """u log u - (u - 1) for u > 0, given L = log u, u, x = u - 1 and
    u - 1 - L (each to full relative precision, as from ``vexp_parts``),
    with no logarithm: L^2 + (L - 1) (u - 1 - L) for |L| <= 3/4 and u L - x
    beyond, so that the terms cancel by at most a factor 6 (at |L| = 3/4)."""
    near = log_u * log_u + (log_u - 1.0) * x_m_log_u
    far = u * log_u - x
    return near if abs(log_u) <= 0.75 else far
