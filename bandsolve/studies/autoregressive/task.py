"""The autoregressive task: a rewarded head competes with a rarer tail that
pays more, and every metric is exact.

A policy writes ``length`` tokens from a vocabulary of ``vocab`` in each of
``contexts`` contexts. It is first-order in the answer: the distribution of
token ``k >= 1`` depends on the context and on token ``k - 1`` only. So a
context's policy is a table of ``1 + (length - 1) * vocab`` states (the first
position; then one per previous token at each later position), each a
distribution over the vocabulary, and the whole answer tree is enumerated
exactly from that table. The tabular policy (:mod:`.tabular`) *is* such a
table; the transformer (:mod:`.transformer`) writes 2-token answers, whose
table one forward pass over every one-token prefix gives.

The reward is read off the policy where training starts (:func:`read_task`):

* the first token decides: the likeliest first token (the head) pays
  ``head_pay``; the tokens of ranks ``tail_ranks`` (rare at the start) pay
  ``tail_pay > head_pay``; every other first token pays 0;
* the payment is made only if every later token is among the ``keep``
  likeliest of its state, so any mixture of the tail tokens is optimal and
  entropy among them is not forced to 0.

Tensors carry a leading replica axis before ``(contexts, ...)``; every
metric is a mean over contexts, in float64, on the tables' device.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from bandsolve.torch.losses import P_BUCKETS

from ..rules import SIGNS

#: the first token's classes (the head, the paying tail, the rest) and the later tokens
CLASSES = ("head", "tail", "other", "later")
#: what a run records per step (after that step's update), per replica
METRICS = ("reward", "tail_mass", "head_mass", "entropy", "entropy_sequence",
           "entropy_rewarding", "entropy_given_success", "step_kl", "clipfrac",
           *(f"clip/{sign}/{name}" for sign in SIGNS for name, _, _ in P_BUCKETS),
           *(f"clip/{sign}/{name}" for sign in SIGNS for name in CLASSES))
#: what each of a seed's random streams draws (its index in the seed's SeedSequence)
PURPOSES = ("start", "prompts", "weights", "grpo")


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """The task and its GRPO schedule: one frozen value, so runs are named by it."""

    vocab: int = 16
    length: int = 3
    zipf: float = 1.1
    #: ranks (1-based) of the high-paying first tokens where training starts
    tail_ranks: tuple = (8, 10, 12, 14)
    head_pay: float = 0.5
    tail_pay: float = 1.0
    #: a later token pays if it is among its state's ``keep`` likeliest
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
        if self.length < 2:
            raise ValueError(f"length must be at least 2 (got {self.length})")
        if min(self.contexts, self.epochs, self.steps, self.minibatches) < 1 or self.group < 2:
            raise ValueError(f"need contexts, epochs, minibatches, steps >= 1 and group >= 2 "
                             f"(got {self})")
        if (self.contexts * self.group) % self.minibatches:
            raise ValueError(f"contexts * group ({self.contexts * self.group}) must split into "
                             f"{self.minibatches} equal mini-batches")
        if not 0 < self.head_pay < self.tail_pay:
            raise ValueError(f"need 0 < head_pay < tail_pay (got {self.head_pay}, "
                             f"{self.tail_pay}): the tail must pay more than the head")

    @property
    def states(self) -> int:
        """States per context: the first position, then one per previous token."""
        return 1 + (self.length - 1) * self.vocab


def seed_rng(stream: int, seed: int, purpose: str) -> np.random.Generator:
    """Seed ``seed``'s generator for ``purpose`` (one of :data:`PURPOSES`) in
    ``stream``: it depends on these three alone, so a seed draws the same
    whatever runs beside it, and streams keep pilot seeds apart from the study's."""
    return np.random.default_rng(np.random.SeedSequence([stream, seed,
                                                         PURPOSES.index(purpose)]))


@dataclasses.dataclass(frozen=True)
class Task:
    """The reward of each context, with the policy's leading axes: the first
    token's pay, whether it is a tail token and whether it is the head
    (..., contexts, vocab); whether token ``k + 1`` is kept after token ``k``
    (..., contexts, length - 1, vocab, vocab)."""

    pay: torch.Tensor
    tail: torch.Tensor
    head: torch.Tensor
    kept: torch.Tensor

    def tile(self, times: int) -> Task:
        """The task repeated ``times`` times along the replica axis, block after block."""
        return Task(*(getattr(self, f.name).repeat(times, *(1,) * (getattr(self, f.name).dim()
                                                                    - 1))
                      for f in dataclasses.fields(Task)))


def state_rows(table: torch.Tensor, vocab: int, k: int) -> torch.Tensor:
    """Position ``k``'s rows of a table (..., states, vocab): (..., vocab) for
    the first token, (..., previous token, vocab) after it."""
    return table[..., 0, :] if k == 0 else table[..., 1 + (k - 1) * vocab:1 + k * vocab, :]


