"""The fast path: a per-delta start table, one vectorised Newton step, and a
certificate per element that sends the rest to the scalar root finder.

For one delta and many p (a trainer's batch), the root finder of ``_solver``
spends most of its time in scalar libm calls and the branches of its
safeguards. Here each bound takes three steps instead, with the same
psi(x) = log(g(m(x)) / delta) in the same unknown x = log(m / (b - m)), but
started from, and evaluated at, the mirrored unknown v = -log u2 =
log(1 + e^x) of the point u2 = 1 - m/b:

1. **Start.** v is read from a table built for this delta
   (:func:`tables_from`): piecewise quintic in the bits of t = min(p, 1 - p),
   one piece per 1/32 of each binade of t from 2^-60 to 1/2, on each side of
   p = 1/2. The index is the exponent and the top five mantissa bits; the
   local variable is the rest of the mantissa. No logarithm.
2. **Polish.** One Newton step on psi, written with the divergence's
   ``vector_forms`` (f and f' together: ``_vecmath`` instead of libm,
   selects instead of branches), so that LLVM vectorises it. From v, one
   exponential (``_vecmath.vexp_parts``) gives u2 = e^-v, s = m/b = 1 - u2 and
   u2 - 1 - log u2 to full relative precision, and since log u2 = -v is
   known, f at u2 needs no logarithm for kl, rkl and the alpha family
   (``value_and_slope_at_log``, the LOG_VECTOR_FORM slot); only f at
   1 + m/a takes one (``value_and_slope``, the VECTOR_FORM slot). The step
   is Newton's in x, dx = -psi / psi'(x), applied to m and u2 to first order
   as before (x itself is never formed: that needs a logarithm). The table
   gives v to about 1e-9 relative (x to about 1e-9), so the step leaves an
   error of order 1e-18.
3. **Certificate.** The step dx bounds what is left: Newton's truncation
   error, dx^2 (1 + 1/psi'), and the rounding error of g propagated through
   1/psi' (``VectorForms.g_rel_error``). An element is kept only if, mapped
   onto each bound, the first is below 1e-14 relative and the second below
   1e-13 (the API promises 1e-12), or both below a sixteenth of an ulp of
   the lower bound's absolute allowance. Every other element (a NaN start
   next to a saturation threshold or outside the table, p subnormal, p = 1,
   a bound the step could not certify) gets the status ``STATUS_UNCERTIFIED``,
   and the caller (``bandsolve._solve``) recomputes it with
   ``_solver.band_by_root``. A bad start costs time, never accuracy.

Saturation is decided against the exact thresholds of ``_solver`` for this
delta: elements clearly past one take the saturated bound exactly as the
root finder does (1/p, or 0); those within 1e-6 in logit p of one are
flagged.

The loop runs in chunks of ``CHUNK`` elements over threads, and each chunk in
blocks of ``BLOCK``: a scalar pass (``gather_block``) gathers the starts from the table, then a
vectorised pass polishes them (a gather inside the polishing loop keeps LLVM
from vectorising it).
"""

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import prange, types

from ._factory import template, unbound
from ._solver import LOG_SMALLEST_NORMAL as _LOG_SMALLEST_NORMAL
from ._solver import STATUS_OK, STATUS_UNCERTIFIED
from ._util import InVec, OutVec
from ._vecmath import _bits, _float, _int_to_float, ir_inlined, vexp, vexp_parts, vexpm1, vjit

# The table: sides x binades x pieces rows of cubic coefficients
BINADES = 60  # t = min(p, 1 - p) in [2^-60, 1)
LOWEST_EXPONENT = -BINADES
PIECE_BITS = 5
PIECES = 1 << PIECE_BITS
ROWS_PER_SIDE = BINADES * PIECES
DEGREE = 5
#: Chebyshev points of the first kind on [-1, 1]: the nodes of every piece
NODE_S = np.cos((2 * np.arange(DEGREE + 1) + 1) * np.pi / (2 * (DEGREE + 1)))

# The certificate (see the module docstring): relative limits on the two error
# terms, and the absolute limit that the lower bound's allowance 4 eps allows
TRUNCATION_LIMIT = 1e-14
ROUNDING_LIMIT = 1e-13
ABSOLUTE_LIMIT = 5.5e-17
# Half the width, in logit p, of the band around a saturation threshold
# whose elements are flagged
THRESHOLD_MARGIN = 1e-6

