"""Entropy-collapse dynamics: does fixed clipping freeze the tail, and does the band not?

    python -m analysis.dynamics [--full] [--part bandit|sequence|both|frontier] [--out figures]

Both parts train with GRPO (group-normalised advantages) and several
optimisation epochs per rollout batch, so that ratios leave 1 and clipping
acts, and compare the rules of ``RULES``: no clipping, PPO clip, Clip-Higher,
DCPO and Band (kl, tv, chi2) at delta = 0.05. The losses are
``bandsolve.torch``'s (``clipped_surrogate`` with each rule's bounds).

(a) Tail-token bandit (``run_bandit``). Per context, a softmax policy over a
    vocabulary of ``vocab`` tokens, started from Zipf logits -s log(rank).
    One head token (rank 2) and ten tail tokens (ranks 21, 41, ..., 201) pay
    reward 1 with probability ``reward_prob`` (so the advantage never
    vanishes), every other token pays 0. Plain SGD on the logits. Tracked
    per step and seed: the policy's entropy, its expected success (mass on
    rewarding tokens), the mass on the rewarding *tail* tokens, and clip
    fractions by old-probability bucket.

(b) Sequence task (``run_sequence``): see ``bandsolve.analysis.sequence``.

(c) The frontier (``--part frontier``): every rule over a grid of its own
    hyperparameter, reward against entropy at equal reward and at matched
    step size; see ``bandsolve.analysis.frontier``.

Each part writes a CSV of every metric (one row per rule, seed and step) and a
figure (PNG and PDF) with the mean and a 95% confidence band over seeds. The
quick default runs in a few minutes on 2 cores; ``--full`` runs more seeds
and steps and, for the bandit, an Adam variant as a robustness check.
Progress bars show the work; Ctrl-C stops after the current step and still
writes what finished.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from bandsolve.torch import DCPO, Band, ClipHigher, NoClip, PPOClip, clipped_surrogate  # noqa: E402
from bandsolve.torch.losses import P_BUCKETS  # noqa: E402

from .._progress import Progress  # noqa: E402
from .bounds import save_figure  # noqa: E402

DELTA = 0.05

#: name -> (rule, plot style); the order is the legend's
RULES: dict[str, tuple[Any, dict[str, Any]]] = {
    "no-clip": (NoClip(), dict(color="0.6", ls="--", label="no clip")),
    "ppo": (PPOClip(0.2), dict(color="0.2", ls=":", label="PPO [0.8, 1.2]", zorder=4)),
    "clip-higher": (ClipHigher(), dict(color="#d62728", ls="-.", label="Clip-Higher")),
    "dcpo": (DCPO(), dict(color="#ff7f0e", ls="--", label="DCPO")),
    "band-kl": (Band(DELTA, "kl", 10.0, validate=False), dict(color="#1f77b4", label="Band-KL")),
    "band-tv": (Band(DELTA, "tv", 10.0, validate=False), dict(color="#2ca02c", label="Band-TV")),
    "band-chi2": (Band(DELTA, "chi2", 10.0, validate=False),
                  dict(color="#9467bd", label=r"Band-$\chi^2$")),
}


@dataclasses.dataclass(frozen=True)
class BanditConfig:
    contexts: int = 64
    vocab: int = 300
    zipf: float = 1.1
    head_good: tuple = (1,)  # 0-based ranks of rewarding head tokens
    tail_good: tuple = tuple(range(20, 220, 20))  # ranks 21, 41, ..., 201
    reward_prob: float = 0.7
    group: int = 16
    epochs: int = 4
    optimizer: str = "sgd"
    lr: float = 2.5  # per context: each context's loss is its own group mean
    steps: int = 300
    seeds: int = 5


QUICK: dict[str, BanditConfig | None] = {"bandit": BanditConfig(), "bandit-adam": None}
FULL = {"bandit": BanditConfig(steps=600, seeds=10),
        "bandit-adam": BanditConfig(steps=600, seeds=10, optimizer="adam", lr=0.05)}

BANDIT_METRICS = ("entropy", "success", "tail_mass", "step_kl", "clipfrac",
                  *(f"clipfrac/{name}" for name, _, _ in P_BUCKETS))


def _bucket_clip_fractions(clipped, old_log_prob):
    """Per seed (first axis): the clipped share of the tokens in each p bucket
    (NaN where a bucket is empty)."""
    p = old_log_prob.exp().flatten(1)
    clipped = clipped.flatten(1).double()
    out = []
    for _, low, high in P_BUCKETS:
        inside = ((p >= low) & (p < high)).double()
        count = inside.sum(1)
        out.append(torch.where(count > 0, (clipped * inside).sum(1) / count.clamp(min=1),
                               torch.full_like(count, math.nan)))
    return torch.stack(out, 1)


def run_bandit(rule_name, config: BanditConfig, seed: int = 0, progress=None):
    """Train ``config.seeds`` independent policies (one batch dimension) with one rule.

    ``rule_name`` is a key of ``RULES`` or a rule object (with ``bounds``).
    Returns {metric: array (steps, seeds)} for ``BANDIT_METRICS``; fewer rows
    if interrupted. ``step_kl`` is each step's KL(pi_old || pi_new), averaged
    over contexts. Deterministic for a given (rule, config, seed).
    """
    rule = RULES[rule_name][0] if isinstance(rule_name, str) else rule_name
    S, C, V, G = config.seeds, config.contexts, config.vocab, config.group
    gen = torch.Generator().manual_seed(seed)
    rank = torch.arange(1, V + 1, dtype=torch.float64)
    logits = (-config.zipf * torch.log(rank)).repeat(S, C, 1).requires_grad_()
    good = torch.zeros(V, dtype=torch.bool)
    good[list(config.head_good)] = True
    good[list(config.tail_good)] = True
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
                reward = (good[actions] & (paid < config.reward_prob)).double()
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
                entropy = -(pi * torch.log(pi.clamp(min=1e-300))).sum(-1).mean(-1)
                history["entropy"].append(entropy.numpy())
                history["success"].append((pi * good).sum(-1).mean(-1).numpy())
                history["tail_mass"].append((pi * tail).sum(-1).mean(-1).numpy())
                history["clipfrac"].append(clipped.flatten(1).double().mean(1).numpy())
                buckets = _bucket_clip_fractions(clipped, old).numpy()
                for k, (name, _, _) in enumerate(P_BUCKETS):
                    history[f"clipfrac/{name}"].append(buckets[:, k])
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        history["interrupted"] = True
    interrupted = history.pop("interrupted", False)
    result = {k: np.array(v).reshape(len(v), S) for k, v in history.items()}
    return result, interrupted


def nanmean(values, axis=None):
    """np.nanmean without its warning for all-NaN slices (an empty p bucket): NaN."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def mean_and_ci(values: np.ndarray):
    """Mean over seeds (axis 1) and the half-width of a 95% t-interval."""
    from scipy import stats

    n = values.shape[1]
    mean = nanmean(values, axis=1)
    if n < 2:
        return mean, np.zeros_like(mean)
    sem = np.std(values, axis=1, ddof=1) / math.sqrt(n)
    return mean, stats.t.ppf(0.975, n - 1) * sem


