"""One setting of the autoregressive study (the transformer, or the tabular
policy): every rule tuned on pilot seeds, then compared on paired study
seeds by the rules of :mod:`.endpoints` (issue 40).

:func:`run` trains, in :class:`~bandsolve.studies.jobs.Jobs`' processes and
with its resumable kept results, and returns a frozen :class:`SettingResult`;
it writes nothing. Its phases:

1. the supervised stage (the transformer only): one model per seed, fitted
   to Zipf targets (:func:`.transformer.pretrain`), in chunks of seeds;
2. the pilot: at each learning rate, every rule over its knob's grid on
   ``pilot_seeds`` seeds of stream ``stream + 1``, grown where an optimum sits
   on an edge (:mod:`.tuning`), for at most ``pilot_rounds`` rounds;
3. the study: at each learning rate every rule at its tuned knob, and at the
   primary rate PPO 0.2 and every other clipped rule at its matched-step
   knob (where the pilot brackets it; a rule it does not is reported with
   the reason, and its matched comparison is not run), on ``seeds`` paired
   seeds of stream ``stream``.

Every replica of a task trains in one batched model (:mod:`.grpo`); a task
is one learning rate, one chunk of seeds and its rules, and its result does
not depend on what else runs (each seed's draws come from the seed alone).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from ..._progress import Progress
from ..jobs import Jobs, one_thread, run_tasks
from ..rules import make_rule
from ..stats import paired_difference
from . import endpoints, tuning
from .task import TaskConfig, read_task, seed_rng
from .transformer import ModelConfig

LEARNING_RATES = ("primary", "high")


@dataclasses.dataclass(frozen=True)
class SettingConfig:
    """One setting of the study: the task, the policy (a transformer, or the
    tabular policy where ``model`` is None), the two Adam learning rates (the
    primary one, where no clip is stable, and a higher one, where it is
    not), the knobs, the seeds and the window of "final"."""

    task: TaskConfig
    model: ModelConfig | None
    primary_lr: float
    high_lr: float
    knobs: tuple
    seeds: int = 16
    pilot_seeds: int = 4
    #: the study's seeds; the pilot's are stream + 1
    stream: int = 20
    window: int = 30
    #: seeds per task
    chunk: int = 4
    pilot_rounds: int = 3
    #: the torch device the tasks train on
    device: str = "cpu"

    def __post_init__(self):
        if tuple(k.rule for k in self.knobs) != tuning.RULES:
            raise ValueError(f"need one knob per rule, in the order {tuning.RULES} (got "
                             f"{tuple(k.rule for k in self.knobs)})")
        if not 0 < self.primary_lr < self.high_lr:
            raise ValueError(f"need 0 < primary_lr < high_lr (got {self.primary_lr}, "
                             f"{self.high_lr})")
        if self.seeds < 2 or self.pilot_seeds < 1 or not 1 <= self.window <= self.task.steps:
            raise ValueError(f"need >= 2 seeds, >= 1 pilot seed and 1 <= window <= steps (got "
                             f"{self.seeds}, {self.pilot_seeds}, {self.window})")
        ppo = self.knob("ppo")
        if tuning.TARGET[1] not in ppo.grid:
            raise ValueError(f"PPO's grid must hold the matched step's target eps "
                             f"{tuning.TARGET[1]} (got {ppo.grid})")

    def lr(self, which: str) -> float:
        return {"primary": self.primary_lr, "high": self.high_lr}[which]

    def knob(self, rule: str) -> tuning.Knob:
        return self.knobs[tuning.RULES.index(rule)]

    @property
    def kind(self) -> str:
        return "tabular" if self.model is None else "transformer"


@dataclasses.dataclass(frozen=True)
class Pretrain:
    """The supervised stage of ``seeds`` of ``stream`` (its repr names it for resuming)."""

    task: TaskConfig
    model: ModelConfig
    stream: int
    seeds: tuple
    device: str = "cpu"


@dataclasses.dataclass(frozen=True)
class Train:
    """One task: ``rules`` ((rule, knob) pairs) on ``seeds`` of ``stream`` at
    ``lr``, all in one batched model. ``start`` (the supervised stage's
    weights, for the transformer) travels with it but is not in its name:
    the name's other fields determine it."""

    task: TaskConfig
    model: ModelConfig | None
    lr: float
    stream: int
    seeds: tuple
    rules: tuple
    device: str = "cpu"
    start: Any = dataclasses.field(default=None, repr=False, compare=False)


