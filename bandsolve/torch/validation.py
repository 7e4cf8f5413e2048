"""Checks of a band call: its arguments (:class:`BandArguments`, checked
once), the compute dtype, the ``validate`` modes, and the value checks (NaN,
+inf, outside [-inf, 0] or [0, 1]) run on the device."""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from typing import Literal

import numpy as np
import torch

from .. import _validate
from ..divergences import DivergenceLike, get_divergence

#: What ``validate`` accepts: True (sync on the CPU, async elsewhere), False,
#: "sync" or "async"
Validate = bool | Literal["sync", "async"]

__all__ = ["Validate", "BandArguments", "band_arguments", "compute_dtype", "validation_mode",
           "check_values", "invalid", "any_invalid", "old_log_prob_for_band"]

_HALF_TYPES = (torch.float16, torch.bfloat16)


@dataclasses.dataclass(frozen=True)
class BandArguments:
    """delta, divergence and max_ratio of a band call, checked as
    :func:`bandsolve.band` checks them: what the private evaluation trusts.

    ``divergence`` is the registry name where the divergence is registered
    (so that a custom op can carry it), else the Divergence itself;
    ``max_ratio`` is inf for no cap."""

    divergence: DivergenceLike
    delta: float
    max_ratio: float

    @property
    def cap(self) -> float | None:
        """max_ratio as the numpy API takes it: None for no cap."""
        return None if self.max_ratio == math.inf else self.max_ratio


def _checked(delta, divergence, max_ratio) -> BandArguments:
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
    return BandArguments(key, float(delta_arr), cap)


_checked_once = functools.lru_cache(maxsize=256)(_checked)


def _scalar(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def band_arguments(delta, divergence, max_ratio) -> BandArguments:
    """The checked arguments; TypeError or ValueError as :func:`bandsolve.band`.

    Arguments are checked once: the result for scalar ones is kept (256
    entries), so that a settings object, which checks them when it is built
    (:class:`~bandsolve.torch.BandSettings`), and every call it makes, or a
    trainer's call with the same delta every step, find them checked (a
    dictionary lookup) instead of checking them again. Booleans are not
    kept (True would be found as 1): they are refused, as the numpy API does."""
    if _scalar(delta) and (max_ratio is None or _scalar(max_ratio)):
        try:
            return _checked_once(delta, divergence, max_ratio)
        except TypeError as exc:  # an unhashable divergence: checked, not kept
            if "unhashable" not in str(exc):
                raise
    return _checked(delta, divergence, max_ratio)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 input, float32 for float32/float16/bfloat16;
    TypeError for anything else (integers, booleans, complex)."""
    if dtype == torch.float64:
        return torch.float64
    if dtype == torch.float32 or dtype in _HALF_TYPES:
        return torch.float32
    raise TypeError(f"expected a floating-point tensor (float16, bfloat16, float32 or "
                    f"float64), got {dtype}")


def validation_mode(validate) -> str:
    """``validate`` as one of the modes "auto" (True), "off" (False), "sync"
    and "async"; ValueError for anything else."""
    if isinstance(validate, bool | np.bool_):
        return "auto" if validate else "off"
    if isinstance(validate, str) and validate in ("auto", "off", "sync", "async"):
        return validate
    raise ValueError(f"validate must be True, False, 'sync' or 'async' (got {validate!r})")


def invalid(x: torch.Tensor, from_logp: bool, above: float = 0.0) -> torch.Tensor:
    """Where x is not a valid log p (NaN, > ``above``) or p (NaN, outside [0, 1])."""
    return torch.isnan(x) | (x > above) if from_logp else ~((x >= 0.0) & (x <= 1.0))


def any_invalid(x: torch.Tensor, from_logp: bool, above: float = 0.0) -> torch.Tensor:
    """Whether :func:`invalid` holds anywhere, as a 0-dim bool tensor: one
    reduction, reading x once and writing no temporary of its size (a
    comparison, a negation and an ``any`` took three passes). NaN propagates
    through max and min, and fails every comparison."""
    if from_logp:
        return torch.logical_not(x.max() <= above)
    low, high = torch.aminmax(x)
    return torch.logical_not((low >= 0.0) & (high <= 1.0))


def check_values(x: torch.Tensor, from_logp: bool, mode: str, name: str, above: float = 0.0):
    """Check for NaN, +inf and values outside [-inf, 0] (log p) or [0, 1] (p);
    ``name`` is the argument's name in messages.

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
    bad = any_invalid(v, from_logp, above)
    expected = ("must be <= 0 (and not NaN or +inf)" if from_logp
                else "must lie in [0, 1] (and not be NaN or inf)")
    if mode == "async" or (mode == "auto" and v.device.type != "cpu"):
        # On CUDA a failed assertion surfaces at the next synchronisation as a
        # device-side assert, which leaves the CUDA context unusable: the
        # process must restart. That is the price of checking every step
        # without a synchronisation; the message says how to find the element.
        torch._assert_async(torch.logical_not(bad),
                            f"bandsolve: {name} {expected}, but some element is not "
                            f"(checked on the device with validate={mode!r}); call with "
                            f"validate='sync' to raise ValueError naming the first one")
        return
    if not bool(bad):
        return
    flat = invalid(v, from_logp, above).reshape(-1)
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


def _log_prob_rounding(dtype: torch.dtype) -> float:
    """How far above 0 a trainer's log-probability of a near-certain token may
    round: log_softmax subtracts a logsumexp of the logits' magnitude, so a
    16-bit type can land a few of its ulps (2^-8) above 0, a 32-bit one far
    less. Above this, a positive value is not rounding but a bug upstream."""
    return 0.0625 if torch.finfo(dtype).bits <= 16 else 1e-3


def old_log_prob_for_band(old_log_prob: torch.Tensor, validate: Validate = True,
                          mask: torch.Tensor | None = None) -> torch.Tensor:
    """A trainer's old log-probabilities, ready for ``band_from_logp``:
    checked first, then clamped to <= 0.

    Values above 0 by no more than their dtype's rounding of a softmax (1e-3
    for 32- and 64-bit, 0.0625 for 16-bit types) are clamped to 0; NaN, +inf
    and anything larger are refused under ``validate`` (as in
    ``band_from_logp``), never clamped into the p = 1 band. Where
    ``mask`` is 0 (padding) the value is not looked at and becomes 0.
    Detached.
    """
    old = old_log_prob.detach()
    if mask is not None:
        old = torch.where(mask.bool(), old, torch.zeros_like(old))
    mode = validation_mode(validate)
    if mode == "auto" and torch.compiler.is_compiling():
        mode = "async"  # a read back cannot be traced; a device-side assertion can
    check_values(old, True, mode, "old_log_prob", above=_log_prob_rounding(old.dtype))
    return old.clamp(max=0.0)
