"""A tabular autoregressive task where a rewarded head competes with a rarer,
higher-paying tail, trained with GRPO in the LLM trainers' regime (issue 30).

The policy writes ``length = 3`` tokens from a vocabulary of ``vocab`` tokens.
It is first-order autoregressive: each token's distribution is a softmax over
its own logits, one table per state ``(context, position, previous token)``,
so a context has ``1 + 2 * vocab`` states (the first position; the second
after each first token; the third after each second token). The
"pretrained" policy, where training starts, puts Zipf(``zipf``) logits
``-zipf * log(rank)`` on a random permutation of the vocabulary in every
state, drawn from the seed.

The reward, per context:

* the first token is the decision: the prior's likeliest token (the head) pays
  ``head_pay``; the tokens of prior ranks ``tail_ranks`` (p about 0.02-0.035 at
  the start) pay ``tail_pay > head_pay``; every other first token pays 0;
* the payment is made only if the second and the third tokens are each among
  the ``keep`` likeliest tokens of their state under the prior, so that any
  mixture of the tail tokens is optimal and entropy among them is not forced
  to 0 (the continuation must be learnt too, after a tail token from its own
  rarely visited state).

Every metric is exact, computed from the enumerated tree (:func:`exact_metrics`,
checked against a brute-force enumeration and against sampling in
tests/test_autoregressive.py). GRPO: ``group`` samples per context,
advantages normalised within the group, ``epochs`` passes of ``minibatches``
shuffled mini-batches per rollout batch, every token clipped by the rule's
bounds of its old probability (``bandsolve.torch.clipped_surrogate``), Adam
(``torch.optim.Adam``) or SGD. All seeds train at once, one batch dimension;
each seed has its own random stream, shared by every rule (paired seeds: the
sampling uses inverse-CDF draws of the same uniforms).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from bandsolve.torch import clipped_surrogate
from bandsolve.torch.losses import P_BUCKETS

from ..rules import SIGNS


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """The task and its GRPO schedule (one frozen value: runs are named by it)."""

    vocab: int = 16
    zipf: float = 1.1
    #: prior ranks (1-based) of the high-paying first tokens
    tail_ranks: tuple = (8, 10, 12, 14)
    head_pay: float = 0.5
    tail_pay: float = 1.0
    #: the continuation pays if each later token is among its state's ``keep`` likeliest
    keep: int = 3
    contexts: int = 32
    group: int = 16
    epochs: int = 4
    minibatches: int = 4
    steps: int = 120

    def __post_init__(self):
        if not 1 < self.keep < self.vocab or max(self.tail_ranks) > self.vocab \
                or min(self.tail_ranks) < 2:
            raise ValueError(f"tail_ranks must lie in 2..vocab and keep in 2..vocab-1 (got "
                             f"tail_ranks {self.tail_ranks}, keep {self.keep}, vocab {self.vocab})")
        if (self.contexts * self.group) % self.minibatches:
            raise ValueError(f"contexts * group ({self.contexts * self.group}) must split into "
                             f"{self.minibatches} equal mini-batches")
        if not 0 < self.head_pay < self.tail_pay:
            raise ValueError(f"need 0 < head_pay < tail_pay (got {self.head_pay}, "
                             f"{self.tail_pay}): the tail must pay more than the head")

    @property
    def states(self) -> int:
        """States per context: the first position, then one per previous token at each later one."""
        return 1 + 2 * self.vocab


LENGTH = 3
#: what a run records per step (after that step's update) and seed
METRICS = ("reward", "tail_mass", "head_mass", "entropy", "entropy_sequence",
           "entropy_rewarding", "entropy_given_success", "step_kl", "clipfrac",
           *(f"clip/{sign}/{name}" for sign in SIGNS for name, _, _ in P_BUCKETS))


@dataclasses.dataclass(frozen=True)
class Task:
    """One seed's task: the prior logits (contexts, states, vocab), the first
    token's pay (contexts, vocab), and whether the second and third tokens are
    kept (contexts, previous token, token)."""

    prior: np.ndarray
    pay: np.ndarray
    tail: np.ndarray
    ok2: np.ndarray
    ok3: np.ndarray


def make_task(config: TaskConfig, rng: np.random.Generator) -> Task:
    """The task of one seed, drawn from ``rng``."""
    C, S, V = config.contexts, config.states, config.vocab
    rank = np.argsort(rng.random((C, S, V)), axis=-1) + 1  # a random permutation per state
    prior = -config.zipf * np.log(rank.astype(float))
    first = rank[:, 0, :]
    pay = np.where(first == 1, config.head_pay, 0.0)
    tail = np.isin(first, config.tail_ranks)
    pay = np.where(tail, config.tail_pay, pay)
    kept = rank <= config.keep
    return Task(prior, pay, tail, kept[:, 1:1 + V, :], kept[:, 1 + V:, :])


def _split(probs: np.ndarray, vocab: int):
    """(first, second given first, third given second) from (..., states, vocab)."""
    return probs[..., 0, :], probs[..., 1:1 + vocab, :], probs[..., 1 + vocab:, :]


def _entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy (nats) of ``weights`` normalised over the last axis."""
    total = weights.sum(-1, keepdims=True)
    q = weights / np.where(total > 0, total, 1.0)
    return -(q * np.log(np.where(q > 0, q, 1.0))).sum(-1)


