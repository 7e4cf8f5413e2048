"""TRL plug-in: ``BandGRPOTrainer``, TRL's GRPOTrainer with Band bounds.

    from bandsolve.integrations.trl import BandGRPOConfig, BandGRPOTrainer

    args = BandGRPOConfig(output_dir="out", band_delta=0.05, band_divergence="kl",
                          band_max_ratio=10.0, num_iterations=2, ...)
    trainer = BandGRPOTrainer(model=..., reward_funcs=..., args=args, train_dataset=...)

TRL's clipped surrogate clamps the ratio to [1 - epsilon_low, 1 + epsilon_high]
with two numbers. For each micro-batch this trainer computes the band of every
token from its old log-probability and hands TRL per-token tensors in their
place, epsilon_low = 1 - lower and epsilon_high = upper - 1, for the duration
of TRL's own loss: the surrogate, aggregation (every ``loss_type`` that clips
per token: grpo, bnpo, dr_grpo, dapo) and TRL's ``clip_ratio/*`` metrics are
then TRL's, with the band as the clip. It also logs ``band/*``, the metrics
the verl and SkyRL plug-ins log (there under ``actor/band/*`` and
``loss_metrics/band/*``): clip fractions above and below, by old-probability
bucket (``band/clipfrac/<bucket>``), the clip fractions TRL's own
[1 - epsilon, 1 + epsilon_high] would have had on the same ratios
(``band/fixed_clipfrac_*``), band widths and token counts by bucket, the mean
bounds and the share of tokens whose band is wider than Clip-Higher's. They
are computed on the device and read once per logged step (:meth:`log`), with
one gather across processes.

Options beside the band's (``BandGRPOConfig``):

* ``band_mode="mask"``: tokens whose ratio left the band the way their
  advantage pushes it drop out of the loss (TRL's loss runs with their
  advantage set to 0 for the call; TRL accepts per-token advantages), the
  others keep the unclipped surrogate. The gradient is the clip's; the loss
  value differs on the dropped tokens, and TRL's ``clip_ratio/*`` read 0
  there (their advantage is 0): ``band/clipfrac_*`` count them.
* ``band_anchor="rollout"`` (needs ``use_vllm``): the band around vLLM's
  log-probabilities of the sampled tokens (``sampling_per_token_logps``), as
  bounds on TRL's ratio pi / pi_old (:func:`bandsolve.torch.rollout_anchored`);
  TRL's own vLLM importance-sampling correction
  (``vllm_importance_sampling_correction``) is applied as TRL applies it.

The plug-in reads two private parts of TRL's GRPOTrainer, ``_compute_loss``
and ``_get_per_token_logps_and_entropies`` (for the new log-probabilities
the clip fractions need). Supported: ``trl>=1.0,<2`` (tested at 1.0.0 and the
newest 1.x). A TRL whose private loss has changed shape fails at
construction, or on the first step, with an error that names these versions.

Limits, each checked at construction:

* token-level importance sampling only (the band is a per-token interval);
* clipping loss types only (cispo, sapo and vespo do not clip to an
  interval; luspo's ratio is per sequence, and at token level TRL's luspo
  weighs padding tokens too).

When old log-probabilities are not computed (``num_iterations == 1`` with
generation and optimisation in step, and no vLLM), TRL sets the ratio to 1, no
clip can bind, and the band is not needed: the step runs as TRL's.

:func:`doctor_checks` is this plug-in's part of ``bandsolve doctor``: whether
the installed TRL's loss still clamps with the epsilons the plug-in sets.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections import defaultdict

import torch
import trl
from trl import GRPOConfig, GRPOTrainer

from .. import doctor
from ..torch.losses import check_anchor, check_mode, clip_metrics, rollout_anchored
from ..torch.settings import BandSettings

__all__ = ["BandGRPOConfig", "BandGRPOTrainer", "SUPPORTED_TRL", "doctor_checks"]

SUPPORTED_TRL = "trl>=1.0,<2 (tested at 1.0.0 and the newest 1.x)"

_CLIPPING_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


@dataclasses.dataclass
class BandGRPOConfig(GRPOConfig):
    """GRPOConfig with the band's settings (``epsilon`` / ``epsilon_high`` are
    not used by :class:`BandGRPOTrainer`, but reported as the fixed clip's
    fractions beside the band's)."""

    band_delta: float = dataclasses.field(
        default=0.05, metadata={"help": "BandPO trust-region radius delta"})
    band_divergence: str = dataclasses.field(
        default="kl", metadata={"help": "f-divergence: a name of "
                                        "bandsolve.BUILTIN_DIVERGENCES or alpha:<a>"})
    band_max_ratio: float | None = dataclasses.field(
        default=10.0, metadata={"help": "cap on the upper bound (None: no cap)"})
    band_mode: str = dataclasses.field(
        default="clip", metadata={"help": "'clip' (PPO's clipped surrogate) or 'mask' (tokens "
                                          "beyond the band drop out of the loss)"})
    band_anchor: str = dataclasses.field(
        default="old", metadata={"help": "'old' (the band around the old log-probabilities) "
                                         "or 'rollout' (around vLLM's; needs use_vllm)"})


class BandGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose ratio clip is the per-token band (see the module docstring).

    Raises
    ------
    TypeError
        ``args`` is not a :class:`BandGRPOConfig`.
    ValueError
        A non-clipping ``loss_type``, sequence-level importance sampling, a
        bad delta, divergence or max_ratio (as ``bandsolve.band``), a bad
        ``band_mode`` or ``band_anchor``, or ``band_anchor="rollout"``
        without vLLM.
    """

    def __init__(self, *args, **kwargs):
        for private in ("_compute_loss", "_get_per_token_logps_and_entropies"):
            if not callable(getattr(GRPOTrainer, private, None)):
                raise _unsupported_trl(f"GRPOTrainer has no {private}")
        super().__init__(*args, **kwargs)
        if not all(hasattr(self, name) for name in ("epsilon_low", "epsilon_high", "loss_type")):
            raise _unsupported_trl("GRPOTrainer keeps no epsilon_low / epsilon_high / loss_type")
        if not isinstance(self.args, BandGRPOConfig):
            raise TypeError("BandGRPOTrainer needs a BandGRPOConfig for its args "
                            f"(got {type(self.args).__name__})")
        if self.loss_type == "luspo":
            raise ValueError("the band is a per-token interval and luspo's ratio is per sequence "
                             "(at token level TRL's luspo weighs padding tokens too): use one of "
                             f"{_CLIPPING_LOSS_TYPES}")
        if self.loss_type not in _CLIPPING_LOSS_TYPES:
            raise ValueError(f"the band replaces the ratio clip of loss_type in "
                             f"{_CLIPPING_LOSS_TYPES}; {self.loss_type!r} does not clip to an "
                             f"interval")
        if self.importance_sampling_level != "token":
            raise ValueError("the band is a per-token interval: use "
                             "importance_sampling_level='token'")
        # checked here, once: bad settings fail at construction
        self.band_settings = BandSettings(delta=self.args.band_delta,
                                          divergence=self.args.band_divergence,
                                          max_ratio=self.args.band_max_ratio)
        self.band_mode = check_mode(self.args.band_mode)
        self.band_anchor = check_anchor(self.args.band_anchor)
        if self.band_anchor == "rollout" and not self.use_vllm:
            raise ValueError("band_anchor='rollout' takes the band around vLLM's log-probabilities: "
                             "TRL has them only with use_vllm=True")
        # the band's metrics of each micro-batch, on the device, until log()
        self._band_pending: dict[str, list] = defaultdict(list)

    def _bounds(self, inputs, old_log_prob):
        """(lower, upper) on TRL's ratio: the band of the old log-probabilities,
        or with band_anchor="rollout", of vLLM's."""
        mask = inputs["completion_mask"]
        if self.band_anchor == "old":
            return self.band_settings.bounds(old_log_prob, mask=mask)
        rollout = inputs.get("sampling_per_token_logps")
        if rollout is None:
            raise _unsupported_trl("band_anchor='rollout' but the batch holds no "
                                   "sampling_per_token_logps (vLLM's log-probabilities)")
        return rollout_anchored(self.band_settings.bounds(rollout, mask=mask), old_log_prob,
                                rollout)

    def _compute_loss(self, model, inputs):
        old_log_prob = inputs.get("old_per_token_logps")
        if old_log_prob is None:  # ratio == 1: no clip binds (module docstring)
            return super()._compute_loss(model, inputs)
        lower, upper = self._bounds(inputs, old_log_prob)
        scalar_epsilons = (self.epsilon_low, self.epsilon_high)
        advantages = inputs["advantages"]
        new_log_prob = []
        compute_log_probs = self._get_per_token_logps_and_entropies

        def capture_new_log_prob(*args, **kwargs):
            out = compute_log_probs(*args, **kwargs)
            new_log_prob.append(out[0])
            if self.band_mode == "mask":
                # TRL reads the advantages after this call: the tokens beyond the
                # band get advantage 0 for the call, so no loss and no gradient
                ratio = torch.exp(out[0].detach() - old_log_prob)
                per_token = _per_token(advantages, old_log_prob)
                outside = ((per_token > 0) & (ratio > upper)) | ((per_token < 0) & (ratio < lower))
                inputs["advantages"] = torch.where(outside, torch.zeros_like(per_token), per_token)
            return out

        # TRL clamps to [1 - epsilon_low, 1 + epsilon_high]: per-token tensors
        # make that interval the band for this micro-batch only; the instance
        # attribute shadows TRL's method for the same call, to see the ratio
        self.epsilon_low, self.epsilon_high = 1.0 - lower, upper - 1.0  # type: ignore[assignment]
        self._get_per_token_logps_and_entropies = capture_new_log_prob  # type: ignore[method-assign]
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self.epsilon_low, self.epsilon_high = scalar_epsilons
            del self._get_per_token_logps_and_entropies
            inputs["advantages"] = advantages
        if len(new_log_prob) != 1 or new_log_prob[0].shape != old_log_prob.shape:
            raise _unsupported_trl("GRPOTrainer._compute_loss no longer computes the new "
                                   "per-token log-probabilities once, in the old ones' shape")
        self._record_band(new_log_prob[0].detach(), old_log_prob, advantages, lower, upper,
                          inputs["completion_mask"])
        return loss

    @torch.no_grad()
    def _record_band(self, new_log_prob, old_log_prob, advantages, lower, upper, mask):
        """The band's metrics of one micro-batch, kept on the device (no sync)."""
        mode = "train" if self.model is not None and self.model.training else "eval"
        ratio = torch.exp(new_log_prob - old_log_prob)
        fixed = (1.0 - self.epsilon_low, 1.0 + self.epsilon_high)
        metrics = clip_metrics(ratio, _per_token(advantages, old_log_prob), mask, old_log_prob,
                               lower, upper, fixed)
        metrics["lower_mean"] = (lower * mask).sum() / mask.sum().clamp(min=1.0)
        metrics["upper_mean"] = (upper.clamp(max=1e30) * mask).sum() / mask.sum().clamp(min=1.0)
        names = sorted(metrics)
        self._band_pending[mode].append(
            (names, torch.stack([metrics[n].to(torch.float32).reshape(()) for n in names])))

    def log(self, logs, start_time=None):
        """TRL's ``log``, with the band's metrics of the micro-batches since the
        last call handed to TRL's ``_metrics`` first: one gather across
        processes and one device-to-host read for all of them. Across
        processes as TRL gathers its own clip_ratio/*: the mean of the
        processes' values; token counts add up."""
        mode = "train" if self.model is not None and self.model.training else "eval"
        pending = self._band_pending.pop(mode, [])
        if pending:
            names = pending[0][0]
            values = torch.stack([v for _, v in pending])  # (micro-batches, metrics)
            gathered = self.accelerator.gather(values.unsqueeze(0))  # (processes, ...)
            gathered = gathered.reshape(-1, *values.shape)
            totals = torch.where(torch.tensor([n.startswith("tokens/") for n in names],
                                              device=gathered.device),
                                 gathered.sum(0), gathered.nanmean(0))
            for row in totals.tolist():  # the one host read
                for name, value in zip(names, row):
                    self._metrics[mode][f"band/{name}"].append(value)
        return super().log(logs, start_time)


