"""Trainer plug-ins, one module each: verl (:mod:`.verl`), TRL (:mod:`.trl`),
SkyRL (:mod:`.skyrl`), OpenRLHF (:mod:`.openrlhf`).

Each maps its trainer's configuration onto :class:`bandsolve.torch.BandSettings`,
calls the shared :func:`bandsolve.torch.loss_terms` (or hands the band to the
trainer's own loss), and holds its part of ``bandsolve doctor``
(``doctor_checks()``, declared in pyproject.toml's ``bandsolve.doctor`` entry
points). Each imports its trainer, so import it only where that trainer is
installed. :mod:`.verl_entry_point` is the light module verl's plug-in
registry imports in every process. Importing this package imports none of them.
"""
