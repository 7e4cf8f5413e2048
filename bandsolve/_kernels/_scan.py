"""One-pass input scans for the public wrappers.

numpy would need a pass (and a temporary) per condition; on a million
elements that cost more than the closed-form bounds themselves. The scan
returns, per kind of failure, how many elements fail and the first flat index.
"""

import math

import numpy as np
from numba import prange, types

from ._util import InVec, compiled_on_first_call, parallel_kernel

# kinds of failure, the row of each in the scan's result
NAN, POS_INF, NEG_INF, BELOW, ABOVE = range(5)

_SCAN_SIG = types.int64[:, ::1](InVec, types.float64, types.float64,
                                types.boolean, types.boolean)


@compiled_on_first_call(_SCAN_SIG)
def scan(x, low, high, low_inclusive, high_inclusive):
    """result[k] = (count, first flat index or -1) for each kind k.

    BELOW means x < low (or x <= low where not low_inclusive); ABOVE likewise.
    Infinities are reported as POS_INF / NEG_INF, not as out of range.
    """
    result = np.zeros((5, 2), dtype=np.int64)
    result[:, 1] = -1
    for i in range(x.size):
        v = x[i]
        if v != v:
            kind = NAN
        elif v == math.inf:
            kind = POS_INF
        elif v == -math.inf:
            kind = NEG_INF
        elif v < low or (v == low and not low_inclusive):
            kind = BELOW
        elif v > high or (v == high and not high_inclusive):
            kind = ABOVE
        else:
            continue
        if result[kind, 0] == 0:
            result[kind, 1] = i
        result[kind, 0] += 1
    return result


_COUNT_SIG = types.int64(InVec, types.float64, types.float64, types.boolean)


@parallel_kernel(_COUNT_SIG)
def count_outside(x, low, high, low_inclusive):
    """How many elements are not in [low, high] ((low, high] if not
    low_inclusive); NaN counts as outside. The fast first pass: the detailed
    ``scan`` runs only when this is not 0."""
    count = 0
    for i in prange(x.size):
        v = x[i]
        above_low = v >= low if low_inclusive else v > low
        if not (above_low and v <= high):  # NaN fails both comparisons
            count += 1
    return count
