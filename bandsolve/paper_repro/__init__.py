"""One command that reproduces BandPO's theory results: ``python -m paper_repro``."""
