"""Reward-entropy frontiers: each clipping rule over its own hyperparameter."""

from . import claims, figure, study  # noqa: F401  (the parts the report composes)