def exact_metrics(log_probs: np.ndarray, task: Task) -> dict[str, np.ndarray]:
    """Exact metrics of the policy ``log_probs`` (..., contexts, states,
    vocab) on ``task`` (its arrays with the same leading axes), each a mean
    over contexts: expected reward; mass of the tail and of the head first
    tokens; entropy of the first token, of the whole sequence (chain rule), of
    the first token among the paying ones, and of the first token given that
    the sequence was rewarded. Leading axes (seeds) are kept."""
    V = log_probs.shape[-1]
    pi1, pi2, pi3 = _split(np.exp(log_probs), V)
    q3 = (pi3 * task.ok3).sum(-1)  # P(third kept | second), (..., C, V)
    cont = (pi2 * task.ok2 * q3[..., None, :]).sum(-1)  # P(continuation kept | first)
    paying = task.pay > 0
    m2 = np.einsum("...cv,...cvw->...cw", pi1, pi2)  # marginal of the second token
    seq_entropy = (_entropy(pi1) + (pi1 * _entropy(pi2)).sum(-1)
                   + (m2 * _entropy(pi3)).sum(-1))
    out = {
        "reward": (pi1 * task.pay * cont).sum(-1),
        "tail_mass": (pi1 * task.tail).sum(-1),
        "head_mass": (pi1 * (paying & ~task.tail)).sum(-1),
        "entropy": _entropy(pi1),
        "entropy_sequence": seq_entropy,
        "entropy_rewarding": _entropy(pi1 * paying),
        "entropy_given_success": _entropy(pi1 * paying * cont),
    }
    return {k: v.mean(-1) for k, v in out.items()}


def sequence_kl(old_log_probs: np.ndarray, new_log_probs: np.ndarray):
    """KL(pi_old || pi_new) of the whole sequence distribution (chain rule),
    mean over contexts; arrays (..., contexts, states, vocab). A float, or
    an array over the leading axes (seeds)."""
    V = old_log_probs.shape[-1]
    per_state = (np.exp(old_log_probs) * (old_log_probs - new_log_probs)).sum(-1)  # (..., C, S)
    k1, k2, k3 = per_state[..., 0], per_state[..., 1:1 + V], per_state[..., 1 + V:]
    pi1, pi2, _ = _split(np.exp(old_log_probs), V)
    m2 = np.einsum("...cv,...cvw->...cw", pi1, pi2)
    kl = (k1 + (pi1 * k2).sum(-1) + (m2 * k3).sum(-1)).mean(-1)
    return float(kl) if np.ndim(kl) == 0 else kl


def sample(log_probs: torch.Tensor, uniforms: torch.Tensor, vocab: int):
    """Inverse-CDF samples of whole sequences: ``log_probs`` (seeds, contexts,
    states, vocab), ``uniforms`` (seeds, contexts, group, 3) in [0, 1).
    Returns (local state, token), each (seeds, contexts, group, 3)."""
    cdf = log_probs.exp().cumsum(-1)
    cdf[..., -1] = 1.0  # no token is lost to rounding
    seeds, contexts, group, _ = uniforms.shape
    states, tokens = [], []
    state = torch.zeros(seeds, contexts, group, dtype=torch.long)
    for k in range(LENGTH):
        rows = torch.gather(cdf, 2, state[..., None].expand(-1, -1, -1, vocab))
        token = (rows <= uniforms[..., k:k + 1]).sum(-1).clamp(max=vocab - 1)
        states.append(state)
        tokens.append(token)
        state = 1 + k * vocab + token  # the next position's state after this token
    return torch.stack(states, -1), torch.stack(tokens, -1)