def read_task(log_probs: torch.Tensor, config: TaskConfig) -> Task:
    """The reward of a policy where training starts (``log_probs`` (...,
    contexts, states, vocab)): head, tail and kept tokens by their rank under
    it (ties by token index)."""
    order = torch.sort(-log_probs.double(), dim=-1, stable=True).indices
    rank = torch.sort(order, dim=-1, stable=True).indices + 1  # 1: the likeliest
    first = rank[..., 0, :]
    tail = torch.isin(first, torch.tensor(config.tail_ranks, device=first.device))
    head = first == 1
    pay = torch.where(tail, config.tail_pay, torch.where(head, config.head_pay, 0.0)).double()
    kept = torch.stack([state_rows(rank, config.vocab, k) <= config.keep
                        for k in range(1, config.length)], -3)
    return Task(pay, tail, head, kept)


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of ``weights`` normalised over the last axis (0 where all are 0)."""
    total = weights.sum(-1, keepdim=True)
    q = weights / torch.where(total > 0, total, torch.ones_like(total))
    return -(q * torch.log(torch.where(q > 0, q, torch.ones_like(q)))).sum(-1)


def _rows(log_probs: torch.Tensor, vocab: int, length: int) -> list:
    return [state_rows(log_probs.double(), vocab, k).exp() for k in range(length)]


def exact_metrics(log_probs: torch.Tensor, task: Task) -> dict[str, torch.Tensor]:
    """Exact metrics of the policy ``log_probs`` (..., contexts, states, vocab)
    on ``task``, each a mean over contexts: expected reward; the mass of the
    tail and of the head first tokens; the entropy of the first token, of the
    whole answer (chain rule), of the first token among the paying ones, and
    of the first token given that the answer was rewarded."""
    V = log_probs.shape[-1]
    length = 1 + task.kept.shape[-3]
    pi = _rows(log_probs, V, length)
    # P(every later token kept | the token before), from the last position back
    cont = torch.ones_like(pi[0])
    for k in range(length - 1, 0, -1):
        cont = (pi[k] * task.kept[..., k - 1, :, :] * cont[..., None, :]).sum(-1)
    entropy = _entropy(pi[0])
    marginal = pi[0]
    for k in range(1, length):
        entropy = entropy + (marginal * _entropy(pi[k])).sum(-1)
        marginal = (marginal[..., None] * pi[k]).sum(-2)
    paying = task.pay > 0
    out = {
        "reward": (pi[0] * task.pay * cont).sum(-1),
        "tail_mass": (pi[0] * task.tail).sum(-1),
        "head_mass": (pi[0] * task.head).sum(-1),
        "entropy": _entropy(pi[0]),
        "entropy_sequence": entropy,
        "entropy_rewarding": _entropy(pi[0] * paying),
        "entropy_given_success": _entropy(pi[0] * paying * cont),
    }
    return {k: v.mean(-1) for k, v in out.items()}


def sequence_kl(old_log_probs: torch.Tensor, new_log_probs: torch.Tensor,
                length: int) -> torch.Tensor:
    """KL(pi_old || pi_new) of the whole answer (chain rule), mean over
    contexts; tables (..., contexts, states, vocab) -> (...)."""
    V = old_log_probs.shape[-1]
    old, new = old_log_probs.double(), new_log_probs.double()
    per_state = (old.exp() * (old - new)).sum(-1)  # (..., C, S)
    pi = _rows(old, V, length)
    kl = per_state[..., 0]
    marginal = pi[0]
    for k in range(1, length):
        kl = kl + (marginal * per_state[..., 1 + (k - 1) * V:1 + k * V]).sum(-1)
        marginal = (marginal[..., None] * pi[k]).sum(-2)
    return kl.mean(-1)


def replica_context_index(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Index grids (replicas, 1, 1) and (1, contexts, 1) for a tensor whose
    leading axes are (replicas, contexts)."""
    R, C = tensor.shape[:2]
    return (torch.arange(R, device=tensor.device)[:, None, None],
            torch.arange(C, device=tensor.device)[None, :, None])


def rewards(task: Task, tokens: torch.Tensor) -> torch.Tensor:
    """The reward of sampled answers ``tokens`` (replicas, contexts, group, length)."""
    r, c = replica_context_index(tokens)
    out = task.pay[r, c, tokens[..., 0]]
    for k in range(1, tokens.shape[-1]):
        out = out * task.kept[r, c, k - 1, tokens[..., k - 1], tokens[..., k]]
    return out


def sample(log_probs: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse-CDF samples of whole answers from ``log_probs`` (replicas,
    contexts, states, vocab) with ``uniforms`` (replicas, contexts, group,
    length) in [0, 1): (state, token), each (replicas, contexts, group,
    length). Replicas given the same uniforms draw the same answers wherever
    their policies agree (paired seeds)."""
    V = log_probs.shape[-1]
    cdf = log_probs.double().exp().cumsum(-1)
    cdf[..., -1] = 1.0  # no token is lost to rounding
    r, c = replica_context_index(uniforms)
    state = torch.zeros(uniforms.shape[:3], dtype=torch.long, device=uniforms.device)
    states, tokens = [], []
    for k in range(uniforms.shape[-1]):
        rows = cdf[r, c, state]  # (R, C, G, V)
        token = (rows <= uniforms[..., k:k + 1]).sum(-1).clamp(max=V - 1)
        states.append(state)
        tokens.append(token)
        state = 1 + k * V + token
    return torch.stack(states, -1), torch.stack(tokens, -1)


def grpo_advantages(reward: torch.Tensor) -> torch.Tensor:
    """(r - group mean) / (group std + 1e-6) over the last axis (the group)."""
    return (reward - reward.mean(-1, keepdim=True)) / (reward.std(-1, keepdim=True) + 1e-6)
