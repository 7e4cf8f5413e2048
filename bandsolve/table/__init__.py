"""Bound tables: the band for one (divergence, delta) as a certified spline.

A trainer that runs one divergence and one delta for a whole run can skip the
solver: the bounds are smooth functions of z = logit p, apart from the
saturation thresholds, so a piecewise polynomial in z reproduces them at the
cost of a gather and a few multiply-adds per element. ``bandsolve.torch``
evaluates these tables on the device; ``bandsolve export`` writes them to a
file for trainers in other frameworks.

What is tabulated
-----------------
For each bound, y(z) = log s, where s is the bound's margin as a share of the
room the simplex leaves it:

* upper: s = m / (1 - p) with m = p (r - 1), so r = 1 + s (1 - p) / p;
* lower: s = 1 - r, so r = -expm1(y).

y <= 0 is smooth where the bound is interior, tends to 0 at a saturation
threshold (s = 1; like a power of the distance to it, or d log d) and is close
to linear in both tails. Beyond its threshold a bound is saturated exactly
(r = 1/p or r = 0); the file stores the threshold to the last bit.

The grid: octaves of the distance to a center
----------------------------------------------
With d = |z - center| (the center is the threshold, or 0 where there is
none), the grid is uniform within each octave [2^(e-1), 2^e) of d, with
``PER_OCTAVE`` intervals, for e from ``OCTAVE_MIN`` to ``OCTAVE_MAX``, plus
one uniform segment [0, 2^(OCTAVE_MIN - 1)). So nodes are dense where y
bends (next to a threshold) and sparse in the nearly linear tails, and the
interval of an element and its position in it come from ``frexp(d)`` with
no rounding at all: ``d = m 2^e`` with m in [1/2, 1), and (2m - 1)
PER_OCTAVE splits into the interval (integer part) and the local coordinate
t in [0, 1) (fraction), both exact in float32 as in float64. Each interval
holds the quintic spline's piece as coefficients of t^0 .. t^5.

Certificate
-----------
``build`` checks the table against the float64 root finder at four points
inside every interval and at both ends of the range (p and 1 - p from 1e-300
to 1), evaluating the table as the devices do (from log p, in float64), and
stores the smallest ``rtol`` with

    |r_table - r| <= max(rtol * min(r, |r - 1|), atol * max(r, 1))

at every point checked, atol = 1e-12. That is a dense check, not a proof:
between the points the spline and the bound are both smooth.

Accuracy of a float64 table (``evaluate_numpy``, ``BandTable`` in float64 on
any device, ``bandsolve.torch`` float64 off the CPU), against the float64 root
finder r = ``bandsolve.band_from_logp`` at the same log p, with the table's
stored certificate:

    |r_table - r| <= max(rtol * min(r, |r - 1|), atol * max(r, 1)) + 8 eps * max(r, 1)

(rtol = 0 and atol = 1e-12 for the built-in divergences at delta from 1e-6
to 10; against the exact bound add the root finder's own
max(1e-12 min(r, |r-1|), 4 eps max(r, 1))). The float64 evaluation's own
rounding is inside the certificate, since the check evaluates the table as
the devices do; the 8 eps allow for a device whose exp, log and expm1 round
differently. Measured at 10^5 random log p per table (tails and threshold
neighbourhoods included), the worst error is 0.23 of the certificate, and
moving every exp / log / expm1 result by 2 ulp or evaluating Horner's rule
without rounding changes it by under 0.002 of it. A float32 evaluation is
within max(1e-5 min(r, |r-1|), 16 eps32 max(r, 1)) of the float64 root finder
at the same float32 input for log p >= -80 (worst measured: 0.56 of that).

Modules: :mod:`.data` (the grid and the table's fields), :mod:`.evaluate`
(the evaluation, once for numpy and torch), :mod:`.fit` (spline and
``build``), :mod:`.certify` (checks against the root finder), :mod:`.formats`
(files, checksum).
"""

from .certify import check_against_solver
from .data import (
    ATOL,
    DEGREE,
    INTERVALS_PER_SIGN,
    OCTAVE_MAX,
    OCTAVE_MIN,
    PER_OCTAVE,
    SEGMENTS,
    BandTableData,
    TableIntegrityError,
    TableSide,
)
from .evaluate import evaluate_numpy
from .fit import build
from .formats import (
    FORMAT,
    FORMAT_VERSION,
    MAX_STORED_TOLERANCE,
    check_destination,
    checksum,
    from_arrays,
    load,
    save,
    to_arrays,
)

__all__ = ["TableSide", "BandTableData", "TableIntegrityError", "build", "save", "load",
           "check_destination",
           "evaluate_numpy", "to_arrays", "from_arrays", "check_against_solver", "checksum",
           "ATOL", "DEGREE", "OCTAVE_MIN", "OCTAVE_MAX", "PER_OCTAVE", "SEGMENTS",
           "INTERVALS_PER_SIGN", "FORMAT", "FORMAT_VERSION", "MAX_STORED_TOLERANCE"]
