"""The band as a root of the binary divergence, solved in probability margins.

Write a = p and b = 1 - p. A ratio r moves the sampled token's probability by
the margin m = p (r - 1), and the binary divergence is

    g(m) = P(a, m) + P(b, -m),    P(t, y) = t f(1 + y/t),

the sum of two perspectives of f. Swapping a and b mirrors m, so one solver
serves both bounds:

* upper bound: the root m in [0, b] of g(m) = delta for (a, b) = (p, 1 - p),
  and r_hi = 1 + m/p;
* lower bound: the same root for (a, b) = (1 - p, p), and r_lo = 1 - m/p,
  which is exactly u2 = 1 - m/b below.

g is convex, increasing on [0, b] and g(0) = 0. Newton's method runs on
psi(x) = log g(m(x)) - log delta in the logit variable x = log(m / (b - m)),
so that m = b sigmoid(x) and u2 = 1 - m/b = sigmoid(-x) are both exact, even
for m near 0 (tiny p, tiny delta) or near b (close to saturation). In x both
ends are logarithmic and psi is close to linear, from the Gaussian regime
(g ~ m^2) to the Poisson tail (g ~ m log m). Every step is kept inside a
bracket [x_lo, x_hi] that the iterates maintain; a step that leaves it is
replaced by bisection.

P(t, y) for y > t is evaluated as (t + y) f*(t / (t + y)) with the conjugate
f*(v) = v f(1/v), so no argument of f or f* exceeds 2 and nothing overflows,
whatever t is.
"""

import math
from collections.abc import Callable
from typing import Any

from numba import prange, types

from ._factory import template, unbound
from ._util import InVec, OutVec, jit
from ._warm_start import interpolate as interpolate_start

_TWO_TO_64 = 18446744073709551616.0

# Codes from solve_margin: an interior root, the simplex end, no convergence,
# or a root next to where g overflows float64 (so it may lie further out).
INTERIOR, SATURATED, FAILED, OVERFLOW = 0, 1, 2, 3
# After an overflow, a root whose bracket (``margin_past_overflow``) pins only
# m (the upper bound's output) or only u2 (the lower bound's)
OVERFLOW_M_PINNED, OVERFLOW_U2_PINNED = 4, 5

#: The per-element status ``band_by_root`` writes (int8), the worse of the
#: element's two bounds; a bound that failed is NaN. ``band`` raises for a
#: nonzero status, or with ``on_failure="nan"`` returns those NaN. The closed
#: forms never fail.
STATUS_OK = 0
#: the root finder did not converge (a generator that is NaN, raises or is not
#: convex where it is evaluated)
STATUS_NOT_CONVERGED = 1
#: g evaluates to +inf next to the root (float64 overflow, or a generator that
#: is +inf there), so the root cannot be resolved
STATUS_OVERFLOW = 2
#: written by the fast path only (``_fast.band_fast``): its one Newton step
#: could not certify the element, so the root finder recomputes it; the
#: caller never sees this code
STATUS_UNCERTIFIED = 3
# Below this u2, an overflow of b f(u2) only means u2 is smaller still (alpha
# with a < -1 at p ~ 1e-310 overflows u2^a at u2 ~ 1e-155): the true u2 lies in
# [0, 1e-16], so the lower bound (u2) is within 4 eps absolute and the upper
# margin b (1 - u2) within 1e-16 relative, inside their tolerances either way.
_OVERFLOW_U2 = 1e-16

# Newton needs a handful of steps; a bracket of width 2245 halves to float
# resolution in about 60 bisections, so 200 leaves room for both.
_MAX_ITER = 200
_X_MIN = -1500.0  # m = b e^x underflows to 0 long before this
_X_MAX = 745.0  # u2 = sigmoid(-x) underflows to 0 beyond this
# Quadratic convergence: once a Newton step is below 1e-10 the next error is
# about 1e-20, far below what float64 resolves.
_STEP_TOL = 1e-10
# A bracket this narrow in its effect fixes every float64 output: m to 1e-16
# relative, and u2 to 1e-14 relative or 1e-18 absolute (the lower bound is u2
# itself, promised to 1e-12 relative or 4 eps absolute). It ends the
# iteration where psi is nearly flat (just short of saturation) and rounding
# noise in g keeps Newton's steps from shrinking.
_PINNED_M = 1e-16
_PINNED_U2_REL = 1e-14
_PINNED_U2_ABS = 1e-18


@jit
def _sigmoid_pair(x):
    """(sigmoid(x), sigmoid(-x)), each to full relative precision."""
    e = math.exp(-abs(x))
    d = 1.0 + e
    if x >= 0.0:
        return 1.0 / d, e / d
    return e / d, 1.0 / d


