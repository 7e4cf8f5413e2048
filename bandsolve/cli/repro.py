"""``bandsolve repro``: the paper's reproduction (``bandsolve.paper_repro``)."""

from __future__ import annotations

import argparse

from . import COMMANDS


def add(sub) -> None:
    parser = sub.add_parser("repro", help=COMMANDS["repro"],
                            description="Run the reproduction: the paper's theory claims, "
                                        "figures 1 and 2, the small dynamics study (quick "
                                        "unless --full), and a REPORT.md. Everything goes "
                                        "under --out; nothing is written into the package.")
    try:
        from ..paper_repro import repro
    except ImportError as exc:  # matplotlib or another dependency is missing
        message = f"bandsolve repro could not start: {exc}"
        parser.add_argument("arguments", nargs=argparse.REMAINDER)

        def cannot_start(args):
            raise ValueError(message)

        parser.set_defaults(run=cannot_start)
        return
    repro.add_arguments(parser)
    parser.set_defaults(run=repro.run)
