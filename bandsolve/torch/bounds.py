"""The band on torch tensors: certified tables evaluated on the device.

``band`` / ``band_from_logp`` mirror the numpy API. For one (divergence,
delta, max_ratio) they build a :class:`BandTable` once on the host (a few
thousand float64 root solves and a dense check against the numpy core, about
0.1 s), keep it per device and dtype, and from then on each call is pure
tensor arithmetic: a gather and Horner's rule, with a fixed amount of work
per element, no host synchronisation and no data-dependent shapes. The hot
path under ``torch.compile(fullgraph=True)`` and in CUDA graphs is a
:class:`BandTable` built outside the compiled region and called inside it.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from .. import _validate, api
from .. import table as _table
from ..table import evaluate as _evaluate_table
from ..divergences import DivergenceLike, get_divergence

#: (lower, upper) ratio bounds, tensors of the input's shape, dtype and device
TensorBounds = tuple[torch.Tensor, torch.Tensor]
Device = str | torch.device | None
#: What ``validate`` accepts: True (sync on the CPU, async elsewhere), False,
#: "sync" or "async"
Validate = bool | Literal["sync", "async"]

__all__ = ["BandTable", "band", "band_from_logp", "compute_dtype"]

_HALF_TYPES = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 input, float32 for float32/float16/bfloat16;
    TypeError for anything else (integers, booleans, complex)."""
    if dtype == torch.float64:
        return torch.float64
    if dtype == torch.float32 or dtype in _HALF_TYPES:
        return torch.float32
    raise TypeError(f"expected a floating-point tensor (float16, bfloat16, float32 or "
                    f"float64), got {dtype}")


class _SideTensors:
    """One bound's table as tensors of one dtype on one device, for
    ``bandsolve.table.evaluate``."""

    def __init__(self, side: _table.TableSide, dtype, device):
        self.center = side.center
        self.threshold = side.threshold
        self.two_sided = side.two_sided
        # (6, intervals): one gather of all six coefficients gives contiguous
        # rows for Horner's rule (measured 2x faster on the CPU than gathering
        # rows of the (intervals, 6) layout and reading strided columns)
        self.coefficients = torch.as_tensor(side.coefficients.T, dtype=dtype,
                                            device=device).contiguous()


