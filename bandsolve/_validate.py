"""Input checks shared by every backend.

Each check names the parameter, says how many elements fail and where the
first one is, and what is expected, so a bad batch is easy to trace. The
element checks run as one numba pass (``_kernels._scan``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._kernels import _scan
from .divergences import Divergence, get_divergence

_FLOAT_MAX = float(np.finfo(np.float64).max)
#: below this many elements, one serial scan (no threads to wake)
_PARALLEL_SCAN_MIN = 32768

__all__ = ["as_real_array", "check_probability", "check_log_probability",
           "check_delta", "check_max_ratio", "check_ratio", "flat_operands", "BandRequest",
           "band_request", "checked_request", "Memory", "OutKind", "check_out"]


def as_real_array(value, name: str) -> np.ndarray:
    """``value`` as a float64 array; TypeError for non-real input.

    Integers and floats of any width are accepted (float64 holds float16/32
    and most integers exactly). Booleans, complex numbers, strings and
    objects are rejected rather than guessed at.
    """
    if isinstance(value, np.ma.MaskedArray):
        # np.asarray would drop the mask and compute on the hidden values
        raise TypeError(f"{name} is a numpy masked array, whose mask bandsolve would ignore: "
                        f"pass {name}.compressed() (the unmasked values) or {name}.filled(x)")
    try:
        arr = np.asarray(value)
    except Exception as exc:
        raise TypeError(f"{name} must be a real number or an array of them ({exc})") from exc
    kind = arr.dtype.kind
    if kind not in "iuf":
        hint = " (booleans are not numbers here)" if kind == "b" else ""
        raise TypeError(f"{name} must be a real number or an array of real numbers "
                        f"(got dtype {arr.dtype}{hint})")
    return arr.astype(np.float64, copy=False)


def byte_offsets(shape, byte_strides) -> np.ndarray:
    """The byte offset of every element of an array of this shape and these
    strides (in bytes), in no particular order: host arithmetic for the
    overlap checks of ``out=`` in numpy and torch."""
    offsets = np.zeros(1, dtype=np.int64)
    for size, stride in zip(shape, byte_strides):
        offsets = (offsets[:, None] + stride * np.arange(size, dtype=np.int64)).ravel()
    return offsets


def _raise(arr: np.ndarray, count: int, flat_index: int, name: str, what: str):
    value = arr.flat[flat_index]
    # a longdouble prints in its own digits (float() would round it into range)
    shown = repr(float(value)) if arr.dtype.itemsize <= 8 else str(value)
    if arr.ndim == 0:
        where = f"got {shown}"
    else:
        index = tuple(int(i) for i in np.unravel_index(flat_index, arr.shape))
        where = f"{count} of {arr.size} elements, the first at index {index} (value {shown})"
    raise ValueError(f"{name} {what}: {where}")


def _check_wider(value, arr, name, low, high, low_inclusive, high_inclusive, messages):
    """``_check``, after the range test in the input's own precision where it
    is wider than float64 (longdouble): rounding to float64 could carry
    1 + 2^-60 onto 1 or -1e-4000 onto -0.0, inside the range."""
    original = np.asarray(value)
    if original.dtype.kind == "f" and original.dtype.itemsize > 8:
        flat = original.reshape(-1)
        for kind, fails in ((_scan.BELOW, (flat < low) | ((flat == low) & (not low_inclusive))),
                            (_scan.ABOVE, (flat > high) | ((flat == high) & (not high_inclusive)))):
            fails &= np.isfinite(flat)  # NaN and inf survive the rounding: _check names them
            if kind in messages and fails.any():
                where = np.flatnonzero(fails)
                _raise(original, where.size, int(where[0]), name, messages[kind])
    _check(arr, name, low, high, low_inclusive, high_inclusive, messages)


def _check(arr, name, low, high, low_inclusive, high_inclusive, messages):
    """Scan once; raise for the first kind of failure that has a message."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    finite_high = high if high < math.inf else _FLOAT_MAX  # so that inf is caught
    # the parallel count first, where it pays: waking the threads costs
    # about 0.1 ms, more than one serial scan of a small array
    if (high_inclusive and flat.size >= _PARALLEL_SCAN_MIN
            and _scan.count_outside(flat, low, finite_high, low_inclusive) == 0):
        return
    result = _scan.scan(flat, low, high, low_inclusive, high_inclusive)
    # kinds that share a message (below and above a range) are reported together
    for what in dict.fromkeys(messages.values()):
        kinds = [k for k, m in messages.items() if m == what and result[k, 0]]
        if kinds:
            count = int(sum(result[k, 0] for k in kinds))
            first = int(min(result[k, 1] for k in kinds))
            _raise(arr, count, first, name, what)


