"""The clipping rules the dynamics studies compare, with their plot styles.

``RULES`` is the bandit's set; ``SEQUENCE_RULES`` adds the sequence task's
controls, each a rule object with ``bounds(old_log_prob) -> (lower, upper)``
like :mod:`bandsolve.torch.rules`:

* ``Constant(0.8, 10)``: a wide fixed clip, the same for every token, so that
  "the band helps" can be told apart from "any loose upper clip helps";
* ``Hybrid``: one rule's lower bound with another's upper bound, so that the
  band's two sides are tested one at a time ([0.8, r_hi] and [r_lo, 1.2]);
* ``Hull``: the "relax" hull [min(r_lo, 0.8), max(r_hi, 1.28)] of MATH.md
  section 10 (the band widened to Clip-Higher's where that is wider).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from bandsolve.torch import DCPO, Band, ClipHigher, NoClip, PPOClip

DELTA = 0.05


@dataclasses.dataclass(frozen=True)
class Constant:
    """A fixed clip [lower, upper] for every token."""

    lower: float = 0.8
    upper: float = 10.0

    def bounds(self, old_log_prob):
        return (torch.full_like(old_log_prob, self.lower),
                torch.full_like(old_log_prob, self.upper))


@dataclasses.dataclass(frozen=True)
class Hybrid:
    """The lower bound of ``lower_from`` with the upper bound of ``upper_from``."""

    lower_from: Any
    upper_from: Any

    def bounds(self, old_log_prob):
        return self.lower_from.bounds(old_log_prob)[0], self.upper_from.bounds(old_log_prob)[1]


@dataclasses.dataclass(frozen=True)
class Hull:
    """The widest of two rules: [min of the lowers, max of the uppers]."""

    first: Any
    second: Any

    def bounds(self, old_log_prob):
        (lo1, hi1), (lo2, hi2) = self.first.bounds(old_log_prob), self.second.bounds(old_log_prob)
        return torch.minimum(lo1, lo2.to(lo1.dtype)), torch.maximum(hi1, hi2.to(hi1.dtype))


def band(divergence: str, delta: float = DELTA) -> Band:
    return Band(delta, divergence, 10.0, validate=False)


#: name -> (rule, plot style); the order is the legend's
RULES: dict[str, tuple[Any, dict[str, Any]]] = {
    "no-clip": (NoClip(), dict(color="0.6", ls="--", label="no clip")),
    "ppo": (PPOClip(0.2), dict(color="0.2", ls=":", label="PPO [0.8, 1.2]", zorder=4)),
    "clip-higher": (ClipHigher(), dict(color="#d62728", ls="-.", label="Clip-Higher")),
    "dcpo": (DCPO(), dict(color="#ff7f0e", ls="--", label="DCPO")),
    "band-kl": (band("kl"), dict(color="#1f77b4", label="Band-KL")),
    "band-tv": (band("tv"), dict(color="#2ca02c", label="Band-TV")),
    "band-chi2": (band("chi2"), dict(color="#9467bd", label=r"Band-$\chi^2$")),
}

#: the sequence task's rules (issue 17 item 2): PPO, Clip-Higher, the three
#: bands, and the controls
SEQUENCE_RULES: dict[str, tuple[Any, dict[str, Any]]] = {
    name: RULES[name] for name in ("no-clip", "ppo", "clip-higher", "band-kl", "band-tv",
                                   "band-chi2")}
SEQUENCE_RULES.update({
    "constant": (Constant(0.8, 10.0), dict(color="#8c564b", ls="--", label="constant [0.8, 10]")),
    "ppo-lo+band-hi": (Hybrid(PPOClip(0.2), band("kl")),
                       dict(color="#17becf", ls="-.", label="[0.8, KL r_hi]")),
    "band-lo+ppo-hi": (Hybrid(band("kl"), PPOClip(0.2)),
                       dict(color="#bcbd22", ls="-.", label="[KL r_lo, 1.2]")),
    "relax-hull": (Hull(band("kl"), ClipHigher()),
                   dict(color="#e377c2", ls=":", label="relax hull (KL, 0.8/1.28)")),
})

#: every rule's plot style, by name
STYLES = {name: style for name, (_, style) in {**RULES, **SEQUENCE_RULES}.items()}


def rule_object(name_or_rule):
    """The rule object for a name of ``RULES`` or ``SEQUENCE_RULES``, or the rule itself."""
    if isinstance(name_or_rule, str):
        return {**RULES, **SEQUENCE_RULES}[name_or_rule][0]
    return name_or_rule
