"""verl's ``verl.plugins`` entry point: registers the policy loss ``bandpo``.

verl imports every ``verl.plugins`` entry point on ``import verl``, in every
process, whether or not a run uses ``bandpo``. This module therefore imports
only verl's registry; the loss itself (:mod:`bandsolve.integrations.verl`, which
brings numba and the kernels) is imported on the first call, and then
replaces this stand-in in the registry.
"""

from __future__ import annotations

from typing import Any

from verl.trainer.ppo.core_algos import register_policy_loss

LOSS_NAME = "bandpo"


@register_policy_loss(LOSS_NAME)
def compute_policy_loss_bandpo(*args: Any, **kwargs: Any) -> Any:
    """Import :func:`bandsolve.integrations.verl.compute_policy_loss_bandpo` and call it."""
    from bandsolve.integrations.verl import compute_policy_loss_bandpo as loss

    return loss(*args, **kwargs)
