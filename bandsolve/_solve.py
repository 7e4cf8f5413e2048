"""The private solve: a validated :class:`~bandsolve._validate.BandRequest` in,
bounds out, with no checks repeated.

Every caller that has validated once calls :func:`solve`: the numpy API,
``convex.band`` (for its estimates), ``calibrate``. A caller that solves with
one divergence and delta again and again (a trainer's step, a calibration)
holds a :class:`WarmStart` and passes it, or the fast path's tables
(``bandsolve.FastBand`` holds them). A caller that holds neither gets the
fast path's tables from :data:`BAND_TABLES`, the one cache of this module:
bounded, keyed on (divergence, delta), and documented below.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from ._kernels import _fast, _solver, _warm_start
from ._kernels._bind import INTERPRET_MAX, kernels_for
from ._validate import BandRequest, check_deferred_range

__all__ = ["BAND_TABLES", "BandSolveError", "TableCache", "WarmStart", "cached_fast_tables",
           "solve"]

# From this many elements with one delta, a table of starting points pays:
# building it (8194 solves, about 1.7 ms for kl) costs about what 4096
# elements save in one call (about 470 ns each from scratch, 130 with the
# table), and nothing in later calls that reuse it (a WarmStart).
# See _kernels/_warm_start.py.
WARM_START_MIN_SIZE = 4096

# From this many elements with one delta, solve takes the fast path
# (``_kernels/_fast.py``), with the caller's tables (a FastBand's) or those
# of BAND_TABLES. The choice depends on the size alone, never on what the
# cache holds, so a call's result does not depend on the calls before it.
# Set from benchmarks/bench_fast.py (benchmarks/RESULTS.md, issue 20): for kl
# a throwaway table measured 1.2x the warm-started root finder at 32,768
# elements and 2.1x at 131,072 (the build, 5-15 ms, amortised); this sits
# between, on the safe side.
FAST_MIN_SIZE = 1 << 16


class BandSolveError(RuntimeError):
    """The root finder could not return a bound to the promised accuracy.

    Two causes, each named in the message: the divergence's g overflows
    float64 next to the root (only at radii far beyond any trust region in
    use, and only for a user generator: the built-in alpha family forms the
    term that overflows in the log domain; see docs/accuracy.md; use a
    smaller delta), or
    the iteration did not converge (never observed for the built-in
    divergences; for a user generator, a sign that f is NaN, raises, is not
    convex or not accurate where the solver evaluates it). A user generator
    that is +inf next to a root is reported as the first cause.
    """


class WarmStart:
    """Starting points of the root finder for one divergence and one delta:
    a table of the band in logit p (``_kernels/_warm_start.py``), built on
    first use by :func:`solve` and reused while the delta is the same.

    Owned by the caller that reuses a delta (131 kB); a different delta
    rebuilds it. Not shared between threads.
    """

    def __init__(self):
        self._key = None
        self._tables = (np.empty(0), np.empty(0))

    def tables(self, divergence, delta: float) -> tuple:
        """(upper, lower) start tables for ``divergence`` at ``delta``."""
        if self._key != (divergence, delta):
            start_upper = np.empty(_warm_start.NODES)
            start_lower = np.empty(_warm_start.NODES)
            kernels_for(divergence).margins_at(_warm_start.NODE_Z, delta, start_upper,
                                               start_lower)
            self._key, self._tables = (divergence, delta), (start_upper, start_lower)
        return self._tables


class TableCache:
    """The fast path's tables of the last ``maxsize`` (divergence, delta)
    pairs :func:`solve` met without tables of the caller's, most recently
    used kept.

    ``bandsolve.band`` on a large single-delta batch goes through it
    (:data:`BAND_TABLES`), so that a trainer calling ``band`` with the same
    delta every step builds the tables once (about 16 ms for kl), as a
    ``FastBand`` does. An entry holds about 370 kB (two start tables of
    3840 x 6 float64 and the saturation edges), so the cache at most
    ``maxsize`` times that. Entries are read-only, and the cache is safe to
    use from several threads (two threads that miss together may both build
    the same entry; one is kept). ``clear()`` empties it.
    """

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def tables(self, divergence, delta: float) -> _fast.FastTables:
        """The tables for ``divergence`` at ``delta``, built on a miss."""
        key = (divergence, delta)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        built = fast_tables(divergence, delta, WarmStart())
        with self._lock:
            self._entries[key] = built
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return built


#: The tables ``band`` uses (see :class:`TableCache`): four pairs of
#: (divergence, delta), about 1.5 MB at most.
BAND_TABLES = TableCache(maxsize=4)

_NO_TABLE = (np.empty(0), np.empty(0))


def _raise_solver_failure(request: BandRequest, status: np.ndarray, failures: int):
    i = int(np.flatnonzero(status)[0])
    x, delta = request.x, request.delta
    name = "log p" if request.from_logp else "p"
    where = (f"the first at flat index {i} ({name} = {float(x[i if x.size > 1 else 0])!r}, "
             f"delta = {float(delta[i if delta.size > 1 else 0])!r})")
    div = request.divergence
    if status[i] == _solver.STATUS_OVERFLOW:
        raise BandSolveError(
            f"{div.name}: the binary divergence evaluates to +inf next to the bounds of "
            f"{failures} elements, so they cannot be resolved; {where}. Either g overflows "
            f"float64 there (the generator or its conjugate at an extreme argument: a user "
            f"generator without a log-domain form, at a huge delta, a tiny p or 1 - p, or "
            f"with huge values) or the generator is +inf there")
    raise BandSolveError(
        f"{div.name}: the root finder did not converge for the bounds of {failures} "
        f"elements; {where}. For a user generator: f is NaN, raises, or is not convex where "
        f"the root finder evaluates it")


def _fast_tables(request: BandRequest, kernels, fast):
    """The fast path's tables for this request, or None for the root finder:
    the caller's where given, else BAND_TABLES' where the batch is large
    enough to pay for building them."""
    if not kernels.has_fast_path or request.delta.size != 1 or request.x.size != request.size:
        return None
    if fast is None and request.size >= FAST_MIN_SIZE:
        fast = BAND_TABLES.tables(request.divergence, float(request.delta[0]))
    return fast


def cached_fast_tables(divergence, delta: float, size: int) -> _fast.FastTables | None:
    """:data:`BAND_TABLES`' tables for one divergence and delta, for a caller
    that takes the fast path for a batch of any ``size`` that compiles
    (``bandsolve.torch`` for float32 and half tensors, whose trainer calls
    with one delta every step); None where the divergence has no fast path
    or the batch is interpreted (``_bind.INTERPRET_MAX`` elements or fewer,
    where building the tables would compile their kernels for nothing)."""
    if size <= INTERPRET_MAX or not kernels_for(divergence).has_fast_path:
        return None
    return BAND_TABLES.tables(divergence, delta)


def fast_tables(divergence, delta: float, warm_start: WarmStart) -> _fast.FastTables:
    """The fast path's tables for one divergence and delta, their nodes
    solved from ``warm_start``'s tables (built into it here, where it has
    none for this delta; a FastBand's fallback then reuses them)."""
    return kernels_for(divergence).fast_tables(delta, warm_start.tables(divergence, delta))


