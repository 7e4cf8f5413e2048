"""Every rule tuned as a practitioner tunes it, by rules fixed in code.

Each rule has one knob (:class:`Knob`) and a log-spaced grid; every grid
point gets the same pilot budget (the pilot seeds, the study's steps) on
seeds of their own stream, never reused.

* **Tuned** (:func:`best`): the knob with the best pilot final reward (mean
  over the pilot seeds of each seed's mean over the last ``window`` steps).
  An optimum on a grid's edge extends the grid by the edge's own ratio
  (:func:`extension`), up to the knob's limits; beyond them the study stops
  with :class:`GridEdgeError`, naming the rule. Never a silent grid end.
* **Matched step** (:func:`matched`): the knob, interpolated linearly in log
  knob and log KL between the two grid points whose pilot mean per-step KL
  over the second half of training brackets PPO 0.2's. A target that no
  pair brackets, or that several pairs bracket (the KL is not monotone in
  the knob there), is :class:`MatchError`, naming the rule: that rule's
  matched comparison is not run, and the report says why.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

#: the rules compared, in the report's order
RULES = ("no-clip", "ppo", "clip-higher", "dcpo", "band-kl", "band-tv")
#: the knob whose per-step KL the matched step matches
TARGET = ("ppo", 0.2)


@dataclasses.dataclass(frozen=True)
class Knob:
    """A rule's knob: its name, its pilot grid (ascending) and the range an
    extension may reach (inclusive)."""

    rule: str
    name: str
    grid: tuple
    limits: tuple = (0.0, math.inf)

    def __post_init__(self):
        g = np.asarray(self.grid, float)
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES} (got {self.rule!r})")
        if self.rule == "no-clip":
            if self.grid != (0.0,):
                raise ValueError(f"no clip has no knob: its grid is (0.0,) (got {self.grid})")
            return
        if g.size < 3 or np.any(g <= 0) or np.any(np.diff(g) <= 0):
            raise ValueError(f"{self.rule}'s grid must hold at least 3 positive values in "
                             f"ascending order (got {self.grid})")
        if not self.limits[0] <= g[0] or not g[-1] <= self.limits[1]:
            raise ValueError(f"{self.rule}'s grid {self.grid} leaves its limits {self.limits}")


class TuningError(RuntimeError):
    """The pre-registered tuning cannot choose a knob: the study stops, naming the rule."""


class GridEdgeError(TuningError):
    """A rule's best pilot knob is at its grid's edge, and the grid may not grow there."""


class MatchError(TuningError):
    """No single pair of grid points brackets the matched step's target."""


def best(grid, rewards) -> float:
    """The knob of ``grid`` with the largest mean pilot final reward (the
    first, should two be equal)."""
    return float(grid[int(np.argmax(np.asarray(rewards, float)))])


def extension(knob: Knob, grid, rewards) -> float | None:
    """The knob value to add when the best of ``grid`` (``knob``'s grid so
    far, ascending) is at an edge: the edge times its ratio to its
    neighbour; None where the optimum is inside. Raises
    :class:`GridEdgeError` where that value leaves the knob's limits."""
    if knob.rule == "no-clip":
        return None
    grid = [float(g) for g in grid]
    i = int(np.argmax(np.asarray(rewards, float)))
    if 0 < i < len(grid) - 1:
        return None
    edge, neighbour = (grid[0], grid[1]) if i == 0 else (grid[-1], grid[-2])
    value = float(edge * (edge / neighbour))
    low, high = knob.limits
    if not low * (1 - 1e-12) <= value <= high * (1 + 1e-12):  # a limit reached by rounding counts
        side = "smallest" if i == 0 else "largest"
        raise GridEdgeError(
            f"{knob.rule}: the best pilot final reward is at the {side} {knob.name} of its "
            f"grid ({edge:g}; grid {', '.join(f'{g:g}' for g in grid)}), and the next value "
            f"{value:g} leaves the limits {knob.limits}: widen the grid or the limits")
    return value


def matched(knob: Knob, grid, step_kls, target: float) -> float:
    """The knob whose pilot mean per-step KL is ``target``, interpolated in
    log knob and log KL between the one bracketing pair of ``grid``'s points
    (ascending); raises :class:`MatchError` otherwise."""
    g = np.log(np.asarray(grid, float))
    k = np.log(np.asarray(step_kls, float))
    t = math.log(target)
    pairs = [i for i in range(g.size - 1) if (k[i] - t) * (k[i + 1] - t) <= 0
             and k[i] != k[i + 1]]
    if len(pairs) != 1:
        why = ("no pair of grid points brackets it" if not pairs else
               f"{len(pairs)} pairs bracket it (the KL is not monotone in the knob)")
        raise MatchError(
            f"{knob.rule}: PPO 0.2's mean per-step KL {target:.4g} cannot be matched: {why} "
            f"(grid {', '.join(f'{x:g}' for x in grid)}, KL "
            f"{', '.join(f'{x:.4g}' for x in step_kls)})")
    i = pairs[0]
    w = (t - k[i]) / (k[i + 1] - k[i])
    return float(math.exp(g[i] + w * (g[i + 1] - g[i])))
