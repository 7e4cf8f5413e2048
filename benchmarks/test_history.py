"""Benchmark history: the same cases before and after a change (pytest-benchmark).

    pip install -e ".[bench]"
    python -m pytest -n 0 benchmarks/test_history.py --benchmark-autosave     # before
    python -m pytest -n 0 benchmarks/test_history.py --benchmark-compare      # after

Kept out of the test suite (``testpaths = ["tests"]``): timings assert
nothing. ``np.copyto`` of the same array is a case too, the yardstick that
lets two saved runs from machines of different speed be compared as ratios.
"""

import numpy as np
import pytest

import bandsolve as bs

pytest.importorskip("pytest_benchmark")

N = 1_000_000
DELTA = 0.05


@pytest.fixture(scope="module")
def p():
    return np.exp(np.random.default_rng(0).uniform(np.log(1e-6), 0.0, N))


@pytest.fixture(scope="module")
def buffers(p):
    return np.empty_like(p), np.empty_like(p)


def test_copyto_yardstick(benchmark, p, buffers):
    benchmark(np.copyto, buffers[0], p)


@pytest.mark.parametrize("divergence", ["kl", "rkl", "js", "alpha:0.5"])
def test_root_finder(benchmark, p, buffers, divergence):
    benchmark(bs.band, p, DELTA, divergence, out=buffers)


def test_root_finder_from_logp(benchmark, p, buffers):
    logp = np.log(p)
    benchmark(bs.band_from_logp, logp, DELTA, "kl", out=buffers)


@pytest.mark.parametrize("divergence", [name for name, div in bs.BUILTIN_DIVERGENCES.items()
                                        if div.has_closed_form])
def test_closed_form(benchmark, p, buffers, divergence):
    benchmark(bs.band, p, DELTA, divergence, out=buffers)


def test_root_finder_many_deltas(benchmark, p):
    """One delta per element: no warm-start table, the iteration from scratch."""
    q = p[:100_000]
    deltas = np.geomspace(1e-3, 1.0, q.size)
    benchmark(bs.band, q, deltas, "kl")


def test_binary_divergence(benchmark, p):
    # r = 0.9 is valid for every p (r <= 1/p)
    benchmark(bs.binary_divergence, p, 0.9, "kl")


def test_table_build(benchmark):
    from bandsolve import table

    benchmark.pedantic(table.build, args=("kl", DELTA), rounds=3, iterations=1)


def test_torch_table_float32(benchmark, p):
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    band_table = bt.BandTable.build("kl", DELTA)
    logp = torch.from_numpy(np.log(p)).float()
    benchmark(band_table, logp, validate=False)