def check_probability(p, name: str = "p") -> np.ndarray:
    arr = as_real_array(p, name)
    _check_probability_range(p, arr, name)
    return arr


def _check_probability_range(p, arr: np.ndarray, name: str) -> None:
    """p's range, for ``arr = as_real_array(p)``."""
    _check_wider(p, arr, name, 0.0, 1.0, True, True, {
        _scan.NAN: "contains NaN", _scan.POS_INF: "contains inf",
        _scan.NEG_INF: "contains -inf", _scan.BELOW: "must lie in [0, 1]",
        _scan.ABOVE: "must lie in [0, 1]"})


def check_log_probability(logp, name: str = "logp") -> np.ndarray:
    """log p in [-inf, 0]; -inf is log 0, a valid probability of zero."""
    arr = as_real_array(logp, name)
    _check_log_probability_range(logp, arr, name)
    return arr


def _check_log_probability_range(logp, arr: np.ndarray, name: str) -> None:
    """log p's range, for ``arr = as_real_array(logp)``."""
    _check_wider(logp, arr, name, -math.inf, 0.0, True, True, {
        _scan.NAN: "contains NaN", _scan.POS_INF: "contains +inf",
        _scan.ABOVE: "must be <= 0 (a log-probability)"})


def check_delta(delta, name: str = "delta") -> np.ndarray:
    arr = as_real_array(delta, name)
    original = np.asarray(delta)
    if original.dtype.kind == "f" and original.dtype.itemsize > 8:
        lost = (original > 0) & (arr == 0.0)
        if lost.any():
            where = np.flatnonzero(lost.reshape(-1))
            _raise(original, where.size, int(where[0]), name,
                   "is positive but below float64's range (it rounds to 0), so no bound "
                   "can be computed for it")
    _check_wider(delta, arr, name, 0.0, math.inf, False, True, {
        _scan.NAN: "contains NaN", _scan.POS_INF: "contains inf",
        _scan.NEG_INF: "must be positive (the trust-region radius)",
        _scan.BELOW: "must be positive (the trust-region radius)"})
    return arr


def check_ratio(r, name: str = "r") -> np.ndarray:
    arr = as_real_array(r, name)
    _check_wider(r, arr, name, 0.0, math.inf, True, True, {
        _scan.NAN: "contains NaN", _scan.POS_INF: "contains inf",
        _scan.NEG_INF: "must be >= 0 (a ratio of probabilities)",
        _scan.BELOW: "must be >= 0 (a ratio of probabilities)"})
    return arr


