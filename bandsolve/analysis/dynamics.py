"""Entropy-collapse dynamics: does fixed clipping freeze the tail, and does the band not?

    python -m analysis.dynamics [--full] [--part bandit|sequence|both|frontier] [--out figures]

(the command line is ``bandsolve.analysis.studies``)

Both parts train with GRPO (group-normalised advantages) and several
optimisation epochs per rollout batch, so that ratios leave 1 and clipping
acts, and compare the rules of ``RULES``: no clipping, PPO clip, Clip-Higher,
DCPO and Band (kl, tv, chi2) at delta = 0.05. The losses are
``bandsolve.torch``'s (``clipped_surrogate`` with each rule's bounds).

(a) Tail-token bandit (``run_bandit``). Per context, a softmax policy over a
    vocabulary of ``vocab`` tokens, started from Zipf logits -s log(rank).
    One head token (rank 2) pays 1 with probability ``head_pay`` and ten tail
    tokens (ranks 21, 41, ..., 201) with the larger ``tail_pay``: the tail
    holds the high-advantage strategies. Every other token pays 0. Plain SGD
    on the logits. Tracked per step and seed: the entropy of the policy,
    among the rewarding tokens, and of the paying token given success; the
    expected reward; the mass on the paying tail and the share of contexts
    whose tail holds most of the mass; and the clip share by sign of the
    advantage and old-probability bucket.

(b) Sequence task with a wrong head: see ``bandsolve.analysis.sequence``.

(c) The frontier (``--part frontier``): every rule over a grid of its own
    hyperparameter, reward against entropy at equal reward and at matched
    step size; see ``bandsolve.analysis.frontier``.

Each part writes a CSV of every metric (one row per rule, seed and step) and a
figure (PNG and PDF) with the mean and a 95% confidence band over seeds. The
quick default runs in a few minutes on 2 cores; ``--full`` runs more seeds
and steps and, for the bandit, an Adam variant as a robustness check.
Progress lines show the work (one per finished run); ``jobs`` runs the
rules in a process pool, with the same results.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from bandsolve.torch import clipped_surrogate  # noqa: E402
from bandsolve.torch.losses import P_BUCKETS  # noqa: E402

from .._progress import Progress  # noqa: E402
from .common import (  # noqa: E402
    Jobs,
    band_plot,
    clip_share_bars,
    cluster_bootstrap,
    legend_panel,
    nanmean,
    one_thread,
    run_tasks,
    save_figure,
    write_csv,
)
from .rules import DELTA, RULES, STYLES, rule_object  # noqa: E402


@dataclasses.dataclass(frozen=True)
class BanditConfig:
    contexts: int = 64
    vocab: int = 300
    zipf: float = 1.1
    head_good: tuple = (1,)  # 0-based ranks of rewarding head tokens
    tail_good: tuple = tuple(range(20, 220, 20))  # ranks 21, 41, ..., 201
    #: the chance that a rewarding token pays 1: the tail pays more than the
    #: head, so the tail holds the high-advantage strategies
    head_pay: float = 0.4
    tail_pay: float = 0.9
    group: int = 16
    epochs: int = 4
    optimizer: str = "sgd"
    lr: float = 2.5  # per context: each context's loss is its own group mean
    steps: int = 300
    seeds: int = 5


SIGNS = ("pos", "neg")
BANDIT_METRICS = ("entropy", "entropy_rewarding", "entropy_given_success", "success",
                  "tail_mass", "tail_share", "step_kl", "clipfrac",
                  *(f"clip/{sign}/{name}" for sign in SIGNS for name, _, _ in P_BUCKETS))


def _bucket_clip_fractions(clipped, old_log_prob, among):
    """Per seed (first axis): the clipped share of the tokens ``among`` (a mask:
    one sign of advantage) in each p bucket (NaN where a bucket is empty)."""
    p = old_log_prob.exp().flatten(1)
    clipped = clipped.flatten(1).double()
    among = among.flatten(1)
    out = []
    for _, low, high in P_BUCKETS:
        inside = ((p >= low) & (p < high) & among).double()
        count = inside.sum(1)
        out.append(torch.where(count > 0, (clipped * inside).sum(1) / count.clamp(min=1),
                               torch.full_like(count, math.nan)))
    return torch.stack(out, 1)


def _entropy(weights):
    """Entropy (nats) of ``weights`` normalised over the last axis."""
    q = weights / weights.sum(-1, keepdim=True)
    return -(q * torch.log(q.clamp(min=1e-300))).sum(-1)


def run_bandit(rule_name, config: BanditConfig, seed: int = 0, progress=None):
    """Train ``config.seeds`` independent policies (one batch dimension) with one rule.

    ``rule_name`` is a key of ``RULES`` or a rule object (with ``bounds``).
    Returns {metric: array (steps, seeds)} for ``BANDIT_METRICS``; fewer rows
    if interrupted. ``step_kl`` is each step's KL(pi_old || pi_new), averaged
    over contexts. Deterministic for a given (rule, config, seed).
    """
    rule = rule_object(rule_name)
    S, C, V, G = config.seeds, config.contexts, config.vocab, config.group
    gen = torch.Generator().manual_seed(seed)
    rank = torch.arange(1, V + 1, dtype=torch.float64)
    logits = (-config.zipf * torch.log(rank)).repeat(S, C, 1).requires_grad_()
    pay = torch.zeros(V, dtype=torch.float64)
    pay[list(config.head_good)] = config.head_pay
    pay[list(config.tail_good)] = config.tail_pay
    good = pay > 0
    tail = torch.zeros(V, dtype=torch.bool)
    tail[list(config.tail_good)] = True
    optimizer = (torch.optim.SGD([logits], lr=config.lr) if config.optimizer == "sgd"
                 else torch.optim.Adam([logits], lr=config.lr))
    history: dict[str, Any] = {name: [] for name in BANDIT_METRICS}
    try:
        for _ in range(config.steps):
            with torch.no_grad():
                log_pi = torch.log_softmax(logits, -1)
                actions = torch.multinomial(log_pi.exp().reshape(S * C, V), G, replacement=True,
                                            generator=gen).reshape(S, C, G)
                paid = torch.rand(actions.shape, generator=gen, dtype=torch.float64)
                reward = (paid < pay[actions]).double()
                advantage = (reward - reward.mean(-1, keepdim=True)) / (
                    reward.std(-1, keepdim=True) + 1e-6)
                old = log_pi.gather(-1, actions)
                lower, upper = (b.double() for b in rule.bounds(old))
            for _ in range(config.epochs):
                ratio = torch.exp(torch.log_softmax(logits, -1).gather(-1, actions) - old)
                # a mean over each context's group, summed over contexts and
                # seeds: every context learns as if it were alone
                loss = clipped_surrogate(ratio, advantage, lower, upper).mean(-1).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            with torch.no_grad():
                # clipped after the last epoch: where the clip zeroes the gradient
                clipped = ((ratio > upper) & (advantage > 0)) | ((ratio < lower) & (advantage < 0))
                log_new = torch.log_softmax(logits, -1)
                step_kl = (log_pi.exp() * (log_pi - log_new)).sum(-1).mean(-1)
                history["step_kl"].append(step_kl.numpy())
                pi = torch.softmax(logits, -1)
                history["entropy"].append(_entropy(pi).mean(-1).numpy())
                # among rewarding tokens, and of the token given that it paid:
                # the diversity the claim is about, without the leftover mass
                # on tokens that never pay
                history["entropy_rewarding"].append(_entropy(pi * good).mean(-1).numpy())
                history["entropy_given_success"].append(_entropy(pi * pay).mean(-1).numpy())
                history["success"].append((pi * pay).sum(-1).mean(-1).numpy())
                tail_mass = (pi * tail).sum(-1)
                history["tail_mass"].append(tail_mass.mean(-1).numpy())
                history["tail_share"].append((tail_mass > 0.5).double().mean(-1).numpy())
                history["clipfrac"].append(clipped.flatten(1).double().mean(1).numpy())
                for sign, among in (("pos", advantage > 0), ("neg", advantage < 0)):
                    buckets = _bucket_clip_fractions(clipped, old, among).numpy()
                    for k, (name, _, _) in enumerate(P_BUCKETS):
                        history[f"clip/{sign}/{name}"].append(buckets[:, k])
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        history["interrupted"] = True
    interrupted = history.pop("interrupted", False)
    result = {k: np.array(v).reshape(len(v), S) for k, v in history.items()}
    return result, interrupted


def regret(history, config: BanditConfig) -> np.ndarray:
    """Expected reward short of the best token's (steps, seeds)."""
    return max(config.head_pay, config.tail_pay) - history["success"]


