"""The task on a small causal transformer: shared parameters, so that an
update on one answer moves the probability of every other, as in an LLM.

Each context is a prompt of ``prompt`` tokens (distinct prompts, drawn from
the seed); an answer is 2 tokens. The answer's distribution is the model's
output at the prompt's last position (the first token) and at the next one,
after the first token (the second). So one pass over the prompts and one
over every (context, first token) give the whole answer tree exactly
(:meth:`ReplicaTransformer.table`), and the mini-batch's answers need only
their one extra position each (:meth:`ReplicaTransformer.log_probs`): the
prompt is computed once per context, its keys and values read by every
answer of that context, which is the causal transformer's own result (the
test checks it against full sequences through
``torch.nn.functional.scaled_dot_product_attention``).

``replicas`` models train as one: every weight has a leading replica axis,
each matrix product is one ``torch.bmm`` over the replicas, and replica ``r``
reads only its own weights. No weights are loaded and nothing is downloaded:
a supervised stage (:func:`pretrain`) first fits each context's first-token
distribution, and each (context, first token)'s second-token distribution,
to Zipf(``zipf``) over a random permutation of the vocabulary (Adam on the
exact KL to the targets), so that training starts from a Zipf head with rare,
high-paying tail tokens, and the task is read off that model.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
import torch.nn.functional as F

from .tabular import zipf_logits
from .task import TaskConfig, seed_rng

ANSWER = 2  # tokens per answer


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The transformer and its supervised stage."""

    layers: int = 2
    width: int = 64
    heads: int = 4
    #: prompt tokens per context
    prompt: int = 4
    sft_steps: int = 300
    sft_lr: float = 3e-3

    def __post_init__(self):
        if self.width % self.heads or min(self.layers, self.prompt, self.sft_steps) < 1:
            raise ValueError(f"need width divisible by heads, and layers, prompt, sft_steps "
                             f">= 1 (got {self})")


def _linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(replicas, ..., in) @ (replicas, in, out), one batched matmul over the replicas."""
    return torch.bmm(x.reshape(x.shape[0], -1, x.shape[-1]), weight).reshape(
        *x.shape[:-1], weight.shape[-1])


class ReplicaTransformer(torch.nn.Module):
    """``replicas`` independent pre-norm causal transformers as one module,
    with each replica's prompts (replicas, contexts, prompt)."""

    def __init__(self, weights: dict[str, torch.Tensor], prompts: torch.Tensor,
                 model: ModelConfig):
        super().__init__()
        self.model = model
        self.names = tuple(weights)
        for name, value in weights.items():
            self.register_parameter(name, torch.nn.Parameter(value.clone()))
        self.register_buffer("prompts", prompts.clone())
        self.replicas, self.contexts, _ = prompts.shape
        self.vocab = weights["embed"].shape[1]

    @staticmethod
    def initial_weights(generators, vocab: int, model: ModelConfig,
                        dtype=torch.float32) -> dict[str, torch.Tensor]:
        """GPT-2-style initial weights, each replica's from its own generator."""
        D, L = model.width, model.layers

        def init(*shape, std=0.02):
            return torch.stack([torch.randn(*shape, generator=g, dtype=torch.float64) * std
                                for g in generators]).to(dtype)

        residual = 0.02 / math.sqrt(2 * L)
        weights = {"embed": init(vocab, D), "position": init(model.prompt + 1, D)}
        for i in range(L):
            weights[f"qkv{i}"] = init(D, 3 * D)
            weights[f"attn_out{i}"] = init(D, D, std=residual)
            weights[f"mlp_in{i}"] = init(D, 4 * D)
            weights[f"mlp_out{i}"] = init(4 * D, D, std=residual)
        weights["head"] = init(D, vocab)
        return weights

    @property
    def prompt_tokens(self) -> torch.Tensor:
        """Each replica's prompts (replicas, contexts, prompt), on the module's device."""
        return self.get_buffer("prompts")

    def _w(self, name: str) -> torch.Tensor:
        return self.get_parameter(name)

    def weights(self) -> dict[str, torch.Tensor]:
        return {name: self._w(name).detach().clone() for name in self.names}

    def tile(self, times: int) -> ReplicaTransformer:
        """A new module with every replica repeated ``times`` times, block
        after block (replica ``i * n + s`` is replica ``s``): one block per rule."""
        return ReplicaTransformer({k: v.repeat(times, *(1,) * (v.dim() - 1))
                                   for k, v in self.weights().items()},
                                  self.prompt_tokens.repeat(times, 1, 1), self.model)

    def _embed(self, tokens: torch.Tensor, positions) -> torch.Tensor:
        R = tokens.shape[0]
        index = torch.arange(R, device=tokens.device)[:, None]
        h = self._w("embed")[index, tokens.reshape(R, -1)].reshape(*tokens.shape, -1)
        return h + self._w("position")[:, positions].reshape(
            R, *(1,) * (tokens.dim() - 2), -1, h.shape[-1])

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(..., width) -> (..., heads, head width)."""
        return x.reshape(*x.shape[:-1], self.model.heads, -1)

    def _block_tail(self, h, attended, i):
        h = h + _linear(attended, self._w(f"attn_out{i}"))
        up = F.gelu(_linear(F.layer_norm(h, h.shape[-1:]), self._w(f"mlp_in{i}")))
        return h + _linear(up, self._w(f"mlp_out{i}"))

    def prompt_pass(self):
        """The prompts through every layer: the first token's logits (replicas,
        contexts, vocab) and each layer's keys and values (replicas, contexts,
        heads, prompt, head width)."""
        P = self.model.prompt
        h = self._embed(self.prompt_tokens, slice(0, P))  # (R, C, P, D)
        causal = torch.ones(P, P, dtype=torch.bool, device=h.device).triu(1)
        cache = []
        for i in range(self.model.layers):
            q, k, v = (self._heads(x).transpose(-2, -3) for x in _linear(
                F.layer_norm(h, h.shape[-1:]), self._w(f"qkv{i}")).chunk(3, -1))
            cache.append((k, v))
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            a = torch.softmax(scores.masked_fill(causal, -math.inf), -1) @ v
            h = self._block_tail(h, a.transpose(-2, -3).flatten(-2), i)
        last = F.layer_norm(h[:, :, -1], h.shape[-1:])
        return _linear(last, self._w("head")), cache

    def _answer_pass(self, cache, first: torch.Tensor, contexts=None) -> torch.Tensor:
        """Logits after the first answer token ``first`` (replicas, X, M): M
        answers share the prompt of X's context, which is context X itself
        where ``contexts`` is None (the whole tree), else ``contexts``
        (replicas, X) with M = 1 (a mini-batch). Each answer attends to its
        prompt's keys and values and to itself."""
        P = self.model.prompt
        h = self._embed(first, slice(P, P + 1))  # (R, X, M, D)
        r = torch.arange(self.replicas, device=h.device)[:, None]
        for i, (k_prompt, v_prompt) in enumerate(cache):
            if contexts is not None:
                k_prompt, v_prompt = k_prompt[r, contexts], v_prompt[r, contexts]
            q, k, v = (self._heads(x).transpose(-2, -3) for x in _linear(
                F.layer_norm(h, h.shape[-1:]), self._w(f"qkv{i}")).chunk(3, -1))
            # q, k, v: (R, X, heads, M, head width); the prompt's: (R, X, heads, P, head width)
            scores = torch.cat([q @ k_prompt.transpose(-1, -2), (q * k).sum(-1, keepdim=True)],
                               -1) / math.sqrt(q.shape[-1])
            w = torch.softmax(scores, -1)
            a = w[..., :P] @ v_prompt + w[..., P:] * v
            h = self._block_tail(h, a.transpose(-2, -3).flatten(-2), i)
        return _linear(F.layer_norm(h, h.shape[-1:]), self._w("head"))

    def table(self) -> torch.Tensor:
        """log pi of every state (replicas, contexts, 1 + vocab, vocab): the
        first token's, then the second's after each first token."""
        first_logits, cache = self.prompt_pass()
        R, C, V = self.replicas, self.contexts, self.vocab
        first = torch.arange(V, device=first_logits.device).expand(R, C, V)
        second = self._answer_pass(cache, first)  # (R, C, V, V)
        return torch.log_softmax(torch.cat([first_logits[:, :, None], second], 2), -1)

    def log_probs(self, contexts: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """log pi of answers ``tokens`` (replicas, batch, 2) in ``contexts``
        (replicas, batch), with gradient."""
        first_logits, cache = self.prompt_pass()
        r = torch.arange(self.replicas, device=tokens.device)[:, None]
        second = self._answer_pass(cache, tokens[..., :1], contexts)[:, :, 0]  # (R, B, V)
        logits = torch.stack([first_logits[r, contexts], second], 2)
        return torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]


