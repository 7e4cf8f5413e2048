"""bandsolve: probability-aware trust-region clipping bounds (the Band operator of BandPO).

The public API, in one place:

* :func:`band`, :func:`band_from_logp`: ratio bounds [lower, upper] per token.
* :func:`binary_divergence`: g_f(p, r), the divergence a ratio costs.
* :func:`calibrate_delta`: the delta that matches a clip rule.
* :class:`Divergence`, :data:`BUILTIN_DIVERGENCES`, :func:`alpha_divergence`,
  :func:`get_divergence`: divergences as data.

``bandsolve.torch`` (optional extra) mirrors this API for tensors;
``bandsolve.convex`` verifies it with cvxpy.

The names below are imported on first use (PEP 562, as scipy does), so that
``import bandsolve.integrations...`` (what a trainer's plug-in registry loads
in every process) costs no numba, scipy or kernel import until a bound is
asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .api import BandSolveError, band, band_from_logp, binary_divergence
    from .calibrate import calibrate_delta
    from .divergences import BUILTIN_DIVERGENCES, Divergence, alpha_divergence, get_divergence
    from .fast import FastBand

# public name -> the module that defines it
_EXPORTS = {
    "band": "api",
    "band_from_logp": "api",
    "binary_divergence": "api",
    "BandSolveError": "api",
    "calibrate_delta": "calibrate",
    "Divergence": "divergences",
    "BUILTIN_DIVERGENCES": "divergences",
    "alpha_divergence": "divergences",
    "get_divergence": "divergences",
    "FastBand": "fast",
}

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
    "FastBand",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bandsolve' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
