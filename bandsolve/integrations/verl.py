"""verl plug-in: BandPO as verl's policy loss ``bandpo`` (verl 0.9.x, unmodified).

Importing this module registers ``bandpo`` in verl's policy-loss registry, or
raises :class:`~bandsolve.integrations._verl_registry.RegistrationError`.
verl imports it for you in either of two ways:

* the ``verl.plugins`` entry point that bandsolve declares (verl loads every
  such plug-in on ``import verl`` unless ``VERL_USE_EXTERNAL_PLUGINS=none``);
* ``VERL_USE_EXTERNAL_MODULES=bandsolve.torch.verl`` (an alias of this module,
  ``bandsolve.integrations.verl``).

Then select it and set the band on the command line::

    actor_rollout_ref.actor.policy_loss.loss_mode=bandpo
    actor_rollout_ref.actor.policy_loss._target_=bandsolve.torch.verl.BandPOPolicyLossConfig
    +actor_rollout_ref.actor.policy_loss.band_delta=0.05
    +actor_rollout_ref.actor.policy_loss.band_divergence=kl
    +actor_rollout_ref.actor.policy_loss.band_max_ratio=10

Configuration keys (on ``actor.policy_loss``; the ``_target_`` line swaps
verl's PolicyLossConfig for :class:`BandPOPolicyLossConfig`, which adds them)
are those of :class:`bandsolve.torch.settings.BandConfigKeys`: ``band_delta``,
``band_divergence``, ``band_max_ratio`` and ``band_validate`` make the
:class:`bandsolve.torch.BandSettings`, and ``band_dual_clip`` (true) puts the
dual clip for negative advantages at verl's own ``actor.clip_ratio_c`` (3 by
default), as in verl's ``vanilla`` loss.

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
from typing import Any

import torch
from verl.trainer.ppo.core_algos import agg_loss
from verl.workers.config import PolicyLossConfig

from ..torch.losses import loss_terms
from ..torch.settings import BandConfigKeys, BandSettings, dual_clip_from_keys, settings_from_keys
from ._verl_registry import LOSS_NAME, register

__all__ = ["BandPOPolicyLossConfig", "compute_policy_loss_bandpo", "LOSS_NAME"]


@dataclasses.dataclass
class BandPOPolicyLossConfig(PolicyLossConfig, BandConfigKeys):
    """verl's PolicyLossConfig with BandPO's keys (see the module docstring)."""

    loss_mode: str = LOSS_NAME


def _band_settings(config) -> tuple[BandSettings, float | None]:
    """(band settings, dual clip) from verl's actor config: the ``band_*``
    keys of ``config.policy_loss`` (defaults where absent), ``clip_ratio_c``."""
    policy_loss = config.get("policy_loss", None) or {}

    def read(key):
        return policy_loss.get(key, getattr(BandConfigKeys, key))

    return (settings_from_keys(read),
            dual_clip_from_keys(read, config.get("clip_ratio_c", 3.0)))


@register
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
    settings, dual_clip = _band_settings(config)
    terms = loss_terms(log_prob, old_log_prob, advantages, response_mask, settings, dual_clip)
    pg_losses = terms.pg_losses
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    global_batch_info = config.get("global_batch_info", None) or {}
    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask,
                       loss_agg_mode=loss_agg_mode, **global_batch_info)

    band = terms.clip_metrics(response_mask)
    # verl's meanings: pg_clipfrac where the clip binds, pg_clipfrac_lower
    # where the dual clip does
    metrics = {
        "actor/pg_clipfrac": band["clipfrac_upper"] + band["clipfrac_lower"],
        "actor/pg_clipfrac_lower": terms.dual_clip_fraction(response_mask),
        "actor/ppo_kl": terms.approx_kl(response_mask),
    }
    metrics.update({f"actor/band/{k}": v for k, v in band.items()})
    return pg_loss, metrics
