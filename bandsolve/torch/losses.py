"""Clipped policy-gradient surrogates: BandPO and its baselines, one signature.

    loss, metrics = policy_loss(log_prob, old_log_prob, advantages, response_mask,
                                PolicyLossConfig(rule=Band(delta=0.05)))

Per token, with r = exp(log_prob - old_log_prob) and [lo, hi] = rule.bounds(old_log_prob),
in ``mode="clip"`` (PPO's):

    loss = max(-A r, -A clip(r, lo, hi)),  and for A < 0 with dual clip c:  min(loss, -c A);

in ``mode="mask"`` (the trust region as a mask, as DPPO's losses use it): the
unclipped surrogate where the ratio is inside the band, or beyond it on the
side the advantage does not push, and nothing (no loss, no gradient) where it
left the band the way the advantage pushes it:

    loss = -A r,  or 0 where A > 0 and r > hi, or A < 0 and r < lo;  dual clip as above.

The two modes' gradients are the same token by token: the clip zeroes the
gradient exactly where the mask drops the token. They differ in the loss
value of the dropped tokens (0 against the clipped -A clip(r, lo, hi)).

Aggregation is verl's ``agg_loss`` on one data-parallel rank, every
``loss_agg_mode`` (fully masked rows count in no sequence mean), with the mask
weighing the tokens as verl's does (0/1, or any weights). As in verl's
own losses, the log-ratio is clamped to [-20, 20] before exp. Values under the
mask never matter: a NaN old log-probability or advantage of a padded token
neither raises nor reaches the loss. Metrics are returned as 0-d tensors (no
host synchronisation), computed under ``torch.no_grad()``.
"""

from __future__ import annotations

import dataclasses
import numbers

import torch

from .rules import Band, ClipHigher
from .settings import BandConfigKeys, BandSettings

#: how the band bounds the surrogate (see the module docstring)
LOSS_MODES = ("clip", "mask")
#: which policy a plug-in takes the band around: the old (proximal) one, or
#: the rollout engine's where the trainer has its log-probabilities
ANCHORS = ("old", "rollout")
LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean",
                  "seq-mean-token-sum-norm")
#: verl's clamp of the log-ratio before exp, for stability
LOG_RATIO_CLAMP = 20.0

# Clip-Higher's interval width, the same for every token: [1 - 0.2, 1 + 0.28]
_CLIP_HIGHER_WIDTH = ClipHigher().eps_low + ClipHigher().eps_high

#: old-probability buckets for the metrics, as (name, low, high)
P_BUCKETS = (("p<1e-3", 0.0, 1e-3), ("1e-3<=p<1e-2", 1e-3, 1e-2), ("1e-2<=p<0.1", 1e-2, 0.1),
             ("0.1<=p<0.5", 0.1, 0.5), ("0.5<=p<0.9", 0.5, 0.9), ("p>=0.9", 0.9, 1.01))


@dataclasses.dataclass(frozen=True)
class PolicyLossConfig:
    """How a policy loss clips and aggregates.

    Attributes
    ----------
    rule : a clipping rule (``Band``, ``PPOClip``, ``ClipHigher``, ``DCPO``, ``NoClip``)
    loss_agg_mode : one of ``LOSS_AGG_MODES`` (verl's names)
    dual_clip : the dual-clip constant c > 1 for negative advantages, or None
        (verl's default is 3; the paper's runs use 10)
    mode : one of ``LOSS_MODES``: ``"clip"`` (PPO's clipped surrogate) or
        ``"mask"`` (the unclipped surrogate inside the band, nothing beyond it)
    """

    rule: object = dataclasses.field(default_factory=Band)
    loss_agg_mode: str = "token-mean"
    dual_clip: float | None = None
    mode: str = "clip"

    def __post_init__(self):
        check_mode(self.mode)
        if self.loss_agg_mode not in LOSS_AGG_MODES:
            raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES} "
                             f"(got {self.loss_agg_mode!r})")
        if self.dual_clip is not None and (isinstance(self.dual_clip, bool) or not isinstance(
                self.dual_clip, numbers.Real)):
            raise TypeError(f"dual_clip must be a number > 1 or None (got "
                            f"{type(self.dual_clip).__name__})")
        if self.dual_clip is not None and not self.dual_clip > 1.0:
            raise ValueError(f"dual_clip must be > 1 or None (got {self.dual_clip})")
        if not hasattr(self.rule, "bounds"):
            raise TypeError(f"rule must have a bounds(old_log_prob) method (got {self.rule!r})")


def check_mode(mode) -> str:
    """``mode`` if it is one of :data:`LOSS_MODES`, else ValueError."""
    if mode not in LOSS_MODES:
        raise ValueError(f"mode must be one of {LOSS_MODES} (got {mode!r})")
    return mode