def _band_by_root(request: BandRequest, kernels, warm_start, x, lower, upper, status) -> int:
    """The root finder for the elements ``x`` (all of the request's, or the
    ones the fast path left): bounds and status, and the count of failures."""
    start = _NO_TABLE
    if request.delta.size == 1 and (warm_start is not None or x.size >= WARM_START_MIN_SIZE):
        start = (warm_start or WarmStart()).tables(request.divergence,
                                                   float(request.delta[0]))
    return kernels.band_by_root(x, request.from_logp, request.delta, *start, lower, upper,
                                status)


def _band_fast(request: BandRequest, kernels, tables, warm_start, lower, upper,
               status) -> int:
    """The fast path, then the root finder for the elements it could not
    certify; returns the count of failures, as the root finder does."""
    uncertified, outside = kernels.band_fast(tables, request.x, request.from_logp, lower, upper,
                                             status)
    if outside:
        check_deferred_range(request)
        raise AssertionError("the fast path counted values outside the domain that the "
                             "range check passed")  # a bandsolve bug
    if not uncertified:
        return 0
    where = np.flatnonzero(status)
    sub_lower, sub_upper = np.empty(where.size), np.empty(where.size)
    sub_status = np.empty(where.size, dtype=np.int8)
    failures = _band_by_root(request, kernels, warm_start, request.x[where], sub_lower,
                             sub_upper, sub_status)
    lower[where], upper[where], status[where] = sub_lower, sub_upper, sub_status
    return failures


