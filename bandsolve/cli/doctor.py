"""``bandsolve doctor``: the options parsed here, the checks run by
:func:`bandsolve.doctor.diagnose`."""

from __future__ import annotations

import argparse

from . import COMMANDS


def _run(args: argparse.Namespace) -> int:
    """Print the report (or JSON with ``--json``). Exit code: 1 if any check
    failed (ok=False), else 0; warnings and absent optional packages give 0."""
    import json

    from .. import doctor

    checks = doctor.diagnose()
    if args.json:
        print(json.dumps([c.as_dict() for c in checks], indent=2))
    else:
        print(doctor.format_report(checks))
    return doctor.exit_code(checks)


def add(sub) -> None:
    parser = sub.add_parser("doctor", help=COMMANDS["doctor"],
                            description="bandsolve doctor: check that bandsolve and its trainer "
                                        "plug-ins work here.")
    parser.add_argument("--json", action="store_true",
                        help="print the checks as JSON (a list of objects) instead")
    parser.set_defaults(run=_run)
