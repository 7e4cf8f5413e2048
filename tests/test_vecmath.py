"""The vectorisable exp, expm1, log and log1p against mpmath, in ulp.

The reference is mpmath at 50 digits, rounded once to float64; the error is
counted in ulp of that rounded value (the spacing at the exact result), over
log-spaced and random-bit-pattern arguments across each function's whole
domain, subnormals, signed zeros, infinities, NaN and the overflow and
underflow edges.
"""

import math
import re

import mpmath as mp
import numba
import numpy as np
import pytest

from bandsolve._kernels import _vecmath as vm

SUBNORMAL = 5e-324


def _loop(fn):
    @numba.njit(fastmath={"contract"}, error_model="numpy")
    def apply(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = fn(x[i])
        return out
    return apply


@numba.njit(fastmath={"contract"}, error_model="numpy", forceinline=True)
def _log(u):
    """log u by vlog_exact, x = u - 1 as rounded (its correction is then 0)."""
    return vm.vlog_exact(u, u - 1.0)


@numba.njit(fastmath={"contract"}, error_model="numpy", forceinline=True)
def _log1p(x):
    """log(1 + x) by vlog_exact, u = 1 + x as rounded and x exact."""
    return vm.vlog_exact(1.0 + x, x)


EXACT = {
    "vexp": mp.exp,
    "vexpm1": mp.expm1,
    "log": mp.log,
    "log1p": mp.log1p,
}
APPLY = {"vexp": _loop(vm.vexp), "vexpm1": _loop(vm.vexpm1), "log": _loop(_log),
         "log1p": _loop(_log1p)}


def _ulp_errors(name, x):
    got = APPLY[name](np.ascontiguousarray(x, dtype=np.float64))
    errors = np.empty(x.size)
    with mp.workdps(50):
        for i, (xi, gi) in enumerate(zip(x, got)):
            exact = EXACT[name](mp.mpf(float(xi)))
            rounded = float(exact)
            if math.isinf(rounded) or rounded == 0.0:
                errors[i] = 0.0 if gi == rounded else math.inf
                continue
            ulp = max(math.ulp(abs(rounded)), SUBNORMAL)
            errors[i] = float(abs(mp.mpf(float(gi)) - exact) / ulp)
    return errors


def _random_bits(rng, n, low, high):
    """Floats whose bit patterns are uniform in [bits(low), bits(high)] (low, high >= 0)."""
    lo, hi = np.array([low, high]).view(np.int64)
    return rng.integers(lo, hi, n, endpoint=True).view(np.float64)


def _arguments(name):
    rng = np.random.default_rng(20)
    if name in ("vexp", "vexpm1"):
        magnitudes = np.concatenate([np.geomspace(1e-320, 800.0, 1500),
                                     _random_bits(rng, 1500, 0.0, 750.0)])
        edges = [709.782712893384, 709.7827128933841, 709.78, 709.43, 709.44, -708.39,
                 -708.4, -744.44, -745.1332191019411, -745.1332191019412, -745.2, 36.7,
                 37.5, -36.7, -37.5, 0.34657359027997264, 0.6931471805599453, 1e-18]
        return np.concatenate([magnitudes, -magnitudes, edges])
    if name == "log":
        return np.concatenate([np.geomspace(SUBNORMAL, 1e308, 2000),
                               _random_bits(rng, 2000, SUBNORMAL, 1.7976931348623157e308),
                               1.0 + np.linspace(-0.3, 0.42, 400),
                               [1.0, 2.0, 0.5, 0.7071067811865476, 1.4142135623730951,
                                2.2250738585072014e-308, 2.225073858507201e-308,
                                1.7976931348623157e308]])
    # log1p on (-1, inf)
    positive = np.concatenate([np.geomspace(SUBNORMAL, 1e308, 1500),
                               _random_bits(rng, 1500, 0.0, 1.7976931348623157e308)])
    negative = -np.concatenate([np.geomspace(SUBNORMAL, 1.0 - 2**-53, 1500),
                                _random_bits(rng, 1500, 0.0, 1.0 - 2**-53)])
    return np.concatenate([positive, negative,
                           np.linspace(-0.5, 0.5, 401), [-0.2928932188134524, 0.41421356237309515]])


@pytest.mark.parametrize("name", sorted(EXACT))
def test_ulp_error_over_the_whole_domain(name):
    x = _arguments(name)
    errors = _ulp_errors(name, x)
    worst = int(np.argmax(errors))
    assert errors[worst] <= vm.ULP_BOUND, (name, float(x[worst]), errors[worst])


SPECIAL = {
    "vexp": [(math.inf, math.inf), (-math.inf, 0.0), (0.0, 1.0), (-0.0, 1.0),
             (710.0, math.inf), (1e308, math.inf), (-746.0, 0.0), (-1e308, 0.0)],
    "vexpm1": [(math.inf, math.inf), (-math.inf, -1.0), (0.0, 0.0), (710.0, math.inf),
               (-50.0, -1.0), (-1e308, -1.0)],
    "log": [(math.inf, math.inf), (0.0, -math.inf), (-0.0, -math.inf), (1.0, 0.0),
             (-1.0, math.nan), (-math.inf, math.nan), (-SUBNORMAL, math.nan)],
    "log1p": [(math.inf, math.inf), (-1.0, -math.inf), (0.0, 0.0), (-2.0, math.nan),
               (-math.inf, math.nan), (-1.0000000000000002, math.nan)],
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_special_values(name):
    x = np.array([arg for arg, _ in SPECIAL[name]] + [math.nan])
    expected = [value for _, value in SPECIAL[name]] + [math.nan]
    got = APPLY[name](x)
    for arg, want, have in zip(x, expected, got):
        if math.isnan(want):
            assert math.isnan(have), (name, arg, have)
        else:
            assert have == want, (name, arg, have)


def test_negative_zero_keeps_its_sign():
    assert math.copysign(1.0, APPLY["vexpm1"](np.array([-0.0]))[0]) == -1.0


def test_subnormal_results_round_once():
    # exp into the subnormal range: within one ulp (5e-324) of the exact value
    x = np.linspace(-745.0, -708.5, 2001)
    assert np.max(_ulp_errors("vexp", x)) <= 1.0


#: a call instruction into libm's exp, log and friends, or to one of the
#: vectorised helpers by its (mangled) name
CALL_OF_MATH = re.compile(r"\tcall[q]?\t\S*(log1p|expm1|log|exp|vlog|vexp)", re.IGNORECASE)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_loops_calling_them_vectorise(name):
    """The point of the module: a loop over one of them compiles to SIMD code
    with no call into libm."""
    apply = APPLY[name]
    apply(np.ones(4))
    asm = "\n".join(apply.inspect_asm().values())
    assert "pd\t%ymm" in asm or "pd\t%zmm" in asm or "pd\t%xmm" in asm
    # no call into libm, nor to the helpers themselves (which LLVM inlines):
    # their definitions, which carry the names, stay in the module
    assert not CALL_OF_MATH.search(asm)


@numba.njit(fastmath={"contract"}, error_model="numpy")
def _pairs(u, x):
    log_u = np.empty_like(u)
    log_minus_x = np.empty_like(u)
    for i in range(u.size):
        log_u[i], log_minus_x[i] = vm.vlog_pair(u[i], x[i])
    return log_u, log_minus_x


def test_log_pair_keeps_log1pmx_exact_near_one():
    """vlog_pair's log(1 + x) - x has no series select: near u = 1 it is
    formed from fdlibm's reduction with x subtracted inside the sum. Checked
    against mpmath with x taken exactly (u = fl(1 + x) rounded) and with u
    exact (x = u - 1), from x = 1e-300 to u = 1e300, in relative error."""
    rng = np.random.default_rng(11)
    x_small = np.concatenate([
        np.exp(rng.uniform(np.log(1e-300), np.log(0.9), 3000)),
        -np.exp(rng.uniform(np.log(1e-300), np.log(0.999999), 3000)),
        [0.25, -0.25, 0.2928932, 0.4142135, 0.45, -0.2929]])
    u_far = np.exp(rng.uniform(np.log(1e-300), np.log(1e300), 3000))
    cases = [(1.0 + x_small, x_small, True), (u_far, u_far - 1.0, False)]
    # 700 digits: log(1 + x) - x = -x^2/2 at x = 1e-300 needs them
    with mp.workdps(700):
        for u, x, x_exact in cases:
            log_u, log_minus_x = _pairs(u, x)
            for ui, xi, lu, lm in zip(u, x, log_u, log_minus_x):
                step = mp.mpf(float(xi)) if x_exact else mp.mpf(float(ui)) - 1
                exact_log = mp.log1p(step)
                exact = exact_log - step
                # (plus a subnormal: -x^2/2 underflows below x = 1e-162)
                assert abs(lm - exact) <= 8 * 2.2e-16 * abs(exact) + 1e-320, (ui, xi, lm)
                assert abs(lu - exact_log) <= 4 * 2.2e-16 * abs(exact_log) + 1e-300, (ui, xi)


def test_log_pair_edges():
    u = np.array([0.0, math.inf, -1.0, 5e-324, 1.0])
    x = np.array([-1.0, math.inf, -2.0, -1.0, 0.0])
    log_u, log_minus_x = _pairs(u, x)
    assert log_u[0] == -math.inf and log_minus_x[0] == -math.inf
    assert log_u[1] == math.inf
    assert math.isnan(log_u[2])
    assert log_u[3] == math.log(5e-324)
    assert log_u[4] == 0.0 and log_minus_x[4] == 0.0


def test_vexp_is_within_one_ulp():
    """The fast path's simplex cap from log p (``_fast._cap_from_logp``) steps
    vexp(-log p) two ulp down to lie below e^(-log p): that needs vexp within
    one ulp, tighter than the shared ULP_BOUND."""
    rng = np.random.default_rng(7)
    x = np.concatenate([_arguments("vexp"), -np.exp(rng.uniform(-700, 6.5, 4000)),
                        rng.uniform(0.0, 709.0, 4000)])
    errors = _ulp_errors("vexp", x)
    assert np.max(errors) < 1.0, float(x[int(np.argmax(errors))])


@numba.njit(fastmath={"contract"}, error_model="numpy")
def _exp_parts(y):
    out = np.empty((3, y.size))
    for i in range(y.size):
        out[0, i], out[1, i], out[2, i] = vm.vexp_parts(y[i])
    return out


def test_exp_parts_against_mpmath():
    """vexp_parts, which the fast path's polish evaluates f at u2 = e^-v
    with: e^y and e^y - 1 within ULP_BOUND ulp, and e^y - 1 - y within
    8 eps relative (its select at |y| = ln2/2 cancels by a factor 6), from
    y = -800 to 700, with the edges of the select and of underflow."""
    rng = np.random.default_rng(5)
    magnitudes = np.concatenate([np.geomspace(1e-300, 745.0, 1500), rng.uniform(0.0, 2.0, 1000),
                                 [0.34657359027997264, 0.3465735902799727, 0.5, 0.75, 50.0]])
    y = np.concatenate([-magnitudes, magnitudes[magnitudes < 700.0], [-800.0, 0.0]])
    exp_y, expm1_y, expm1mx_y = _exp_parts(y)
    # 650 digits: e^y - 1 - y = y^2/2 at y = 1e-300 needs them
    with mp.workdps(650):
        for yi, e, em1, emx in zip(y, exp_y, expm1_y, expm1mx_y):
            exact = mp.exp(mp.mpf(float(yi)))
            for got, want in ((e, exact), (em1, exact - 1)):
                if float(want) == 0.0 or math.isinf(float(want)):
                    assert got == float(want), (yi, got)
                    continue
                ulp = max(math.ulp(abs(float(want))), SUBNORMAL)
                assert abs(mp.mpf(float(got)) - want) <= vm.ULP_BOUND * ulp, (yi, got)
            want = exact - 1 - mp.mpf(float(yi))
            assert abs(mp.mpf(float(emx)) - want) <= 8 * 2.0**-52 * abs(want) + 1e-320, (yi, emx)
