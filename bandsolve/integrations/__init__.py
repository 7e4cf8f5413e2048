"""Trainer plug-ins: verl (:mod:`.verl`), TRL (:mod:`.trl`), SkyRL (:mod:`.skyrl`),
OpenRLHF (:mod:`.openrlhf`).

Each maps its trainer's configuration onto :class:`bandsolve.torch.BandSettings`
and calls the shared :func:`bandsolve.torch.loss_terms`, and imports its
trainer, so import it only where that trainer is installed (also as
``bandsolve.torch.verl``, ``.trl``, ``.skyrl``, ``.openrlhf``). :mod:`.verl_entry_point` is
the light module verl's plug-in registry imports in every process. Importing
this package imports none of them.
"""