def _gather(coefficients: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return coefficients.index_select(1, k.reshape(-1)).reshape(coefficients.shape[0], *k.shape)


#: bandsolve.table's evaluation in torch
TORCH_OPS = _evaluate_table.ArrayOps(
    frexp=torch.frexp, where=torch.where, floor=torch.floor, abs=torch.abs, exp=torch.exp,
    expm1=torch.expm1, log=torch.log, isnan=torch.isnan, minimum=torch.minimum,
    clamp=lambda x, low, high: x.clamp(low, high), to_index=lambda x: x.long(),
    gather=_gather)


class BandTable:
    """The band of one divergence at one delta, as a certified table on a device.

    Build with :meth:`build` (from the solver) or :meth:`load` (a file from
    ``bandsolve export``); move with :meth:`to`; call with log-probabilities:
    ``lower, upper = table(old_log_prob)``, or ``table.from_p(p)``.

    Calls take float16, bfloat16, float32 or float64 tensors of any shape
    on the table's device and return two tensors of that shape, float64 for
    float64 input and float32 otherwise, without gradient. Accuracy, one
    claim per compute dtype:

    * float64 (any device): the table's certificate (``bandsolve.table``),
      |r - r64| <= max(rtol min(r, |r-1|), atol max(r, 1)) + 8 eps max(r, 1)
      against the float64 root finder r64 (``bandsolve.band_from_logp``) at
      the same input, with the table's stored ``rtol`` / ``atol``: atol =
      1e-12 and, for the built-in divergences at delta from 1e-6 to 10,
      rtol = 0. Against the exact bound add the root finder's own
      max(1e-12 min(r, |r-1|), 4 eps max(r, 1));
    * float32 (and half): |r - r64| <= max(1e-5 min(r, |r-1|), 16 eps32
      max(r, 1)) against the float64 root finder at the same (float32) input,
      for log p >= -80.

    ``validate`` checks the values (NaN, +inf, log p > 0, p outside [0, 1]);
    the modes are those of :func:`band_from_logp`. Non-float dtypes raise
    ``TypeError`` in every mode. Without a check, invalid input gives NaN
    bounds (never a number).
    """

    def __init__(self, data: _table.BandTableData, device: Device = None) -> None:
        self.data = data
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._sides = {dtype: (_SideTensors(data.lower, dtype, self.device),
                               _SideTensors(data.upper, dtype, self.device))
                       for dtype in (torch.float32, torch.float64)}

    @classmethod
    def build(cls, divergence: DivergenceLike = "kl", delta: float = 0.05, *,
              max_ratio: float | None = None, device: Device = None) -> BandTable:
        """Tabulate and certify on the host (``bandsolve.table.build``, about
        0.1-0.3 s), then move to ``device``. Errors as :func:`bandsolve.band`."""
        return cls(_table.build(divergence, delta, max_ratio=max_ratio), device)

    @classmethod
    def load(cls, path: str | os.PathLike, device: Device = None, *, verify: bool = True,
             divergence: DivergenceLike | None = None) -> BandTable:
        """Read a ``.npz`` or ``.pt`` file written by ``bandsolve export``.

        The checksum is always checked, and with ``verify=True`` a sample of
        the table against the solver; see :func:`bandsolve.table.load` for
        both and for ``divergence``. Raises ``bandsolve.table.TableIntegrityError``
        for a modified or corrupted file."""
        return cls(_table.load(path, verify=verify, divergence=divergence), device)

    def save(self, path: str | os.PathLike) -> Path:
        return _table.save(self.data, path)

    def to(self, device: Device) -> BandTable:
        return BandTable(self.data, device)

    @property
    def delta(self) -> float:
        return self.data.delta

    @property
    def divergence(self) -> str:
        return self.data.divergence

    @property
    def max_ratio(self) -> float:
        return self.data.max_ratio

    def __repr__(self):
        return f"BandTable({self.data.describe()}, device={self.device})"

    def _check_device(self, x: torch.Tensor):
        if x.device != self.device and not (x.device.type == self.device.type
                                             and self.device.index is None):
            raise ValueError(f"the input is on {x.device} and the table on {self.device}: "
                             f"use table.to({str(x.device)!r})")

    def __call__(self, log_prob: torch.Tensor, *, validate: Validate = True):
        """(lower, upper) from log-probabilities (log p <= 0; -inf is p = 0)."""
        dtype = self._prepare(log_prob, validate, from_logp=True)
        with torch.no_grad():
            logp = log_prob.detach().to(dtype)
            return self._evaluate(logp, -torch.expm1(logp), dtype)

    def from_p(self, p: torch.Tensor, *, validate: Validate = True) -> TensorBounds:
        """(lower, upper) from probabilities in [0, 1]."""
        dtype = self._prepare(p, validate, from_logp=False)
        with torch.no_grad():
            p = p.detach().to(dtype)
            return self._evaluate(torch.log(p), 1.0 - p, dtype)

    def _prepare(self, x, validate: Validate, from_logp: bool) -> torch.dtype:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
        dtype = compute_dtype(x.dtype)
        self._check_device(x)
        _check_values(x, from_logp, _validation_mode(validate))
        return dtype

    def _evaluate(self, logp, q, dtype):
        lower_side, upper_side = self._sides[dtype]
        return _evaluate_table.bounds(TORCH_OPS, lower_side, upper_side, logp, q,
                                      lower_at_one=self.data.lower_at_one,
                                      max_ratio=self.max_ratio)


def _invalid(x: torch.Tensor, from_logp: bool, above: float = 0.0) -> torch.Tensor:
    """Where x is not a valid log p (NaN, > ``above``) or p (NaN, outside [0, 1])."""
    return torch.isnan(x) | (x > above) if from_logp else ~((x >= 0.0) & (x <= 1.0))


def _log_prob_rounding(dtype: torch.dtype) -> float:
    """How far above 0 a trainer's log-probability of a near-certain token may
    round: log_softmax subtracts a logsumexp of the logits' magnitude, so a
    16-bit type can land a few of its ulps (2^-8) above 0, a 32-bit one far
    less. Above this, a positive value is not rounding but a bug upstream."""
    return 0.0625 if torch.finfo(dtype).bits <= 16 else 1e-3


def old_log_prob_for_band(old_log_prob: torch.Tensor, validate: Validate = True,
                          mask: torch.Tensor | None = None) -> torch.Tensor:
    """A trainer's old log-probabilities, ready for :func:`band_from_logp`:
    checked first, then clamped to <= 0.

    Values above 0 by no more than their dtype's rounding of a softmax (1e-3
    for 32- and 64-bit, 0.0625 for 16-bit types) are clamped to 0; NaN, +inf
    and anything larger are refused under ``validate`` (as in
    :func:`band_from_logp`), never clamped into the p = 1 band. Where
    ``mask`` is 0 (padding) the value is not looked at and becomes 0.
    Detached.
    """
    old = old_log_prob.detach()
    if mask is not None:
        old = torch.where(mask.bool(), old, torch.zeros_like(old))
    mode = _validation_mode(validate)
    if mode == "auto" and torch.compiler.is_compiling():
        mode = "async"  # a read back cannot be traced; a device-side assertion can
    _check_values(old, True, mode, above=_log_prob_rounding(old.dtype))
    return old.clamp(max=0.0)


def _validation_mode(validate) -> str:
    """``validate`` as one of the modes "auto" (True), "off" (False), "sync"
    and "async"; ValueError for anything else."""
    if isinstance(validate, bool | np.bool_):
        return "auto" if validate else "off"
    if isinstance(validate, str) and validate in ("auto", "off", "sync", "async"):
        return validate
    raise ValueError(f"validate must be True, False, 'sync' or 'async' (got {validate!r})")


def _input_names(from_logp: bool) -> tuple[str, str]:
    return ("log_prob", "must be <= 0 (and not NaN or +inf)") if from_logp \
        else ("p", "must lie in [0, 1] (and not be NaN or inf)")


def _check_values(x: torch.Tensor, from_logp: bool, mode: str, above: float = 0.0):
    """Check for NaN, +inf and values outside [-inf, 0] (log p) or [0, 1] (p).

    "sync" (and "auto" on the CPU): one reduction and one read back to the
    host, then ValueError naming the count, the first index and its value
    (the details need a second pass only when something is wrong). "async"
    (and "auto" on any other device): the reduction and a device-side
    assertion, ``torch._assert_async``, with no read back; a failure is
    reported at the next synchronisation. "off": nothing.
    """
    if mode == "off" or x.numel() == 0:
        return
    v = x.detach()
    bad = _invalid(v, from_logp, above)
    name, expected = _input_names(from_logp)
    if mode == "async" or (mode == "auto" and v.device.type != "cpu"):
        # On CUDA a failed assertion surfaces at the next synchronisation as a
        # device-side assert, which leaves the CUDA context unusable: the
        # process must restart. That is the price of checking every step
        # without a synchronisation; the message says how to find the element.
        torch._assert_async(torch.logical_not(bad.any()),
                            f"bandsolve: {name} {expected}, but some element is not "
                            f"(checked on the device with validate={mode!r}); call with "
                            f"validate='sync' to raise ValueError naming the first one")
        return
    if not bool(bad.any()):
        return
    flat = bad.reshape(-1)
    count = int(flat.sum())
    first = int(torch.nonzero(flat)[0, 0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), v.shape))
    value = float(v.reshape(-1)[first])
    if math.isnan(value):
        what = "contains NaN"
    elif value == math.inf:
        what = "contains +inf"
    else:
        what = expected
    raise ValueError(f"{name} {what}: {count} of {v.numel()} elements are invalid, the first "
                     f"at index {index} (value {value!r})")


