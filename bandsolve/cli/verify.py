"""``bandsolve verify``: the options parsed here, the sweep run by
:func:`bandsolve.verify.run`.

The arguments are declared without importing the verifier (cvxpy, mpmath and
the kernels): ``bandsolve verify --help`` answers at once.
"""

from __future__ import annotations

import argparse
import time

from . import COMMANDS, DEFAULT_OUT


def _run(args: argparse.Namespace) -> int:
    from .. import verify
    from .._files import output_folder

    if args.out:
        output_folder(args.out)  # before a sweep of minutes, not after it
    start = time.perf_counter()
    rows = verify.run(progress=not args.quiet)
    print(verify.markdown(rows))
    for r in rows:
        for line in (r.breaches[:3] + [f"unverified: {f}" for f in r.failures[:3]]):
            print(f"  {r.divergence}: {line}")
    elapsed = time.perf_counter() - start
    print("\n" + verify.summary(rows, elapsed))
    if args.out:
        md, _ = verify.write_report(args.out, rows, elapsed)
        print(f"wrote {md} and verify.json")
    return 0 if all(r.passed for r in rows) else 1


def add(sub) -> None:
    parser = sub.add_parser("verify", help=COMMANDS["verify"],
                            description="The fast backend against certified convex programs.")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help="folder for verify.md and verify.json, created if missing "
                             f"(default: ./{DEFAULT_OUT} in the current directory; '' for none)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=_run)
