"""A user's generator, checked and compiled: the generic divergence.

:func:`compile_generator` turns a plain Python (or numba) f into the numba
functions and edge values a :class:`~bandsolve.Divergence` holds, after the
checks of docs/divergences.md ("The user-generator contract"): f(1) = 0,
convexity on a grid, the edge values f(0) and f'(inf) estimated or checked.
The linear term f'(1) (u - 1), which does not change the divergence, is
removed, so the result is normalised like the built-in generators.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numba

from .._kernels._util import GENERATOR_SIG, generator

__all__ = ["compile_generator"]

# relative step of the central difference that stands in for a missing f'
_FD_STEP = 6e-6
# f(u (1 + h)) - f(u (1 - h)) at or below this many ulps of f: no digits left
_FD_CANCELLED = 64 * 2.220446049250313e-16


def _jit_user(fn):
    # numpy's error model: 1/0 gives inf, as the kernels expect at u = 0,
    # where python's would raise inside a parallel kernel
    return numba.njit(error_model="numpy")(fn)


# f(u)/u is read on this ladder of u (the slope at infinity): far out, so that
# slowly vanishing terms (hellinger's 2/sqrt(u), kl's log(u)/u) are below
# float64 resolution, and on many rungs, so that an intermediate overflow
# (Le Cam's (1 - u)^2 beyond u = 1e154) leaves rungs where f is still finite.
_SLOPE_LADDER = tuple(10.0 ** k for k in range(20, 301, 20))
# f(u)/u has settled when two rungs, a factor 1e20 apart, agree this well:
# u^(1 + 1e-5) changes by 5e-4 between rungs and is rightly read as inf
_SLOPE_SETTLED = 1e-6
# Past this u, a finite-slope f that returns +inf has overflowed inside
_U_LINEAR_IF_OVERFLOWS = 1e100
# Convexity is tested on this grid: dense from 1e-6 to 1e6 (ratio 1.05) and
# sparse beyond, down to 1e-300 and up to 1e300, plus u = 0
_CONVEXITY_GRID = sorted({0.0, *(10.0 ** (k / 4) for k in range(-1200, 1201)),
                          *(1.05 ** k for k in range(-284, 284))})


def _returning_nan_for_errors(fn):
    """fn, with any exception it raises turned into NaN: an exception inside a
    parallel kernel is lost, and the bounds around it would be garbage; a NaN
    stops the root finder with an error instead (the solver checks g)."""
    @numba.njit(numba.float64(numba.float64), error_model="numpy")
    def safe(u):
        try:
            return fn(u)
        except Exception:  # noqa: BLE001 - numba catches only the bare class
            return math.nan
    return safe


def _check_edge_values(name, f_at_zero, slope_at_infinity, curvature_at_one):
    """Refuse values that no convex generator with f(1) = f'(1) = 0 has."""
    for label, value in (("f_at_zero", f_at_zero), ("slope_at_infinity", slope_at_infinity),
                         ("curvature_at_one", curvature_at_one)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            # float() would read "1" or True as 1.0, and "x" as a ValueError
            raise TypeError(f"{label} of {name!r} must be a real number or None "
                            f"(got {type(value).__name__})")
    for label, value in (("f_at_zero", f_at_zero), ("slope_at_infinity", slope_at_infinity)):
        if value is not None and not float(value) >= 0.0:  # also NaN
            raise ValueError(
                f"{label} of {name!r} must be >= 0 or inf (got {value}): the generator, "
                "with its linear term f'(1) (u - 1) removed, is convex with a minimum "
                "of 0 at u = 1, so f(0) and lim f(u)/u are both >= 0")
    if curvature_at_one is not None and not 0.0 <= float(curvature_at_one) < math.inf:
        raise ValueError(f"curvature_at_one of {name!r} must be finite and >= 0 "
                         f"(got {curvature_at_one})")


def _slope_at_one(f_user) -> float:
    """f'(1) by Romberg extrapolation of central differences (h = 2^-10,
    2^-11, 2^-12): truncation error O(h^6), rounding error about
    eps |f(1 +- h)| / h, so about 1e-19 for a generator written without
    cancellation near 1, where a plain difference was off by 1e-11 (Le Cam).
    The steps are powers of two, so that 1 +- h is exact: with h = 1e-3,
    1 + h rounded by 1e-13 relative, an error that f's size multiplied
    (1e100 (u - 1)^2 had f'(1) = 1.6e84 and then a NaN where its linear term
    overflowed). The linear term that this removes cancels between g's two
    terms; an error in it survives as rounding noise that swamps g at tiny
    delta, so an estimate below its own error estimate is taken as 0."""
    def central(h):
        return (float(f_user(1.0 + h)) - float(f_user(1.0 - h))) / (2.0 * h)

    h = 2.0**-10
    d1, d2, d3 = central(h), central(h / 2), central(h / 4)
    r1, r2 = (4.0 * d2 - d1) / 3.0, (4.0 * d3 - d2) / 3.0
    slope = (16.0 * r2 - r1) / 15.0
    noise = abs(r2 - r1) / 15.0 + 1e-15 * max(abs(float(f_user(1.0 + h))),
                                             abs(float(f_user(1.0 - h)))) / h
    return 0.0 if abs(slope) <= noise else slope


_EPS = 2.220446049250313e-16


def _linear_term_noise(slope_one: float, u: float) -> float:
    """The rounding in f(u) - f'(1) (u - 1) that a large linear term brings:
    c u - c is computed to about eps c (u + 1), not eps c |u - 1|."""
    return 16.0 * _EPS * abs(slope_one) * (u + 1.0)


def _is_affine(f_user, slope_one: float) -> bool:
    """Whether f is c (u - 1) on the convexity grid, to the rounding of
    evaluating it: such an f generates the zero divergence. The test was 1e-9
    relative, which read 1e9 (u - 1) + |u - 1|, total variation with a linear
    term, as linear, and its band as [0, 1/p]; it now allows what computing
    c (u - 1) can round, 64 eps (|f(u)| + |c| (u + 1))."""
    for u in _CONVEXITY_GRID:
        value = float(f_user(u))
        linear = slope_one * (u - 1.0)
        if value == linear:  # also the same infinity, where c (u - 1) overflows
            continue
        allowed = 64.0 * _EPS * (abs(value) + abs(slope_one) * (u + 1.0)) + 1e-300
        if not abs(value - linear) <= allowed:
            return False  # also NaN
    return True


def _check_convex_on_grid(name, f_norm, slope_one: float = 0.0) -> None:
    """Refuse an f that is NaN (or raises) on (0, inf), or that is not convex
    on _CONVEXITY_GRID (beyond rounding): its band would not be the band of
    any f-divergence. +inf is allowed where f is infinite on an interval's
    complement, as for a convex function with a bounded domain."""
    points: list[tuple[float, float]] = []
    inf_after_finite = None
    for u in _CONVEXITY_GRID:
        value = float(f_norm(u, u - 1.0, 0.0))
        if math.isnan(value):
            if u == 0.0:
                continue  # f(0) may be a limit: f_at_zero covers it
            raise ValueError(
                f"the generator of {name!r} is NaN (or raises) at u = {u:.6g}; f must be "
                "defined on (0, inf): return math.inf where f is infinite")
        if value == math.inf:
            if points:
                inf_after_finite = u
            continue
        if inf_after_finite is not None:
            raise ValueError(f"the generator of {name!r} is not convex: it is +inf at "
                             f"u = {inf_after_finite:.6g} but finite at u = {u:.6g}")
        points.append((u, value))
    for (u0, f0), (u1, f1), (u2, f2) in zip(points, points[1:], points[2:]):
        chord = f0 + (f2 - f0) * ((u1 - u0) / (u2 - u0))
        # beyond rounding, also that of removing a large linear term (1e8
        # (u - 1) + |u - 1| was refused as "not convex" by its noise)
        rounding = 1e-9 * (abs(f0) + abs(f1) + abs(f2)) + sum(
            _linear_term_noise(slope_one, u) for u in (u0, u1, u2)) + 1e-300
        if f1 - chord > rounding:
            raise ValueError(
                f"the generator of {name!r} is not convex: f({u1:.10g}) = {f1:.10g} lies above "
                f"the chord from u = {u0:.10g} to {u2:.10g} ({chord:.10g}); an f-divergence "
                "needs a convex f")

def _check_given_edge_values(name, f_user, slope_one, f_linear_removed, f_at_zero,
                             slope_at_infinity) -> None:
    """Refuse a given f(0) or f'(inf) that f itself contradicts: they were
    trusted, and a wrong one gave wrong bounds at subnormal p and 1 - p.

    With its linear term removed, f is convex with its minimum 0 at u = 1, so
    it decreases on (0, 1) towards f(0) (f(0) >= f(u) there) and f(u)/u
    increases on (1, inf) towards f'(inf) (f'(inf) >= f(u)/u there): a given
    value below one of f's own is wrong for certain. Above them, it is
    refused where f answers more precisely: f(0) evaluates finite, or f(u)/u
    settles on the ladder (the estimate used when nothing is given)."""
    def noise(u):  # rounding in f(u) - f'(1) (u - 1)
        return 1e-9 * (abs(float(f_user(u))) + abs(slope_one * (u - 1.0))) + 1e-300

    if f_at_zero is not None:
        given = float(f_at_zero)
        for u in (u for u in _CONVEXITY_GRID if 0.0 < u < 1.0):
            value = float(f_linear_removed(u, u - 1.0, 0.0))
            if value == math.inf and given < math.inf:
                raise ValueError(f"f_at_zero of {name!r} is {given!r}, but f is +inf at "
                                 f"u = {u:.6g}, so f(0) is inf: pass math.inf, or omit it")
            if value > given + noise(u):
                raise ValueError(
                    f"f_at_zero of {name!r} is {given!r}, but f({u:.6g}) = {value!r} is larger, "
                    "and f only grows towards u = 0 on (0, 1) (with the linear term "
                    "f'(1) (u - 1) removed): pass the limit of f(u) as u -> 0, or omit it")
        at_zero = float(f_linear_removed(0.0, -1.0, 0.0))
        if math.isfinite(at_zero) and abs(at_zero - given) > noise(0.0) + 1e-9 * abs(given):
            raise ValueError(f"f_at_zero of {name!r} is {given!r}, but f evaluates to "
                             f"{at_zero!r} at u = 0: omit f_at_zero, or correct it")
    if slope_at_infinity is None:
        return
    given = float(slope_at_infinity)
    for u in sorted({*(u for u in _CONVEXITY_GRID if u > 1.0), *_SLOPE_LADDER}):
        value = float(f_linear_removed(u, u - 1.0, 0.0))
        if value == math.inf:
            if u > _U_LINEAR_IF_OVERFLOWS or given == math.inf:
                continue  # past 1e100: read as an intermediate overflow
            raise ValueError(
                f"slope_at_infinity of {name!r} is {given!r}, but f is +inf at u = {u:.6g} "
                "(its value, or an overflow inside it): a finite slope needs f finite up to "
                "u = 1e100; pass math.inf if f is infinite there, or scale f down")
        if value > given * u + noise(u):
            raise ValueError(
                f"slope_at_infinity of {name!r} is {given!r}, but f({u:.6g}) / {u:.6g} = "
                f"{value / u!r} is larger, and f(u)/u only grows on (1, inf) (with the linear "
                "term f'(1) (u - 1) removed): pass lim f(u)/u (math.inf if f grows "
                "faster than u), or omit it")
    try:
        estimate, u_settled = _slope_at_infinity(name, f_linear_removed)
    except ValueError:
        return  # f is NaN on the ladder: the given value is what there is
    if math.isfinite(estimate) and not abs(given - estimate) <= 1e-6 * estimate + 1e-300:
        raise ValueError(
            f"slope_at_infinity of {name!r} is {given!r}, but f(u)/u settles to {estimate!r} "
            f"(to 1e-6, on u = 1e20 to {u_settled:.0e}): omit slope_at_infinity, or correct it")


def _slope_at_infinity(name, f_norm) -> tuple[float, float]:
    """(lim f(u)/u, the u from which f is linear to float64 resolution).

    Read on _SLOPE_LADDER up to the first rung where f is not finite. The
    slope is the last finite f(u)/u if the two rungs before agree to
    _SLOPE_SETTLED, else inf when f is +inf there or grows to the end.
    """
    rungs: list[tuple[float, float]] = []  # (u, f(u)/u) while f is finite
    stop = math.nan
    for u in _SLOPE_LADDER:
        stop = float(f_norm(u, u, 0.0))
        if not math.isfinite(stop):
            break
        rungs.append((u, stop / u))
    settled = len(rungs) >= 2 and \
        abs(rungs[-1][1] - rungs[-2][1]) <= _SLOPE_SETTLED * abs(rungs[-1][1])
    if settled:
        return rungs[-1][1], rungs[-1][0]
    if math.isnan(stop):
        raise ValueError(
            f"{name!r}: f is NaN (or raises) at u = {_SLOPE_LADDER[len(rungs)]:g} before "
            "f(u)/u settles, so its slope at infinity cannot be estimated; pass "
            "slope_at_infinity = lim f(u)/u (math.inf for an f that grows faster than u)")
    return math.inf, math.inf


@generator  # compiled where a kernel first calls it, not at import
def _zero(u, x, theta):
    return 0.0


# The tail of the conjugate is fitted on v = 2^-k, 2^-(k - 16), ... (exact
# powers of two, k the largest with f(2^k) finite) and used below 2^-k only
# where the fit's own error estimate, at the smallest subnormal, is this small
# relative to the value (rkl: 7e-15).
_TAIL_STEP = 16
_TAIL_TOLERANCE = 1e-13
_NO_TAIL = (0.0, 0.0, 0.0, 0.0, 0.0)


def _conjugate_tail(f_norm, slope_inf: float) -> tuple:
    """(log v0, c0, c1, c2, h): v f(1/v) = c0 + s (c1 + (s - 1) c2) with
    s = (log v - log v0) / h, for the v below v0 where f(1/v) overflows
    float64 though v f(1/v) does not (a generator that grows like u log u:
    a hand-written rkl at 1 - p below 1e-305). Quadratic in log v through
    three nodes; a fourth node's third difference bounds the extrapolation
    error down to v = 5e-324, and where that bound exceeds _TAIL_TOLERANCE
    (f growing like a power of u, whose v f(1/v) then overflows itself)
    there is no tail (h = 0): such a v stays +inf, reported as an overflow.
    Only for f'(inf) = inf: a finite slope is the limit itself."""
    if slope_inf < math.inf:
        return _NO_TAIL
    k = 1023
    while k > 4 * _TAIL_STEP and not math.isfinite(float(f_norm(2.0**k, 2.0**k - 1.0, 0.0))):
        k -= 1
    if k <= 4 * _TAIL_STEP:
        return _NO_TAIL
    phi = []
    for i in range(4):
        u = 2.0 ** (k - _TAIL_STEP * i)
        phi.append(float(f_norm(u, u - 1.0, 0.0)) / u)
    if not all(math.isfinite(value) for value in phi):
        return _NO_TAIL
    d1 = phi[1] - phi[0]
    d2 = phi[2] - 2.0 * phi[1] + phi[0]
    d3 = phi[3] - 3.0 * phi[2] + 3.0 * phi[1] - phi[0]
    h = _TAIL_STEP * math.log(2.0)
    log_v0 = -k * math.log(2.0)
    s = (math.log(5e-324) - log_v0) / h
    at_end = phi[0] + s * (d1 + (s - 1.0) * d2 / 2.0)
    error = abs(d3) / 6.0 * abs(s * (s - 1.0) * (s - 2.0))
    if not (math.isfinite(at_end) and error <= _TAIL_TOLERANCE * abs(at_end)):
        return _NO_TAIL
    return log_v0, phi[0], d1, d2 / 2.0, h


def compile_generator(name: str, f: Callable, df: Callable | None, f_at_zero: float | None,
                      slope_at_infinity: float | None,
                      curvature_at_one: float | None) -> dict:
    """f (and df) compiled, checked and normalised: the Divergence fields
    ``f``, ``df``, ``f_conjugate``, ``f_at_zero``, ``slope_at_infinity`` and
    ``curvature_at_one``, by name. The arguments and the errors are those of
    :meth:`bandsolve.Divergence.from_generator`."""
    f_raw = f if isinstance(f, numba.core.dispatcher.Dispatcher) else _jit_user(f)
    try:
        f_one = float(f_raw(1.0))
    except Exception as exc:  # numba's typing errors are varied
        raise TypeError(f"numba could not compile the generator of {name!r}: {exc}") from exc
    f_user = _returning_nan_for_errors(f_raw)
    _check_edge_values(name, f_at_zero, slope_at_infinity, curvature_at_one)
    h = 1e-5
    scale = max(abs(float(f_user(1.0 + h))), abs(float(f_user(1.0 - h))), 1e-300)
    if abs(f_one) > 1e-12 * max(1.0, scale / h**2):
        raise ValueError(f"a generator must satisfy f(1) = 0, but {name!r} has f(1) = {f_one}")
    if df is None:
        slope_one = _slope_at_one(f_user)
        df_user = None
    else:
        df_user = _returning_nan_for_errors(
            df if isinstance(df, numba.core.dispatcher.Dispatcher) else _jit_user(df))
        slope_one = float(df_user(1.0))
        if not math.isfinite(slope_one):
            raise ValueError(f"df of {name!r} must be finite at u = 1 (got {slope_one})")

    if _is_affine(f_user, slope_one):
        # D_f = 0 for every pair of distributions: the band is [0, 1/p]
        # whatever delta > 0 is, and the zero generator gives exactly that
        # (g = 0 saturates both bounds). Its edge values are all 0.
        for label, value in (("f_at_zero", f_at_zero), ("slope_at_infinity", slope_at_infinity)):
            if value is not None and float(value) != 0.0:
                raise ValueError(f"{label} of {name!r} must be 0 (got {value}): f is linear, "
                                 "c (u - 1), which generates the zero divergence")
        return dict(f=_zero, df=_zero, f_conjugate=_zero, f_at_zero=0.0, slope_at_infinity=0.0,
                    curvature_at_one=1.0)

    @numba.njit(GENERATOR_SIG, error_model="numpy")
    def f_linear_removed(u, x, theta):
        value = f_user(u)
        if value == math.inf:
            # f itself is +inf (or overflowed): the linear term, finite,
            # leaves it +inf (slope_one x may overflow too: inf - inf = NaN)
            return math.inf
        return value - slope_one * x

    _check_convex_on_grid(name, f_linear_removed, slope_one)
    _check_given_edge_values(name, f_user, slope_one, f_linear_removed, f_at_zero,
                             slope_at_infinity)
    if f_at_zero is None:
        f_at_zero = float(f_linear_removed(0.0, -1.0, 0.0))
        if math.isnan(f_at_zero):
            raise ValueError(f"f(0) of {name!r} evaluates to NaN (or f raises at 0); "
                             "pass f_at_zero = lim f(u) as u -> 0 explicitly")
        _check_edge_values(name, f_at_zero, None, None)
    if slope_at_infinity is None:
        slope_inf, u_settled = _slope_at_infinity(name, f_linear_removed)
    else:
        # f has a finite slope, so it is finite everywhere: +inf from it
        # far out is an intermediate overflow
        slope_inf, u_settled = float(slope_at_infinity), _U_LINEAR_IF_OVERFLOWS

    @numba.njit(GENERATOR_SIG, error_model="numpy")
    def f_norm(u, x, theta):
        value = f_linear_removed(u, x, theta)
        if value == math.inf and u > u_settled:
            # An intermediate result overflowed (Le Cam's (1 - u)^2 at
            # u = 1e200) past the u where f(u)/u had settled to its
            # finite limit: f is linear to float64 resolution there.
            return slope_inf * u
        return value

    if df_user is not None:
        @numba.njit(GENERATOR_SIG, error_model="numpy")
        def df_norm(u, x, theta):
            return df_user(u) - slope_one
    else:
        @numba.njit(GENERATOR_SIG, error_model="numpy")
        def df_norm(u, x, theta):
            # A central difference with a step relative to u: accurate to
            # about 1e-10 relative at every scale of u (the solver meets
            # u from 1e-300 to 1e300), where a step fixed in absolute
            # terms is far too coarse for small u, and then Newton's
            # iteration oscillates. h = 6e-6 is near cbrt(eps), which
            # balances truncation (h^2) against rounding (eps / h).
            if u == 0.0:
                return (f_user(_FD_STEP) - f_user(0.0)) / _FD_STEP - slope_one
            up = u * (1.0 + _FD_STEP)
            down = u * (1.0 - _FD_STEP)
            f_up = f_user(up)
            f_down = f_user(down)
            if u < _FD_STEP and not abs(f_up - f_down) > _FD_CANCELLED * max(
                    abs(f_up), abs(f_down)):
                # Near u = 0 a step relative to u keeps no digits: u (1 +- h)
                # rounds to u for subnormal u, and f(0) != 0 swamps the
                # difference for u below about 1e-10. A forward difference
                # over the fixed step h (as at u = 0) is coarse but finite;
                # the inf this branch used to return made Newton's step 0.
                return (f_user(u + _FD_STEP) - f_user(u)) / _FD_STEP - slope_one
            slope = (f_up - f_down) / (up - down) - slope_one
            if slope != slope or abs(slope) == math.inf:
                # u (1 + h) overflowed: f'(u) has reached its limit f'(inf)
                return slope_inf
            return slope

    if curvature_at_one is None:
        c = (float(f_norm(1 + h, h, 0.0)) + float(f_norm(1 - h, -h, 0.0))) / h**2
        curvature_at_one = c if math.isfinite(c) and c > 0 else 1.0

    tail_log_v0, tail_c0, tail_c1, tail_c2, tail_h = _conjugate_tail(f_norm, slope_inf)

    @numba.njit(GENERATOR_SIG, error_model="numpy")
    def f_conj(v, x, theta):
        u = 1.0 / v
        value = math.inf
        if u < math.inf:
            value = v * f_norm(u, -x / v, theta)
        elif slope_inf < math.inf or v == 0.0:
            # v = 0, or subnormal: v f(1/v) has reached its limit f'(inf)
            # (1/v and -x/v would overflow into inf - inf = NaN)
            return slope_inf
        if value == math.inf and v > 0.0 and tail_h > 0.0:
            # f(1/v) is past float64 (rkl's u log u beyond u = 2.6e305),
            # v f(1/v) is not: its quadratic in log v, checked at build
            s = (math.log(v) - tail_log_v0) / tail_h
            return tail_c0 + s * (tail_c1 + (s - 1.0) * tail_c2)
        return value

    return dict(f=f_norm, df=df_norm, f_conjugate=f_conj, f_at_zero=float(f_at_zero),
                slope_at_infinity=slope_inf, curvature_at_one=float(curvature_at_one))