# --- templates -------------------------------------------------------------------
# Each function marked @template declares the slots below that it reads and the
# templates it calls. _factory.specialise compiles a copy of each, and of every
# template it calls, with the slots bound to one divergence's numba functions,
# which numba then calls directly and inlines. Here they are bound to nothing,
# so a template run as it stands (or reading a slot it did not declare) raises.
GENERATOR: Callable[..., Any] = unbound
DERIVATIVE: Callable[..., Any] = unbound
CONJUGATE: Callable[..., Any] = unbound
CLOSED_FORM: Callable[..., Any] = unbound
SCALED_CONJUGATE: Callable[..., Any] = unbound


_SMALLEST_NORMAL = 2.2250738585072014e-308
_SUBNORMAL_ULP = 5e-324  # 2^-1074, the spacing of every subnormal
_TWO_TO_600 = 2.0**600
_TWO_TO_474 = 2.0**474  # 2^600 2^474 = 2^1074 = 1 / _SUBNORMAL_ULP


@template(slots=("CONJUGATE",), inline=True)
def conjugate_at_subnormal(t, s, theta):
    """f*(t/s) where t/s is subnormal, so that fl(t/s) keeps few bits.

    1 - p subnormal (log p above -2.2e-308) puts the lower bound's v there,
    where f* of rkl and of alpha near a = 1 varies like log v: fl(t/s) one
    ulp off moved f* by up to log 2, and the bound by 1e7 tolerances.
    Instead, f* is interpolated, quadratically in L = log v, from the three
    exact subnormals j, j + 1, j + 2 ulp around v = K ulp: K = t 2^1074 / s
    carries one rounding, the points lie at most a factor 3 apart, and the
    interpolant's error is the third derivative of f* in L times
    (log 3)^3 / 27, far below f*'s own rounding for these generators.
    """
    k = (t * _TWO_TO_600) * _TWO_TO_474 / s
    j = max(math.floor(k) - (1.0 if k >= 2.0 else 0.0), 1.0)
    v0 = j * _SUBNORMAL_ULP
    v1 = v0 + _SUBNORMAL_ULP
    v2 = v1 + _SUBNORMAL_ULP
    f0 = CONJUGATE(v0, v0 - 1.0, theta)
    f1 = CONJUGATE(v1, v1 - 1.0, theta)
    f2 = CONJUGATE(v2, v2 - 1.0, theta)
    if not (f0 < math.inf and f1 < math.inf and f2 < math.inf):
        return CONJUGATE(t / s, t / s - 1.0, theta)
    # Lagrange in L - log j; each difference of logarithms taken as log1p
    lam = math.log(k / j)
    l1 = math.log1p(1.0 / j)
    l2 = math.log1p(2.0 / j)
    return (f0 * ((lam - l1) * (lam - l2)) / (l1 * l2)
            + f1 * (lam * (lam - l2)) / (l1 * (l1 - l2))
            + f2 * (lam * (lam - l1)) / (l2 * (l2 - l1)))


@template(slots=("GENERATOR", "CONJUGATE", "SCALED_CONJUGATE"), calls=(conjugate_at_subnormal,))
def perspective(t, y, theta):
    """t f(1 + y/t) for t >= 0 and y >= 0, without overflow."""
    if y == 0.0:
        return 0.0
    if y <= t:
        x = y / t
        return t * GENERATOR(1.0 + x, x, theta)
    s = t + y
    v = t / s
    if v < _SMALLEST_NORMAL and t > 0.0:
        return s * conjugate_at_subnormal(t, s, theta)
    value = s * CONJUGATE(v, -y / s, theta)
    if value == math.inf:
        # f*(v) overflowed, but s f*(v) may not (s < 1e-200): the
        # divergence's log-domain form, where it has one
        scaled = SCALED_CONJUGATE(s, v, -y / s, theta)
        if scaled == scaled:
            return scaled
    return value


@template(slots=("SCALED_CONJUGATE",), inline=True)
def perspective_exceeds_float64(t, y, theta):
    """True where t f(1 + y/t) is known to exceed float64's range: an inf
    from ``perspective`` is then the value's, not an intermediate's."""
    if y <= t:
        return False
    s = t + y
    return SCALED_CONJUGATE(s, t / s, -y / s, theta) == math.inf


@template(slots=("GENERATOR",), calls=(perspective,))
def binary_value(a, b, m, u2, u2m1, theta):
    """g(m) = P(a, m) + b f(u2), given u2 = 1 - m/b and u2 - 1 = -m/b exactly."""
    if m == 0.0:
        return 0.0
    return perspective(a, m, theta) + b * GENERATOR(u2, u2m1, theta)


