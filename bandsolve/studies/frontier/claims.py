"""The frontier's row of the report: descriptive, it decides nothing.

Its verdict (:func:`.study.verdict`: does the band frontier dominate at equal
reward, beyond the combined CI?) and the matched-step-size table (each rule
at the hyperparameter whose mean per-step KL equals PPO's at eps = 0.2) are
described; no test of this study is in a Holm family.
"""

from __future__ import annotations

from ..claims import DESCRIPTIVE, Claim
from .study import Result, matched_table, summarize, unmatched, verdict

__all__ = ["FAMILY", "endpoints", "rows"]

#: no pre-registered endpoint: no family
FAMILY = None


def endpoints(result: Result) -> dict[str, dict]:
    return {}


def rows(result: Result, adjusted: dict[str, float]) -> list[Claim]:
    summary = summarize(result.rows)
    optimizers = result.optimizers

    def said(optimizer, metric):
        if optimizer not in optimizers:
            return "not run"
        v = verdict(summary, optimizer, metric)
        return (f"{v['verdict']} ({v['higher']} higher, {v['lower']} lower, of "
                f"{v['comparisons']} grid comparisons)")

    parts = []
    for optimizer in optimizers:
        entries = ", ".join(f"{rule} {value:.3g}: reward {reward[0]:.3f}, entropy "
                            f"{entropy[0]:.3f} ± {entropy[1]:.3f}, tail {tail[0]:.3f}"
                            for rule, value, reward, entropy, tail, _ in
                            matched_table(summary, optimizer))
        missing = unmatched(result.rows, optimizer)
        if missing:
            entries += "; not matched in the grid (its per-step KL against PPO's): " + \
                ", ".join(f"{rule} {lo:.2g} to {hi:.2g} against {target:.2g}"
                          for rule, (lo, hi, target) in missing.items())
        parts.append(f"{optimizer.upper()}: {entries}")
    text = (f"Every rule over its own hyperparameter, {' and '.join(o.upper() for o in optimizers)} "
            "(figures/dynamics_frontier.png): in total entropy the band frontier "
            f"{said('sgd', 'entropy')}; in tail mass it {said('sgd', 'tail_mass')}. At matched "
            "step size (PPO's mean per-step KL at eps = 0.2): " + "; ".join(parts))
    return [Claim("At equal reward, the band's reward-entropy frontier lies above the fixed "
                  "clips' (tail-token bandit, each rule over its own hyperparameter)",
                  "entropy is kept, not traded for reward", text, DESCRIPTIVE)]