def figure_bandit(results: dict, config: BanditConfig, title_suffix=""):
    """Entropy given success, regret, tail mass, entropy given success at
    matched regret, and positive-advantage clip shares by p bucket; mean and
    95% CI over seeds."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    band_plot(axes[0, 0], results, "entropy_given_success",
              "H(token | it paid), nats, log scale",
              "Entropy of the paying token given success (geometric mean)", STYLES, log=True)
    regrets = {rule: dict(history, regret=regret(history, config))
               for rule, history in results.items()}
    band_plot(axes[0, 1], regrets, "regret", "best reward - expected reward, log scale",
              "Regret against the best token (geometric mean)", STYLES, log=True)
    band_plot(axes[0, 2], results, "tail_mass", "mass on rewarding tail tokens",
              f"Mass on the high-paying tail (pays {config.tail_pay:g}; head pays "
              f"{config.head_pay:g})", STYLES, limits=(0.0, 1.0))
    ax = axes[1, 0]
    for rule, history in regrets.items():
        mean_regret = nanmean(history["regret"], axis=1)
        entropy = np.exp(nanmean(np.log(np.maximum(history["entropy_given_success"], 1e-12)),
                                 axis=1))
        ax.plot(np.maximum(mean_regret, 1e-6), entropy, lw=1.8, **STYLES[rule])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("regret (training runs left to right)")
    ax.set_ylabel("H(token | it paid), nats")
    ax.set_title("Entropy given success at matched reward", fontsize=11)
    ax.grid(True, alpha=0.3, which="both")
    ax = axes[1, 1]
    names = [name for name, _, _ in P_BUCKETS]
    clip_share_bars(ax, results, names, STYLES)
    ax.set_ylabel("clipped share of positive-advantage tokens")
    ax.set_title("Upper clips on positive advantage, by old probability", fontsize=11)
    handles, labels = axes[0, 1].get_legend_handles_labels()
    legend_panel(axes[1, 2], handles, labels, f"clipping rule (Band: delta = {DELTA})", 11)
    fig.suptitle(f"High-advantage-tail bandit: {config.contexts} contexts x {config.vocab} Zipf "
                 f"tokens, GRPO ({config.group} samples, {config.epochs} epochs, "
                 f"{config.optimizer} lr {config.lr:g}), {config.seeds} seeds, "
                 f"95% CI{title_suffix}", fontsize=13)
    fig.tight_layout()
    return fig


#: metrics summarised late in training, per seed
LATE_METRICS = ("entropy", "entropy_rewarding", "entropy_given_success", "success",
                "tail_mass", "tail_share")


def late_per_seed(history, window: int = 50) -> dict[str, np.ndarray]:
    """Per seed: each of ``LATE_METRICS`` averaged over the last ``window`` steps."""
    return {m: nanmean(history[m][-window:], axis=0) for m in LATE_METRICS}


def summarize_bandit(results: dict, window: int = 50):
    """Per rule and late metric: (mean, 95% low, 95% high) over seeds, from a
    bootstrap that resamples whole seeds (the contexts of a seed share its
    random stream, so they are one cluster)."""
    return {rule: {m: cluster_bootstrap(v) for m, v in late_per_seed(history, window).items()}
            for rule, history in results.items()}


def entropy_at_regret(history, config: BanditConfig, level: float) -> np.ndarray:
    """Per seed, along its own trajectory: the entropy of the paying token
    given success at the first step whose regret is at most ``level`` (NaN
    where the seed never gets there): entropy at matched current reward."""
    reached = regret(history, config) <= level
    first = np.argmax(reached, axis=0)
    values = history["entropy_given_success"][first, np.arange(first.size)]
    return np.where(reached.any(axis=0), values, np.nan)


def _bandit_task(task):
    """One rule's run (all seeds): a module-level function for the process pool."""
    rule, config, seed = task
    with one_thread():
        return run_bandit(rule, config, seed)