@template(calls=(perspective,), inline=True)
def saturates(a, b, delta, theta, f_at_zero):
    """True where g(b) = P(a, b) + b f(0) <= delta: the margin reaches b."""
    if f_at_zero == math.inf:
        return False
    return perspective(a, b, theta) + b * f_at_zero <= delta


_FLOAT_MAX = 1.7976931348623157e308
_Z_EDGE = 745.0  # sigmoid(-745) is the smallest subnormal


@template(types.float64(types.boolean, types.float64, types.float64, types.float64),
          calls=(perspective,))
def saturation_threshold(upper, delta, theta, f_at_zero):
    """The z = logit p where a bound starts to saturate.

    The upper bound saturates (r = 1/p) for z >= the threshold, the lower
    (r = 0) for z <= it: g(b) falls with p for the upper margin and rises for
    the lower. +-inf where no z in [-745, 745] saturates or every z does.
    Bisection on the same test as ``saturates``, to adjacent floats.
    """
    never = math.inf if upper else -math.inf
    if f_at_zero == math.inf:
        return never

    def excess(z):
        p, pc = _sigmoid_pair(z)
        a, b = (p, pc) if upper else (pc, p)
        return perspective(a, b, theta) + b * f_at_zero - delta

    lo, hi = -_Z_EDGE, _Z_EDGE  # excess(lo) and excess(hi) differ in sign
    # the end that saturates if any z does, and the end that saturates only if every z does
    if_any, if_every = (hi, lo) if upper else (lo, hi)
    if excess(if_any) > 0.0:
        return never
    if excess(if_every) <= 0.0:
        return -never
    while True:
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:
            return hi if upper else lo  # the saturated end
        if (excess(mid) <= 0.0) == upper:
            hi = mid
        else:
            lo = mid


@template(calls=(binary_value,), inline=True)
def margin_past_overflow(a, b, delta, theta, x_lo):
    """(m, u2, code) for a root that lies past x_lo, where g < delta, in a
    range where g overflowed float64 before reaching delta (a user's
    exponential generator at subnormal 1 - p: (1 - p) e^(m/(1-p)) meets
    delta where e^(m/(1-p)) is past float64, and true g is not).

    g is convex in m, so beyond m1 = m(x_lo) it lies above its secant
    through m1/2 and m1: the root is at most m1 + (delta - g(m1)) (m1/2) /
    (g(m1) - g(m1/2)), a reach doubled here against rounding in the two g.
    Where that bracket pins an output as tightly as ``solve_margin``'s
    stopping rule would, the output is resolved: code INTERIOR (both),
    OVERFLOW_M_PINNED or OVERFLOW_U2_PINNED (one), else OVERFLOW.
    """
    if x_lo <= _X_MIN:  # g was never below delta: no point to extrapolate from
        return math.nan, math.nan, OVERFLOW
    s1, sc1 = _sigmoid_pair(x_lo)
    m1 = b * s1
    g1 = binary_value(a, b, m1, sc1, -s1, theta)
    half = 0.5 * s1  # exact: m1/2 = b s1/2, and u2 - 1 = -s1/2
    g0 = binary_value(a, b, 0.5 * m1, sc1 + half, -half, theta)
    if not (0.0 <= g0 and g1 < delta and g1 - g0 > 1e-6 * g1):
        return math.nan, math.nan, OVERFLOW  # the secant is rounding noise
    reach = 2.0 * (delta - g1) * (0.5 * m1) / (g1 - g0)
    m_pinned = reach <= m1 * (_PINNED_M / 3.0)
    u2_reach = reach / b
    u2_pinned = u2_reach <= sc1 * (_PINNED_U2_REL / 3.0) or u2_reach <= _PINNED_U2_ABS / 3.0
    m = m1 + 0.5 * reach
    u2 = sc1 - 0.5 * u2_reach
    if m_pinned and u2_pinned:
        return m, u2, INTERIOR
    if m_pinned:
        return m, u2, OVERFLOW_M_PINNED
    if u2_pinned:
        return m, u2, OVERFLOW_U2_PINNED
    return m, u2, OVERFLOW


@template(slots=("DERIVATIVE",), calls=(binary_value, saturates, perspective_exceeds_float64,
                                        margin_past_overflow))