def _pretrain(job: Pretrain):
    from .transformer import pretrain

    began = time.process_time()
    with one_thread():
        net, fit = pretrain(job.task, job.model, job.stream, job.seeds, device=job.device)
    start = ({k: v.cpu() for k, v in net.weights().items()}, net.prompt_tokens.cpu())
    return start, fit, time.process_time() - began


def _train(job: Train):
    """{(rule, knob): {metric: (steps, seeds)}} and the task's CPU seconds."""
    import torch

    from . import grpo

    began = time.process_time()
    n, seeds = len(job.rules), len(job.seeds)
    policy: Any
    with one_thread():
        if job.model is None:
            from .tabular import TablePolicy, zipf_logits

            prior = np.stack([zipf_logits(job.task, seed_rng(job.stream, s, "start"),
                                          (job.task.contexts, job.task.states))
                              for s in job.seeds])
            start = torch.log_softmax(torch.tensor(prior, device=job.device), -1)
            policy = TablePolicy(np.concatenate([prior] * n)).to(job.device)
        else:
            from .transformer import ReplicaTransformer

            weights, prompts = job.start
            base = ReplicaTransformer(weights, prompts, job.model).to(job.device)
            with torch.no_grad():
                start = base.table()
            policy = base.tile(n)
        task = read_task(start, job.task).tile(n)
        rngs = [seed_rng(job.stream, s, "grpo") for s in job.seeds]
        rules = [make_rule(rule, knob) for rule, knob in job.rules]
        history = grpo.train(policy, task, rules, seeds, rngs, job.task, job.lr)
    out = {pair: {k: v[:, i * seeds:(i + 1) * seeds] for k, v in history.items()}
           for i, pair in enumerate(job.rules)}
    return out, time.process_time() - began


def _chunks(seeds: int, size: int) -> list[tuple]:
    return [tuple(range(i, min(i + size, seeds))) for i in range(0, seeds, size)]


def _run(function, tasks, jobs, desc):
    """``run_tasks`` with a progress bar and a line per finished task."""
    with Progress(total=len(tasks), desc=desc, unit="task") as bar:
        def done(task, _):
            bar.set_postfix_str(f"{getattr(task, 'lr', '')} {task.seeds[0]}-{task.seeds[-1]} "
                                f"{len(getattr(task, 'rules', ()))} rules")
            bar.update(1)

        return run_tasks(function, tasks, jobs, done)