# Starts beyond this v are polished at it: u2 = e^-v and the products with it
# stay normal (subnormal arithmetic costs about 100 cycles an operation), and
# u2 < 3e-261 is within the lower bound's absolute allowance of 0, and the
# margin m = b (1 - u2) rounds to b
V_CAP = 600.0

# Beyond this |g / delta - 1| a start is not polished (see ``polish``)
EXCESS_MAX = 1e-3

CHUNK = 16384
BLOCK = 512


# The slots the polish template reads (``_factory.SLOT_FIELDS``); unbound here,
# as in ``_solver``.
VECTOR_FORM: Callable[..., Any] = unbound
LOG_VECTOR_FORM: Callable[..., Any] = unbound
# The compile-time constant (``_factory.specialise(..., FROM_LOGP=...)``):
# whether x holds log p. Two copies of each kernel, each with its branch
# folded away, rather than one testing it per element: LLVM does not split
# the loop on a run-time flag, so every element paid for both paths.
FROM_LOGP = False

_LOCAL_BITS = 52 - PIECE_BITS
_LOCAL_MASK = (1 << _LOCAL_BITS) - 1
_LOCAL_SCALE = 2.0 / (1 << _LOCAL_BITS)
_PIECE_MASK = PIECES - 1


def table_from_nodes(values):
    """Coefficients (rows x DEGREE + 1, low degree first) interpolating the node
    values (in ``node_logits`` order); a NaN node makes its row NaN."""
    vandermonde = np.vander(NODE_S, DEGREE + 1, increasing=True)
    coefficients = values.reshape(-1, DEGREE + 1) @ np.linalg.inv(vandermonde).T
    return np.ascontiguousarray(coefficients)


@ir_inlined
def _locate(t, side):
    """(row, local variable s in [-1, 1), whether t lies inside the table) of
    t = min(p, 1 - p) on ``side``. The row is clamped into the table, so that
    the loads that follow are unconditional; no array comes in, so none is
    reference-counted inside the loop (an array passed to an inlined
    function is, and its incref/decref calls kept LLVM from unrolling the
    loads)."""
    bits = _bits(t)
    binade = (bits >> 52) - (1023 + LOWEST_EXPONENT)
    inside = 0 <= binade < BINADES
    binade = min(max(binade, 0), BINADES - 1)
    row = side * ROWS_PER_SIDE + binade * PIECES + ((bits >> _LOCAL_BITS) & _PIECE_MASK)
    s = _int_to_float(bits & _LOCAL_MASK) * _LOCAL_SCALE - 1.0
    return row, s, inside


