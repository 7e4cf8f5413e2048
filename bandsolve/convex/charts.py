"""Charts: the variable x each program is written in, so that its absolute
tolerance is one relative to min(r, |r - 1|) (the package's docstring, "Scaling")."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..divergences import Divergence

__all__ = ["Chart", "Role", "CHARTS", "RECENTRE", "chart_for", "natural_margin", "same_chart"]

CHARTS = 3  # charts tried per bound: the estimate's, then re-centred twice
RECENTRE = 1e-2  # re-centre when the answer lands this far (relative) from the chart


class Chart(NamedTuple):
    """v = anchor + step x (``log`` False) or v = exp(anchor + x) (``log``
    True), for the ratio v of the charted token; ``sense`` +1 maximises x,
    -1 minimises it."""

    log: bool
    anchor: float
    step: float
    sense: int


class Role(NamedTuple):
    """Which token the program charts, and how its ratio v gives the bound r.

    The binary program charts the token whose ratio falls: the sampled one
    for the lower bound (r = v), the other for the upper one
    (r = 1 + ((1 - p)/p)(1 - v)), so that a bound near the simplex end 1/p,
    where v is near 0, is solved relative to v too. The vocabulary program
    charts the sampled token on both sides (``falls`` False for its upper).
    """

    weight: float  # the charted token's old probability
    rest: np.ndarray  # the other tokens'
    falls: bool
    gain: float  # |dr/dv|: 1, or (1 - p)/p for the binary upper bound


def natural_margin(div: Divergence, p: float, delta: float) -> float:
    """|r - 1| of the quadratic approximation (MATH.md, "Local shape"), or
    delta / p without curvature, capped at 1: a falling ratio's chart for
    when there is no estimate."""
    pc = 1.0 - p
    c = div.curvature_at_one
    margin = math.sqrt(2.0 * delta * pc / (c * p)) if c > 0 and pc > 0 else delta / p
    return min(margin, 1.0) if margin > 0 else 0.5


def chart_for(falls: bool, v: float, log_v: float | None, natural: float,
              log_ok: bool) -> Chart:
    if not falls:
        return Chart(False, 1.0, v - 1.0 if 1.0 < v < math.inf else natural, 1)
    if not 0.0 <= v <= 1.0:  # no usable estimate
        v, log_v = max(1.0 - natural, 0.0), None
    if log_ok and v <= 0.5:
        return Chart(True, log_v if log_v is not None else math.log(max(v, 5e-324)), 1.0, -1)
    if 0.0 < v <= 0.5:
        return Chart(False, 0.0, v, -1)
    if 0.5 < v < 1.0:
        return Chart(False, 1.0, -(1.0 - v), 1)
    return Chart(False, 1.0, -1.0 if v == 0.0 else -natural, 1)


def same_chart(a: Chart, b: Chart) -> bool:
    if a.log != b.log or (not a.log and a.anchor != b.anchor):
        return False
    if a.log:
        return abs(a.anchor - b.anchor) <= RECENTRE
    return abs(a.step - b.step) <= RECENTRE * abs(a.step)
