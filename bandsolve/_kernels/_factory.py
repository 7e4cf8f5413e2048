"""Kernels specialised for one divergence, compiled once and cached.

A template (a function marked with :func:`template`, in ``_solver``) declares
the slots it reads, names from :data:`SLOT_FIELDS` (``GENERATOR``,
``DERIVATIVE``, ``CONJUGATE``, ``CLOSED_FORM``, ...), and the templates it calls.
:func:`specialise` compiles a copy of it whose globals bind those names to one
divergence's numba functions, and bind every template it calls to that
template's copy for the same divergence. Nothing is inferred from the code:
a template that reads a slot it did not declare finds the placeholder, which
raises. numba resolves a global function at
compile time, so each call is direct and LLVM inlines it: the loop is the one
a person would write by hand for that divergence, and every divergence shares
one source. The two alternatives cost more:

* passing the functions as first-class function values costs an indirect
  call per element and keeps the loop scalar (5x on the closed forms,
  benchmarks/RESULTS.md);
* passing a numba function as an ordinary argument specialises the callee
  too, but numba embeds the function object's address in the machine code,
  which its on-disk cache refuses.

Caching
-------
* In memory: one compiled copy per (template, functions, compile-time
  constants), so
  ``alpha_divergence(a)`` for every ``a`` shares one (``a`` is a run-time
  argument) and a divergence looked up again by name costs nothing; and one
  interpreted copy likewise (``specialise(..., interpret=True)``).
* On disk, through numba's cache, where every function is importable by its
  module and name (the built-in generators, or a user's module-level
  ``@njit`` functions). The entry is named by the functions and by a digest
  of their modules' source and of this package's kernel source, so an edit to
  any of them compiles anew instead of loading a stale kernel (numba itself
  only watches the file the template is in). A function it cannot name (a
  closure, as :meth:`~bandsolve.Divergence.from_generator` makes) compiles in
  memory, once per process.
"""

import functools
import hashlib
import inspect
import pathlib
import sys
import types as pytypes

from . import _interpret
from ._util import CONTRACT, jit, parallel_kernel

#: The globals a template reads its divergence's functions from, and the
#: ``Divergence`` field that fills each.
#: A dotted field is read through the record it names (``vector_forms.value_and_slope``).
SLOT_FIELDS = {"GENERATOR": "f", "DERIVATIVE": "df", "CONJUGATE": "f_conjugate",
               "SCALED_CONJUGATE": "scaled_conjugate", "CLOSED_FORM": "margins",
               "VECTOR_FORM": "vector_forms.value_and_slope",
               "LOG_VECTOR_FORM": "vector_forms.value_and_slope_at_log"}

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


def unbound(*args):
    """What a template's slot holds in its own module: a template run as it
    stands, or reading a slot it did not declare, raises."""
    raise TypeError("a kernel template runs only as compiled by _factory.specialise")


def template(signature=None, parallel=False, *, slots=(), calls=(), constants=(),
             contract=False, inline=False):
    """Mark a function as a template that reads ``slots`` (names from
    :data:`SLOT_FIELDS`) and the compile-time ``constants`` (global names
    that :func:`specialise` binds), and calls the templates ``calls``:
    compiled for ``signature`` (or lazily, for the argument types it meets,
    without one), as a ``prange`` kernel launched under the package's launch
    lock where ``parallel``, and with fused multiply-adds where ``contract``
    (``_util.CONTRACT``: LLVM's ``contract`` flag alone, which keeps NaN, inf
    and signed zeros; it must be on the outermost function, since inlining
    applies the caller's flags to the inlined code)."""
    unknown = set(slots) - set(SLOT_FIELDS)
    if unknown:
        raise ValueError(f"unknown template slots {sorted(unknown)}; known: {sorted(SLOT_FIELDS)}")

    def mark(fn):
        fn.template_options = (signature, parallel, contract, inline)
        fn.template_slots = frozenset(slots)
        fn.template_constants = frozenset(constants)
        fn.template_calls = tuple(calls)
        return fn

    return mark