def grpo_advantages(reward: torch.Tensor) -> torch.Tensor:
    """(r - group mean) / (group std + 1e-6) over the last axis (the group)."""
    return (reward - reward.mean(-1, keepdim=True)) / (reward.std(-1, keepdim=True) + 1e-6)


def bucket_counts(counts, updates: int, old_log_prob, advantage):
    """Per replica, sign of the advantage and p bucket of the old
    probability: (clipped token-updates, token-updates), each (replicas, 2,
    buckets), float64. ``counts`` (replicas, tokens, ...) holds how many of
    each token's ``updates`` updates (one per epoch) the clip zeroed, as
    :func:`update_and_count` adds them up; every token is updated once per
    epoch, so a class's token-updates are ``updates`` times its tokens."""
    p = old_log_prob.exp()
    clipped_n, total = [], []
    for sign in (advantage > 0, advantage < 0):
        row_c, row_t = [], []
        for _, low, high in P_BUCKETS:
            inside = (p >= low) & (p < high) & sign
            row_c.append((counts * inside).flatten(1).sum(1))
            row_t.append(inside.flatten(1).sum(1).to(torch.float64) * updates)
        clipped_n.append(torch.stack(row_c, 1))
        total.append(torch.stack(row_t, 1))
    return torch.stack(clipped_n, 1).double(), torch.stack(total, 1).double()


def update_and_count(optimizer, ratio, advantage, lower, upper, scale: float, counts, pick):
    """One mini-batch update of the clipped surrogate, and its clip count.

    ``ratio``, ``advantage``, ``lower``, ``upper``: (replicas, tokens of the
    mini-batch, positions); the loss is each replica's mean of
    ``clipped_surrogate`` times ``scale``, summed over replicas (their
    parameters are disjoint, so each trains as it would alone). Then adds 1
    to ``counts`` (replicas, tokens of the rollout batch, positions) at
    ``pick`` (the mini-batch's tokens there, ``ratio``'s shape) wherever the
    clip zeroed this update's gradient: ratio above the upper bound with a
    positive advantage, or below the lower with a negative one."""
    loss = clipped_surrogate(ratio, advantage, lower, upper).mean((1, 2)).sum() * scale
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        clipped = ((ratio > upper) & (advantage > 0)) | ((ratio < lower) & (advantage < 0))
        counts.scatter_add_(1, pick, clipped.to(counts.dtype))


def stack_tasks(tasks) -> Task:
    """The tasks of several replicas as one, with a leading replica axis."""
    return Task(*(np.stack([getattr(t, f.name) for t in tasks])
                  for f in dataclasses.fields(Task)))


def train(rule, config: TaskConfig, seeds, optimizer: str = "adam", lr: float = 0.1,
          stream: int = 0, dtype=torch.float32) -> dict[str, np.ndarray]:
    """Train one policy per seed of ``seeds`` (ints) with ``rule`` (an object
    with ``bounds(old_log_prob) -> (lower, upper)``). Seed ``s``'s task and
    random stream come from ``SeedSequence([stream, s])``, whatever the other
    seeds: ``stream`` keeps pilot seeds apart from the study's.

    The loss of a mini-batch is the mean over its tokens of
    ``clipped_surrogate``, times ``contexts`` (each context then learns at a
    rate that does not shrink with their number; Adam ignores the scale),
    summed over seeds (their parameters are disjoint). Returns {metric:
    array (steps, seeds)} of ``METRICS``; the clip shares count every
    token-update of the step (NaN where a sign and bucket is empty).
    """
    return train_rules([rule], config, seeds, optimizer, lr, stream, dtype)[0]