def solve_margin(a, b, delta, theta, f_at_zero, slope_at_inf, curvature, x_start):
    """Largest m in [0, b] with g(m) <= delta.

    Returns (m, u2, code, x): u2 = 1 - m/b, code INTERIOR, SATURATED (m = b),
    FAILED (no convergence in _MAX_ITER steps) or OVERFLOW (g evaluated to
    inf just beyond the root found, at a finite argument: the true root may
    lie further out, e.g. a user's alpha-like generator with a > 1 at delta
    near 1e300; the built-in alpha family's inf is g's own; where convexity
    still pins an output, ``margin_past_overflow``'s code instead), and
    x = log(m / (b - m)) (NaN unless INTERIOR). ``x_start`` is a starting
    point for x, or NaN.
    """
    if b == 0.0:
        return 0.0, 1.0, INTERIOR, math.nan
    if a == 0.0 and slope_at_inf == math.inf:
        # P(0, m) = m f'(inf) is infinite for every m > 0
        return 0.0, 1.0, INTERIOR, math.nan
    if saturates(a, b, delta, theta, f_at_zero):
        return b, 0.0, SATURATED, math.nan

    if x_start == x_start:
        x = x_start
    else:
        # the local quadratic model g ~ f''(1) m^2 / (2 a b)
        frac = math.sqrt(2.0 * delta * a / (curvature * b))
        if frac != frac or frac >= 1.0:
            x = 3.0
        elif frac == 0.0:
            x = 0.0
        else:
            x = math.log(frac) - math.log1p(-frac)

    x_lo = _X_MIN
    x_hi = _X_MAX
    hi_end_tried = False
    step_before = math.inf
    overflow_at_hi = False
    for iteration in range(_MAX_ITER):
        s, sc = _sigmoid_pair(x)
        m = b * s
        g = binary_value(a, b, m, sc, -s, theta)
        if g != g:  # a user generator that is NaN (or raised) here: no bracket to trust
            return m, sc, FAILED, math.nan
        if g == delta:
            return m, sc, INTERIOR, x
        if g < delta:
            x_lo = x
        else:
            x_hi = x
            # an inf that is g's own value (beyond float64, so above delta)
            # places the root as surely as a finite g does
            overflow_at_hi = g == math.inf and sc > _OVERFLOW_U2 \
                and not perspective_exceeds_float64(a, m, theta)
        width = x_hi - x_lo
        # The root lies in [x_lo, x_hi]. Stop once that bracket pins every
        # output (m varies as dx * u2 and u2 as dx * m/b, within a factor e
        # over a width < 1), or once it cannot be halved in floating point.
        mid = 0.5 * (x_lo + x_hi)
        if (width < 1.0 and 3.0 * width * sc <= _PINNED_M and (
                3.0 * width * s <= _PINNED_U2_REL or 3.0 * width * s * sc <= _PINNED_U2_ABS)) \
                or mid == x_lo or mid == x_hi:
            if overflow_at_hi:
                m, sc, code = margin_past_overflow(a, b, delta, theta, x_lo)
                return m, sc, code, x_lo if code == INTERIOR else math.nan
            return m, sc, INTERIOR, x
        # Newton step on psi(x) = log g - log delta; d psi/dx = g'(m) m u2 / g.
        if a == 0.0:
            d1 = slope_at_inf
        else:
            x1 = m / a
            # Past float64's range (a subnormal: 1 - p < 2.2e-308 for the
            # lower bound), f'(inf) = slope_at_inf stands in for f'(m/a),
            # which can be far off (alpha:0.999999: 1e6 against 737) and
            # made Newton's steps falsely small; inf makes the step bisect.
            d1 = DERIVATIVE(1.0 + x1, x1, theta) if x1 < _FLOAT_MAX else math.inf
        dpsi = (d1 - DERIVATIVE(sc, -s, theta)) * m * sc / g
        # psi = log(g / delta) as log1p of (g - delta) / delta, where
        # g - delta is exact near the root: log g - log delta would carry an
        # absolute error of eps |log g|, which near saturation (psi flat,
        # dpsi ~ u2) moves x by far more than the bound's tolerance.
        excess = (g - delta) / delta
        if abs(excess) < 1e-4:
            # every step near the root: log1p's series to the e^4 term is
            # exact to e^4 / 5 relative (4e-17), with no transcendental call
            log_ratio = excess * (1.0 - excess * (0.5 - excess * (1.0 / 3.0 - 0.25 * excess)))
        else:
            log_ratio = math.log1p(excess)
        x_new = x - log_ratio / dpsi
        dx = x_new - x
        # g rises with m, so dpsi > 0: a derivative that is not positive and
        # finite (a user f' estimated as inf) makes dx 0 anywhere, not only at
        # the root, and must not count as convergence
        if 0.0 < dpsi < math.inf and abs(dx) <= _STEP_TOL:
            # Converged (rounding may put x_new a hair outside the bracket).
            # dm/dx = m u2 and du2/dx = -u2 s: to first order, with an error
            # below dx^2 = 1e-20 relative, and no second exp.
            return m + m * (sc * dx), sc - sc * (s * dx), INTERIOR, x_new
        if not (x_lo < x_new < x_hi):  # also catches NaN
            if x_new >= x_hi and x_hi == _X_MAX and not hi_end_tried:
                # try the far end once: the root may be beyond float resolution
                hi_end_tried = True
                x_new = _X_MAX
            else:
                x_new = mid
        elif x_lo > _X_MIN and x_hi < _X_MAX and abs(dx) > 0.5 * step_before:
            # Both sides of the root seen, and Newton's step has not halved:
            # an inexact derivative (a user generator's finite difference) or
            # rounding noise in g makes it oscillate. Bisect instead, which
            # halves the bracket and so guarantees convergence.
            x_new = mid
        elif iteration >= _MAX_ITER // 2:
            # Newton has had half the budget. Where rounding makes g a step
            # function (a user f that sees only u, at u within an ulp or two
            # of 1) its steps need not shrink the bracket; bisection pins
            # the root within the other half.
            x_new = mid
        step_before = abs(x_new - x)
        x = x_new
    s, sc = _sigmoid_pair(x)
    return b * s, sc, FAILED, math.nan


