"""Reward-entropy frontiers: each clipping rule over its own hyperparameter.

One point per rule is confounded: a rule that allows smaller steps learns more
slowly and keeps entropy longer, so "more entropy" may only be a point further
back on the same reward-entropy trade-off. Here every rule runs the tail-token
bandit of :mod:`bandsolve.studies.bandit.task` over a grid of its own
hyperparameter (``GRIDS``): eps for PPO, eps_high for Clip-Higher, a common
scale of DCPO's eps pair, delta for the bands, including the delta that
:func:`bandsolve.calibrate_delta` matches to PPO's eps = 0.2 (width at p = 0.5).
Per run and seed it records the expected reward averaged over the whole run,
late-window means (the last quarter of the steps) of the entropy and of the
mass on the rewarding tail tokens, and the mean per-step KL(pi_old || pi_new).

Why the reward over the whole run and not a late window: in this bandit every
rule ends at the optimum (late reward within 0.002 of 0.7 for all of them, in
the quick run), so a late reward cannot tell rules apart. What a smaller step
costs is learning speed, and the mean reward over training (the negative of
the regret, up to a constant) measures exactly that: the trade-off in question
is reward collected against entropy kept.

Three results, all computed from the runs (:func:`run` returns a
:class:`Result` and writes nothing):

* **the frontier figure** (:mod:`.figure`): late reward against entropy and against tail mass,
  one curve per rule, with 95% CIs over seeds, for SGD and for Adam;
* **matched step size**: each rule rerun at the hyperparameter whose mean
  per-step KL equals PPO's at eps = 0.2 (interpolated on the grid, log-log);
* **the verdict** (:func:`verdict`, descriptive: :mod:`.claims`): at equal reward, does a band's entropy
  (tail mass) exceed the clip rules' beyond the combined CI?

Quick mode (the default) uses a reduced problem and grid (seconds); the full
study runs the whole grid on the study's full problem. Everything is
deterministic under the seed, whatever the number of processes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..._progress import Progress
from ...calibrate import calibrate_delta
from ..bandit.task import BanditConfig, run_bandit
from ..jobs import Jobs, one_thread, run_tasks
from ..rules import make_rule
from ..stats import mean_and_ci

__all__ = ["BANDS", "CLIPS", "FrontierConfig", "METRICS", "NAME", "REFERENCE", "Result",
           "full_config", "grids", "matched_table", "matched_values", "run", "smoke_config",
           "summarize", "unmatched", "verdict"]

#: the name of the study's CSV and figure
NAME = "dynamics_frontier"
BANDS = ("band-kl", "band-tv", "band-chi2")
CLIPS = ("ppo", "clip-higher", "dcpo")
METRICS = ("reward", "entropy", "tail_mass", "step_kl")
#: the reference point of the matched-step-size comparison
REFERENCE = ("ppo", 0.2)


@dataclasses.dataclass(frozen=True)
class FrontierConfig:
    bandit: BanditConfig
    optimizers: tuple = (("sgd", 2.5), ("adam", 0.05))
    eps: tuple = (0.1, 0.2, 0.3, 0.5)
    eps_high: tuple = (0.2, 0.28, 0.4, 0.6)
    dcpo_scale: tuple = (0.5, 1.0, 2.0, 4.0)
    deltas: tuple = (0.01, 0.02, 0.05, 0.1, 0.2)


def smoke_config() -> FrontierConfig:
    """``bandsolve repro``'s quick run. The grids reach down to steps smaller
    than PPO's at eps = 0.2 (a band lets tail tokens move, so its per-step KL
    at delta = 0.01 is already above PPO's)."""
    return FrontierConfig(BanditConfig(contexts=8, steps=60, seeds=3),
                          optimizers=(("sgd", 2.5),),
                          eps=(0.1, 0.2, 0.4), eps_high=(0.28, 0.6),
                          dcpo_scale=(0.5, 2.0), deltas=(0.01, 0.05, 0.2))


def full_config() -> FrontierConfig:
    """``--full``: the whole grids, on the bandit's full problem, SGD and Adam."""
    return FrontierConfig(BanditConfig(steps=300, seeds=5),
                          eps=(0.05, 0.1, 0.2, 0.3, 0.5), eps_high=(0.28, 0.4, 0.6),
                          dcpo_scale=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0),
                          deltas=(0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2))


def _matched_delta(divergence: str) -> float:
    """The delta whose band at p = 0.5 is as wide as PPO's eps = 0.2 clip."""
    return calibrate_delta(divergence, clip=0.2, at_p=0.5).delta


