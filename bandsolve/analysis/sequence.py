"""The sequence part of the dynamics study: a small transformer, fitted by
supervised learning, then trained with GRPO under each clipping rule.

    python -m analysis.dynamics --part sequence [--full] [--out figures]

Task: the prompt is a target T in 3..27 and an excluded digit E in 1..9; the
answer is three digits in 1..9 that sum to T without using E; the reward is 1
if it does. Most of the 217 solvable prompts have many solutions (up to 48):
several valid paths. The supervised data are skewed the way a pretrained
model is: for each prompt, 80% of the demonstrations are one canonical answer
(digits as large as possible, first) and 20% are valid answers drawn
uniformly. A short supervised fit leaves a policy that is right part of the
time, prefers the canonical path, and keeps the others in its tail.

GRPO trains on 80% of the prompts; a fixed 20% are held out (the supervised
fit saw them all, as pretraining sees everything). Every ``eval_every`` steps
it measures, on the held-out and the training prompts, with k samples per
prompt: mean@k (the average reward), pass@k (the share of prompts solved at
least once), the token entropy of the policy along its samples, and the
number of distinct correct answers. The model, the supervised fit and the
evaluation randomness are the same for every rule within a seed.
"""

from __future__ import annotations

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

from bandsolve.torch import clipped_surrogate  # noqa: E402

from .._progress import Progress  # noqa: E402
from .common import band_plot, mean_and_ci, save_figure, write_csv  # noqa: E402
from .rules import RULES, STYLES  # noqa: E402

DIGITS = 9
LENGTH = 3
TARGETS = tuple(range(LENGTH, DIGITS * LENGTH + 1))  # 3..27
# token ids: digits 0..8 (= 1..9), then targets, excluded digits, BOS
TARGET_TOKEN0 = DIGITS
EXCLUDED_TOKEN0 = TARGET_TOKEN0 + len(TARGETS)
BOS = EXCLUDED_TOKEN0 + DIGITS
VOCAB = BOS + 1
PROMPT = 3  # [BOS, T, E]


def _solutions(target, excluded):
    return [s for s in itertools.product(range(1, DIGITS + 1), repeat=LENGTH)
            if sum(s) == target and excluded not in s]


def _canonical(target, excluded):
    """Digits as large as possible, first: the lexicographically largest answer."""
    return max(_solutions(target, excluded))


