"""The figures and the dynamics study behind ``bandsolve repro`` (the ``plots`` extra)."""

from .._extras import require

require("plots", "bandsolve.analysis")
