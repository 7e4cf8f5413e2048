"""GRPO in the LLM trainers' regime, for every replica of a policy at once.

A *policy* here holds ``replicas`` independent policies in one module (every
weight has a leading replica axis and replica ``r`` reads only its own), and
offers two things:

* ``table()``: the log-probabilities of every state (replicas, contexts,
  states, vocab), the whole answer tree (:mod:`.task`);
* ``log_probs(contexts, tokens)``: the log-probabilities, with gradient, of
  sampled answers ``tokens`` (replicas, batch, length) in ``contexts``
  (replicas, batch).

:func:`train` runs GRPO on it: ``group`` answers per context drawn exactly
from the table, advantages normalised within the group, ``epochs`` passes of
``minibatches`` shuffled mini-batches per rollout batch, every token clipped
by its rule's bounds of its old probability
(:func:`bandsolve.torch.clipped_surrogate`), Adam. Replica ``i * seeds + s``
runs rule ``i`` on seed ``s``; a seed's uniforms and mini-batch orders are
drawn once and shared by its replicas, so every rule sees the same draws
(paired seeds). The loss is each replica's mean over its mini-batch's tokens,
times ``contexts`` (each context then learns at a rate that does not shrink
with their number), summed over replicas: their parameters are disjoint and
Adam acts elementwise, so each replica trains exactly as it would alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from bandsolve.torch import clipped_surrogate
from bandsolve.torch.losses import P_BUCKETS

from .task import (
    CLASSES,
    METRICS,
    SIGNS,
    Task,
    TaskConfig,
    exact_metrics,
    grpo_advantages,
    replica_context_index,
    rewards,
    sample,
    sequence_kl,
)

_EDGES = [low for _, low, _ in P_BUCKETS[1:]]


def _token_classes(task: Task, tokens: torch.Tensor) -> torch.Tensor:
    """Each sampled token's class index in :data:`CLASSES` (replicas, contexts, group, length)."""
    r, c = replica_context_index(tokens)
    first = tokens[..., 0]
    cls = torch.full_like(tokens, CLASSES.index("later"))
    cls[..., 0] = torch.where(task.head[r, c, first], CLASSES.index("head"),
                              torch.where(task.tail[r, c, first], CLASSES.index("tail"),
                                          CLASSES.index("other")))
    return cls


