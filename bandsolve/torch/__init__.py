"""bandsolve for torch trainers (optional extra: ``pip install bandsolve[torch]``).

* Bounds on any device, mirroring the numpy API: :func:`band` (from p) and
  :func:`band_from_logp`; :class:`BandTable` for the compiled / CUDA-graph hot
  path and for exported tables (``bandsolve export``).
* Clipping rules: :class:`Band` (BandPO), :class:`PPOClip`, :class:`ClipHigher`,
  :class:`DCPO`, :class:`NoClip`.
* :class:`BandSettings`: the band's settings, checked once; what every
  trainer plug-in maps its config onto.
* :func:`policy_loss` with :class:`PolicyLossConfig`: the clipped surrogate,
  dual clip, verl's loss aggregation modes, and metrics; :func:`loss_terms`,
  its per-token terms, which the trainer plug-ins aggregate their own way.
* Trainer plug-ins live in ``bandsolve.integrations`` (verl, TRL, SkyRL,
  OpenRLHF).
"""

from .._extras import require

require("torch", "bandsolve.torch")

from .bounds import band, band_from_logp
from .device_table import BandTable
from .losses import (
                     LOSS_AGG_MODES,
                     LOSS_MODES,
                     P_BUCKETS,
                     LossTerms,
                     PolicyLossConfig,
                     aggregate,
                     clip_metrics,
                     clipped_surrogate,
                     loss_terms,
                     masked_surrogate,
                     policy_loss,
                     rollout_anchored,
)
from .rules import DCPO, Band, ClipHigher, NoClip, PPOClip
from .settings import BandSettings
from .validation import compute_dtype

__all__ = ["band", "band_from_logp", "BandTable", "compute_dtype",
           "policy_loss", "PolicyLossConfig", "aggregate", "clipped_surrogate", "clip_metrics",
           "loss_terms", "LossTerms", "LOSS_AGG_MODES", "LOSS_MODES", "masked_surrogate",
           "rollout_anchored", "P_BUCKETS", "BandSettings",
           "Band", "PPOClip", "ClipHigher", "DCPO", "NoClip"]
