"""verl plug-in: BandPO as verl's policy loss ``bandpo`` (verl 0.9.x, unmodified).

Importing this module registers ``bandpo`` in verl's policy-loss registry.
verl imports it for you in either of two ways:

* the ``verl.plugins`` entry point that bandsolve declares (verl loads every
  such plug-in on ``import verl`` unless ``VERL_USE_EXTERNAL_PLUGINS=none``);
* ``VERL_USE_EXTERNAL_MODULES=bandsolve.torch.verl``.

Then select it and set the band on the command line::

    actor_rollout_ref.actor.policy_loss.loss_mode=bandpo
    actor_rollout_ref.actor.policy_loss._target_=bandsolve.torch.verl.BandPOPolicyLossConfig
    +actor_rollout_ref.actor.policy_loss.band_delta=0.05
    +actor_rollout_ref.actor.policy_loss.band_divergence=kl
    +actor_rollout_ref.actor.policy_loss.band_max_ratio=10

Configuration keys (on ``actor.policy_loss``; the ``_target_`` line swaps
verl's PolicyLossConfig for :class:`BandPOPolicyLossConfig`, which adds them):

``band_delta`` (0.05)
    Trust-region radius delta.
``band_divergence`` ("kl")
    Any name ``bandsolve.band`` accepts: kl, rkl, tv, chi2, neyman_chi2,
    hellinger, js, ``alpha:<a>``.
``band_max_ratio`` (10.0)
    Cap on the upper bound, or null for none.
``band_dual_clip`` (true)
    Dual clip for negative advantages at verl's own ``actor.clip_ratio_c``
    (3 by default), as in verl's ``vanilla`` loss.
``band_validate`` (true)
    Check old log-probabilities for NaN and +inf: on a GPU a device-side
    assertion with no synchronisation, on the CPU a ValueError
    (``validate=True`` of :func:`bandsolve.torch.band_from_logp`).

Without the ``_target_`` override the loss runs with these defaults.
The per-token loss is BandPO's clipped surrogate with the band in place of
[1 - eps, 1 + eps]; aggregation is verl's own ``agg_loss`` with the global
batch information verl passes, so it is invariant to data parallelism exactly
as ``vanilla`` is. Metrics: verl's ``actor/pg_clipfrac``,
``actor/pg_clipfrac_lower`` and ``actor/ppo_kl``, and ``actor/band/*``
(clip fractions and band widths by old-probability bucket, the share of
tokens whose band is wider than Clip-Higher's).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import torch
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.workers.config import PolicyLossConfig

from .bounds import band_from_logp, old_log_prob_for_band
from .losses import _masked_mean, clip_metrics, clipped_surrogate

__all__ = ["BandPOPolicyLossConfig", "compute_policy_loss_bandpo", "LOSS_NAME"]

LOSS_NAME = "bandpo"


@dataclasses.dataclass
class BandPOPolicyLossConfig(PolicyLossConfig):
    """verl's PolicyLossConfig with BandPO's keys (see the module docstring)."""

    loss_mode: str = LOSS_NAME
    band_delta: float = 0.05
    band_divergence: str = "kl"
    band_max_ratio: Optional[float] = 10.0  # noqa: UP045  # OmegaConf structured configs read Optional
    band_dual_clip: bool = True
    band_validate: bool = True


_DEFAULTS = BandPOPolicyLossConfig()


def _setting(config, key: str):
    policy_loss = config.get("policy_loss", None) if config is not None else None
    if policy_loss is None:
        return getattr(_DEFAULTS, key)
    return policy_loss.get(key, getattr(_DEFAULTS, key))


@register_policy_loss(LOSS_NAME)
def compute_policy_loss_bandpo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """BandPO's clipped surrogate in verl's policy-loss signature.

    ``config`` is verl's ActorConfig (or its DictConfig); the band's settings
    are read from ``config.policy_loss`` and the dual clip from
    ``config.clip_ratio_c``.

    Raises
    ------
    ValueError
        With ``band_validate``, NaN or +inf in ``old_log_prob``; a bad delta,
        divergence or max_ratio (as ``bandsolve.band``).
    """
    if config is None:
        raise ValueError("compute_policy_loss_bandpo needs verl's actor config")
    lower, upper = band_from_logp(
        old_log_prob_for_band(old_log_prob, bool(_setting(config, "band_validate")),
                              mask=response_mask),
        float(_setting(config, "band_delta")), str(_setting(config, "band_divergence")),
        max_ratio=_setting(config, "band_max_ratio"),
        validate=bool(_setting(config, "band_validate")))
    dual_clip = float(config.get("clip_ratio_c", 3.0)) if _setting(config, "band_dual_clip") \
        else None
    if dual_clip is not None and not dual_clip > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 for the dual clip (got {dual_clip})")

    # padding never matters: a masked token's ratio is 1 whatever its old value
    old_log_prob = torch.where(response_mask.bool(), old_log_prob, log_prob.detach())
    # as verl's vanilla loss: the log-ratio is clamped for stability
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    pg_losses = clipped_surrogate(ratio, advantages, lower.to(ratio.dtype),
                                  upper.to(ratio.dtype), dual_clip)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    global_batch_info = config.get("global_batch_info", None) or {}
    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask,
                       loss_agg_mode=loss_agg_mode, **global_batch_info)

    with torch.no_grad():
        band = clip_metrics(ratio, advantages, response_mask, old_log_prob, lower, upper)
        # verl's meanings: pg_clipfrac where the clip binds, pg_clipfrac_lower
        # where the dual clip does
        if dual_clip is None:
            dual_clipped = torch.zeros_like(ratio, dtype=torch.bool)
        else:
            dual_clipped = (advantages < 0) & (torch.maximum(ratio, lower.to(ratio.dtype))
                                               > dual_clip)
        metrics = {
            "actor/pg_clipfrac": band["clipfrac_upper"] + band["clipfrac_lower"],
            "actor/pg_clipfrac_lower": _masked_mean(dual_clipped, response_mask),
            "actor/ppo_kl": _masked_mean(-log_ratio, response_mask),
        }
        metrics.update({f"actor/band/{k}": v for k, v in band.items()})
    return pg_loss, metrics