@jit
def _ratio_bounds(p, m_hi, code_hi, u2_lo, code_lo):
    """(lower, upper, status) from the two margins; a failed bound is NaN.
    The upper bound reads m and the lower u2: each is resolved by INTERIOR,
    or after an overflow by the code that pins its own output."""
    status_hi = _margin_status(code_hi, OVERFLOW_M_PINNED)
    status_lo = _margin_status(code_lo, OVERFLOW_U2_PINNED)
    if code_hi == SATURATED:
        upper = 1.0 / p
    elif status_hi != STATUS_OK:
        upper = math.nan
    else:
        upper = min(1.0 + m_hi / p, 1.0 / p)
    if code_lo == SATURATED:
        lower = 0.0
    elif status_lo != STATUS_OK:
        lower = math.nan
    else:
        lower = u2_lo
    # an overflow outranks a failure to converge, as before
    return lower, upper, max(status_hi, status_lo)


@jit
def _margin_status(code, pinned_code):
    """STATUS_* of one margin whose output ``pinned_code`` resolves."""
    if code == INTERIOR or code == SATURATED or code == pinned_code:
        return STATUS_OK
    if code == FAILED:
        return STATUS_NOT_CONVERGED
    return STATUS_OVERFLOW


@jit
def _probability_pair(x, from_logp):
    """(p, 1 - p) from p, or from log p with 1 - p = -expm1(log p) exact near 1."""
    if from_logp:
        # 0.0 - expm1 turns -0.0 into +0.0: a signed zero would make 1/(1-p)
        # = -inf at p = 1
        return math.exp(x), 0.0 - math.expm1(x)
    return x, 1.0 - x


_TWO_TO_MINUS_52 = 2.0**-52


@jit
def simplex_cap_from_logp(log_p):
    """A float64 at most e^(-log p), the simplex cap 1/p of p = e^(log p),
    and within 2 ulp of it.

    1/fl(exp(log p)) rounds twice and lands up to an ulp above e^(-log p)
    (more where exp(log p) is subnormal), so an upper bound capped by it
    broke r <= 1/p. fl(exp(-log p)) is within an ulp of e^(-log p) (libm's
    exp, at most 0.51 ulp in glibc); one ulp down is below it. 1 and inf
    are kept: e^(-log p) >= 1 for log p <= 0, and inf stands for a cap past
    float64's range, as 1/p does for a tiny p.
    """
    cap = math.exp(-log_p)
    if cap == 1.0 or cap == math.inf:
        return cap
    # cap (1 - 2^-52) is cap less 1 or 2 ulp, never less than 1
    return max(cap * (1.0 - _TWO_TO_MINUS_52), 1.0)


# --- p below the smallest normal, from log p --------------------------------------
#: log 2^-1022: below it exp(log p) is subnormal (fewer than 53 bits; 1 at -745)
#: or 0, and the upper bound of a rounded p is off wherever it stays below the
#: cap 1/p (chi2 and alpha with a > 1 grow like p^(-1/a): alpha:2 was 32% off
#: at log p = -745). ``upper_from_small_logp`` takes log p itself there.
LOG_SMALLEST_NORMAL = -708.3964185322641
_LOG_SCALED_P = -690.0  # the scaled p lies in (e^-691, e^-690], where p = 1e-300 is tested
_LOG_SCALED_MAX = 700.0  # the scaled delta and 1 - p stay below e^700
_LOG_PROBE = -693.0  # the normal weight the beyond-float64 test evaluates g with


@jit
def _times_exp(delta, c):
    """delta e^c for an integer c >= 0 where the product is at most e^700, in
    three factors that never overflow (each partial product is at most the
    whole)."""
    c1 = min(c, _LOG_SCALED_MAX)
    c2 = min(c - c1, _LOG_SCALED_MAX)
    return delta * math.exp(c1) * math.exp(c2) * math.exp(c - c1 - c2)


