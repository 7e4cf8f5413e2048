"""The :class:`Divergence` record: every form of one f-divergence, as data.

A divergence is one object. It holds its generator f (normalised to
f(1) = f'(1) = 0) in each form a backend needs, written independently in
each family's module (``kl.py``, ``tv.py``, ...):

* **numba** (``f``, ``df``, ``f_conjugate``, ``margins``): what the kernels
  compile (``bandsolve._kernels``);
* **vector** (``vector_forms``): f and f' for the fast path's SIMD loop, or
  None;
* **convex** (``convex_generator``, ``convex_perspective``, ``convex_log``):
  DCP expressions for ``bandsolve.convex``, or None;
* **exact** (``exact_form``): mpmath formulas for ``bandsolve.certificate``,
  or None;

and its edge values f(0), f'(inf) and f''(1). Backends read these
attributes; none of them looks at a divergence's name, and none of the forms
imports its library (cvxpy, mpmath) before it is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from .._kernels._util import scaled_conjugate_unknown
from .generic import compile_generator

__all__ = ["Divergence", "DivergenceLike", "LogForm", "MpGenerator", "VectorForms"]


class MpGenerator(NamedTuple):
    """A generator at working precision: ``f(u, x)`` and ``df(u, x)`` with
    x = u - 1 given exactly (so that f keeps its digits near u = 1), and its
    edge values f(0), f'(0) and f'(inf) (mpmath numbers, possibly +-inf)."""

    f: Callable
    df: Callable
    f_at_zero: Any  # an mpmath number
    df_at_zero: Any  # an mpmath number
    slope_at_infinity: Any  # an mpmath number


class LogForm(NamedTuple):
    """The reduced generator h(u) = f(u) - f'(inf) (u - 1) in y = log u:
    h(e^y) = exp_coefficient e^(exponent y) + log_coefficient y - exp_coefficient,
    convex in y. It exists for generators with f(0) = inf and a finite
    f'(inf), whose lower bounds get arbitrarily small (``bandsolve.convex``
    solves those in y = log r)."""

    exp_coefficient: float
    exponent: float
    log_coefficient: float


@dataclasses.dataclass(frozen=True)
class VectorForms:
    """f and f' written for SIMD loops: the fast path's form (``bandsolve.FastBand``).

    ``value_and_slope(u, u - 1, parameter) -> (f(u), f'(u))``: the meaning of
    ``Divergence.f`` and ``Divergence.df`` in one function, so that the two
    share their logarithm (the fast path's Newton step needs both at two
    points per bound), built from ``bandsolve._kernels._vecmath`` and selects
    only (no libm call, no branch), so that a loop calling it vectorises, and
    inlined (``_vecmath.vector_form``): a call across compiled functions
    stays scalar. It need only be accurate where the fast path evaluates it:
    u in [0, 2^61], where either u or x = u - 1 may be the rounded one.

    ``value_and_slope_at_log(L, u, u - 1, u - 1 - L, parameter) -> (f(u),
    u f'(u))``: f at u = e^L and its slope in L, d f(e^L) / dL = u f'(u),
    given L and u, u - 1 and u - 1 - L, each to full relative precision
    (``_vecmath.vexp_parts``), with the same rules. The fast path starts from
    v = -log u2 at the point u2 = 1 - m/b, so there it knows L = -v exactly
    and evaluates f(u2) with this form: no logarithm for kl, rkl and the
    alpha family, one for js (instead of two), and for kl no division (the
    slope in L is u - 1). It need only be accurate for L in [-600, 0].

    Attributes
    ----------
    value_and_slope : numba function ``(u, u - 1, parameter) -> (f, f')``
    value_and_slope_at_log : numba function ``(L, e^L, e^L - 1, e^L - 1 - L,
        parameter) -> (f, u f')``, optional (default: from ``value_and_slope``)
    g_rel_error : float
        A bound on the relative rounding error of the binary divergence
        g = a f(1 + m/a) + b f(1 - m/b) evaluated with them (the first term
        by ``value_and_slope``, the second by ``value_and_slope_at_log``); the
        fast path's per-element certificate propagates it to the bounds.
    """

    value_and_slope: Callable
    g_rel_error: float
    #: None: derived from ``value_and_slope`` (f and u f' at u = e^L, no
    #: saving), so that forms written before this field still serve
    value_and_slope_at_log: Callable | None = None

    def __post_init__(self):
        if self.value_and_slope_at_log is None:
            object.__setattr__(self, "value_and_slope_at_log",
                               _log_form_from(self.value_and_slope))


def _log_form_from(value_and_slope: Callable) -> Callable:
    """``value_and_slope_at_log`` from ``value_and_slope``: f(u) and u f'(u)."""
    from .._kernels._vecmath import vector_form

    @vector_form
    def value_and_slope_at_log(log_u, u, x, x_minus_log_u, parameter):
        f, df = value_and_slope(u, x, parameter)
        return f, u * df

    return value_and_slope_at_log


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
        Passed to every form as its last argument (alpha's a).
    margins : numba function or None
        Closed form ``(p, 1 - p, delta, parameter) -> (upper margin, lower
        margin)`` in probability; None means the root finder is used.
    convex_generator : callable or None
        Ratio form ``(w, parameter) -> cvxpy expression``: f(w) elementwise,
        for ``bandsolve.convex``. None: no convex verification.
    convex_perspective : callable or None
        Perspective form ``(q, s, parameter) -> (s f(q/s), constraints)``,
        jointly convex in scalar cvxpy Variables q and s >= 0; it keeps every
        cone entry of the size of the term it carries. None: cvxpy's
        ``perspective`` of ``convex_generator`` is used.
    convex_log : callable or None
        ``parameter -> LogForm or None``: the log form where one exists.
    convex_scaled : callable or None
        ``(x, parameter) -> (term, assign)``: a cvxpy expression ``term``,
        convex in the scalar Variable x, equal to w f(c x) once
        ``assign(w, c)`` (w, c > 0) has set its Parameters; written so that
        every cone entry is of x's size (x is near 1 at the optimum) however
        small c is. ``bandsolve.convex`` charts a falling ratio r = c x with
        it where r <= 1/2 and there is no log form (jeffreys, whose f(e^y) is
        not convex in y). None: the perspective form serves there.
    exact_form : callable or None
        ``parameter -> MpGenerator``, built at the caller's mpmath precision,
        for ``bandsolve.certificate``. None: no certificate.
    scaled_conjugate : numba function
        ``(s, v, v - 1, parameter) -> s f*(v)`` where f*(v) overflows float64
        but the product need not (alpha with a > 1 at tiny p and huge delta):
        +inf only where s f*(v) itself does. The default returns NaN: no such
        form, so the root finder reports a bound next to an overflow.
    vector_forms : VectorForms or None
        f and f' for SIMD loops, which let the fast path (``FastBand``, and
        ``band`` on large single-delta batches) polish a table start in one
        vectorised Newton step. None: the root finder alone.
    growth_at_infinity : (float, float) or None
        (n, k) with f(r) <= e^k r^n for r >= 1, equal to float64 precision
        wherever e^k r^n exceeds e^1390 at a float64 r (chi2: (2, 0); alpha
        with a > 1: (a, -log(a (a - 1)))). Upper bounds from log p with
        delta / p beyond about e^1390 solve p f(r) = delta with it, in
        logarithms (``_solver.upper_from_small_logp``); without it they are
        +inf where f grows slower than about r^1.98, else an overflow
        status. None: no such form.
    verify_tolerance : float
        The certified accuracy ``bandsolve verify`` demands of the convex
        programs for this divergence, in units of min(r, |r - 1|): the largest
        width and discrepancy measured on its sweep with
        ``convex.SOLVER_LADDER``, rounded up with 3x to 10x headroom (the
        full-vocabulary programs get ``verify.Tolerances.vocabulary_factor``
        times it). Also the width the tests ask of its certificates.
    textbook : callable or None
        ``parameter -> (f, f'(inf))``: f as a textbook writes it, a plain
        mpmath formula of u (careless of cancellation: used at 60 digits or
        more), and f'(inf) exactly. Written apart from the other forms, it is
        the independent reference the tests solve the band with, by bisection
        in mpmath (``tests/reference.py``). None: no reference.
    textbook_band : callable or None
        ``parameter -> ((p, delta) -> (lower, upper))``: the band's closed
        form as a textbook derives it, in mpmath at the caller's precision,
        where one exists: an independent check of the bisection reference and
        of the backends at points bisection cannot reach cheaply. None: none.
    hard_points : tuple of (p, delta)
        Where the convex programs were found hard (a certified interval
        barely wider than the difference it judged, every solver rung ending
        inaccurate): a record the tests replay through ``bandsolve.convex``.
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
    convex_perspective: Callable | None = None
    convex_log: Callable | None = None
    convex_scaled: Callable | None = None
    exact_form: Callable | None = None
    scaled_conjugate: Callable = scaled_conjugate_unknown
    vector_forms: VectorForms | None = None
    growth_at_infinity: tuple[float, float] | None = None
    verify_tolerance: float = 1e-7
    textbook: Callable | None = None
    textbook_band: Callable | None = None
    hard_points: tuple[tuple[float, float], ...] = ()

    @property
    def has_closed_form(self) -> bool:
        return self.margins is not None

    def without_closed_form(self) -> Divergence:
        """The same divergence, solved by the generic root finder."""
        return dataclasses.replace(self, margins=None, vector_forms=None,
                                   name=self.name + "[root]")

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
        convex_perspective: Callable | None = None,
        exact_form: Callable | None = None,
    ) -> Divergence:
        """A divergence from its generator f, solved by the generic root finder.

        Parameters
        ----------
        f : callable u -> float
            Convex on [0, inf) with f(1) = 0, written so numba can compile it
            (``math`` functions, arithmetic). It is compiled with numpy's
            error model (1/0 is inf); a function you jit yourself should use
            ``error_model="numpy"`` too, or never divide by zero. A linear term c (u - 1) is
            allowed and removed: it does not change the divergence. A linear f
            generates the zero divergence: its band is [0, 1/p] at every delta.
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
            ``(w, parameter) -> f(w)`` with cvxpy atoms, for ``bandsolve.convex``.
        convex_perspective : callable, optional
            ``(q, s, parameter) -> (s f(q/s), constraints)`` with cvxpy atoms;
            without it ``bandsolve.convex`` uses ``cvxpy.perspective``.
        exact_form : callable, optional
            ``parameter -> MpGenerator``: f in mpmath, for certificates.

        Raises
        ------
        ValueError
            If f(1) is not 0; f is NaN or raises at a point of the convexity
            grid (u > 0), or is not convex there; f(0) is NaN without
            ``f_at_zero``; f(u)/u meets a NaN before it settles without
            ``slope_at_infinity``; or a given edge value is NaN or negative.
            docs/divergences.md states the whole contract.
        TypeError
            If numba cannot compile f, or ``name`` is not a non-empty string.

        Notes
        -----
        Accuracy depends on how f is written: a formula that cancels near
        u = 1 limits the bounds to the digits f keeps there. The forms you
        pass are trusted: they must be the same f as ``f``.
        """
        if not isinstance(name, str) or not name:
            # a table saved under it must reload, and the torch adapter reads names
            raise TypeError(f"name must be a non-empty string (got {name!r})")
        compiled = compile_generator(name, f, df, f_at_zero, slope_at_infinity,
                                     curvature_at_one)
        return cls(name=name, formula=formula, **compiled,
                   convex_generator=convex_generator, convex_perspective=convex_perspective,
                   exact_form=exact_form)


#: What every public function accepts as a divergence: a name or a Divergence.
DivergenceLike = str | Divergence