def check_anchor(anchor) -> str:
    """``anchor`` if it is one of :data:`ANCHORS`, else ValueError."""
    if anchor not in ANCHORS:
        raise ValueError(f"band_anchor must be one of {ANCHORS} (got {anchor!r})")
    return anchor


def from_band_keys(get, clip_ratio_c) -> tuple[BandSettings, float | None, str, str]:
    """(settings, dual clip, mode, anchor) of a trainer's config, which
    :func:`loss_terms` and the anchor take: ``get(key, default)`` reads a key
    of :class:`~bandsolve.torch.settings.BandConfigKeys` (``dict.get``, or
    ``getattr`` of an object), its default where the config has none. The
    dual-clip constant is the trainer's ``clip_ratio_c`` where
    ``band_dual_clip`` is on, else None.

    Raises
    ------
    ValueError
        A bad setting (as :class:`BandSettings`), mode or anchor;
        ``clip_ratio_c <= 1`` with the dual clip.
    """
    def read(key):
        return get(key, getattr(BandConfigKeys, key))

    max_ratio = read("band_max_ratio")
    settings = BandSettings(delta=float(read("band_delta")), divergence=str(read("band_divergence")),
                            max_ratio=None if max_ratio is None else float(max_ratio),
                            validate=bool(read("band_validate")))
    dual_clip = None
    if read("band_dual_clip"):
        dual_clip = float(clip_ratio_c)
        if not dual_clip > 1.0:
            raise ValueError(f"clip_ratio_c must be > 1 for the dual clip (got {dual_clip})")
    return settings, dual_clip, check_mode(read("band_mode")), check_anchor(read("band_anchor"))