def clip_shares(counts: torch.Tensor, updates: int, old_log_prob: torch.Tensor,
                advantage: torch.Tensor, classes: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per replica, the share of token-updates the clip zeroed: overall, by
    sign of the advantage and p bucket of the old probability, and by sign
    and token class. ``counts`` (replicas, tokens...) holds how many of each
    token's ``updates`` updates (one per epoch) were clipped; every token with
    a nonzero advantage is updated once per epoch. NaN where a class is empty."""
    R = counts.shape[0]
    counts, adv = counts.reshape(R, -1).double(), advantage.reshape(R, -1)
    edges = torch.tensor(_EDGES, dtype=torch.float64, device=counts.device)
    bucket = torch.bucketize(old_log_prob.reshape(R, -1).double().exp(), edges, right=True)
    cls = classes.reshape(R, -1)

    def share(mask):
        total = mask.sum(1).double() * updates
        return torch.where(total > 0, (counts * mask).sum(1) / total.clamp(min=1),
                           torch.full_like(total, math.nan))

    signed = adv != 0
    out = {"clipfrac": (counts * signed).sum(1) / (signed.sum(1).double() * updates).clamp(min=1)}
    for sign, mask in zip(SIGNS, (adv > 0, adv < 0)):
        for i, (name, _, _) in enumerate(P_BUCKETS):
            out[f"clip/{sign}/{name}"] = share(mask & (bucket == i))
        for i, name in enumerate(CLASSES):
            out[f"clip/{sign}/{name}"] = share(mask & (cls == i))
    return out


def train(policy, task: Task, rules: Sequence, seeds: int, rngs: Sequence[np.random.Generator],
          config: TaskConfig, lr: float) -> dict[str, np.ndarray]:
    """GRPO under Adam at ``lr`` for ``config.steps`` steps: ``policy`` holds
    ``len(rules) * seeds`` replicas, replica ``i * seeds + s`` clipped by
    ``rules[i]`` (an object with ``bounds(old_log_prob) -> (lower, upper)``)
    on seed ``s``, whose draws come from ``rngs[s]``; ``task`` is the reward
    per replica. Returns {metric: (steps, replicas)} of :data:`METRICS`."""
    n = len(rules)
    R, C, G, L = n * seeds, config.contexts, config.group, config.length
    B = C * G // config.minibatches
    if policy.replicas != R or len(rngs) != seeds:
        raise ValueError(f"the policy holds {policy.replicas} replicas and {len(rngs)} streams, "
                         f"for {n} rules x {seeds} seeds")
    params = list(policy.parameters())
    opt = torch.optim.Adam(params, lr=lr, foreach=True)
    dtype, device = params[0].dtype, params[0].device
    context = torch.arange(C, device=device).repeat_interleave(G).expand(R, -1)
    r = torch.arange(R, device=device)[:, None, None, None]
    c = torch.arange(C, device=device)[None, :, None, None]
    flat = (R, C * G, L)
    history: dict[str, list] = {m: [] for m in METRICS}
    with torch.no_grad():  # renormalised in float64: the exact metrics and KL need it
        table = policy.table().double().log_softmax(-1)
    for _ in range(config.steps):
        draws = np.stack([rng.random((C, G, L)) for rng in rngs])
        u = torch.from_numpy(np.concatenate([draws] * n)).to(device)
        with torch.no_grad():
            state, token = sample(table, u)
            advantage = grpo_advantages(rewards(task, token))[..., None].expand(-1, -1, -1, L)
            old = table[r, c, state, token]  # (R, C, G, L), float64
            classes = _token_classes(task, token)
            bounds = [rule.bounds(old[i * seeds:(i + 1) * seeds].reshape(-1, *flat[1:]))
                      for i, rule in enumerate(rules)]
            lower = torch.cat([b[0] for b in bounds]).to(dtype)
            upper = torch.cat([b[1] for b in bounds]).to(dtype)
        old_m, adv_m = old.reshape(flat).to(dtype), advantage.reshape(flat).to(dtype)
        tokens = token.reshape(flat)
        counts = torch.zeros(flat, dtype=torch.float64, device=device)
        for _ in range(config.epochs):
            orders = np.stack([rng.permutation(C * G) for rng in rngs])
            order = torch.from_numpy(np.concatenate([orders] * n)).to(device)
            for m in range(config.minibatches):
                pick = order[:, m * B:(m + 1) * B]
                pick3 = pick[..., None].expand(-1, -1, L)
                tok, old_b, adv, lo, hi = (x.gather(1, pick3)
                                           for x in (tokens, old_m, adv_m, lower, upper))
                new = policy.log_probs(context.gather(1, pick), tok)
                ratio = torch.exp(new - old_b)
                loss = clipped_surrogate(ratio, adv, lo, hi).mean((1, 2)).sum() * C
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    clipped = ((ratio > hi) & (adv > 0)) | ((ratio < lo) & (adv < 0))
                    counts.scatter_add_(1, pick3, clipped.to(counts.dtype))
        with torch.no_grad():
            new_table = policy.table().double().log_softmax(-1)
            step = exact_metrics(new_table, task)
            step["step_kl"] = sequence_kl(table, new_table, L)
            step.update(clip_shares(counts, config.epochs, old, advantage, classes))
        for key in METRICS:
            history[key].append(step[key].cpu().numpy())
        table = new_table
    return {k: np.asarray(v, dtype=np.float64) for k, v in history.items()}
