"""One command that reproduces BandPO's theory results: ``python -m paper_repro``,
or from Python ``run(ReproConfig(...))``."""

from .._extras import require

require("repro", "the reproduction (bandsolve.paper_repro)")

from .repro import ReproConfig, Reproduction, run  # noqa: E402  (after the check)

__all__ = ["ReproConfig", "Reproduction", "run"]
