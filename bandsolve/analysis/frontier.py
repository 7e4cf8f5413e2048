"""Reward-entropy frontiers: each clipping rule over its own hyperparameter.

    python -m analysis.dynamics --part frontier [--full] [--out figures]

One point per rule is confounded: a rule that allows smaller steps learns more
slowly and keeps entropy longer, so "more entropy" may only be a point further
back on the same reward-entropy trade-off. Here every rule runs the tail-token
bandit of :mod:`bandsolve.analysis.dynamics` over a grid of its own
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

Three results, all computed from the CSV:

* **the frontier figure**: late reward against entropy and against tail mass,
  one curve per rule, with 95% CIs over seeds, for SGD and for Adam;
* **matched step size**: each rule rerun at the hyperparameter whose mean
  per-step KL equals PPO's at eps = 0.2 (interpolated on the grid, log-log);
* **the verdict** (:func:`verdict`): at equal reward, does a band's entropy
  (tail mass) exceed the clip rules' beyond the combined CI?

Quick mode (the default) uses a reduced problem and grid (seconds); the full
study runs the whole grid on the study's full problem. Everything is
deterministic under the seed, whatever the number of processes.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .._files import atomic_write  # noqa: E402
from .._progress import Progress  # noqa: E402
from ..calibrate import calibrate_delta  # noqa: E402
from ..torch.rules import DCPO, Band, ClipHigher, PPOClip  # noqa: E402
from .common import Jobs, mean_and_ci, one_thread, run_tasks, save_figure  # noqa: E402
from .dynamics import BanditConfig, run_bandit  # noqa: E402
from .rules import STYLES  # noqa: E402

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


def _matched_delta(divergence: str) -> float:
    """The delta whose band at p = 0.5 is as wide as PPO's eps = 0.2 clip."""
    return calibrate_delta(divergence, clip=0.2, at_p=0.5).delta


def grids(config: FrontierConfig) -> dict[str, list[tuple[str, float, Any]]]:
    """rule -> [(hyperparameter name, value, rule object)], values ascending."""
    out: dict[str, list[tuple[str, float, Any]]] = {
        "ppo": [("eps", e, PPOClip(e)) for e in sorted({*config.eps, REFERENCE[1]})],
        "clip-higher": [("eps_high", e, ClipHigher(0.2, e)) for e in config.eps_high],
        "dcpo": [("scale", k, DCPO(0.16 * k, 0.2 * k)) for k in config.dcpo_scale],
    }
    for rule in BANDS:
        divergence = rule.removeprefix("band-")
        deltas = sorted({*config.deltas, _matched_delta(divergence)})
        out[rule] = [("delta", d, Band(d, divergence, 10.0, validate=False)) for d in deltas]
    return out


def _rule_at(rule: str, value: float) -> Any:
    if rule == "ppo":
        return PPOClip(value)
    if rule == "clip-higher":
        return ClipHigher(0.2, value)
    if rule == "dcpo":
        return DCPO(0.16 * value, 0.2 * value)
    return Band(value, rule.removeprefix("band-"), 10.0, validate=False)


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


def run(config: FrontierConfig, seed: int = 0, progress: bool = True,
        jobs: int | Jobs = 1) -> list[dict]:
    """Every rule at every grid value, under each optimiser, then each rule at
    its matched step size; one row per (run, seed). ``kind`` is "grid" or
    "matched". ``jobs`` processes; the rows do not depend on it."""
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
            tasks = [(rule, table[rule][0][0], matched, _rule_at(rule, matched), bandit,
                      optimizer, seed)
                     for rule, matched in matched_values(grid_rows).items() if matched is not None]
            rows += [dict(r, kind="matched")
                     for rows_ in run_tasks(_task, tasks, jobs, done) for r in rows_]
    return rows


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
    means: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        means.setdefault(r["rule"], {}).setdefault(r["value"], []).append(r["step_kl"])
    target = float(np.mean(means[REFERENCE[0]][REFERENCE[1]]))
    out: dict[str, float | None] = {}
    for rule, by_value in means.items():
        if rule == REFERENCE[0]:
            continue
        values = np.array(sorted(by_value))
        kl = np.array([np.mean(by_value[v]) for v in values])
        out[rule] = _interpolate_log(values, kl, target)
    return out


