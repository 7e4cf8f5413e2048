"""A certified bound table on a torch device: :class:`BandTable`.

The table's fields (``bandsolve.table``) become tensors per dtype on one
device, and a call is ``bandsolve.table.evaluate.bounds`` in torch: a gather
and Horner's rule, a fixed amount of work per element, no host
synchronisation and no data-dependent shapes, so it runs under
``torch.compile(fullgraph=True)`` and in CUDA graphs. Called eagerly it runs
op by op and compiles nothing; compiled, it fuses with the caller's code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from .. import table as _table
from ..divergences import DivergenceLike
from ..table import evaluate as _evaluate_table
from ..table.data import DEGREE, INTERVALS_PER_SIGN
from .validation import Validate, check_values, compute_dtype, validation_mode

#: (lower, upper) ratio bounds, tensors of the input's shape, dtype and device
TensorBounds = tuple[torch.Tensor, torch.Tensor]
Device = str | torch.device | None

__all__ = ["BandTable", "TensorBounds", "Device", "TORCH_OPS", "PackedTable", "evaluate",
           "evaluate_packed"]


class _Side:
    """One bound's table for ``bandsolve.table.evaluate``, every field a tensor
    (views into a :class:`PackedTable`)."""

    def __init__(self, center, threshold, two_sided, coefficients):
        self.center, self.threshold = center, threshold
        self.two_sided, self.coefficients = two_sided, coefficients


class PackedTable(NamedTuple):
    """A table as four tensors of one dtype on one device, the same shapes for
    every divergence and delta, so that one compiled graph (and the custom
    op ``bandsolve::band_table`` under torch.compile) serves them all.

    ``coefficients``: (2, DEGREE + 1, 2 INTERVALS_PER_SIGN), lower then upper;
    row j multiplies t^j (one gather of all six gives contiguous rows for
    Horner's rule, measured 2x faster on the CPU than rows of the
    (intervals, 6) layout); a one-sided grid is padded with zeros.
    ``scalars``: lower center and threshold, upper center and threshold,
    the lower bound at p = 1, the cap (inf for none). ``two_sided``: int64
    0/1 per side."""

    coefficients: torch.Tensor
    scalars: torch.Tensor
    two_sided: torch.Tensor

    @classmethod
    def of(cls, data: _table.BandTableData, dtype, device) -> PackedTable:
        coefficients = np.zeros((2, DEGREE + 1, 2 * INTERVALS_PER_SIGN))
        for i, side in enumerate((data.lower, data.upper)):
            coefficients[i, :, :side.coefficients.shape[0]] = side.coefficients.T
        scalars = [data.lower.center, data.lower.threshold, data.upper.center,
                   data.upper.threshold, data.lower_at_one, data.max_ratio]
        return cls(torch.as_tensor(coefficients, dtype=dtype, device=device),
                   torch.tensor(scalars, dtype=dtype, device=device),
                   torch.tensor([data.lower.two_sided, data.upper.two_sided],
                                dtype=torch.int64, device=device))

    def clone(self) -> PackedTable:
        return PackedTable(*(t.clone() for t in self))


def evaluate_packed(x: torch.Tensor, table: PackedTable, from_logp: bool) -> TensorBounds:
    """(lower, upper) at log p (``from_logp``) or p: ``bandsolve.table.evaluate.bounds``
    in torch, in the table's dtype. Pure tensor arithmetic, no host reads:
    traced whole by torch.compile."""
    coefficients, scalars, two_sided = table
    x = x.to(coefficients.dtype)
    logp, q = (x, -expm1(x)) if from_logp else (torch.log(x), 1.0 - x)
    lower = _Side(scalars[0], scalars[1], two_sided[0], coefficients[0])
    upper = _Side(scalars[2], scalars[3], two_sided[1], coefficients[1])
    return _evaluate_table.bounds(TORCH_OPS, lower, upper, logp, q,
                                  lower_at_one=scalars[4],  # type: ignore[arg-type]
                                  max_ratio=scalars[5],  # type: ignore[arg-type]
                                  p=None if from_logp else x)


def _gather(coefficients: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return coefficients.index_select(1, k.reshape(-1)).reshape(coefficients.shape[0], *k.shape)


def expm1(x: torch.Tensor) -> torch.Tensor:
    """e^x - 1 to a few ulps, eagerly and compiled.

    torch.compile's vectorised CPU code (inductor, torch 2.13) writes expm1
    as ``exp(x) - 1`` "for performance", which cancels: 0 for |x| < 6e-8 in
    float32, so 1 - p rounded to 0 for p near 1 and the lower bound there
    came out as the bound at p = 1 (rkl, delta 1e-3, log p = -2.8e-8: 1.0
    for 0.99987). Compiled, this is Kahan's expm1 instead: u = e^x rounded,
    then (u - 1) x / log u, where log u carries u's rounding error and
    cancels it (pytorch/pytorch issue 189803, PR 190533 upstream). Eagerly,
    ATen's expm1 is accurate and is used."""
    if not torch.compiler.is_compiling():
        return torch.expm1(x)
    u = torch.exp(x)
    u_minus_one = u - 1.0
    kahan = u_minus_one * (x / torch.log(u))
    # u = 1: |x| below half an ulp of 1, where e^x - 1 = x; u = 0: -1
    return torch.where(u_minus_one == 0.0, x,
                       torch.where(u_minus_one == -1.0, -1.0, kahan))