def pretrain(task: TaskConfig, model: ModelConfig, stream: int, seeds, dtype=torch.float32,
             device: str = "cpu"):
    """One model per seed of ``seeds`` in ``stream``, fitted to that seed's
    Zipf targets (its prompts, targets and initial weights come from the seed
    alone, :func:`.task.seed_sequence`): returns the fitted
    :class:`ReplicaTransformer` (one replica per seed) and the fit's summary
    (mean KL to the targets of the first and of the second token, the head's
    and a tail token's mean first-token probability)."""
    if task.length != ANSWER:
        raise ValueError(f"the transformer writes answers of {ANSWER} tokens (got length "
                         f"{task.length})")
    C, V, P = task.contexts, task.vocab, model.prompt
    if C > V ** P:
        raise ValueError(f"{C} contexts need distinct prompts, but {V}**{P} exist")
    digits, targets, generators = [], [], []
    for seed in seeds:
        targets.append(zipf_logits(task, seed_rng(stream, seed, "start"), (C, 1 + V)))
        codes = seed_rng(stream, seed, "prompts").choice(V ** P, size=C, replace=False)
        digits.append((codes[:, None] // V ** np.arange(P)[::-1]) % V)  # distinct prompts
        generators.append(torch.Generator().manual_seed(
            int(seed_rng(stream, seed, "weights").integers(2 ** 62))))
    prompts = torch.tensor(np.stack(digits))
    target = torch.log_softmax(torch.tensor(np.stack(targets), dtype=dtype), -1).to(device)
    net = ReplicaTransformer(ReplicaTransformer.initial_weights(generators, V, model, dtype),
                             prompts, model).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=model.sft_lr, foreach=True)
    weight = target.exp()
    for _ in range(model.sft_steps):
        # the exact KL(target || model) of every state, summed over replicas
        kl = (weight * (target - net.table())).sum(-1)  # (R, C, 1 + V)
        loss = (kl[..., 0].mean(-1) + kl[..., 1:].mean((-1, -2))).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        fitted = net.table()
        kl = (weight * (target - fitted)).sum(-1)
        first = fitted[..., 0, :].exp().sort(-1, descending=True).values
    ranks = [k - 1 for k in task.tail_ranks]
    fit = dict(kl_first=float(kl[..., 0].mean()), kl_second=float(kl[..., 1:].mean()),
               head_p=float(first[..., 0].mean()), tail_p=float(first[..., ranks].mean()))
    return net, fit
