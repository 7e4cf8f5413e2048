"""Input checks shared by every backend.

Each check names the parameter, says how many elements fail and where the
first one is, and what is expected, so a bad batch is easy to trace.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["as_real_array", "check_probability", "check_log_probability",
           "check_delta", "check_max_ratio", "broadcast_flat"]


def as_real_array(value, name: str) -> np.ndarray:
    """``value`` as a float64 array; TypeError for non-real input.

    Integers and floats of any width are accepted (float64 holds float16/32
    and most integers exactly). Booleans, complex numbers, strings and
    objects are rejected rather than guessed at.
    """
    try:
        arr = np.asarray(value)
    except Exception as exc:
        raise TypeError(f"{name} must be a real number or an array of them ({exc})") from exc
    kind = arr.dtype.kind
    if kind not in "iuf":
        raise TypeError(
            f"{name} must be a real number or an array of real numbers "
            f"(got dtype {arr.dtype}{' (booleans are not probabilities)' if kind == 'b' else ''})"
        )
    return arr.astype(np.float64, copy=False)


def _report(arr: np.ndarray, bad: np.ndarray, name: str, what: str) -> None:
    count = int(np.count_nonzero(bad))
    if count == 0:
        return
    flat_index = int(np.flatnonzero(bad)[0])
    if arr.ndim == 0:
        where = f"got {arr[()]!r}"
    else:
        index = np.unravel_index(flat_index, arr.shape)
        where = (f"{count} of {arr.size} elements, the first at index "
                 f"{tuple(int(i) for i in index)} (value {arr.flat[flat_index]!r})")
    raise ValueError(f"{name} {what}: {where}")


def _check_finite(arr: np.ndarray, name: str) -> None:
    _report(arr, np.isnan(arr), name, "contains NaN")
    _report(arr, np.isinf(arr), name, "contains inf")


def check_probability(p, name: str = "p") -> np.ndarray:
    arr = as_real_array(p, name)
    _check_finite(arr, name)
    _report(arr, (arr < 0.0) | (arr > 1.0), name, "must lie in [0, 1]")
    return arr


def check_log_probability(logp, name: str = "logp") -> np.ndarray:
    arr = as_real_array(logp, name)
    _report(arr, np.isnan(arr), name, "contains NaN")
    _report(arr, np.isposinf(arr), name, "contains +inf")
    _report(arr, arr > 0.0, name, "must be <= 0 (a log-probability)")
    # -inf is log 0, a valid probability of zero
    return arr


def check_delta(delta, name: str = "delta") -> np.ndarray:
    arr = as_real_array(delta, name)
    _check_finite(arr, name)
    _report(arr, arr <= 0.0, name, "must be positive (the trust-region radius)")
    return arr


def check_max_ratio(max_ratio) -> float:
    """None means no cap; otherwise a number >= 1 (inf allowed)."""
    if max_ratio is None:
        return math.inf
    if isinstance(max_ratio, bool) or not isinstance(max_ratio, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_ratio must be a number or None (got {type(max_ratio).__name__})")
    value = float(max_ratio)
    if math.isnan(value) or value < 1.0:
        raise ValueError(f"max_ratio must be >= 1 or None, since the band always contains "
                         f"ratio 1 (got {max_ratio})")
    return value


def broadcast_flat(*arrays: np.ndarray):
    """Broadcast like a ufunc; return the shape and contiguous flat copies."""
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"the inputs do not broadcast together: shapes {shapes}") from None
    # The kernels take writable contiguous float64 (numba types read-only arrays
    # apart); np.require copies only where a broadcast view is not that already.
    flats = tuple(np.require(np.broadcast_to(a, shape), np.float64, ["C", "W"]).ravel()
                  for a in arrays)
    return shape, flats