def write_csv(path, results: dict, metrics):
    """One row per (rule, seed, step) with every metric."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["rule", "seed", "step", *metrics])
        for rule, history in results.items():
            steps, seeds = history[metrics[0]].shape
            for s in range(seeds):
                for t in range(steps):
                    writer.writerow([rule, s, t + 1,
                                     *(f"{history[m][t, s]:.6g}" for m in metrics)])
    return path


def _band_plot(ax, results, metric, ylabel, title, log=False, x=None, xlabel="GRPO step"):
    """Mean over seeds with a 95% band; on a log axis, of log(metric) (a
    geometric mean), so that the band stays positive. ``x`` defaults to the
    steps 1, 2, ..."""
    for rule, history in results.items():
        values = history[metric]
        if log:
            mean, ci = mean_and_ci(np.log(np.maximum(values, 1e-12)))
            centre, low, high = np.exp(mean), np.exp(mean - ci), np.exp(mean + ci)
        else:
            centre, ci = mean_and_ci(values)
            low, high = centre - ci, centre + ci
        steps = np.arange(1, centre.size + 1) if x is None else np.asarray(x)[:centre.size]
        style = RULES[rule][1]
        ax.plot(steps, centre, lw=1.8, **style)
        ax.fill_between(steps, low, high, color=style["color"], alpha=0.15, lw=0)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)


def figure_bandit(results: dict, config: BanditConfig, title_suffix=""):
    """Entropy, success, tail mass, entropy at matched success, and clip
    fractions by p bucket; mean and 95% CI over seeds."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    _band_plot(axes[0, 0], results, "entropy", "policy entropy (nats, log scale)",
               "Entropy of the policy (geometric mean)", log=True)
    failure = {rule: dict(history, failure=1.0 - history["success"])
               for rule, history in results.items()}
    _band_plot(axes[0, 1], failure, "failure", "P(no rewarding token), log scale",
               "Failure probability (geometric mean)", log=True)
    _band_plot(axes[0, 2], results, "tail_mass", "mass on rewarding tail tokens",
               "Mass on the rewarding tail tokens (ranks 21-201)")
    ax = axes[1, 0]
    for rule, history in results.items():
        success = nanmean(history["success"], axis=1)
        entropy = np.exp(nanmean(np.log(np.maximum(history["entropy"], 1e-12)), axis=1))
        ax.plot(1.0 - success, entropy, lw=1.8, **RULES[rule][1])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("1 - success (training runs left to right)")
    ax.set_ylabel("policy entropy (nats)")
    ax.set_title("Entropy at matched success", fontsize=11)
    ax.grid(True, alpha=0.3, which="both")
    ax = axes[1, 1]
    names = [name for name, _, _ in P_BUCKETS]
    width = 0.8 / len(results)
    for i, (rule, history) in enumerate(results.items()):
        values = [float(nanmean(history[f"clipfrac/{name}"])) for name in names]
        ax.bar(np.arange(len(names)) + i * width, values, width,
               color=RULES[rule][1]["color"])
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=20, fontsize=8)
    ax.set_ylabel("clipped share of sampled tokens")
    ax.set_title("Clip fraction by old probability (mean over training)", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    axes[1, 2].axis("off")
    handles, labels = axes[0, 1].get_legend_handles_labels()
    axes[1, 2].legend(handles, labels, loc="center", fontsize=11, frameon=False,
                      title=f"clipping rule (Band: delta = {DELTA})")
    fig.suptitle(f"Tail-token bandit: {config.contexts} contexts x {config.vocab} Zipf tokens, "
                 f"GRPO ({config.group} samples, {config.epochs} epochs, {config.optimizer} "
                 f"lr {config.lr:g}), {config.seeds} seeds, 95% CI{title_suffix}", fontsize=13)
    fig.tight_layout()
    return fig


def summarize_bandit(results: dict, window: int = 50):
    """Per rule: mean over the last ``window`` steps of entropy, success and
    tail mass (mean and 95% CI over seeds)."""
    summary = {}
    for rule, history in results.items():
        row = {}
        for metric in ("entropy", "success", "tail_mass"):
            late = nanmean(history[metric][-window:], axis=0)[None, :]
            mean, ci = mean_and_ci(late)
            row[metric] = (float(mean[0]), float(ci[0]))
        summary[rule] = row
    return summary


def entropy_at_failure(history, levels=(1e-1, 1e-2, 3e-3)):
    """Geometric-mean entropy at the first step where the mean failure
    probability (1 - success) reaches each level (NaN if it never does):
    entropy at matched success."""
    failure = 1.0 - nanmean(history["success"], axis=1)
    entropy = np.exp(nanmean(np.log(np.maximum(history["entropy"], 1e-12)), axis=1))
    out = []
    for level in levels:
        reached = np.flatnonzero(failure <= level)
        out.append(float(entropy[reached[0]]) if reached.size else math.nan)
    return out


def bandit_study(config: BanditConfig, rules=tuple(RULES), out="figures",
                 name="dynamics_bandit", seed=0):
    """Run every rule, write ``name``.csv and the figure; return (results, summary, paths)."""
    results = {}
    with Progress(total=len(rules) * config.steps, desc=name, unit="step") as bar:
        for rule in rules:
            bar.set_postfix_str(rule)
            results[rule], interrupted = run_bandit(rule, config, seed, progress=bar)
            if interrupted:
                break
    paths = [write_csv(os.path.join(out, f"{name}.csv"), results, BANDIT_METRICS)]
    suffix = " (interrupted)" if interrupted else ""
    paths += save_figure(figure_bandit(results, config, suffix), out, name)
    return results, summarize_bandit(results), paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="more seeds and steps")
    parser.add_argument("--part", choices=("bandit", "sequence", "both", "frontier"),
                        default="both", help="both: bandit and sequence; frontier: every "
                                             "rule over its own hyperparameter")
    parser.add_argument("--out", default="figures")
    args = parser.parse_args(argv)
    if args.part == "frontier":
        from . import frontier

        result = frontier.study(frontier.FULL if args.full else frontier.QUICK, out=args.out)
        print("\n".join(result["paths"]))
        for (optimizer, metric), v in result["verdicts"].items():
            print(f"{optimizer} {metric}: the band frontier {v['verdict']} ({v['higher']} higher, "
                  f"{v['lower']} lower of {v['comparisons']} comparisons)")
        return 0
    configs = FULL if args.full else QUICK
    if args.part in ("bandit", "both"):
        for name, config in configs.items():
            if config is None:
                continue
            _, summary, paths = bandit_study(config, out=args.out,
                                             name=name.replace("bandit", "dynamics_bandit"))
            print("\n".join(paths))
            for rule, row in summary.items():
                print(f"{rule:12s} " + "  ".join(f"{k} {v[0]:.3f} ± {v[1]:.3f}"
                                                  for k, v in row.items()))
    if args.part in ("sequence", "both"):
        from . import sequence

        sequence.main(["--full"] if args.full else [], out=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