def train_rules(rules, config: TaskConfig, seeds, optimizer: str = "adam", lr: float = 0.1,
                stream: int = 0, dtype=torch.float32) -> list[dict[str, np.ndarray]]:
    """:func:`train` for each rule of ``rules`` at once, on the same seeds:
    one replica per (rule, seed), all in one table. A seed's task, uniforms
    and mini-batch orders are drawn once and shared by its replicas, so each
    rule's result is the one :func:`train` gives it alone (the replicas
    share no parameter, and Adam and SGD act elementwise). Returns one
    history per rule, in order."""
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"optimizer must be 'adam' or 'sgd' (got {optimizer!r})")
    rules = list(rules)
    seeds = [int(s) for s in seeds]
    rngs = [np.random.default_rng(np.random.SeedSequence([stream, s])) for s in seeds]
    tasks = stack_tasks([make_task(config, rng) for rng in rngs] * len(rules))
    n = len(seeds)
    N, C, S, V, G = n * len(rules), config.contexts, config.states, config.vocab, config.group
    B = C * G // config.minibatches
    logits = torch.tensor(tasks.prior, dtype=dtype)
    logits.requires_grad_()
    opt = (torch.optim.Adam([logits], lr=lr, foreach=True) if optimizer == "adam"
           else torch.optim.SGD([logits], lr=lr))
    table = logits.view(N, C * S, V)  # one row per state
    pay = torch.tensor(tasks.pay, dtype=dtype)
    ok2 = torch.tensor(tasks.ok2)
    ok3 = torch.tensor(tasks.ok3)
    offset = (torch.arange(C) * S)[None, :, None, None]  # each context's first state
    cs = torch.arange(C)[None, :, None]
    ns = torch.arange(N)[:, None, None]
    history: dict[str, list] = {m: [] for m in METRICS}
    with torch.no_grad():
        log_pi = torch.log_softmax(logits, -1)
    for _ in range(config.steps):
        with torch.no_grad():
            u = torch.tensor(np.stack([rng.random((C, G, LENGTH)) for rng in rngs]),
                             dtype=dtype).repeat(len(rules), 1, 1, 1)
            state, token = sample(log_pi, u, V)
            t1, t2, t3 = token.unbind(-1)
            reward = pay[ns, cs, t1] * ok2[ns, cs, t1, t2] * ok3[ns, cs, t2, t3]
            advantage = grpo_advantages(reward)[..., None].expand(-1, -1, -1, LENGTH)
            row = (offset + state).reshape(N, C * G, LENGTH)  # the state's row in the table
            token = token.reshape(N, C * G, LENGTH)
            old = log_pi.reshape(N, C * S, V).gather(
                1, row.flatten(1)[..., None].expand(-1, -1, V)).gather(
                2, token.flatten(1)[..., None]).reshape(row.shape)
            advantage = advantage.reshape(N, C * G, LENGTH)
            bounds = [rule.bounds(old[i * n:(i + 1) * n]) for i, rule in enumerate(rules)]
            lower = torch.cat([b[0].to(dtype) for b in bounds])
            upper = torch.cat([b[1].to(dtype) for b in bounds])
        counts = torch.zeros(N, C * G, LENGTH, dtype=torch.float64)
        for _ in range(config.epochs):
            order = torch.tensor(np.stack([rng.permutation(C * G) for rng in rngs])
                                 ).repeat(len(rules), 1)
            for m in range(config.minibatches):
                pick = order[:, m * B:(m + 1) * B, None].expand(-1, -1, LENGTH)
                rows, toks, adv, old_b, lo, hi = (
                    x.gather(1, pick) for x in (row, token, advantage, old, lower, upper))
                # log-softmax of the visited rows only: the others get no gradient
                visited = table.gather(1, rows.flatten(1)[..., None].expand(-1, -1, V))
                new = torch.log_softmax(visited, -1).gather(2, toks.flatten(1)[..., None])
                ratio = torch.exp(new.reshape(rows.shape) - old_b)
                update_and_count(opt, ratio, adv, lo, hi, C, counts, pick)
        with torch.no_grad():
            new_log_pi = torch.log_softmax(logits, -1)
            clip_n, clip_t = bucket_counts(counts, config.epochs, old, advantage)
        old_np = log_pi.reshape(N, C, S, V).double().numpy()
        new_np = new_log_pi.reshape(N, C, S, V).double().numpy()
        for key, value in exact_metrics(new_np, tasks).items():
            history[key].append(value)
        history["step_kl"].append(sequence_kl(old_np, new_np))
        signed = clip_t.sum((1, 2))
        history["clipfrac"].append((clip_n.sum((1, 2)) / signed.clamp(min=1)).numpy())
        share = torch.where(clip_t > 0, clip_n / clip_t.clamp(min=1),
                            torch.full_like(clip_t, math.nan)).numpy()
        for a, sign in enumerate(SIGNS):
            for b, (name, _, _) in enumerate(P_BUCKETS):
                history[f"clip/{sign}/{name}"].append(share[:, a, b])
        log_pi = new_log_pi
    whole = {k: np.asarray(v, dtype=float).reshape(config.steps, N) for k, v in history.items()}
    return [{k: v[:, i * n:(i + 1) * n] for k, v in whole.items()} for i in range(len(rules))]
