"""bandsolve for torch trainers (optional extra: ``pip install bandsolve[torch]``).

* Clipping rules: :class:`Band` (BandPO), :class:`PPOClip`, :class:`ClipHigher`,
  :class:`DCPO`, :class:`NoClip`.
* :func:`policy_loss` with :class:`PolicyLossConfig`: the clipped surrogate,
  dual clip, verl's loss aggregation modes, and metrics.

Not yet here (issue 4): the native, compile-friendly ``band`` solver for GPU
tensors, exported bound tables, and the verl and TRL plug-ins.
"""

from .losses import LOSS_AGG_MODES, P_BUCKETS, PolicyLossConfig, aggregate, policy_loss
from .rules import DCPO, Band, ClipHigher, NoClip, PPOClip

__all__ = ["policy_loss", "PolicyLossConfig", "aggregate", "LOSS_AGG_MODES", "P_BUCKETS",
           "Band", "PPOClip", "ClipHigher", "DCPO", "NoClip"]
