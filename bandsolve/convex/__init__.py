"""The band as a convex program, solved with cvxpy: a check on the fast backends.

``band`` solves, per element, ``max / min r subject to g_f(p, r) <= delta,
0 <= r <= 1/p``: a convex program with a unique optimum (MATH.md).
``simplex_band`` solves it over a whole vocabulary, which checks the
one-dimensional reduction (the worst case rescales the rest of the mass in
proportion) without assuming it.

**Scaling.** The band's accuracy is stated relative to min(r, |r - 1|), so
the programs are written in a variable x whose absolute tolerance is one
relative to that measure (a *chart*):

* r = anchor + step x, with step = r_est - 1 (upper), -(1 - r_est) (lower,
  r_est > 1/2) or r_est (lower, r_est <= 1/2): x is 1 at the optimum;
* r = exp(y0 + x) for a lower bound <= 1/2 of a divergence with a log form
  (kl, neyman_chi2, alpha with a < 0: ``Divergence.convex_log``), whose lower bounds
  reach far below the float64 range;
* r = step x, anchored at 0, in the divergence's scaled form
  (``Divergence.convex_scaled``: jeffreys) where it has no log form, so
  that no cone entry is of r's size however far below 1 r lies.

The estimate r_est is the fast path's (:func:`bandsolve.band`); a poor one
costs accuracy, never correctness, and the chart is re-centred on the
solver's own answer when that lands more than 1% away. Tokens enter in
perspective form, s f(q/s) in scaled probabilities, which keeps every cone
entry of the size of the term it carries.

**Certified answers.** A solver's 'optimal' is no proof (Clarabel reported
'optimal' 6% away from the optimum on such programs). Each answer is
certified in mpmath (:mod:`bandsolve.certificate`); the solver ladder moves
to its next rung until the answer is certified to ``ACCEPT_WIDTH``, and the
certificates come back with the bounds.

Both programs use cvxpy Parameters throughout (DPP): a call compiles each
program once, whatever the number of elements.
"""

from .._extras import require

require("verify", "bandsolve.convex")  # cvxpy and clarabel, and mpmath for the certificates

from .bands import ConvexBand, band, simplex_band  # noqa: E402
from .ladder import ACCEPT_WIDTH, SOLVER_LADDER, SolverLadder  # noqa: E402
from .search import ConvexSolveError  # noqa: E402

__all__ = ["band", "simplex_band", "ConvexBand", "ConvexSolveError", "SolverLadder",
           "SOLVER_LADDER", "ACCEPT_WIDTH"]
