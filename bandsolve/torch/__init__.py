"""bandsolve for torch trainers (optional extra: ``pip install bandsolve[torch]``).

* Bounds on any device, mirroring the numpy API: :func:`band` (from p) and
  :func:`band_from_logp`; :class:`BandTable` for the compiled / CUDA-graph hot
  path and for exported tables (``bandsolve export``).
* Clipping rules: :class:`Band` (BandPO), :class:`PPOClip`, :class:`ClipHigher`,
  :class:`DCPO`, :class:`NoClip`.
* :func:`policy_loss` with :class:`PolicyLossConfig`: the clipped surrogate,
  dual clip, verl's loss aggregation modes, and metrics.
* Trainer plug-ins: ``bandsolve.torch.verl`` (policy loss ``bandpo``) and
  ``bandsolve.torch.trl`` (``BandGRPOTrainer``).
"""

from .bounds import BandTable, band, band_from_logp, compute_dtype
from .losses import (
                     LOSS_AGG_MODES,
                     P_BUCKETS,
                     PolicyLossConfig,
                     aggregate,
                     clip_metrics,
                     clipped_surrogate,
                     policy_loss,
)
from .rules import DCPO, Band, ClipHigher, NoClip, PPOClip

__all__ = ["band", "band_from_logp", "BandTable", "compute_dtype",
           "policy_loss", "PolicyLossConfig", "aggregate", "clipped_surrogate", "clip_metrics",
           "LOSS_AGG_MODES", "P_BUCKETS",
           "Band", "PPOClip", "ClipHigher", "DCPO", "NoClip"]
