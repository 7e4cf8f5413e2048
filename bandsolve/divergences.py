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


def _jit_user(fn):
    # numpy's error model: 1/0 gives inf, as the kernels expect at u = 0,
    # where python's would raise inside a parallel kernel
    return numba.njit(error_model="numpy")(fn)


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
            f'(u). Without it a central difference with a step relative to u
            is used (about 1e-10 relative where f keeps its digits); the root
            finder's bisection safeguard makes an inexact derivative cost
            iterations, never convergence.
        f_at_zero, slope_at_infinity : float, optional
            f(0) and lim f(u)/u, each >= 0 or inf. By default f(0) is
            evaluated and the slope is read from f(u)/u at u = 1e20, 1e30, ...,
            1e300, as far as f stays finite (docs/divergences.md says when it
            is taken as inf and when it is refused). Pass them when you know
            them: the band at p = 1 depends on the slope directly.
        curvature_at_one : float, optional
            f''(1), used only for the starting point (default: estimated).
        convex_generator : callable, optional
            f(w) with cvxpy atoms, for ``bandsolve.convex`` (see ``_convex_forms``).

        Raises
        ------
        ValueError
            If f(1) is not 0; f is visibly not convex; f(0), f'(1) or f'(inf)
            cannot be estimated (the message says which to pass); or
            f_at_zero / slope_at_infinity is NaN or negative.
        TypeError
            If numba cannot compile f.

        Notes
        -----
        Accuracy depends on how f is written: a formula that cancels near
        u = 1 limits the bounds to the digits f keeps there.
        """
        f_user = f if isinstance(f, numba.core.dispatcher.Dispatcher) else _jit_user(f)
        try:
            f_one = float(f_user(1.0))
        except Exception as exc:  # numba's typing errors are varied
            raise TypeError(f"numba could not compile the generator of {name!r}: {exc}") from exc
        h = 1e-5
        scale = max(abs(float(f_user(1.0 + h))), abs(float(f_user(1.0 - h))), 1e-300)
        if abs(f_one) > 1e-12 * max(1.0, scale / h**2):
            raise ValueError(f"a generator must satisfy f(1) = 0, but {name!r} has f(1) = {f_one}")
        if df is None:
            slope_one = _slope_at_one(f_user, name)
            df_user = None
        else:
            df_user = df if isinstance(df, numba.core.dispatcher.Dispatcher) else _jit_user(df)
            slope_one = float(df_user(1.0))

        @numba.njit(GENERATOR_SIG, error_model="numpy")
        def f_norm(u, x, theta):
            # an exception inside a parallel kernel cannot reach the caller:
            # it becomes NaN, which the root finder reports (BandSolveError)
            try:
                value = f_user(u)
            except Exception:  # noqa: BLE001
                return math.nan
            return value - slope_one * x

        _check_convex(f_norm, name)
        if f_at_zero is None:
            f_at_zero = float(f_norm(0.0, -1.0, 0.0))
            if math.isnan(f_at_zero):
                raise ValueError(f"f(0) of {name!r} evaluates to NaN; pass f_at_zero explicitly")
        if slope_at_infinity is None:
            slope_at_infinity = _slope_at_infinity(f_norm, name)
        slope_inf = float(slope_at_infinity)
        if math.isnan(slope_inf) or slope_inf < 0.0:
            raise ValueError(f"slope_at_infinity of {name!r} must be >= 0 or inf (got "
                             f"{slope_at_infinity!r}): it is lim f(u)/u of a convex f with "
                             "f(1) = f'(1) = 0")
        if math.isnan(float(f_at_zero)) or float(f_at_zero) < 0.0:
            raise ValueError(f"f_at_zero of {name!r} must be >= 0 or inf (got {f_at_zero!r}): "
                             "a convex f with f(1) = f'(1) = 0 is >= 0")

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
                slope = (f_user(up) - f_user(down)) / (up - down) - slope_one
                if slope != slope or abs(slope) == math.inf:
                    # u (1 + h) overflowed: f'(u) has reached its limit f'(inf)
                    return slope_inf
                return slope

        if curvature_at_one is None:
            c = (float(f_norm(1 + h, h, 0.0)) + float(f_norm(1 - h, -h, 0.0))) / h**2
            curvature_at_one = c if math.isfinite(c) and c > 0 else 1.0

        @numba.njit(GENERATOR_SIG, error_model="numpy")
        def f_conj(v, x, theta):
            if v == 0.0:
                return slope_inf
            value = v * f_norm(1.0 / v, -x / v, theta)
            if value == math.inf and slope_inf < math.inf:
                # f itself overflowed at u = 1/v (Le Cam's (1 - u)^2 near
                # 1e154), so far out that f(u)/u has reached its limit
                return slope_inf
            return value

        return cls(
            name=name, formula=formula, f=f_norm, df=df_norm, f_conjugate=f_conj,
            f_at_zero=float(f_at_zero), slope_at_infinity=slope_inf,
            curvature_at_one=float(curvature_at_one), convex_generator=convex_generator,
        )


def _check_convex(f_norm, name: str) -> None:
    """Refuse a generator that is visibly not convex: the slopes of its chords
    between neighbours of a log-spaced grid over [1e-8, 1e8] (and 0) must not
    fall by more than rounding could explain. A trust region needs convex f;
    a non-convex one gives bounds that answer no trust-region question."""
    grid = [0.0] + [10.0 ** (k / 8.0) for k in range(-64, 65)]
    values = [float(f_norm(u, u - 1.0, 0.0)) for u in grid]
    slopes = []
    for (u0, v0), (u1, v1) in zip(zip(grid, values), zip(grid[1:], values[1:])):
        if math.isfinite(v0) and math.isfinite(v1):
            slopes.append((u1, (v1 - v0) / (u1 - u0), abs(v0) + abs(v1), u1 - u0))
        else:
            slopes.append((u1, math.nan, 0.0, 1.0))
    for (u, left, size_l, width_l), (_, right, size_r, width_r) in zip(slopes, slopes[1:]):
        if math.isnan(left) or math.isnan(right):
            continue  # +inf at 0 (kl) and NaN are the solver's to report where it meets them
        slack = 1e-6 * max(abs(left), abs(right)) + 64 * 2.0**-52 * (size_l / width_l + size_r / width_r)
        if right < left - slack:
            raise ValueError(f"the generator of {name!r} is not convex: the slope of its chords "
                             f"falls from {left:.6g} to {right:.6g} at u = {u:.3g}. A trust "
                             "region needs a convex f on [0, inf)")


def _slope_at_one(f, name: str) -> float:
    """f'(1) of a user's generator without df, or an error that says to pass df.

    Central differences at h, h/2, h/4, extrapolated twice (Richardson), so
    the truncation error is O(h^6); the difference between the last two
    extrapolations bounds what remains. An estimate within that bound of an
    integer is that integer: generators are normally written with f'(1) = 0
    (or a whole linear term), and a residue of 1e-11 in place of 0 would
    not cancel in g at small deltas (band(0.1, 1e-40) gave (1, 10) for
    1 +- 6e-20). The estimate is kept where it is not within the bound.
    """
    h = 1e-2
    steps = [h, h / 2, h / 4]
    try:
        values = [(float(f(1.0 + t)), float(f(1.0 - t))) for t in steps]
    except Exception as exc:  # noqa: BLE001  # the user's f, compiled: any error
        raise ValueError(f"cannot estimate f'(1) of {name!r}: f raised {exc!r} next to 1; "
                         "pass df") from exc
    diffs = [(up - down) / (2 * t) for (up, down), t in zip(values, steps)]
    if not all(math.isfinite(d) for d in diffs):
        raise ValueError(f"cannot estimate f'(1) of {name!r}: f is not finite next to 1 "
                         f"(central differences {diffs}); pass df")
    first = [(4 * diffs[1] - diffs[0]) / 3, (4 * diffs[2] - diffs[1]) / 3]
    estimate = (16 * first[1] - first[0]) / 15
    scale = max(abs(v) for pair in values for v in pair) / steps[-1]
    bound = abs(estimate - first[1]) + 64 * 2.0**-52 * max(scale, abs(estimate), 1e-300)
    nearest = float(round(estimate))
    return nearest if abs(estimate - nearest) <= bound else estimate


def _slope_at_infinity(f_norm, name: str) -> float:
    """f'(inf) = lim f(u)/u of a normalised user generator, or an error that
    says to pass slope_at_infinity.

    f(u)/u is read at u = 1e20, 1e30, ... up to 1e300, as far as f stays
    finite: a formula such as (1 - u)^2 / (1 + u) overflows in its numerator
    near u = 1e154 although f(u)/u tends to 1/2, and reading it only at 1e280
    gave inf (and upper = 1/p where the bound is 2e54). Far out, slowly
    vanishing terms (hellinger's 2/sqrt(u), kl's log(u)/u) fall below float64
    resolution. The last finite readings decide: the last two equal to 1e-6
    relative, the limit is the last; the last three increasing with steps that
    do not shrink by half (log(u) grows by 23 a decade), it is inf; anything
    else is refused.
    """
    readings = []
    for k in range(20, 301, 10):
        u = 10.0**k
        try:
            value = float(f_norm(u, u, 0.0)) / u
        except Exception as exc:  # noqa: BLE001  # the user's f, compiled: any error
            raise ValueError(f"cannot estimate f'(inf) of {name!r}: f raised {exc!r} at "
                             f"u = {u:g}; pass slope_at_infinity") from exc
        if math.isnan(value):
            raise ValueError(f"cannot estimate f'(inf) of {name!r}: f({u:g}) is NaN; pass "
                             "slope_at_infinity")
        if value == math.inf:
            break  # f overflowed here: what it had shown so far decides
        readings.append(value)
    if not readings:
        return math.inf  # f(1e20) already overflows: f grows faster than any line
    if len(readings) >= 2 and abs(readings[-1] - readings[-2]) <= 1e-6 * max(abs(readings[-1]),
                                                                            1e-300):
        return readings[-1]
    if len(readings) >= 3:
        a, b, c = readings[-3:]
        if c > b > a and c - b >= 0.5 * (b - a):
            return math.inf  # not settling: growing like log(u) (u log u) or faster
    raise ValueError(f"cannot estimate f'(inf) of {name!r}: f(u)/u at u = 1e20, 1e30, ... "
                     f"reads {readings[-3:]} before f stops being finite; pass "
                     "slope_at_infinity (inf if f grows faster than linearly)")


def alpha_divergence(a: float) -> Divergence:
    """The Amari alpha-divergence, f(u) = (u^a - 1 - a (u - 1)) / (a (a - 1)).

    ``a -> 0`` gives kl, ``a -> 1`` gives rkl, and ``a = 2`` gives chi2 / 2.

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
        # |a| < 2^-54: 1 - a rounds to 1, and the generator's a (a - 1) and
        # u^a - 1 lose every digit of their difference from the kl limit;
        # the band differs from kl's by a relative O(a), below float64's eps
        raise ValueError(
            f"the alpha parameter {a!r} is too close to 0 for float64 (1 - a rounds to 1): "
            "its band equals the a -> 0 limit to float64 precision; use divergence='kl'"
        )
    # the shortest text that reads back as this a (repr), without a trailing
    # ".0": a name that rounds (":g" made 2.0000001 "alpha:2") resolves to
    # another divergence, and a table exported under it failed its own check
    text = repr(a)
    text = text[:-2] if text.endswith(".0") else text
    return Divergence(
        name=f"alpha:{text}",
        formula=f"(u^a - 1 - a(u - 1)) / (a(a - 1)), a = {a:g}",
        f=gen.alpha_f, df=gen.alpha_df, f_conjugate=gen.alpha_conjugate_f,
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
