"""BandPO's settings, validated once: :class:`BandSettings`, the one object
every trainer plug-in maps its configuration onto, and :class:`BandConfigKeys`,
the ``band_*`` keys the plug-ins add to their trainer's config.

No ``from __future__ import annotations`` here: trainers' structured configs
(OmegaConf for verl, SkyRL's) read these fields' real types.
"""

import dataclasses
from typing import Optional

import torch

from ..divergences import DivergenceLike, get_divergence
from .bounds import band_from_logp
from .device_table import TensorBounds
from .validation import Validate, band_arguments, old_log_prob_for_band, validation_mode

__all__ = ["BandSettings", "BandConfigKeys"]


@dataclasses.dataclass(frozen=True)
class BandSettings:
    """The band one run clips to, checked when it is made: BandPO's clipping
    rule (also named :class:`bandsolve.torch.Band`), the f-divergence trust
    region's ratio bounds, capped at ``max_ratio``.

    Attributes
    ----------
    delta : float
        Trust-region radius, > 0.
    divergence : str or Divergence
        Any name ``bandsolve.band`` accepts (``bandsolve.BUILTIN_DIVERGENCES``,
        ``alpha:<a>``), or a Divergence.
    max_ratio : float or None
        Cap on the upper bound, >= 1; None for no cap.
    validate : bool or {"sync", "async"}
        Check old log-probabilities for NaN and +inf, as in
        :func:`bandsolve.torch.band_from_logp` (asynchronously on a GPU); with
        False such tokens get NaN bounds, and so a NaN loss.

    Raises
    ------
    TypeError, ValueError
        At construction, as :func:`bandsolve.band` for delta, divergence and
        max_ratio, and for a ``validate`` that is not one of its values.
        Under ``torch.compile`` delta may be a symbolic float that no host
        check can read: the band checks it when it runs.

    Checked once: :meth:`bounds` checks the old log-probabilities' values,
    and the band it calls finds delta, divergence and max_ratio already
    checked (``bandsolve.torch.validation.band_arguments`` keeps them).
    """

    delta: float = 0.05
    divergence: DivergenceLike = "kl"
    max_ratio: Optional[float] = 10.0  # noqa: UP045  # structured configs read Optional
    validate: Validate = True

    def __post_init__(self):
        if torch.compiler.is_compiling():
            get_divergence(self.divergence)  # delta may be symbolic: the band checks it
        else:
            band_arguments(self.delta, self.divergence, self.max_ratio)
        validation_mode(self.validate)

    def bounds(self, old_log_prob: torch.Tensor, mask: Optional[torch.Tensor] = None  # noqa: UP045
               ) -> TensorBounds:
        """(lower, upper) for a trainer's old log-probabilities, without
        gradient, on their device. Values that rounding put above 0 are read
        as 0; where ``mask`` is 0 (padding) the value is not looked at."""
        old = old_log_prob_for_band(old_log_prob, self.validate, mask)
        # the values are checked (and clamped to <= 0): the band need not
        # look at them again, but for "sync", where a float64 table off the
        # CPU also reads back whether they lie where it is certified
        checked: Validate = "sync" if validation_mode(self.validate) == "sync" else False
        return band_from_logp(old, self.delta, self.divergence, max_ratio=self.max_ratio,
                              validate=checked)


@dataclasses.dataclass
class BandConfigKeys:
    """The keys the verl and SkyRL plug-ins add to their trainer's config.

    ``band_delta`` (0.05)
        Trust-region radius delta.
    ``band_divergence`` ("kl")
        Any name ``bandsolve.band`` accepts: ``bandsolve.BUILTIN_DIVERGENCES``,
        ``alpha:<a>``.
    ``band_max_ratio`` (10.0)
        Cap on the upper bound, or null for none.
    ``band_dual_clip`` (true)
        Dual clip for negative advantages at the trainer's own
        ``clip_ratio_c`` (3 by default).
    ``band_validate`` (true)
        Check old log-probabilities for NaN and +inf: on a GPU a device-side
        assertion with no synchronisation, on the CPU a ValueError
        (``validate=True`` of :func:`bandsolve.torch.band_from_logp`).
    ``band_mode`` ("clip")
        "clip" (PPO's clipped surrogate) or "mask" (the unclipped surrogate
        inside the band, nothing beyond it): ``mode`` of
        :func:`bandsolve.torch.loss_terms`.
    ``band_anchor`` ("old")
        "old" (the band around the old log-probabilities) or "rollout"
        (around the rollout engine's, where the trainer hands them over:
        :func:`bandsolve.torch.rollout_anchored`).
    """

    band_delta: float = BandSettings.delta
    band_divergence: str = "kl"
    band_max_ratio: Optional[float] = BandSettings.max_ratio  # noqa: UP045
    band_dual_clip: bool = True
    band_validate: bool = True
    band_mode: str = "clip"
    band_anchor: str = "old"

