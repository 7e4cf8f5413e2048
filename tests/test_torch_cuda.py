"""The band on a CUDA device (issue 42, item 6): where float32 is hardest
(p near 1, log p far below -30), radii at float64's ends, validation's
device-side assert, and eager against compiled. References are the float64
numpy core (itself checked against mpmath), never the torch code.

Every test here needs a CUDA device and skips without one; the CPU-only run
reports how many it skipped (``SKIPPED [N] ... needs a CUDA device``).
``bash benchmarks/device/torch.sh`` runs them on a device.
"""

import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from problems import ALL_DIVERGENCES  # noqa: E402

import bandsolve as bs  # noqa: E402
import bandsolve.torch as bt  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

EPS32 = float(np.finfo(np.float32).eps)
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: log p where float32 p rounds to 1 or holds few digits of 1 - p
NEAR_ONE = np.concatenate([[0.0, -0.0, -1e-45, -1e-38], -np.geomspace(1e-30, 1e-7, 400)])
#: log p from the certified tails' end (-80) down to -1e4, where float32 p is 0
FAR_TAIL = -np.geomspace(30.0, 1e4, 400)


def _float32_promise(got, ref, what):
    """docs/torch.md's float32 promise for a table (off the CPU):
    |r - r64| <= max(1e-5 min(r, |r-1|), 16 eps32 max(r, 1)), infinities and
    references beyond float32's range exactly as float32 holds them."""
    got = got.double().cpu().numpy()
    beyond = ~np.isfinite(ref) | (ref >= FLOAT32_MAX)
    assert np.all(np.isinf(got[beyond])), what
    r, g = ref[~beyond], got[~beyond]
    tol = np.maximum(1e-5 * np.minimum(r, np.abs(r - 1.0)), 16 * EPS32 * np.maximum(r, 1.0))
    ratio = np.abs(g - r) / tol
    worst = int(np.argmax(ratio)) if ratio.size else 0
    assert ratio.size == 0 or ratio[worst] <= 1.0, (
        f"{what}: {ratio[worst]:.3g} x tolerance at r = {r[worst]!r} (got {g[worst]!r})")


#: the divergences whose compiled paths are tested too (each compile is
#: seconds on a device: benchmarks/device/torch.sh keeps to its budget)
COMPILED = ("kl", "rkl", "js", "tv", "alpha:2")


def _paths(delta, divergence):
    """Eager band_from_logp and a BandTable on CUDA, and both compiled for
    the divergences of COMPILED."""
    table = bt.BandTable.build(divergence, delta, device="cuda")
    paths = {"eager": lambda x: bt.band_from_logp(x, delta, divergence),
             "table": lambda x: table(x)}
    if divergence in COMPILED:
        paths["compiled"] = torch.compile(
            lambda x: bt.band_from_logp(x, delta, divergence, validate=False), fullgraph=True)
        paths["compiled table"] = torch.compile(lambda x: table(x, validate=False),
                                                fullgraph=True)
    return paths


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("divergence", ALL_DIVERGENCES)
def test_p_near_one_on_cuda(divergence, dtype):
    """log p in [-1e-7, 0]: 1 - p = -expm1(log p) must keep its digits (the
    compiled expm1 is Kahan's: Triton's exp(x) - 1 would cancel)."""
    logp = torch.tensor(NEAR_ONE, dtype=torch.float32).to(dtype).cuda()
    ref = bs.band_from_logp(logp.double().cpu().numpy(), 0.05, divergence)
    for name, path in _paths(0.05, divergence).items():
        lower, upper = path(logp)
        _float32_promise(lower, ref[0], f"{name} lower")
        _float32_promise(upper, ref[1], f"{name} upper")