def check_max_ratio(max_ratio) -> float:
    """None means no cap; otherwise a number >= 1 (inf allowed)."""
    if max_ratio is None:
        return math.inf
    if isinstance(max_ratio, bool) or not isinstance(max_ratio, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_ratio must be a number or None (got {type(max_ratio).__name__})")
    try:
        value = float(max_ratio)
    except OverflowError:  # an int beyond float64: a cap above every ratio, or below 1
        value = math.inf if max_ratio > 0 else -math.inf
    if math.isnan(value) or value < 1.0:
        raise ValueError(f"max_ratio must be >= 1 or None, since the band always contains "
                         f"ratio 1 (got {max_ratio})")
    return value


def flat_operands(x: np.ndarray, y: np.ndarray):
    """Broadcast two operands like a ufunc, for the elementwise kernels.

    Returns the result shape and two contiguous float64 vectors (read-only
    input stays read-only: the kernels never write to it);
    an operand that is a single value stays of length 1 (the kernels reuse
    it) instead of being copied out to the full size.
    """
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise ValueError(f"the inputs do not broadcast together: shapes {x.shape} and "
                         f"{y.shape}") from None

    def flat(a):
        if a.size == 1:
            return np.array(a, dtype=np.float64).reshape(1)
        if a.shape != shape:  # the kernels index a full-size operand elementwise
            a = np.broadcast_to(a, shape)
        # copies only what is not already C-contiguous float64 in native order
        return np.ascontiguousarray(a, dtype=np.float64).reshape(-1)

    return shape, flat(x), flat(y)


#: What ``on_failure`` accepts: raise BandSolveError, or return NaN bounds.
ON_FAILURE = ("raise", "nan")


@dataclasses.dataclass(frozen=True)
class BandRequest:
    """A validated band problem, which ``bandsolve._solve.solve`` trusts.

    ``x`` (p, or log p where ``from_logp``) and ``delta`` are flat,
    C-contiguous float64 arrays of length 1 or ``prod(shape)``, checked;
    ``inputs`` are the unflattened checked arrays (for ``out=`` overlap checks).

    ``range_deferred``: the range check of x (NaN, inf, outside [0, 1] or
    above 0) is left to the kernel's pass over it, which counts the elements
    that fail (the closed form's, ``_kernels._solver.band_by_closed_form``,
    for p; the fast path's, ``_kernels._fast.polish_block``, for p and log
    p); where that count is not 0 the solver calls
    :func:`check_deferred_range`, which raises the very error the check
    would have raised here, and it calls it before a kernel that counts
    nothing (the root finder). Set only for a large batch with one delta of
    a divergence whose kernels count (see :func:`band_request`).
    """

    x: np.ndarray
    from_logp: bool
    delta: np.ndarray
    shape: tuple
    divergence: Divergence
    max_ratio: float
    on_failure: str
    inputs: tuple
    range_deferred: bool = False

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


#: From this many elements, a batch of p for a closed form with one delta has
#: its range checked in the closed-form kernel's own pass (``defer_range_check``):
#: the separate check is a read of the whole batch, 0.65x a ``np.copyto`` of it
#: on one thread, as much as tv's whole kernel (benchmarks/RESULTS.md, issue 33).
#: The same size from which the check itself goes parallel.
DEFERRED_RANGE_MIN = _PARALLEL_SCAN_MIN


def band_request(x, delta, divergence, *, from_logp: bool = False, max_ratio=None,
                 on_failure: str = "raise", defer_range_check: bool = False) -> BandRequest:
    """Validate a band problem once: p (or log p), delta, the divergence,
    max_ratio and on_failure, with the errors ``bandsolve.band`` documents.

    ``defer_range_check``: the caller hands the request straight to
    ``_solve.solve``, which may then check p's range in the closed-form
    kernel's pass instead of here (``BandRequest.range_deferred``); the
    errors, and which of them is raised first, are the same either way.
    """
    name = "logp" if from_logp else "p"
    x_arr = as_real_array(x, name)
    check_range = _check_log_probability_range if from_logp else _check_probability_range
    try:
        div = get_divergence(divergence)
        delta_arr = check_delta(delta)
        cap = check_max_ratio(max_ratio)
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be 'raise' or 'nan' (got {on_failure!r})")
        shape, x_flat, delta_flat = flat_operands(x_arr, delta_arr)
    except Exception:
        check_range(x, x_arr, name)  # a bad x is reported first, as it always was
        raise
    # the closed form (which a divergence that has one always takes) counts p
    # outside [0, 1] in its pass, the fast path p or log p outside the domain
    counted = not from_logp if div.margins is not None else div.vector_forms is not None
    deferred = (defer_range_check and counted and delta_flat.size == 1
                and x_flat.size == math.prod(shape) and x_flat.size >= DEFERRED_RANGE_MIN
                and np.asarray(x).dtype.itemsize <= 8)
    if not deferred:
        check_range(x, x_arr, name)
    return BandRequest(x_flat, from_logp, delta_flat, tuple(shape), div, cap, on_failure,
                       ((name, x_arr), ("delta", delta_arr)), deferred)


def checked_request(x: np.ndarray, from_logp: bool, delta: float, divergence: Divergence,
                    max_ratio: float) -> BandRequest:
    """A request from values and arguments its caller has checked: ``x`` a
    contiguous float64 vector of valid p (or log p), delta and max_ratio as
    :func:`band_request` returns them (``bandsolve.torch`` checks its tensors
    on their device and its arguments once, and hands the numpy core the
    result, which is then not scanned again)."""
    name = "logp" if from_logp else "p"
    delta_arr = np.array([delta], dtype=np.float64)
    return BandRequest(x, from_logp, delta_arr, x.shape, divergence, max_ratio, "raise",
                       ((name, x), ("delta", delta_arr)))


def check_deferred_range(request: BandRequest) -> None:
    """The range check a request deferred (``band_request``), which raises
    its usual ValueError where x has an element outside its domain, NaN or
    inf; nothing where the request deferred none."""
    if request.range_deferred:
        name, x = request.inputs[0]  # ("p" or "logp", the checked array)
        check_range = _check_log_probability_range if request.from_logp else _check_probability_range
        check_range(x, x, name)


# ------------------------------------------------------------------- out=


@dataclasses.dataclass(frozen=True)
class Memory:
    """Where an array's elements lie: the first element's byte address, the
    shape, the strides in bytes (negative ones allowed) and the element size."""

    start: int
    shape: tuple
    byte_strides: tuple
    itemsize: int

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def span(self) -> tuple[int, int]:
        """The bytes [first, end) the elements span."""
        if self.size == 0:
            return self.start, self.start
        low = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.byte_strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.byte_strides))
        return self.start + low, self.start + high + self.itemsize

    def addresses(self) -> np.ndarray:
        return self.start + byte_offsets(self.shape, self.byte_strides)


