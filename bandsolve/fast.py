"""FastBand: the band for one divergence and one delta, with the fast path's
tables built once and kept by the caller.

A trainer calls the band with the same delta every step. ``FastBand`` builds
the per-delta start tables of the fast path (``_kernels/_fast.py``) once and
every call reuses them; they belong to the object, as a ``WarmStart`` does,
not to a hidden cache. ``bandsolve.band`` takes the same path for a single
delta from ``_solve.FAST_MIN_SIZE`` elements, with the tables of
``_solve.BAND_TABLES`` (a bounded cache of the last four (divergence, delta)
pairs).
"""

from __future__ import annotations

import time

from numpy.typing import ArrayLike

from . import _validate
from ._kernels._bind import kernels_for
from ._solve import WarmStart, fast_tables
from .api import Bounds, _validated_band
from .divergences import DivergenceLike, get_divergence

__all__ = ["FastBand"]


class FastBand:
    """:func:`bandsolve.band` for one divergence and one delta, with its
    tables owned by the caller.

    Parameters
    ----------
    divergence : str or Divergence, default "kl"
        As in :func:`bandsolve.band`. A divergence with ``vector_forms`` (kl,
        rkl, js, the alpha family) takes the fast path; the others take
        ``band``'s path: the closed forms (already vectorised), and user
        generators (``Divergence.from_generator``), which take the root
        finder with a warm start kept here.
    delta : float
        The trust-region radius every call uses, > 0 and finite.

    Notes
    -----
    Each bound starts from the table, takes one vectorised Newton step, and
    keeps it only where the step certifies it (Newton's truncation below
    1e-14 relative, rounding below 1e-13); every other element (next to a
    saturation threshold, p below 2^-60 or subnormal, p = 1) is recomputed by
    ``band``'s root finder. The results therefore carry ``band``'s accuracy
    statement unchanged. ``build_seconds`` is what the tables cost.
    Not shared between threads (it holds a WarmStart).

    Examples
    --------
    >>> import numpy as np
    >>> solver = FastBand("kl", 0.05)
    >>> lower, upper = solver.band(np.array([0.1, 0.5, 0.9]))
    """

    def __init__(self, divergence: DivergenceLike = "kl", delta: float = 0.05):
        self.divergence = get_divergence(divergence)
        delta_arr = _validate.check_delta(delta)
        if delta_arr.size != 1:
            raise ValueError(f"delta must be a single value for a FastBand (got shape "
                             f"{delta_arr.shape}); use bandsolve.band for one delta per element")
        self.delta = float(delta_arr.reshape(-1)[0])
        self._warm_start = WarmStart()
        started = time.perf_counter()
        self._tables = (fast_tables(self.divergence, self.delta, self._warm_start)
                        if kernels_for(self.divergence).has_fast_path else None)
        self.build_seconds = time.perf_counter() - started

    def __repr__(self) -> str:
        return f"FastBand({self.divergence.name!r}, {self.delta!r})"

    def band(self, p: ArrayLike, *, max_ratio: float | None = None, out: tuple | None = None,
             on_failure: str = "raise") -> Bounds:
        """``bandsolve.band(p, delta, divergence, max_ratio=..., out=..., on_failure=...)``."""
        return _validated_band(p, False, self.delta, self.divergence, max_ratio, out, on_failure,
                               warm_start=self._warm_start, fast=self._tables)

    def band_from_logp(self, logp: ArrayLike, *, max_ratio: float | None = None,
                       out: tuple | None = None, on_failure: str = "raise") -> Bounds:
        """``bandsolve.band_from_logp(logp, delta, divergence, ...)``."""
        return _validated_band(logp, True, self.delta, self.divergence, max_ratio, out,
                               on_failure, warm_start=self._warm_start, fast=self._tables)
