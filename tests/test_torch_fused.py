"""The torch paths eager and compiled: on the CPU the numpy core for every
dtype (issue 41: no inductor compile on a first call, no recompile for a new
batch size), off it the table, which torch.compile(band_from_logp) evaluates
in the graph. References are the float64 numpy core (itself checked against
mpmath in test_reference / test_torch_bounds) and mpmath directly, never the
torch code."""

import math
import os
import subprocess
import sys

import mpmath
import numpy as np
import pytest
from numba.core import event as numba_event

torch = pytest.importorskip("torch")

import bandsolve as bs  # noqa: E402
import bandsolve.torch as bt  # noqa: E402
from bandsolve._kernels import _factory  # noqa: E402
from bandsolve.torch import device_table  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _assert_float32_promise(got, ref, what):
    """docs/torch.md's float32 promise: |r - r64| <= max(1e-5 min(r, |r-1|),
    16 eps32 max(r, 1)), infinities exactly."""
    got = got.double().numpy()
    finite = np.isfinite(ref)
    assert np.array_equal(got[~finite], ref[~finite]), what
    r, g = ref[finite], got[finite]
    if r.size == 0:
        return
    tol = np.maximum(1e-5 * np.minimum(r, np.abs(r - 1.0)), 16 * EPS32 * np.maximum(r, 1.0))
    ratio = np.abs(g - r) / tol
    worst = int(np.argmax(ratio))
    assert ratio[worst] <= 1.0, f"{what}: {ratio[worst]:.3g} x tolerance at r = {r[worst]!r} " \
                                f"(got {g[worst]!r})"


def _near_one_logp():
    # p within 6e-8 of 1, where exp(x) - 1 rounds to 0 in float32
    return torch.tensor(-np.geomspace(1e-30, 1e-6, 64), dtype=torch.float32)


@pytest.mark.parametrize("divergence", ["rkl", "kl"])
def test_compiled_table_keeps_one_minus_p_near_p_one(divergence):
    """inductor writes expm1 as exp(x) - 1 on the CPU: a compiled BandTable
    gave the bound at p = 1 for log p = -2.8e-8 (rkl, delta 1e-3: 1.0 where
    the band is 0.99987)."""
    table = bt.BandTable.build(divergence, 1e-3)
    logp = _near_one_logp()
    ref = bs.band_from_logp(logp.double().numpy(), 1e-3, divergence)
    compiled = torch.compile(lambda x: table(x, validate=False), fullgraph=True)
    compiled_fn = torch.compile(lambda x: bt.band_from_logp(x, 1e-3, divergence),
                                fullgraph=True)
    for name, (lower, upper) in (("table", compiled(logp)), ("band_from_logp", compiled_fn(logp)),
                                 ("eager", bt.band_from_logp(logp, 1e-3, divergence))):
        _assert_float32_promise(lower, ref[0], f"{name} lower")
        _assert_float32_promise(upper, ref[1], f"{name} upper")


_AVX2_TABLE_CHECK = """
import numpy as np, torch, bandsolve as bs, bandsolve.torch as bt
torch.manual_seed(0)
logp = torch.cat([-torch.rand(4096) * 30.0, -torch.tensor(np.geomspace(1e-6, 700.0, 512))]).float()
for divergence in ("kl", "tv"):
    table = bt.BandTable.build(divergence, 0.05, max_ratio=10.0)
    lower, upper = torch.compile(lambda x: table(x, validate=False), fullgraph=True)(logp)
    ref = bs.band_from_logp(logp.double().numpy(), 0.05, divergence, max_ratio=10.0)
    for got, want in zip((lower, upper), ref):
        err = np.abs(got.double().numpy() - want) / np.maximum(want, 1.0)
        assert err.max() < 1e-5, (divergence, float(err.max()), int((err > 1e-5).sum()))
print("ok")
"""


@pytest.mark.skipif(not torch.backends.cpu.get_cpu_capability().startswith("AVX"),
                    reason="inductor's AVX2 code needs an x86 CPU with AVX2")
