"""The analysis scripts: ``python -m analysis.bounds | dynamics | sequence``.

Each runs the module of the same name in ``bandsolve.analysis``.
"""