@template(slots=("VECTOR_FORM", "LOG_VECTOR_FORM"), constants=("FROM_LOGP",), contract=True)
def polish_block(x, delta, theta, g_rel_error, lower_at_one, start_upper, start_lower,
                 lower, upper, status):
    """The polish pass over one block: bounds and status from the starts;
    returns (flagged, outside): the elements left to the root finder, and
    those outside the domain (p not in [0, 1], log p not <= 0, NaN), which
    the caller refuses with the validation's message (the range check of a
    large batch, counted in this pass instead of a pass of its own).

    A loop of its own, compiled apart from the gather: LLVM vectorises a
    flat loop over arrays it can check for overlap at run time, and not the
    same loop nested in the chunk and block loops. It holds no saturation
    test: the tables do (``tables_from``), with a start of +inf where a bound
    is saturated (the step then keeps the saturated bound exactly, as the
    root finder does) and NaN next to a threshold (flagged). p = 0 and
    p = 1 are exact here, the lower bound at p = 1 (``lower_at_one``) solved
    with the tables.
    """
    def polish(a, b, inv_a, delta, inv_delta, theta, v, upper):
        """One Newton step from v = -log u2 for the margin with (a, b), and
        inv_a = 1/a; returns the bound (the margin m for the upper side,
        u2 = 1 - m/b for the lower), whether the certificate holds, and
        whether the start lay past V_CAP (the bound is then its limit)."""
        beyond = v > V_CAP
        v = V_CAP if beyond else v
        # u2 = e^-v, u2 - 1 = -s and u2 - 1 - log u2, each to full relative
        # precision from one reduction: f at u2 needs no logarithm
        u2, u2_m1, u2_m1_mlog = vexp_parts(-v)
        s = -u2_m1  # m / b
        m = b * s
        y = m * inv_a
        f_up, df_up = VECTOR_FORM(1.0 + y, y, theta)
        # f(u2) and its slope in log u2, u2 f'(u2)
        f_down, dfdl_down = LOG_VECTOR_FORM(-v, u2, u2_m1, u2_m1_mlog, theta)
        g = a * f_up + b * f_down
        # psi'(x) = g'(m) m u2 / g in x = logit s (dm/dx = m u2), with
        # g'(m) u2 = f'(u1) u2 - u2 f'(u2), kept as its reciprocal: one
        # division for the step and both error terms. The step is Newton's
        # in x, as the certificate's truncation term assumes, whichever
        # unknown the start came in
        inv_dpsi = g / (m * (df_up * u2 - dfdl_down))
        excess = (g - delta) * inv_delta
        # log1p(excess) by three terms of its series (no log, no division).
        # Its error, excess^4 / 4, moves x by that over psi', far below the
        # truncation term dx^2 ~ (excess / psi')^2 the certificate already
        # counts; beyond EXCESS_MAX the start is flagged (no certifiable step
        # starts there: dx^2 would be about 1e-6)
        log_ratio = excess * (1.0 - excess * (0.5 - excess * (1.0 / 3.0)))
        dx = -log_ratio * inv_dpsi
        truncation = dx * dx * (1.0 + inv_dpsi)
        rounding = g_rel_error * inv_dpsi
        # the two error terms, each as a share of its limit: the step is
        # certified where the larger, carried onto the bound, is at most 1.
        # Selects and bitwise ands only (no branch, one comparison per test):
        # the certificate cost a quarter of the loop written with and/or
        relative = max(truncation * (1.0 / TRUNCATION_LIMIT), rounding * (1.0 / ROUNDING_LIMIT))
        close = abs(excess) <= EXCESS_MAX
        if upper:
            # m moves by m u2 dx: relative error u2 (error in x)
            bound = m + m * (u2 * dx)
            ok = close & (relative * u2 <= 1.0)
        else:
            # u2 moves by u2 s dx: the allowance is relative to min(u2, s)
            bound = u2 - u2 * (s * dx)
            ok = close & ((relative * max(s, u2) <= 1.0)
                          | ((truncation + rounding) * (s * u2) <= ABSOLUTE_LIMIT))
        if beyond:
            # the start lies past V_CAP: if g < delta there, so does the root
            # (or the bound saturates, where the table says +inf), and the
            # bound is its limit m = b, u2 = 0 to within the allowance
            limit = b if upper else 0.0
            return limit, excess < 0.0, True
        # v <= 0 is no margin (m <= 0): only an interpolation gone wrong gives it
        return bound, ok & (v > 0.0), False

    inv_delta = 1.0 / delta
    flagged = 0
    outside = 0
    for i in range(x.size):
        xi = x[i]
        if FROM_LOGP:
            p = vexp(xi)
            pc = 0.0 - vexpm1(xi)
            outside += not xi <= 0.0  # NaN too
        else:
            p = xi
            pc = 1.0 - xi
            outside += not ((xi >= 0.0) & (xi <= 1.0))
        inv_p = 1.0 / p
        m_hi, ok_hi, beyond_hi = polish(p, pc, inv_p, delta, inv_delta, theta, start_upper[i],
                                        True)
        u2_lo, ok_lo, _ = polish(pc, p, 1.0 / pc, delta, inv_delta, theta, start_lower[i],
                                 False)
        # the simplex cap 1/p: from log p, e^(-log p) rounded down (1/p of a
        # rounded p can exceed it by an ulp)
        cap = _cap_from_logp(xi) if FROM_LOGP else inv_p
        empty = p == 0.0
        certain = pc == 0.0  # p = 1: the band is [lower_at_one, 1]
        upper[i] = math.inf if empty else (
            1.0 if certain else (cap if beyond_hi else min(1.0 + m_hi * inv_p, cap)))
        lower[i] = 0.0 if empty else (lower_at_one if certain else u2_lo)
        keep = (ok_hi & ok_lo) | empty | certain
        if FROM_LOGP:
            # p below 2^-1022 (subnormal or 0) from a finite log p: p is
            # rounded, and the root finder takes log p itself
            keep = (keep & (xi >= _LOG_SMALLEST_NORMAL)) | (xi == -math.inf)
        status[i] = STATUS_OK if keep else STATUS_UNCERTIFIED
        flagged += 0 if keep else 1
    return flagged, outside


