"""The band under Adam and 4 epochs x 4 mini-batches per rollout batch, on
the tabular autoregressive task of :mod:`.task`
(issue 30). Everything that decides the verdict is fixed here, in code,
before the run:

* **Settings.** Adam at the learning rates ``adam_lrs`` (primary
  ``primary_lr``; the highest is the stability setting) and SGD at ``sgd_lr``
  as a secondary setting.
* **Rules.** no clip, PPO 0.2, Clip-Higher 0.2/0.28, DCPO, Band-KL (the
  primary band) and Band-TV. Each band runs at its *matched-step* delta,
  chosen per setting on ``pilot_seeds`` pilot seeds (their own random stream,
  never reused) so that its mean per-step KL(old || new) matches PPO 0.2's;
  and at the fixed ``fixed_delta`` (reported, not tested).
* **Seeds.** ``seeds`` paired seeds: every rule sees each seed's task and
  random stream.
* **One Holm family** (:data:`FAMILY`), each a paired difference over seeds
  oriented so that positive favours the band, with a 95% t interval and d_z:
  final tail mass at the primary learning rate, Band-KL against PPO and
  against Clip-Higher; at the highest learning rate, log largest per-step KL
  and final reward, Band-KL against no clip; first-token entropy averaged
  over training at the primary learning rate, Band-KL against PPO. "Final" is
  the mean over the last ``window`` steps.
* **The verdict** (:func:`verdict`): "reproduces" if every test of the family
  favours the band at Holm p < 0.05; "contradicted" if the band is no better
  than PPO on tail mass (its mean paired difference is <= 0), or its entropy
  is significantly below PPO's (Holm p < 0.05), or no clip matches it at every
  Adam learning rate (neither Band-KL's final tail mass nor its final reward
  is above no clip's at unadjusted paired p < 0.05); otherwise "not
  reproduced at this scale", with what did and did not hold.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..._progress import Progress
from ..jobs import Jobs, one_thread, run_tasks
from ..rules import RULES, band
from ..stats import holm, paired_difference
from ..tables import history_rows
from .task import METRICS, TaskConfig, train_rules

#: the name of the study's CSV and figure
NAME = "dynamics_ar"
BASE_RULES = ("no-clip", "ppo", "clip-higher", "dcpo", "band-kl", "band-tv")
#: the fewest paired seeds whose verdict the report states as the study's
MIN_SEEDS = 16
BANDS = {"band-kl": "kl", "band-tv": "tv"}


@dataclasses.dataclass(frozen=True)
class ARStudyConfig:
    task: TaskConfig = TaskConfig()
    adam_lrs: tuple = (0.03, 0.1, 0.3)
    primary_lr: float = 0.1
    sgd_lr: float | None = 2.0
    seeds: int = 16
    pilot_seeds: int = 4
    pilot_deltas: tuple = (0.005, 0.01, 0.02, 0.05, 0.1)
    fixed_delta: float = 0.05
    #: settings that also run the bands at ``fixed_delta``
    fixed_at: tuple = (("adam", 0.1), ("sgd", 2.0))
    window: int = 10

    def __post_init__(self):
        if self.primary_lr not in self.adam_lrs:
            raise ValueError(f"primary_lr {self.primary_lr} must be one of adam_lrs "
                             f"{self.adam_lrs}")
        if self.seeds < 2 or self.window > self.task.steps:
            raise ValueError(f"need >= 2 seeds and window <= steps (got {self.seeds}, "
                             f"{self.window} > {self.task.steps})")

    @property
    def settings(self) -> tuple:
        adam = tuple(("adam", lr) for lr in self.adam_lrs)
        return adam + ((("sgd", self.sgd_lr),) if self.sgd_lr is not None else ())

    @property
    def highest(self) -> tuple:
        return ("adam", max(self.adam_lrs))

    @property
    def primary(self) -> tuple:
        return ("adam", self.primary_lr)


def full_config() -> ARStudyConfig:
    """The study as pre-registered: 16 seeds, 120 steps, 32 contexts x 16 samples."""
    return ARStudyConfig()


def smoke_config() -> ARStudyConfig:
    """A smoke run of the same code (about 30 s on one core): too small to decide anything."""
    return ARStudyConfig(task=TaskConfig(contexts=8, steps=25), adam_lrs=(0.1, 0.3),
                         sgd_lr=None, seeds=3, pilot_seeds=2, pilot_deltas=(0.01, 0.05),
                         fixed_at=(), window=5)


@dataclasses.dataclass(frozen=True)
class Run:
    """One rule's training at one setting over ``seeds`` seeds of ``stream``
    (0: the study's seeds; 1: the pilot's). Its repr names it for resuming."""

    rule: str
    delta: float
    optimizer: str
    lr: float
    task: TaskConfig
    seeds: int
    stream: int


def make_rule(name: str, delta: float):
    """The rule object of ``name`` (a band at ``delta``), from :mod:`..rules`."""
    return band(BANDS[name], delta) if name in BANDS else RULES[name][0]


def _train(runs: tuple):
    """The runs of ``runs`` (one setting, seed count and stream), trained at
    once by ``train_rules``: one history each, as each would train alone."""
    first = runs[0]
    if any((r.optimizer, r.lr, r.task, r.seeds, r.stream)
           != (first.optimizer, first.lr, first.task, first.seeds, first.stream) for r in runs):
        raise ValueError("runs trained together must share the setting, seeds and stream")
    with one_thread():
        return train_rules([make_rule(r.rule, r.delta) for r in runs], first.task,
                           range(first.seeds), first.optimizer, first.lr, stream=first.stream)


def _run_all(groups, jobs, desc):
    """Each group of runs (a tuple of :class:`Run`) trained at once; the
    histories of every run, in order."""
    groups = [tuple(g) for g in groups]
    with Progress(total=sum(map(len, groups)), desc=desc, unit="run") as bar:
        def done(group, _):
            run = group[-1]
            bar.set_postfix_str(f"{run.optimizer} lr {run.lr:g} {run.rule} {run.delta:.3g}")
            bar.update(len(group))

        return [h for histories in run_tasks(_train, groups, jobs, done) for h in histories]


def match_delta(deltas, step_kls, target) -> tuple[float, bool]:
    """The delta whose mean per-step KL is ``target``, interpolated in log-log
    between the pilot grid's points; (delta, inside the grid). Outside the
    grid's range, the nearest end (and False)."""
    d, k = np.log(np.asarray(deltas, float)), np.log(np.asarray(step_kls, float))
    order = np.argsort(d)
    d, k = d[order], k[order]
    t = math.log(target)
    if np.all(np.diff(k) > 0) and k[0] <= t <= k[-1]:
        return float(np.exp(np.interp(t, k, d))), True
    nearest = int(np.argmin(np.abs(k - t)))
    return float(np.exp(d[nearest])), False