#: The largest table certificate rtol the eager functions accept: the float32
#: promise's relative term. An explicit BandTable.build takes any certificate
#: and stores it.
_EAGER_RTOL_LIMIT = 1e-5


@functools.lru_cache(maxsize=32)
def _host_table(divergence, delta: float, max_ratio: float) -> _table.BandTableData:
    data = _table.build(divergence, delta, max_ratio=None if max_ratio == math.inf
                        else max_ratio)
    if not data.rtol <= _EAGER_RTOL_LIMIT:
        raise ValueError(
            f"bandsolve.torch cannot tabulate {data.divergence} at delta={delta!r} to its "
            f"promised accuracy (the table's certified rtol is {data.rtol:.3g}, above "
            f"{_EAGER_RTOL_LIMIT:g}; tables are certified exactly for delta from 1e-6 to 10): "
            "use float64 tensors on the CPU or the numpy API bandsolve.band, which solve "
            "every delta, or BandTable.build to accept this certificate")
    return data


@functools.lru_cache(maxsize=32)
def _device_table(divergence, delta: float, max_ratio: float, device: torch.device
                  ) -> BandTable:
    return BandTable(_host_table(divergence, delta, max_ratio), device)


@torch.compiler.assume_constant_result
def _checked_arguments(delta, divergence, max_ratio):
    """(divergence key, delta, cap) after the checks of the numpy API.

    The key is the registry name where ``divergence`` is registered (so the
    custom op below can carry it), else the Divergence itself. Marked
    constant for torch.compile: it depends on Python values only.
    """
    div = get_divergence(divergence)
    delta_arr = _validate.check_delta(delta)
    if delta_arr.ndim != 0:
        raise ValueError("bandsolve.torch takes one delta per call (a float); for "
                         "per-element deltas use the numpy API bandsolve.band")
    cap = float(_validate.check_max_ratio(max_ratio))
    try:
        key = div.name if get_divergence(div.name) == div else div
    except ValueError:
        key = div
    return key, float(delta_arr), cap


