"""bandsolve: probability-aware trust-region clipping bounds (the Band operator of BandPO).

The public API, in one place:

* :func:`band`, :func:`band_from_logp`: ratio bounds [lower, upper] per token.
* :func:`binary_divergence`: g_f(p, r), the divergence a ratio costs.
* :func:`calibrate_delta`: the delta that matches a clip rule.
* :class:`Divergence`, :data:`BUILTIN_DIVERGENCES`, :func:`alpha_divergence`,
  :func:`get_divergence`: divergences as data.

``bandsolve.torch`` (optional extra) mirrors this API for tensors;
``bandsolve.convex`` verifies it with cvxpy.
"""

from .api import BandSolveError, band, band_from_logp, binary_divergence
from .calibrate import calibrate_delta
from .divergences import BUILTIN_DIVERGENCES, Divergence, alpha_divergence, get_divergence

__all__ = [
    "band",
    "band_from_logp",
    "binary_divergence",
    "calibrate_delta",
    "BandSolveError",
    "Divergence",
    "BUILTIN_DIVERGENCES",
    "alpha_divergence",
    "get_divergence",
]

__version__ = "0.1.0"
