"""Divergences as data: one :class:`Divergence` record each, one module per family.

Each family module (one per name in ``BUILTIN_NAMES``, and ``alpha``) writes
its generator three times, side by side and independently: in numba for the
kernels, in cvxpy for the convex check, in mpmath for the certificates (kl, rkl, js and alpha a fourth time,
for the fast path's SIMD loop: ``VectorForms``), and ends with its
``DIVERGENCE`` record. ``generic`` turns a user's f into the same record
(:meth:`Divergence.from_generator`). Backends read the record's attributes;
none of them looks at a divergence's name.

Built in, by name: those of ``BUILTIN_NAMES`` (the registry,
``_registry.py``: one line each), and the Amari family ``alpha:<a>`` (or
:func:`alpha_divergence`).
"""

from ._record import Divergence, DivergenceLike, LogForm, MpGenerator, VectorForms
from ._registry import BUILTIN_DIVERGENCES, BUILTIN_NAMES, SAMPLE_NAMES, get_divergence
from .alpha import alpha_divergence

__all__ = ["Divergence", "DivergenceLike", "LogForm", "MpGenerator", "VectorForms",
           "BUILTIN_DIVERGENCES", "BUILTIN_NAMES", "SAMPLE_NAMES",
           "alpha_divergence", "get_divergence"]
