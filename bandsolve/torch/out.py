"""``out=`` for the torch functions: bandsolve._validate.check_out with the
conditions a tensor adds (device, no gradient), and the copy into it."""

from __future__ import annotations

import torch

from .. import _validate
from .device_table import TensorBounds
from .validation import compute_dtype

__all__ = ["check_out", "write_into"]


def _memory(t: torch.Tensor) -> _validate.Memory:
    size = t.element_size()
    return _validate.Memory(t.data_ptr(), tuple(t.shape), tuple(s * size for s in t.stride()),
                            size)


def _tensor_conditions(label: str, t: torch.Tensor, x: torch.Tensor) -> None:
    if t.device != x.device:
        raise ValueError(f"{label} must be on the input's device {x.device} (got {t.device})")
    if t.requires_grad:
        raise ValueError(f"{label} requires grad: the bounds carry no gradient, so "
                         "write them into a tensor without requires_grad")


_TENSORS = _validate.OutKind(array_type=torch.Tensor, type_name="tensor", memory=_memory,
                             check=_tensor_conditions)


def check_out(out, x, name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``out`` validated against the result the input ``x`` (called ``name``)
    gives: a pair of tensors of its shape, compute dtype and device, sharing
    memory neither with each other nor with the input. None where ``x`` is
    no tensor (the call raises for that)."""
    if not isinstance(x, torch.Tensor):
        return None
    dtype = compute_dtype(x.dtype) if x.dtype.is_floating_point else torch.float32
    # Traced by torch.compile, a tensor has no address to compare: the memory
    # checks are left out there (the compiled code still writes the bounds
    # after computing them, so an out= that aliases the input gets the right
    # values; two outs that alias each other are the caller's to avoid)
    return _validate.check_out(out, _TENSORS, dtype=dtype, shape=tuple(x.shape),
                               inputs={name: x},
                               addresses=not torch.compiler.is_compiling())


def write_into(bounds: TensorBounds, out: tuple[torch.Tensor, torch.Tensor] | None
               ) -> TensorBounds:
    if out is None:
        return bounds
    out[0].copy_(bounds[0])
    out[1].copy_(bounds[1])
    return out
