"""One command that reproduces BandPO's theory results: ``python -m paper_repro``."""

from .._extras import require

require("repro", "the reproduction (bandsolve.paper_repro)")
