"""The OpenRLHF plug-in under its first path: this module *is*
:mod:`bandsolve.integrations.openrlhf`, one module under two names.
``python -m bandsolve.torch.openrlhf`` runs its ``main``, OpenRLHF's
``train_ppo_ray`` with the band."""

import importlib
import sys

if __name__ == "__main__":
    importlib.import_module("bandsolve.integrations.openrlhf").main()
else:
    sys.modules[__name__] = importlib.import_module("bandsolve.integrations.openrlhf")
