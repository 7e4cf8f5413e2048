"""The clipping rules the studies compare, with their plot styles.

``RULES`` is the compared set (no clipping, PPO, Clip-Higher, DCPO and the
bands), each a rule object with ``bounds(old_log_prob) -> (lower, upper)``
from :mod:`bandsolve.torch`; ``CONTROLS`` adds ``Constant(0.8, 10)``, a wide
fixed clip, the same for every token, so that "the band helps" can be told
apart from "any loose upper clip helps".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from bandsolve.torch import DCPO, Band, ClipHigher, NoClip, PPOClip

__all__ = ["CONTROLS", "Constant", "DELTA", "RULES", "SIGNS", "STYLES", "band", "make_rule",
           "rule_object"]

DELTA = 0.05
#: the signs of advantage the studies count clips by ("pos": A > 0)
SIGNS = ("pos", "neg")


@dataclasses.dataclass(frozen=True)
class Constant:
    """A fixed clip [lower, upper] for every token."""

    lower: float = 0.8
    upper: float = 10.0

    def bounds(self, old_log_prob):
        return (torch.full_like(old_log_prob, self.lower),
                torch.full_like(old_log_prob, self.upper))


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
#: the controls: rules no baseline is, to tell the band's shape from its width
CONTROLS: dict[str, tuple[Any, dict[str, Any]]] = {
    "constant": (Constant(0.8, 10.0), dict(color="#8c564b", ls="--", label="constant [0.8, 10]")),
}

#: every rule's plot style, by name
STYLES = {name: style for name, (_, style) in {**RULES, **CONTROLS}.items()}


def make_rule(rule: str, value: float):
    """The rule object of ``rule`` (a name of ``RULES``) at its knob ``value``: PPO's eps,
    Clip-Higher's eps_high (eps_low 0.2), DCPO's scale of its default
    (eps_low, eps_high) = (0.16, 0.2), a band's delta; no clip has no knob
    (``value`` is ignored)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {tuple(RULES)} (got {rule!r})")
    if rule == "no-clip":
        return NoClip()
    if rule == "ppo":
        return PPOClip(value)
    if rule == "clip-higher":
        return ClipHigher(0.2, value)
    if rule == "dcpo":
        return DCPO(0.16 * value, 0.2 * value)
    return band(rule.removeprefix("band-"), value)


def rule_object(name_or_rule):
    """The rule object for a name of ``RULES`` or ``CONTROLS``, or the rule itself."""
    if isinstance(name_or_rule, str):
        return {**RULES, **CONTROLS}[name_or_rule][0]
    return name_or_rule
