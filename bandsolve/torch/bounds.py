"""The band on torch tensors: ``band`` / ``band_from_logp``, mirroring the numpy API.

On the CPU they are the numpy core, on the tensor's values in float64 (for
float64 the tensor's memory itself), eagerly and compiled alike: nothing
compiles but the core's numba kernels, on the first call of an install.
Elsewhere (a GPU), for one (divergence, delta, max_ratio), they build a
:class:`BandTable` once on the host (a few thousand float64 root solves and
a dense check against the numpy core, about 0.1 s), keep it per device, and
from then on each call is pure tensor arithmetic
(``bandsolve.torch.device_table``), op by op eagerly. Under
``torch.compile(fullgraph=True)`` the CPU's core is one custom op, and off
the CPU the table is fetched by one custom op and evaluated in the graph,
where it fuses; in CUDA graphs the hot path is a :class:`BandTable` built
outside the captured region and called inside it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from .. import _solve, _validate
from .. import table as _table
from ..divergences import DivergenceLike, get_divergence
from ..table.data import DEGREE, INTERVALS_PER_SIGN
from .device_table import BandTable, PackedTable, TensorBounds, evaluate_packed
from .out import check_out, write_into
from .validation import (
                         BandArguments,
                         Validate,
                         any_invalid,
                         band_arguments,
                         check_values,
                         compute_dtype,
                         invalid,
                         validation_mode,
)

__all__ = ["band", "band_from_logp"]


#: The largest table certificate rtol the eager functions accept: the float32
#: promise's relative term. An explicit BandTable.build takes any certificate
#: and stores it.
_EAGER_RTOL_LIMIT = 1e-5


@functools.lru_cache(maxsize=32)
def _host_table(arguments: BandArguments) -> _table.BandTableData:
    data = _table.build(arguments.divergence, arguments.delta, max_ratio=arguments.cap)
    if not data.rtol <= _EAGER_RTOL_LIMIT:
        raise ValueError(
            f"bandsolve.torch cannot tabulate {data.divergence} at delta={arguments.delta!r} to its "
            f"promised accuracy (the table's certified rtol is {data.rtol:.3g}, above "
            f"{_EAGER_RTOL_LIMIT:g}; tables are certified exactly for delta from 1e-6 to 10): "
            "use tensors on the CPU or the numpy API bandsolve.band, which solve every "
            "delta, or BandTable.build to accept this certificate")
    return data


@functools.lru_cache(maxsize=32)
def _table_of(arguments: BandArguments, device: torch.device) -> BandTable:
    return BandTable(_host_table(arguments), device)


@torch.compiler.assume_constant_result
def _traced_arguments(delta, divergence, max_ratio):
    """(divergence key, delta, cap) of :func:`band_arguments`, for a traced call
    with a divergence that is not a name; marked constant for torch.compile
    (it depends on Python values only)."""
    arguments = band_arguments(delta, divergence, max_ratio)
    return arguments.divergence, arguments.delta, arguments.max_ratio


def _delta_tensor(delta) -> torch.Tensor:
    """delta as a 0-dim float64 CPU tensor for the custom ops, by a product
    that dynamo's tensorify pass turns into a graph input (torch.scalar_tensor
    and torch.full specialise on delta). On the CPU whatever the default
    device, so that reading it back is no device synchronisation."""
    return torch.ones((), dtype=torch.float64, device="cpu") * delta


def _arguments_at_run_time(delta: torch.Tensor, divergence: str, max_ratio: float
                           ) -> BandArguments:
    """The custom ops' arguments, checked when the op runs: traced, they
    arrive unchecked (a delta may be a symbolic float there, which no host
    check can read), and are checked here with the numpy API's messages
    (once per distinct value: :func:`band_arguments`)."""
    # delta is a CPU tensor (_delta_tensor): read through numpy, not
    # Tensor.__float__, which is the read back that validate="async" promises
    # never to do on a device
    return band_arguments(float(delta.numpy()), divergence,
                          None if max_ratio == math.inf else max_ratio)


@torch.library.custom_op("bandsolve::band", mutates_args=())
def _band_op(x: torch.Tensor, delta: torch.Tensor, divergence: str, max_ratio: float,
             from_logp: bool, validate: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The band as one opaque op, so that ``band`` / ``band_from_logp`` trace
    under torch.compile(fullgraph=True): building or fetching the table is
    host work the compiler must not see. Eager calls do not go through it.
    Outputs are contiguous whatever the input's layout, as the fake kernel
    says.

    delta comes as a 0-dim float64 CPU tensor, as for ``bandsolve::band_table``:
    as a float, it made a compiled float64 call recompile for every new delta
    of a schedule (about 1 s each)."""
    lower, upper = _evaluate(x, _arguments_at_run_time(delta, divergence, max_ratio),
                             from_logp, validate)
    return lower.contiguous(), upper.contiguous()


