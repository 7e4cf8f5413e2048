"""TRL plug-in: ``BandGRPOTrainer``, TRL's GRPOTrainer with Band bounds.

    from bandsolve.integrations.trl import BandGRPOConfig, BandGRPOTrainer

    args = BandGRPOConfig(output_dir="out", band_delta=0.05, band_divergence="kl",
                          band_max_ratio=10.0, num_iterations=2, ...)
    trainer = BandGRPOTrainer(model=..., reward_funcs=..., args=args, train_dataset=...)

TRL's clipped surrogate clamps the ratio to [1 - epsilon_low, 1 + epsilon_high]
with two numbers. For each micro-batch this trainer computes the band of every
token from its old log-probability and hands TRL per-token tensors in their
place, epsilon_low = 1 - lower and epsilon_high = upper - 1, for the duration
of TRL's own loss: the surrogate, aggregation (every ``loss_type`` that clips:
grpo, bnpo, dr_grpo, dapo, luspo) and TRL's ``clip_ratio/*`` metrics are then
TRL's, with the band as the clip. It also logs ``band/*``, the metrics the
verl and SkyRL plug-ins log (there under ``actor/band/*`` and
``policy/band/*``): clip fractions above and below, by old-probability bucket
(``band/clipfrac/<bucket>``), band widths and token counts by bucket, the
mean bounds and the share of tokens whose band is wider than Clip-Higher's.

The plug-in reads two private parts of TRL's GRPOTrainer, ``_compute_loss``
and ``_get_per_token_logps_and_entropies`` (for the new log-probabilities
the clip fractions need). Supported: ``trl>=1.0,<2`` (tested at 1.0.0 and the
newest 1.x). A TRL whose private loss has changed shape fails at
construction, or on the first step, with an error that names these versions.

Limits, each checked at construction:

* token-level importance sampling only (the band is a per-token interval);
* clipping loss types only (cispo, sapo and vespo do not clip to an interval).

When old log-probabilities are not computed (``num_iterations == 1`` with
generation and optimisation in step, and no vLLM), TRL sets the ratio to 1, no
clip can bind, and the band is not needed: the step runs as TRL's.

:func:`doctor_checks` is this plug-in's part of ``bandsolve doctor``: whether
the installed TRL's loss still clamps with the epsilons the plug-in sets.
"""

from __future__ import annotations

import dataclasses
import inspect

import torch
import trl
from trl import GRPOConfig, GRPOTrainer

from .. import doctor
from ..torch.losses import clip_metrics
from ..torch.settings import BandSettings

__all__ = ["BandGRPOConfig", "BandGRPOTrainer", "SUPPORTED_TRL", "doctor_checks"]

SUPPORTED_TRL = "trl>=1.0,<2 (tested at 1.0.0 and the newest 1.x)"

_CLIPPING_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")


@dataclasses.dataclass
class BandGRPOConfig(GRPOConfig):
    """GRPOConfig with the band's settings (``epsilon`` / ``epsilon_high`` are
    not used by :class:`BandGRPOTrainer`)."""

    band_delta: float = dataclasses.field(
        default=0.05, metadata={"help": "BandPO trust-region radius delta"})
    band_divergence: str = dataclasses.field(
        default="kl", metadata={"help": "f-divergence: a name of "
                                        "bandsolve.BUILTIN_DIVERGENCES or alpha:<a>"})
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
        for private in ("_compute_loss", "_get_per_token_logps_and_entropies"):
            if not callable(getattr(GRPOTrainer, private, None)):
                raise _unsupported_trl(f"GRPOTrainer has no {private}")
        super().__init__(*args, **kwargs)
        if not all(hasattr(self, name) for name in ("epsilon_low", "epsilon_high", "loss_type")):
            raise _unsupported_trl("GRPOTrainer keeps no epsilon_low / epsilon_high / loss_type")
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
        # checked here, once: bad settings fail at construction
        self.band_settings = BandSettings(delta=self.args.band_delta,
                                          divergence=self.args.band_divergence,
                                          max_ratio=self.args.band_max_ratio)

    def _compute_loss(self, model, inputs):
        old_log_prob = inputs.get("old_per_token_logps")
        if old_log_prob is None:  # ratio == 1: no clip binds (module docstring)
            return super()._compute_loss(model, inputs)
        lower, upper = self.band_settings.bounds(old_log_prob, mask=inputs["completion_mask"])
        scalar_epsilons = (self.epsilon_low, self.epsilon_high)
        new_log_prob = []
        compute_log_probs = self._get_per_token_logps_and_entropies

        def capture_new_log_prob(*args, **kwargs):
            out = compute_log_probs(*args, **kwargs)
            new_log_prob.append(out[0])
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
        if len(new_log_prob) != 1 or new_log_prob[0].shape != old_log_prob.shape:
            raise _unsupported_trl("GRPOTrainer._compute_loss no longer computes the new "
                                   "per-token log-probabilities once, in the old ones' shape")
        self._log_band(new_log_prob[0].detach(), old_log_prob, inputs["advantages"], lower, upper,
                       inputs["completion_mask"])
        return loss

    @torch.no_grad()
    def _log_band(self, new_log_prob, old_log_prob, advantages, lower, upper, mask):
        mode = "train" if self.model is not None and self.model.training else "eval"
        if advantages.dim() == 1:  # TRL's advantages are per sequence
            advantages = advantages.unsqueeze(1).expand_as(old_log_prob)
        ratio = torch.exp(new_log_prob - old_log_prob)
        metrics = clip_metrics(ratio, advantages, mask, old_log_prob, lower, upper)
        metrics["lower_mean"] = (lower * mask).sum() / mask.sum().clamp(min=1.0)
        metrics["upper_mean"] = (upper.clamp(max=1e30) * mask).sum() / mask.sum().clamp(min=1.0)
        # across processes as TRL gathers its own clip_ratio/* metrics: the mean
        # of the processes' values; token counts add up
        for name, value in metrics.items():
            gathered = self.accelerator.gather(value.to(torch.float32).reshape(1))
            total = gathered.sum() if name.startswith("tokens/") else gathered.nanmean()
            self._metrics[mode][f"band/{name}"].append(total.item())


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
