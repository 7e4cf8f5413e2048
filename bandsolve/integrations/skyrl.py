"""SkyRL plug-in: BandPO as SkyRL's policy loss ``bandpo`` (SkyRL 0.4.x, unmodified).

Importing this module registers ``bandpo`` in SkyRL's ``PolicyLossRegistry``
(in the importing process; SkyRL's ``initialize_ray`` then copies the driver's
registry to a named Ray actor from which every worker fetches it). The easiest
way to get the import, the extra config keys and the Ray sync right is SkyRL's
own entry point with this module as its override entry point::

    python -m skyrl.train.entrypoints.main_base \\
        trainer.override_entrypoint=bandsolve.integrations.skyrl \\
        trainer.algorithm.policy_loss_type=bandpo \\
        trainer.algorithm.band_delta=0.05 \\
        trainer.algorithm.band_divergence=kl \\
        trainer.algorithm.band_max_ratio=10 \\
        ...   # the rest of your SkyRL config

This module's :func:`main` (called by SkyRL's) parses them with
:class:`BandPOTrainConfig`, which adds the keys below to
``trainer.algorithm`` (SkyRL rejects unknown keys and ``+key=`` overrides).
In a custom entry point, ``import bandsolve.integrations.skyrl`` before
``initialize_ray`` and use :class:`BandPOAlgorithmConfig` (e.g. via SkyRL's
``make_config(algorithm_cls=BandPOAlgorithmConfig)``); with SkyRL's plain
``AlgorithmConfig`` the loss runs with the defaults.

Configuration keys (on ``trainer.algorithm``) are those of
:class:`bandsolve.torch.settings.BandConfigKeys`, as for verl: the band's
settings, and ``band_dual_clip`` (true), the dual clip for negative advantages
at SkyRL's own ``trainer.algorithm.clip_ratio_c`` (3 by default), as in
SkyRL's ``dual_clip`` loss.

SkyRL's ``eps_clip_low``/``eps_clip_high`` are not used: the band replaces
[1 - eps_clip_low, 1 + eps_clip_high] (their clip fractions on the same ratios
are logged as ``band/fixed_clipfrac_*``). ``band_mode`` ("clip" or "mask":
the unclipped surrogate inside the band, nothing beyond it) and
``band_anchor`` ("old" or "rollout": the band around ``rollout_logprobs``,
the inference engine's log-probabilities SkyRL hands the loss, as bounds on
SkyRL's ratio pi / pi_old, its ``off_policy_correction`` applied as before)
are the verl plug-in's keys. The per-token loss is BandPO's clipped
surrogate; SkyRL's ``off_policy_correction`` is applied as in its ``regular``
loss. Reduction is SkyRL's own: the trainer pre-scales the advantages per
``loss_reduction`` (token_mean, token_mean_legacy, sequence_mean,
seq_mean_token_sum_norm, prompt_mean) and the loss is SkyRL's masked sum
``reduce_loss``; the surrogate is positively homogeneous in the advantage, so
every reduction mode means exactly what it means for ``regular``.
Metrics (SkyRL logs them as ``loss_metrics/<name>``): ``clip_ratio`` (SkyRL's
meaning: share of tokens where the clipped term is the active one),
``dual_clip_ratio``, ``ppo_kl`` and ``band/*`` (clip fractions and band widths
by old-probability bucket, the share of tokens whose band is wider than
Clip-Higher's), as Python floats (one device-to-host read).

:func:`doctor_checks` is this plug-in's part of ``bandsolve doctor``: whether
the loss SkyRL's registry returns for ``bandpo`` serves the band.
"""

# no ``from __future__ import annotations``: SkyRL resolves nested config
# dataclasses from the real field types
import dataclasses
import functools
import sys
from collections.abc import Sequence

import torch
from skyrl.backends.skyrl_train.utils.off_policy_correction_utils import (
    apply_off_policy_correction,
)
from skyrl.backends.skyrl_train.utils.ppo_utils import PolicyLossRegistry, reduce_loss
from skyrl.train.config import AlgorithmConfig, SkyRLTrainConfig, TrainerConfig

from .. import doctor
from .._extras import pip_command
from ..torch.losses import from_band_keys, host_metrics, loss_terms, masked_mean
from ..torch.settings import BandConfigKeys

__all__ = ["BandPOAlgorithmConfig", "BandPOTrainerConfig", "BandPOTrainConfig",
           "compute_policy_loss_bandpo", "register", "main", "LOSS_NAME", "doctor_checks"]

LOSS_NAME = "bandpo"


@dataclasses.dataclass
class BandPOAlgorithmConfig(AlgorithmConfig, BandConfigKeys):
    """SkyRL's AlgorithmConfig with BandPO's keys (see the module docstring)."""

    policy_loss_type: str = LOSS_NAME


@dataclasses.dataclass
class BandPOTrainerConfig(TrainerConfig):
    """SkyRL's TrainerConfig whose ``algorithm`` is :class:`BandPOAlgorithmConfig`."""

    algorithm: BandPOAlgorithmConfig = dataclasses.field(default_factory=BandPOAlgorithmConfig)


