"""OpenRLHF's policy loss with the band, on a tiny LM, several updates per rollout batch.

Needs: OpenRLHF installed as its docs say (``pip install "openrlhf[vllm]==0.11.2"``,
which needs CUDA for flash-attn), then ``pip install ".[openrlhf]"``; no model or
data (the model is a tiny random causal LM built here). On a machine without
CUDA, OpenRLHF's modules do not import: CI runs this script there with the
stand-ins of ``tests/openrlhf_stand_ins.py`` for flash-attn and vLLM
(docs/openrlhf.md), which nothing here calls.

It does what ``ActorPPOTrainer`` does with its loss: OpenRLHF's ``PolicyLoss``
(at OpenRLHF's default clip, 0.2) is swapped for the band's by
:func:`bandsolve.integrations.openrlhf.use_band`, and each rollout batch feeds
four optimizer steps (as ``--train.batch_size`` below ``--rollout.batch_size``
gives), so that the policy moves between rollout and loss and the clip binds.
It prints the band's clip fraction (OpenRLHF's ``ppo_clip_ratio`` of the band
loss) beside the one OpenRLHF's own loss reports on the same ratios.

    python examples/openrlhf/train_tiny.py
"""

from __future__ import annotations

import pathlib
import sys
import types

import torch
from openrlhf.models.loss import PolicyLoss

from bandsolve.integrations.openrlhf import use_band
from bandsolve.torch import BandSettings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/tiny_lm.py

from tiny_lm import clip_line, response_log_probs, train  # noqa: E402


def prepare(model, pairs, advantages):
    """One rollout batch as OpenRLHF's experience holds it: old log-probs,
    per-token advantages, the action mask."""
    with torch.no_grad():
        old = response_log_probs(model, pairs)
    return pairs, old, advantages[:, None].expand_as(old), torch.ones_like(old)


def main() -> None:
    band = BandSettings(delta=0.05, divergence="kl", max_ratio=10.0)
    trainer = types.SimpleNamespace(actor_loss_fn=PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2))
    fixed_loss = trainer.actor_loss_fn
    use_band(trainer, band)  # what BandPolicyModelActor does to OpenRLHF's trainer

    def step(model, batch):
        pairs, old, advantages, mask = batch
        log_probs = response_log_probs(model, pairs)
        loss, clip_ratio, *_ = trainer.actor_loss_fn(log_probs, old, advantages, action_mask=mask)
        with torch.no_grad():  # OpenRLHF's own loss on the same ratios
            _, fixed_ratio, *_ = fixed_loss(log_probs, old, advantages, action_mask=mask)
        return loss, float(clip_ratio), float(fixed_ratio)

    steps, band_clip, fixed_clip = train(prepare, step)
    print(f"loss: {type(trainer.actor_loss_fn).__name__}")
    print(clip_line(steps, band.divergence, band.delta, band_clip, "OpenRLHF's fixed [0.8, 1.2]",
                    fixed_clip))


if __name__ == "__main__":
    main()