#: The most elements whose byte addresses the ``out=`` check compares one by
#: one, for the layouts no stride test clears (interleaved views of one
#: buffer, as_strided arrays). That comparison holds about 40 bytes per
#: element at once (addresses, ends, owner, order, reach): 2.5 times the
#: bounds it guards, about 170 MB at this limit, and a second or so. Beyond
#: it such a layout is refused with a message that says so, rather than
#: doubling a trainer's memory for a guard (at 1 << 24, two interleaved
#: outputs of 8 M elements took 5 s and 0.7 GB of scratch on 2 loaded cores).
#: The common layouts (contiguous, Fortran, sliced, transposed, separate
#: buffers) are cleared from their strides and spans at any size.
EXACT_OVERLAP_LIMIT = 1 << 22


def overlaps_itself(m: Memory) -> bool | None:
    """Whether two elements share a byte. Cleared at once where the strides,
    sorted, each step past everything the smaller ones span (every C,
    Fortran, sliced or transposed layout); else decided from the elements'
    byte offsets (a stride of 0, as_strided views), or None (undecided)
    beyond ``EXACT_OVERLAP_LIMIT`` elements."""
    dims = sorted((abs(s), n) for s, n in zip(m.byte_strides, m.shape) if n > 1)
    if m.size == 0 or not dims:
        return False
    span = m.itemsize
    for stride, n in dims:
        if stride < span:
            break
        span += stride * (n - 1)
    else:
        return False
    if m.size > EXACT_OVERLAP_LIMIT:
        return None
    offsets = np.sort(byte_offsets(m.shape, m.byte_strides))
    return bool(np.any(np.diff(offsets) < m.itemsize))


def overlap(a: Memory, b: Memory) -> bool | None:
    """Whether two arrays share a byte: their spans first, then, where the
    spans intersect (interleaved views of one buffer), their addresses, or
    None (undecided) beyond ``EXACT_OVERLAP_LIMIT`` elements together."""
    (a0, a1), (b0, b1) = a.span(), b.span()
    if not (a.size and b.size and a0 < b1 and b0 < a1):
        return False
    if a.size + b.size > EXACT_OVERLAP_LIMIT:
        return None
    starts = np.concatenate([a.addresses(), b.addresses()])
    ends = starts + np.repeat([a.itemsize, b.itemsize], [a.size, b.size])
    owner = np.repeat([False, True], [a.size, b.size])
    order = np.argsort(starts, kind="stable")
    # sorted by start: a byte is shared iff some element starts before the
    # previous elements' furthest end and belongs to the other array
    reach = np.maximum.accumulate(ends[order])
    clash = (starts[order][1:] < reach[:-1]) & (owner[order][1:] != owner[order][:-1])
    return bool(clash.any())


