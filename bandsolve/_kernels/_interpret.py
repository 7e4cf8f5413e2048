"""A kernel's own source run by the Python interpreter: a few elements solved
without compiling anything.

numba compiles a kernel the first time it runs after an install (1-5 s for
the root finder on 2 cores); for a handful of elements the interpreter runs
the very source numba compiles, with the very divergence forms
``_factory`` binds into it, in milliseconds. The result is the compiled
kernel's, bit for bit (tests/test_interpret.py), because the operations
are the same:

* float64 arithmetic is IEEE's in both, on numpy scalars here (the
  arguments, the literals and the module constants the code reads), under
  numba's error model ("numpy"): x / 0 is inf or NaN, never
  ``ZeroDivisionError`` (the kernels rely on it at u = 0 and p = 1), and no
  fused multiply-add (the templates interpreted here do not ask for
  ``contract``, and the series they share with the fast path come in as
  ``_vecmath.ieee`` twins, without it);
* ``math`` is libm in both (numba calls the same library), here through
  :data:`IEEE_MATH`, whose functions return what numba's do where Python's
  raise: log(0) = -inf, exp past float64 = inf, sqrt(-1) = NaN;
* ``prange`` is ``range`` (the same elements, on one thread), and every
  numba function a kernel calls is replaced by its own interpreted source.

Only scalar code is interpreted: the kernels whose loops numba vectorises
(the fast path, ``_vecmath``'s bit casts) always compile.
"""

from __future__ import annotations

import functools
import math
import types

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

__all__ = ["IEEE_MATH", "interpreted", "interpreted_template", "run"]

_F64 = np.float64


def _real(fn):
    """fn with numba's answers where Python's math raises: NaN for a domain
    error, inf of the right sign for an overflow; float64 results (so that
    the arithmetic that follows is IEEE's)."""

    @functools.wraps(fn)
    def guarded(*args):
        try:
            return _F64(fn(*args))
        except ValueError:
            return _F64(math.nan)
        except OverflowError:
            return _F64(math.inf)

    return guarded


def _pole(fn, at):
    """fn, with libm's value at its pole ``at`` (-inf) and NaN below it,
    where Python's raises: log, log2 and log10 at 0, log1p at -1."""
    @functools.wraps(fn)
    def guarded(x):
        if x > at:
            return _F64(fn(x))
        return _F64(-math.inf) if x == at else _F64(math.nan)

    return guarded


def _atanh(x):
    if -1.0 < x < 1.0:
        return _F64(math.atanh(x))
    return _F64(math.copysign(math.inf, x)) if abs(x) == 1.0 else _F64(math.nan)


def _pow(x, y):
    # numpy's scalar power is C's pow, with its values where math.pow raises
    # (pow(0, -1) = inf, an overflow to inf)
    return _F64(x) ** _F64(y)


def _ieee_math() -> types.SimpleNamespace:
    names = {}
    for name in dir(math):
        if name.startswith("_"):
            continue
        value = getattr(math, name)
        if isinstance(value, float):
            names[name] = _F64(value)
        elif name in ("floor", "ceil", "trunc", "isnan", "isinf", "isfinite", "isclose",
                      "copysign", "fabs", "frexp", "ldexp", "fsum", "prod", "comb", "perm",
                      "factorial", "gcd", "lcm", "isqrt"):
            names[name] = value  # exact, or integers, as in numba
        elif callable(value):
            names[name] = _real(value)
    names.update(log=_pole(math.log, 0.0), log2=_pole(math.log2, 0.0),
                 log10=_pole(math.log10, 0.0), log1p=_pole(math.log1p, -1.0), atanh=_atanh,
                 pow=_pow)
    return types.SimpleNamespace(**names)


#: ``math`` as the interpreted kernels see it (see the module docstring)
IEEE_MATH = _ieee_math()


class _InterpretedModule:
    """A module whose numba functions read as their interpreted sources."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return _replacement(getattr(self._module, name))


def _referenced(code) -> set:
    """The global names ``code`` and the functions defined inside it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced(const)
    return names


@functools.cache
def _ieee_code(code: types.CodeType) -> types.CodeType:
    """``code`` with its float literals as float64 scalars (those of the
    functions defined inside it too): an operation of two Python floats
    raises at 1.0 / 0.0, where numba's error model gives inf, and a literal
    handed to a function (``f(0.0, -1.0, theta)``) would carry that into it."""
    consts = tuple(_F64(c) if type(c) is float else _ieee_code(c) if isinstance(c, types.CodeType)
                   else c for c in code.co_consts)
    return code.replace(co_consts=consts)


def _replacement(value):
    """What an interpreted function reads in place of the global ``value``."""
    if type(value) is float:
        return _F64(value)
    if value is math:
        return IEEE_MATH
    if value is numba.prange:
        return range
    if isinstance(value, Dispatcher):
        return interpreted(value)
    if isinstance(value, types.ModuleType) and value is not np:
        return _InterpretedModule(value)
    return value


def interpreted_template(fn, namespace: dict):
    """fn's code with ``namespace`` as its globals, every global it reads that
    numba would compile replaced by its interpreted source: a template's
    source with ``_factory``'s bindings of its slots, callees and
    constants."""
    namespace = dict(namespace)
    for name in _referenced(fn.__code__):
        if name in namespace:
            namespace[name] = _replacement(namespace[name])
    closure = None
    if fn.__closure__:
        closure = tuple(types.CellType(_replacement(cell.cell_contents))
                        for cell in fn.__closure__)
    defaults = None if fn.__defaults__ is None else tuple(_replacement(d) for d in fn.__defaults__)
    copy = types.FunctionType(_ieee_code(fn.__code__), namespace, fn.__name__, defaults, closure)
    copy.__doc__ = fn.__doc__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    return copy


@functools.cache
def interpreted(fn):
    """The interpreted source of a numba function (a Dispatcher, or the Python
    function of one)."""
    py_func = fn.py_func if isinstance(fn, Dispatcher) else fn
    return interpreted_template(py_func, py_func.__globals__)


def run(kernel, *args):
    """``kernel(*args)``, float arguments as float64 scalars and numpy's
    floating-point warnings off, as compiled code raises none."""
    with np.errstate(all="ignore"):
        return kernel(*(_F64(a) if type(a) is float else a for a in args))