@pytest.mark.parametrize("divergence", ALL_DIVERGENCES)
def test_log_p_far_below_minus_30_on_cuda(divergence):
    """log p from -30 to -1e4 (float32 p is 0 below about -103): the float32
    promise against the float64 core at the same input, an upper bound past
    float32's range as inf, and never a NaN or a bound outside [0, 1] and
    [1, inf]. docs/torch.md states the promise down to log p = -80; below
    that this checks that the table keeps it (it did on the CPU, tested here
    with the table's paths in place of CUDA's)."""
    logp = torch.tensor(FAR_TAIL, dtype=torch.float32).cuda()
    ref = bs.band_from_logp(logp.double().cpu().numpy(), 0.05, divergence)
    for name, path in _paths(0.05, divergence).items():
        lower, upper = path(logp)
        _float32_promise(lower, ref[0], f"{name} lower")
        _float32_promise(upper, ref[1], f"{name} upper")
        lo, up = lower.double().cpu().numpy(), upper.double().cpu().numpy()
        assert not (np.isnan(lo).any() or np.isnan(up).any()), name
        assert np.all((lo >= 0.0) & (lo <= 1.0) & (up >= 1.0)), name


@pytest.mark.parametrize("delta", [5e-324, 1e-310, 1e-100, 1e3, 1e300])
@pytest.mark.parametrize("divergence", ["kl", "rkl", "js", "tv", "hellinger", "alpha:2"])
def test_subnormal_and_huge_deltas_on_cuda(divergence, delta):
    """Radii at float64's ends: a table certifies them (the float32 promise)
    or the call refuses them with ValueError naming the way out, never a wrong
    bound; on the CPU the same call is the numpy core, which solves them."""
    logp = torch.tensor(np.concatenate([-np.geomspace(1e-20, 50.0, 300), [0.0, -np.inf]]),
                        dtype=torch.float32).cuda()
    ref = bs.band_from_logp(logp.double().cpu().numpy(), delta, divergence)
    try:
        lower, upper = bt.band_from_logp(logp, delta, divergence)
    except ValueError as exc:  # refused by the table's certificate, or its build's
        assert "cannot tabulate" in str(exc) or "cannot be certified" in str(exc), exc
        return
    _float32_promise(lower, ref[0], f"{divergence} {delta} lower")
    _float32_promise(upper, ref[1], f"{divergence} {delta} upper")


def test_a_delta_no_table_certifies_is_refused_on_cuda():
    with pytest.raises(ValueError, match="cannot tabulate kl"):
        bt.band_from_logp(torch.tensor([-230.0, -1.0], device="cuda"), 1e-100, "kl")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_and_compiled_on_cuda_agree_within_the_promise(dtype):
    """On CUDA eager calls run the table op by op (ATen's exp and log) and a
    compiled call fuses it (Triton's): they agree within the float32
    promise, not bit for bit (docs/torch.md; on the CPU both are the numpy
    core, the same bits). A CUDA graph's replay gives the eager call's bits."""
    gen = torch.Generator().manual_seed(11)
    logp = (-torch.rand(1 << 16, generator=gen) * 30).to(dtype).cuda()
    ref = bs.band_from_logp(logp.double().cpu().numpy(), 0.05, "kl", max_ratio=10.0)
    eager = bt.band_from_logp(logp, 0.05, "kl", max_ratio=10.0)
    compiled = torch.compile(lambda x: bt.band_from_logp(x, 0.05, "kl", max_ratio=10.0,
                                                        validate=False), fullgraph=True)(logp)
    for name, (lower, upper) in (("eager", eager), ("compiled", compiled)):
        _float32_promise(lower, ref[0], f"{name} lower")
        _float32_promise(upper, ref[1], f"{name} upper")
    table = bt.BandTable.build("kl", 0.05, max_ratio=10.0, device="cuda")
    static_in = logp.clone()
    graph = torch.cuda.CUDAGraph()
    table(static_in, validate=False)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        static_lower, static_upper = table(static_in, validate=False)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_lower, eager[0]) and torch.equal(static_upper, eager[1])


