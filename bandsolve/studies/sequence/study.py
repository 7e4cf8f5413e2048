"""The sequence study: every rule of the configuration over its grid, each
seed's supervised fit shared by every rule; :func:`run` returns a
:class:`Result` (every run, and each rule at the value chosen on the
validation prompts) and writes nothing."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from ..._progress import Progress
from ..jobs import Jobs, one_thread, run_tasks
from ..rules import STYLES, make_rule, rule_object
from ..tables import history_rows
from .task import METRICS, SequenceConfig, grpo, supervised_fit

__all__ = ["NAME", "Result", "full_config", "run", "select", "smoke_config", "variants"]

#: the name of the study's CSV and figure
NAME = "dynamics_sequence"


def smoke_config() -> SequenceConfig:
    """``bandsolve repro``'s quick run: PPO, Clip-Higher, Band-KL, no clip and
    the constant [0.8, 10] clip at one setting each, 4 seeds, 40 steps."""
    return SequenceConfig(steps=40, seeds=4,
                          rules=("no-clip", "ppo", "clip-higher", "band-kl", "constant"))


def full_config() -> SequenceConfig:
    """``--full``: the rules of the Holm family (Band-KL against PPO and
    Clip-Higher, each over its grid) and no clip, 8 seeds, 200 steps."""
    return SequenceConfig(steps=200, seeds=8, eval_every=10, ppo_eps=(0.1, 0.2, 0.3),
                          eps_high=(0.28, 0.4), deltas=(0.02, 0.05, 0.1),
                          rules=("no-clip", "ppo", "clip-higher", "band-kl"))


def variants(config: SequenceConfig) -> list[tuple[str, str, float, Any]]:
    """(rule, hyperparameter, value, rule object) for every run of a seed: the
    grids of PPO, Clip-Higher and the bands, and the controls at their one
    setting, in this order (the CSV's). No two runs share a rule object (Clip-Higher's eps_high must
    exceed PPO's 0.2)."""
    if any(e <= 0.2 for e in config.eps_high):
        raise ValueError(f"eps_high must exceed 0.2, or Clip-Higher is PPO (got {config.eps_high})")
    grids = (("ppo", "eps", config.ppo_eps), ("clip-higher", "eps_high", config.eps_high),
             ("band-kl", "delta", config.deltas))
    out = [(rule, name, value, make_rule(rule, value)) for rule, name, values in grids
           for value in values]
    out += [(name, "", math.nan, rule_object(name)) for name in ("no-clip", "constant")]
    return [v for v in out if v[0] in config.rules]


def _run_task(task) -> dict[str, np.ndarray]:
    """One (variant, seed) run: a module-level function for the process pool."""
    config, rule, seed, _ = task
    with one_thread():
        torch.manual_seed(seed)
        history = grpo(supervised_fit(config, seed), rule, config, seed)
    return {m: np.asarray(v, dtype=float) for m, v in history.items()}


@dataclasses.dataclass(frozen=True)
class Result:
    """``runs[(rule, value)][metric]``: an array (evaluations, seeds) of
    :data:`~.task.METRICS` for every variant; ``selected[rule]``: (the value
    chosen on the validation prompts, its history)."""

    config: SequenceConfig
    runs: dict
    selected: dict

    def table(self) -> tuple[list[str], list[list]]:
        """The CSV: one row per (rule, value, seed, evaluation) with every metric."""
        rows = [row for (rule, value), history in self.runs.items()
                for row in history_rows((rule, f"{value:g}"), history, METRICS, first=0)]
        return ["rule", "value", "seed", "evaluation", *METRICS], rows


def run(config: SequenceConfig, jobs: int | Jobs = 1, on_done=None) -> Result:
    """Every variant of :func:`variants` at every seed, and each rule's choice
    on the validation prompts. Deterministic under the seeds, whatever
    ``jobs``. ``on_done(label, seed, history)`` is called as each run
    finishes."""
    each = variants(config)
    tasks = [(config, obj, seed, f"{rule} {value:g}".removesuffix(" nan"))
             for seed in range(config.seeds) for rule, _, value, obj in each]
    labels = [(rule, value) for _ in range(config.seeds) for rule, _, value, _ in each]
    with Progress(total=len(tasks), desc=NAME, unit="run") as bar:
        def done(task, history):
            bar.set_postfix_str(f"seed {task[2]}: {task[3]} done")
            bar.update(1)
            if on_done is not None:
                on_done(task[3], task[2], history)

        histories = run_tasks(_run_task, tasks, jobs, done)
    results: dict[tuple, list[dict[str, np.ndarray]]] = {}
    for label, history in zip(labels, histories):
        results.setdefault(label, []).append(history)
    runs = {label: {m: np.stack([h[m] for h in per_seed], 1) for m in METRICS}
            for label, per_seed in results.items()}
    return Result(config, runs, select(runs))


def select(results, split: str = "validation") -> dict[str, tuple[float, dict]]:
    """Per rule, the grid value whose final success on ``split`` is highest
    (mean over seeds; the smaller value on a tie): rule -> (value, history)."""
    out: dict[str, tuple[float, dict, float]] = {}
    for (rule, value), history in results.items():
        score = float(np.mean(history[f"{split}/success"][-1]))
        best = out.get(rule)
        if best is None or score > best[2] or (score == best[2] and value < best[0]):
            out[rule] = (value, history, score)
    order = list(STYLES)  # the legend's order
    return {rule: out[rule][:2] for rule in sorted(out, key=order.index)}
