"""What the CPU examples train: a tiny random causal LM (built here, no
download), its rollouts, GRPO's group-normalised advantages, and the loop
(:func:`train`) that takes several optimizer steps on each rollout batch.

The examples under ``verl/`` and ``skyrl/`` import it from this folder."""

from __future__ import annotations

import torch

VOCAB, TARGET = 32, 7
PROMPTS = ([1, 2, 3], [4, 5, 6], [9, 8, 7])  # one length: no padding


def tiny_lm(seed: int = 0):
    """A random two-layer Llama over VOCAB tokens (float32, eager attention)."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="eager")
    return transformers.LlamaForCausalLM(config)


@torch.no_grad()
def rollout(model, prompts, n: int, length: int, generator) -> list:
    """(prompt, response) pairs: n sampled responses of ``length`` tokens per prompt."""
    out = []
    for prompt in prompts:
        seqs = torch.tensor([prompt] * n)
        for _ in range(length):
            probs = torch.softmax(model(input_ids=seqs).logits[:, -1].double(), -1)
            seqs = torch.cat([seqs, torch.multinomial(probs, 1, generator=generator)], dim=1)
        out += [(list(prompt), row[len(prompt):]) for row in seqs.tolist()]
    return out


def grpo_advantages(pairs, groups: int) -> torch.Tensor:
    """Reward (the share of TARGET in each response), normalised within each
    prompt's group, one number per response."""
    reward = torch.tensor([sum(t == TARGET for t in r) / len(r) for _, r in pairs])
    grouped = reward.reshape(groups, -1)
    return ((grouped - grouped.mean(1, keepdim=True))
            / (grouped.std(1, keepdim=True) + 1e-6)).reshape(-1)


def response_log_probs(model, pairs) -> torch.Tensor:
    """log pi(response token | prefix), (responses, length): the responses
    share one length here, so the batch has no padding."""
    seqs = torch.tensor([p + r for p, r in pairs])
    length = len(pairs[0][1])
    logp = torch.log_softmax(model(input_ids=seqs[:, :-1]).logits, dim=-1)
    return logp.gather(-1, seqs[:, 1:, None]).squeeze(-1)[:, -length:]


def train(prepare, step, rounds: int = 4, updates: int = 4) -> tuple:
    """GRPO rounds on the tiny LM: each round's rollouts and advantages become
    a batch, ``prepare(model, pairs, advantages)``; each of ``updates``
    optimizer steps on it runs ``step(model, batch)`` -> (loss, the band's clip
    fraction, the fixed clip's on the same ratios). Several steps per batch
    make the policy move between rollout and loss, so that the clip binds.
    Returns (steps, the band's mean clip fraction, the fixed clip's)."""
    model = tiny_lm()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    generator = torch.Generator().manual_seed(0)
    band, fixed = [], []
    for _ in range(rounds):
        pairs = rollout(model, PROMPTS, 6, 6, generator)
        batch = prepare(model, pairs, grpo_advantages(pairs, len(PROMPTS)))
        for _ in range(updates):
            loss, band_clip, fixed_clip = step(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            band.append(band_clip)
            fixed.append(fixed_clip)
    return len(band), sum(band) / len(band), sum(fixed) / len(fixed)


def clip_line(steps: int, divergence, delta, band: float, fixed_name: str,
              fixed: float) -> str:
    """The line each example ends with (tests/test_examples.py reads it)."""
    return (f"clip fraction, mean of {steps} steps: band ({divergence}, delta {delta}) "
            f"{band:.4f}; {fixed_name} on the same ratios {fixed:.4f}")