def specialise(fn, divergence, *, interpret=False, **constants):
    """The template ``fn`` compiled for ``divergence`` (any object with the
    fields of :data:`SLOT_FIELDS`) and the values of its compile-time
    ``constants`` (each a separate compiled copy, in which LLVM folds the
    branches on it away), from the in-memory cache after the first call.

    ``interpret``: the template's source run by the Python interpreter
    instead (``_interpret``: no compile, the compiled kernel's bits; call it
    through ``_interpret.run``), for the few elements that do not pay for a
    compile.

    Raises TypeError where the template reads a function the divergence
    leaves as None (a closed-form kernel for a divergence without one), or
    where ``constants`` is not exactly the set it reads.
    """
    declared = _declared(fn, "constants")
    if set(constants) != declared:
        raise TypeError(f"{fn.__name__} reads the constants {sorted(declared)} "
                        f"(got {sorted(constants)})")
    functions = []
    for slot in sorted(_declared(fn, "slots")):
        value = divergence
        for field in SLOT_FIELDS[slot].split("."):
            value = getattr(value, field) if value is not None else None
        if value is None:
            raise TypeError(f"{fn.__name__} needs the divergence's {SLOT_FIELDS[slot]}, "
                            "which it does not define")
        functions.append((slot, value))
    if interpret:
        return _interpreted(fn, tuple(functions), tuple(sorted(constants.items())))
    return _compiled(fn, tuple(functions), tuple(sorted(constants.items())))


@functools.cache
def _declared(fn, kind: str) -> frozenset:
    """The names of ``kind`` (``"slots"`` or ``"constants"``) a template
    reads, itself or through the templates it calls, as declared."""
    names = set(getattr(fn, f"template_{kind}"))
    for callee in fn.template_calls:
        names |= _declared(callee, kind)
    return frozenset(names)


def _namespace(fn, functions, constants, callee_of) -> dict:
    """fn's globals with its slots, constants and callees bound (each callee
    by ``callee_of(callee, its functions, its constants)``)."""
    namespace = dict(fn.__globals__)
    namespace.update(dict(functions))
    namespace.update(constants)
    for callee in fn.template_calls:
        needed, needed_constants = _declared(callee, "slots"), _declared(callee, "constants")
        namespace[callee.__name__] = callee_of(
            callee, tuple(item for item in functions if item[0] in needed),
            tuple(item for item in constants if item[0] in needed_constants))
    return namespace


@functools.lru_cache(maxsize=512)
def _interpreted(fn, functions, constants=()):
    return _interpret.interpreted_template(fn, _namespace(fn, functions, constants,
                                                          _interpreted))


@functools.lru_cache(maxsize=512)
def _compiled(fn, functions, constants=()):
    bound = dict(functions)
    namespace = _namespace(fn, functions, constants, _compiled)
    copy = pytypes.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__,
                                fn.__closure__)
    copy.__doc__ = fn.__doc__
    copy.__module__ = fn.__module__
    key = _cache_key(bound.values())
    # numba names its cache files by the qualified name: one entry per
    # divergence, constants and source version, never a neighbour's kernel
    suffix = "".join(f"[{name}={value!r}]" for name, value in constants)
    copy.__qualname__ = f"{fn.__qualname__}[{key or f'{id(copy):x}'}]{suffix}"
    signature, parallel, contract, inline = fn.template_options
    options: dict[str, object] = {"cache": key is not None}
    if contract:
        options["fastmath"] = CONTRACT
    if inline:
        options["inline"] = "always"
    if parallel:
        return parallel_kernel(signature, **options)(copy)
    return jit(signature, **options)(copy) if signature is not None else jit(**options)(copy)


def _cache_key(functions):
    """A file-name-safe key naming the functions and the source they come
    from, or None where some function cannot be named."""
    digest = hashlib.sha256()
    names = []
    sources = {str(path) for path in _PACKAGE_DIR.glob("*.py")}
    for dispatcher in functions:
        py_func = getattr(dispatcher, "py_func", None)
        if py_func is None or not _importable(dispatcher, py_func):
            return None
        names.append(py_func.__name__)
        digest.update(f"{py_func.__module__}:{py_func.__qualname__};".encode())
        try:
            sources.add(inspect.getsourcefile(py_func) or "")
        except TypeError:
            return None
    for path in sorted(sources):
        try:
            digest.update(pathlib.Path(path).read_bytes())
        except OSError:
            return None
    return "-".join(names + [digest.hexdigest()[:16]])


def _importable(dispatcher, py_func) -> bool:
    """True where ``module.qualname`` resolves to this very dispatcher."""
    if "<locals>" in py_func.__qualname__:
        return False
    target = sys.modules.get(py_func.__module__)
    for part in py_func.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is dispatcher