def pilot(config: ARStudyConfig, jobs: int | Jobs = 1):
    """Per setting: {band: (matched delta, inside the grid)} and the pilot's
    mean per-step KLs {(setting, rule, delta): value}."""
    groups = []  # one per setting: its few pilot seeds gain from training together
    for optimizer, lr in config.settings:
        groups.append([Run("ppo", 0.0, optimizer, lr, config.task, config.pilot_seeds, 1)]
                      + [Run(b, d, optimizer, lr, config.task, config.pilot_seeds, 1)
                         for b in BANDS for d in config.pilot_deltas])
    runs = [r for g in groups for r in g]
    histories = _run_all(groups, jobs, "ar pilot")
    kls = {((r.optimizer, r.lr), r.rule, r.delta): float(np.mean(h["step_kl"]))
           for r, h in zip(runs, histories)}
    matched = {}
    for setting in config.settings:
        target = kls[(setting, "ppo", 0.0)]
        matched[setting] = {b: match_delta(config.pilot_deltas,
                                           [kls[(setting, b, d)] for d in config.pilot_deltas],
                                           target) for b in BANDS}
    return matched, kls


def label(rule: str, delta: float, fixed: float) -> str:
    return f"{rule}@{fixed:g}" if rule in BANDS and delta == fixed else rule


def study_runs(config: ARStudyConfig, matched) -> dict:
    """{(setting, label): Run} of the study proper, given the pilot's deltas."""
    runs = {}
    for setting in config.settings:
        optimizer, lr = setting
        for rule in BASE_RULES:
            delta = matched[setting][rule][0] if rule in BANDS else 0.0
            runs[(setting, rule)] = Run(rule, delta, optimizer, lr, config.task, config.seeds, 0)
        if setting in config.fixed_at:
            for rule in BANDS:
                runs[(setting, label(rule, config.fixed_delta, config.fixed_delta))] = Run(
                    rule, config.fixed_delta, optimizer, lr, config.task, config.seeds, 0)
    return runs


def final(history, metric, window) -> np.ndarray:
    """Per seed: ``metric`` averaged over the last ``window`` steps."""
    return history[metric][-window:].mean(0)


