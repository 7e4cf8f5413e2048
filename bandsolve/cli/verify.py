"""``bandsolve verify``: declared here, run by :mod:`bandsolve.verify`.

The arguments are declared without importing the verifier (cvxpy, mpmath and
the kernels): ``bandsolve verify --help`` answers at once.
"""

from __future__ import annotations

from . import COMMANDS, DEFAULT_OUT


def _run(args) -> int:
    from ..verify import main

    return main(args)


def add(sub) -> None:
    parser = sub.add_parser("verify", help=COMMANDS["verify"],
                            description="The fast backend against certified convex programs.")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help="folder for verify.md and verify.json, created if missing "
                             f"(default: ./{DEFAULT_OUT} in the current directory; '' for none)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=_run)
