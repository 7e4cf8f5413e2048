"""Shared numba decorators and the function-pointer signatures of divergences.

Every private kernel trusts its input: contiguous float64 arrays, already
validated by the public wrappers in ``bandsolve.api``.
"""

from numba import njit, types

#: ``f(u, u_minus_1, theta)``: a generator (or its derivative) at ``u``.
#: Both ``u`` and ``u - 1`` are passed so that each function can use whichever
#: is exact: ``u - 1`` near 1, ``u`` near 0.
GENERATOR_SIG = types.float64(types.float64, types.float64, types.float64)
GeneratorFn = types.FunctionType(GENERATOR_SIG)

#: ``closed_form(a, b, delta, theta) -> (upper margin, lower margin)`` in
#: probability space for (a, b) = (p, 1 - p); see ``_closed_forms``.
CLOSED_FORM_SIG = types.UniTuple(types.float64, 2)(
    types.float64, types.float64, types.float64, types.float64)
ClosedFormFn = types.FunctionType(CLOSED_FORM_SIG)


def jit(*args, **kwargs):
    """``numba.njit`` with the package defaults.

    ``error_model="numpy"`` makes 1/0 give inf rather than raise, which the
    kernels rely on at the edges u = 0 and p = 1. No fastmath: it would drop
    the NaN/inf semantics that saturation and the edge cases depend on.
    """
    kwargs.setdefault("cache", True)
    kwargs.setdefault("error_model", "numpy")
    return njit(*args, **kwargs)


def generator(fn):
    """Compile a generator-like function to the shared signature."""
    return jit(GENERATOR_SIG)(fn)


def closed_form(fn):
    """Compile a closed-form margin to the shared signature."""
    return jit(CLOSED_FORM_SIG)(fn)
