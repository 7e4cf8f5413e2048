"""verl's ``verl.plugins`` entry point: registers the policy loss ``bandpo``.

verl imports every ``verl.plugins`` entry point on ``import verl``, in every
process, whether or not a run uses ``bandpo``. This module therefore imports
only verl's registry; the loss itself (:mod:`bandsolve.integrations.verl`, which
brings numba and the kernels) is imported on the first call, and then
replaces this stand-in in the registry.

Importing this module registers ``bandpo`` or raises :class:`RegistrationError`.
verl's entry-point loader catches a plug-in's exception and logs it at debug
level only, where nobody sees it, and the run would train with the default
loss: the failure is also logged here as an error, before it is raised.
"""

from __future__ import annotations

from typing import Any

from ._verl_registry import LOSS_NAME, RegistrationError, register

__all__ = ["LOSS_NAME", "RegistrationError", "register", "compute_policy_loss_bandpo"]


def compute_policy_loss_bandpo(*args: Any, **kwargs: Any) -> Any:
    """Import :func:`bandsolve.integrations.verl.compute_policy_loss_bandpo` and call it."""
    from bandsolve.integrations.verl import compute_policy_loss_bandpo as loss

    return loss(*args, **kwargs)


register(compute_policy_loss_bandpo)
