"""The autoregressive study under Adam: the tabular autoregressive task."""

from . import claims, figure, study  # noqa: F401  (the parts the report composes)
