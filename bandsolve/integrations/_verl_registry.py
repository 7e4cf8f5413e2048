"""Registering a loss as ``bandpo`` in verl's policy-loss registry, checked.

Imports only the standard library and, when called, verl's registry: both
:mod:`.verl_entry_point` (run on ``import verl``) and :mod:`.verl` (the loss)
register through it, and neither imports the other at import time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["LOSS_NAME", "RegistrationError", "register"]

LOSS_NAME = "bandpo"


class RegistrationError(RuntimeError):
    """``bandpo`` could not be registered in verl's policy-loss registry."""


def register(loss: Callable) -> Callable:
    """Register ``loss`` as ``bandpo`` in verl's policy-loss registry and check,
    through verl's own look-up, that the name now resolves to it.

    Raises
    ------
    RegistrationError
        verl's registry cannot be imported, or ``bandpo`` resolves to anything
        else after registration; the cause is chained and logged as an error.
    """
    try:
        from verl.trainer.ppo.core_algos import get_policy_loss_fn, register_policy_loss

        register_policy_loss(LOSS_NAME)(loss)
        found = get_policy_loss_fn(LOSS_NAME)
        if found is not loss:
            where = f"{getattr(found, '__module__', '?')}.{getattr(found, '__qualname__', found)}"
            raise RuntimeError(f"verl's get_policy_loss_fn({LOSS_NAME!r}) returns {where} "
                               "after registration, not bandsolve's loss")
    except Exception as exc:
        message = (f"bandsolve could not register the policy loss {LOSS_NAME!r} in verl: "
                   f"{type(exc).__name__}: {exc}. A run with loss_mode={LOSS_NAME} would fail "
                   "or train with another loss; `bandsolve doctor` says more")
        # verl's entry-point loader logs our exception at debug level only
        logging.getLogger(__name__).error(message)
        raise RegistrationError(message) from exc
    return loss
