"""The autoregressive study of issue 30 on a randomly initialised small
transformer, on one GPU (issue 30, item 5).

    python benchmarks/gpu_ar_study.py [--device cuda] [--out benchmarks/gpu_ar_study.csv]
    python benchmarks/gpu_ar_study.py --tiny   # the same code on the CPU, in seconds

The tabular study (:mod:`bandsolve.studies.autoregressive.study`) asks whether the band
helps under Adam with 4 epochs x 4 mini-batches per rollout batch. This script
asks the same question of a policy with shared parameters: a causal
transformer (4 layers, width 256, 4 heads, vocabulary 64 by default; no
weights are loaded, nothing is downloaded), so that an update on one answer
moves the probability of every other answer, as in an LLM.

* **The task** is the tabular one's (:class:`~bandsolve.studies.autoregressive.task.TaskConfig`),
  with answers of two tokens after a prompt of ``prompt`` random tokens (one
  prompt per context, drawn from the seed): the first answer token is the
  decision (the model's likeliest first token, the head, pays ``head_pay``; its
  tokens of ranks ``tail_ranks`` pay ``tail_pay``); the payment is made only if
  the second token is among the ``keep`` likeliest after that first token.
  Head, tail and kept sets are read off the model after the supervised stage,
  so the task is exactly what that model believes.
* **A supervised stage** first fits each context's first-token distribution to
  Zipf(``zipf``) over a random permutation of the vocabulary, and each
  (context, first token)'s second-token distribution likewise (Adam on the
  exact KL to the targets), so that training starts from a Zipf head with rare,
  high-paying continuations, like the tabular prior.
* **Exact metrics.** Two tokens from a vocabulary of 64 are 4,096 answers per
  context: one forward pass over the 64 one-token prefixes of every context
  gives the whole tree, from which the reward, tail and head mass, entropies
  and the sequence KL of each step are exact, and from which the rollouts
  are drawn (inverse-CDF draws of uniforms shared by every rule: paired seeds).
* **GRPO** with group-normalised advantages, ``epochs`` x ``minibatches``
  mini-batches per rollout batch, every token clipped by its rule's bounds of
  its old probability (``bandsolve.torch.clipped_surrogate``), under Adam at the
  study's learning rates. All rules and seeds of one learning rate train at
  once: the model's weights carry a leading replica axis (one replica per rule
  and seed), replicas share nothing, and Adam acts elementwise, so each
  replica trains exactly as it would alone.
* **The same study.** Rules, matched-step deltas from pilot seeds that are
  never reused, the fixed delta, the Holm family and the verdict are
  :mod:`bandsolve.studies.autoregressive.study`'s own (``BASE_RULES``, ``match_delta``,
  ``family``, ``holm``, ``no_clip_matches``, ``verdict``). Only the learning
  rates differ: a transformer's Adam steps are not a logit table's. SGD, a
  secondary setting in the tabular study, is not run here.

Output: ``--out`` gets one row per (phase, learning rate, rule, seed, step)
with every metric of ``autoregressive.METRICS``, appended and flushed as each
learning rate finishes (a run cut short keeps what finished); beside it,
``<out>_summary.csv`` (written whole, atomically) holds the supervised stage's
fit, the matched deltas, the family's tests with Holm p-values and the verdict.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from bandsolve._files import atomic_write, output_folder
from bandsolve.studies.autoregressive.study import (
    BANDS,
    BASE_RULES,
    FAMILY,
    ARStudyConfig,
    family,
    label,
    make_rule,
    match_delta,
    no_clip_matches,
    verdict,
)
from bandsolve.studies.autoregressive.task import (
    METRICS,
    TaskConfig,
    bucket_counts,
    grpo_advantages,
    update_and_count,
)
from bandsolve.studies.rules import SIGNS
from bandsolve.studies.stats import holm
from bandsolve.torch.losses import P_BUCKETS

ANSWER = 2  # tokens per answer


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    layers: int = 4
    width: int = 256
    heads: int = 4
    #: prompt tokens per context
    prompt: int = 4
    sft_steps: int = 300
    sft_lr: float = 3e-3

    def __post_init__(self):
        if self.width % self.heads or min(self.layers, self.prompt, self.sft_steps) < 1:
            raise ValueError(f"need width divisible by heads and layers, prompt, sft_steps >= 1 "
                             f"(got {self})")


@dataclasses.dataclass(frozen=True)
class GpuARConfig:
    study: ARStudyConfig
    model: ModelConfig = ModelConfig()
    device: str = "cuda"


def full_config(device: str = "cuda") -> GpuARConfig:
    """The one-GPU size: vocabulary 64, 32 contexts x 16 samples, 120 steps,
    16 paired seeds (4 pilot seeds), Adam at 1e-5, 3e-5 (primary) and 1e-4.
    Not yet timed on a GPU: about 5e15 floating-point operations in all
    (half in the study proper, a quarter each in the pilot and the supervised
    stage) and about 12,000 optimizer steps, so a few minutes in float32."""
    task = TaskConfig(vocab=64)
    # the pilot grid reaches below the tabular study's 0.005, where its matched step was not met;
    # the rates from a CPU probe (its own seeds, 8 contexts, 6 steps; see docs/reproduce.md):
    # at 1e-4 PPO already clipped a third of the tokens, no clip took steps of KL 0.1-0.3
    return GpuARConfig(ARStudyConfig(task=task, adam_lrs=(1e-5, 3e-5, 1e-4), primary_lr=3e-5,
                                     sgd_lr=None, fixed_at=(("adam", 3e-5),),
                                     pilot_deltas=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05)),
                       device=device)


def tiny_config() -> GpuARConfig:
    """The same code at a size that runs in seconds on one CPU core: decides nothing."""
    task = TaskConfig(vocab=16, contexts=4, group=8, steps=4)
    study = ARStudyConfig(task=task, adam_lrs=(3e-3, 3e-2), primary_lr=3e-2, sgd_lr=None,
                          seeds=3, pilot_seeds=2, pilot_deltas=(0.01, 0.1),
                          fixed_at=(("adam", 3e-2),), window=2)
    return GpuARConfig(study, ModelConfig(layers=1, width=32, heads=2, prompt=3, sft_steps=40,
                                          sft_lr=1e-2), device="cpu")


def _linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(replicas, ..., in) @ (replicas, in, out): one batched matmul over the
    replicas (``x @ weight[:, None]`` would copy the weight once per sequence)."""
    return torch.bmm(x.reshape(x.shape[0], -1, x.shape[-1]), weight).reshape(
        *x.shape[:-1], weight.shape[-1])


