"""The kernel factory (issue 10.1): kernels specialised per divergence,
compiled once, shared where the functions are shared, and cacheable on disk."""

import importlib
import math
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import bandsolve as bs
from bandsolve._kernels import _factory, _interpret, _solver
from bandsolve._kernels._bind import kernels_for
from bandsolve._solve import WarmStart

KERNELS = (_solver.band_by_root, _solver.margin_at, _solver.binary_divergence_kernel)


def _library(launcher):
    dispatcher = getattr(launcher, "kernel", launcher)
    return dispatcher.overloads[dispatcher.signatures[0]].library


def test_slots_are_declared_and_collected_through_nested_templates():
    # SCALED_CONJUGATE: perspective's log-domain fallback (issue 18.5)
    generator = {"GENERATOR", "CONJUGATE", "SCALED_CONJUGATE"}
    root = generator | {"DERIVATIVE"}
    assert _factory._declared(_solver.band_by_root, "slots") == root
    assert _factory._declared(_solver.margin_at, "slots") == root
    assert _factory._declared(_solver.binary_divergence_kernel, "slots") == generator
    assert _factory._declared(_solver.band_by_closed_form, "slots") == {"CLOSED_FORM"}
    assert _factory._declared(_solver.saturation_threshold, "slots") == generator


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
        assert "[" in getattr(launcher, "kernel", launcher).py_func.__qualname__
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
from bandsolve._kernels import _factory, _interpret, _solver
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


#: p and log p where the kernels branch: both ends, subnormals, 1 - p near
#: and below eps, the warm-start table's edges, and a log-uniform spread
_HARD_P = np.concatenate([np.geomspace(1e-320, 0.5, 90), 1.0 - np.geomspace(1e-17, 0.5, 60),
                          [0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 4e-18, 0.5, 1.0]])
_HARD_LOGP = np.concatenate([-np.geomspace(1e-320, 1e4, 90), [0.0, -np.inf, -5e-324, -690.7,
                                                              -708.3964185322641, -745.2,
                                                              -1e300]])


def _run(kernel, interpret, x, from_logp, delta, div, start):
    """The root finder or the closed form on x, compiled or interpreted."""
    lower, upper = np.full(x.size, -7.0), np.full(x.size, -7.0)
    if kernel is _solver.band_by_closed_form:
        got = _interpret.run(_factory.specialise(kernel, div, interpret=True), x, from_logp, delta,
                             div.parameter, lower, upper) if interpret else \
            _factory.specialise(kernel, div)(x, from_logp, delta, div.parameter, lower, upper)
        return lower, upper, got
    status = np.full(x.size, -1, dtype=np.int8)
    k = kernels_for(div)
    args = (x, from_logp, delta, *k._root_constants(), *start, lower, upper, status, *k._growth())
    got = _interpret.run(_factory.specialise(kernel, div, interpret=True), *args) if interpret \
        else _factory.specialise(kernel, div)(*args)
    return lower, upper, status, got


@pytest.mark.parametrize("name", [*bs.BUILTIN_DIVERGENCES, "alpha:0.999999", "alpha:-3",
                                  "alpha:1e9", "user"])
def test_interpreted_kernels_give_the_compiled_kernels_bits(name, readme_kl):
    """Issue 41: a small batch runs the kernel's own source in the interpreter
    (no compile). It must give the compiled kernel's result bit for bit,
    status and failure count included, where every branch is taken: both
    ends of p, subnormal p and 1 - p, log p far below the smallest normal,
    tiny and huge delta, an array of deltas, with and without warm starts."""
    div = readme_kl if name == "user" else bs.get_divergence(name)
    kernels = [_solver.band_by_root] + ([_solver.band_by_closed_form] if div.has_closed_form
                                        else [])
    delta_array = np.geomspace(1e-300, 1e300, _HARD_P.size)
    start = (np.empty(0), np.empty(0))
    warm = WarmStart().tables(div, 0.05)
    for kernel in kernels:
        for x, from_logp in ((_HARD_P, False), (_HARD_LOGP, True)):
            for delta, tables in ((np.array([0.05]), start), (np.array([0.05]), warm),
                                  (np.array([1e-300]), start), (np.array([1e300]), start),
                                  (delta_array[:x.size], start)):
                if tables is warm and kernel is not _solver.band_by_root:
                    continue
                compiled = _run(kernel, False, x, from_logp, delta, div, tables)
                interpreted = _run(kernel, True, x, from_logp, delta, div, tables)
                for got, want in zip(interpreted, compiled):
                    np.testing.assert_array_equal(got, want, f"{kernel.__name__} {delta[:1]}")


