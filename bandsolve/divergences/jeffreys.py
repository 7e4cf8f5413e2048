"""jeffreys: f(u) = (u - 1) log u, KL(pi_old || pi_new) + KL(pi_new || pi_old).

The symmetrised KL: the sum of kl's generator u - 1 - log u and rkl's
u log u - u + 1, and self-conjugate (v f(1/v) = f(v)), so its band treats
rising and falling probability alike.

Edges: f(0) = inf, so neither bound saturates for 0 < p < 1 (g at either end
of the simplex is infinite); f'(inf) = inf, so at p = 1 the lower bound is 1;
f''(1) = 2. Possible issues: as kl's, the lower bound is about exp(-delta/p)
for delta/p large, and underflows float64 past delta/p = 745.

Convex forms: the ratio form -entr(u) - log(u) and the perspective
rel_entr(q, s) + rel_entr(s, q) (kl's and rkl's cones), and a scaled form for
a ratio far below 1. With the first two alone, the programs resolved a lower
bound only to about 1e-9 of the charted scale (measured: 5.9 min(r, |r - 1|)
off at p = 3.4e-4, delta = 0.01, where r = 2e-13; uncertified at p = 1e-3,
delta = 0.1), and the log chart that saves kl there needs f(e^y) convex in
y, which (e^y - 1) y is not (below y = -2). The scaled form writes f(c x),
r = c x with x near 1, as c x log x + c log(c) x - log x - log c, so no cone
entry is of r's size; ``bandsolve verify``'s sweep (p from 1e-6 to 1 - 1e-6
and 1, delta from 0.01 to 1, and vocabularies) then certifies every bound to
1.0e-8 (measured with ``verify.run(("jeffreys",))``: the worst bound, the
lower at p = 1.8e-5 and delta = 0.01, is 6.8e-9 off, and the certificate's
half-decade brackets make that a width of 1.00001e-8). The lower bound
2.3e-25 at p = 1.76e-6, delta = 1e-4 (tests/test_convex.py) certifies to
3.2e-8 on the project's machine and passed 1e-8 on CI's: Clarabel's last
digits differ between CPUs. ``verify_tolerance`` is 1e-7, 3x the widest
seen (it was 1e-8, which both of those failed here).

Its range: outside that sweep (measured on p from 1e-12 to 1 - 1e-12, delta
from 1e-4 to 10) upper bounds for p below about 1e-9 and lower bounds for
1 - p below about 1e-10 come back with certificates up to 3e-2 wide, as rkl's
do; at delta <= 1e-3, lower bounds below about 1e-100 (p = 2.3e-7 at delta
1e-4, 1.8e-6 at 1e-3) come back uncertified (``certified`` False), since the
other token's cone entries, of size 1/delta, drown the charted token's.
``ConvexBand`` returns each with its certificate, which
``certificate.passes`` rejects: check it there.
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


VECTOR_FORMS = VectorForms(value_and_slope, value_and_slope_at_log=value_and_slope_at_log,
                           g_rel_error=8 * vm.EPS)


# --- cvxpy ---------------------------------------------------------------------
def convex_generator(w, a):
    import cvxpy as cp

    return -cp.entr(w) - cp.log(w)  # w log w - log w


def convex_perspective(q, s, a):
    import cvxpy as cp

    # s f(q/s) = q log(q/s) + s log(s/q): kl's and rkl's cones, each exact
    return cp.rel_entr(q, s) + cp.rel_entr(s, q), []


def convex_scaled(x, a):
    """w f(c x) = w c x log x + w c log(c) x - w log x - w log c: with x near
    1, every cone entry is of order 1 however small c (the ratio) is."""
    import cvxpy as cp

    wc, wc_log_c = cp.Parameter(nonneg=True), cp.Parameter()
    w, w_log_c = cp.Parameter(nonneg=True), cp.Parameter()
    term = wc * -cp.entr(x) + wc_log_c * x - w * cp.log(x) - w_log_c

    def assign(weight, c):
        log_c = math.log(c)
        # the u log u part, w c (x log x + log(c) x), is below 1e-17 of the
        # constraint's 1 for c < 1e-17 / (w (1 + |log c|)): no float64 sum
        # sees it, and coefficients like 1e-195 stall the solver (measured:
        # p = 2.3e-7, delta = 1e-4, where r = 5e-193, came back 0, uncertified)
        negligible = weight * c * (1.0 + abs(log_c)) < 1e-17
        wc.value = 0.0 if negligible else weight * c
        wc_log_c.value = 0.0 if negligible else weight * c * log_c
        w.value, w_log_c.value = weight, weight * log_c

    return term, assign


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
    convex_generator=convex_generator, convex_perspective=convex_perspective,
    convex_scaled=convex_scaled,
    exact_form=exact_form, vector_forms=VECTOR_FORMS, textbook=textbook,
    verify_tolerance=1e-7)
