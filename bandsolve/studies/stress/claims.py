"""The stress test's endpoints and its row of the report.

The endpoints (pre-registered, in the SGD family): the log of each run's
largest per-step KL and its late regret, no clip minus Band-KL, paired by
seed (positive: the band is more stable).
"""

from __future__ import annotations

import numpy as np

from ..bandit.study import Result
from ..bandit.task import late_regret, max_step_kl
from ..claims import Claim, row_verdict
from ..rules import DELTA
from ..stats import effect_text, paired_difference

__all__ = ["FAMILY", "STEP_KL", "REGRET", "endpoints", "rows"]

FAMILY = "sgd"
STEP_KL = "stress: log max step KL, no-clip - Band-KL"
REGRET = "stress: late regret, no-clip - Band-KL"


def endpoints(result: Result) -> dict[str, dict]:
    runs, config = result.histories, result.config
    return {STEP_KL: paired_difference(np.log(max_step_kl(runs["no-clip"])),
                                       np.log(max_step_kl(runs["band-kl"]))),
            REGRET: paired_difference(late_regret(runs["no-clip"], config),
                                      late_regret(runs["band-kl"], config))}


def rows(result: Result, adjusted: dict[str, float]) -> list[Claim]:
    """The report's row; ``adjusted`` holds the family's Holm-adjusted p-values."""
    runs, config = result.histories, result.config
    tests = endpoints(result)
    worst = ", ".join(f"{rule} {np.exp(np.mean(np.log(max_step_kl(h)))):.3g}"
                      for rule, h in runs.items())
    regrets = ", ".join(f"{rule} {np.mean(late_regret(h, config)):.3f}" for rule, h in runs.items())
    text = (f"SGD bandit with {config.epochs} epochs per batch, {config.seeds} seeds, "
            f"{config.steps} steps (figures/dynamics_stress.png). Largest per-step "
            f"KL(old || new) of a run (geometric mean over seeds): {worst}. Late regret: "
            f"{regrets}. Paired, no-clip minus Band-KL (positive: the band is more stable): "
            f"log max step KL {effect_text(tests[STEP_KL], adjusted[STEP_KL])}; late regret "
            f"{effect_text(tests[REGRET], adjusted[REGRET])}. The band bounds each token's "
            f"binary divergence, not the policy's KL: its per-step KL exceeds delta = {DELTA:g}")
    return [Claim("Under many updates per batch (far off-policy, SGD) no clipping becomes "
                  "unstable and the band's trust region does not (tail-token bandit, 32 "
                  "epochs per batch)", "the trust-region half of the claim", text,
                  row_verdict([(tests[n], adjusted[n]) for n in (STEP_KL, REGRET)]))]