@torch.library.custom_op("bandsolve::band", mutates_args=())
def _band_op(x: torch.Tensor, delta: float, divergence: str, max_ratio: float,
             from_logp: bool, validate: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The band as one opaque op, so that ``band`` / ``band_from_logp`` trace
    under torch.compile(fullgraph=True): building or fetching the table is
    host work the compiler must not see. Under the compiler the arguments
    arrive unchecked (a delta may be a symbolic float there), so the op checks
    them itself, at run time, with the numpy API's messages. Outputs are
    contiguous whatever the input's layout, as the fake kernel says."""
    key, delta, max_ratio = _checked_arguments(delta, divergence,
                                               None if max_ratio == math.inf else max_ratio)
    lower, upper = _evaluate(x, delta, key, max_ratio, from_logp, validate)
    return lower.contiguous(), upper.contiguous()


def _evaluate(x, delta, divergence, max_ratio, from_logp, validate):
    """float64 on the CPU: the numpy core itself, on the tensor's memory;
    everything else: the device table."""
    if x.dtype == torch.float64 and x.device.type == "cpu":
        return _numpy_core(x, delta, divergence, max_ratio, from_logp, validate)
    table = _device_table(divergence, delta, max_ratio, x.device)
    return table(x, validate=validate) if from_logp else table.from_p(x, validate=validate)


def _numpy_core(x, delta, divergence, max_ratio, from_logp, validate):
    _check_values(x, from_logp, validate)  # the torch messages, as on every other path
    values = x.detach().contiguous().numpy()
    invalid = _invalid(x.detach(), from_logp).numpy()
    any_invalid = bool(invalid.any())  # only without validation
    if any_invalid:  # solve a valid stand-in, then NaN bounds, as the table gives
        values = np.where(invalid, 0.0 if from_logp else 0.5, values)
    solve = api.band_from_logp if from_logp else api.band
    lower, upper = solve(values, delta, divergence,
                         max_ratio=None if max_ratio == math.inf else max_ratio)
    if any_invalid:
        lower[invalid] = np.nan
        upper[invalid] = np.nan
    return torch.from_numpy(lower), torch.from_numpy(upper)


@_band_op.register_fake
def _band_op_fake(x, delta, divergence, max_ratio, from_logp, validate):
    # contiguous, as the op returns: empty_like kept a transposed input's
    # strides, and compiled code then failed its stride assertion
    dtype = compute_dtype(x.dtype)
    return (x.new_empty(x.shape, dtype=dtype), x.new_empty(x.shape, dtype=dtype))


def _dispatch(x, delta, divergence, max_ratio, from_logp: bool, validate: Validate):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"bandsolve.torch takes dense tensors (got layout {x.layout}): call "
                        ".to_dense() first; the band of an absent (implicit zero) entry would "
                        "be the band of log p = 0 or p = 0, which is not what a sparse tensor "
                        "means")
    if x.device.type == "meta":
        raise ValueError("bandsolve.torch needs a tensor's values, and a meta tensor has none: "
                         "move it to a real device first (bounds cannot be computed from a "
                         "shape)")
    compute_dtype(x.dtype)  # TypeError for non-float input, before the op
    mode = _validation_mode(validate)
    if torch.compiler.is_compiling() and isinstance(divergence, str):
        # traced: delta may be a symbolic float (a schedule of deltas makes
        # dynamo generalise it after the first recompile), which no host
        # check can read; the op checks its arguments when it runs
        cap = math.inf if max_ratio is None else max_ratio
        return _band_op(x.detach(), delta, divergence, cap, from_logp, mode)
    key, delta, cap = _checked_arguments(delta, divergence, max_ratio)
    if isinstance(key, str):
        return _band_op(x.detach(), delta, key, cap, from_logp, mode)
    return _evaluate(x, delta, key, cap, from_logp, mode)  # a user-defined Divergence