def _run_bandit_rules(config: BanditConfig, rules, out, name, seed, jobs):
    """Every rule's run (``jobs`` processes) and its CSV: (results by rule,
    whether a run was interrupted, [csv path])."""
    with Progress(total=len(rules), desc=name, unit="rule") as bar:
        def done(task, _):
            bar.set_postfix_str(f"{task[0]} done")
            bar.update(1)

        # a run stopped by Ctrl-C returns its partial history: never kept for resuming
        runs = run_tasks(_bandit_task, [(rule, config, seed) for rule in rules], jobs, done,
                         complete=lambda run: not run[1])
    results = {rule: history for rule, (history, _) in zip(rules, runs)}
    interrupted = any(stopped for _, stopped in runs)
    return results, interrupted, [write_csv(os.path.join(out, f"{name}.csv"), results,
                                            BANDIT_METRICS)]


def bandit_study(config: BanditConfig, rules=tuple(RULES), out="figures",
                 name="dynamics_bandit", seed=0, jobs: int | Jobs = 1):
    """Run every rule (``jobs`` processes), write ``name``.csv and the figure;
    return (results, summary, paths). The results do not depend on ``jobs``."""
    results, interrupted, paths = _run_bandit_rules(config, rules, out, name, seed, jobs)
    suffix = " (interrupted)" if interrupted else ""
    paths += save_figure(figure_bandit(results, config, suffix), out, name)
    return results, summarize_bandit(results), paths