def _pilot_row(history: dict, window: int, steps: int) -> dict:
    """A pilot run's summary, each a mean over its pilot seeds."""
    late = history["step_kl"][steps // 2:].mean(0)
    return dict(reward=float(history["reward"][-window:].mean()),
                reward_sd=float(history["reward"][-window:].mean(0).std(ddof=1))
                if history["reward"].shape[1] > 1 else 0.0,
                tail_mass=float(history["tail_mass"][-window:].mean()),
                entropy=float(history["entropy"][-window:].mean()),
                step_kl_late=float(late.mean()),
                largest_step_kl=float(history["step_kl"].max(0).mean()),
                clipfrac=float(np.nanmean(history["clipfrac"])))


@dataclasses.dataclass(frozen=True)
class SettingResult:
    """What :func:`run` found.

    ``pilot``: {(learning rate, rule, knob): summary} (:func:`_pilot_row`);
    ``tuned``: {(learning rate, rule): knob}; ``matched``: {rule: knob} at
    the primary rate, and ``unmatched``: {rule: why} where the pilot cannot
    match it (that comparison is not run); ``runs``: {(learning rate, label): {metric: (steps,
    seeds)}} of the study seeds, a label being a rule (at its tuned knob),
    ``rule@matched`` or ``ppo@0.2``; ``knob_of``: each run's knob; ``fit``:
    the supervised stage's summary per phase (empty for the tabular policy);
    ``tests``, ``adjusted``, ``verdict``, ``rows``: the family, its Holm
    p-values and the verdicts (:mod:`.endpoints`); ``mechanism``: where the
    band's difference comes from; ``matched_tests``: the matched-step
    comparisons (descriptive, unadjusted); ``cpu_seconds``: the CPU time of
    every task (as first computed, where a task's result was kept)."""

    config: SettingConfig
    pilot: dict
    tuned: dict
    matched: dict
    unmatched: dict
    runs: dict
    knob_of: dict
    fit: dict
    tests: dict
    adjusted: dict
    verdict: tuple
    rows: dict
    mechanism: dict
    matched_tests: dict
    cpu_seconds: float

    @property
    def decides(self) -> bool:
        """Whether the study has the seeds its verdict needs (else a smoke run)."""
        return self.config.seeds >= endpoints.MIN_SEEDS


#: the matched-step comparisons (descriptive): (metric, how it is read per seed)
MATCHED_METRICS = (("tail_mass", "final"), ("entropy", "final"), ("reward", "final"))


def _supervised(config: SettingConfig, jobs, stream: int, chunks) -> tuple[dict, list, float]:
    """The supervised stage of each chunk of seeds (the transformer only):
    ({(stream, chunk): weights}, [fit summary per chunk], CPU seconds)."""
    if config.model is None:
        return {}, [], 0.0
    tasks = [Pretrain(config.task, config.model, stream, c, config.device) for c in chunks]
    starts, fits, cpu = {}, [], 0.0
    for c, (start, fit, seconds) in zip(chunks, _run(
            _pretrain, tasks, jobs, f"ar {config.kind} supervised stage")):
        starts[(stream, c)] = start
        fits.append(fit)
        cpu += seconds
    return starts, fits, cpu


def _tasks(config: SettingConfig, starts: dict, lr: float, stream: int, chunks, rules) -> list:
    return [Train(config.task, config.model, lr, stream, c, tuple(rules), config.device,
                  starts.get((stream, c))) for c in chunks]


@dataclasses.dataclass(frozen=True)
class Tuning:
    """What the pilot chose (:func:`tune`): ``pilot`` {(learning rate, rule,
    knob): summary}, ``tuned`` {(learning rate, rule): knob}, ``matched``
    {rule: knob} and ``unmatched`` {rule: why} at the primary rate, the
    supervised fit of the pilot seeds and the CPU seconds."""

    pilot: dict
    tuned: dict
    matched: dict
    unmatched: dict
    fit: list
    cpu_seconds: float


def tune(config: SettingConfig, jobs: int | Jobs = 1) -> Tuning:
    """The pilot on the pilot seeds (stream ``stream + 1``): every rule over
    its grid at both learning rates, grown where an optimum is on an edge,
    then the tuned and matched-step knobs (:mod:`.tuning`)."""
    pilot_seeds = tuple(range(config.pilot_seeds))
    stream = config.stream + 1
    starts, fit, cpu = _supervised(config, jobs, stream, [pilot_seeds])
    grids = {(w, k.rule): sorted(k.grid) for w in LEARNING_RATES for k in config.knobs}
    pilot: dict[tuple, dict] = {}
    todo = {key: list(grid) for key, grid in grids.items()}
    for round_ in range(config.pilot_rounds):
        keys = list(todo)
        tasks = [t for (w, rule) in keys for t in _tasks(
            config, starts, config.lr(w), stream, [pilot_seeds], [(rule, v) for v in todo[(w, rule)]])]
        for (w, _), (histories, seconds) in zip(keys, _run(
                _train, tasks, jobs, f"ar {config.kind} pilot round {round_ + 1}")):
            for (rule, knob), h in histories.items():
                pilot[(w, rule, knob)] = _pilot_row(h, config.window, config.task.steps)
            cpu += seconds
        todo = {}
        for (w, rule), grid in grids.items():
            value = tuning.extension(config.knob(rule), grid,
                                     [pilot[(w, rule, g)]["reward"] for g in grid])
            if value is None:
                continue
            if round_ + 1 == config.pilot_rounds:
                raise tuning.GridEdgeError(
                    f"{rule} at lr {config.lr(w):g}: the best pilot final reward is still on "
                    f"its grid's edge after {config.pilot_rounds} rounds (grid "
                    f"{', '.join(f'{g:g}' for g in grid)}): widen the grid")
            grid.append(value)
            grid.sort()
            todo[(w, rule)] = [value]
        if not todo:
            break
    tuned = {(w, rule): tuning.best(grid, [pilot[(w, rule, g)]["reward"] for g in grid])
             for (w, rule), grid in grids.items()}
    target = pilot[("primary", tuning.TARGET[0], tuning.TARGET[1])]["step_kl_late"]
    matched, unmatched = {}, {}
    for rule in tuning.RULES:
        if rule in ("no-clip", tuning.TARGET[0]):
            continue
        grid = grids[("primary", rule)]
        try:
            matched[rule] = tuning.matched(config.knob(rule), grid,
                                           [pilot[("primary", rule, g)]["step_kl_late"]
                                            for g in grid], target)
        except tuning.MatchError as exc:  # that rule's matched comparison is not run, and said so
            unmatched[rule] = str(exc)
    return Tuning(pilot, tuned, matched, unmatched, fit, cpu)


def run(config: SettingConfig, jobs: int | Jobs = 1, on_rate_done=None) -> SettingResult:
    """The pilot, the tuning and the study; see the module's docstring.
    ``on_rate_done(which, {label: (knob, history)})``, if given, is called
    as each learning rate's study runs finish (so that a caller may write them)."""
    chosen = tune(config, jobs)
    chunks = _chunks(config.seeds, config.chunk)
    starts, fit, cpu = _supervised(config, jobs, config.stream, chunks)
    cpu += chosen.cpu_seconds
    target_label = f"{tuning.TARGET[0]}@{tuning.TARGET[1]:g}"
    labels: dict[str, dict[str, tuple]] = {w: {rule: (rule, chosen.tuned[(w, rule)])
                                               for rule in tuning.RULES}
                                           for w in LEARNING_RATES}
    labels["primary"][target_label] = tuning.TARGET
    for rule, knob in chosen.matched.items():
        labels["primary"][f"{rule}@matched"] = (rule, knob)
    runs, knob_of = {}, {}
    for w in LEARNING_RATES:
        pairs = list(dict.fromkeys(labels[w].values()))
        tasks = _tasks(config, starts, config.lr(w), config.stream, chunks, pairs)
        pieces: dict[tuple, list] = {}
        for histories, seconds in _run(_train, tasks, jobs,
                                       f"ar {config.kind} study, lr {config.lr(w):g}"):
            for pair, h in histories.items():
                pieces.setdefault(pair, []).append(h)
            cpu += seconds
        for label, pair in labels[w].items():
            runs[(w, label)] = {m: np.concatenate([p[m] for p in pieces[pair]], 1)
                                for m in pieces[pair][0]}
            knob_of[(w, label)] = pair[1]
        if on_rate_done is not None:
            on_rate_done(w, {label: (knob_of[(w, label)], runs[(w, label)])
                             for label in labels[w]})
    tests = endpoints.family(runs, config.window)
    adjusted = endpoints.adjust(tests)
    matched_tests = {
        (rule, metric): paired_difference(
            endpoints.per_seed(runs[("primary", f"{rule}@matched")], metric, how, config.window),
            endpoints.per_seed(runs[("primary", target_label)], metric, how, config.window))
        for rule in chosen.matched for metric, how in MATCHED_METRICS}
    return SettingResult(config=config, pilot=chosen.pilot, tuned=chosen.tuned,
                  matched=chosen.matched, unmatched=chosen.unmatched, runs=runs,
                  knob_of=knob_of, fit={"pilot": chosen.fit, "study": fit} if fit else {},
                  tests=tests, adjusted=adjusted, verdict=endpoints.verdict(tests, adjusted),
                  rows={row: endpoints.verdict(tests, adjusted, names)
                        for row, names in endpoints.ROWS.items()},
                  mechanism=endpoints.mechanism(runs), matched_tests=matched_tests,
                  cpu_seconds=cpu)
