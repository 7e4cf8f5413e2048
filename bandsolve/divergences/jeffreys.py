"""jeffreys: f(u) = (u - 1) log u, KL(pi_old || pi_new) + KL(pi_new || pi_old).

The symmetrised KL: the sum of kl's generator u - 1 - log u and rkl's
u log u - u + 1, and self-conjugate (v f(1/v) = f(v)), so its band treats
rising and falling probability alike.

Edges: f(0) = inf, so neither bound saturates for 0 < p < 1 (g at either end
of the simplex is infinite); f'(inf) = inf, so at p = 1 the lower bound is 1;
f''(1) = 2. Possible issues: as kl's, the lower bound is about exp(-delta/p)
for delta/p large, and underflows float64 past delta/p = 745.

No convex form (``bandsolve.convex`` and ``bandsolve verify`` leave it out):
cvxpy writes f as -entr(u) - log(u), but the programs in the ratio resolve a
lower bound only to about 1e-9 of the charted scale (measured: 5.9 min(r, |r -
1|) off at p = 3.4e-4, delta = 0.01, where r = 2e-13), and the log chart that
saves kl there needs f(e^y) convex in y, which (e^y - 1) y is not (below
y = -2). Its certificates (mpmath) and every other backend serve it.
"""

import math

from .._kernels import _vecmath as vm
from .._kernels._special import log_exact
from .._kernels._util import generator
from . import _exact
from ._record import Divergence, MpGenerator, VectorForms


# --- numba ---------------------------------------------------------------------
@generator
def f(u, x, theta):  # self-conjugate: v f(1/v) = (1 - v) log(1/v) = f(v)
    # a product of the exact x and a logarithm that keeps its digits near 1:
    # nothing cancels (0 * -inf does not arise: x = -1 at u = 0)
    return x * log_exact(u, x)


@generator
def df(u, x, theta):
    # f'(u) = log u + 1 - 1/u; x/u is exact near 1, 1 - 1/u survives u = inf
    if u > 2.0:
        return log_exact(u, x) + (1.0 - 1.0 / u)
    return log_exact(u, x) + x / u


# --- vector (the fast path's SIMD loop) ---------------------------------------------
@vm.vector_form
def value_and_slope(u, x, theta):
    log_u = vm.vlog_exact(u, x)
    return x * log_u, log_u + x / u


@vm.vector_form
def value_and_slope_at_log(log_u, u, x, x_m_log_u, theta):
    # f = x L, and its slope in L, u f'(u) = u L + x
    return x * log_u, u * log_u + x


VECTOR_FORMS = VectorForms(value_and_slope, value_and_slope_at_log, g_rel_error=8 * vm.EPS)


# --- mpmath --------------------------------------------------------------------
def exact_form(a):
    import mpmath as mp

    return MpGenerator(lambda u, x: x * _exact.log(u, x),
                       lambda u, x: _exact.log(u, x) + x / u,
                       mp.inf, -mp.inf, mp.inf)


def textbook(parameter):
    """f and f'(inf) as the textbook writes them, in mpmath: the tests' reference."""
    import mpmath as mp

    return (lambda u: (u - 1) * mp.log(u) if u > 0 else mp.inf), mp.inf


DIVERGENCE = Divergence(
    "jeffreys", "(u - 1) log u", f, df, f,
    f_at_zero=math.inf, slope_at_infinity=math.inf, curvature_at_one=2.0,
    exact_form=exact_form, vector_forms=VECTOR_FORMS, textbook=textbook)