def _upper_from_small_logp(request: BandRequest, kernels, upper) -> None:
    """The upper bounds of the elements from log p below 2^-1022 (p rounded to
    a subnormal or 0), which a closed form took from the rounded p: the root
    finder's, from log p itself (``_solver.upper_from_small_logp``)."""
    n = upper.size
    x = np.broadcast_to(request.x, (n,))
    where = np.flatnonzero((x < _solver.LOG_SMALLEST_NORMAL) & (x > -np.inf))
    delta = request.delta[where] if request.delta.size > 1 else request.delta
    sub_lower, sub_upper = np.empty(where.size), np.empty(where.size)
    sub_status = np.empty(where.size, dtype=np.int8)
    failures = kernels.band_by_root(np.ascontiguousarray(x[where]), True, delta, *_NO_TABLE,
                                    sub_lower, sub_upper, sub_status)
    upper[where] = sub_upper
    if failures and request.on_failure == "raise":
        status = np.zeros(n, dtype=np.int8)
        status[where] = sub_status
        _raise_solver_failure(request, status, failures)


def solve(request: BandRequest, warm_start: WarmStart | None = None,
          out: tuple | None = None, fast: _fast.FastTables | None = None) -> tuple:
    """(lower, upper) of the request's shape (into ``out``, already checked
    by the caller, where given).

    ``warm_start``: the caller's :class:`WarmStart`, used where the request
    has one delta; without one, a table is built for this call alone where
    it pays (``WARM_START_MIN_SIZE`` elements or more).
    ``fast``: the fast path's tables for the request's divergence and its one
    delta (a FastBand's); without them, :data:`BAND_TABLES`' are used where
    the batch has ``FAST_MIN_SIZE`` elements or more. Either way the elements the
    fast path cannot certify are recomputed by the root finder, so the
    result carries the same accuracy statement.
    Raises BandSolveError where a bound failed, unless the request's
    ``on_failure`` is "nan": then the failed bounds are NaN.
    """
    shape, n = request.shape, request.size
    div = request.divergence
    if out is not None and all(a.flags.c_contiguous for a in out):
        # views (of the base class, for subclasses such as np.matrix, whose
        # reshape stays 2-D): the kernels write in place
        lower, upper = (np.asarray(a).reshape(-1) for a in out)
    else:
        # np.zeros, not np.empty: calloc hands out fresh zero pages, which the
        # kernel's threads fault in about 3x faster than recycled heap memory
        # (measured: 4 ms against 13 ms for two 1e6 outputs, benchmarks/RESULTS.md)
        lower = np.zeros(n)
        upper = np.zeros(n)
    kernels = kernels_for(div)
    if n and kernels.has_closed_form:
        small, outside = kernels.band_by_closed_form(request.x, request.from_logp,
                                                     request.delta, lower, upper)
        if outside:
            check_deferred_range(request)
            raise AssertionError("the closed-form kernel counted p outside [0, 1] "
                                 "that the range check passed")  # a bandsolve bug
        if small:
            _upper_from_small_logp(request, kernels, upper)
    elif n:
        status = np.empty(n, dtype=np.int8)
        tables = _fast_tables(request, kernels, fast)
        if tables is not None:
            failures = _band_fast(request, kernels, tables, warm_start, lower, upper, status)
        else:
            check_deferred_range(request)  # the root finder counts nothing
            failures = _band_by_root(request, kernels, warm_start, request.x, lower, upper,
                                     status)
        if failures and request.on_failure == "raise":
            _raise_solver_failure(request, status, failures)
    if request.max_ratio != np.inf:
        np.minimum(upper, request.max_ratio, out=upper)
    if out is None:
        return lower.reshape(shape), upper.reshape(shape)
    for target, result in zip(out, (lower, upper)):
        if not np.shares_memory(target, result):  # a layout the kernels could not write
            np.copyto(target, result.reshape(shape))
    return out[0], out[1]