@template(calls=(solve_margin, perspective))
def upper_from_small_logp(log_p, delta, theta, f_at_zero, slope_at_inf, curvature, x_start,
                          growth_exponent, growth_log_coefficient):
    """(upper bound, STATUS_*) from log p where p = e^(log p) < 2^-1022 is
    subnormal or 0 in float64, so that 1 - p rounds to 1.

    g is homogeneous: g(l m; l a, l b) = l g(m; a, b), and r = 1 + m/a does
    not depend on l. With l = e^c, c an integer (so that log p + c is exact),
    the scaled a = e^(log p + c) is a normal float within an ulp, and the
    root finder solves (a, b, delta) = (l p, l, l delta) exactly as it solves
    a normal p. Where c > 700, b = e^700 stands for l: the term b f(1 - m/b)
    is below e^-600 of delta either way (m = p (r - 1) < e^-680 at every
    finite r), so the root moves by less than that.

    Where l delta would pass e^700 (delta / p beyond about e^1390), p f(r) =
    delta is outside float64 and the bound is decided without g:
    * with the divergence's growth e^k r^n >= f(r) (``growth_at_infinity``;
      equal to 1e-290 relative there), r = e^((log delta - log p - k) / n);
    * else the bound is +inf (beyond float64) where a f(R) at R = float64's
      largest ratio and a = e^-693 is finite: then f(R) < e^1403, and
      p f(R) < delta; otherwise STATUS_OVERFLOW and NaN (a user generator
      that grows faster than r^2: the bound may be finite, and is not
      guessed).
    The simplex cap e^(-log p) bounds each.
    """
    cap = simplex_cap_from_logp(log_p)
    log_delta = math.log(delta)
    excess = log_delta - log_p  # log(delta / p)
    # (math.ceil is an int64 in numba: bounded first, log p may be -1e300)
    c = float(math.ceil(_LOG_SCALED_P - log_p)) if excess < 2000.0 else math.inf
    if log_delta + c <= _LOG_SCALED_MAX:
        a = math.exp(log_p + c)
        b = math.exp(min(c, _LOG_SCALED_MAX))
        m, _, code, _ = solve_margin(a, b, _times_exp(delta, c), theta, f_at_zero,
                                     slope_at_inf, curvature, x_start)
        status = _margin_status(code, OVERFLOW_M_PINNED)
        if code == SATURATED:
            return cap, status
        if status != STATUS_OK:
            return math.nan, status
        return min(1.0 + m / a, cap), status
    # here log(delta / p) is above about 1390
    if growth_exponent > 0.0:
        return min(math.exp((excess - growth_log_coefficient) / growth_exponent), cap), \
            STATUS_OK
    probe = math.exp(_LOG_PROBE)
    value = perspective(probe, probe * _FLOAT_MAX, theta)  # e^-693 f(R)
    if value == 0.0 or math.log(value) < excess + _LOG_PROBE - 1e-6:
        return cap, STATUS_OK
    return math.nan, STATUS_OVERFLOW


_ROOT_SIG = types.int64(
    InVec, types.boolean, InVec, types.float64, types.float64, types.float64, types.float64,
    InVec, InVec, OutVec, OutVec, types.int8[::1], types.float64, types.float64,
)


