"""OpenRLHF plug-in: the band as the PPO clip of OpenRLHF's actor (OpenRLHF 0.11.x, unmodified).

OpenRLHF has no loss registry: ``ActorPPOTrainer.__init__``
(``openrlhf/trainer/ray/ppo_actor.py``) builds its ``PolicyLoss``
(``openrlhf/models/loss.py``) as ``self.actor_loss_fn``, and
``training_step`` calls that. This module gives

* :class:`BandPolicyLoss`, OpenRLHF's ``PolicyLoss`` with the band in place
  of [1 - clip_eps_low, 1 + clip_eps_high];
* :func:`use_band`, which swaps a trainer's ``actor_loss_fn`` for one, with
  every other setting of the trainer's own;
* :data:`BandPolicyModelActor`, OpenRLHF's Ray actor ``PolicyModelActor``
  that calls :func:`use_band` once its trainer is built;
* :func:`main`, OpenRLHF's ``train_ppo_ray`` command with that actor,
  the band set by ``--band.*`` options.

The command::

    python -m bandsolve.integrations.openrlhf \\
        --band.delta 0.05 --band.divergence kl --band.max_ratio 10 \\
        ...   # the rest: train_ppo_ray's own options, unchanged

Options (all optional; defaults of :class:`bandsolve.torch.BandSettings`):
``--band.delta`` (0.05), ``--band.divergence`` (kl; any name
``bandsolve.band`` accepts), ``--band.max_ratio`` (10; ``none`` for no cap),
``--band.validate`` (true: NaN and +inf old log-probabilities fail the step),
``--band.mode`` (clip; or mask: tokens beyond the band drop out of the loss),
``--band.anchor`` (old; or rollout: the band around vLLM's log-probabilities,
which OpenRLHF asks vLLM for with ``--algo.advantage.is_correction_level``
token or seq, its train/rollout correction then applied as OpenRLHF applies it).

Per token, with r = exp(log_probs - old_log_probs) and [lo, hi] the band of
the old probability, the loss is OpenRLHF's own::

    loss = -min(r A, clip(r, lo, hi) A)
    and for A < 0 with the dual clip c (--actor.dual_clip):
    loss = -max(min(r A, clip(r, lo, hi) A), c A)

:class:`BandPolicyLoss` computes [lo, hi] and hands them to OpenRLHF's
``PolicyLoss.forward`` as per-token ``clip_eps_low = 1 - lo`` and
``clip_eps_high = hi - 1`` for the call (in the ratio's dtype: in float32,
1 - (1 - lo) is lo within 3e-8, exactly for lo >= 0.5): the surrogate, the dual clip,
token- or sequence-level reduction (``--actor.loss_agg_mode``), the
train/rollout importance-sampling corrections (``--algo.advantage.is_correction_*``)
and the metrics (``ppo_clip_ratio``, ``ppo_kl``, ``vllm_kl``, ``is_filter_ratio``)
are OpenRLHF's code. ``--actor.eps_clip`` / ``--actor.eps_clip_low_high``
are not used. ``--actor.policy_loss_type gspo`` is refused: its ratio is one
number per sequence, the band an interval per token.

With ``mode="mask"`` the tokens whose ratio left the band the way their
advantage pushes it get advantage 0 for the call (no loss, no gradient),
the others OpenRLHF's surrogate, which is the unclipped one there; the
returned clip ratio is then the share of those tokens (OpenRLHF's own count
would read 0 on a zero advantage). With ``anchor="rollout"`` the band is that
of ``rollout_log_probs``, written as bounds on OpenRLHF's ratio pi / pi_old
(:func:`bandsolve.torch.rollout_anchored`).

:func:`doctor_checks` is this plug-in's part of ``bandsolve doctor``: whether
the loss :func:`use_band` puts on a trainer serves the band.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import runpy
import sys
from collections.abc import Iterator, Sequence

import ray
import torch
from openrlhf.models.loss import PolicyLoss
from openrlhf.trainer.ray import ppo_actor

from .. import doctor
from ..torch.losses import check_anchor, check_mode, rollout_anchored
from ..torch.settings import BandSettings

__all__ = ["BandPolicyLoss", "BandLossOptions", "use_band", "BandPolicyModelActor", "band_in_openrlhf",
           "parse_band_args", "main", "SUPPORTED_OPENRLHF", "doctor_checks"]

SUPPORTED_OPENRLHF = "openrlhf>=0.11.2,<0.12 (tested at 0.11.2)"


@dataclasses.dataclass(frozen=True)
class BandLossOptions:
    """How :class:`BandPolicyLoss` uses the band, checked when made.

    Attributes
    ----------
    mode : "clip" (PPO's clipped surrogate) or "mask" (tokens beyond the band
        drop out of the loss)
    anchor : "old" (the band around ``old_log_probs``) or "rollout" (around
        ``rollout_log_probs``, vLLM's)
    """

    mode: str = "clip"
    anchor: str = "old"

    def __post_init__(self):
        check_mode(self.mode)
        check_anchor(self.anchor)


class BandPolicyLoss(PolicyLoss):
    """OpenRLHF's ``PolicyLoss`` clipping to the band of each token's old probability.

    Parameters
    ----------
    band : BandSettings
        The band (delta, divergence, max_ratio, validate).
    options : BandLossOptions
        Clip or mask, and around which policy.
    **policy_loss_kwargs
        OpenRLHF's ``PolicyLoss`` arguments (``dual_clip``,
        ``token_level_loss``, ``is_correction_*``); ``clip_eps_low`` and
        ``clip_eps_high`` are kept but not used.

    Raises
    ------
    ValueError
        ``policy_loss_type`` other than ``"ppo"``; ``anchor="rollout"`` with
        ``is_correction_level="off"`` (OpenRLHF then asks vLLM for no
        log-probabilities).
    TypeError
        ``band`` is not a BandSettings.
    """

    def __init__(self, band: BandSettings | None = None, options: BandLossOptions | None = None,
                 **policy_loss_kwargs):
        super().__init__(**policy_loss_kwargs)
        if self.policy_loss_type != "ppo":
            raise ValueError(f"the band is a per-token interval: policy_loss_type must be 'ppo' "
                             f"(got {self.policy_loss_type!r}; gspo's ratio is per sequence)")
        band = BandSettings() if band is None else band
        if not isinstance(band, BandSettings):
            raise TypeError(f"band must be a bandsolve.torch.BandSettings (got "
                            f"{type(band).__name__})")
        self.band = band
        self.options = BandLossOptions() if options is None else options
        if self.options.anchor == "rollout" and self.is_correction_level == "off":
            raise ValueError("anchor='rollout' takes the band around vLLM's log-probabilities, "
                             "which OpenRLHF asks for only with "
                             "--algo.advantage.is_correction_level token or seq")

    @classmethod
    def from_policy_loss(cls, policy_loss: PolicyLoss, band: BandSettings | None = None,
                         options: BandLossOptions | None = None) -> BandPolicyLoss:
        """The band's loss with every setting of ``policy_loss`` (an OpenRLHF
        ``PolicyLoss``, as ``ActorPPOTrainer`` built it from its arguments)."""
        if not isinstance(policy_loss, PolicyLoss):
            raise TypeError(f"expected OpenRLHF's PolicyLoss (got {type(policy_loss).__name__})")
        names = [name for name in inspect.signature(PolicyLoss.__init__).parameters
                 if name != "self"]
        missing = [name for name in names if not hasattr(policy_loss, name)]
        if missing:
            raise _unsupported(f"PolicyLoss keeps no attribute for its arguments {missing}")
        return cls(band, options, **{name: getattr(policy_loss, name) for name in names})

    def forward(self, log_probs: torch.Tensor, old_log_probs: torch.Tensor,
                advantages: torch.Tensor, action_mask: torch.Tensor | None = None,
                rollout_log_probs: torch.Tensor | None = None, *args, **kwargs):
        """OpenRLHF's ``PolicyLoss.forward`` (same arguments, same return
        tuple: loss, clip_ratio, ppo_kl, vllm_kl, is_filter_ratio) with the band
        as the clip interval (see the module docstring for the mask mode)."""
        if self.options.anchor == "rollout":
            if rollout_log_probs is None:
                raise ValueError("anchor='rollout' but OpenRLHF passed no rollout_log_probs")
            lower, upper = rollout_anchored(
                self.band.bounds(rollout_log_probs.detach(), mask=action_mask), old_log_probs,
                rollout_log_probs)
        else:
            lower, upper = self.band.bounds(old_log_probs.detach(), mask=action_mask)
        # OpenRLHF clamps r to [1 - clip_eps_low, 1 + clip_eps_high]: these
        # per-token values make that [lo, hi]. In the ratio's dtype: OpenRLHF's
        # clip_ratio counts clamp(r) A < r A, which needs both sides rounded
        # alike (float32: 1 - (1 - lo) is lo within 3e-8, exact for lo >= 0.5)
        dtype = torch.result_type(log_probs, old_log_probs)
        fixed = self.clip_eps_low, self.clip_eps_high
        lower, upper = lower.to(dtype), upper.to(dtype)
        self.clip_eps_low = 1.0 - lower
        self.clip_eps_high = upper - 1.0
        outside = None
        if self.options.mode == "mask":
            with torch.no_grad():
                ratio = torch.exp(torch.clamp(log_probs - old_log_probs, -20.0, 20.0))
                outside = ((advantages > 0) & (ratio > upper)) | ((advantages < 0) & (ratio < lower))
            advantages = torch.where(outside, torch.zeros_like(advantages), advantages)
        try:
            out = super().forward(log_probs, old_log_probs, advantages, action_mask,
                                  rollout_log_probs, *args, **kwargs)
        finally:
            self.clip_eps_low, self.clip_eps_high = fixed
        if outside is None:
            return out
        weight = torch.ones_like(outside, dtype=torch.float32) if action_mask is None \
            else action_mask.to(torch.float32)
        dropped = (outside.to(torch.float32) * weight).sum() / weight.sum()
        return (out[0], dropped, *out[2:])


def use_band(trainer, band: BandSettings | None = None,
             options: BandLossOptions | None = None) -> BandPolicyLoss:
    """Make ``trainer`` (OpenRLHF's ``ActorPPOTrainer``) clip to the band:
    its ``actor_loss_fn`` becomes a :class:`BandPolicyLoss` with the
    settings of the one it had. Returns the new loss.

    Raises
    ------
    TypeError
        ``trainer.actor_loss_fn`` is not OpenRLHF's PolicyLoss.
    ValueError
        As :class:`BandPolicyLoss` (``policy_loss_type`` gspo).
    """
    current = getattr(trainer, "actor_loss_fn", None)
    if current is None:
        raise _unsupported(f"{type(trainer).__name__} has no actor_loss_fn")
    trainer.actor_loss_fn = BandPolicyLoss.from_policy_loss(current, band, options)
    return trainer.actor_loss_fn


def _band_of(args) -> tuple[BandSettings, BandLossOptions]:
    """The band and its options :func:`band_in_openrlhf` put on OpenRLHF's
    args (defaults if none)."""
    band = getattr(args, "band", None)
    options = getattr(args, "band_options", None)
    return (band if isinstance(band, BandSettings) else BandSettings(),
            options if isinstance(options, BandLossOptions) else BandLossOptions())


class _BandPolicyModelActor(ppo_actor.PolicyModelActor.__ray_metadata__.modified_class):
    """OpenRLHF's ``PolicyModelActor``; its trainer clips to the band in
    ``strategy.args.band`` (put there by :func:`band_in_openrlhf`)."""

    def init_model_from_pretrained(self, strategy, *args, **kwargs):
        super().init_model_from_pretrained(strategy, *args, **kwargs)
        use_band(self.trainer, *_band_of(strategy.args))


#: OpenRLHF's Ray actor ``PolicyModelActor`` (one GPU, as OpenRLHF's) whose
#: ``ActorPPOTrainer`` clips to the band: :func:`use_band` after OpenRLHF built it
BandPolicyModelActor = ray.remote(num_gpus=1)(_BandPolicyModelActor)


@contextlib.contextmanager
def band_in_openrlhf(band: BandSettings, options: BandLossOptions | None = None
                     ) -> Iterator[None]:
    """Within: OpenRLHF's ``train_ppo_ray`` starts :data:`BandPolicyModelActor`
    in place of its ``PolicyModelActor``, and its strategy's args carry
    ``band`` and ``options`` (``args.band``, ``args.band_options``) to every
    actor process. For this process only."""
    options = BandLossOptions() if options is None else options
    import openrlhf.utils

    get_strategy = openrlhf.utils.get_strategy

    def get_strategy_with_band(args):
        args.band, args.band_options = band, options
        return get_strategy(args)

    saved = ppo_actor.PolicyModelActor
    ppo_actor.PolicyModelActor = BandPolicyModelActor
    openrlhf.utils.get_strategy = get_strategy_with_band
    try:
        yield
    finally:
        ppo_actor.PolicyModelActor = saved
        openrlhf.utils.get_strategy = get_strategy


_BAND_OPTIONS = {"--band.delta": "delta", "--band.divergence": "divergence",
                 "--band.max_ratio": "max_ratio", "--band.validate": "validate",
                 "--band.mode": "mode", "--band.anchor": "anchor"}


def parse_band_args(argv: Sequence[str]) -> tuple[BandSettings, BandLossOptions, list[str]]:
    """(the band, its options, the other arguments) from a command line:
    ``--band.<key> value`` or ``--band.<key>=value`` for delta, divergence,
    max_ratio (``none``: no cap), validate (true / false), mode (clip / mask)
    and anchor (old / rollout).

    Raises
    ------
    ValueError
        An unknown ``--band.`` option, one without a value, or a bad value
        (as :class:`BandSettings`).
    """
    values: dict[str, str] = {}
    rest: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if not item.startswith("--band."):
            rest.append(item)
            i += 1
            continue
        option, has_value, value = item.partition("=")
        if option not in _BAND_OPTIONS:
            raise ValueError(f"unknown option {option} (the band's: {', '.join(_BAND_OPTIONS)})")
        if not has_value:
            if i + 1 >= len(items) or items[i + 1].startswith("--"):
                raise ValueError(f"{option} needs a value")
            value = items[i + 1]
            i += 1
        values[_BAND_OPTIONS[option]] = value
        i += 1
    settings: dict[str, object] = {}
    if "delta" in values:
        settings["delta"] = float(values["delta"])
    if "divergence" in values:
        settings["divergence"] = values["divergence"]
    if "max_ratio" in values:
        cap = values["max_ratio"]
        settings["max_ratio"] = None if cap.lower() in ("none", "null") else float(cap)
    if "validate" in values:
        flag = values["validate"].lower()
        if flag not in ("true", "false"):
            raise ValueError(f"--band.validate must be true or false (got {values['validate']!r})")
        settings["validate"] = flag == "true"
    options = BandLossOptions(**{k: values[k] for k in ("mode", "anchor") if k in values})
    return BandSettings(**settings), options, rest  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bandsolve.integrations.openrlhf [--band.* ...] <train_ppo_ray options>``:
    OpenRLHF's ``openrlhf.cli.train_ppo_ray`` with the band as the actor's clip."""
    band, options, rest = parse_band_args(sys.argv[1:] if argv is None else argv)
    sys.argv = ["openrlhf.cli.train_ppo_ray", *rest]
    with band_in_openrlhf(band, options):
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__", alter_sys=True)


def _unsupported(what: str) -> RuntimeError:
    import importlib.metadata

    try:
        version = importlib.metadata.version("openrlhf")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return RuntimeError(f"bandsolve's OpenRLHF plug-in does not support the installed openrlhf "
                        f"{version}: {what}. Supported: {SUPPORTED_OPENRLHF}.")


def doctor_checks() -> list:
    """This plug-in's line of ``bandsolve doctor``: the loss :func:`use_band`
    puts on a trainer as ``ActorPPOTrainer`` leaves it (OpenRLHF's
    ``PolicyLoss`` at its default clip, 0.2), run on the doctor's probe."""
    band = BandSettings(delta=doctor.PROBE_DELTA, divergence="kl")

    def openrlhf_loss(old, new, advantages, mask):
        trainer = type("Trainer", (), {})()
        trainer.actor_loss_fn = PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2)
        use_band(trainer, band)
        return trainer.actor_loss_fn(new, old, advantages, action_mask=mask)[0]

    return [doctor.probe_band("openrlhf", openrlhf_loss,
                              f"install a supported openrlhf: {SUPPORTED_OPENRLHF}")]


if __name__ == "__main__":  # python -m bandsolve.integrations.openrlhf
    main()