@dataclasses.dataclass(frozen=True)
class OutKind:
    """What an ``out=`` pair must be for one array library: ``array_type``
    (named ``type_name`` in messages), its ``memory`` layout, and ``check``,
    the library's own conditions (device, writability, gradients), which
    raises for ``(label, array, input)``."""

    array_type: type
    type_name: str
    memory: Callable
    check: Callable


def _undecided(label: str, n: int) -> ValueError:
    return ValueError(
        f"cannot check that {label} shares no memory: its layout interleaves with "
        f"another's or its strides are irregular, and {n} elements exceed the "
        f"{EXACT_OVERLAP_LIMIT} whose addresses the check compares one by one "
        "(bandsolve._validate.EXACT_OVERLAP_LIMIT): pass separate contiguous arrays")


def check_out(out, kind: OutKind, *, dtype, shape: tuple, inputs: dict,
              addresses: bool = True) -> tuple | None:
    """``out`` validated against the result: None, or a pair (lower, upper)
    of ``kind``'s arrays of ``dtype`` and ``shape``, passing ``kind.check``,
    sharing memory neither with each other nor with any of ``inputs`` (name
    to array; the first is the one ``kind.check`` sees). The one check of
    ``out=`` for numpy (:data:`NUMPY_OUT`) and torch (``bandsolve.torch.out``).
    ``addresses=False`` leaves the memory checks out, where the arrays have
    none to read (tensors traced by torch.compile)."""
    if out is None:
        return None
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise TypeError(f"out must be a pair (lower, upper) of {kind.type_name}s "
                        f"(got {type(out).__name__})")
    first_input = next(iter(inputs.values()))
    seen = {f"the input {name}": kind.memory(x) for name, x in inputs.items()} \
        if addresses else {}
    for label, candidate in zip(("out[0] (lower)", "out[1] (upper)"), out):
        if not isinstance(candidate, kind.array_type):
            raise TypeError(f"{label} must be a {kind.type_name} "
                            f"(got {type(candidate).__name__})")
        arr: Any = candidate  # an array of kind's library: dtype, shape
        if arr.dtype != dtype:
            raise TypeError(f"{label} must have dtype {dtype} for this input (got {arr.dtype})")
        if tuple(arr.shape) != tuple(shape):
            raise ValueError(f"{label} must have the result's shape {tuple(shape)} "
                             f"(got {tuple(arr.shape)})")
        kind.check(label, arr, first_input)
        if not addresses:
            continue
        memory = kind.memory(arr)
        itself = overlaps_itself(memory)
        if itself is None:
            raise _undecided(label, memory.size)
        if itself:
            raise ValueError(f"{label} has elements that share memory (an expanded, stride-0 "
                             "or as_strided array?): each bound needs its own element")
        for other, other_memory in seen.items():
            shared = overlap(memory, other_memory)
            if shared is None:
                raise _undecided(label, memory.size + other_memory.size)
            if shared:
                why = ("the bounds would overwrite it while it is read"
                       if other.startswith("the input") else "each bound needs its own memory")
                raise ValueError(f"{label} shares memory with {other}: {why}")
        seen[label] = memory
    return out[0], out[1]


def _ndarray_memory(a: np.ndarray) -> Memory:
    return Memory(a.__array_interface__["data"][0], a.shape, a.strides, a.itemsize)


def _ndarray_conditions(label: str, a: np.ndarray, x) -> None:
    if not a.flags.writeable:
        raise ValueError(f"{label} is read-only")


#: ``out=`` for the numpy API: float64 ndarrays (subclasses too), writable
NUMPY_OUT = OutKind(array_type=np.ndarray, type_name="numpy array", memory=_ndarray_memory,
                    check=_ndarray_conditions)


def check_numpy_out(out, request: BandRequest) -> tuple | None:
    """``out`` for :func:`bandsolve.band` and friends: float64 numpy arrays of
    the request's shape that overlap neither each other nor its inputs."""
    try:
        return check_out(out, NUMPY_OUT, dtype=np.dtype(np.float64), shape=request.shape,
                         inputs=dict(request.inputs))
    except (TypeError, ValueError):
        check_deferred_range(request)  # a bad p is reported first, as it always was
        raise