@vjit
def _cap_from_logp(log_p):
    """A float64 at most e^(-log p) and within 3 ulp of it, without libm (so
    the polish loop still vectorises): vexp is within one ulp
    (tests/test_vecmath.py checks it over its whole domain), so two steps down
    in the bit pattern lie below the exact value. 1 and inf are kept, as
    ``_solver.simplex_cap_from_logp`` keeps them."""
    cap = vexp(0.0 - log_p)
    down = _float(_bits(cap) - 2)
    down = 1.0 if down < 1.0 else down
    return cap if (cap == 1.0) | (cap == math.inf) else down


@template(constants=("FROM_LOGP",), contract=True)
def gather_block(x, table_upper, table_lower, start_upper, start_lower):
    """The gather pass over one block: the table's starts of both bounds, v
    at t = min(p, 1 - p) by Horner's rule in the piece's quintic, NaN outside
    the table.

    A function of its own, as ``polish_block`` is, rather than a loop nested
    in ``band_fast``'s chunk and block loops (measured 8-11% less CPU time
    for js and alpha:2, 1-3% for kl, benchmarks/RESULTS.md). Scalar: LLVM
    vectorises the loop only where the tables' memory is known apart from
    the starts' (numba does not mark arguments noalias), and where it was
    told so, its vgather code took 6.1 ns an element against 4.2 for this
    loop on the machine measured (AMD Zen 4; benchmarks/RESULTS.md, issue
    41). Both tables' rows are read in one loop of Horner steps, with no
    array handed to an inlined function: 8.7 ns an element before, 6.9 now.
    One table of both bounds' rows, each two aligned cache lines, measured
    6.5 ns alone and 3 ns an element slower in the whole kernel (its 491 kB
    against the two tables' 368 kB, beside the batch streaming through).
    """
    for j in range(x.size):
        xi = x[j]
        if FROM_LOGP:
            p, pc = vexp(xi), 0.0 - vexpm1(xi)
        else:
            p, pc = xi, 1.0 - xi
        side = 1 if p > 0.5 else 0
        row, s, inside = _locate(pc if side else p, side)
        upper = table_upper[row, DEGREE]
        lower = table_lower[row, DEGREE]
        for k in range(DEGREE - 1, -1, -1):
            upper = upper * s + table_upper[row, k]
            lower = lower * s + table_lower[row, k]
        start_upper[j] = upper if inside else math.nan
        start_lower[j] = lower if inside else math.nan


_FAST_SIG = types.UniTuple(types.int64, 2)(
    InVec, types.float64, types.float64, types.float64, types.float64,
    types.Array(types.float64, 2, "C", readonly=True),
    types.Array(types.float64, 2, "C", readonly=True),
    OutVec, OutVec, types.int8[::1],
)


