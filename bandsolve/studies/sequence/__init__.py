"""The sequence task with a wrong supervised head: does the band unfreeze the tail of a sequence policy?"""

from . import claims, figure, study  # noqa: F401  (the parts the report composes)
