"""``python -m paper_repro``: runs ``bandsolve.paper_repro`` (``bandsolve repro``)."""
