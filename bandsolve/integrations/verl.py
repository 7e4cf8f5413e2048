"""verl plug-in: BandPO as verl's policy loss ``bandpo`` (verl 0.9.x, unmodified).

Importing this module registers ``bandpo`` in verl's policy-loss registry, or
raises :class:`~bandsolve.integrations._verl_registry.RegistrationError`.
verl imports it for you in either of two ways:

* the ``verl.plugins`` entry point that bandsolve declares (verl loads every
  such plug-in on ``import verl`` unless ``VERL_USE_EXTERNAL_PLUGINS=none``);
* ``VERL_USE_EXTERNAL_MODULES=bandsolve.integrations.verl``.

Then select it and set the band on the command line::

    actor_rollout_ref.actor.policy_loss.loss_mode=bandpo
    actor_rollout_ref.actor.policy_loss._target_=bandsolve.integrations.verl.BandPOPolicyLossConfig
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

``band_mode`` ("clip") is the surrogate: "clip" (PPO's) or "mask" (the
unclipped surrogate inside the band, nothing beyond it; the same gradient,
as verl's ``dppo_kl`` and ``dppo_tv`` mask with kl and tv). ``band_anchor``
("old") is the policy the band is taken around: "rollout" takes it around the
rollout engine's log-probabilities where verl hands them to the loss
(``rollout_log_probs``, the seventh argument of verl's ``PolicyLossFn``;
verl 0.9's ``ppo_loss`` does not pass it, and the step then fails naming
verl's bypass mode, ``algorithm.rollout_correction.bypass_mode=true``, which
makes the old log-probabilities the rollout's and so centres the band there).

Without the ``_target_`` override the loss runs with these defaults.
The per-token loss is BandPO's clipped surrogate with the band in place of
[1 - eps, 1 + eps]; aggregation is verl's own ``agg_loss`` with the global
batch information verl passes, so it is invariant to data parallelism exactly
as ``vanilla`` is. Metrics (Python floats, read from the device in one copy: verl's ``Metric``
would read each tensor with ``.item()``): verl's ``actor/pg_clipfrac``,
``actor/pg_clipfrac_lower`` and ``actor/ppo_kl``, and ``actor/band/*``
(clip fractions and band widths by old-probability bucket, the share of
tokens whose band is wider than Clip-Higher's).

:func:`doctor_checks` is this plug-in's part of ``bandsolve doctor``: whether
verl will load the plug-in (the entry point, ``VERL_USE_EXTERNAL_PLUGINS``,
``VERL_USE_EXTERNAL_MODULES``), whether ``bandpo`` in verl's registry is this
loss, and whether the loss verl's registry returns serves the band.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
from typing import Any

import torch
from verl.trainer.ppo.core_algos import agg_loss
from verl.workers.config import PolicyLossConfig

from .. import doctor
from .._extras import pip_command
from ..torch.losses import from_band_keys, host_metrics, loss_terms
from ..torch.settings import BandConfigKeys
from ._verl_registry import LOSS_NAME, register

__all__ = ["BandPOPolicyLossConfig", "compute_policy_loss_bandpo", "LOSS_NAME", "doctor_checks"]


@dataclasses.dataclass
class BandPOPolicyLossConfig(PolicyLossConfig, BandConfigKeys):
    """verl's PolicyLossConfig with BandPO's keys (see the module docstring)."""

    loss_mode: str = LOSS_NAME


@register
def compute_policy_loss_bandpo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """BandPO's clipped (or masked) surrogate in verl's policy-loss signature.

    ``config`` is verl's ActorConfig (or its DictConfig); the band's settings
    are read from ``config.policy_loss`` and the dual clip from
    ``config.clip_ratio_c``. ``rollout_is_weights`` (verl's rollout
    correction) multiply each token's loss, as in verl's ``vanilla``;
    ``rollout_log_probs`` serve ``band_anchor="rollout"``.

    Raises
    ------
    ValueError
        With ``band_validate``, NaN or +inf in ``old_log_prob``; a bad delta,
        divergence, max_ratio (as ``bandsolve.band``), mode or anchor;
        ``band_anchor="rollout"`` without ``rollout_log_probs``.
    """
    if config is None:
        raise ValueError("compute_policy_loss_bandpo needs verl's actor config")
    # the band_* keys of config.policy_loss (defaults where absent), clip_ratio_c
    policy_loss = config.get("policy_loss", None) or {}
    settings, dual_clip, mode, anchor = from_band_keys(policy_loss.get,
                                                       config.get("clip_ratio_c", 3.0))
    if anchor == "rollout" and rollout_log_probs is None:
        raise ValueError("band_anchor=rollout: verl passed the policy loss no rollout_log_probs "
                         "(verl 0.9's ppo_loss passes none); set "
                         "algorithm.rollout_correction.bypass_mode=true instead, which makes "
                         "the old log-probabilities the rollout's (docs/verl.md)")
    terms = loss_terms(log_prob, old_log_prob, advantages, response_mask, settings, dual_clip,
                       mode, rollout_log_probs if anchor == "rollout" else None)
    pg_losses = terms.pg_losses
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    global_batch_info = config.get("global_batch_info", None) or {}
    pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask,
                       loss_agg_mode=loss_agg_mode, **global_batch_info)

    fixed = (1.0 - _clip_eps(config, "clip_ratio_low"), 1.0 + _clip_eps(config, "clip_ratio_high"))
    band = terms.clip_metrics(response_mask, fixed)
    # verl's meanings: pg_clipfrac where the clip binds, pg_clipfrac_lower
    # where the dual clip does
    metrics = {
        "actor/pg_clipfrac": band["clipfrac_upper"] + band["clipfrac_lower"],
        "actor/pg_clipfrac_lower": terms.dual_clip_fraction(response_mask),
        "actor/ppo_kl": terms.approx_kl(response_mask),
    }
    metrics.update({f"actor/band/{k}": v for k, v in band.items()})
    # verl's Metric reads each tensor it is given with .item(): one read for all
    return pg_loss, host_metrics(metrics)


def _clip_eps(config, key: str) -> float:
    """verl's clip_ratio_low / _high, or clip_ratio where it is unset (as
    verl's vanilla reads them)."""
    value = config.get(key, None)
    return float(config.get("clip_ratio", 0.2) if value is None else value)