def test_regression_inductor_avx2_where_on_int64_took_the_grid_end(tmp_path):
    """On a CPU with AVX2 but not AVX-512 (CI's), torch.compile's vectorised
    code for ``where(k >= n, n - 1, k)`` on int64 gave n - 1 for every
    element: a compiled BandTable read the last interval everywhere (bounds
    off by up to 0.69) or out of bounds (an aborted process). Run with
    inductor held to AVX2 (``ATEN_CPU_CAPABILITY=avx2``), whatever this CPU."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    done = subprocess.run([sys.executable, "-c", _AVX2_TABLE_CHECK], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_compiled_expm1_against_mpmath():
    x = torch.tensor(np.concatenate([-np.geomspace(1e-38, 100.0, 2000), [0.0, -np.inf]]),
                     dtype=torch.float32)
    got = torch.compile(device_table.expm1, fullgraph=True)(x).double().numpy()
    with mpmath.workdps(30):
        ref = np.array([float(mpmath.expm1(mpmath.mpf(float(v)))) if math.isfinite(v) else -1.0
                        for v in x.double().numpy()])
    assert np.all(np.abs(got - ref) <= 4 * EPS32 * np.abs(ref) + 1e-45)


def _ops_in_graph(fn, x):
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward

    torch.compile(fn, backend=backend, fullgraph=True)(x)
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_compiled_band_from_logp_on_the_cpu_is_the_numpy_core_op(dtype):
    """On the CPU a compiled call is the eager call, the numpy core, as one
    opaque op (the same bits); no table is fetched or evaluated."""
    ops = _ops_in_graph(lambda x: bt.band_from_logp(x, 0.05, validate=False),
                        -torch.rand(64).to(dtype))
    assert "bandsolve.band.default" in ops and "bandsolve.band_table.default" not in ops


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_band_from_logp_on_cuda_evaluates_the_table_in_the_graph(dtype):
    """Off the CPU only the table fetch is opaque: its evaluation fuses with
    the caller's code."""
    ops = _ops_in_graph(lambda x: bt.band_from_logp(x, 0.05, validate=False),
                        -torch.rand(64, device="cuda").to(dtype))
    assert "bandsolve.band_table.default" in ops
    assert "bandsolve.band.default" not in ops
    assert any("expm1" in op or "exp" in op for op in ops)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("divergence", ["kl", "rkl", "js", "alpha:2", "tv"])
def test_compiled_band_from_logp_over_a_delta_schedule_matches_the_float64_core(divergence,
                                                                                dtype):
    rng = np.random.default_rng(1)
    logp = torch.tensor(np.concatenate([-rng.exponential(4.0, 3000),
                                        -np.geomspace(1e-30, 80.0, 500), [0.0, -np.inf]]),
                        dtype=torch.float32).to(dtype)
    compiled = torch.compile(lambda x, d: bt.band_from_logp(x, d, divergence), fullgraph=True)
    for delta in (0.05, 0.2, 1e-3, 1.0):
        lower, upper = compiled(logp, delta)
        ref = bs.band_from_logp(logp.double().numpy(), delta, divergence)
        _assert_float32_promise(lower, ref[0], f"{divergence} {delta} lower")
        _assert_float32_promise(upper, ref[1], f"{divergence} {delta} upper")
        eager = bt.band_from_logp(logp, delta, divergence)
        assert torch.equal(lower, eager[0]) and torch.equal(upper, eager[1]), delta


class _NumbaCompiles(numba_event.Listener):
    """The names of the functions numba compiles while it is entered."""

    def __init__(self):
        self.names = []

    def on_start(self, ev):
        self.names.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass

    def __enter__(self):
        numba_event.register("numba:compile", self)
        return self

    def __exit__(self, *exc):
        numba_event.unregister("numba:compile", self)