def _memory_range(t: torch.Tensor) -> tuple[int, int]:
    """The bytes [start, end) a tensor's elements span (torch strides are >= 0)."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


#: beyond this many elements, tensors whose byte spans intersect are taken
#: to overlap without listing their addresses
_EXACT_OVERLAP_LIMIT = 1 << 22


def _addresses(t: torch.Tensor) -> np.ndarray:
    """The byte address of every element (host arithmetic on shape and strides)."""
    size = t.element_size()
    return t.data_ptr() + _validate.byte_offsets(t.shape, [s * size for s in t.stride()])


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors share a byte: their spans first, then, where the
    spans intersect (interleaved views of one buffer), their addresses."""
    (a0, a1), (b0, b1) = _memory_range(a), _memory_range(b)
    if not (a.numel() and b.numel() and a0 < b1 and b0 < a1):
        return False
    if a.numel() + b.numel() > _EXACT_OVERLAP_LIMIT:
        return True
    starts_a, starts_b = _addresses(a), _addresses(b)
    ends_a, ends_b = starts_a + a.element_size(), starts_b + b.element_size()
    order = np.argsort(np.concatenate([starts_a, starts_b]), kind="stable")
    starts = np.concatenate([starts_a, starts_b])[order]
    ends = np.concatenate([ends_a, ends_b])[order]
    owner = np.concatenate([np.zeros(a.numel(), bool), np.ones(b.numel(), bool)])[order]
    # sorted by start: a byte is shared iff some element starts before the
    # previous elements' furthest end and belongs to the other tensor
    reach = np.maximum.accumulate(ends)
    clash = (starts[1:] < reach[:-1]) & (owner[1:] != owner[:-1])
    return bool(clash.any())


