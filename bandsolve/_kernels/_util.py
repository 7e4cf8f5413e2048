"""Shared numba decorators and the function-pointer signatures of divergences.

Every private kernel trusts its input: contiguous float64 arrays, already
validated by the public wrappers in ``bandsolve.api``.

Threads, processes and the on-disk cache
----------------------------------------
* numba's OpenMP layer (GNU libgomp) aborts any child that a ``fork`` made
  after the parent ran a parallel kernel (multiprocessing's default start
  method on Linux, torch DataLoader workers), and its workqueue layer aborts
  when two threads launch kernels at once. So, unless ``NUMBA_THREADING_LAYER``
  says otherwise, bandsolve asks numba for a fork-safe layer (TBB where it is
  loadable, else workqueue), and :func:`parallel_kernel` serialises launches
  with one lock: each launch already uses every core.
* The on-disk cache (``_cache``: ``NUMBA_CACHE_DIR``, else the user's cache
  folder; it heals a damaged entry) needs a writable folder. Where there is
  none, as in a read-only install under a read-only home, kernels compile in
  memory instead of failing at import.
"""

import functools
import math
import os
import threading

import numba
from numba import njit, types
from numba.core import typeinfer

from ._cache import kernel_cache

if "NUMBA_THREADING_LAYER" not in os.environ and numba.config.THREADING_LAYER == "default":
    numba.config.THREADING_LAYER = "forksafe"

# The one lock of the package: it orders kernel launches from several threads
# (see the module docstring). It holds no data.
_LAUNCH_LOCK = threading.Lock()

#: numba's fastmath flags that keep IEEE semantics: LLVM may fuse a * b + c
#: into one FMA (one rounding instead of two), and assumes nothing about NaN,
#: inf or signed zeros. Inlined code takes the flags of the function it is
#: inlined into, so a kernel sets them itself (``_factory.template``).
CONTRACT = frozenset({"contract"})

#: ``f(u, u_minus_1, theta)``: a generator (or its derivative) at ``u``.
#: Both ``u`` and ``u - 1`` are passed so that each function can use whichever
#: is exact: ``u - 1`` near 1, ``u`` near 0.
GENERATOR_SIG = types.float64(types.float64, types.float64, types.float64)

#: A contiguous float64 vector the kernel only reads. Declared read-only so
#: that memory-mapped files, ``np.frombuffer`` and shared arrays (all
#: read-only) go in without a copy; numba passes writable arrays here too.
InVec = types.Array(types.float64, 1, "C", readonly=True)
#: A contiguous float64 vector the kernel writes.
OutVec = types.float64[::1]


def jit(*args, **kwargs):
    """``numba.njit`` with the package defaults.

    ``error_model="numpy"`` makes 1/0 give inf rather than raise, which the
    kernels rely on at the edges u = 0 and p = 1. No fastmath: it would drop
    the NaN/inf semantics that saturation and the edge cases depend on;
    ``fastmath=CONTRACT`` alone is safe (it only fuses a * b + c).
    ``cache=True`` where numba finds a writable cache folder, else in memory
    (``cache=False`` asks for memory only). Used bare (``@jit``) or with a
    signature and options (``@jit(sig)``).
    """
    if len(args) == 1 and callable(args[0]) and not kwargs \
            and not isinstance(args[0], types.Type):
        return jit()(args[0])
    kwargs.setdefault("error_model", "numpy")
    if isinstance(kwargs.get("fastmath"), frozenset):
        kwargs["fastmath"] = set(kwargs["fastmath"])  # numba takes a set or a bool
    cache = kwargs.pop("cache", True)

    def decorate(fn):
        if not cache:
            return njit(*args, cache=False, **kwargs)(fn)
        try:
            disk = kernel_cache(fn)
        except RuntimeError as exc:  # "cannot cache function ...: no locator available"
            if "cannot cache" not in str(exc):
                raise
            return njit(*args, cache=False, **kwargs)(fn)
        if disk is None:  # a numba whose cache classes _cache does not know
            return njit(*args, cache=True, **kwargs)(fn)
        return _compile_with_cache(fn, disk, args, kwargs)

    return decorate


def _compile_with_cache(fn, disk, args, kwargs):
    """What ``njit(*args, cache=True, **kwargs)(fn)`` does, with ``disk`` (a
    :class:`~._cache.KernelCache`, which heals a damaged entry) in place of
    numba's own cache: the dispatcher is made lazy, given the cache, and then
    compiled for the signatures in ``args``, as numba's decorator does."""
    dispatcher = njit(**kwargs)(fn)
    if not isinstance(dispatcher, numba.core.dispatcher.Dispatcher):  # NUMBA_DISABLE_JIT
        return dispatcher
    dispatcher._cache = disk
    if args:
        signatures = args[0] if isinstance(args[0], list | tuple) else [args[0]]
        with typeinfer.register_dispatcher(dispatcher):
            for signature in signatures:
                dispatcher.compile(signature)
            dispatcher.disable_compile()
    return dispatcher


def parallel_kernel(signature, cache=True, **options):
    """A ``prange`` kernel for ``signature`` (with the further numba
    ``options``), compiled at its first launch, whose launches from several
    threads take turns (the module docstring says why)."""

    def decorate(fn):
        return _Launcher(fn, lambda: jit(signature, parallel=True, cache=cache, **options)(fn))

    return decorate


class _Launcher:
    """A parallel kernel's launcher (``parallel_kernel``): called like the
    kernel; ``kernel`` is the compiled dispatcher, for tests."""

    def __init__(self, fn, compile_kernel):
        functools.update_wrapper(self, fn)
        self._compile_kernel = compile_kernel

    @functools.cached_property
    def kernel(self):
        return self._compile_kernel()

    def __call__(self, *args):
        kernel = self.kernel
        with _LAUNCH_LOCK:
            return kernel(*args)


# The divergences' numba functions compile lazily, where a kernel first calls
# them (for float64 arguments), never at import: a kernel loaded from the disk
# cache carries its callees' code, so a process that finds its kernels there
# never compiles them, and one that does not compiles only those of the
# divergence it uses.
def generator(fn):
    """A generator-like function ``(u, u - 1, parameter) -> float``, compiled
    on first use."""
    return jit(fn)


def scaled_conjugate(fn):
    """An overflow-free ``(s, v, v - 1, parameter) -> s f*(v)``, for where
    f*(v) itself overflows float64 (a log-domain form), compiled on first
    use."""
    return jit(fn)


def closed_form(fn):
    """A closed-form margin ``(a, b, delta, parameter) -> (upper, lower)`` in
    probability for (a, b) = (p, 1 - p) (``Divergence.margins``), compiled
    on first use."""
    return jit(fn)


@scaled_conjugate
def scaled_conjugate_unknown(s, v, x, theta):
    """The default ``Divergence.scaled_conjugate``: no overflow-free form, so
    an overflow stays unresolved (NaN: the solver reports a bound next to it
    as OVERFLOW)."""
    return math.nan
