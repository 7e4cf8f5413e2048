"""The SkyRL launch configuration of run_grpo.sh, checked on a CPU down to the loss.

Needs: Python >= 3.12 and ``pip install ".[skyrl]"``; no GPU, model or data.
It parses ``bandpo_overrides.txt`` with SkyRL's own strict command-line parser
(the plug-in's config class adds the band keys), looks the loss up in SkyRL's
PolicyLossRegistry, and calls it as SkyRL's worker does, on a random batch
whose advantages went through SkyRL's loss-reduction pre-scaling. It prints the
loss and the band metrics, and exits non-zero if SkyRL did not resolve
bandsolve's loss.

Then it trains a tiny random causal LM (built here, no download) for a few
GRPO rounds through the same loss, four optimizer steps per rollout batch (as
``trainer.update_epochs_per_batch=4`` gives), so that the policy moves between
rollout and loss and the clip binds; it prints the band's clip fraction beside
the one SkyRL's fixed [1 - eps_clip_low, 1 + eps_clip_high] would have had on
the same ratios (``band/fixed_clipfrac_*``).

    python examples/skyrl/dry_run_cpu.py
"""

from __future__ import annotations

import pathlib
import sys

import torch
from skyrl.backends.skyrl_train.utils.ppo_utils import (
    PolicyLossRegistry,
    apply_loss_reduction_to_advantages_minibatch,
)

import bandsolve.integrations.skyrl as plugin

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # examples/tiny_lm.py

from tiny_lm import PROMPTS, clip_line, response_log_probs, train  # noqa: E402


def skyrl_batch(algorithm):
    """train()'s batches as SkyRL's trainer hands them to the loss: the old
    log-probabilities, the loss mask, and the advantages after SkyRL's
    loss-reduction pre-scaling."""
    def prepare(model, pairs, advantages):
        with torch.no_grad():
            old = response_log_probs(model, pairs)
        mask = torch.ones_like(old)
        scaled = apply_loss_reduction_to_advantages_minibatch(
            advantages=advantages[:, None].expand_as(old).clone(), loss_mask=mask,
            loss_reduction=algorithm.loss_reduction, micro_batch_size=len(pairs),
            max_seq_len=algorithm.max_seq_len,
            prompt_boundaries=[(6 * i, 6 * i + 6) for i in range(len(PROMPTS))])
        return pairs, old, mask, scaled
    return prepare


def loss_step(loss_fn, algorithm):
    """One of train()'s steps: the registered loss, called as SkyRL's worker calls it."""
    def step(model, batch):
        pairs, old, mask, advantages = batch
        loss, metrics = loss_fn(response_log_probs(model, pairs), old, advantages,
                                config=algorithm, loss_mask=mask)
        return (loss, metrics["band/clipfrac_upper"] + metrics["band/clipfrac_lower"],
                metrics["band/fixed_clipfrac_upper"] + metrics["band/fixed_clipfrac_lower"])
    return step


def main() -> None:
    overrides = [line.strip() for line in (HERE / "bandpo_overrides.txt").read_text().splitlines()
                 if line.strip()]
    config = plugin.BandPOTrainConfig.from_cli_overrides([
        *overrides, "trainer.algorithm.max_seq_len=16", "trainer.micro_train_batch_size_per_gpu=2"])
    algorithm = config.trainer.algorithm
    loss_fn = PolicyLossRegistry.get(algorithm.policy_loss_type)
    if loss_fn is not plugin.compute_policy_loss_bandpo:
        raise SystemExit(f"SkyRL resolved {algorithm.policy_loss_type!r} to {loss_fn}, "
                         "not bandsolve's loss")
    generator = torch.Generator().manual_seed(0)
    shape = (4, 12)
    old = -torch.empty(shape, dtype=torch.float64).exponential_(0.5, generator=generator)
    new = (old + 0.5 * torch.randn(shape, dtype=torch.float64, generator=generator))
    mask = (torch.rand(shape, generator=generator) < 0.8).to(torch.float64)
    advantages = torch.randn(shape[0], 1, dtype=torch.float64, generator=generator).expand(shape)
    advantages = apply_loss_reduction_to_advantages_minibatch(
        advantages=advantages.clone(), loss_mask=mask, loss_reduction=algorithm.loss_reduction,
        micro_batch_size=config.trainer.micro_train_batch_size_per_gpu,
        max_seq_len=algorithm.max_seq_len, prompt_boundaries=[(0, 2), (2, 4)])
    log_probs = new.clone().requires_grad_()
    loss, metrics = loss_fn(log_probs, old, advantages, config=algorithm, loss_mask=mask)
    loss.backward()
    print(f"policy_loss_type={algorithm.policy_loss_type} band_delta={algorithm.band_delta} "
          f"band_divergence={algorithm.band_divergence} loss_reduction={algorithm.loss_reduction}")
    print(f"loss = {float(loss):.6f}, |grad| = {float(log_probs.grad.norm()):.6f}")
    for key in sorted(metrics):
        print(f"  {key} = {float(metrics[key]):.4f}")

    steps, band, fixed = train(skyrl_batch(algorithm), loss_step(loss_fn, algorithm))
    print(clip_line(steps, algorithm.band_divergence, algorithm.band_delta, band,
                    f"SkyRL's fixed [{1 - algorithm.eps_clip_low:g}, "
                    f"{1 + algorithm.eps_clip_high:g}]", fixed))


if __name__ == "__main__":
    main()