@pytest.mark.parametrize("divergence", ["kl", "tv"])
def test_regression_a_one_element_call_compiled_the_eager_kernel_again(divergence):
    """Eager CPU calls ran a kernel torch.compile built on the first call, and
    a 1-element input specialised it anew (9.4 s); they now run the numpy
    core, whose kernels no later batch size, delta or dtype compiles again:
    no dynamo graph and no numba compile after the first call."""
    counters = torch._dynamo.utils.counters
    gen = torch.Generator().manual_seed(7)
    bt.band_from_logp(-torch.rand(32768, generator=gen) * 10 - 1e-6, 0.05, divergence)
    calls = [((-torch.rand(n, generator=gen) * 10 - 1e-6).to(dtype), delta)
             for n, delta, dtype in ((1, 0.05, torch.float32), (5, 0.3, torch.bfloat16),
                                     (77, 1e-3, torch.float32), (4096, 0.05, torch.float16),
                                     (70000, 2.0, torch.float32))]
    refs = [bs.band_from_logp(logp.double().numpy(), delta, divergence) for logp, delta in calls]
    frames = counters["stats"]["unique_graphs"]
    kernels = _factory._compiled.cache_info().currsize  # a variant loaded from disk counts too
    with _NumbaCompiles() as compiles:
        results = [bt.band_from_logp(logp, delta, divergence) for logp, delta in calls]
    for (lower, upper), ref in zip(results, refs):
        _assert_float32_promise(lower, ref[0], "lower")
        _assert_float32_promise(upper, ref[1], "upper")
    assert counters["stats"]["unique_graphs"] == frames
    assert compiles.names == []
    assert _factory._compiled.cache_info().currsize == kernels


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 0), (4, 5), (2, 3, 4)])
def test_eager_kernel_keeps_shapes_and_layouts(shape):
    x = -torch.rand(*shape) * 10
    for given in (x, x.transpose(0, -1) if x.dim() > 1 else x):
        lower, upper = bt.band_from_logp(given, 0.05)
        assert lower.shape == given.shape and upper.shape == given.shape
        ref = bs.band_from_logp(given.double().numpy(), 0.05)
        _assert_float32_promise(lower.reshape(-1), ref[0].reshape(-1), "lower")
        _assert_float32_promise(upper.reshape(-1), ref[1].reshape(-1), "upper")


def test_an_eager_table_runs_op_by_op_within_the_promise():
    """A BandTable called eagerly runs op by op (nothing compiles): the float32
    promise, p near 1 included."""
    table = bt.BandTable.build("kl", 0.05)
    logp = torch.cat([_near_one_logp(), -torch.rand(500) * 30])
    lower, upper = table(logp)
    ref = bs.band_from_logp(logp.double().numpy(), 0.05)
    _assert_float32_promise(lower, ref[0], "lower")
    _assert_float32_promise(upper, ref[1], "upper")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bad, message", [(float("nan"), "contains NaN"),
                                          (float("inf"), r"contains \+inf"),
                                          (0.25, "must be <= 0")])
