"""The solver ladder: which cvxpy solvers, with which settings, in turn."""

from __future__ import annotations

import dataclasses
import time
import warnings
from types import MappingProxyType

__all__ = ["SolverLadder", "SOLVER_LADDER", "ACCEPT_WIDTH", "run_rung"]


def _clarabel(tol: float, regularization: float | None = None, **extra):
    options = dict(tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, tol_ktratio=100 * tol,
                   max_iter=500, **extra)
    if regularization is not None:
        options["static_regularization_constant"] = regularization
    return "CLARABEL", options


@dataclasses.dataclass(frozen=True)
class SolverLadder:
    """(solver, settings) rungs, tried in turn until one's answer is
    certified (or, for a divergence without an mpmath form, ends 'optimal').

    Frozen, its settings read-only: pass another ladder to
    ``convex.band(..., ladder=)`` rather than editing the default.
    """

    rungs: tuple

    def __post_init__(self):
        object.__setattr__(self, "rungs", tuple(
            (str(name), MappingProxyType(dict(options))) for name, options in self.rungs))

    @classmethod
    def of(cls, solver: str) -> SolverLadder:
        """:data:`SOLVER_LADDER` for ``"CLARABEL"``; else one rung, ``solver``
        with its own defaults."""
        if solver.upper() == "CLARABEL":
            return SOLVER_LADDER
        return cls(((solver, {}),))


#: The default: first Clarabel with its tolerances tightened from the 1e-8
#: defaults and its static regularisation lowered from 1e-8 (which shifts the
#: optimum of these badly scaled programs by up to 1e-3); then variants that
#: certified the programs the first did not (measured on ``bandsolve
#: verify``'s sweep); last SCS at tight tolerances.
SOLVER_LADDER = SolverLadder((
    _clarabel(1e-10, 1e-12),
    _clarabel(1e-11, 1e-11),
    _clarabel(1e-10),
    _clarabel(1e-12, 1e-12),
    _clarabel(1e-9, 1e-10, equilibrate_enable=False),
    ("SCS", dict(eps_abs=1e-10, eps_rel=1e-10, max_iters=100_000, time_limit_secs=2.0)),
))

#: An answer certified to this width (in units of min(r, |r - 1|)) with KKT
#: residuals under ``certificate.KKT_TOLERANCE`` ends the ladder.
ACCEPT_WIDTH = 1e-8


def run_rung(problem, name: str, options) -> tuple:
    """(status, seconds) of one solve."""
    import cvxpy as cp

    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # handled through the status and the certificate
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            # no warm start: from the previous element's optimum Clarabel
            # often stops at 'optimal_inaccurate' or less accurate
            problem.solve(solver=name, warm_start=False, **options)
        status = problem.status
    except cp.error.SolverError:
        status = "solver error"
    return status, time.perf_counter() - start
