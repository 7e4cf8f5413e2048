"""TRL plug-in: ``BandGRPOTrainer``, TRL's GRPOTrainer with Band bounds.

    from bandsolve.torch.trl import BandGRPOConfig, BandGRPOTrainer

    args = BandGRPOConfig(output_dir="out", band_delta=0.05, band_divergence="kl",
                          band_max_ratio=10.0, num_iterations=2, ...)
    trainer = BandGRPOTrainer(model=..., reward_funcs=..., args=args, train_dataset=...)

TRL's clipped surrogate clamps the ratio to [1 - epsilon_low, 1 + epsilon_high]
with two numbers. For each micro-batch this trainer computes the band of every
token from its old log-probability and hands TRL per-token tensors in their
place, epsilon_low = 1 - lower and epsilon_high = upper - 1, for the duration
of TRL's own loss: the surrogate, aggregation (every ``loss_type`` that clips:
grpo, bnpo, dr_grpo, dapo, luspo) and TRL's ``clip_ratio/*`` metrics are then
TRL's, with the band as the clip. It also logs ``band/*``: the mean band
bounds and the share of tokens whose band is wider than Clip-Higher's.

Limits, each checked at construction:

* token-level importance sampling only (the band is a per-token interval);
* clipping loss types only (cispo, sapo and vespo do not clip to an interval).

When old log-probabilities are not computed (``num_iterations == 1`` with
generation and optimisation in step, and no vLLM), TRL sets the ratio to 1, no
clip can bind, and the band is not needed: the step runs as TRL's.
"""

from __future__ import annotations

import dataclasses

import torch
from trl import GRPOConfig, GRPOTrainer

from ..divergences import get_divergence
from .bounds import band_from_logp
from .losses import _CLIP_HIGHER_WIDTH

__all__ = ["BandGRPOConfig", "BandGRPOTrainer"]

_CLIPPING_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")


@dataclasses.dataclass
class BandGRPOConfig(GRPOConfig):
    """GRPOConfig with the band's settings (``epsilon`` / ``epsilon_high`` are
    not used by :class:`BandGRPOTrainer`)."""

    band_delta: float = dataclasses.field(
        default=0.05, metadata={"help": "BandPO trust-region radius delta"})
    band_divergence: str = dataclasses.field(
        default="kl", metadata={"help": "f-divergence: kl, rkl, tv, chi2, neyman_chi2, "
                                        "hellinger, js or alpha:<a>"})
    band_max_ratio: float | None = dataclasses.field(
        default=10.0, metadata={"help": "cap on the upper bound (None: no cap)"})


class BandGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose ratio clip is the per-token band (see the module docstring).

    Raises
    ------
    TypeError
        ``args`` is not a :class:`BandGRPOConfig`.
    ValueError
        A non-clipping ``loss_type``, sequence-level importance sampling, or
        a bad delta, divergence or max_ratio (as ``bandsolve.band``).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, BandGRPOConfig):
            raise TypeError("BandGRPOTrainer needs a BandGRPOConfig for its args "
                            f"(got {type(self.args).__name__})")
        if self.loss_type not in _CLIPPING_LOSS_TYPES:
            raise ValueError(f"the band replaces the ratio clip of loss_type in "
                             f"{_CLIPPING_LOSS_TYPES}; {self.loss_type!r} does not clip to an "
                             f"interval")
        if self.importance_sampling_level != "token":
            raise ValueError("the band is a per-token interval: use "
                             "importance_sampling_level='token'")
        get_divergence(self.args.band_divergence)
        band_from_logp(torch.zeros(1), self.args.band_delta, self.args.band_divergence,
                       max_ratio=self.args.band_max_ratio)  # bad settings fail here

    def _compute_loss(self, model, inputs):
        old_log_prob = inputs.get("old_per_token_logps")
        if old_log_prob is None:  # ratio == 1: no clip binds (module docstring)
            return super()._compute_loss(model, inputs)
        args: BandGRPOConfig = self.args  # type: ignore[assignment]  # set in __init__
        lower, upper = band_from_logp(old_log_prob.detach().clamp(max=0.0),
                                      args.band_delta, args.band_divergence,
                                      max_ratio=args.band_max_ratio)
        scalar_epsilons = (self.epsilon_low, self.epsilon_high)
        # TRL clamps to [1 - epsilon_low, 1 + epsilon_high]: per-token tensors
        # make that interval the band for this micro-batch only
        self.epsilon_low, self.epsilon_high = 1.0 - lower, upper - 1.0  # type: ignore[assignment]
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self.epsilon_low, self.epsilon_high = scalar_epsilons
        self._log_band(lower, upper, inputs["completion_mask"])
        return loss

    def _log_band(self, lower, upper, mask):
        mode = "train" if self.model is not None and self.model.training else "eval"
        mask = mask.to(torch.float32)
        totals = self.accelerator.reduce(torch.stack([
            (lower * mask).sum(), (upper.clamp(max=1e30) * mask).sum(),
            ((upper - lower > _CLIP_HIGHER_WIDTH).float() * mask).sum(), mask.sum()]),
            reduction="sum")
        count = totals[3].clamp(min=1.0)
        self._metrics[mode]["band/lower_mean"].append((totals[0] / count).item())
        self._metrics[mode]["band/upper_mean"].append((totals[1] / count).item())
        self._metrics[mode]["band/wider_than_clip_higher"].append((totals[2] / count).item())