def test_one_pass_validation_still_names_the_first_bad_element(dtype, bad, message):
    logp = torch.tensor([-1.0, -float("inf"), bad, bad], dtype=dtype)
    with pytest.raises(ValueError, match=message + r".*2 of 4 elements are invalid, "
                                                   r"the first at index \(2,\)"):
        bt.band_from_logp(logp, 0.05)
    p = torch.tensor([0.5, 0.0, 1.0, -0.5 if bad == 0.25 else bad], dtype=dtype)
    with pytest.raises(ValueError, match=r"1 of 4 elements are invalid"):
        bt.band(p, 0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_delta_schedule_recompiles_once_not_per_delta(dtype):
    """A float argument of the custom op made inductor specialise the graph on
    delta's value: every new delta of a schedule recompiled (1 s for the op
    alone, 10 s with the fused table evaluation). The table op takes delta as
    a tensor: the first delta compiles, the second generalises, no more.
    float64 on the CPU (the numpy core, through the op bandsolve::band) still
    recompiled per delta until that op took delta as a tensor too."""
    counters = torch._dynamo.utils.counters
    counters.clear()
    x = (-torch.rand(64) * 8).to(dtype)
    compiled = torch.compile(lambda lp, d: bt.band_from_logp(lp, d), fullgraph=True)
    for delta in (0.05, 0.1, 0.3, 0.4, 0.05, 0.7):
        lower, upper = compiled(x, delta)
        ref = bs.band_from_logp(x.double().numpy(), delta)
        if dtype == torch.float64:  # the numpy core's very bits
            assert np.array_equal(lower.numpy(), ref[0]) and np.array_equal(upper.numpy(), ref[1])
        eager = bt.band_from_logp(x, delta)  # the same op, the same bits
        assert torch.equal(lower, eager[0]) and torch.equal(upper, eager[1]), delta
        _assert_float32_promise(lower, ref[0], "lower")
        _assert_float32_promise(upper, ref[1], "upper")
    assert counters["stats"]["unique_graphs"] <= 2


def _above_the_simplex_cap(logp: torch.Tensor, upper: torch.Tensor) -> list:
    """The elements whose upper bound exceeds e^(-log p) = 1/p, decided in
    mpmath at 40 digits where float64 cannot tell."""
    x = logp.double().numpy().reshape(-1)
    r = upper.double().numpy().reshape(-1)
    cap64 = np.exp(-x)
    close = np.flatnonzero(r >= cap64 * (1.0 - 1e-12))
    with mpmath.workdps(40):
        return [float(x[i]) for i in close if mpmath.mpf(r[i]) > mpmath.exp(-mpmath.mpf(x[i]))]


@pytest.mark.parametrize("divergence, delta, span", [("tv", 0.5, 0.69), ("rkl", 5.0, 5.0),
                                                     ("js", 0.3, 3.0)])
def test_regression_float32_saturated_upper_exceeded_the_simplex_cap(divergence, delta, span):
    """A saturated float32 upper bound was exp(-log p) rounded to nearest: on
    about half of the saturated tokens it exceeded 1/p by up to half an ulp
    (6e-8 relative), against r <= 1/p that float64 keeps exactly. Every
    float32 path now keeps it: the table (op by op, compiled) caps with
    e^(-log p) rounded down, and the CPU's numpy core rounds its upper bound
    down where nearest would round it up."""
    logp = -torch.rand(4096, generator=torch.Generator().manual_seed(3)) * span
    table = bt.BandTable.build(divergence, delta)
    paths = {"eager": lambda: bt.band_from_logp(logp, delta, divergence),
             "table": lambda: table(logp),
             "compiled table": lambda: torch.compile(
                 lambda x: table(x, validate=False), fullgraph=True)(logp),
             "compiled": lambda: torch.compile(
                 lambda x: bt.band_from_logp(x, delta, divergence), fullgraph=True)(logp)}
    for name, call in paths.items():
        lower, upper = call()
        assert not _above_the_simplex_cap(logp, upper), name
    lower, upper = bt.band_from_logp(logp, delta, divergence)
    ref = bs.band_from_logp(logp.double().numpy(), delta, divergence)
    _assert_float32_promise(upper, ref[1], "upper")
    # the float64 numpy table caps the same way
    lower64, upper64 = bs.table.evaluate_numpy(table.data, logp.double().numpy())
    assert not _above_the_simplex_cap(logp.double(), torch.from_numpy(upper64)), "numpy table"


def _above_one_over_p(p: torch.Tensor, upper: torch.Tensor) -> list:
    """The elements whose upper bound exceeds 1/p, decided in mpmath."""
    x = p.double().numpy().reshape(-1)
    r = upper.double().numpy().reshape(-1)
    close = np.flatnonzero(r >= (1.0 / x) * (1.0 - 1e-5))
    with mpmath.workdps(40):
        return [float(x[i]) for i in close if mpmath.mpf(r[i]) * mpmath.mpf(x[i]) > 1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_regression_float32_band_from_p_was_capped_by_a_rounded_log_p(dtype):
    """band(p) in float32 took the cap 1/p as e^(-log p) with log p rounded
    to float32: 16 ulp off, either way, and above 1/p for about 4 in 10
    saturated tokens (tv, delta 10: 1.1568030e30 at p = 8.6445309e-31, where
    1/p = 1.1568008e30). The cap now comes from p itself, rounded down."""
    gen = torch.Generator().manual_seed(5)
    p = torch.cat([torch.exp(-torch.rand(4000, generator=gen) * 80.0),
                   torch.rand(1000, generator=gen), torch.tensor([1.0, 8.644530913009224e-31])])
    p = p.to(dtype)
    p = p[p > 0]
    compiled = torch.compile(lambda x: bt.band(x, 10.0, "tv"), fullgraph=True)
    for name, (lower, upper) in (("eager", bt.band(p, 10.0, "tv")),
                                 ("table", bt.BandTable.build("tv", 10.0).from_p(p)),
                                 ("compiled", compiled(p))):
        finite = torch.isfinite(upper)
        assert not _above_one_over_p(p[finite], upper[finite]), name
        assert bool((lower <= 1.0).all() and (upper >= 1.0).all()), name