@dataclasses.dataclass
class BandPOTrainConfig(SkyRLTrainConfig):
    """SkyRL's top-level config with :class:`BandPOTrainerConfig`."""

    trainer: BandPOTrainerConfig = dataclasses.field(default_factory=BandPOTrainerConfig)


def compute_policy_loss_bandpo(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    config: AlgorithmConfig,
    loss_mask: torch.Tensor | None = None,
    rollout_logprobs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """BandPO's clipped surrogate in SkyRL's policy-loss signature.

    ``config`` is SkyRL's ``trainer.algorithm`` config (``AlgorithmConfig`` or
    :class:`BandPOAlgorithmConfig`); the band's settings are its ``band_*``
    attributes (defaults where absent), the dual clip is ``clip_ratio_c``.
    ``advantages`` arrive pre-scaled by SkyRL's ``loss_reduction``; the
    returned loss is the masked sum, as for SkyRL's ``regular`` loss.

    Raises
    ------
    ValueError
        With ``band_validate``, NaN or +inf in ``old_log_probs``; a bad delta,
        divergence or max_ratio (as ``bandsolve.band``), mode or anchor;
        ``clip_ratio_c <= 1`` with the dual clip; ``band_anchor="rollout"``
        without ``rollout_logprobs``.
    """
    if loss_mask is None:
        loss_mask = torch.ones_like(log_probs)
    # SkyRL's algorithm config is an object or a dict
    get = config.get if isinstance(config, dict) else functools.partial(getattr, config)
    settings, dual_clip, mode, anchor = from_band_keys(get, getattr(config, "clip_ratio_c", 3.0))
    if anchor == "rollout" and rollout_logprobs is None:
        raise ValueError("band_anchor=rollout: SkyRL passed the policy loss no rollout_logprobs "
                         "(the inference engine's log-probabilities)")
    terms = loss_terms(log_probs, old_log_probs, advantages, loss_mask, settings, dual_clip, mode,
                       rollout_logprobs if anchor == "rollout" else None)
    loss = terms.pg_losses

    mask = loss_mask.detach()
    with torch.no_grad():
        # SkyRL's clip_ratio: where the clipped term is the larger loss
        unclipped = -terms.advantages * terms.ratio
        clipped = -terms.advantages * torch.clamp(terms.ratio, terms.lower, terms.upper)
        scalars = {"clip_ratio": masked_mean(clipped > unclipped, mask),
                   "dual_clip_ratio": terms.dual_clip_fraction(mask),
                   "ppo_kl": terms.approx_kl(mask)}
    fixed = (1.0 - float(getattr(config, "eps_clip_low", 0.2)),
             1.0 + float(getattr(config, "eps_clip_high", 0.2)))
    scalars.update({f"band/{k}": v for k, v in terms.clip_metrics(mask, fixed).items()})

    loss, loss_mask, off_policy_metrics = apply_off_policy_correction(
        loss, old_log_probs, rollout_logprobs, loss_mask,
        getattr(config, "off_policy_correction", None))
    metrics: dict[str, float] = host_metrics(scalars)  # one host read
    metrics.update(off_policy_metrics)
    return reduce_loss(loss, loss_mask), metrics


def register() -> None:
    """Register ``bandpo`` in SkyRL's PolicyLossRegistry (done on import; call
    again after ``PolicyLossRegistry.reset()``). A no-op if it is registered."""
    try:
        PolicyLossRegistry.register(LOSS_NAME, compute_policy_loss_bandpo)
    except ValueError:
        registered = PolicyLossRegistry.get(LOSS_NAME)
        if getattr(registered, "__qualname__", None) != compute_policy_loss_bandpo.__qualname__ \
                or getattr(registered, "__module__", None) != __name__:
            raise


register()


def main(argv: Sequence[str] | None = None) -> None:
    """SkyRL's ``main_base.main`` with :class:`BandPOTrainConfig` (for
    ``trainer.override_entrypoint=bandsolve.integrations.skyrl``, which is dropped)."""
    import ray
    from skyrl.train.entrypoints import main_base

    args = [a for a in (sys.argv[1:] if argv is None else argv)
            if not a.startswith("trainer.override_entrypoint=")]
    cfg = BandPOTrainConfig.from_cli_overrides(args)
    main_base.validate_cfg(cfg)
    main_base.initialize_ray(cfg)  # syncs the registry, bandpo included, to Ray
    ray.get(main_base.skyrl_entrypoint.remote(cfg))


def doctor_checks() -> list:
    """This plug-in's line of ``bandsolve doctor``: the loss SkyRL's registry
    returns for ``bandpo``, on SkyRL's algorithm config with the band's keys
    (and SkyRL's own eps_clip), run on the doctor's probe."""
    config = BandPOAlgorithmConfig(band_delta=doctor.PROBE_DELTA, band_divergence="kl")

    def skyrl_loss(old, new, advantages, mask):
        return PolicyLossRegistry.get(LOSS_NAME)(new, old, advantages, config, mask)[0]

    return [doctor.probe_band("skyrl", skyrl_loss, pip_command("skyrl", force=True))]