#: the family's names, in order
FAMILY = ("tail mass, Band-KL - PPO", "tail mass, Band-KL - Clip-Higher",
          "log largest step KL, no clip - Band-KL", "final reward, Band-KL - no clip",
          "entropy over training, Band-KL - PPO")


def family(results, config: ARStudyConfig) -> dict:
    """The pre-registered tests, each oriented so that positive favours the band."""
    w = config.window
    prim, high = config.primary, config.highest

    def get(setting, rule):
        return results[(setting, rule)]

    return dict(zip(FAMILY, (
        paired_difference(final(get(prim, "band-kl"), "tail_mass", w),
                          final(get(prim, "ppo"), "tail_mass", w)),
        paired_difference(final(get(prim, "band-kl"), "tail_mass", w),
                          final(get(prim, "clip-higher"), "tail_mass", w)),
        paired_difference(np.log(get(high, "no-clip")["step_kl"].max(0)),
                          np.log(get(high, "band-kl")["step_kl"].max(0))),
        paired_difference(final(get(high, "band-kl"), "reward", w),
                          final(get(high, "no-clip"), "reward", w)),
        paired_difference(get(prim, "band-kl")["entropy"].mean(0),
                          get(prim, "ppo")["entropy"].mean(0)),
    )))


def no_clip_matches(results, config: ARStudyConfig, alpha=0.05) -> dict:
    """Per Adam learning rate: whether no clip matches Band-KL (neither its
    final tail mass nor its final reward is above no clip's at unadjusted
    paired p < alpha)."""
    out = {}
    for lr in config.adam_lrs:
        setting = ("adam", lr)
        better = False
        for metric in ("tail_mass", "reward"):
            d = paired_difference(final(results[(setting, "band-kl")], metric, config.window),
                                  final(results[(setting, "no-clip")], metric, config.window))
            better |= d["mean"] > 0 and d["p"] < alpha
        out[lr] = not better
    return out


def verdict(tests: dict, adjusted: dict, matches: dict, alpha=0.05):
    """The pre-registered verdict: (verdict, [what held], [what did not])."""
    held = [n for n in FAMILY if tests[n]["mean"] > 0 and adjusted[n] < alpha]
    not_held = [n for n in FAMILY if n not in held]
    reasons = []
    if tests[FAMILY[0]]["mean"] <= 0:
        reasons.append("the band is no better than PPO on tail mass")
    entropy = FAMILY[4]
    if tests[entropy]["mean"] < 0 and adjusted[entropy] < alpha:
        reasons.append("its entropy is significantly below PPO's")
    if matches and all(matches.values()):
        reasons.append("no clip matches it at every Adam learning rate")
    if reasons:
        return "contradicted", held, reasons
    if not not_held:
        return "reproduces", held, []
    return "not reproduced at this scale", held, not_held


@dataclasses.dataclass(frozen=True)
class Result:
    """The study: its configuration, the pilot's matched deltas and mean
    per-step KLs, every run and its history, the family's tests, their Holm
    p-values, whether no clip matches the band, and the verdict."""

    config: ARStudyConfig
    matched: dict
    pilot: dict
    runs: dict
    results: dict
    tests: dict
    adjusted: dict
    no_clip_matches: dict
    verdict: tuple

    def table(self) -> tuple[list[str], list[list]]:
        """The CSV: one row per (optimizer, lr, rule, delta, seed, step) with every metric."""
        rows = [row for ((optimizer, lr), name), run in self.runs.items()
                for row in history_rows((optimizer, lr, name, f"{run.delta:.6g}"),
                                        self.results[((optimizer, lr), name)], METRICS)]
        return ["optimizer", "lr", "rule", "delta", "seed", "step", *METRICS], rows


def run(config: ARStudyConfig, jobs: int | Jobs = 1) -> Result:
    """Pilot, study and the family's verdict; writes nothing."""
    matched, pilot_kls = pilot(config, jobs)
    runs = study_runs(config, matched)
    # one task per run: at 16 seeds, training rules together gains nothing
    histories = _run_all([(r,) for r in runs.values()], jobs, "ar study")
    results = dict(zip(runs, histories))
    tests = family(results, config)
    adjusted = dict(zip(FAMILY, holm([tests[n]["p"] for n in FAMILY])))
    matches = no_clip_matches(results, config)
    return Result(config, matched, pilot_kls, runs, results, tests, adjusted, matches,
                  verdict(tests, adjusted, matches))