# --------------------------------------------------------- bandsolve doctor

#: the module ``VERL_USE_EXTERNAL_MODULES`` names: this one
PLUGIN_MODULE = __name__
#: what the ``verl.plugins`` entry point names: it registers bandpo and
#: imports this module on first use
ENTRY_MODULE = "bandsolve.integrations.verl_entry_point"


def plugin_policy() -> tuple:
    """(value of VERL_USE_EXTERNAL_PLUGINS, whether verl will load ``bandpo``),
    as ``verl/__init__.py`` reads it."""
    raw = os.environ.get("VERL_USE_EXTERNAL_PLUGINS")
    policy = (raw if raw is not None else "auto").strip().lower()
    if policy == "none":
        return raw, False
    if policy == "auto":
        return raw, True
    return raw, LOSS_NAME in {n.strip() for n in policy.split(",") if n.strip()}


def loads_entry_points() -> bool:
    """Whether the installed verl imports its ``verl.plugins`` entry points on
    ``import verl`` (0.9 on; 0.8, which rLLM pins, has only
    ``VERL_USE_EXTERNAL_MODULES``), read from its ``__init__``."""
    spec = importlib.util.find_spec("verl")
    try:
        with open(spec.origin, encoding="utf-8") as source:  # type: ignore[union-attr, arg-type]
            return '"verl.plugins"' in source.read()
    except (AttributeError, TypeError, OSError):
        return False