@template(_ROOT_SIG, parallel=True, calls=(solve_margin, upper_from_small_logp))
def band_by_root(x, from_logp, delta, theta, f_at_zero, slope_at_inf,
                 curvature, start_upper, start_lower, lower, upper, status,
                 growth_exponent, growth_log_coefficient):
    """Bounds for every element by the safeguarded root finder.

    ``x`` holds p (or log p where ``from_logp``); ``x`` and ``delta`` have
    length 1 or len(lower), a length-1 operand standing for every element.
    ``start_upper`` / ``start_lower`` are warm-start tables from
    ``margin_at`` on ``_warm_start.NODE_Z`` for a single delta, or empty.
    Writes each element's ``STATUS_*`` code into ``status`` (int8) and
    returns the number of elements whose status is not ``STATUS_OK``.
    ``growth_*``: the divergence's ``growth_at_infinity`` (exponent 0 for
    none), for upper bounds from log p below ``LOG_SMALLEST_NORMAL``.
    """
    failures = 0
    warm = start_upper.size > 0
    n = lower.size
    x_step = 1 if x.size > 1 else 0
    d_step = 1 if delta.size > 1 else 0
    for i in prange(n):
        p, pc = _probability_pair(x[i * x_step], from_logp)
        # p below 2^-1022 from a finite log p: the upper bound from log p itself
        small = from_logp and -math.inf < x[i * x_step] < LOG_SMALLEST_NORMAL
        if p == 0.0 and not small:
            lower[i] = 0.0
            upper[i] = math.inf
            status[i] = STATUS_OK
            continue
        d = delta[i * d_step]
        x_hi = math.nan
        x_lo = math.nan
        if warm:
            log_p = x[i * x_step] if from_logp else math.log(p)
            # z only picks a starting point (its error costs iterations,
            # never accuracy): for p < 1/64, log(1 - p) by five terms of its
            # series (error below 3e-12 in z), one logarithm fewer per element
            z = log_p + p * (1.0 + p * (0.5 + p * (1.0 / 3.0 + p * (0.25 + 0.2 * p)))) \
                if p < 0.015625 else log_p - math.log(pc)
            x_hi = interpolate_start(start_upper, z)
            x_lo = interpolate_start(start_lower, z)
        if small:
            upper_small, code_small = upper_from_small_logp(
                x[i * x_step], d, theta, f_at_zero, slope_at_inf, curvature, x_hi,
                growth_exponent, growth_log_coefficient)
            if p == 0.0:  # the lower bound is 0 to within 4 eps (p f(0) < delta, or f(0) = inf)
                lower[i], upper[i], code = 0.0, upper_small, code_small
            else:
                _, u2_lo, code_lo, _ = solve_margin(pc, p, d, theta, f_at_zero, slope_at_inf,
                                                    curvature, x_lo)
                lower[i], _, code = _ratio_bounds(p, pc, INTERIOR, u2_lo, code_lo)
                upper[i] = upper_small
                code = max(code, code_small)
            status[i] = code
            failures += code != STATUS_OK
            continue
        m_hi, _, code_hi, _ = solve_margin(p, pc, d, theta, f_at_zero, slope_at_inf,
                                           curvature, x_hi)
        _, u2_lo, code_lo, _ = solve_margin(pc, p, d, theta, f_at_zero, slope_at_inf,
                                            curvature, x_lo)
        lower[i], upper[i], code = _ratio_bounds(p, m_hi, code_hi, u2_lo, code_lo)
        if from_logp:
            upper[i] = min(upper[i], simplex_cap_from_logp(x[i * x_step]))
        status[i] = code
        failures += code != STATUS_OK
    return failures


_CLOSED_SIG = types.UniTuple(types.int64, 2)(InVec, types.boolean, InVec, types.float64,
                                            OutVec, OutVec)


@template(slots=("CLOSED_FORM",))
def _closed_form_bounds(p, pc, d, theta):
    """(lower, upper) of one element from its closed-form margins.

    Written as selects, without branches, so that the loops calling it
    vectorise; a closed form reaches the simplex end exactly where it
    saturates. One division, the bottleneck of the vectorised loop: by p
    scaled by 2^64, normal even for subnormal p, so 1/p is exact (inf where
    it overflows) and m/p = m * (1/p) gains an ulp, far inside the tolerance
    (m * 2^-64 / p is normal wherever m/p exceeds 1e-35 and could move
    1 +- m/p). p = 0 gives (0, inf) by the last select.
    """
    m_hi, m_lo = CLOSED_FORM(p, pc, d, theta)
    inv_scaled_p = 1.0 / (p * _TWO_TO_64)
    inv_p = inv_scaled_p * _TWO_TO_64
    upper = inv_p if m_hi >= pc else min(1.0 + (m_hi * inv_scaled_p) * _TWO_TO_64, inv_p)
    lower = 0.0 if m_lo >= p else max(1.0 - (m_lo * inv_scaled_p) * _TWO_TO_64, 0.0)
    return (0.0, math.inf) if p == 0.0 else (lower, upper)


@template(_CLOSED_SIG, parallel=True, calls=(_closed_form_bounds,))
def band_by_closed_form(x, from_logp, delta, theta, lower, upper):
    """Bounds for every element from a closed-form margin (operands as above).

    Returns two counts:

    * the elements from log p below ``LOG_SMALLEST_NORMAL``: their p is
      rounded (subnormal or 0), and the closed form's upper bound is that of
      the rounded p; the caller recomputes those upper bounds with
      ``band_by_root`` (``upper_from_small_logp``);
    * in the common case below, the elements of p outside [0, 1] (NaN
      included), counted in the same pass so that a large batch is not read
      twice (its range check is deferred to here: ``_validate.band_request``,
      ``defer_range_check``); the caller raises the validation error where
      it is not 0. Elsewhere 0: those inputs were checked before."""
    n = lower.size
    if x.size == n and delta.size == 1 and not from_logp:
        # The common case, a batch of p and one delta, as a loop of unit
        # stride and no loop-invariant branch, which LLVM vectorises: the
        # general loop's indices i * step are not known to be unit stride.
        d = delta[0]
        outside = 0
        for i in prange(n):
            p = x[i]
            lower[i], upper[i] = _closed_form_bounds(p, 1.0 - p, d, theta)
            outside += not ((p >= 0.0) & (p <= 1.0))  # NaN fails both
        return 0, outside
    x_step = 1 if x.size > 1 else 0
    d_step = 1 if delta.size > 1 else 0
    small = 0
    for i in prange(n):
        p, pc = _probability_pair(x[i * x_step], from_logp)
        lower[i], upper[i] = _closed_form_bounds(p, pc, delta[i * d_step], theta)
        if from_logp:
            upper[i] = min(upper[i], simplex_cap_from_logp(x[i * x_step]))
            small += -math.inf < x[i * x_step] < LOG_SMALLEST_NORMAL
    return small, 0


