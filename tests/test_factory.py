"""The kernel factory (issue 10.1): kernels specialised per divergence,
compiled once, shared where the functions are shared, and cacheable on disk."""

import importlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bandsolve as bs
from bandsolve._kernels import _factory, _solver
from bandsolve._kernels._bind import kernels_for

KERNELS = (_solver.band_by_root, _solver.margin_at, _solver.binary_divergence_kernel)


def _library(launcher):
    dispatcher = getattr(launcher, "kernel", launcher)
    return dispatcher.overloads[dispatcher.signatures[0]].library


def test_slots_are_declared_and_collected_through_nested_templates():
    # SCALED_CONJUGATE: perspective's log-domain fallback (issue 18.5)
    generator = {"GENERATOR", "CONJUGATE", "SCALED_CONJUGATE"}
    root = generator | {"DERIVATIVE"}
    assert _factory._slots_read(_solver.band_by_root) == root
    assert _factory._slots_read(_solver.margin_at) == root
    assert _factory._slots_read(_solver.binary_divergence_kernel) == generator
    assert _factory._slots_read(_solver.band_by_closed_form) == {"CLOSED_FORM"}
    assert _factory._slots_read(_solver.saturation_threshold) == generator


def test_one_kernel_per_function_set():
    # alpha's parameter is a run-time argument: every a shares one kernel
    a, b = bs.alpha_divergence(0.3), bs.get_divergence("alpha:2")
    assert _factory.specialise(_solver.band_by_root, a) is \
        _factory.specialise(_solver.band_by_root, b)
    # the root finder of a closed-form divergence is that of its generator
    tv = bs.get_divergence("tv")
    assert _factory.specialise(_solver.band_by_root, tv) is \
        _factory.specialise(_solver.band_by_root, tv.without_closed_form())
    kl, rkl = bs.get_divergence("kl"), bs.get_divergence("rkl")
    assert _factory.specialise(_solver.band_by_root, kl) is not \
        _factory.specialise(_solver.band_by_root, rkl)


def test_a_template_reading_an_undeclared_slot_does_not_compile():
    """Issue 22, part 4: a template's slots are what it declares, not what a
    scan of its bytecode finds; reading another is an error, never a
    silently bound function."""

    @_factory.template(slots=("GENERATOR",))
    def reads_conjugate_too(u):
        return GENERATOR(u, u - 1.0, 0.0) + CONJUGATE(u, u - 1.0, 0.0)  # noqa: F821

    with pytest.raises(Exception, match="CONJUGATE"):
        _factory.specialise(reads_conjugate_too, bs.get_divergence("kl"))(0.5)
    with pytest.raises(ValueError, match="unknown template slots"):
        _factory.template(slots=("GENERATR",))


def test_a_template_that_needs_a_missing_function_is_a_type_error():
    with pytest.raises(TypeError, match="needs the divergence's margins"):
        _factory.specialise(_solver.band_by_closed_form, bs.get_divergence("kl"))


@pytest.mark.parametrize("name", sorted(bs.BUILTIN_DIVERGENCES) + ["alpha:0.5"])
def test_builtin_kernels_are_cacheable_on_disk(name):
    """numba refuses to cache code that embeds a Python object's address
    (which passing a numba function as a value does): every built-in kernel
    must be free of such 'dynamic globals', and carry a cache key."""
    div = bs.get_divergence(name)
    bs.band(np.geomspace(1e-6, 1.0, 40_000), 0.05, div)  # compiles the warm-start path too
    bs.binary_divergence(0.3, 1.2, div)
    kernels = [_solver.band_by_closed_form] if div.has_closed_form else list(KERNELS)
    for template in kernels:
        launcher = _factory.specialise(template, div)
        assert not _library(launcher).has_dynamic_globals, template.__name__
        assert "[" in launcher.kernel.py_func.__qualname__
    for dispatcher_fn in (div.f, div.df, div.f_conjugate):
        assert _factory._cache_key([dispatcher_fn]) is not None


def test_user_closures_compile_in_memory_and_match_the_builtin():
    mine = bs.Divergence.from_generator("my_chi2", lambda u: (u - 1.0) ** 2)
    assert _factory._cache_key([mine.f]) is None  # a closure: no stable name
    p = np.geomspace(1e-6, 0.999, 50_000)
    lower, upper = bs.band(p, 0.05, mine)
    ref_lower, ref_upper = bs.band(p, 0.05, "chi2")
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-9)


def test_cache_key_follows_the_source_of_the_functions(tmp_path, monkeypatch):
    """An edit to a module-level generator must not load a stale kernel:
    numba itself watches only the template's own file."""
    module = tmp_path / "my_generators.py"
    source = textwrap.dedent("""
        import numba
        @numba.njit("float64(float64, float64, float64)")
        def half_chi2(u, x, theta):
            return {body}
    """)
    module.write_text(source.format(body="0.5 * x * x"))
    monkeypatch.syspath_prepend(str(tmp_path))
    first = importlib.import_module("my_generators")
    key_before = _factory._cache_key([first.half_chi2])
    module.write_text(source.format(body="0.5 * (x * x)"))
    second = importlib.reload(first)
    key_after = _factory._cache_key([second.half_chi2])
    assert key_before is not None and key_after is not None
    assert key_before.startswith("half_chi2-") and key_before != key_after


_FIRST_CALL = """
import numpy as np, bandsolve as bs
from bandsolve._kernels import _factory, _solver
bs.band(np.array([0.1, 0.5]), 0.05, "kl")
kernel = _factory.specialise(_solver.band_by_root, bs.get_divergence("kl")).kernel
print(sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values()))
"""


def test_builtin_kernels_load_from_the_disk_cache_in_a_new_process(tmp_path):
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def run():
        out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, text=True,
                             capture_output=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        return tuple(int(v) for v in out.stdout.split())

    assert run() == (0, 1)  # an empty cache: compiled
    assert run() == (1, 0)  # the entry the first process wrote


@pytest.mark.parametrize("name", ["kl", "hellinger"])
def test_serial_kernels_give_the_parallel_kernels_bits(name):
    """A batch below _bind.SERIAL_MAX runs the serial copy of the kernel
    (it compiles in about half the time): it must give the parallel copy's
    result bit for bit, status and failure count included."""
    div = bs.get_divergence(name)
    p = np.concatenate([np.geomspace(1e-300, 0.5, 300), 1.0 - np.geomspace(1e-16, 0.5, 300),
                        [0.0, 1.0]])
    delta = np.array([0.05])
    results = []
    for serial in (False, True):
        lower, upper = np.empty(p.size), np.empty(p.size)
        if div.has_closed_form:
            _factory.specialise(_solver.band_by_closed_form, div, serial=serial)(
                p, False, delta, div.parameter, lower, upper)
            results.append((lower, upper))
        else:
            status = np.empty(p.size, dtype=np.int8)
            failures = _factory.specialise(_solver.band_by_root, div, serial=serial)(
                p, False, delta, div.parameter, div.f_at_zero, div.slope_at_infinity,
                div.curvature_at_one, np.empty(0), np.empty(0), lower, upper, status,
                *kernels_for(div)._growth())
            results.append((lower, upper, status, failures))
    for parallel, serial in zip(*results):
        np.testing.assert_array_equal(serial, parallel)
