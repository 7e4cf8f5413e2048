"""The studies behind ``bandsolve repro`` (the ``repro`` extra): one folder per
study, each with the same parts, and the shared pieces once each.

A training study's folder holds ``task.py`` (the environment and its exact
metrics), ``study.py`` (``run(config, jobs) -> Result``, a frozen dataclass
that writes nothing; its ``smoke_config()`` and ``full_config()``),
``figure.py`` (``draw(result)``) and ``claims.py`` (its pre-registered
``endpoints(result)`` and its report ``rows(result, adjusted)``). The theory
has its ``claims.py`` and ``figure.py``. Shared: :mod:`.stats`,
:mod:`.plotting`, :mod:`.tables`, :mod:`.jobs` (the runner, pinned numerics),
:mod:`.rules` and :mod:`.claims` (the claim record and verdicts).
:mod:`.report` composes them into REPORT.md.
"""

from .._extras import require

require("repro", "the reproduction (bandsolve.studies)")
