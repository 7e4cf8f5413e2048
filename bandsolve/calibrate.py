"""Choosing delta: the band's radius that matches a clip rule a trainer uses today.

PPO and GRPO clip the ratio to [1 - eps_low, 1 + eps_high]. The band has one
radius delta instead, and the right delta depends on what "the same" should
mean. :func:`calibrate_delta` solves for delta under one of four targets,
each a monotone function of delta (the bands are nested: a larger delta gives
a band that contains the smaller one's, MATH.md "Monotonicity"), so the match
is unique where it exists and a bracketing root finder (scipy's ``brentq``,
on log delta) finds it:

``"width"`` (``at_p=``)
    The band's width upper - lower at one reference probability equals the
    clip rule's, min(1 + eps_high, 1/p) - (1 - eps_low). Nondecreasing in delta.
``"mean_change"`` (``logp=``)
    The mean allowed change of probability over a sample of old
    log-probabilities, mean p (upper - lower), equals the clip rule's.
    Nondecreasing in delta.
``"mean_divergence"`` (``logp=``, ``target="mean_divergence"``)
    The mean per-token divergence at the bounds, mean over tokens and both
    sides of g_f(p, bound), equals the clip rule's, the divergence each of
    its bounds costs. Nondecreasing in delta (it is delta on every side that
    does not saturate). Heavy-tailed for chi2, neyman_chi2 and alpha with
    a < 0, where a token of p near 1 costs the clip rule's lower bound a
    multiple of 1/(1 - p): prefer ``"mean_change"`` there. A side where the
    clip rule costs an infinite divergence is left out of both means and
    counted in ``excluded``: kl's upper side once 1 + eps_high >= 1/p (for
    p < 1), where the clip lets the token's probability reach 1 and the other
    tokens' vanish.
``"clip_fraction"`` (``logp=`` and ``new_logp=``)
    The share of tokens whose ratio exp(new_logp - logp) lies outside the
    band equals ``clip_fraction``, by default the clip rule's own share on the
    same batch. Nonincreasing in delta, and a step function: the answer is
    the smallest delta whose share is at most the target.
    A ratio within 8 eps (relative) of a bound counts as on it: exp(new -
    old) for a token whose new probability is 1 lands an ulp beyond 1/p.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import _validate, api
from ._solve import solve
from .divergences import BUILTIN_DIVERGENCES, DivergenceLike, get_divergence

__all__ = ["calibrate_delta", "table", "Calibration", "Unreachable", "OutOfReach",
           "TARGETS", "DELTA_RANGE"]

TARGETS = ("width", "mean_change", "mean_divergence", "clip_fraction")
#: deltas searched: a match outside this range is reported as unreachable
DELTA_RANGE = (1e-12, 1e12)


class Calibration(NamedTuple):
    """The delta found, and what it matches.

    ``goal`` is the clip rule's value of the target, ``achieved`` the band's
    at ``delta`` (equal to ``goal`` to about 1e-12 relative for the smooth
    targets; at most the target, in whole tokens, for ``clip_fraction``).
    ``excluded`` counts the (token, side) pairs left out of
    ``mean_divergence``; 0 for the other targets.
    """

    delta: float
    divergence: str
    target: str
    goal: float
    achieved: float
    excluded: int = 0


class OutOfReach(ValueError):
    """The goal lies outside what the band gives for delta in ``DELTA_RANGE``;
    the message gives the reachable range."""


def _clip_bounds(p: np.ndarray, eps_low: float, eps_high: float):
    """The clip rule's bounds, the upper one at most 1/p (a probability
    cannot exceed 1). 1/p overflows to inf for a subnormal p: that is the end."""
    with np.errstate(divide="ignore", over="ignore"):
        end = np.where(p > 0, 1.0 / np.where(p > 0, p, 1.0), np.inf)
    return np.full(p.shape, 1.0 - eps_low), np.minimum(1.0 + eps_high, end)


def _upper_costs(p: np.ndarray, upper: np.ndarray, at_end: np.ndarray, div) -> np.ndarray:
    """g_f(p, upper), taken at the exact simplex end where ``at_end``.

    The float 1/p can lie an ulp below the end, where g is finite but the
    end's is not when f(0) = inf (kl: the other tokens' probability vanishes).
    So at the end g = p f(1/p) + (1 - p) f(0) is inf exactly where f(0) is,
    for p < 1; at p = 1 the end is r = 1 and g = 0. Elsewhere the end is
    evaluated one ulp above 1/p, which binary_divergence reads as the end.
    """
    costs = api.binary_divergence(p, np.where(at_end, np.nextafter(upper, np.inf), upper), div)
    if math.isinf(div.f_at_zero):
        costs = np.where(at_end & (p < 1.0), np.inf, costs)
    return costs


def _scalar(value, name: str) -> float:
    arr = _validate.as_real_array(value, name)
    if arr.ndim != 0:
        raise TypeError(f"{name} must be a single number (got shape {arr.shape})")
    return float(arr)


def _inside_unit(value, name: str) -> float:
    """A single number in (0, 1): eps, or the reference probability at_p."""
    number = _scalar(value, name)
    if not 0.0 < number < 1.0:
        raise ValueError(f"{name} must lie in (0, 1) (got {number!r})")
    return number


def _sample(logp, name: str) -> np.ndarray:
    """The sample validated, in its own shape."""
    arr = _validate.check_log_probability(logp, name)
    if arr.size == 0:
        raise ValueError(f"{name} is empty: calibrate on a sample of at least one token")
    return arr


def resolve_target(target: str | None, *, at_p=None, new_logp=None) -> str:
    """The target :func:`calibrate_delta` matches: ``target`` where given, else
    ``"width"`` with ``at_p``, ``"clip_fraction"`` with ``new_logp``, else
    ``"mean_change"``."""
    if target is not None:
        return target
    return ("width" if at_p is not None else
            "clip_fraction" if new_logp is not None else "mean_change")


def calibrate_delta(divergence: DivergenceLike = "kl", *, clip: float = 0.2,
                    clip_high: float | None = None, at_p: float | None = None,
                    logp: ArrayLike | None = None, new_logp: ArrayLike | None = None,
                    target: str | None = None, clip_fraction: float | None = None,
                    max_ratio: float | None = None) -> Calibration:
    """The delta at which the band matches the clip rule [1 - clip, 1 + clip_high].

    Parameters
    ----------
    divergence : str or Divergence
        As in :func:`bandsolve.band`.
    clip, clip_high : float
        The clip rule's eps_low and eps_high, in (0, 1); ``clip_high``
        defaults to ``clip`` (PPO). Clip-Higher is ``clip=0.2, clip_high=0.28``.
    at_p : float, optional
        The reference probability of the ``"width"`` target, in (0, 1).
    logp : array_like, optional
        A sample of old log-probabilities, for the other targets.
    new_logp : array_like, optional
        New log-probabilities of the same tokens (same shape as ``logp``),
        for ``"clip_fraction"``.
    target : str, optional
        One of ``TARGETS``. By default ``"width"`` with ``at_p``,
        ``"clip_fraction"`` with ``new_logp``, else ``"mean_change"``.
    clip_fraction : float, optional
        The share to match, in [0, 1); by default the clip rule's share on
        the same batch.
    max_ratio : float, optional
        Cap on the band's upper bound, as in :func:`bandsolve.band`.

    Returns
    -------
    Calibration
        The delta (a float in ``DELTA_RANGE``) and the matched values; see
        the module docstring for each target's definition.

    Raises
    ------
    TypeError
        Non-real inputs, or a divergence that is neither a name nor a Divergence.
    ValueError
        An unknown target or divergence, a target without its inputs (or with
        inputs it does not use), eps outside (0, 1), at_p outside (0, 1),
        log-probabilities with NaN, +inf or values > 0, an empty sample,
        shapes that differ, or (:class:`OutOfReach`, a ValueError) a goal
        the band cannot reach for any delta in ``DELTA_RANGE`` (the message
        gives the reachable range).
    """
    div = get_divergence(divergence)
    step = 0.0  # the jumps of a step-function target (a token's share), else 0
    eps_low = _inside_unit(clip, "clip")
    eps_high = eps_low if clip_high is None else _inside_unit(clip_high, "clip_high")
    target = resolve_target(target, at_p=at_p, new_logp=new_logp)
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: use one of {', '.join(TARGETS)}")
    if target == "width":
        if at_p is None or logp is not None or new_logp is not None:
            raise ValueError("target 'width' takes at_p (and no logp or new_logp)")
        p = _inside_unit(at_p, "at_p")
        measure, goal, excluded = _width(p, eps_low, eps_high, div, max_ratio)
        increasing = True
    else:
        if logp is None or at_p is not None:
            raise ValueError(f"target {target!r} takes logp (and no at_p)")
        old = _sample(logp, "logp")
        if target == "clip_fraction":
            if new_logp is None:
                raise ValueError("target 'clip_fraction' takes new_logp too")
            new = _sample(new_logp, "new_logp")
            if new.shape != old.shape:
                raise ValueError(f"new_logp must have the shape of logp "
                                 f"({new.shape} against {old.shape})")
            old, new = old.reshape(-1), new.reshape(-1)
            measure, goal = _clip_fraction(old, new, eps_low, eps_high, div, max_ratio,
                                           clip_fraction)
            increasing, excluded = False, 0
            step = 1.0 / old.size
        else:
            if new_logp is not None or clip_fraction is not None:
                raise ValueError(f"target {target!r} does not use new_logp or clip_fraction")
            make = _mean_change if target == "mean_change" else _mean_divergence
            p_sample = np.exp(old.reshape(-1))
            if not np.any(p_sample > 0):
                raise ValueError("logp holds only -inf (p = 0): no token to calibrate on")
            measure, goal, excluded = make(p_sample, eps_low, eps_high, div, max_ratio)
            increasing = True
    delta = _solve(measure, goal, increasing, target, step)
    return Calibration(delta, div.name, target, float(goal), float(measure(delta)), excluded)


def _bands(x, div, max_ratio, from_logp: bool = False):
    """delta -> (lower, upper) of the fixed sample x (p, or log p): validated
    once, then solved for each delta the root finder tries (each a positive
    float in DELTA_RANGE), without validating the sample again."""
    request = _validate.band_request(x, 1.0, div, from_logp=from_logp, max_ratio=max_ratio)

    def bands(delta):
        return solve(dataclasses.replace(request, delta=np.array([float(delta)])))

    return bands


def _width(p, eps_low, eps_high, div, max_ratio):
    lower, upper = _clip_bounds(np.array(p), eps_low, eps_high)
    bands = _bands(p, div, max_ratio)

    def width(delta):
        lo, hi = bands(delta)
        return float(hi - lo)

    return width, float(upper - lower), 0


def _mean_change(p, eps_low, eps_high, div, max_ratio):
    lower, upper = _clip_bounds(p, eps_low, eps_high)
    bands = _bands(p, div, max_ratio)

    def change(delta):
        lo, hi = bands(delta)
        # p = 0 can move no probability: its upper bound inf counts 0, not nan
        with np.errstate(invalid="ignore"):
            return float(np.mean(np.where(p > 0, p * (hi - lo), 0.0)))

    return change, float(np.mean(p * (upper - lower))), 0


def _mean_divergence(p, eps_low, eps_high, div, max_ratio):
    inside = p > 0  # p = 0 has no band to speak of: a ratio costs nothing there
    p = p[inside]  # not empty: calibrate_delta refused a sample with no p > 0
    bands = _bands(p, div, max_ratio)
    lower, upper = _clip_bounds(p, eps_low, eps_high)
    costs = [api.binary_divergence(p, lower, div),
             _upper_costs(p, upper, p * (1.0 + eps_high) >= 1.0, div)]
    finite = [np.isfinite(c) for c in costs]
    counted = int(sum(f.sum() for f in finite))
    if counted == 0:
        raise ValueError(f"the clip rule costs an infinite {div.name} divergence on every "
                         "side of every token: no finite mean to match")
    goal = sum(float(c[f].sum()) for c, f in zip(costs, finite)) / counted

    ends = (np.zeros_like(p), 1.0 / p)
    saturated_cost = [api.binary_divergence(p, ends[0], div),
                      _upper_costs(p, ends[1], np.ones(p.shape, bool), div)]
    capped_cost = (None if max_ratio is None else
                   api.binary_divergence(p, np.minimum(max_ratio, 1.0 / p), div))

    def mean_divergence(delta):
        # each side costs delta, except where it stops short of the root: at
        # the simplex end (saturation, exact in band) or at max_ratio. Not
        # g at the computed bound, which near u2 = 0 amplifies its rounding.
        lower, upper = bands(delta)
        cost_lo = np.where(lower == 0.0, saturated_cost[0], delta)
        cost_hi = np.where(upper == ends[1], saturated_cost[1], delta)
        if capped_cost is not None:
            cost_hi = np.where(upper == np.minimum(max_ratio, ends[1]),
                               np.minimum(capped_cost, cost_hi), cost_hi)
        total = np.minimum(cost_lo, delta)[finite[0]].sum() + \
            np.minimum(cost_hi, delta)[finite[1]].sum()
        return float(total) / counted

    return mean_divergence, goal, 2 * p.size - counted + 2 * int((~inside).sum())


#: a ratio this close (relative) to a bound counts as on it: exp(new - old)
#: for new = 0 lands an ulp or so beyond the band's 1/p, which is the same point
_ON_BOUND = 8 * np.finfo(float).eps


def _outside(ratio: np.ndarray, lower, upper) -> np.ndarray:
    return (ratio < lower * (1 - _ON_BOUND)) | (ratio > upper * (1 + _ON_BOUND))


def _clip_fraction(old, new, eps_low, eps_high, div, max_ratio, wanted):
    both_zero = np.isinf(old) & np.isinf(new)  # p = 0 stays 0: ratio 1 by convention
    with np.errstate(invalid="ignore"):
        ratio = np.where(both_zero, 1.0, np.exp(new - old))
    if wanted is None:
        wanted = float(np.mean(_outside(ratio, 1.0 - eps_low, 1.0 + eps_high)))
    else:
        wanted = _scalar(wanted, "clip_fraction")
        if not 0.0 <= wanted < 1.0:
            raise ValueError(f"clip_fraction must lie in [0, 1) (got {wanted!r})")

    bands = _bands(old, div, max_ratio, from_logp=True)

    def fraction(delta):
        lo, hi = bands(delta)
        return float(np.mean(_outside(ratio, lo, hi)))

    return fraction, wanted


def _solve(measure, goal: float, increasing: bool, target: str, step: float) -> float:
    """The delta in DELTA_RANGE where the monotone ``measure`` meets ``goal``;
    for a step function (jumps of ``step``), the smallest delta where a
    nonincreasing one falls to ``goal`` or below."""
    from scipy.optimize import brentq  # here: importing bandsolve stays light

    lo, hi = (math.log(d) for d in DELTA_RANGE)
    at_lo, at_hi = measure(math.exp(lo)), measure(math.exp(hi))
    reach = (min(at_lo, at_hi), max(at_lo, at_hi))
    if not (reach[0] <= goal <= reach[1]):
        raise OutOfReach(
            f"the {target} target {goal:.10g} is out of the band's reach: delta in "
            f"[{DELTA_RANGE[0]:g}, {DELTA_RANGE[1]:g}] gives {reach[0]:.10g} to {reach[1]:.10g}"
            + (" (a width is at most 1/p, or max_ratio)" if target == "width" else ""))
    if goal == (at_lo if increasing else at_hi) and step == 0.0:
        return DELTA_RANGE[0] if increasing else DELTA_RANGE[1]
    if step and at_lo <= goal:
        return DELTA_RANGE[0]
    sign = 1.0 if increasing else -1.0
    # a step function (a share of n tokens) is compared with the midpoint
    # between the largest share at most the goal and the next one up: it is
    # never 0 there, and brentq lands on the jump where the share falls to
    # the goal (a goal of 187.5 tokens asks for at most 187)
    level = (math.floor(goal / step + 1e-9) + 0.5) * step if step else goal

    def residual(t):
        return sign * (measure(math.exp(t)) - level)

    xtol, rtol = 1e-12, 4 * np.finfo(float).eps
    t = brentq(residual, lo, hi, xtol=xtol, rtol=rtol, maxiter=200)
    if step:  # brentq may stop just before the jump, where the share is too high
        while residual(t) < 0 and t < hi:
            t = min(t + 2 * (xtol + rtol * abs(t)), hi)
    return math.exp(t)


# --- a table of divergences ------------------------------------------------


class Unreachable(NamedTuple):
    """A divergence whose band cannot meet the goal for any delta in
    ``DELTA_RANGE``; ``reason`` is the message that says what it can reach."""

    divergence: str
    reason: str


def table(divergences: Sequence[DivergenceLike] = tuple(BUILTIN_DIVERGENCES), *,
          clip: float = 0.2, clip_high: float | None = None, at_p: float | None = None,
          logp: ArrayLike | None = None, new_logp: ArrayLike | None = None,
          target: str | None = None, clip_fraction: float | None = None,
          max_ratio: float | None = None) -> list[Calibration | Unreachable]:
    """:func:`calibrate_delta` for each divergence, with the same options.

    A divergence whose band cannot reach the goal gives an
    :class:`Unreachable` row, so the others are still compared; any other
    error (bad input, the same for every divergence) is raised.
    """
    rows: list[Calibration | Unreachable] = []
    for div in divergences:
        try:
            rows.append(calibrate_delta(div, clip=clip, clip_high=clip_high, at_p=at_p,
                                        logp=logp, new_logp=new_logp, target=target,
                                        clip_fraction=clip_fraction, max_ratio=max_ratio))
        except OutOfReach as exc:
            rows.append(Unreachable(get_divergence(div).name, str(exc)))
    return rows