def _per_token(advantages, like):
    """TRL's advantages, one per sequence (B,) or per token (B, T), as (B, T)."""
    return advantages.unsqueeze(1).expand_as(like) if advantages.dim() == 1 else advantages


def _unsupported_trl(what: str) -> RuntimeError:
    return RuntimeError(f"bandsolve's TRL plug-in does not support the installed trl "
                        f"{trl.__version__}: {what}. Supported: {SUPPORTED_TRL}.")


def doctor_checks() -> list:
    """This plug-in's line of ``bandsolve doctor``: the plug-in hands TRL's own
    ``_compute_loss`` per-token epsilon_low / epsilon_high, so the band serves
    only where that loss clamps with them."""
    name = "trl serves the band"
    try:
        source = inspect.getsource(GRPOTrainer._compute_loss)
    except Exception as exc:  # noqa: BLE001
        return [doctor.Check(name, False, f"GRPOTrainer._compute_loss unreadable: "
                                          f"{doctor.error_text(exc)}", SUPPORTED_TRL)]
    clamp = "1 - self.epsilon_low, 1 + self.epsilon_high"
    if clamp in source:
        return [doctor.Check(name, True, "GRPOTrainer._compute_loss clamps the ratio to "
                                         f"[{clamp}], which BandGRPOTrainer sets to the band "
                                         "per token")]
    return [doctor.Check(name, False, "GRPOTrainer._compute_loss no longer clamps the ratio "
                                      f"to [{clamp}]: the band would not reach TRL's loss",
                         f"install a supported trl: {SUPPORTED_TRL}")]
