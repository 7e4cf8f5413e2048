"""The high-off-policy stress test: the tail-token bandit with many updates per batch."""

from . import claims, figure, study  # noqa: F401  (the parts the report composes)
