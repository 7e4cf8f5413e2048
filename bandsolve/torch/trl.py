"""The TRL plug-in under its first path (the one its docs import):
this module *is* :mod:`bandsolve.integrations.trl`, one module under two names."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("bandsolve.integrations.trl")