def _check_entry_point() -> doctor.Check:
    """The entry point verl discovers, and whether verl is told to load it."""
    name = "verl entry point"
    eps = [ep for ep in importlib.metadata.entry_points(group="verl.plugins")
           if ep.name == LOSS_NAME]
    raw, loads = plugin_policy()
    loader = loads_entry_points()
    loads = loads and loader
    modules = [m.strip() for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",")]
    by_modules = PLUGIN_MODULE in modules
    env = f"VERL_USE_EXTERNAL_PLUGINS={raw!r}" if raw is not None else \
        "VERL_USE_EXTERNAL_PLUGINS unset (auto)"
    if not eps:
        fix = (f"reinstall so that the entry point is registered: {pip_command('verl')}, or set "
               f"VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE}")
        return doctor.Check(name, by_modules,
                            f"no '{LOSS_NAME}' in the 'verl.plugins' entry points of the "
                            "installed distributions" + ("; VERL_USE_EXTERNAL_MODULES loads the "
                                                         "plug-in instead" if by_modules else ""),
                            "" if by_modules else fix)
    if eps[0].value != ENTRY_MODULE:
        return doctor.Check(name, False, f"'{LOSS_NAME}' points to {eps[0].value!r}, not "
                                         f"{ENTRY_MODULE!r}: a stale install",
                            pip_command("verl", force=True))
    if not loader and not by_modules:
        return doctor.Check(name, False, f"declared, but verl {importlib.metadata.version('verl')} "
                                         "loads no 'verl.plugins' entry points (verl 0.9 does)",
                            f"set VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE} where the driver "
                            "and every worker start (docs/verl.md), or use verl>=0.9")
    if not loads and not by_modules:
        return doctor.Check(name, False, f"declared, but {env}: verl will not load it",
                            "unset VERL_USE_EXTERNAL_PLUGINS, add 'bandpo' to its list, or set "
                            f"VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE}")
    how = "loaded on import verl" if loads else "loaded via VERL_USE_EXTERNAL_MODULES"
    return doctor.Check(name, True, f"'{LOSS_NAME}' = {ENTRY_MODULE} ({env}; {how})")


def _check_registry() -> doctor.Check:
    """The registry verl's actor looks the loss up in."""
    from verl.trainer.ppo import core_algos

    name = "verl loss registry"
    try:
        fn = core_algos.get_policy_loss_fn(LOSS_NAME)
    except Exception as exc:  # noqa: BLE001
        return doctor.Check(name, False, doctor.error_text(exc),
                            f"{PLUGIN_MODULE} imported but did not register; reinstall: "
                            + pip_command("verl", force=True))
    if fn is not compute_policy_loss_bandpo:
        where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
        return doctor.Check(name, False, f"'{LOSS_NAME}' resolves to {where}, not bandsolve's: "
                                         "another package registered the same name",
                            "uninstall the other plug-in or set VERL_USE_EXTERNAL_PLUGINS to "
                            "list only 'bandpo'")
    return doctor.Check(name, True, f"get_policy_loss_fn('{LOSS_NAME}') is "
                                    f"{PLUGIN_MODULE}.compute_policy_loss_bandpo")


def _probe() -> doctor.Check:
    """What verl's actor would run under loss_mode=bandpo, on the doctor's probe."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import core_algos

    # verl's actor config as the loss reads it: the band's keys, and verl's own
    # clip (0.2), so that a fixed-interval loss in bandpo's place runs and shows
    config = OmegaConf.create({
        "clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
        "global_batch_info": {},
        "policy_loss": {"loss_mode": LOSS_NAME, "band_delta": doctor.PROBE_DELTA,
                        "band_divergence": "kl"}})

    def verl_loss(old, new, advantages, mask):
        return core_algos.get_policy_loss_fn(LOSS_NAME)(old, new, advantages, mask,
                                                        "token-mean", config)[0]

    return doctor.probe_band("verl", verl_loss, pip_command("verl", force=True))


def doctor_checks() -> list:
    """This plug-in's lines of ``bandsolve doctor`` (see the module docstring)."""
    return [_check_entry_point(), _check_registry(), _probe()]
