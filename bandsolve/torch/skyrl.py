"""The SkyRL plug-in under its first path (the one
``trainer.override_entrypoint=bandsolve.torch.skyrl`` names): this module *is*
:mod:`bandsolve.integrations.skyrl`, one module under two names."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("bandsolve.integrations.skyrl")