class ReplicaTransformer(torch.nn.Module):
    """``replicas`` independent pre-norm causal transformers as one module:
    every weight has a leading replica axis, and replica ``r`` reads only its
    own weights. Tokens (replicas, batch, time) -> logits (replicas, batch,
    time, vocab)."""

    def __init__(self, seeds, vocab: int, model: ModelConfig, stream: int):
        super().__init__()
        D, L = model.width, model.layers
        self.heads = model.heads
        T = model.prompt + ANSWER

        def init(*shape, std=0.02):  # each seed's weights from its own generator
            return torch.nn.Parameter(torch.stack([
                torch.randn(*shape, generator=gen) * std for gen in generators]))

        generators = [torch.Generator().manual_seed(int(np.random.SeedSequence(
            [stream, int(s), 2]).generate_state(1)[0])) for s in seeds]
        self.embed = init(vocab, D)
        self.position = init(T, D)
        residual = 0.02 / math.sqrt(2 * L)
        self.qkv = torch.nn.ParameterList([init(D, 3 * D) for _ in range(L)])
        self.attn_out = torch.nn.ParameterList([init(D, D, std=residual) for _ in range(L)])
        self.mlp_in = torch.nn.ParameterList([init(D, 4 * D) for _ in range(L)])
        self.mlp_out = torch.nn.ParameterList([init(4 * D, D, std=residual) for _ in range(L)])
        self.head = init(D, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        R, B, T = tokens.shape
        D = self.embed.shape[-1]
        index = torch.arange(R, device=tokens.device)[:, None, None]
        h = self.embed[index, tokens] + self.position[:, None, :T]
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
        for qkv, out, up, down in zip(self.qkv, self.attn_out, self.mlp_in, self.mlp_out):
            q, k, v = _linear(F.layer_norm(h, (D,)), qkv).chunk(3, -1)
            # written out, not scaled_dot_product_attention: a few positions but up to
            # 2**18 sequences, more than some fused kernels' grids take
            q, k, v = (x.reshape(R, B, T, self.heads, -1).transpose(2, 3) for x in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(causal, -math.inf)
            a = torch.softmax(scores, -1) @ v  # (R, B, heads, T, head width)
            h = h + _linear(a.transpose(2, 3).reshape(R, B, T, D), out)
            h = h + _linear(F.gelu(_linear(F.layer_norm(h, (D,)), up)), down)
        return _linear(F.layer_norm(h, (D,)), self.head)

    def tile(self, times: int) -> ReplicaTransformer:
        """A copy with every replica repeated ``times`` times, block after block
        (replica ``i * n + s`` is replica ``s``): one block per rule."""
        clone = copy.deepcopy(self)
        for p in clone.parameters():
            p.data = p.data.repeat(times, *(1,) * (p.dim() - 1))
        return clone


def tree(model: ReplicaTransformer, prompts: torch.Tensor, vocab: int):
    """The whole answer tree in one pass: prompts (replicas, contexts, prompt)
    -> log pi(first) (replicas, contexts, vocab) and log pi(second | first)
    (replicas, contexts, vocab, vocab)."""
    R, C, P = prompts.shape
    first = torch.arange(vocab, device=prompts.device).expand(R, C, vocab)
    tokens = torch.cat([prompts[:, :, None, :].expand(-1, -1, vocab, -1), first[..., None]], -1)
    logp = torch.log_softmax(model(tokens.reshape(R, C * vocab, P + 1)).float(), -1)
    logp = logp.reshape(R, C, vocab, P + 1, vocab)
    return logp[:, :, 0, P - 1], logp[:, :, :, P]


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of ``weights`` normalised over the last axis (0 where all are 0)."""
    total = weights.sum(-1, keepdim=True)
    q = weights / torch.where(total > 0, total, torch.ones_like(total))
    return -(q * torch.log(torch.where(q > 0, q, torch.ones_like(q)))).sum(-1)


@dataclasses.dataclass(frozen=True)
class Tree:
    """One replica set's task: the first token's pay and whether it is a tail
    token (replicas, contexts, vocab); whether a second token is kept after
    each first (replicas, contexts, vocab, vocab)."""

    pay: torch.Tensor
    tail: torch.Tensor
    ok2: torch.Tensor

    def tile(self, times: int) -> Tree:
        return Tree(*(x.repeat(times, *(1,) * (x.dim() - 1)) for x in (self.pay, self.tail,
                                                                          self.ok2)))


def exact_metrics(first: torch.Tensor, second: torch.Tensor, task: Tree) -> dict:
    """Per replica, means over contexts: expected reward, tail and head mass,
    the entropy of the first token, of the whole answer (chain rule), of the
    first token among the paying ones and given success; from the log-prob
    tree (``tree``'s output), in float64."""
    pi1, pi2 = first.double().exp(), second.double().exp()
    cont = (pi2 * task.ok2).sum(-1)  # P(second kept | first)
    paying = task.pay > 0
    out = {
        "reward": (pi1 * task.pay * cont).sum(-1),
        "tail_mass": (pi1 * task.tail).sum(-1),
        "head_mass": (pi1 * (paying & ~task.tail)).sum(-1),
        "entropy": _entropy(pi1),
        "entropy_sequence": _entropy(pi1) + (pi1 * _entropy(pi2)).sum(-1),
        "entropy_rewarding": _entropy(pi1 * paying),
        "entropy_given_success": _entropy(pi1 * paying * cont),
    }
    return {k: v.mean(-1) for k, v in out.items()}


def sequence_kl(old, new) -> torch.Tensor:
    """KL(old || new) of the answer distribution (chain rule), per replica,
    mean over contexts; ``old`` and ``new`` are (first, second) trees."""
    (o1, o2), (n1, n2) = ((a.double(), b.double()) for a, b in (old, new))
    k1 = (o1.exp() * (o1 - n1)).sum(-1)
    k2 = (o2.exp() * (o2 - n2)).sum(-1)
    return (k1 + (o1.exp() * k2).sum(-1)).mean(-1)


def _zipf_targets(task: TaskConfig, rngs, shape) -> torch.Tensor:
    """Zipf(``task.zipf``) over a random permutation per row, per seed: (seeds, *shape, vocab)."""
    V = task.vocab
    rank = np.stack([np.argsort(rng.random((*shape, V)), -1) + 1 for rng in rngs])
    w = rank.astype(float) ** -task.zipf
    return torch.tensor(w / w.sum(-1, keepdims=True), dtype=torch.float32)


def pretrain(config: GpuARConfig, seeds: int, stream: int):
    """Per seed of ``range(seeds)`` in ``stream``: a randomly initialised
    transformer fitted to the Zipf targets, the prompts, the task read off the
    fitted model, the random streams of the GRPO stage, and the fit's summary."""
    task, device = config.study.task, torch.device(config.device)
    rngs = [np.random.default_rng(np.random.SeedSequence([stream, s])) for s in range(seeds)]
    C, V = task.contexts, task.vocab
    prompts = torch.tensor(np.stack([rng.integers(V, size=(C, config.model.prompt))
                                     for rng in rngs]), device=device)
    target1 = _zipf_targets(task, rngs, (C,)).to(device)
    target2 = _zipf_targets(task, rngs, (C, V)).to(device)
    model = ReplicaTransformer(range(seeds), V, config.model, stream).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=config.model.sft_lr)
    for _ in range(config.model.sft_steps):
        first, second = tree(model, prompts, V)
        # the exact KL(target || model) of every distribution, summed over seeds
        kl1 = (target1 * (target1.log() - first)).sum(-1).mean(-1)
        kl2 = (target2 * (target2.log() - second)).sum(-1).mean((-1, -2))
        loss = (kl1 + kl2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        first, second = tree(model, prompts, V)
        rank1 = first.argsort(-1, descending=True).argsort(-1) + 1  # 1 = likeliest
        rank2 = second.argsort(-1, descending=True).argsort(-1) + 1
        tail = torch.isin(rank1, torch.tensor(task.tail_ranks, device=device))
        pay = torch.where(rank1 == 1, task.head_pay, 0.0)
        pay = torch.where(tail, task.tail_pay, pay)
        fit = dict(
            kl_first=float((target1 * (target1.log() - first)).sum(-1).mean()),
            kl_second=float((target2 * (target2.log() - second)).sum(-1).mean()),
            head_p=float(first.exp().max(-1).values.mean()),
            tail_p=float((first.exp() * tail).sum(-1).mean() / len(task.tail_ranks)))
    return model, prompts, Tree(pay, tail, rank2 <= task.keep), rngs, fit


def train_setting(config: GpuARConfig, rules: list, lr: float, seeds: int, stream: int,
                  pretrained) -> dict:
    """GRPO under Adam at ``lr`` for each (label, rule) of ``rules``, over
    ``seeds`` paired seeds at once, from ``pretrained`` (``pretrain``'s output:
    it is copied, not changed). Returns {label: {metric: (steps, seeds)}}."""
    task, device = config.study.task, torch.device(config.device)
    base, prompts0, task0, _, _ = pretrained
    rngs = [np.random.default_rng(np.random.SeedSequence([stream, s, 1])) for s in range(seeds)]
    n = len(rules)
    N, C, V, G = n * seeds, task.contexts, task.vocab, task.group
    B = C * G // task.minibatches
    model = base.tile(n).to(device)
    prompts, tree_task = prompts0.repeat(n, 1, 1), task0.tile(n)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    cs = torch.arange(C, device=device)[None, :, None]
    ns = torch.arange(N, device=device)[:, None, None]
    history: dict[str, list] = {m: [] for m in METRICS}
    with torch.no_grad():
        now = tree(model, prompts, V)
    for _ in range(task.steps):
        with torch.no_grad():
            u = torch.tensor(np.stack([rng.random((C, G, ANSWER)) for rng in rngs]),
                             device=device).repeat(n, 1, 1, 1)
            cdf1 = now[0].double().exp().cumsum(-1)  # (N, C, V)
            t1 = (cdf1[:, :, None, :] <= u[..., 0:1]).sum(-1).clamp(max=V - 1)  # (N, C, G)
            cdf2 = now[1].double().exp().cumsum(-1)[ns, cs, t1]  # (N, C, G, V)
            t2 = (cdf2 <= u[..., 1:2]).sum(-1).clamp(max=V - 1)
            reward = tree_task.pay[ns, cs, t1] * tree_task.ok2[ns, cs, t1, t2]
            advantage = grpo_advantages(reward.float())[..., None].expand(-1, -1, -1, ANSWER)
            old = torch.stack([now[0][ns, cs, t1], now[1][ns, cs, t1, t2]], -1)
            inputs = torch.cat([prompts[:, :, None, :].expand(-1, -1, G, -1), t1[..., None]], -1)
            inputs, answer = inputs.reshape(N, C * G, -1), torch.stack([t1, t2], -1)
            answer, advantage, old = (x.reshape(N, C * G, ANSWER)
                                      for x in (answer, advantage, old))
            bounds = [rule.bounds(old[i * seeds:(i + 1) * seeds]) for i, (_, rule) in
                      enumerate(rules)]
            lower = torch.cat([b[0].to(old.dtype) for b in bounds])
            upper = torch.cat([b[1].to(old.dtype) for b in bounds])
        counts = torch.zeros(N, C * G, ANSWER, dtype=torch.float64, device=device)
        for _ in range(task.epochs):
            order = torch.tensor(np.stack([rng.permutation(C * G) for rng in rngs]),
                                 device=device).repeat(n, 1)
            for m in range(task.minibatches):
                pick = order[:, m * B:(m + 1) * B]
                x = inputs.gather(1, pick[..., None].expand(-1, -1, inputs.shape[-1]))
                tok, adv, old_b, lo, hi = (y.gather(1, pick[..., None].expand(-1, -1, ANSWER))
                                           for y in (answer, advantage, old, lower, upper))
                logits = model(x)[:, :, -ANSWER:].float()  # the two answer positions
                new = torch.log_softmax(logits, -1).gather(-1, tok[..., None])[..., 0]
                ratio = torch.exp(new - old_b)
                update_and_count(opt, ratio, adv, lo, hi, C, counts,
                                 pick[..., None].expand(-1, -1, ANSWER))
        with torch.no_grad():
            clip_n, clip_t = bucket_counts(counts, task.epochs, old, advantage)
            new_tree = tree(model, prompts, V)
            step = exact_metrics(new_tree[0], new_tree[1], tree_task)
            step["step_kl"] = sequence_kl(now, new_tree)
            step["clipfrac"] = clip_n.sum((1, 2)) / clip_t.sum((1, 2)).clamp(min=1)
            share = torch.where(clip_t > 0, clip_n / clip_t.clamp(min=1),
                                torch.full_like(clip_t, math.nan))
            for a, sign in enumerate(SIGNS):
                for b, (name, _, _) in enumerate(P_BUCKETS):
                    step[f"clip/{sign}/{name}"] = share[:, a, b]
            for key in METRICS:
                history[key].append(step[key].cpu().numpy())
            now = new_tree
    out = {}
    for i, (name, _) in enumerate(rules):
        out[name] = {k: np.asarray(v, dtype=float)[:, i * seeds:(i + 1) * seeds]
                     for k, v in history.items()}
    return out


class _Rows:
    """The per-step CSV: appended and flushed row by row as runs finish."""

    FIELDS = ("phase", "optimizer", "lr", "rule", "delta", "seed", "step", *METRICS)

    def __init__(self, path: str):
        self._fh = open(path, "w", newline="")
        self._writer = csv.writer(self._fh)
        self._writer.writerow(self.FIELDS)
        self._fh.flush()

    def write(self, phase, lr, name, delta, history):
        steps, seeds = history[METRICS[0]].shape
        for s in range(seeds):
            for t in range(steps):
                self._writer.writerow([phase, "adam", f"{lr:g}", name, f"{delta:.6g}", s, t + 1,
                                       *(f"{history[m][t, s]:.6g}" for m in METRICS)])
                self._fh.flush()

    def close(self):
        self._fh.close()


def run(config: GpuARConfig, out: str, log=print) -> dict:
    """Pilot, study, the per-step CSV ``out`` and its summary; returns the
    summary as a dict (the verdict, the tests, the matched deltas, timings)."""
    study = config.study
    output_folder(os.path.dirname(os.path.abspath(out)), "--out's folder")
    rows = _Rows(out)
    t0 = time.perf_counter()
    summary: list[tuple] = []
    try:
        pilot_model = pretrain(config, study.pilot_seeds, stream=1)
        study_model = pretrain(config, study.seeds, stream=0)
        for phase, (_, _, _, _, fit) in (("pilot", pilot_model), ("study", study_model)):
            summary += [("sft", f"{phase} {k}", f"{v:.6g}") for k, v in fit.items()]
        log(f"supervised stage done in {time.perf_counter() - t0:.1f} s: {study_model[4]}")
        matched = {}
        for lr in study.adam_lrs:  # the pilot: PPO and each band over the delta grid
            rules = [("ppo", make_rule("ppo", 0.0))]
            rules += [(f"{b}@{d:g}", make_rule(b, d)) for b in BANDS for d in study.pilot_deltas]
            histories = train_setting(config, rules, lr, study.pilot_seeds, 1, pilot_model)
            for name, h in histories.items():
                rows.write("pilot", lr, name, float(name.partition("@")[2] or 0), h)
            target = float(np.mean(histories["ppo"]["step_kl"]))
            matched[("adam", lr)] = {b: match_delta(
                study.pilot_deltas, [float(np.mean(histories[f"{b}@{d:g}"]["step_kl"]))
                                     for d in study.pilot_deltas], target) for b in BANDS}
            log(f"pilot lr {lr:g} done at {time.perf_counter() - t0:.1f} s: "
                f"{matched[('adam', lr)]}")
        results = {}
        for lr in study.adam_lrs:
            setting = ("adam", lr)
            deltas = {r: (matched[setting][r][0] if r in BANDS else 0.0) for r in BASE_RULES}
            if setting in study.fixed_at:
                for b in BANDS:
                    deltas[label(b, study.fixed_delta, study.fixed_delta)] = study.fixed_delta
            rules = [(name, make_rule(name.partition("@")[0], d)) for name, d in deltas.items()]
            histories = train_setting(config, rules, lr, study.seeds, 0, study_model)
            for name, h in histories.items():
                rows.write("study", lr, name, deltas[name], h)
                results[(setting, name)] = h
            log(f"study lr {lr:g} done at {time.perf_counter() - t0:.1f} s")
    finally:
        rows.close()
    tests = family(results, study)
    adjusted = dict(zip(FAMILY, holm([tests[n]["p"] for n in FAMILY])))
    matches = no_clip_matches(results, study)
    outcome = verdict(tests, adjusted, matches)
    seconds = time.perf_counter() - t0
    for setting, bands in matched.items():
        for b, (delta, inside) in bands.items():
            summary.append(("matched delta", f"{b} lr {setting[1]:g}",
                            f"{delta:.6g}" + ("" if inside else " (outside the pilot grid)")))
    for n in FAMILY:
        t = tests[n]
        summary.append(("test", n, f"{t['mean']:+.4g} [{t['low']:+.4g}, {t['high']:+.4g}] "
                                   f"d_z {t['d']:+.2f} p {t['p']:.3g} Holm p {adjusted[n]:.3g}"))
    for lr, match in matches.items():
        summary.append(("no clip matches band-kl", f"lr {lr:g}", str(match)))
    summary += [("verdict", outcome[0], "; ".join(outcome[2]) or "every test held"),
                ("run", "device", str(torch.cuda.get_device_name()
                                      if config.device.startswith("cuda") else "cpu")),
                ("run", "torch", torch.__version__),
                ("run", "date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
                ("run", "seconds", f"{seconds:.1f}"), ("run", "seeds", str(study.seeds))]
    with atomic_write(_summary_path(out), newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["part", "name", "value"])
        writer.writerows(summary)
    return dict(results=results, matched=matched, tests=tests, adjusted=adjusted,
                no_clip_matches=matches, verdict=outcome, seconds=seconds, summary=summary)


def _summary_path(out: str) -> str:
    stem, ext = os.path.splitext(out)
    return f"{stem}_summary{ext or '.csv'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("benchmarks", "gpu_ar_study.csv"))
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--tiny", action="store_true",
                        help="a tiny size on the CPU, in seconds (decides nothing)")
    args = parser.parse_args(argv)
    config = tiny_config() if args.tiny else full_config(args.device)
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device; use --tiny (or --device cpu) to run on the CPU")
    if config.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False  # ratios near 1 need full float32
    try:
        result = run(config, args.out)
    except KeyboardInterrupt:
        print("interrupted: the rows so far are in", args.out)
        return 130
    print(f"verdict: {result['verdict'][0]} ({'; '.join(result['verdict'][2])}); "
          f"{result['seconds']:.1f} s; summary in {_summary_path(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
