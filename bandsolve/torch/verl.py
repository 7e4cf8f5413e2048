"""The verl plug-in under its first path (the one verl configs and
``VERL_USE_EXTERNAL_MODULES`` name): this module *is*
:mod:`bandsolve.integrations.verl`, one module under two names."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("bandsolve.integrations.verl")
