"""bandsolve.torch.band / band_from_logp / BandTable against the float64 numpy
core (itself checked against mpmath) and a few mpmath points directly."""

import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import reference  # noqa: E402
from problems import ALL_DIVERGENCES  # noqa: E402

import bandsolve as bs  # noqa: E402
import bandsolve.torch as bt  # noqa: E402
from bandsolve.divergences import BUILTIN_DIVERGENCES  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)
EPS64 = float(np.finfo(np.float64).eps)
# The stated accuracy of the torch path (bandsolve.torch.band_from_logp) in
# float32; float64 on the CPU is the numpy core itself (the float64 tables are
# held to their certificate: _assert_within_certificate).
TOLERANCE = {torch.float32: (1e-5, 16 * EPS32), torch.float64: (1e-10, 64 * EPS64)}
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _logp_cases(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([
        -np.geomspace(1e-30, 80.0, 1500), -rng.exponential(4.0, 1500),
        [0.0, -np.inf, -np.log(2.0), -1e-45, -1e-7, -80.0]])


def _assert_within(got, ref, dtype, what):
    rtol, atol = TOLERANCE[dtype]
    got = got.double().cpu().numpy()
    representable = np.isfinite(ref) & (ref < FLOAT32_MAX) if dtype != torch.float64 \
        else np.isfinite(ref)
    # non-finite references (p = 0: inf) must come out exactly
    assert np.all(got[~np.isfinite(ref)] == ref[~np.isfinite(ref)]), what
    r, g = ref[representable], got[representable]
    tol = np.maximum(rtol * np.minimum(r, np.abs(r - 1.0)), atol * np.maximum(r, 1.0))
    ratio = np.abs(g - r) / tol
    worst = int(np.argmax(ratio)) if ratio.size else 0
    assert ratio.size == 0 or ratio[worst] <= 1.0, (
        f"{what}: error {ratio[worst]:.3g} x tolerance at r = {r[worst]!r} (got {g[worst]!r})")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("divergence", ALL_DIVERGENCES)
@pytest.mark.parametrize("delta", [1e-3, 0.05, 1.0])
def test_band_from_logp_matches_the_numpy_core(divergence, delta, dtype):
    logp = torch.tensor(_logp_cases(), dtype=dtype)
    lower, upper = bt.band_from_logp(logp, delta, divergence)
    ref_lower, ref_upper = bs.band_from_logp(logp.double().numpy(), delta, divergence)
    _assert_within(lower, ref_lower, dtype, f"{divergence} lower")
    _assert_within(upper, ref_upper, dtype, f"{divergence} upper")


def _assert_within_certificate(data, got, ref, what):
    """The float64 table claim (bandsolve.table, "Accuracy of a float64 table"):
    the table's certificate of the root finder plus 8 eps max(r, 1)."""
    got = got.cpu().numpy()
    finite = np.isfinite(ref)
    assert np.array_equal(got[~finite], ref[~finite]), what
    r, g = ref[finite], got[finite]
    tol = np.maximum(data.rtol * np.minimum(r, np.abs(r - 1.0)),
                     data.atol * np.maximum(r, 1.0)) + 8 * EPS64 * np.maximum(r, 1.0)
    ratio = np.abs(g - r) / tol
    worst = int(np.argmax(ratio))
    assert ratio[worst] <= 1.0, (
        f"{what}: error {ratio[worst]:.3g} x the claim at r = {r[worst]!r} (got {g[worst]!r})")


def _table_logp(data, seed):
    """_logp_cases, random z out to the certified tails, and both thresholds'
    neighbourhoods from 1e-14 to 10 in z."""
    rng = np.random.default_rng(seed)
    z = [rng.uniform(-40, 40, 4000), -np.exp(rng.uniform(0, np.log(690), 1000)),
         np.exp(rng.uniform(0, np.log(690), 1000))]
    for threshold in (data.upper.threshold, data.lower.threshold):
        if math.isfinite(threshold):
            offset = 10.0 ** rng.uniform(-14, 1, 1000)
            z += [threshold + offset, threshold - offset]
    return np.concatenate([_logp_cases(seed), -np.logaddexp(0.0, -np.concatenate(z)),
                           -(10.0 ** rng.uniform(-300, -1, 500))])


def test_regression_kl_delta_1e_6_table_lower_bound_within_certificate():
    """At kl, delta = 1e-6, log p = -16.2 the float64 table's lower bound is
    6.6e-14 from the numpy core's: 4.7x the README's old claim
    max(1e-10 min(r, |r-1|), 64 eps max(r, 1)), 0.066 of the certificate."""
    table = bt.BandTable.build("kl", 1e-6)
    lower, upper = table(torch.tensor([-16.2], dtype=torch.float64))
    ref_lower, ref_upper = bs.band_from_logp(np.array([-16.2]), 1e-6, "kl")
    _assert_within_certificate(table.data, lower, ref_lower, "lower")
    _assert_within_certificate(table.data, upper, ref_upper, "upper")


@pytest.mark.parametrize("divergence", ALL_DIVERGENCES)
@pytest.mark.parametrize("delta", [1e-3, 0.05, 1.0])
def test_float64_tables_are_within_their_certificate(divergence, delta):
    """The table path in float64 (what a GPU runs; on the CPU band_from_logp
    uses the numpy core itself). Across delta from 1e-6 to 10, and in float32:
    tests/test_table_integrity.py."""
    table = bt.BandTable.build(divergence, delta)
    logp = _table_logp(table.data, int(delta * 1e3))
    lower, upper = table(torch.tensor(logp, dtype=torch.float64))
    ref_lower, ref_upper = bs.band_from_logp(logp, delta, divergence)
    _assert_within_certificate(table.data, lower, ref_lower, f"{divergence} lower")
    _assert_within_certificate(table.data, upper, ref_upper, f"{divergence} upper")


def _assert_float32_rounding_of(got, ref, upper, what):
    """got is ref (float64) rounded to float32 as the CPU path promises: to
    nearest, and for an upper bound one step down where nearest is above ref
    and finite. Where ref lies within 1e-11 of a float32 value or of a
    midpoint between two (the core's paths may differ by that much), either
    neighbour of ref is accepted, and for an upper bound the one below them."""
    got = got.numpy().astype(np.float64)
    with np.errstate(over="ignore"):
        nearest = ref.astype(np.float32)
        below = np.where(nearest > ref, np.nextafter(nearest, np.float32(-np.inf)), nearest)
    above = np.nextafter(below, np.float32(np.inf))
    expected = nearest
    if upper:
        expected = np.where((nearest > ref) & np.isfinite(nearest), below, nearest)
    close = 1e-11 * np.abs(ref)
    with np.errstate(all="ignore"):  # inf - inf where ref is past float32's range
        ambiguous = np.isfinite(ref) & (
            (np.abs(ref - below) <= close) | (np.abs(above - ref) <= close)
            | (np.abs(ref - (below.astype(np.float64) + above) / 2) <= close))
    plain = ~ambiguous
    np.testing.assert_array_equal(got[plain], expected[plain].astype(np.float64), what)
    allowed = [below, above] + ([np.nextafter(below, np.float32(0.0))] if upper else [])
    assert np.all(np.any([got[ambiguous] == a[ambiguous] for a in allowed], axis=0)), what


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("divergence", ["kl", "tv", "js", "alpha:2"])
def test_float32_on_the_cpu_is_the_numpy_core_rounded(divergence, dtype):
    """Issue 41: float32 and half CPU tensors are the float64 numpy core at
    their values, rounded to float32: the lower bound to nearest, the upper
    bound to nearest unless that exceeds the float64 bound (then one float32
    step down, so that upper <= 1/p holds; beyond float32's range, inf)."""
    x = torch.tensor(_logp_cases(2), dtype=torch.float32).to(dtype)
    ref_lower, ref_upper = bs.band_from_logp(x.double().numpy(), 0.05, divergence)
    lower, upper = bt.band_from_logp(x, 0.05, divergence)
    assert lower.dtype == upper.dtype == torch.float32
    _assert_float32_rounding_of(lower, ref_lower, False, "lower")
    _assert_float32_rounding_of(upper, ref_upper, True, "upper")
    p = torch.tensor(np.exp(_logp_cases(3)), dtype=torch.float32).to(dtype)
    ref_lower, ref_upper = bs.band(p.double().numpy(), 0.05, divergence)
    lower, upper = bt.band(p, 0.05, divergence)
    _assert_float32_rounding_of(lower, ref_lower, False, "lower from p")
    _assert_float32_rounding_of(upper, ref_upper, True, "upper from p")


def test_float64_on_the_cpu_is_the_numpy_core():
    logp = torch.tensor(_logp_cases(), dtype=torch.float64)
    for fn, x, np_fn in ((bt.band_from_logp, logp, bs.band_from_logp),
                         (bt.band, logp.exp(), bs.band)):
        lower, upper = fn(x, 0.05, "js", max_ratio=10.0)
        ref_lower, ref_upper = np_fn(x.numpy(), 0.05, "js", max_ratio=10.0)
        assert np.array_equal(lower.numpy(), ref_lower)
        assert np.array_equal(upper.numpy(), ref_upper)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("divergence", ["kl", "tv", "chi2", "hellinger", "alpha:2"])
def test_band_from_p_matches_the_numpy_core(divergence, dtype):
    rng = np.random.default_rng(1)
    p = np.concatenate([[0.0, 1.0, 0.5, 1e-30, 1 - 1e-7], rng.uniform(0, 1, 2000),
                        np.exp(-rng.exponential(6.0, 2000))])
    x = torch.tensor(p, dtype=dtype)
    lower, upper = bt.band(x, 0.05, divergence, max_ratio=10.0)
    ref_lower, ref_upper = bs.band(x.double().numpy(), 0.05, divergence, max_ratio=10.0)
    _assert_within(lower, ref_lower, dtype, "lower")
    _assert_within(upper, ref_upper, dtype, "upper")


@pytest.mark.parametrize("divergence", ["kl", "tv", "chi2", "hellinger", "js", "rkl"])
def test_saturation_thresholds_are_exact(divergence):
    """At and just around each threshold, inside the table's finest octaves."""
    from bandsolve import table

    data = table.build(divergence, 0.05)
    for threshold in (data.upper.threshold, data.lower.threshold):
        if not math.isfinite(threshold):
            continue
        z = threshold + np.array([-1e-3, -1e-9, 0.0, 1e-9, 1e-3])
        logp = -np.logaddexp(0.0, -z)
        lower, upper = bt.band_from_logp(torch.tensor(logp), 0.05, divergence)
        ref_lower, ref_upper = bs.band_from_logp(logp, 0.05, divergence)
        _assert_within(lower, ref_lower, torch.float64, "lower")
        _assert_within(upper, ref_upper, torch.float64, "upper")


@pytest.mark.parametrize("divergence, logp, delta", [
    ("kl", -2.5257286443082556, 0.05),  # the paper's p = 0.08
    ("kl", -30.0, 0.05), ("kl", -1e-9, 1e-3), ("tv", -0.5, 0.1), ("chi2", -12.0, 0.05),
    ("hellinger", -3.0, 1.0), ("js", -0.01, 0.05), ("alpha:0.5", -7.0, 0.2),
])
def test_against_mpmath(divergence, logp, delta):
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor([logp], dtype=dtype)
        lower, upper = bt.band_from_logp(x, delta, divergence)
        exact_input = float(x.double())
        for got, side in ((lower, "lower"), (upper, "upper")):
            ref, _ = reference.bound(divergence, exact_input, delta, side, from_logp=True)
            _assert_within(got, np.array([float(ref)]), dtype, f"{side} vs mpmath")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_input_computes_in_float32(dtype):
    logp = torch.tensor(_logp_cases()[:1500], dtype=dtype)
    lower, upper = bt.band_from_logp(logp, 0.05, "kl")
    assert lower.dtype == upper.dtype == torch.float32
    ref_lower, ref_upper = bs.band_from_logp(logp.double().numpy(), 0.05, "kl")
    _assert_within(lower, ref_lower, torch.float32, "lower")
    _assert_within(upper, ref_upper, torch.float32, "upper")


def test_shape_device_dtype_and_no_gradient():
    logp = torch.log(torch.rand(3, 4, 5, dtype=torch.float64)).requires_grad_()
    lower, upper = bt.band_from_logp(logp, 0.05, max_ratio=10.0)
    assert lower.shape == upper.shape == logp.shape
    assert lower.dtype == torch.float64 and lower.device == logp.device
    assert not lower.requires_grad and not upper.requires_grad
    assert torch.all(upper <= 10.0) and torch.all(lower >= 0) and torch.all(lower <= 1)


def test_empty_input_gives_empty_output():
    for fn in (bt.band, bt.band_from_logp):
        lower, upper = fn(torch.empty(0, 3), 0.05)
        assert lower.shape == upper.shape == (0, 3)


def test_edges_match_the_numpy_api():
    lower, upper = bt.band(torch.tensor([0.0, 1.0], dtype=torch.float64), 0.05, "kl",
                           max_ratio=10.0)
    ref_lower, ref_upper = bs.band([0.0, 1.0], 0.05, "kl", max_ratio=10.0)
    assert lower.tolist() == ref_lower.tolist() and upper.tolist() == ref_upper.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("values, fn, match", [
    ([-0.1, float("nan")], bt.band_from_logp, "contains NaN"),
    ([-0.1, float("inf")], bt.band_from_logp, r"contains \+inf"),
    ([-0.1, 0.5], bt.band_from_logp, "must be <= 0"),
    ([0.5, 1.5], bt.band, r"must lie in \[0, 1\]"),
    ([-0.5, 0.5], bt.band, r"must lie in \[0, 1\]"),
    ([float("nan")], bt.band, "NaN"),
])
def test_invalid_values_raise(values, fn, match, dtype):
    with pytest.raises(ValueError, match=match):
        fn(torch.tensor(values, dtype=dtype), 0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_invalid_values_without_validation_give_nan_not_numbers(dtype):
    logp = torch.tensor([float("nan"), float("inf"), 0.5, -0.5], dtype=dtype)
    lower, upper = bt.band_from_logp(logp, 0.05, validate=False)
    assert torch.isnan(lower[:3]).all() and torch.isnan(upper[:3]).all()
    assert torch.isfinite(lower[3]) and torch.isfinite(upper[3])
    lower, upper = bt.band(torch.tensor([-0.5, 1.5, float("nan")], dtype=dtype), 0.05,
                           validate=False)
    assert torch.isnan(lower).all() and torch.isnan(upper).all()


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(delta=0.0), ValueError, "positive"),
    (dict(delta=float("nan")), ValueError, "NaN"),
    (dict(delta=[0.1, 0.2]), ValueError, "one delta"),
    (dict(delta=0.05, divergence="nope"), ValueError, "unknown divergence"),
    (dict(delta=0.05, divergence=3), TypeError, "divergence"),
    (dict(delta=0.05, max_ratio=0.5), ValueError, "max_ratio"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        bt.band_from_logp(torch.tensor([-1.0]), **kwargs)


@pytest.mark.parametrize("x", [torch.tensor([1, 2]), torch.tensor([True]),
                               torch.tensor([1j]), np.array([-0.5])])
def test_non_float_input_is_a_type_error(x):
    with pytest.raises(TypeError):
        bt.band_from_logp(x, 0.05)


def test_table_on_another_device_is_an_error():
    table = bt.BandTable.build("kl", 0.05)
    with pytest.raises(ValueError, match="table.to"):
        table(torch.empty(3, device="meta"))


def test_user_defined_divergence_works_eagerly():
    # rkl + chi2: convex, with f(0) finite, so both thresholds exist
    div = bs.Divergence.from_generator(
        "rkl_plus_chi2", lambda u: (u * math.log(u) if u > 0 else 0.0) + (u - 1.0) ** 2)
    logp = torch.log(torch.tensor([1e-4, 0.08, 0.5, 0.9], dtype=torch.float64))
    lower, upper = bt.band_from_logp(logp, 0.05, div)
    ref_lower, ref_upper = bs.band_from_logp(logp.numpy(), 0.05, div)
    _assert_within(lower, ref_lower, torch.float64, "lower")
    _assert_within(upper, ref_upper, torch.float64, "upper")


def test_compiles_with_fullgraph_and_matches_eager():
    table = bt.BandTable.build("kl", 0.05, max_ratio=10.0)
    logp = -torch.rand(4096) * 30.0

    @torch.compile(fullgraph=True)
    def step(x):
        lower, upper = table(x, validate=False)
        via_function = bt.band_from_logp(x, 0.05, "kl", max_ratio=10.0, validate=False)
        return lower, upper, via_function[1]

    lower, upper, upper_fn = step(logp)
    ref_lower, ref_upper = table(logp)
    rtol, atol = TOLERANCE[torch.float32]
    torch.testing.assert_close(lower, ref_lower, rtol=rtol, atol=atol)
    torch.testing.assert_close(upper, ref_upper, rtol=rtol, atol=atol)
    # on the CPU the function is the numpy core, compiled or not
    eager_upper = bt.band_from_logp(logp, 0.05, "kl", max_ratio=10.0)[1]
    torch.testing.assert_close(upper_fn, eager_upper, rtol=0.0, atol=0.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu_and_captures_in_a_cuda_graph():
    table = bt.BandTable.build("kl", 0.05, max_ratio=10.0, device="cuda")
    logp = -torch.rand(1 << 16, device="cuda") * 30.0
    # eager calls run op by op, as a capture does: its replay gives their bits
    lower, upper = table(logp, validate=False)
    ref_lower, ref_upper = bs.band_from_logp(logp.double().cpu().numpy(), 0.05, "kl",
                                             max_ratio=10.0)
    _assert_within(lower, ref_lower, torch.float32, "lower")
    _assert_within(upper, ref_upper, torch.float32, "upper")
    graph = torch.cuda.CUDAGraph()
    static_in = logp.clone()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        static_lower, static_upper = table(static_in, validate=False)
    static_in.copy_(logp.flip(0))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_upper, upper.flip(0), rtol=0.0, atol=0.0)


# --- asynchronous validation (issue 10.5) ----------------------------------------------
_ASYNC_PATHS = [
    ("band_from_logp", lambda x, v: bt.band_from_logp(x, 0.05, validate=v), True),
    ("band", lambda x, v: bt.band(x, 0.05, validate=v), False),
    ("BandTable", lambda x, v: bt.BandTable.build("kl", 0.05)(x, validate=v), True),
    ("BandTable.from_p", lambda x, v: bt.BandTable.build("kl", 0.05).from_p(x, validate=v),
     False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name, call, from_logp", _ASYNC_PATHS, ids=[p[0] for p in _ASYNC_PATHS])
def test_async_validation_asserts_on_the_device_with_a_clear_message(name, call, from_logp,
                                                                     dtype):
    bad = torch.tensor([-0.1, 0.3] if from_logp else [0.5, 1.5], dtype=dtype)
    # on the CPU, torch._assert_async raises at once; on CUDA at the next synchronisation
    with pytest.raises(RuntimeError, match="bandsolve: .* validate='sync' to raise ValueError"):
        call(bad, "async")
    with pytest.raises(ValueError, match="1 of 2 elements are invalid"):
        call(bad, "sync")


@pytest.mark.parametrize("name, call, from_logp", _ASYNC_PATHS, ids=[p[0] for p in _ASYNC_PATHS])
def test_async_validation_never_reads_back_from_the_device(name, call, from_logp,
                                                          monkeypatch):
    """"async" must not turn a tensor into a Python value: that is the host
    synchronisation it exists to avoid. "sync" does, which shows the probe works."""
    good = torch.tensor([-2.0, -0.1, 0.0] if from_logp else [0.1, 0.5, 1.0])
    expected = call(good, False)
    call(good, "sync")  # build and cache the table outside the probe

    def no_read_back(self, *args):
        raise AssertionError("a host read back")

    for method in ("__bool__", "item", "tolist", "__float__", "__int__"):
        monkeypatch.setattr(torch.Tensor, method, no_read_back)
    lower, upper = call(good, "async")
    with pytest.raises(AssertionError, match="host read back"):
        call(good, "sync")
    monkeypatch.undo()
    torch.testing.assert_close(lower, expected[0], rtol=0.0, atol=0.0)
    torch.testing.assert_close(upper, expected[1], rtol=0.0, atol=0.0)


def test_validate_true_is_sync_on_the_cpu():
    with pytest.raises(ValueError, match="contains NaN"):
        bt.band_from_logp(torch.tensor([float("nan")]), 0.05, validate=True)
    with pytest.raises(ValueError, match="contains NaN"):
        bt.band_from_logp(torch.tensor([float("nan")]), 0.05, validate=np.True_)


@pytest.mark.parametrize("validate", ["yes", "Sync", 1, None, 0.0])
def test_validate_takes_only_its_documented_values(validate):
    with pytest.raises(ValueError, match="validate must be True, False, 'sync' or 'async'"):
        bt.band_from_logp(torch.tensor([-1.0]), 0.05, validate=validate)


def test_async_validation_traces_under_fullgraph_compile():
    table = bt.BandTable.build("kl", 0.05, max_ratio=10.0)
    step = torch.compile(lambda x: table(x, validate="async"), fullgraph=True)
    logp = -torch.rand(256) * 10.0
    torch.testing.assert_close(step(logp)[1], table(logp, validate=False)[1])
    with pytest.raises(RuntimeError):
        step(torch.full((256,), float("nan")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_default_validation_does_not_synchronise():
    logp = -torch.rand(1 << 16, device="cuda") * 30.0
    bt.band_from_logp(logp, 0.05)  # build the device table
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        bt.band_from_logp(logp, 0.05)  # validate=True: async on CUDA
    finally:
        torch.cuda.set_sync_debug_mode("default")


#: the built-ins whose lower bound only approaches 0 (f(0) = inf), the closed
#: forms, and alpha below 0
_P_ZERO_CASES = [*(name for name, div in BUILTIN_DIVERGENCES.items()
                   if math.isinf(div.f_at_zero) or div.has_closed_form), "alpha:-1", "alpha:-3"]


@pytest.mark.parametrize("divergence", _P_ZERO_CASES)
def test_table_gives_exactly_the_numpy_bounds_at_p_zero(divergence):
    """p = 0 (log p = -inf) is a limit the table's grid only approaches; the
    numpy API returns (0, inf) there, and so must every table path (float32
    eager, and a float64 BandTable as used off the CPU)."""
    table = bt.BandTable.build(divergence, 0.05)
    for dtype in (torch.float32, torch.float64):
        logp = torch.tensor([-math.inf, 0.0], dtype=dtype)
        for lower, upper in (table(logp), table.from_p(logp.exp()),
                             bt.band_from_logp(logp.float(), 0.05, divergence)):
            assert lower[0].item() == 0.0 and upper[0].item() == math.inf, (dtype, lower, upper)


def test_a_delta_no_table_certifies_is_solved_on_the_cpu_and_refused_for_a_table():
    """Outside the deltas where tables are certified, a table could miss the
    bound by far more than the float32 promise (kl at delta = 1e-100: rtol
    1e10; at a subnormal delta, no bound at all): a table refuses it (off the
    CPU the functions do too: tests/test_torch_cuda.py), and on the CPU,
    where the functions are the numpy core, every dtype solves it."""
    logp = torch.tensor([-230.0, -1.0])
    with pytest.raises(ValueError, match="cannot be certified"):
        bt.BandTable.build("kl", 5e-324)
    expected = bs.band_from_logp(logp.double().numpy(), 1e-100, "kl")
    lower, upper = bt.band_from_logp(logp.double(), 1e-100, "kl")
    np.testing.assert_array_equal(upper.numpy(), expected[1])
    lower, upper = bt.band_from_logp(logp, 1e-100, "kl")
    _assert_float32_rounding_of(upper, expected[1], True, "float32 upper")


def test_user_divergence_under_torch_compile_says_how_instead_of_failing_in_numpy():
    """torch.compile(fullgraph=True) over band_from_logp with a user Divergence
    failed inside dynamo ("ndarray attribute access"); the default compile hit
    FakeTensor's missing setflags. fullgraph now names the way out, and the
    default compile breaks the graph there and solves eagerly."""
    user = bs.Divergence.from_generator("user_chi2", lambda u: (u - 1.0) ** 2)
    logp = torch.log(torch.linspace(0.01, 0.99, 16, dtype=torch.float64))
    eager = bt.band_from_logp(logp, 0.05, user)
    torch._dynamo.reset()
    strict = torch.compile(lambda lp: bt.band_from_logp(lp, 0.05, user), fullgraph=True)
    with pytest.raises(Exception, match="runs eagerly only"):
        strict(logp)
    torch._dynamo.reset()
    lenient = torch.compile(lambda lp: bt.band_from_logp(lp, 0.05, user))
    for got, want in zip(lenient(logp), eager):
        assert torch.equal(got, want)


def test_regression_user_divergence_through_torch_on_a_large_batch(readme_kl):
    logp = -np.geomspace(1e-8, 30, 100_000)
    lower, upper = bt.band_from_logp(torch.from_numpy(logp), 0.05, readme_kl)
    ref_lower, ref_upper = bs.band_from_logp(logp, 0.05, "kl")
    assert reference.relative_to_band(lower.numpy(), ref_lower).max() <= 1e-9
    assert reference.relative_to_band(upper.numpy(), ref_upper).max() <= 1e-9


_EAGER_PATHS_UNDER_W_ERROR = """
import torch, bandsolve.torch as bt
x = -torch.rand(5000, generator=torch.Generator().manual_seed(0)) * 10
for logp in (x[:1], x, x.to(torch.bfloat16), x.double()):
    bt.band_from_logp(logp, 0.05)
    bt.band(logp.exp(), 0.05, "tv")
bt.BandTable.build("kl", 0.05)(x)
bt.BandSettings().bounds(x)
cfg = bt.PolicyLossConfig(rule=bt.Band(0.05))
new = (x + 0.1).requires_grad_()
loss, _ = bt.policy_loss(new, x, torch.ones_like(x), torch.ones_like(x), cfg)
loss.backward()
print(float(bt.band(torch.tensor([0.5]), 0.05)[1][0]))
"""


def test_regression_warnings_as_errors_failed_the_first_eager_call(tmp_path):
    """Issue 43: ``python -W error -c "...bt.band(torch.tensor([0.5]), 0.05)"``
    exited 1: torch 2.13's own DeprecationWarning (torch.jit.script_method)
    failed the fused kernel's inductor build, and the fallback's
    RuntimeWarning was then raised. Eager calls compile nothing with inductor
    now; every public eager path runs with warnings as errors, from an empty
    cache (bandsolve's own warnings would still be raised)."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PATH": "/usr/bin:/bin",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    out = subprocess.run([sys.executable, "-W", "error", "-c", _EAGER_PATHS_UNDER_W_ERROR],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.split()[-1]) == pytest.approx(1.3084843, rel=1e-6)


def test_compiled_calls_add_no_warning_of_bandsolve(tmp_path):
    """Under torch.compile, torch 2.13 warns itself (its torch.jit.script_method
    DeprecationWarning, raised by any compile, with or without bandsolve):
    with that one warning let through, a compiled band raises no other."""
    script = """
import torch, bandsolve.torch as bt
f = torch.compile(lambda x: bt.band_from_logp(x, 0.05), fullgraph=True)
x = -torch.rand(100)
assert torch.equal(f(x)[1], bt.band_from_logp(x, 0.05)[1])
"""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PATH": "/usr/bin:/bin",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    out = subprocess.run([sys.executable, "-W", "error", "-W",
                          "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
                          "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