PROBLEMS = tuple((t, e) for t in TARGETS for e in range(1, DIGITS + 1) if _solutions(t, e))
_HELD_OUT = set(np.random.default_rng(20261202).permutation(len(PROBLEMS))[:len(PROBLEMS) // 5])
HELD_OUT_PROBLEMS = tuple(p for i, p in enumerate(PROBLEMS) if i in _HELD_OUT)
TRAIN_PROBLEMS = tuple(p for i, p in enumerate(PROBLEMS) if i not in _HELD_OUT)


@dataclasses.dataclass(frozen=True)
class SequenceConfig:
    width: int = 64
    layers: int = 2
    heads: int = 4
    sft_steps: int = 60
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


SEQUENCE_METRICS = ("heldout_mean_at_k", "heldout_pass_at_k", "heldout_entropy",
                    "heldout_distinct_correct", "train_mean_at_k", "train_entropy", "clipfrac")


class TinyPolicy(nn.Module):
    """A causal transformer over [BOS, T, E, d1, d2, d3]."""

    def __init__(self, config: SequenceConfig):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, config.width)
        self.position = nn.Parameter(torch.zeros(PROMPT + LENGTH, config.width))
        layer = nn.TransformerEncoderLayer(config.width, config.heads, 2 * config.width,
                                           dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.head = nn.Linear(config.width, DIGITS)
        self.register_buffer("mask",
                             nn.Transformer.generate_square_subsequent_mask(PROMPT + LENGTH))

    def forward(self, tokens):
        """Logits over the 9 digits at each position."""
        n = tokens.shape[1]
        h = self.embed(tokens) + self.position[:n]
        mask: torch.Tensor = self.mask  # type: ignore[assignment]  # a registered buffer
        return self.head(self.body(h, mask=mask[:n, :n], is_causal=True))

    def answer_logits(self, tokens):
        """Logits for the answer digits, given [prompt, answer] tokens."""
        return self(tokens)[:, PROMPT - 1:-1]


def _prompts(problems):
    t = torch.tensor([p[0] for p in problems])
    e = torch.tensor([p[1] for p in problems])
    return torch.stack([torch.full_like(t, BOS), TARGET_TOKEN0 + t - TARGETS[0],
                        EXCLUDED_TOKEN0 + e - 1], 1)


def _sft_batch(config, gen, size=256):
    picks = torch.randint(len(PROBLEMS), (size,), generator=gen).tolist()
    problems = [PROBLEMS[i] for i in picks]
    answers = []
    for problem, canonical in zip(problems, torch.rand(size, generator=gen).tolist()):
        if canonical < config.canonical_share:
            answers.append(_canonical(*problem))
        else:
            options = _solutions(*problem)
            answers.append(options[int(torch.randint(len(options), (1,), generator=gen))])
    return _prompts(problems), torch.tensor(answers) - 1


def supervised_fit(config: SequenceConfig, seed: int) -> TinyPolicy:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyPolicy(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.sft_lr)
    for _ in range(config.sft_steps):
        prompts, answers = _sft_batch(config, gen)
        logits = model.answer_logits(torch.cat([prompts, answers], 1))
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
    return tokens[:, PROMPT:], torch.cat(logps, 1), torch.cat(entropies, 1)


def _reward(prompts, answers):
    """1 where the digits sum to T and avoid E."""
    targets = prompts[:, 1] - TARGET_TOKEN0 + TARGETS[0]
    excluded = prompts[:, 2] - EXCLUDED_TOKEN0 + 1
    digits = answers + 1
    return ((digits.sum(1) == targets) & (digits != excluded[:, None]).all(1)).double()


def evaluate(model, problems, k, gen):
    """mean@k, pass@k, mean token entropy, and distinct correct answers per prompt."""
    prompts = _prompts(problems).repeat_interleave(k, 0)
    answers, _, entropy = sample(model, prompts, gen)
    reward = _reward(prompts, answers).reshape(len(problems), k)
    distinct = [len({tuple(a) for a, r in zip(answers[i * k:(i + 1) * k].tolist(),
                                              reward[i].tolist()) if r})
                for i in range(len(problems))]
    return (float(reward.mean()), float((reward.max(1).values > 0).double().mean()),
            float(entropy.mean()), float(np.mean(distinct)))


def grpo(model, rule_name, config: SequenceConfig, seed: int, progress=None):
    """Train ``model`` in place; return {metric: list per evaluation} and whether interrupted."""
    rule = RULES[rule_name][0]
    gen = torch.Generator().manual_seed(1000 + seed)
    eval_gen = torch.Generator()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    history: dict[str, list] = {name: [] for name in SEQUENCE_METRICS}
    clipfrac: list = []

    def record():
        eval_gen.manual_seed(2000 + seed)  # the same evaluation samples' randomness each time
        held = evaluate(model, HELD_OUT_PROBLEMS, config.k, eval_gen)
        train = evaluate(model, TRAIN_PROBLEMS, config.k, eval_gen)
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
            picks = torch.randint(len(TRAIN_PROBLEMS), (config.prompts_per_step,),
                                  generator=gen).tolist()
            prompts = _prompts([TRAIN_PROBLEMS[i] for i in picks]).repeat_interleave(
                config.group, 0)
            answers, old, _ = sample(model, prompts, gen)
            reward = _reward(prompts, answers).reshape(-1, config.group)
            advantage = ((reward - reward.mean(1, keepdim=True))
                         / (reward.std(1, keepdim=True) + 1e-6)).reshape(-1, 1).expand(-1, LENGTH)
            lower, upper = (b.double() for b in rule.bounds(old.double()))
            tokens = torch.cat([prompts, answers], 1)
            for _ in range(config.epochs):
                log_pi = torch.log_softmax(model.answer_logits(tokens), -1)
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
    per_rule: dict[str, list] = {rule: [] for rule in rules}
    interrupted = False
    with Progress(total=config.seeds * (len(rules) * config.steps), desc=name,
                  unit="step") as bar:
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
    panels = [("heldout_mean_at_k", f"mean@{config.k}", "Held-out prompts: mean@k", False),
              ("heldout_pass_at_k", f"pass@{config.k}", "Held-out prompts: pass@k", False),
              ("heldout_entropy", "token entropy (nats, log scale)",
               "Held-out prompts: policy entropy", True),
              ("heldout_distinct_correct", f"distinct correct answers in {config.k}",
               "Held-out prompts: diversity of correct answers", False),
              ("train_mean_at_k", f"mean@{config.k}", "Training prompts: mean@k", False)]
    evaluations = len(next(iter(results.values()))[SEQUENCE_METRICS[0]]) if results else 0
    steps = config.eval_every * np.arange(evaluations)
    for ax, (metric, ylabel, title, log) in zip(axes.flat, panels):
        band_plot(ax, results, metric, ylabel, title, STYLES, log=log, x=steps,
                   xlabel="GRPO step (0: after the supervised fit)")
    axes[1, 2].axis("off")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[1, 2].legend(handles, labels, loc="center", fontsize=11, frameon=False,
                      title="clipping rule (Band: delta = 0.05)")
    suffix = " (interrupted)" if interrupted else ""
    fig.suptitle(f"Sequence task: three digits that sum to T without E, a {config.layers}-layer "
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