@pytest.mark.parametrize("name", ["kl", "js", "alpha:2", "tv"])
def test_interpreted_binary_divergence_and_threshold_are_the_compiled_ones(name):
    div = bs.get_divergence(name)
    base = _HARD_P[_HARD_P >= 1e-300]  # 1/p finite
    powers = 2.0 ** -np.arange(1, 60)  # r = 1/p exactly: the simplex end, u2 = 0
    p = np.concatenate([np.tile(base, 4), powers])
    r = np.concatenate([np.zeros(base.size), np.ones(base.size), 0.5 / base,
                        np.nextafter(1.0 / base, 0.0), 1.0 / powers])
    compiled, interpreted = np.empty(p.size), np.empty(p.size)
    _factory.specialise(_solver.binary_divergence_kernel, div)(p, r, div.parameter, compiled)
    _interpret.run(_factory.specialise(_solver.binary_divergence_kernel, div, interpret=True),
                   p, r, div.parameter, interpreted)
    np.testing.assert_array_equal(interpreted, compiled)
    for upper in (True, False):
        for delta in (1e-8, 0.05, 10.0):
            want = _factory.specialise(_solver.saturation_threshold, div)(
                upper, delta, div.parameter, div.f_at_zero)
            assert kernels_for(div).saturation_threshold(upper, delta) == want


def test_a_small_batch_compiles_nothing(tmp_path):
    """Issue 41: band on 3 values, from an empty cache, compiled 34 kernels
    (4.7-5.6 s of CPU); up to _bind.INTERPRET_MAX elements it compiles none,
    on every path of the numpy API."""
    script = textwrap.dedent("""
        import numpy as np
        from numba.core import event
        import bandsolve as bs

        class Count(event.Listener):
            names = []
            def on_start(self, ev):
                self.names.append(ev.data["dispatcher"].py_func.__qualname__)
            def on_end(self, ev):
                pass

        event.register("numba:compile", Count())
        p = np.array([0.0, 1e-310, 0.08, 0.5, 1.0])
        for name in bs.BUILTIN_DIVERGENCES:
            bs.band(p, 0.05, name)
            bs.band_from_logp(np.array([-np.inf, -800.0, -1e-320, -0.1, 0.0]), 0.05, name)
            bs.band(p, np.array([1e-3, 0.1, 1.0, 10.0, 1e300]), name)
            bs.binary_divergence(p, 1.0, name)
        print(len(Count.names), sorted(set(Count.names)))
    """)
    out = subprocess.run([sys.executable, "-c", script], text=True, capture_output=True,
                         env={"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[0] == "0", out.stdout


_MATH_EDGES = [("log", (0.0,)), ("log", (-1.0,)), ("log", (math.inf,)), ("log1p", (-1.0,)),
               ("log1p", (-2.0,)), ("log2", (0.0,)), ("log10", (0.0,)), ("atanh", (1.0,)),
               ("atanh", (-1.0,)), ("pow", (0.0, -1.0)), ("pow", (10.0, 400.0)),
               ("pow", (-10.0, 401.0)), ("pow", (-1.0, 0.5)), ("exp", (1000.0,)),
               ("exp", (-1000.0,)), ("expm1", (1000.0,)), ("sqrt", (-1.0,)), ("log", (math.nan,)),
               ("exp", (math.nan,)), ("sqrt", (math.inf,)), ("log1p", (5e-324,))]


@pytest.mark.parametrize("name, args", _MATH_EDGES)
def test_interpreted_math_gives_numbas_values_where_pythons_raises(name, args):
    """The interpreter's ``math`` (``_interpret.IEEE_MATH``): libm's value at
    the edges where Python's math raises, as compiled code returns it."""
    namespace = {"math": math}
    exec(f"def edge(*args):\n    return math.{name}(*args)", namespace)
    compiled = numba.njit(error_model="numpy")(namespace["edge"])(*args)
    with np.errstate(all="ignore"):
        got = getattr(_interpret.IEEE_MATH, name)(*args)
    assert isinstance(got, np.float64)
    assert (np.isnan(got) and np.isnan(compiled)) or got == compiled, (got, compiled)


def test_a_loop_of_small_calls_compiles_once_it_has_interpreted_its_budget():
    """Interpreting is for a first call: a kernel runs interpreted for at most
    _bind.INTERPRET_BUDGET elements in a process (a study's loop of small
    batches paid about 70 us an element each call), then compiled, with the
    same bits."""
    from bandsolve._kernels import _bind

    div = bs.alpha_divergence(0.37)  # a key no other test has used
    key = (_solver.band_by_root, div, ())
    p = np.linspace(0.01, 0.99, 50)
    first = bs.band(p, 0.05, div)
    assert key not in _bind._compiled_kernels
    for _ in range(_bind.INTERPRET_BUDGET // p.size):
        bs.band(p, 0.05, div)
    assert key in _bind._compiled_kernels
    assert _bind._interpreted_elements[key] <= _bind.INTERPRET_BUDGET
    later = bs.band(p, 0.05, div)
    np.testing.assert_array_equal(first[0], later[0])
    np.testing.assert_array_equal(first[1], later[1])