def grids(config: FrontierConfig) -> dict[str, list[tuple[str, float, Any]]]:
    """rule -> [(hyperparameter name, value, rule object)], values ascending."""
    points = {"ppo": ("eps", sorted({*config.eps, REFERENCE[1]})),
              "clip-higher": ("eps_high", config.eps_high), "dcpo": ("scale", config.dcpo_scale)}
    for rule in BANDS:
        points[rule] = ("delta", sorted({*config.deltas, _matched_delta(rule.removeprefix("band-"))}))
    return {rule: [(name, value, make_rule(rule, value)) for value in values]
            for rule, (name, values) in points.items()}


def _late(history: dict, window: int) -> dict[str, np.ndarray]:
    """Per seed: entropy and tail mass over the last ``window`` steps, reward
    and step KL over the whole run."""
    late = {k: np.nanmean(history[k][-window:], axis=0) for k in ("entropy", "tail_mass")}
    late["step_kl"] = np.nanmean(history["step_kl"], axis=0)
    late["reward"] = np.nanmean(history["success"], axis=0)  # expected reward
    return late


def _task(task) -> list[dict]:
    """One (rule, value) run over all seeds: a module-level function for the
    process pool; one row per seed."""
    rule, param_name, value, obj, bandit, optimizer, seed = task
    with one_thread():
        history, _ = run_bandit(obj, bandit, seed)
    late = _late(history, max(bandit.steps // 4, 1))
    return [dict(optimizer=optimizer, rule=rule, param=param_name, value=value, seed=s,
                 **{m: float(late[m][s]) for m in METRICS}) for s in range(bandit.seeds)]


@dataclasses.dataclass(frozen=True)
class Result:
    """Every run's per-seed summary: ``rows`` of dicts with the optimizer,
    kind ("grid" or "matched"), rule, hyperparameter, value, seed and
    :data:`METRICS`."""

    config: FrontierConfig
    rows: list

    @property
    def optimizers(self) -> tuple[str, ...]:
        """The optimisers that ran, in the configuration's order."""
        return tuple(o for o, _ in self.config.optimizers
                     if any(r["optimizer"] == o for r in self.rows))

    def table(self) -> tuple[list[str], list[list]]:
        """The CSV: one row per (run, seed), the metrics at full precision."""
        fields = ["optimizer", "kind", "rule", "param", "value", "seed", *METRICS]
        return fields, [[r[k] for k in fields] for r in self.rows]


def run(config: FrontierConfig, jobs: int | Jobs = 1, seed: int = 0,
        progress: bool = True) -> Result:
    """Every rule at every grid value, under each optimiser, then each rule at
    its matched step size; one row per (run, seed) (``kind`` is "grid" or
    "matched"). ``jobs`` processes; the rows do not depend on it."""
    table = grids(config)
    rows: list[dict] = []
    total = len(config.optimizers) * (sum(len(v) for v in table.values()) + len(table) - 1)
    with Progress(total=total, desc="frontier", unit="run", disable=not progress) as bar:
        def done(task, _):
            bar.set_postfix_str(f"{task[5]} {task[0]} {task[1]}={task[2]:g}")
            bar.update(1)

        for optimizer, lr in config.optimizers:
            bandit = dataclasses.replace(config.bandit, optimizer=optimizer, lr=lr)
            tasks = [(rule, name, value, obj, bandit, optimizer, seed)
                     for rule, points in table.items() for name, value, obj in points]
            grid_rows = [r for rows_ in run_tasks(_task, tasks, jobs, done) for r in rows_]
            rows += [dict(r, kind="grid") for r in grid_rows]
            tasks = [(rule, table[rule][0][0], matched, make_rule(rule, matched), bandit,
                      optimizer, seed)
                     for rule, matched in matched_values(grid_rows).items() if matched is not None]
            rows += [dict(r, kind="matched")
                     for rows_ in run_tasks(_task, tasks, jobs, done) for r in rows_]
    return Result(config, rows)


def summarize(rows: list[dict]) -> dict[tuple, dict[str, tuple[float, float]]]:
    """(optimizer, kind, rule, value) -> {metric: (mean, 95% CI half-width)} over seeds."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["optimizer"], r["kind"], r["rule"], r["value"]), []).append(r)
    out: dict[tuple, dict[str, tuple[float, float]]] = {}
    for key, members in groups.items():
        out[key] = {}
        for m in METRICS:
            mean, ci = mean_and_ci(np.array([[x[m] for x in members]]))
            out[key][m] = (float(mean[0]), float(ci[0]))
    return out


def matched_values(rows: list[dict]) -> dict[str, float | None]:
    """Per rule, the hyperparameter whose mean per-step KL equals PPO's at
    eps = 0.2, by log-log interpolation on the grid; None if the grid does not
    bracket it. ``rows`` are one optimiser's grid rows."""
    kl = _mean_step_kl(rows)
    target = kl[REFERENCE[0]][REFERENCE[1]]
    return {rule: _interpolate_log(np.array(list(by_value)), np.array(list(by_value.values())),
                                   target)
            for rule, by_value in kl.items() if rule != REFERENCE[0]}


def _mean_step_kl(rows: list[dict]) -> dict[str, dict[float, float]]:
    """rule -> {value: mean per-step KL over its seeds}, values ascending."""
    runs: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        runs.setdefault(r["rule"], {}).setdefault(r["value"], []).append(r["step_kl"])
    return {rule: {v: float(np.mean(by_value[v])) for v in sorted(by_value)}
            for rule, by_value in runs.items()}


def _interpolate_log(values: np.ndarray, kl: np.ndarray, target: float) -> float | None:
    """The value where the piecewise log-log line through (value, kl) meets
    ``target``, on the first segment that brackets it."""
    for k in range(values.size - 1):
        lo, hi = kl[k], kl[k + 1]
        if min(lo, hi) <= target <= max(lo, hi) and lo > 0 and hi > 0 and lo != hi:
            t = (math.log(target) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return float(math.exp(math.log(values[k]) + t * math.log(values[k + 1] / values[k])))
    return None


def frontier_curve(summary, optimizer: str, rule: str, metric: str):
    """(reward mean, reward CI, metric mean, metric CI) of a rule's grid points,
    by ascending reward."""
    keys = sorted((k for k in summary if k[:3] == (optimizer, "grid", rule)),
                  key=lambda k: summary[k]["reward"][0])
    cols = [(summary[k]["reward"][0], summary[k]["reward"][1], summary[k][metric][0],
             summary[k][metric][1]) for k in keys]
    return np.array(cols).reshape(-1, 4)


def verdict(summary, optimizer: str, metric: str) -> dict[str, Any]:
    """Do the bands' frontiers dominate the clip rules' in ``metric`` at equal reward?

    Each band grid point is compared with each clip rule whose grid spans its
    reward: the clip rule's metric and CI are interpolated linearly in reward.
    A comparison counts as higher (lower) when the difference exceeds the
    combined CI, sqrt(ci_band^2 + ci_clip^2). The bands dominate when no
    comparison is lower and at least half are higher; they are dominated in
    the mirror case; otherwise neither.
    """
    higher = lower = total = 0
    for band in BANDS:
        for point in frontier_curve(summary, optimizer, band, metric):
            for clip in CLIPS:
                curve = frontier_curve(summary, optimizer, clip, metric)
                if curve.shape[0] < 2 or not curve[0, 0] <= point[0] <= curve[-1, 0]:
                    continue
                value = np.interp(point[0], curve[:, 0], curve[:, 2])
                ci = np.interp(point[0], curve[:, 0], curve[:, 3])
                gap = point[2] - value
                total += 1
                if gap > math.hypot(point[3], ci):
                    higher += 1
                elif gap < -math.hypot(point[3], ci):
                    lower += 1
    if total == 0:
        word = "is not comparable (no reward overlap)"
    elif lower == 0 and 2 * higher >= total:
        word = "dominates"
    elif higher == 0 and 2 * lower >= total:
        word = "is dominated"
    else:
        word = "neither dominates nor is dominated"
    return dict(verdict=word, higher=higher, lower=lower, comparisons=total)


def matched_table(summary, optimizer: str) -> list[tuple]:
    """(rule, hyperparameter, reward, entropy, tail mass, step KL) at matched step size;
    PPO's reference point first."""
    out = []
    ref = summary.get((optimizer, "grid", *REFERENCE))
    if ref is not None:
        out.append((REFERENCE[0], REFERENCE[1], *(ref[m] for m in METRICS)))
    for key, stats in sorted(summary.items()):
        if key[0] == optimizer and key[1] == "matched":
            out.append((key[2], key[3], *(stats[m] for m in METRICS)))
    return out


def unmatched(rows: list[dict], optimizer: str) -> dict[str, tuple[float, float, float]]:
    """Rules whose grid does not bracket PPO's per-step KL under ``optimizer``:
    rule -> (lowest, highest grid KL, PPO's)."""
    grid = [r for r in rows if r["optimizer"] == optimizer and r["kind"] == "grid"]
    kl = _mean_step_kl(grid)
    if REFERENCE[1] not in kl.get(REFERENCE[0], {}):
        return {}
    target = kl[REFERENCE[0]][REFERENCE[1]]
    return {rule: (min(kl[rule].values()), max(kl[rule].values()), target)
            for rule, value in matched_values(grid).items() if value is None}