@torch.library.custom_op("bandsolve::band_table", mutates_args=())
def _table_op(x: torch.Tensor, delta: torch.Tensor, divergence: str, max_ratio: float,
              from_logp: bool, validate: str
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The table for ``x``'s compute dtype and device, as the tensors of a
    :class:`PackedTable`, after the checks of a table call on ``x`` (so the
    op reads x only to validate it). Under torch.compile this is the one
    opaque step, host work on Python values (delta may be symbolic); the
    evaluation after it is traced and fuses with the caller's code. The
    result is a copy (2 x 6 x 37,888 numbers, about 0.1 ms): the compiled
    code owns its buffers and may reuse them.

    delta comes as a 0-dim float64 CPU tensor: a float argument of a custom
    op makes inductor specialise the graph on its value, one recompile per
    new delta of a schedule (1-10 s for the fused kernel); a tensor does not."""
    table = _table_of(_arguments_at_run_time(delta, divergence, max_ratio), x.device)
    dtype = table._prepare(x, validate, from_logp)  # type: ignore[arg-type]  # a mode
    coefficients, scalars, two_sided = table._packed[dtype].clone()
    return coefficients, scalars, two_sided


@_table_op.register_fake
def _table_op_fake(x, delta, divergence, max_ratio, from_logp, validate):
    dtype = compute_dtype(x.dtype)
    return (x.new_empty((2, DEGREE + 1, 2 * INTERVALS_PER_SIGN), dtype=dtype),
            x.new_empty((6,), dtype=dtype), x.new_empty((2,), dtype=torch.int64))


def _evaluate(x, arguments: BandArguments, from_logp: bool, validate: str):
    """The band of checked arguments (trusted), with the value checks of
    ``validate``: on the CPU the numpy core (every dtype), elsewhere the
    device table."""
    if x.device.type == "cpu":
        return _numpy_core(x, arguments, from_logp, validate)
    table = _table_of(arguments, x.device)
    mode: Validate = validate  # type: ignore[assignment]  # a mode, which the table reads too
    return table(x, validate=mode) if from_logp else table.from_p(x, validate=mode)


def _numpy_core(x, arguments: BandArguments, from_logp: bool, validate: str):
    """The numpy core on a CPU tensor's values in float64, after the torch
    value checks (the core trusts them: no second scan).

    float64: ``bandsolve.band_from_logp`` (or ``band``) itself, on the
    tensor's memory, bit for bit. float32 and half: the core's fast path
    from ``_bind.INTERPRET_MAX`` elements (below, the root finder,
    interpreted), with the tables of ``_solve.BAND_TABLES`` (a trainer calls
    with one delta every step), rounded to float32: to nearest, and
    the upper bound one float32 step down where nearest rounded it up, so
    that ``upper <= 1/p`` holds as in float64 (beyond float32's range, inf).
    No compile but the core's numba kernels, once, which no later batch size
    compiles again, 1 included."""
    check_values(x, from_logp, validate, "logp" if from_logp else "p")
    flat = x.detach().reshape(-1)
    values = flat.to(torch.float64).contiguous().numpy()
    # only without validation (the CPU check above is synchronous: it raised)
    is_invalid = None
    if validate == "off" and flat.numel() and bool(any_invalid(flat, from_logp)):
        # solve a valid stand-in, then NaN bounds, as the table gives
        is_invalid = invalid(flat, from_logp).numpy()
        values = np.where(is_invalid, 0.0 if from_logp else 0.5, values)
    div = get_divergence(arguments.divergence)
    request = _validate.checked_request(values, from_logp, arguments.delta, div,
                                        arguments.max_ratio)
    if x.dtype == torch.float64:
        lower, upper = _solve.solve(request)
    else:
        fast = _solve.cached_fast_tables(div, arguments.delta, values.size)
        lower, upper = _rounded_to_float32(*_solve.solve(request, fast=fast))
    if is_invalid is not None:
        lower[is_invalid] = np.nan
        upper[is_invalid] = np.nan
    return torch.from_numpy(lower).view(x.shape), torch.from_numpy(upper).view(x.shape)


def _rounded_to_float32(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):  # past float32's range: inf, as intended
        lower32 = lower.astype(np.float32)
        upper32 = upper.astype(np.float32)
    rounded_up = (upper32 > upper) & np.isfinite(upper32)
    np.nextafter(upper32, np.float32(0.0), out=upper32, where=rounded_up)
    return lower32, upper32


#: A user's Divergence is solved on the host (its numba generator), which
#: dynamo must not trace: after the graph break above, this runs as is.
_evaluate_eagerly = torch.compiler.disable(_evaluate)


@_band_op.register_fake
def _band_op_fake(x, delta, divergence, max_ratio, from_logp, validate):
    # contiguous, as the op returns: empty_like kept a transposed input's
    # strides, and compiled code then failed its stride assertion
    dtype = compute_dtype(x.dtype)
    return (x.new_empty(x.shape, dtype=dtype), x.new_empty(x.shape, dtype=dtype))


def _traced(x, delta, divergence: str, cap: float, from_logp: bool, mode: str):
    """The band inside a compiled region: arguments unchecked (the ops check
    them when they run). On the CPU the numpy core, as eagerly (the same
    bits), through the op ``bandsolve::band``; elsewhere the table is fetched
    by one opaque op and evaluated in the graph, where it fuses with the
    caller's code as a BandTable called there does."""
    delta_tensor = _delta_tensor(delta)
    if x.device.type == "cpu":
        return _band_op(x, delta_tensor, divergence, cap, from_logp, mode)
    table = PackedTable(*_table_op(x, delta_tensor, divergence, cap, from_logp, mode))
    return evaluate_packed(x, table, from_logp)


def _check_input(x) -> None:
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


def _dispatch(x, delta, divergence, max_ratio, from_logp: bool, validate: Validate):
    _check_input(x)
    mode = validation_mode(validate)
    if torch.compiler.is_compiling():
        # traced: delta may be a symbolic float (a schedule of deltas makes
        # dynamo generalise it after the first recompile), which no host
        # check can read; the op checks its arguments when it runs
        cap = math.inf if max_ratio is None else max_ratio
        if not isinstance(divergence, str):
            divergence, delta, cap = _traced_arguments(delta, divergence, max_ratio)
            if not isinstance(divergence, str):
                # the host solve of a user's numba generator cannot be traced:
                # say so, rather than let dynamo fail inside numpy
                raise TypeError(
                    f"a user-defined Divergence ({divergence.name!r}) runs eagerly only: under "
                    "torch.compile, build a table for it outside the compiled function "
                    "(bandsolve.torch.BandTable.build(divergence, delta)) and call the "
                    "table inside, or call bandsolve.torch outside the compiled region")
        return _traced(x.detach(), delta, divergence, cap, from_logp, mode)
    arguments = band_arguments(delta, divergence, max_ratio)
    if isinstance(arguments.divergence, str):
        return _evaluate(x.detach(), arguments, from_logp, mode)
    return _evaluate_eagerly(x.detach(), arguments, from_logp, mode)  # a user-defined Divergence


def band_from_logp(logp: torch.Tensor, delta: float, divergence: DivergenceLike = "kl", *,
                   max_ratio: float | None = None, validate: Validate = True,
                   out: tuple[torch.Tensor, torch.Tensor] | None = None) -> TensorBounds:
    """The band from log-probabilities on any device: :func:`bandsolve.band_from_logp`
    for torch.

    Parameters
    ----------
    logp : Tensor
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
        ``out`` if given, else new tensors: shape and device of ``logp``;
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
        ``logp`` not a tensor, or not a floating dtype; a divergence that
        is neither a name nor a Divergence; ``out`` not a pair of tensors of
        the result's dtype.
    ValueError
        delta <= 0, NaN, inf or not a scalar; max_ratio < 1; an unknown
        divergence; ``validate`` not one of its values; and, with ``validate``
        "sync" (``True`` on the CPU), NaN, +inf or log p > 0; ``out``
        of another shape or device, or sharing memory with the input or
        with each other; a delta whose table cannot be certified to
        rtol <= 1e-5 where a table is used (off the CPU; the certificate is
        exact for delta from 1e-6 to 10).

    On the CPU the first call of an install compiles the numpy core's
    kernels (numba, seconds; docs/performance.md has the measured first
    calls), and later sizes compile nothing. Off the CPU the first call for
    a (divergence, delta, max_ratio, device) builds the table (about 0.1 s);
    later calls reuse it.
    """
    checked = check_out(out, logp, "logp")
    return write_into(_dispatch(logp, delta, divergence, max_ratio, True, validate), checked)


def band(p: torch.Tensor, delta: float, divergence: DivergenceLike = "kl", *,
         max_ratio: float | None = None, validate: Validate = True,
         out: tuple[torch.Tensor, torch.Tensor] | None = None) -> TensorBounds:
    """The band from probabilities in [0, 1]: :func:`bandsolve.band` for torch.

    As :func:`band_from_logp` in every respect, with ValueError (under
    ``validate``) for p outside [0, 1], NaN or inf. Prefer
    :func:`band_from_logp` where log-probabilities are at hand: it resolves
    p near 1, where p itself has rounded.
    """
    checked = check_out(out, p, "p")
    return write_into(_dispatch(p, delta, divergence, max_ratio, False, validate), checked)