def aggregate(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """verl's ``agg_loss`` of a (batch, tokens) loss matrix on one data-parallel
    rank. The mask weighs the tokens, as verl multiplies by it: 0/1 (bool,
    integer or float) as trainers pass it, or any weights; a token's count
    is its weight. Sequence means run over the rows of positive weight.
    Entries of weight 0 never matter, NaN included; a NaN weight makes the
    loss NaN (verl's sequence modes drop its row instead). An all-masked batch gives 0 (verl divides 0 by 0
    there)."""
    weight = mask.to(loss_mat.dtype)
    token_loss = torch.where(mask.bool(), loss_mat, torch.zeros_like(loss_mat)) * weight
    if mode == "token-mean":
        return token_loss.sum() / _nonzero_or_one(weight.sum())
    if mode == "token-sum":
        return token_loss.sum()
    tokens = weight.sum(dim=-1)
    # rows of positive weight only, in the sum as in the count (verl's
    # seq_mask); a NaN weight stays in the sum, so that the loss says NaN
    per_sequence = torch.where(tokens <= 0, 0.0, token_loss.sum(dim=-1))
    if mode == "seq-mean-token-mean":
        per_sequence = per_sequence / _nonzero_or_one(tokens)
    loss = per_sequence.sum() / (tokens > 0).sum().clamp(min=1)
    if mode == "seq-mean-token-sum-norm":
        loss = loss / mask.shape[-1]
    return loss


def _nonzero_or_one(total: torch.Tensor) -> torch.Tensor:
    # a sum of weights, 0 only where every weight is: x / 1 keeps that x = 0
    return torch.where(total == 0, torch.ones_like(total), total)


def masked_mean(x, mask):
    """The mean of x weighted by mask (a 0/1 mask, or weights, as in
    :func:`aggregate`), in float32; 0 where every weight is 0."""
    weight = mask.to(torch.float32)
    x = torch.where(mask.bool(), x.to(torch.float32), torch.zeros((), dtype=torch.float32,
                                                                  device=x.device))
    return (x * weight).sum() / _nonzero_or_one(weight.sum())


def _check(log_prob, old_log_prob, advantages, response_mask):
    named = (("log_prob", log_prob), ("old_log_prob", old_log_prob), ("advantages", advantages),
             ("response_mask", response_mask))
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            # a numpy array has a device too ("cpu"), which made the message
            # "must be on one device (got ['cpu', 'cpu'])"
            raise TypeError(f"{name} must be a torch.Tensor (got {type(t).__name__})")
        if name != "response_mask" and not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor (got {t.dtype})")
    shapes = {t.shape for t in (log_prob, old_log_prob, advantages, response_mask)}
    if len(shapes) != 1:
        raise ValueError("log_prob, old_log_prob, advantages and response_mask must share one "
                         f"shape (got {[tuple(s) for s in shapes]})")
    devices = {t.device for t in (log_prob, old_log_prob, advantages, response_mask)}
    if len(devices) != 1:
        raise ValueError(f"all inputs must be on one device (got {sorted(map(str, devices))})")


@dataclasses.dataclass(frozen=True)
class LossTerms:
    """The per-token pieces of a clipped surrogate (see :func:`loss_terms`)."""

    pg_losses: torch.Tensor
    ratio: torch.Tensor
    log_ratio: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    #: old log-probabilities and advantages, 0 under the mask
    old_log_prob: torch.Tensor
    advantages: torch.Tensor
    dual_clip: float | None

    # metrics: no gradient (a context, not a decorator, which dynamo cannot trace)
    def clip_metrics(self, mask: torch.Tensor, fixed: tuple[float, float] | None = None) -> dict:
        """:func:`clip_metrics` of these terms (``fixed``: the trainer's own
        interval, for the clip fractions it would have had)."""
        with torch.no_grad():
            return clip_metrics(self.ratio, self.advantages, mask, self.old_log_prob,
                                self.lower, self.upper, fixed)

    def dual_clip_fraction(self, mask: torch.Tensor) -> torch.Tensor:
        """Share of tokens where the dual clip binds: A < 0 and max(r, lower) > c."""
        with torch.no_grad():
            if self.dual_clip is None:
                return masked_mean(torch.zeros_like(self.ratio, dtype=torch.bool), mask)
            return masked_mean((self.advantages < 0)
                                & (torch.maximum(self.ratio, self.lower) > self.dual_clip), mask)

    def approx_kl(self, mask: torch.Tensor) -> torch.Tensor:
        """Mean of log pi_old - log pi (verl's and SkyRL's ``ppo_kl``)."""
        with torch.no_grad():
            return masked_mean(-self.log_ratio, mask)


def loss_terms(log_prob, old_log_prob, advantages, response_mask, rule,
               dual_clip: float | None = None, mode: str = "clip",
               rollout_log_prob: torch.Tensor | None = None) -> LossTerms:
    """Per token, the surrogate of ``rule`` (a clipping rule or
    :class:`bandsolve.torch.BandSettings`), before aggregation:

        old        = old_log_prob, 0 where the mask is 0 (padding never matters)
        lo, hi     = rule.bounds(old)
        r          = exp(clamp(log_prob - old, -20, 20))
        pg_loss    = max(-A r, -A clip(r, lo, hi)),  and for A < 0: min(pg_loss, -c A)
                     (mode "clip": :func:`clipped_surrogate`; mode "mask":
                     :func:`masked_surrogate`)

    With ``rollout_log_prob`` (the rollout engine's log-probabilities of the
    same tokens) the band is taken around the rollout policy instead
    (:func:`rollout_anchored`): [lo, hi] bound pi / pi_rollout, and are
    written as bounds on the trainer's r = pi / pi_old, so that the
    trainer's own ratio and importance correction stay as they are.

    The bounds are cast to the ratio's dtype, so that the loss keeps the
    trainer's precision. One masked copy of the old log-probabilities serves
    the bounds, the ratio and the metrics.
    """
    valid = response_mask.bool()
    old_log_prob = torch.where(valid, old_log_prob, torch.zeros_like(old_log_prob))
    advantages = torch.where(valid, advantages, torch.zeros_like(advantages))
    log_ratio = torch.clamp(log_prob - old_log_prob, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    if rollout_log_prob is None:
        lower, upper = rule.bounds(old_log_prob)
        lower, upper = lower.to(ratio.dtype), upper.to(ratio.dtype)
    else:
        rollout = torch.where(valid, rollout_log_prob, torch.zeros_like(rollout_log_prob))
        lower, upper = rollout_anchored(rule.bounds(rollout), old_log_prob, rollout, ratio.dtype)
    surrogate = masked_surrogate if check_mode(mode) == "mask" else clipped_surrogate
    pg_losses = surrogate(ratio, advantages, lower, upper, dual_clip)
    return LossTerms(pg_losses=pg_losses, ratio=ratio, log_ratio=log_ratio, lower=lower,
                     upper=upper, old_log_prob=old_log_prob, advantages=advantages,
                     dual_clip=dual_clip)


def policy_loss(log_prob, old_log_prob, advantages, response_mask, config=PolicyLossConfig()):
    """The clipped surrogate of ``config.rule``, aggregated; returns (loss, metrics).

    Raises
    ------
    ValueError
        Inputs of different shapes or devices; a bad configuration.
    """
    _check(log_prob, old_log_prob, advantages, response_mask)
    terms = loss_terms(log_prob, old_log_prob, advantages, response_mask, config.rule,
                       config.dual_clip, config.mode)
    loss = aggregate(terms.pg_losses, response_mask, config.loss_agg_mode)
    return loss, terms.clip_metrics(response_mask)


def clipped_surrogate(ratio, advantages, lower, upper, dual_clip=None):
    """Per-token loss: max(-A r, -A clip(r, lower, upper)), and for A < 0 with a
    dual clip c, at most -c A."""
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, lower, upper)
    pg_losses = torch.maximum(pg_loss1, pg_loss2)
    if dual_clip is not None:
        pg_loss3 = torch.minimum(pg_losses, -advantages * dual_clip)
        pg_losses = torch.where(advantages < 0, pg_loss3, pg_losses)
    return pg_losses


def rollout_anchored(bounds, old_log_prob, rollout_log_prob, dtype=None):
    """The band of the rollout probabilities as bounds on the trainer's ratio.

    ``bounds`` = (lo, hi), the band of ``rollout_log_prob``: bounds on
    pi / pi_rollout. Since pi / pi_rollout = r pi_old / pi_rollout, the token
    leaves that band exactly where r = pi / pi_old leaves

        [lo w, hi w],   w = pi_rollout / pi_old = exp(rollout_log_prob - old_log_prob)

    (the log-ratio clamped to [-20, 20], as the trainers clamp theirs), which
    this returns, in ``dtype`` (default: the bounds'). No gradient."""
    with torch.no_grad():
        lower, upper = bounds
        dtype = lower.dtype if dtype is None else dtype
        shift = torch.exp(torch.clamp(rollout_log_prob.detach() - old_log_prob.detach(),
                                      -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)).to(dtype)
        return lower.to(dtype) * shift, upper.to(dtype) * shift


def masked_surrogate(ratio, advantages, lower, upper, dual_clip=None):
    """Per-token loss: -A r where the ratio is inside [lower, upper] or beyond
    it on the side A does not push, 0 (and no gradient) where A > 0 and
    r > upper, or A < 0 and r < lower; for A < 0 with a dual clip c, at most -c A."""
    outside = ((advantages > 0) & (ratio > upper)) | ((advantages < 0) & (ratio < lower))
    pg_losses = torch.where(outside, torch.zeros_like(ratio), -advantages * ratio)
    if dual_clip is not None:
        pg_losses = torch.where(advantages < 0, torch.minimum(pg_losses, -advantages * dual_clip),
                                pg_losses)
    return pg_losses


def host_metrics(metrics: dict) -> dict:
    """0-d tensor metrics as Python floats, read from the device at once: one
    device-to-host copy (one synchronisation) for all of them, where a
    trainer's logging takes host numbers (verl's ``Metric`` calls ``.item()``
    on each tensor it is given, SkyRL's reductions take floats)."""
    if not metrics:
        return {}
    values = torch.stack([v.detach().to(torch.float64).reshape(()) for v in metrics.values()])
    return dict(zip(metrics, values.tolist()))


def clip_metrics(ratio, advantages, mask, old_log_prob, lower, upper, fixed=None):
    """Clip fractions (where the clip zeroes the gradient: where the mask drops
    the token) overall and by p bucket, the share of tokens whose band is wider
    than Clip-Higher's, and band widths by p bucket; 0-d tensors. With
    ``fixed`` = (lo, hi), a trainer's own fixed interval: its clip fractions
    on the same ratios (``fixed_clipfrac_upper``, ``fixed_clipfrac_lower``),
    what the run would have clipped without the band."""
    clipped_high = (ratio > upper) & (advantages > 0)
    clipped_low = (ratio < lower) & (advantages < 0)
    width = upper - lower
    metrics = {
        "clipfrac_upper": masked_mean(clipped_high, mask),
        "clipfrac_lower": masked_mean(clipped_low, mask),
        "ratio_mean": masked_mean(ratio, mask),
        "wider_than_clip_higher": masked_mean(width > _CLIP_HIGHER_WIDTH, mask),
    }
    if fixed is not None:
        metrics["fixed_clipfrac_upper"] = masked_mean((ratio > fixed[1]) & (advantages > 0), mask)
        metrics["fixed_clipfrac_lower"] = masked_mean((ratio < fixed[0]) & (advantages < 0), mask)
    p = old_log_prob.exp()
    for name, low, high in P_BUCKETS:
        in_bucket = mask.bool() & (p >= low) & (p < high)
        bucket_weight = torch.where(in_bucket, mask, torch.zeros_like(mask))
        metrics[f"clipfrac/{name}"] = masked_mean(clipped_high | clipped_low, bucket_weight)
        metrics[f"band_width/{name}"] = masked_mean(torch.nan_to_num(width, posinf=1e30),
                                                     bucket_weight)
        metrics[f"tokens/{name}"] = in_bucket.sum()
    return metrics