def _internal_overlap(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` share memory. torch answers 0 (no),
    1 (yes) or 2 (too hard, e.g. a strided view); then the addresses decide
    (strides count whole elements, so distinct addresses cannot overlap)."""
    status = torch._debug_has_internal_overlap(t)
    if status != 2:
        return status == 1
    if t.numel() > _EXACT_OVERLAP_LIMIT:
        return True
    return np.unique(_addresses(t)).size < t.numel()


def _check_out(out, x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``out`` validated against the result the input gives: a pair of tensors
    of its shape, dtype (float64 for float64 input, else float32) and device,
    sharing memory neither with each other nor with the input."""
    if out is None:
        return None
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise TypeError(f"out must be a pair (lower, upper) of tensors (got {type(out).__name__})")
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    seen = {name: x}
    for label, t in zip(("out[0] (lower)", "out[1] (upper)"), out):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{label} must be a tensor (got {type(t).__name__})")
        if t.dtype != dtype:
            raise TypeError(f"{label} must have dtype {dtype} for {x.dtype} input (got {t.dtype})")
        if t.shape != x.shape:
            raise ValueError(f"{label} must have the input's shape {tuple(x.shape)} "
                             f"(got {tuple(t.shape)})")
        if t.device != x.device:
            raise ValueError(f"{label} must be on the input's device {x.device} (got {t.device})")
        if t.requires_grad:
            raise ValueError(f"{label} requires grad: the bounds carry no gradient, so "
                             "write them into a tensor without requires_grad")
        if _internal_overlap(t):
            raise ValueError(f"{label} has elements that share memory (an expanded or "
                             "stride-0 tensor?): each bound needs its own element")
        for other, tensor in seen.items():
            if _overlap(t, tensor):
                raise ValueError(f"{label} shares memory with {other}")
        seen[label] = t
    return out[0], out[1]


def _into(bounds: TensorBounds, out: tuple[torch.Tensor, torch.Tensor] | None) -> TensorBounds:
    if out is None:
        return bounds
    out[0].copy_(bounds[0])
    out[1].copy_(bounds[1])
    return out


def band_from_logp(log_prob: torch.Tensor, delta: float, divergence: DivergenceLike = "kl", *,
                   max_ratio: float | None = None, validate: Validate = True,
                   out: tuple[torch.Tensor, torch.Tensor] | None = None) -> TensorBounds:
    """The band from log-probabilities on any device: :func:`bandsolve.band_from_logp`
    for torch.

    Parameters
    ----------
    log_prob : Tensor
        float16, bfloat16, float32 or float64; log p <= 0, -inf for p = 0.
    delta : float
        Trust-region radius, > 0 (one per call).
    divergence : str or Divergence
        As in :func:`bandsolve.band`.
    max_ratio : float, optional
        Cap on the upper bound, >= 1.
    validate : bool or {"sync", "async"}
        Check the values for NaN, +inf and log p > 0.

        * ``True`` (default): on the CPU, "sync"; on any other device,
          "async", so that a training step pays no synchronisation for it.
        * ``"sync"``: one device-to-host read; ValueError naming how many
          elements are invalid, the first index and its value.
        * ``"async"``: a device-side assertion (``torch._assert_async``), no
          read back. On CUDA a failure surfaces at the next synchronisation
          as ``RuntimeError: CUDA error: device-side assert triggered`` with
          bandsolve's message, and leaves the CUDA context unusable (the
          process must restart); on the CPU it raises RuntimeError at once.
        * ``False``: no check, for the hot path: invalid elements get NaN
          bounds.
    out : (Tensor, Tensor), optional
        Tensors to write (lower, upper) into, as in :func:`bandsolve.band`:
        the result's shape, dtype and device, sharing memory neither with
        each other nor with the input. They are returned.

    Returns
    -------
    lower, upper : Tensor
        ``out`` if given, else new tensors: shape and device of ``log_prob``;
        float64 for float64 input, float32 otherwise; no gradient. Edge
        values as in :func:`bandsolve.band`.

    Accuracy
    --------
    float32 (and half) input: |r - r64| <= max(1e-5 min(r, |r - 1|),
    16 eps32 max(r, 1)) against the float64 numpy core at the same input.
    float64 on the CPU: the numpy core itself (``bandsolve.band_from_logp``
    on the tensor's memory), with its accuracy. float64 on another device:
    the certified table, |r - r64| <= max(rtol min(r, |r-1|), atol max(r, 1))
    + 8 eps max(r, 1) with the table's certificate (rtol = 0, atol = 1e-12
    for the built-in divergences at delta from 1e-6 to 10): up to
    1e-12 max(r, 1), looser than the numpy core's own 1e-12 min(r, |r-1|) /
    4 eps max(r, 1) where r is small.

    Raises
    ------
    TypeError
        ``log_prob`` not a tensor, or not a floating dtype; a divergence that
        is neither a name nor a Divergence; ``out`` not a pair of tensors of
        the result's dtype.
    ValueError
        delta <= 0, NaN, inf or not a scalar; max_ratio < 1; an unknown
        divergence; ``validate`` not one of its values; and, with ``validate``
        "sync" (``True`` on the CPU), NaN, +inf or log p > 0; ``out``
        of another shape or device, or sharing memory with the input or
        with each other; a delta whose table cannot be certified to
        rtol <= 1e-5 where a table is used (float32/16 input, or float64
        off the CPU; the certificate is exact for delta from 1e-6 to 10).

    The first call for a (divergence, delta, max_ratio, device) builds the
    table (about 0.1 s); later calls reuse it.
    """
    checked = _check_out(out, log_prob, "log_prob") if isinstance(log_prob, torch.Tensor) \
        else None
    return _into(_dispatch(log_prob, delta, divergence, max_ratio, True, validate), checked)


def band(p: torch.Tensor, delta: float, divergence: DivergenceLike = "kl", *,
         max_ratio: float | None = None, validate: Validate = True,
         out: tuple[torch.Tensor, torch.Tensor] | None = None) -> TensorBounds:
    """The band from probabilities in [0, 1]: :func:`bandsolve.band` for torch.

    As :func:`band_from_logp` in every respect, with ValueError (under
    ``validate``) for p outside [0, 1], NaN or inf. Prefer
    :func:`band_from_logp` where log-probabilities are at hand: it resolves
    p near 1, where p itself has rounded.
    """
    checked = _check_out(out, p, "p") if isinstance(p, torch.Tensor) else None
    return _into(_dispatch(p, delta, divergence, max_ratio, False, validate), checked)
