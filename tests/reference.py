"""An independent mpmath reference for the band, at 60 significant digits.

It shares no solver code with bandsolve: each divergence's textbook formula
(``Divergence.textbook``, a plain mpmath line written beside, and apart from,
the forms bandsolve computes with), and bisection in mpmath on the ratio
itself. Bisection is
slow but cannot be wrong about which side of the root it is on.
"""

from __future__ import annotations

import functools

import mpmath as mp

DPS = 60
_BISECTIONS = 110  # the logit variable's bracket [-3000, 3000] shrinks to 1e-30


def generator(name: str):
    """(f, f'(inf)) in mpmath for a bandsolve divergence name: its textbook
    form (``Divergence.textbook``), written apart from the forms bandsolve
    computes with."""
    from bandsolve.divergences import get_divergence

    div = get_divergence(name)
    if div.textbook is None:
        raise LookupError(f"{name} has no textbook form to serve as a reference")
    return div.textbook(div.parameter)


def closed_band(name: str, p, delta, dps: int = 50):
    """(lower, upper) from the divergence's textbook closed form
    (``Divergence.textbook_band``) at ``dps`` digits: an independent check
    that needs no bisection."""
    from bandsolve.divergences import get_divergence

    div = get_divergence(name)
    if div.textbook_band is None:
        raise LookupError(f"{name} has no closed-form textbook band")
    with mp.workdps(dps):
        lower, upper = div.textbook_band(div.parameter)(p, delta)
        return +lower, +upper


def closed_band_names(names) -> tuple[str, ...]:
    """Those of ``names`` whose divergence has a textbook closed-form band."""
    from bandsolve.divergences import get_divergence

    return tuple(n for n in names if get_divergence(n).textbook_band is not None)


def hard_points(names) -> list[tuple[str, float, float]]:
    """(name, p, delta) for each point a divergence of ``names`` records as
    hard for the convex programs (``Divergence.hard_points``)."""
    from bandsolve.divergences import get_divergence

    return [(n, p, d) for n in names for p, d in get_divergence(n).hard_points]


def binary(name: str, p, pc, r, u2=None):
    """g_f(p, r) at 60 digits, given p and 1 - p separately.

    ``u2 = (1 - p r) / (1 - p)`` may be passed where it is known exactly: p
    itself rounds to 1 at 60 digits once 1 - p < 1e-60.
    """
    f, slope_inf = generator(name)
    if pc == 0:
        return f(r) + (1 - r) * slope_inf if r < 1 else f(r)
    if u2 is None:
        u2 = 1 - p * (r - 1) / pc
    return p * f(r) + pc * f(u2)


@functools.cache
def _bound(name: str, p, pc, delta, side: str):
    delta = mp.mpf(delta)
    if p == 0:
        return (mp.inf if side == "upper" else mp.mpf(0)), True
    if side == "upper":
        if pc == 0:
            return mp.mpf(1), False

        def point(x):  # r = 1 + (pc/p) sigmoid(x), u2 = sigmoid(-x)
            return 1 + (pc / p) / (1 + mp.exp(-x)), 1 / (1 + mp.exp(x))

        end = (1 / p, mp.mpf(0))
    else:

        def point(x):  # r = sigmoid(-x), u2 = 1 + (p/pc) sigmoid(x)
            if pc == 0:
                return 1 / (1 + mp.exp(x)), None
            return 1 / (1 + mp.exp(x)), 1 + (p / pc) / (1 + mp.exp(-x))

        end = (mp.mpf(0), None if pc == 0 else 1 / pc)

    if binary(name, p, pc, *end) <= delta:
        return end[0], True
    lo, hi = mp.mpf(-3000), mp.mpf(3000)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if binary(name, p, pc, *point(mid)) <= delta:
            lo = mid
        else:
            hi = mid
    return point((lo + hi) / 2)[0], False


def bound(name: str, p: float, delta: float, side: str, *, from_logp: bool = False):
    """(exact bound, saturated?) for a float64 input p (or logp), at 60 digits."""
    with mp.workdps(DPS + _extra_digits(p, delta, from_logp)):
        if from_logp:
            x = mp.mpf(p)
            pp, pc = mp.exp(x), -mp.expm1(x)
        else:
            pp = mp.mpf(p)
            pc = 1 - pp
        return _bound(name, pp, pc, mp.mpf(delta), side)


def _extra_digits(p: float, delta: float, from_logp: bool) -> int:
    """Digits beyond DPS so that u2 = 1 - m/(1 - p) keeps DPS of its own
    distance from 1: m/(1 - p) can be as small as min(p, delta) (p = 1e-300
    with delta = 1e-300 needs 300 more)."""
    import math

    if not delta > 0.0 or (p == 0.0 and not from_logp) or p == -math.inf:
        return 0
    # log p itself, not exp(log p): the latter is 0 below log p = -745
    log10_p = p / math.log(10.0) if from_logp else math.log10(p)
    return max(0, int(math.ceil(-min(log10_p, math.log10(delta)))) - 10)


def saturation_gap(name: str, p: float, delta: float, side: str) -> float:
    """(g at the simplex end - delta) / delta: how far from the saturation threshold."""
    with mp.workdps(DPS):
        pp = mp.mpf(p)
        pc = 1 - pp
        if pp == 0:
            return float("inf")
        end = (1 / pp, mp.mpf(0)) if side == "upper" else (mp.mpf(0), 1 / pc if pc else None)
        return float((binary(name, pp, pc, *end) - delta) / delta)


EPS = 2.220446049250313e-16


def tolerance(r_true) -> float:
    """The issue's bound: max(1e-12 min(r, |r - 1|), 4 eps max(r, 1))."""
    r = mp.mpf(r_true)
    return float(max(mp.mpf("1e-12") * min(r, abs(r - 1)), 4 * EPS * max(r, 1)))


def error_ratio(value: float, r_true) -> float:
    """|value - r_true| / tolerance; <= 1 passes."""
    if mp.isinf(r_true) or r_true > 1.7976931348623157e308:  # beyond float64: inf
        return 0.0 if value == float("inf") else float("inf")
    with mp.workdps(DPS):
        return float(abs(mp.mpf(value) - r_true)) / tolerance(r_true)


def relative_to_band(value, truth):
    """|value - truth| / max(min(truth, |truth - 1|), 4 eps max(truth, 1) / 1e-9):
    the error in the band's own scale, with the tolerance's absolute floor, so
    that <= 1e-9 reads max(1e-9 min(r, |r - 1|), 4 eps max(r, 1)). Elementwise,
    for comparing whole float64 batches with each other."""
    import numpy as np

    value = np.asarray(value, dtype=float)
    truth = np.asarray(truth, dtype=float)
    floor = 4 * EPS * np.maximum(truth, 1.0) / 1e-9
    return np.abs(value - truth) / np.maximum(np.minimum(truth, np.abs(truth - 1.0)), floor)