def _interpolate_log(values: np.ndarray, kl: np.ndarray, target: float) -> float | None:
    """The value where the piecewise log-log line through (value, kl) meets
    ``target``, on the first segment that brackets it."""
    for k in range(values.size - 1):
        lo, hi = kl[k], kl[k + 1]
        if min(lo, hi) <= target <= max(lo, hi) and lo > 0 and hi > 0 and lo != hi:
            t = (math.log(target) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return float(math.exp(math.log(values[k]) + t * math.log(values[k + 1] / values[k])))
    return None


def _curve(summary, optimizer: str, rule: str, metric: str):
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
        for point in _curve(summary, optimizer, band, metric):
            for clip in CLIPS:
                curve = _curve(summary, optimizer, clip, metric)
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


def write_csv(path: str, rows: list[dict]) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fields = ["optimizer", "kind", "rule", "param", "value", "seed", *METRICS]
    with atomic_write(path, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: r[k] for k in fields} for r in rows)
    return path


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as fh:
        return [dict(r, value=float(r["value"]), seed=int(r["seed"]),
                     **{m: float(r[m]) for m in METRICS}) for r in csv.DictReader(fh)]


def figure(summary, optimizers: tuple[str, ...]):
    fig, axes = plt.subplots(len(optimizers), 2, figsize=(12, 4.6 * len(optimizers)),
                             squeeze=False)
    for row, optimizer in enumerate(optimizers):
        for col, (metric, label) in enumerate((("entropy", "late entropy (nats)"),
                                               ("tail_mass", "late mass on rewarding tail"))):
            ax = axes[row, col]
            for rule in (*CLIPS, *BANDS):
                curve = _curve(summary, optimizer, rule, metric)
                if curve.size == 0:
                    continue
                style = {k: v for k, v in STYLES[rule].items() if k != "zorder"}
                ax.errorbar(curve[:, 0], curve[:, 2], xerr=curve[:, 1], yerr=curve[:, 3],
                            marker="o", ms=4, capsize=2, lw=1.5, **style)
                ref = summary.get((optimizer, "grid", *REFERENCE))
                if rule == REFERENCE[0] and ref is not None:
                    ax.plot(ref["reward"][0], ref[metric][0], marker="*", ms=14, color="0.2",
                            ls="none", label="PPO eps = 0.2")
            v = verdict(summary, optimizer, metric)
            ax.set_yscale("log")
            ax.set_xlabel("expected reward per sample, mean over training")
            ax.set_ylabel(label)
            ax.set_title(f"{optimizer.upper()}: the band frontier {v['verdict']}\n"
                         f"({v['higher']} higher, {v['lower']} lower of {v['comparisons']})",
                         fontsize=10)
            ax.grid(True, alpha=0.3, which="both")
    axes[0, 0].legend(fontsize=8, loc="best")
    fig.suptitle("Reward-entropy frontier: each rule over its own hyperparameter "
                 "(reward over training, late entropy and tail mass; 95% CI over seeds)",
                 fontsize=12)
    fig.tight_layout()
    return fig


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


def study(config: FrontierConfig, out: str = "figures", name: str = "dynamics_frontier",
          seed: int = 0, progress: bool = True, jobs: int | Jobs = 1) -> dict[str, Any]:
    """Run, write ``name``.csv and the figure (PNG, PDF); return the summary,
    the verdicts per optimiser and metric, the matched tables and the paths."""
    rows = run(config, seed, progress, jobs)
    paths = [write_csv(os.path.join(out, f"{name}.csv"), rows)]
    summary = summarize(rows)
    optimizers = tuple(o for o, _ in config.optimizers if any(r["optimizer"] == o
                                                               for r in rows))
    paths += save_figure(figure(summary, optimizers), out, name)
    verdicts = {(o, m): verdict(summary, o, m) for o in optimizers
                for m in ("entropy", "tail_mass")}
    return dict(summary=summary, verdicts=verdicts,
                matched={o: matched_table(summary, o) for o in optimizers},
                unmatched={o: unmatched(rows, o) for o in optimizers}, paths=paths, rows=rows)


def unmatched(rows: list[dict], optimizer: str) -> dict[str, tuple[float, float, float]]:
    """Rules whose grid does not bracket PPO's per-step KL under ``optimizer``:
    rule -> (lowest, highest grid KL, PPO's)."""
    grid = [r for r in rows if r["optimizer"] == optimizer and r["kind"] == "grid"]
    if not any(r["rule"] == REFERENCE[0] and r["value"] == REFERENCE[1] for r in grid):
        return {}
    target = float(np.mean([r["step_kl"] for r in grid
                            if r["rule"] == REFERENCE[0] and r["value"] == REFERENCE[1]]))
    out = {}
    for rule, value in matched_values(grid).items():
        if value is None:
            kl = [float(np.mean([r["step_kl"] for r in grid
                                 if r["rule"] == rule and r["value"] == v]))
                  for v in {r["value"] for r in grid if r["rule"] == rule}]
            out[rule] = (min(kl), max(kl), target)
    return out