@template(_FAST_SIG, parallel=True, calls=(gather_block, polish_block), contract=True)
def band_fast(x, delta, theta, g_rel_error, lower_at_one, table_upper, table_lower,
              lower, upper, status):
    """Bounds of every element of ``x`` (p, or log p where ``FROM_LOGP``) for
    one delta; status[i] = STATUS_UNCERTIFIED where element i needs the root
    finder, else STATUS_OK. Returns (flagged, outside): the number of flagged
    elements, and of those outside the domain (``polish_block``).

    (The blocks' loop moved into a function of its own, called once per
    chunk, compiled no faster: numba's parallel lowering costs about 1 s of
    a first call whatever the body, and typed that function twice.)
    """
    n = x.size
    flagged = 0
    outside = 0
    for chunk in prange((n + CHUNK - 1) // CHUNK):
        start_upper = np.empty(BLOCK)
        start_lower = np.empty(BLOCK)
        chunk_end = min(n, (chunk + 1) * CHUNK)
        for first in range(chunk * CHUNK, chunk_end, BLOCK):
            last = min(first + BLOCK, chunk_end)
            gather_block(x[first:last], table_upper, table_lower,
                         start_upper[:last - first], start_lower[:last - first])
            block_flagged, block_outside = polish_block(
                x[first:last], delta, theta, g_rel_error, lower_at_one,
                start_upper[:last - first], start_lower[:last - first],
                lower[first:last], upper[first:last], status[first:last])
            flagged += block_flagged
            outside += block_outside
    return flagged, outside


@dataclasses.dataclass(frozen=True, eq=False)
class FastTables:
    """What the fast path needs for one divergence and one delta: the start
    tables (read-only, saturation marked in them) and the lower bound at
    p = 1 (``Kernels.fast_tables``)."""

    delta: float
    upper: np.ndarray
    lower: np.ndarray
    lower_at_one: float


def node_logits():
    """z = logit p of every table node, in table order (rows, then nodes):
    the nodes of t = min(p, 1 - p), binade by binade and piece by piece,
    for p = t (side 0) and then for p = 1 - t (side 1, where z = -logit t)."""
    exponents = np.arange(LOWEST_EXPONENT, 0)
    pieces = np.arange(PIECES, dtype=np.float64)
    mantissa = 1.0 + (pieces[:, None] + 0.5 * (NODE_S[None, :] + 1.0)) / PIECES
    t = np.ldexp(mantissa[None, :, :], exponents[:, None, None]).reshape(-1)
    z = np.log(t) - np.log1p(-t)
    return np.concatenate([z, -z])


def _row_logits():
    """(z at one end, z at the other) of every row's range of t, in table
    order: a row spans t from 2^e (1 + k/32) to 2^e (1 + (k + 1)/32), and z
    is logit t on side 0, logit(1 - t) = -logit t on side 1."""
    exponents = np.arange(LOWEST_EXPONENT, 0)
    pieces = np.arange(PIECES + 1, dtype=np.float64)
    ends = np.ldexp(1.0 + pieces / PIECES, exponents[:, None])  # binade x piece edge
    with np.errstate(divide="ignore"):  # t = 1 ends the last binade: z = inf
        z = np.log(ends) - np.log1p(-ends)
    first, last = z[:, :-1].reshape(-1), z[:, 1:].reshape(-1)
    return np.concatenate([first, -first]), np.concatenate([last, -last])


def mirrored_unknown(x):
    """v = -log u2 = log(1 + e^x) for the root finder's x = logit(m / b),
    the polish's start (NaN stays NaN)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _mark_saturation(table, threshold: float, upper: bool) -> None:
    """Rows wholly past the threshold (by more than THRESHOLD_MARGIN in
    logit p) start at +inf, the saturated bound; rows within the margin of
    it start at NaN (flagged). The upper bound saturates above its
    threshold, the lower below; an infinite threshold means never (+inf for
    the upper bound, -inf for the lower) or everywhere (the other)."""
    if threshold == (math.inf if upper else -math.inf):
        return
    ends = _row_logits()
    low, high = np.minimum(*ends), np.maximum(*ends)
    if upper:
        past = low > threshold + THRESHOLD_MARGIN
        near = ~past & (high >= threshold - THRESHOLD_MARGIN)
    else:
        past = high < threshold - THRESHOLD_MARGIN
        near = ~past & (low <= threshold + THRESHOLD_MARGIN)
    table[past] = 0.0
    table[past, 0] = math.inf
    table[near] = math.nan


def tables_from(delta: float, x_upper, x_lower, thresholds, lower_at_one: float) -> FastTables:
    """The tables of v = :func:`mirrored_unknown` from the root finder's x at
    ``node_logits()``, with the saturation of each bound marked in them from
    its threshold (upper, lower) in logit p."""
    tables = [table_from_nodes(mirrored_unknown(x)) for x in (x_upper, x_lower)]
    for table, threshold, upper in zip(tables, thresholds, (True, False)):
        _mark_saturation(table, threshold, upper)
        table.setflags(write=False)
    return FastTables(float(delta), tables[0], tables[1], float(lower_at_one))
