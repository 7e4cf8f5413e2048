"""The bandit study's endpoint and its row of the report.

The endpoint (pre-registered, in the SGD family with the stress test's and
the sequence task's): the late mass on the high-paying tail, Band-KL against
PPO, paired by seed. Described beside it, not tested: the controls' tail
mass, the upper clips on the rarest positive-advantage tokens, and the
entropy of the paying token at regret :data:`MATCHED_REGRET`.
"""

from __future__ import annotations

import numpy as np

from ..claims import Claim, row_verdict
from ..stats import cluster_bootstrap, effect_text, nanmean, paired_difference
from .study import Result
from .task import entropy_at_regret, late_per_seed

__all__ = ["FAMILY", "MATCHED_REGRET", "TAIL_MASS", "endpoints", "rows"]

#: the Holm family this study's endpoint belongs to
FAMILY = "sgd"
TAIL_MASS = "bandit tail mass"
#: the level of regret (best reward - expected reward) at which entropies are
#: described, fixed before the runs: the pure-head policy's reward, which
#: every rule reaches (descriptive since issue 30: PPO reaches it only by
#: collapsing onto the head)
MATCHED_REGRET = 0.5


def _interval(value) -> str:
    """(mean, low, high) as text."""
    return f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]"


def summary(result: Result, window: int = 50) -> dict:
    """Per rule and late metric: (mean, 95% low, 95% high) over seeds, from a
    bootstrap that resamples whole seeds (the contexts of a seed share its
    random stream, so they are one cluster)."""
    return {rule: {m: cluster_bootstrap(v) for m, v in late_per_seed(history, window).items()}
            for rule, history in result.histories.items()}


def endpoints(result: Result) -> dict[str, dict]:
    late = {rule: late_per_seed(result.histories[rule]) for rule in ("band-kl", "ppo")}
    return {TAIL_MASS: paired_difference(late["band-kl"]["tail_mass"], late["ppo"]["tail_mass"])}


def rows(result: Result, adjusted: dict[str, float]) -> list[Claim]:
    """The report's row; ``adjusted`` holds the family's Holm-adjusted p-values."""
    config, histories = result.config, result.histories
    late = summary(result)
    diff = endpoints(result)[TAIL_MASS]
    controls = ", ".join(f"{rule} {_interval(late[rule]['tail_mass'])}"
                         for rule in ("no-clip", "dcpo", "clip-higher") if rule in late)
    pos_tail = {rule: float(nanmean(histories[rule]["clip/pos/p<1e-3"]))
                for rule in ("ppo", "band-kl")}
    at_regret = ", ".join(
        f"{rule} {float(nanmean(v)):.3f} ({np.isfinite(v).sum()} of {v.size} seeds reach it)"
        for rule, v in ((rule, entropy_at_regret(histories[rule], config, MATCHED_REGRET))
                        for rule in ("ppo", "band-kl")))
    entropies = "; ".join(f"{rule} " + " / ".join(f"{late[rule][m][0]:.3f}" for m in
                                                 ("entropy", "entropy_rewarding",
                                                  "entropy_given_success"))
                          for rule in ("ppo", "band-kl"))
    text = (f"SGD, {config.epochs} epochs per batch, on a bandit whose tail pays "
            f"{config.tail_pay:g} and head {config.head_pay:g} ({config.contexts} contexts, "
            f"{config.seeds} seeds, last 50 of {config.steps} steps; "
            f"figures/dynamics_bandit.png): late tail mass PPO "
            f"{_interval(late['ppo']['tail_mass'])}, Band-KL "
            f"{_interval(late['band-kl']['tail_mass'])}; Band-KL - PPO paired: "
            f"{effect_text(diff, adjusted[TAIL_MASS])}. Controls: {controls}. Upper clips on "
            f"positive-advantage tokens with p < 1e-3: PPO {pos_tail['ppo']:.2f}, Band-KL "
            f"{pos_tail['band-kl']:.2f}. Descriptive: the entropy of the paying token given "
            f"success at regret {MATCHED_REGRET:g} (the pure-head policy's, which PPO reaches "
            f"only by collapsing onto the head) {at_regret}; late entropies (total / among "
            f"rewarding tokens / given success) {entropies} nats")
    return [Claim("Under SGD, high-advantage tail tokens gain mass under the band and not "
                  "under PPO's clip (tail-token bandit)",
                  "the mechanism behind the entropy collapse (Figure 1)", text,
                  row_verdict([(diff, adjusted[TAIL_MASS])]))]
