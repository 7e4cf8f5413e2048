"""The tail-token bandit: does fixed clipping freeze the tail, and does the band not?

Per context, a softmax policy over a vocabulary of ``vocab`` tokens, started
from Zipf logits -s log(rank). One head token (rank 2) pays 1 with
probability ``head_pay`` and ten tail tokens (ranks 21, 41, ..., 201) with the
larger ``tail_pay``: the tail holds the high-advantage strategies. Every other
token pays 0. GRPO (group-normalised advantages) with several optimisation
epochs per rollout batch, so that ratios leave 1 and clipping acts; plain SGD
on the logits by default. The losses are ``bandsolve.torch``'s
(``clipped_surrogate`` with each rule's bounds).

Tracked per step and seed (:data:`METRICS`): the entropy of the policy, among
the rewarding tokens, and of the paying token given success; the expected
reward; the mass on the paying tail and the share of contexts whose tail
holds most of the mass; the per-step KL(pi_old || pi_new); and the clip share
by sign of the advantage and old-probability bucket.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from bandsolve.torch import clipped_surrogate
from bandsolve.torch.losses import P_BUCKETS

from ..rules import SIGNS, rule_object
from ..stats import nanmean

__all__ = ["BanditConfig", "LATE_METRICS", "METRICS", "entropy_at_regret", "late_per_seed",
           "late_regret", "max_step_kl", "regret", "run_bandit"]


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


METRICS = ("entropy", "entropy_rewarding", "entropy_given_success", "success",
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
    Returns {metric: array (steps, seeds)} for ``METRICS``; fewer rows
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
    history: dict[str, Any] = {name: [] for name in METRICS}
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


#: metrics summarised late in training, per seed
LATE_METRICS = ("entropy", "entropy_rewarding", "entropy_given_success", "success",
                "tail_mass", "tail_share")


def late_per_seed(history, window: int = 50) -> dict[str, np.ndarray]:
    """Per seed: each of ``LATE_METRICS`` averaged over the last ``window`` steps."""
    return {m: nanmean(history[m][-window:], axis=0) for m in LATE_METRICS}


def entropy_at_regret(history, config: BanditConfig, level: float) -> np.ndarray:
    """Per seed, along its own trajectory: the entropy of the paying token
    given success at the first step whose regret is at most ``level`` (NaN
    where the seed never gets there): entropy at matched current reward."""
    reached = regret(history, config) <= level
    first = np.argmax(reached, axis=0)
    values = history["entropy_given_success"][first, np.arange(first.size)]
    return np.where(reached.any(axis=0), values, np.nan)


def max_step_kl(history) -> np.ndarray:
    """Per seed: the largest per-step KL(pi_old || pi_new) of the run (its
    worst update; lower is more stable)."""
    return np.nanmax(history["step_kl"], axis=0)


def late_regret(history, config: BanditConfig, window: int = 20) -> np.ndarray:
    """Per seed: regret averaged over the last ``window`` steps."""
    return nanmean(regret(history, config)[-window:], axis=0)