#: bandsolve.table's evaluation in torch
TORCH_OPS = _evaluate_table.ArrayOps(
    frexp=torch.frexp, where=torch.where, floor=torch.floor, abs=torch.abs, exp=torch.exp,
    expm1=expm1, log=torch.log, isnan=torch.isnan, minimum=torch.minimum,
    clamp=lambda x, low, high: x.clamp(low, high), to_index=lambda x: x.long(),
    gather=_gather, eps=lambda x: torch.finfo(x.dtype).eps)


def evaluate(x: torch.Tensor, table: PackedTable, from_logp: bool) -> TensorBounds:
    """:func:`evaluate_packed` without gradient. Outside a compiled region it
    runs op by op (about a hundred ATen kernels, each a pass over the tensor,
    and nothing to compile: 1-3 ms a call on a GPU); inside one the caller's
    graph fuses it."""
    with torch.no_grad():
        return evaluate_packed(x, table, from_logp)


class BandTable:
    """The band of one divergence at one delta, as a certified table on a device.

    Build with :meth:`build` (from the solver) or :meth:`load` (a file from
    ``bandsolve export``); move with :meth:`to`; call with log-probabilities:
    ``lower, upper = table(logp)``, or ``table.from_p(p)``.

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
        self._packed = {dtype: PackedTable.of(data, dtype, self.device)
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

    def __call__(self, logp: torch.Tensor, *, validate: Validate = True) -> TensorBounds:
        """(lower, upper) from log-probabilities (log p <= 0; -inf is p = 0)."""
        dtype = self._prepare(logp, validate, from_logp=True)
        return evaluate(logp.detach(), self._packed[dtype], True)

    def from_p(self, p: torch.Tensor, *, validate: Validate = True) -> TensorBounds:
        """(lower, upper) from probabilities in [0, 1]."""
        dtype = self._prepare(p, validate, from_logp=False)
        return evaluate(p.detach(), self._packed[dtype], False)

    def _prepare(self, x, validate: Validate, from_logp: bool) -> torch.dtype:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
        dtype = compute_dtype(x.dtype)
        self._check_device(x)
        mode = validation_mode(validate)
        check_values(x, from_logp, mode, "logp" if from_logp else "p")
        if from_logp and x.dtype == torch.float64 and mode != "off" and (
                mode == "sync" or x.device.type == "cpu"):
            # only a float64 log p gets within 1e-300 of 0, beyond the
            # certified range (a read back, as "sync" and the CPU allow)
            outside = _evaluate_table.beyond_certified_range(x.detach())
            if bool(outside.any()):
                raise ValueError(
                    f"logp has {int(outside.sum())} elements within 1e-300 of 0 (1 - p "
                    "below 1e-300): outside the range a table is certified for; "
                    "bandsolve.torch.band_from_logp on a CPU float64 tensor, or the numpy "
                    "API, solves them")
        return dtype

