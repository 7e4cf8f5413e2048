"""The tail-token bandit under SGD: does fixed clipping freeze the tail?"""

from . import claims, figure, study  # noqa: F401  (the parts the report composes)
