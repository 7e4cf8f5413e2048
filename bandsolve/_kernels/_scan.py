"""Input scans for the public wrappers: a parallel count of the elements
outside a range (one pass, for large batches), and per kind of failure, how
many elements fail and the first flat index (``scan``, for small batches and
for the message)."""

import math

import numpy as np
from numba import prange, types

from ._util import InVec, parallel_kernel

# kinds of failure, the row of each in the scan's result
NAN, POS_INF, NEG_INF, BELOW, ABOVE = range(5)

def scan(x, low, high, low_inclusive, high_inclusive):
    """result[k] = (count, first flat index or -1) for each kind k.

    BELOW means x < low (or x <= low where not low_inclusive); ABOVE likewise.
    Infinities are reported as POS_INF / NEG_INF, not as out of range.

    In numpy, one boolean pass per kind: it runs on batches below the
    parallel count's size and where that count found something, and costs
    no compile (it was a numba loop, 0.35 s to compile on a first call).
    """
    x = np.asarray(x)
    result = np.zeros((5, 2), dtype=np.int64)
    result[:, 1] = -1
    nan = np.isnan(x)
    pos_inf = x == math.inf
    neg_inf = x == -math.inf
    finite = ~(nan | pos_inf | neg_inf)
    below = finite & ((x < low) if low_inclusive else (x <= low))
    above = finite & ~below & ((x > high) if high_inclusive else (x >= high))
    for kind, fails in ((NAN, nan), (POS_INF, pos_inf), (NEG_INF, neg_inf), (BELOW, below),
                        (ABOVE, above)):
        count = int(np.count_nonzero(fails))
        if count:
            result[kind] = count, int(np.argmax(fails))
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
