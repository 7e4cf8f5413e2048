"""The autoregressive study's endpoints and verdict rules, fixed before the
runs they judge (issue 40).

Every comparison is a paired difference over seeds (each rule sees every
seed's task, weights and draws), oriented so that a positive difference
favours the band, with a 95% t interval and Cohen's d_z. "Final" is a seed's
mean over the last ``window`` steps; every rule is at its *tuned* knob (the
best pilot final reward, :mod:`.tuning`).

* **One Holm family** (:data:`FAMILY`): at the primary learning rate, final
  tail mass, Band-KL against PPO and against Clip-Higher, and final
  first-token entropy, Band-KL against PPO; at the higher learning rate, the
  log of the largest per-step KL and the final reward, Band-KL against no
  clip.
* **The verdict** (:func:`verdict`), of the study and of each report row
  (:data:`ROWS`, the family's tests that decide it): "contradicted" where a
  tuned baseline is significantly better (a test with a negative difference
  at Holm p < 0.05); "reproduces" where the band wins every test (a positive
  difference at Holm p < 0.05 each); otherwise "not reproduced at this
  scale", with what held.
* **Where the difference comes from** (:func:`mechanism`, descriptive,
  unadjusted): at the primary rate, Band-KL against tuned PPO in the share
  of token-updates each clip zeroed over training, on positive-advantage tail
  first tokens (the band *frees the tail* if it clips them less) and on
  positive-advantage head first tokens (it *holds the head* if it clips them
  more).
* A verdict needs :data:`MIN_SEEDS` paired seeds; a smaller run is a smoke
  run of the same code, whose verdict decides nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..stats import holm, nanmean, paired_difference

ALPHA = 0.05
#: the fewest paired seeds whose verdict the report states as the study's
MIN_SEEDS = 16
VERDICTS = ("reproduces", "not reproduced at this scale", "contradicted")

#: name -> (learning rate: "primary" or "high", metric, how it is read per
#: seed, the band, the baseline); each test is band - baseline, except the
#: step KL's, baseline - band (a smaller step favours the band)
FAMILY = {
    "final tail mass, Band-KL - PPO": ("primary", "tail_mass", "final", "band-kl", "ppo"),
    "final tail mass, Band-KL - Clip-Higher": ("primary", "tail_mass", "final", "band-kl",
                                               "clip-higher"),
    "final entropy, Band-KL - PPO": ("primary", "entropy", "final", "band-kl", "ppo"),
    "log largest step KL, no clip - Band-KL": ("high", "step_kl", "log max", "band-kl",
                                               "no-clip"),
    "final reward, Band-KL - no clip": ("high", "reward", "final", "band-kl", "no-clip"),
}
#: the report's rows and the tests of the family that decide each
ROWS = {
    "tail": ("final tail mass, Band-KL - PPO", "final tail mass, Band-KL - Clip-Higher"),
    "stability": ("log largest step KL, no clip - Band-KL", "final reward, Band-KL - no clip"),
    "entropy": ("final entropy, Band-KL - PPO",),
}
#: the mechanism's clip shares: (metric, what the band does if its share is
#: below PPO's (-1) or above it (+1))
MECHANISM = {"clip/pos/tail": ("frees the tail", -1), "clip/pos/head": ("holds the head", +1)}


def per_seed(history: dict, metric: str, how: str, window: int) -> np.ndarray:
    """A run's ``metric`` per seed: "final" (mean of the last ``window``
    steps), "mean" (over training, NaN steps left out), "max", "log max"."""
    values = history[metric]
    if how == "final":
        return values[-window:].mean(0)
    if how == "mean":
        return nanmean(values, 0)
    if how == "max":
        return values.max(0)
    if how == "log max":
        return np.log(values.max(0))
    raise ValueError(f"how must be final, mean, max or log max (got {how!r})")


def family(runs: dict, window: int) -> dict[str, dict]:
    """The family's paired tests; ``runs`` maps ("primary" or "high", rule)
    to the tuned rule's history {metric: (steps, seeds)}."""
    tests = {}
    for name, (lr, metric, how, band, baseline) in FAMILY.items():
        b = per_seed(runs[(lr, band)], metric, how, window)
        c = per_seed(runs[(lr, baseline)], metric, how, window)
        tests[name] = paired_difference(c, b) if metric == "step_kl" else paired_difference(b, c)
    return tests


def adjust(tests: dict) -> dict[str, float]:
    """Holm-adjusted p-values over the whole family."""
    return dict(zip(tests, holm([tests[n]["p"] for n in tests])))


def verdict(tests: dict, adjusted: dict, names=None) -> tuple[str, list, list]:
    """(verdict, [tests that favour the band significantly], [tests where a
    tuned baseline is significantly better]) over ``names`` (default: the
    whole family)."""
    names = list(FAMILY if names is None else names)
    won = [n for n in names if tests[n]["mean"] > 0 and adjusted[n] < ALPHA]
    lost = [n for n in names if tests[n]["mean"] < 0 and adjusted[n] < ALPHA]
    if lost:
        return "contradicted", won, lost
    if len(won) == len(names):
        return "reproduces", won, lost
    return "not reproduced at this scale", won, lost


def mechanism(runs: dict) -> dict[str, dict[str, Any]]:
    """Band-KL minus tuned PPO at the primary rate, in each :data:`MECHANISM`
    clip share averaged over training (paired, unadjusted), and whether the
    band does what the share names: {what: {"diff": ..., "holds": bool}}."""
    out: dict[str, dict[str, Any]] = {}
    for metric, (what, sign) in MECHANISM.items():
        band = per_seed(runs[("primary", "band-kl")], metric, "mean", 1)
        ppo = per_seed(runs[("primary", "ppo")], metric, "mean", 1)
        keep = np.isfinite(band) & np.isfinite(ppo)
        if keep.sum() < 2:
            out[what] = {"diff": None, "holds": False}
            continue
        diff = paired_difference(band[keep], ppo[keep])
        out[what] = {"diff": diff, "holds": bool(sign * diff["mean"] > 0 and diff["p"] < ALPHA)}
    return out


def source(mech: dict) -> str:
    """Where the band's difference comes from, in words, from :func:`mechanism`."""
    held = [what for what, m in mech.items() if m["holds"]]
    if len(held) == 2:
        return "both: the band frees the tail and holds the head"
    if held:
        return f"the band {held[0]}, and not the other"
    return "neither: the band neither frees the tail nor holds the head significantly"