def test_eager_cuda_calls_compile_nothing_and_run_with_warnings_as_errors(tmp_path):
    """Issue 41/43 on CUDA: an eager call compiles no kernel (no inductor, no
    Triton) and so meets no compiler's warning; every eager CUDA path runs
    under -W error from empty caches."""
    script = """
import torch, bandsolve.torch as bt
x = -torch.rand(4096, device="cuda") * 10
for logp in (x[:1], x, x.to(torch.bfloat16), x.double()):
    bt.band_from_logp(logp, 0.05)
    bt.band(logp.exp(), 0.05, "tv")
bt.BandTable.build("kl", 0.05, device="cuda")(x)
bt.BandSettings().bounds(x)
torch.cuda.synchronize()
print(torch._dynamo.utils.counters["stats"]["unique_graphs"])
"""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PATH": "/usr/bin:/bin",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    out = subprocess.run([sys.executable, "-W", "error", "-c", script], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "0"


_ASYNC_FAILURE = """
import torch, bandsolve.torch as bt
bad = torch.tensor([-0.5, 0.25], device="cuda")
bt.band_from_logp(bad, 0.05, validate="async")
torch.cuda.synchronize()
print("not raised")
"""


def test_async_validation_on_cuda_is_a_device_side_assert():
    """validate="async" on CUDA: no synchronisation in the call, and the
    failure a device-side assert at the next one, which ends the process's
    CUDA context (so it runs in a process of its own)."""
    out = subprocess.run([sys.executable, "-c", _ASYNC_FAILURE], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode != 0 and "not raised" not in out.stdout
    assert "device-side assert" in out.stderr, out.stderr[-3000:]


def test_cuda_device_assert_carries_bandsolves_message():
    """docs/torch.md: the device-side assert carries bandsolve's message.
    Where it appears is the torch build's choice: ATen's CUDA kernel for
    ``torch._assert_async.msg`` prints it from the device (stderr) or keeps
    only its own "Assertion ... failed" line; this test says which the
    device's build does, and the docs claim it."""
    out = subprocess.run([sys.executable, "-c", _ASYNC_FAILURE], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode != 0
    assert "bandsolve: logp must be <= 0" in out.stderr + out.stdout, out.stderr[-3000:]


def test_cuda_default_validation_reads_nothing_back():
    """validate=True is "async" on CUDA: a trainer's step pays no
    synchronisation for it (the band's table path has no host read)."""
    logp = -torch.rand(1 << 16, device="cuda") * 30.0
    bt.band_from_logp(logp, 0.05)  # the table, built and moved once
    bt.BandSettings().bounds(logp)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        bt.band_from_logp(logp, 0.05)
        bt.BandSettings().bounds(logp)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_cuda_matches_the_cpu_within_the_promise_at_every_edge():
    """The same tensor on CUDA and on the CPU: the CPU's numpy core and the
    device table, both within the float32 promise of the float64 core, also
    at p = 0, p = 1 and the saturation thresholds."""
    for divergence in ("rkl", "js", "tv"):
        table = bt.BandTable.build(divergence, 0.05)
        edges = [table.data.upper.threshold, table.data.lower.threshold]
        z = np.concatenate([[t + d for t in edges if math.isfinite(t)
                             for d in (-1e-3, -1e-6, 0.0, 1e-6, 1e-3)], np.linspace(-30, 30, 200)])
        logp = np.concatenate([-np.logaddexp(0.0, -z), [0.0, -np.inf]])
        x = torch.tensor(logp, dtype=torch.float32)
        ref = bs.band_from_logp(x.double().numpy(), 0.05, divergence)
        for device in ("cpu", "cuda"):
            lower, upper = bt.band_from_logp(x.to(device), 0.05, divergence)
            _float32_promise(lower, ref[0], f"{divergence} {device} lower")
            _float32_promise(upper, ref[1], f"{divergence} {device} upper")
