"""One command that reproduces BandPO's theory results: ``python -m paper_repro``,
or from Python ``run(ReproConfig(...))``."""

from .repro import ReproConfig, Reproduction, run

__all__ = ["ReproConfig", "Reproduction", "run"]
