"""The bandit study: every rule of ``RULES`` on the tail-token bandit
(:mod:`.task`), all seeds of a rule in one run; :func:`run` returns a
:class:`Result` and writes nothing."""

from __future__ import annotations

import dataclasses

from ..._progress import Progress
from ..jobs import Jobs, one_thread, run_tasks
from ..rules import RULES
from ..tables import history_rows
from .task import METRICS, BanditConfig, run_bandit

__all__ = ["NAME", "Result", "full_config", "run", "run_rules", "smoke_config"]

#: the name of the study's CSV and figure
NAME = "dynamics_bandit"


def smoke_config() -> BanditConfig:
    """``bandsolve repro``'s quick run: 16 contexts, 80 steps, 5 seeds."""
    return BanditConfig(contexts=16, steps=80, seeds=5)


def full_config() -> BanditConfig:
    """``--full``: 64 contexts, 600 steps, 10 seeds."""
    return BanditConfig(steps=600, seeds=10)


@dataclasses.dataclass(frozen=True)
class Result:
    """Each rule's run: ``histories[rule][metric]`` is an array (steps, seeds)
    of :data:`~.task.METRICS`; ``interrupted`` if a run was stopped (Ctrl-C)
    and holds fewer steps."""

    config: BanditConfig
    histories: dict
    interrupted: bool = False

    def table(self) -> tuple[list[str], list[list]]:
        """The CSV: one row per (rule, seed, step) with every metric."""
        rows = [row for rule, history in self.histories.items()
                for row in history_rows((rule,), history, METRICS)]
        return ["rule", "seed", "step", *METRICS], rows


def _task(task):
    """One rule's run (all seeds): a module-level function for the process pool."""
    rule, config, seed = task
    with one_thread():
        return run_bandit(rule, config, seed)


def run_rules(config: BanditConfig, rules, jobs: int | Jobs, desc: str, seed: int = 0) -> Result:
    """Every rule of ``rules`` (names of ``RULES`` or ``CONTROLS``) in
    ``jobs`` processes, with a progress bar named ``desc``."""
    with Progress(total=len(rules), desc=desc, unit="rule") as bar:
        def done(task, _):
            bar.set_postfix_str(f"{task[0]} done")
            bar.update(1)

        # a run stopped by Ctrl-C returns its partial history: never kept for resuming
        runs = run_tasks(_task, [(rule, config, seed) for rule in rules], jobs, done,
                         complete=lambda run: not run[1])
    return Result(config, {rule: history for rule, (history, _) in zip(rules, runs)},
                  any(stopped for _, stopped in runs))


def run(config: BanditConfig, jobs: int | Jobs = 1, rules=tuple(RULES), seed: int = 0) -> Result:
    """Every rule of ``rules`` on the bandit; the results do not depend on ``jobs``."""
    return run_rules(config, rules, jobs, NAME, seed)