#: the high-off-policy stress test's rules: no clip and a loose constant clip
#: against the fixed clips and the band
STRESS_RULES = ("no-clip", "constant", "ppo", "clip-higher", "dcpo", "band-kl", "band-tv",
                "band-chi2")


def max_step_kl(history) -> np.ndarray:
    """Per seed: the largest per-step KL(pi_old || pi_new) of the run (its
    worst update; lower is more stable)."""
    return np.nanmax(history["step_kl"], axis=0)


def late_regret(history, config: BanditConfig, window: int = 20) -> np.ndarray:
    """Per seed: regret averaged over the last ``window`` steps."""
    return nanmean(regret(history, config)[-window:], axis=0)


def figure_stress(results: dict, config: BanditConfig):
    """Per-step KL and regret over training under many updates per batch."""
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    band_plot(axes[0], results, "step_kl", "KL(pi_old || pi_new) per step, log scale",
              "Size of each update (geometric mean)", STYLES, log=True)
    regrets = {rule: dict(history, regret=regret(history, config))
               for rule, history in results.items()}
    band_plot(axes[1], regrets, "regret", "best reward - expected reward",
              "Regret against the best token", STYLES, limits=(0.0, None))
    axes[2].axis("off")
    handles, labels = axes[0].get_legend_handles_labels()
    axes[2].legend(handles, labels, loc="center", fontsize=10, frameon=False,
                   title=f"clipping rule (Band: delta = {DELTA})")
    fig.suptitle(f"High-off-policy stress test: the bandit with {config.epochs} epochs per "
                 f"batch ({config.contexts} contexts, {config.optimizer} lr {config.lr:g}), "
                 f"{config.seeds} seeds, 95% CI", fontsize=12)
    fig.tight_layout()
    return fig


def stress_study(config: BanditConfig, rules=STRESS_RULES, out="figures",
                 name="dynamics_stress", seed=0, jobs: int | Jobs = 1):
    """The bandit under many updates per batch: CSV and figure; (results, paths)."""
    results, _, paths = _run_bandit_rules(config, rules, out, name, seed, jobs)
    paths += save_figure(figure_stress(results, config), out, name)
    return results, paths
