"""The sequence part of the dynamics study: a small transformer, fitted by
supervised learning, then trained with GRPO under each clipping rule.

    python -m analysis.sequence [--full] [--out figures]

Task: the prompt is a target T in 3..27 and the answer three digits 1..9
that sum to T; the reward is 1 if they do. Most targets have many solutions
(up to 61, for T = 15): several valid paths. The supervised data are skewed the way a
pretrained model is: for each target, 80% of the demonstrations are one
canonical answer (digits as large as possible, first) and 20% are valid
answers drawn uniformly. A short supervised fit leaves a policy that is right
often, prefers the canonical path, and keeps the others in its tail.

GRPO then trains on the even targets only; the odd targets are held out.
Every ``eval_every`` steps it measures, on the held-out targets and on the
training targets, with k samples per target: mean@k (the average reward),
pass@k (the share of targets solved at least once), the token entropy of the
policy along its samples, and the number of distinct correct answers. The
model, the supervised fit and the evaluation prompts are the same for every
rule within a seed.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from analysis.bounds import save_figure  # noqa: E402
from analysis.dynamics import RULES, _band_plot, mean_and_ci, write_csv  # noqa: E402
from bandsolve.torch import clipped_surrogate  # noqa: E402

DIGITS = 9
LENGTH = 3
TARGETS = tuple(range(LENGTH, DIGITS * LENGTH + 1))  # 3..27
BOS = DIGITS + len(TARGETS)  # token ids: digits 0..8 (= 1..9), targets, BOS
VOCAB = BOS + 1
TRAIN_TARGETS = tuple(t for t in TARGETS if t % 2 == 0)
HELD_OUT_TARGETS = tuple(t for t in TARGETS if t % 2 == 1)


@dataclasses.dataclass(frozen=True)
class SequenceConfig:
    width: int = 64
    layers: int = 2
    heads: int = 4
    sft_steps: int = 40
    sft_lr: float = 3e-3
    canonical_share: float = 0.8
    prompts_per_step: int = 16
    group: int = 8
    epochs: int = 4
    lr: float = 3e-4
    steps: int = 100
    eval_every: int = 10
    k: int = 16
    seeds: int = 3


QUICK = SequenceConfig()
FULL = SequenceConfig(steps=300, seeds=6, k=32, eval_every=10)

SEQUENCE_METRICS = ("heldout_mean_at_k", "heldout_pass_at_k", "heldout_entropy",
                    "heldout_distinct_correct", "train_mean_at_k", "train_entropy", "clipfrac")


class TinyPolicy(nn.Module):
    """A causal transformer over [BOS, T, d1, d2, d3]."""

    def __init__(self, config: SequenceConfig):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, config.width)
        self.position = nn.Parameter(torch.zeros(LENGTH + 2, config.width))
        layer = nn.TransformerEncoderLayer(config.width, config.heads, 2 * config.width,
                                           dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.head = nn.Linear(config.width, DIGITS)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(LENGTH + 2))

    def forward(self, tokens):
        """Logits over the 9 digits at each position (the last is unused)."""
        n = tokens.shape[1]
        h = self.embed(tokens) + self.position[:n]
        return self.head(self.body(h, mask=self.mask[:n, :n], is_causal=True))


def _prompts(targets):
    t = torch.as_tensor(targets)
    return torch.stack([torch.full_like(t, BOS), DIGITS + t - TARGETS[0]], 1)


def _solutions(target):
    return [s for s in itertools.product(range(1, DIGITS + 1), repeat=LENGTH) if sum(s) == target]


def _canonical(target):
    """Digits as large as possible, first: 27 -> 999, 20 -> 992, 5 -> 311."""
    digits, left = [], target
    for position in range(LENGTH):
        d = min(DIGITS, left - (LENGTH - position - 1))
        digits.append(d)
        left -= d
    return tuple(digits)


def _sft_batch(config, gen, size=256):
    targets = torch.tensor(TARGETS)[torch.randint(len(TARGETS), (size,), generator=gen)]
    answers = []
    for t, canonical in zip(targets.tolist(), torch.rand(size, generator=gen).tolist()):
        if canonical < config.canonical_share:
            answers.append(_canonical(t))
        else:
            options = _solutions(t)
            answers.append(options[int(torch.randint(len(options), (1,), generator=gen))])
    return _prompts(targets.tolist()), torch.tensor(answers) - 1


def supervised_fit(config: SequenceConfig, seed: int) -> TinyPolicy:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyPolicy(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.sft_lr)
    for _ in range(config.sft_steps):
        prompts, answers = _sft_batch(config, gen)
        logits = model(torch.cat([prompts, answers], 1))[:, 1:-1]
        loss = nn.functional.cross_entropy(logits.reshape(-1, DIGITS), answers.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


@torch.no_grad()
def sample(model, prompts, gen):
    """(answers (n, 3) in 0..8, their log-probs (n, 3), per-position entropies (n, 3))."""
    tokens = prompts
    logps, entropies = [], []
    for _ in range(LENGTH):
        log_pi = torch.log_softmax(model(tokens)[:, -1], -1)
        choice = torch.multinomial(log_pi.exp(), 1, generator=gen)
        logps.append(log_pi.gather(1, choice))
        entropies.append(-(log_pi.exp() * log_pi).sum(-1, keepdim=True))
        tokens = torch.cat([tokens, choice], 1)
    return tokens[:, 2:], torch.cat(logps, 1), torch.cat(entropies, 1)


def _reward(prompts, answers):
    targets = prompts[:, 1] - DIGITS + TARGETS[0]
    return ((answers + 1).sum(1) == targets).double()


def evaluate(model, targets, k, gen):
    """mean@k, pass@k, mean token entropy, and distinct correct answers per target."""
    prompts = _prompts(targets).repeat_interleave(k, 0)
    answers, _, entropy = sample(model, prompts, gen)
    reward = _reward(prompts, answers).reshape(len(targets), k)
    distinct = [len({tuple(a) for a, r in zip(answers[i * k:(i + 1) * k].tolist(),
                                              reward[i].tolist()) if r})
                for i in range(len(targets))]
    return (float(reward.mean()), float((reward.max(1).values > 0).double().mean()),
            float(entropy.mean()), float(np.mean(distinct)))


def grpo(model, rule_name, config: SequenceConfig, seed: int, progress=None):
    """Train ``model`` in place; return {metric: list per evaluation} and whether interrupted."""
    rule = RULES[rule_name][0]
    gen = torch.Generator().manual_seed(1000 + seed)
    eval_gen = torch.Generator()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    history = {name: [] for name in SEQUENCE_METRICS}
    clipfrac = []

    def record():
        eval_gen.manual_seed(2000 + seed)  # the same evaluation samples' randomness each time
        held = evaluate(model, HELD_OUT_TARGETS, config.k, eval_gen)
        train = evaluate(model, TRAIN_TARGETS, config.k, eval_gen)
        for name, value in zip(("heldout_mean_at_k", "heldout_pass_at_k", "heldout_entropy",
                                "heldout_distinct_correct"), held):
            history[name].append(value)
        history["train_mean_at_k"].append(train[0])
        history["train_entropy"].append(train[2])
        history["clipfrac"].append(float(np.mean(clipfrac)) if clipfrac else 0.0)
        clipfrac.clear()

    try:
        record()
        for step in range(1, config.steps + 1):
            picks = torch.randint(len(TRAIN_TARGETS), (config.prompts_per_step,), generator=gen)
            prompts = _prompts([TRAIN_TARGETS[i] for i in picks]).repeat_interleave(
                config.group, 0)
            answers, old, _ = sample(model, prompts, gen)
            reward = _reward(prompts, answers).reshape(-1, config.group)
            advantage = ((reward - reward.mean(1, keepdim=True))
                         / (reward.std(1, keepdim=True) + 1e-6)).reshape(-1, 1).expand(-1, LENGTH)
            lower, upper = (b.double() for b in rule.bounds(old.double()))
            tokens = torch.cat([prompts, answers], 1)
            for _ in range(config.epochs):
                log_pi = torch.log_softmax(model(tokens)[:, 1:-1], -1)
                new = log_pi.gather(2, answers.unsqueeze(2)).squeeze(2).double()
                ratio = torch.exp(new - old.double())
                loss = clipped_surrogate(ratio, advantage, lower, upper).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            with torch.no_grad():
                clipped = ((ratio > upper) & (advantage > 0)) | ((ratio < lower) & (advantage < 0))
                clipfrac.append(float(clipped.double().mean()))
            if step % config.eval_every == 0:
                record()
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        return history, True
    return history, False


def sequence_study(config: SequenceConfig, rules=tuple(RULES), out="figures",
                   name="dynamics_sequence"):
    """Every rule and seed from one supervised fit per seed; CSV, figure, summary."""
    per_rule = {rule: [] for rule in rules}
    interrupted = False
    with tqdm(total=config.seeds * (len(rules) * config.steps), desc=name, unit="step") as bar:
        for seed in range(config.seeds):
            bar.set_postfix_str(f"seed {seed}: supervised fit")
            base = supervised_fit(config, seed)
            for rule in rules:
                bar.set_postfix_str(f"seed {seed}: {rule}")
                history, interrupted = grpo(copy.deepcopy(base), rule, config, seed, bar)
                per_rule[rule].append(history)
                if interrupted:
                    break
            if interrupted:
                break
    results = {}
    for rule, runs in per_rule.items():
        if not runs:
            continue
        length = min(len(r[SEQUENCE_METRICS[0]]) for r in runs)
        results[rule] = {m: np.array([r[m][:length] for r in runs]).T for m in SEQUENCE_METRICS}
    paths = [write_csv(os.path.join(out, f"{name}.csv"), results, SEQUENCE_METRICS)]
    paths += save_figure(figure_sequence(results, config, interrupted), out, name)
    return results, summarize_sequence(results), paths


def figure_sequence(results, config: SequenceConfig, interrupted=False):
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    panels = [("heldout_mean_at_k", f"mean@{config.k}", "Held-out targets: mean@k", False),
              ("heldout_pass_at_k", f"pass@{config.k}", "Held-out targets: pass@k", False),
              ("heldout_entropy", "token entropy (nats, log scale)",
               "Held-out targets: policy entropy", True),
              ("heldout_distinct_correct", f"distinct correct answers in {config.k}",
               "Held-out targets: diversity of correct answers", False),
              ("train_mean_at_k", f"mean@{config.k}", "Training targets: mean@k", False)]
    evaluations = len(next(iter(results.values()))[SEQUENCE_METRICS[0]]) if results else 0
    steps = config.eval_every * np.arange(evaluations)
    for ax, (metric, ylabel, title, log) in zip(axes.flat, panels):
        _band_plot(ax, results, metric, ylabel, title, log=log, x=steps,
                   xlabel="GRPO step (0: after the supervised fit)")
    axes[1, 2].axis("off")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[1, 2].legend(handles, labels, loc="center", fontsize=11, frameon=False,
                      title="clipping rule (Band: delta = 0.05)")
    suffix = " (interrupted)" if interrupted else ""
    fig.suptitle(f"Sequence task: three digits that sum to T, a {config.layers}-layer "
                 f"transformer after SFT, GRPO ({config.group} samples, {config.epochs} "
                 f"epochs), {config.seeds} seeds, 95% CI{suffix}", fontsize=13)
    fig.tight_layout()
    return fig


def summarize_sequence(results):
    """Per rule, at the last evaluation: mean and 95% CI over seeds."""
    summary = {}
    for rule, history in results.items():
        summary[rule] = {m: tuple(float(x[0]) for x in mean_and_ci(history[m][-1:]))
                         for m in ("heldout_mean_at_k", "heldout_pass_at_k", "heldout_entropy",
                                   "heldout_distinct_correct", "train_mean_at_k")}
    return summary


def main(argv=None, out="figures"):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--out", default=out)
    args = parser.parse_args(argv)
    _, summary, paths = sequence_study(FULL if args.full else QUICK, out=args.out)
    print("\n".join(paths))
    for rule, row in summary.items():
        print(f"{rule:12s} " + "  ".join(f"{k} {v[0]:.3f} ± {v[1]:.3f}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
