"""One divergence's kernels, as one frozen namespace: ``kernels_for(div)``.

Call sites read ``k = kernels_for(div); k.band_by_root(...)``: the namespace
unpacks the divergence (its parameter and edge values, the kernels'
scalar arguments) and compiles each template for it on first use
(``_factory.specialise``, cached), so that no caller passes a Divergence's
fields positionally and the kernel module holds kernels only. Arguments are
trusted: contiguous float64 arrays, validated by the caller.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from . import _fast, _interpret, _solver
from ._factory import specialise

__all__ = ["Kernels", "kernels_for", "INTERPRET_MAX", "INTERPRET_BUDGET"]

_NO_START = (np.empty(0), np.empty(0))

#: Up to this many elements the root finder, the closed forms and the binary
#: divergence run interpreted (``_interpret``: the kernel's own source, its
#: bits, no compile): about 70 us an element for the root finder, so at most
#: about 5 ms, where a compile costs 1-5 s on the first call after an
#: install and loading a compiled kernel from the disk cache 0.1-0.5 s. A
#: small batch (the CLI's few values, a scalar) compiles nothing, and the few
#: elements a larger call leaves to the root finder (the fast path's
#: uncertified ones, a closed form's subnormal p from log p) compile it only
#: where there are more. Above it each kernel has one compiled copy, which no
#: later batch size compiles again.
INTERPRET_MAX = 64

#: A kernel runs interpreted for at most this many elements in a process,
#: all calls together (about 0.3 s of the root finder's time): past it, and
#: once compiled (or loaded from the disk cache) for a larger batch, it is
#: compiled for every size. A process that keeps calling with small batches
#: (a study's loop) pays the compile once and then microseconds a call,
#: where interpreting costs about 70 us an element. Either way the result
#: is the same, bit for bit (tests/test_factory.py).
INTERPRET_BUDGET = 4096

# What the kernels keep besides their compiled copies (``_factory``'s
# caches): per (template, divergence, constants), the elements run
# interpreted so far, and whether the compiled copy serves. Read and
# written without a lock: a race costs a kernel a few calls interpreted or
# compiled sooner, never a different result.
_interpreted_elements: dict = {}
_compiled_kernels: set = set()


@dataclasses.dataclass(frozen=True)
class Kernels:
    """The kernels of one divergence (any object with a Divergence's fields:
    the kernel layer does not import the problem layer)."""

    divergence: Any

    @property
    def has_closed_form(self) -> bool:
        return self.divergence.margins is not None

    @property
    def has_fast_path(self) -> bool:
        """Whether :meth:`band_fast` exists: the divergence has vector forms."""
        return self.divergence.vector_forms is not None

    def _root_constants(self) -> tuple:
        div = self.divergence
        return div.parameter, div.f_at_zero, div.slope_at_infinity, div.curvature_at_one

    def _kernel(self, template, size: int, **constants):
        """``template`` for this divergence: interpreted up to INTERPRET_MAX
        elements while the kernel has neither been compiled in this process
        nor run INTERPRET_BUDGET elements interpreted, else compiled."""
        key = (template, self.divergence, tuple(sorted(constants.items())))
        if size <= INTERPRET_MAX and key not in _compiled_kernels:
            done = _interpreted_elements.get(key, 0)
            if done + size <= INTERPRET_BUDGET:
                _interpreted_elements[key] = done + size
                return functools.partial(_interpret.run, specialise(
                    template, self.divergence, interpret=True, **constants))
        _compiled_kernels.add(key)
        return specialise(template, self.divergence, **constants)

    def band_by_closed_form(self, x: np.ndarray, from_logp: bool, delta: np.ndarray,
                            lower: np.ndarray, upper: np.ndarray) -> tuple[int, int]:
        """Both bounds of every element from the closed form (never fails);
        returns the count of elements from log p below
        ``_solver.LOG_SMALLEST_NORMAL``, whose upper bounds the caller
        recomputes with :meth:`band_by_root` (the closed form sees the
        rounded p), and, for a batch of p with one delta, the count of p
        outside [0, 1] or NaN (``_solver.band_by_closed_form``)."""
        return self._kernel(_solver.band_by_closed_form, lower.size)(
            x, from_logp, delta, self.divergence.parameter, lower, upper)

    def band_by_root(self, x: np.ndarray, from_logp: bool, delta: np.ndarray,
                     start_upper: np.ndarray, start_lower: np.ndarray, lower: np.ndarray,
                     upper: np.ndarray, status: np.ndarray) -> int:
        """Both bounds by the root finder; fills ``status`` (int8, the
        ``_solver.STATUS_*`` codes) and returns the count of failed elements.
        ``start_*``: warm-start tables (:meth:`margins_at` on
        ``_warm_start.NODE_Z``), or empty arrays."""
        return self._kernel(_solver.band_by_root, lower.size)(
            x, from_logp, delta, *self._root_constants(), start_upper, start_lower,
            lower, upper, status, *self._growth())

    def _growth(self) -> tuple:
        """(exponent, log coefficient) of ``growth_at_infinity``; exponent 0 for none."""
        growth = getattr(self.divergence, "growth_at_infinity", None)
        return (0.0, 0.0) if growth is None else (float(growth[0]), float(growth[1]))

    def binary_divergence(self, p: np.ndarray, r: np.ndarray, out: np.ndarray) -> None:
        """g(p, r) into ``out``."""
        self._kernel(_solver.binary_divergence_kernel, out.size)(
            p, r, self.divergence.parameter, out)

    def margins_at(self, z: np.ndarray, delta: float, x_upper: np.ndarray,
                   x_lower: np.ndarray, start: tuple = _NO_START) -> None:
        """The root finder's x of the upper and lower margin at each z = logit p
        (NaN where the bound is not interior), started from the warm-start
        tables ``start`` (upper, lower) where given."""
        specialise(_solver.margin_at, self.divergence)(
            z, delta, *self._root_constants(), *start, x_upper, x_lower)

    def fast_tables(self, delta: float, start: tuple = _NO_START) -> _fast.FastTables:
        """The fast path's start tables and saturation edges at one delta:
        the root finder at every node of ``_fast.node_logits()``, started
        from the warm-start tables ``start`` where given (a node then costs
        one or two Newton steps instead of about ten)."""
        z = _fast.node_logits()
        x_upper = np.empty(z.size)
        x_lower = np.empty(z.size)
        self.margins_at(z, delta, x_upper, x_lower, start)
        thresholds = (self.saturation_threshold(True, delta),
                      self.saturation_threshold(False, delta))
        return _fast.tables_from(delta, x_upper, x_lower, thresholds, self._lower_at_one(delta))

    def _lower_at_one(self, delta: float) -> float:
        """The root finder's lower bound at p = 1 (interpreted: one element)."""
        lower, upper = np.empty(1), np.empty(1)
        status = np.empty(1, dtype=np.int8)
        failures = self.band_by_root(np.ones(1), False, np.array([delta]), *_NO_START,
                                     lower, upper, status)
        return math.nan if failures else float(lower[0])

    def band_fast(self, tables: _fast.FastTables, x: np.ndarray, from_logp: bool,
                  lower: np.ndarray, upper: np.ndarray, status: np.ndarray
                  ) -> tuple[int, int]:
        """Both bounds by the fast path (``_fast``) at the tables' delta; fills
        ``status`` (int8: ``STATUS_OK``, or ``STATUS_UNCERTIFIED`` where the
        root finder must recompute the element) and returns that count, and
        the count of elements outside the domain (p not in [0, 1], log p not
        <= 0, NaN), for the caller's deferred range check."""
        forms = self.divergence.vector_forms
        return specialise(_fast.band_fast, self.divergence, FROM_LOGP=bool(from_logp))(
            x, tables.delta, self.divergence.parameter, forms.g_rel_error, tables.lower_at_one,
            tables.upper, tables.lower, lower, upper, status)

    def saturation_threshold(self, upper: bool, delta: float) -> float:
        """The z = logit p from which the upper (lower) bound saturates
        (``_solver.saturation_threshold``): one bisection, interpreted (a few
        milliseconds, where compiling it took 0.2-0.4 s)."""
        return float(self._kernel(_solver.saturation_threshold, 1)(
            upper, delta, self.divergence.parameter, self.divergence.f_at_zero))


def kernels_for(divergence) -> Kernels:
    """The kernels of ``divergence``, compiled for it on first use."""
    return Kernels(divergence)