_BINARY_SIG = types.void(InVec, InVec, types.float64, OutVec)

_SPLITTER = 134217729.0  # 2^27 + 1: Veltkamp's split into two 26-bit halves
_TWO_TO_MINUS_64 = 1.0 / _TWO_TO_64


@jit
def _one_minus_product(p, r):
    """1 - p r for p in (0, 1] and r >= 0, with one rounding where p r is in
    [1/2, 2] (the simplex end, where 1 - fl(p r) would cancel to nothing).

    Dekker's exact product p r = h + l, then 1 - h exact by Sterbenz's lemma.
    The factors are scaled by 2^64 and 2^-64 (exactly: p r >= 1/2 makes
    r >= 1/2 and keeps p 2^64 below 2^65) so that neither split overflows,
    whatever r <= 1/p is, and a subnormal p splits exactly.
    """
    h = p * r
    if not 0.5 <= h <= 2.0:
        return 1.0 - h
    a = p * _TWO_TO_64
    b = r * _TWO_TO_MINUS_64
    c = _SPLITTER * a
    a_hi = c - (c - a)
    a_lo = a - a_hi
    c = _SPLITTER * b
    b_hi = c - (c - b)
    b_lo = b - b_hi
    low = ((a_hi * b_hi - h) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return (1.0 - h) - low


@template(_BINARY_SIG, parallel=True, calls=(binary_value,))
def binary_divergence_kernel(p_in, r_in, theta, out):
    """g(p, r) = p f(r) + (1 - p) f((1 - p r)/(1 - p)) for r in [0, 1/p].

    Operands of length 1 stand for every element, as above.
    """
    n = out.size
    p_step = 1 if p_in.size > 1 else 0
    r_step = 1 if r_in.size > 1 else 0
    for i in prange(n):
        pi = p_in[i * p_step]
        ri = r_in[i * r_step]
        qi = 1.0 - pi
        if pi == 0.0:
            out[i] = 0.0
            continue
        m = pi * (ri - 1.0)
        if m < 0.0:
            # mirrored: (a, b) = (1 - p, p), and u2 = 1 - |m|/p is r itself
            out[i] = binary_value(qi, pi, -m, ri, ri - 1.0, theta)
            continue
        # the remaining mass 1 - p r, not qi - m: next to the simplex end
        # the latter keeps only the rounding errors of its two terms
        rest = _one_minus_product(pi, ri)
        if rest <= 0.0:
            out[i] = binary_value(pi, qi, qi, 0.0, -1.0, theta)
        else:
            # m may round up to qi (p = 3e-200, r = fl(1/p)) where rest > 0
            m = min(m, qi)
            out[i] = binary_value(pi, qi, m, rest / qi, -m / qi, theta)


_AT_SIG = types.void(
    InVec, types.float64, types.float64, types.float64, types.float64, types.float64,
    InVec, InVec, OutVec, OutVec,
)


@template(_AT_SIG, calls=(solve_margin,))
def margin_at(z, delta, theta, f_at_zero, slope_at_inf, curvature, start_upper, start_lower,
              x_upper, x_lower):
    """x of the upper and lower margin at each z = logit p (NaN where the
    bound is not interior), from the warm-start tables ``start_*`` (on
    ``_warm_start.NODE_Z``, or empty).

    On one thread: it builds the tables of one delta (4,097 nodes cold,
    23,040 warm-started, a few milliseconds), where a parallel copy compiled
    about 0.5 s longer on a first call (issue 41) and gained nothing."""
    for k in range(z.size):
        p, pc = _sigmoid_pair(z[k])  # (p, 1 - p), both exact
        x_upper[k] = solve_margin(p, pc, delta, theta, f_at_zero, slope_at_inf, curvature,
                                  interpolate_start(start_upper, z[k]))[3]
        x_lower[k] = solve_margin(pc, p, delta, theta, f_at_zero, slope_at_inf, curvature,
                                  interpolate_start(start_lower, z[k]))[3]
