"""The tabular policy: one softmax over its own logits per state, no
parameter shared between states (the task's secondary setting).

Where training starts, every state holds Zipf(``zipf``) logits ``-zipf *
log(rank)`` over a random permutation of the vocabulary, drawn from the seed,
so the task read off it (:func:`bandsolve.studies.autoregressive.task.read_task`)
has a head of p about 0.3 and tail tokens of p about 0.02-0.035 at 16 tokens.
"""

from __future__ import annotations

import numpy as np
import torch

from .task import TaskConfig


def zipf_logits(config: TaskConfig, rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Zipf logits over a random permutation of the vocabulary per row: (*shape, vocab)."""
    rank = np.argsort(rng.random((*shape, config.vocab)), axis=-1) + 1
    return -config.zipf * np.log(rank.astype(np.float64))


class TablePolicy(torch.nn.Module):
    """``replicas`` logit tables (replicas, contexts, states, vocab), one per replica."""

    def __init__(self, logits: np.ndarray):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor(logits, dtype=torch.float32))
        self.replicas, self.contexts, self.states, self.vocab = logits.shape

    def table(self) -> torch.Tensor:
        return torch.log_softmax(self.logits, -1)

    def log_probs(self, contexts: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of ``tokens`` (replicas, batch, length) in
        ``contexts`` (replicas, batch); only the visited rows get a gradient."""
        R, B, L = tokens.shape
        V, S = self.vocab, self.states
        state = torch.cat([torch.zeros_like(tokens[..., :1]),
                           1 + torch.arange(L - 1, device=tokens.device) * V
                           + tokens[..., :-1]], -1)
        row = (contexts[..., None] * S + state).reshape(R, B * L)
        visited = self.logits.reshape(R, -1, V).gather(1, row[..., None].expand(-1, -1, V))
        new = torch.log_softmax(visited, -1).gather(2, tokens.reshape(R, B * L, 1))
        return new.reshape(R, B, L)
