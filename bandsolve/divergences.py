"""Divergences as data: one small declarative object each, and the registry.

A :class:`Divergence` holds its generator f (normalised to f(1) = f'(1) = 0),
the derivative f' the root finder needs, the conjugate f*(v) = v f(1/v) that
keeps the binary divergence free of overflow, the edge values f(0) and
f'(inf) that decide saturation and the p -> 1 limit, f''(1) for the starting
point, and, where one exists, a closed-form margin. Backends consume these
fields; none of them looks at a divergence's name.

Built in, by name: ``kl``, ``rkl``, ``tv``, ``chi2``, ``neyman_chi2``,
``hellinger``, ``js``, and the Amari family ``alpha:<a>`` (or
:func:`alpha_divergence`). Define your own with :meth:`Divergence.from_generator`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType

import numba

from . import _convex_forms as cvx
from ._kernels import _closed_forms as cf
from ._kernels import _generators as gen
from ._kernels._util import GENERATOR_SIG

__all__ = ["Divergence", "BUILTIN_DIVERGENCES", "alpha_divergence", "get_divergence"]

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
    """f'(1) by Romberg extrapolation of central differences (h = 1e-3, 5e-4,
    2.5e-4): truncation error O(h^6), rounding error about eps |f(1 +- h)| / h,
    so about 1e-19 for a generator written without cancellation near 1, where
    a plain difference was off by 1e-11 (Le Cam). The linear term that this
    removes cancels between g's two terms; an error in it survives as
    rounding noise that swamps g at tiny delta, so an estimate below its own
    error estimate is taken as 0."""
    def central(h):
        return (float(f_user(1.0 + h)) - float(f_user(1.0 - h))) / (2.0 * h)

    d1, d2, d3 = central(1e-3), central(5e-4), central(2.5e-4)
    r1, r2 = (4.0 * d2 - d1) / 3.0, (4.0 * d3 - d2) / 3.0
    slope = (16.0 * r2 - r1) / 15.0
    noise = abs(r2 - r1) / 15.0 + 1e-15 * max(abs(float(f_user(1.0 + 1e-3))),
                                             abs(float(f_user(1.0 - 1e-3)))) / 1e-3
    return 0.0 if abs(slope) <= noise else slope



def _check_convex_on_grid(name, f_norm) -> None:
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
        if f1 - chord > 1e-9 * (abs(f0) + abs(f1) + abs(f2)) + 1e-300:
            raise ValueError(
                f"the generator of {name!r} is not convex: f({u1:.10g}) = {f1:.10g} lies above "
                f"the chord from u = {u0:.10g} to {u2:.10g} ({chord:.10g}); an f-divergence "
                "needs a convex f")

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


@dataclasses.dataclass(frozen=True)
class Divergence:
    """One f-divergence D_f(P||Q) = sum_b Q(b) f(P(b)/Q(b)), as data.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"kl"`` or ``"alpha:0.5"``.
    formula : str
        The generator in words, for tables and docs.
    f, df : numba function, signature ``(u, u - 1, parameter) -> float``
        Generator and its derivative, both given u and u - 1 exactly.
    f_conjugate : numba function, same signature
        f*(v) = v f(1/v), evaluated for v in [0, 1/2].
    f_at_zero : float
        f(0) = lim_{u -> 0} f(u), possibly inf. Finite values allow saturation.
    slope_at_infinity : float
        f'(inf) = lim_{u -> inf} f(u)/u, possibly inf. Governs p = 1.
    curvature_at_one : float
        f''(1); the root finder's starting point uses it.
    parameter : float
        Passed to f, df and f_conjugate as their third argument.
    margins : numba function or None
        Closed form ``(p, 1 - p, delta, parameter) -> (upper margin, lower
        margin)`` in probability; None means the root finder is used.
    convex_generator : callable or None
        ``(w, parameter) -> cvxpy expression``: f(w) elementwise in DCP form,
        for ``bandsolve.convex`` (see ``_convex_forms``). None: no convex
        verification.
    scaled_conjugate : numba function
        ``(s, v, v - 1, parameter) -> s f*(v)`` where f*(v) overflows float64
        but the product need not (alpha with a > 1 at tiny p and huge delta):
        +inf only where s f*(v) itself does. The default returns NaN: no such
        form, so the root finder reports a bound next to an overflow.
    """

    name: str
    formula: str
    f: Callable
    df: Callable
    f_conjugate: Callable
    f_at_zero: float
    slope_at_infinity: float
    curvature_at_one: float
    parameter: float = 0.0
    margins: Callable | None = None
    convex_generator: Callable | None = None
    scaled_conjugate: Callable = gen.scaled_conjugate_unknown

    @property
    def has_closed_form(self) -> bool:
        return self.margins is not None

    def without_closed_form(self) -> Divergence:
        """The same divergence, solved by the generic root finder."""
        return dataclasses.replace(self, margins=None, name=self.name + "[root]")

    @classmethod
    def from_generator(
        cls,
        name: str,
        f: Callable[[float], float],
        *,
        df: Callable[[float], float] | None = None,
        f_at_zero: float | None = None,
        slope_at_infinity: float | None = None,
        curvature_at_one: float | None = None,
        formula: str = "user-defined",
        convex_generator: Callable | None = None,
    ) -> Divergence:
        """A divergence from its generator f, solved by the generic root finder.

        Parameters
        ----------
        f : callable u -> float
            Convex on [0, inf) with f(1) = 0, written so numba can compile it
            (``math`` functions, arithmetic). It is compiled with numpy's
            error model (1/0 is inf); a function you jit yourself should use
            ``error_model="numpy"`` too, or never divide by zero. A linear term c (u - 1) is
            allowed and removed: it does not change the divergence.
        df : callable, optional
            f'(u). Without it f'(1) is estimated by Romberg extrapolation of
            central differences, and f' elsewhere by a central difference with a
            step relative to u (about 1e-10 relative where f keeps its digits);
            the root finder's bisection safeguard makes an inexact derivative
            cost iterations, never convergence.
        f_at_zero, slope_at_infinity : float, optional
            f(0) and lim f(u)/u of f with its linear term f'(1) (u - 1)
            removed, so both are >= 0 (or inf). By default f(0) is evaluated,
            and the slope is read from f(u)/u on u = 1e20, 1e40, ..., 1e300 up
            to the first u where f overflows: the last value where two rungs
            agree to 1e-6, else inf. Pass them when you know them: the band at
            p = 1 depends on the slope directly.
        curvature_at_one : float, optional
            f''(1), used only for the starting point (default: estimated).
        convex_generator : callable, optional
            f(w) with cvxpy atoms, for ``bandsolve.convex`` (see ``_convex_forms``).

        Raises
        ------
        ValueError
            If f(1) is not 0; f is NaN or raises at a point of the convexity
            grid (u > 0), or is not convex there; f(0) is NaN without
            ``f_at_zero``; f(u)/u meets a NaN before it settles without
            ``slope_at_infinity``; or a given edge value is NaN or negative.
            docs/divergences.md states the whole contract.
        TypeError
            If numba cannot compile f.

        Notes
        -----
        Accuracy depends on how f is written: a formula that cancels near
        u = 1 limits the bounds to the digits f keeps there.
        """
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

        @numba.njit(GENERATOR_SIG, error_model="numpy")
        def f_linear_removed(u, x, theta):
            return f_user(u) - slope_one * x

        _check_convex_on_grid(name, f_linear_removed)
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

        @numba.njit(GENERATOR_SIG, error_model="numpy")
        def f_conj(v, x, theta):
            u = 1.0 / v
            if u == math.inf:
                # v = 0, or subnormal: v f(1/v) has reached its limit f'(inf)
                # (1/v and -x/v would overflow into inf - inf = NaN)
                return slope_inf
            return v * f_norm(u, -x / v, theta)

        return cls(
            name=name, formula=formula, f=f_norm, df=df_norm, f_conjugate=f_conj,
            f_at_zero=float(f_at_zero), slope_at_infinity=slope_inf,
            curvature_at_one=float(curvature_at_one), convex_generator=convex_generator,
        )


def _parameter_text(a: float) -> str:
    """The shortest text that reads back as ``a`` (repr), without a trailing
    ".0": a name that rounds (":g" made 2.0000001 "alpha:2") resolves to
    another divergence, and a table exported under it failed its own check."""
    text = repr(a)
    return text[:-2] if text.endswith(".0") else text


def alpha_divergence(a: float) -> Divergence:
    """The Amari alpha-divergence, f(u) = (u^a - 1 - a (u - 1)) / (a (a - 1)).

    ``a -> 0`` gives kl, ``a -> 1`` gives rkl, and ``a = 2`` gives chi2 / 2.
    Where 1 - a rounds to 1 (0 < |a| <= about 1e-16) the result is kl under
    the name ``alpha:<a>``: the two agree there to float64 precision.

    Raises
    ------
    ValueError
        If a is 0, 1, or not finite (use ``"kl"`` / ``"rkl"`` for the limits).
    """
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise TypeError(f"the alpha parameter must be a real number (got {a!r})") from None
    if not math.isfinite(a) or a in (0.0, 1.0):
        raise ValueError(
            f"the alpha parameter must be finite and not 0 or 1 (got {a}); "
            "use divergence='kl' for a -> 0 and 'rkl' for a -> 1"
        )
    if 1.0 - a == 1.0:
        # |a| <= 2^-54 (2^-53 for a < 0): 1 - a rounds to 1, so the conjugate
        # alpha(1 - a) would divide by zero. Such an f_a differs from the kl
        # generator by a |log u|^2 / 2, below 5e-14 relative for every float64
        # u > 0, so kl is f_a to within the bounds' tolerance. (f_a(0) = 1/a
        # > 1e16 is finite, but saturating on it needs delta > 1e16 b, where
        # kl's bound is the same float: its u2 = e^(-delta/b) underflows.)
        kl = BUILTIN_DIVERGENCES["kl"]
        return dataclasses.replace(kl, name=f"alpha:{_parameter_text(a)}",
                                   formula=f"{kl.formula} (the a -> 0 limit, a = {a:g})")
    return Divergence(
        name=f"alpha:{_parameter_text(a)}",
        formula=f"(u^a - 1 - a(u - 1)) / (a(a - 1)), a = {a:g}",
        f=gen.alpha_f, df=gen.alpha_df, f_conjugate=gen.alpha_conjugate_f,
        scaled_conjugate=gen.alpha_scaled_conjugate,
        f_at_zero=1.0 / a if a > 0 else math.inf,
        slope_at_infinity=1.0 / (1.0 - a) if a < 1 else math.inf,
        curvature_at_one=1.0,
        parameter=a,
        convex_generator=cvx.alpha_generator,
    )


_INF = math.inf
_LOG2 = math.log(2.0)

BUILTIN_DIVERGENCES: Mapping[str, Divergence] = MappingProxyType({
    d.name: d
    for d in (
        Divergence("kl", "u - 1 - log u", gen.kl_f, gen.kl_df, gen.rkl_f,
                   f_at_zero=_INF, slope_at_infinity=1.0, curvature_at_one=1.0,
                   convex_generator=cvx.kl_generator),
        Divergence("rkl", "u log u - u + 1", gen.rkl_f, gen.rkl_df, gen.kl_f,
                   f_at_zero=1.0, slope_at_infinity=_INF, curvature_at_one=1.0,
                   convex_generator=cvx.rkl_generator),
        Divergence("tv", "|u - 1| / 2", gen.tv_f, gen.tv_df, gen.tv_f,
                   f_at_zero=0.5, slope_at_infinity=0.5, curvature_at_one=0.0,
                   margins=cf.tv_margins, convex_generator=cvx.tv_generator),
        Divergence("chi2", "(u - 1)^2", gen.chi2_f, gen.chi2_df, gen.neyman_f,
                   f_at_zero=1.0, slope_at_infinity=_INF, curvature_at_one=2.0,
                   margins=cf.chi2_margins, convex_generator=cvx.chi2_generator),
        Divergence("neyman_chi2", "(u - 1)^2 / u", gen.neyman_f, gen.neyman_df, gen.chi2_f,
                   f_at_zero=_INF, slope_at_infinity=1.0, curvature_at_one=2.0,
                   margins=cf.neyman_margins, convex_generator=cvx.neyman_generator),
        Divergence("hellinger", "(sqrt(u) - 1)^2", gen.hellinger_f, gen.hellinger_df,
                   gen.hellinger_f, f_at_zero=1.0, slope_at_infinity=1.0,
                   curvature_at_one=0.5, margins=cf.hellinger_margins,
                   convex_generator=cvx.hellinger_generator),
        Divergence("js", "(u log u - (1 + u) log((1 + u)/2)) / 2", gen.js_f, gen.js_df,
                   gen.js_f, f_at_zero=_LOG2 / 2, slope_at_infinity=_LOG2 / 2,
                   curvature_at_one=0.25, convex_generator=cvx.js_generator),
    )
})


#: What every public function accepts as a divergence: a name or a Divergence.
DivergenceLike = str | Divergence


def get_divergence(spec: DivergenceLike) -> Divergence:
    """Resolve a registry name, ``"alpha:<a>"``, or a :class:`Divergence`.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones), or ``"alpha"``
        without a parameter.
    TypeError
        For anything that is neither a string nor a Divergence.
    """
    if isinstance(spec, Divergence):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"divergence must be a name or a Divergence (got {type(spec).__name__})")
    name = spec.strip().lower()
    if name in BUILTIN_DIVERGENCES:
        return BUILTIN_DIVERGENCES[name]
    if name.startswith("alpha"):
        head, sep, value = name.partition(":")
        if head == "alpha" and sep and value:
            try:
                a = float(value)
            except ValueError:
                raise ValueError(f"cannot read the alpha parameter in {spec!r}") from None
            return alpha_divergence(a)
        if head == "alpha":
            raise ValueError("the alpha divergence needs its parameter: write 'alpha:0.5' "
                             "or pass bandsolve.alpha_divergence(0.5)")
    known = ", ".join(sorted(BUILTIN_DIVERGENCES)) + ", alpha:<a>"
    raise ValueError(f"unknown divergence {spec!r}; known: {known}")
