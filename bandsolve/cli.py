"""The ``bandsolve`` command line: ``bandsolve bounds | calibrate | verify | export | repro | doctor``.

Further subcommands register themselves in ``_SUBCOMMANDS`` below.
"""

from __future__ import annotations

import argparse
import re
import sys

import numpy as np

PPO_EPS = 0.2
#: the loosest table certificate export writes: bandsolve.torch's own limit
_EXPORT_RTOL_LIMIT = 1e-5
# a negative number, exponent forms included (-1e-5, -.5e3), for argparse
_NEGATIVE_NUMBER = re.compile(r"^-((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf|infinity)$", re.IGNORECASE)


def _bounds_table(args) -> str:
    from . import api

    if args.logp is not None:
        logp = np.asarray(args.logp, dtype=float)
        lower, upper = api.band_from_logp(logp, args.delta, args.divergence,
                                          max_ratio=args.max_ratio)
        p = np.exp(logp)
    else:
        p = np.asarray(args.p, dtype=float)
        lower, upper = api.band(p, args.delta, args.divergence, max_ratio=args.max_ratio)
    cap = f", max_ratio={args.max_ratio:g}" if args.max_ratio is not None else ""
    header = (f"Band-{args.divergence} bounds, delta={args.delta:g}{cap}; "
              f"PPO clip is [{1 - PPO_EPS:g}, {1 + PPO_EPS:g}]")
    cols = ("p", "lower", "upper", "p(lower-1)", "p(upper-1)", "PPO p(-eps)", "PPO p(+eps)")
    rows = []
    for pi, lo, hi in zip(np.atleast_1d(p), np.atleast_1d(lower), np.atleast_1d(upper)):
        # + 0.0 turns the -0.0 of p = 0 (0 times a negative number) into 0
        pi, lo, hi = pi + 0.0, lo + 0.0, hi + 0.0
        rows.append((f"{pi:.6g}", f"{lo:.6g}", f"{hi:.6g}", f"{pi * (lo - 1) + 0.0:+.6g}",
                     f"{pi * (hi - 1):+.6g}" if np.isfinite(hi) else "inf",
                     f"{-pi * PPO_EPS + 0.0:+.6g}", f"{pi * PPO_EPS:+.6g}"))
    widths = [max(len(c), *(len(r[k]) for r in rows)) for k, c in enumerate(cols)]
    line = "  ".join(c.rjust(w) for c, w in zip(cols, widths))
    body = ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join([header, line, "-" * len(line), *body])


def _add_bounds(sub):
    parser = sub.add_parser("bounds", help="print the band for some probabilities",
                            description="Print ratio bounds and the allowed change in "
                                        "probability, beside PPO's clip.")
    # argparse takes "-1e-5" for an option; log-probabilities are written so
    parser._negative_number_matcher = _NEGATIVE_NUMBER
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--p", type=float, nargs="+", help="old probabilities in [0, 1]")
    group.add_argument("--logp", type=float, nargs="+", help="old log-probabilities <= 0")
    parser.add_argument("--delta", type=float, default=0.05, help="trust-region radius (0.05)")
    parser.add_argument("--divergence", default="kl",
                        help="kl, rkl, tv, chi2, neyman_chi2, hellinger, js or alpha:<a>")
    parser.add_argument("--max-ratio", type=float, default=None, help="cap on the upper bound")
    parser.set_defaults(run=lambda args: print(_bounds_table(args)))


def _add_verify(sub):
    from .verify import add_subcommand

    add_subcommand(sub)


def _run_export(args):
    from pathlib import Path

    from . import table

    if Path(args.out).suffix not in (".npz", ".pt"):
        raise ValueError(f"unknown table format {Path(args.out).suffix!r}: use .npz or .pt")
    data = table.build(args.divergence, args.delta, max_ratio=args.max_ratio)
    if not data.rtol <= _EXPORT_RTOL_LIMIT:
        # as bandsolve.torch refuses to use it: an exported table is for readers
        # that hold the same float32 promise
        raise ValueError(f"cannot tabulate {data.divergence} at delta={args.delta!r} to the "
                         f"float32 promise (certified rtol {data.rtol:.3g} > "
                         f"{_EXPORT_RTOL_LIMIT:g}; tables are certified exactly for delta from "
                         "1e-6 to 10): use the numpy API bandsolve.band, which solves every "
                         "delta")
    path = table.save(data, args.out)
    print(f"wrote {path}: {data.describe()}")


def _add_export(sub):
    parser = sub.add_parser(
        "export", help="write a certified bound table (.npz or .pt)",
        description="Tabulate the band of one divergence at one delta as a certified "
                    "piecewise polynomial in logit p (see bandsolve.table), for "
                    "bandsolve.torch.BandTable.load or any reader of the documented layout.")
    parser.add_argument("--divergence", default="kl",
                        help="kl, rkl, tv, chi2, neyman_chi2, hellinger, js or alpha:<a>")
    parser.add_argument("--delta", type=float, default=0.05, help="trust-region radius (0.05)")
    parser.add_argument("--max-ratio", type=float, default=None, help="cap on the upper bound")
    parser.add_argument("--out", required=True, help="output file, .npz (numpy) or .pt (torch)")
    parser.set_defaults(run=_run_export)


def _run_repro(args):
    try:
        from .paper_repro import repro
    except ImportError as exc:  # matplotlib or another dependency is missing
        raise ValueError(f"bandsolve repro could not start: {exc}") from None
    return repro.run(args)


def _add_repro(sub):
    from .paper_repro import repro

    parser = sub.add_parser("repro", help="reproduce the paper's results at small scale",
                            description="Run the reproduction: the paper's theory claims, "
                                        "figures 1 and 2, the small dynamics study (quick "
                                        "unless --full), and a REPORT.md. Everything goes "
                                        "under --out; nothing is written into the package.")
    repro.add_arguments(parser)
    parser.set_defaults(run=_run_repro)


def _add_calibrate(sub):
    from .calibrate import add_subcommand

    add_subcommand(sub)


def _add_doctor(sub):
    from .doctor import add_subcommand

    add_subcommand(sub)


_SUBCOMMANDS = (_add_bounds, _add_calibrate, _add_verify, _add_export, _add_repro, _add_doctor)


def build_parser() -> argparse.ArgumentParser:
    # the docstring's reST literals are for the API docs, not a terminal
    parser = argparse.ArgumentParser(prog="bandsolve",
                                     description=__doc__.splitlines()[0].replace("``", ""))
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from .api import BandSolveError

    try:
        result = args.run(args)
    except (ValueError, TypeError, BandSolveError, OSError, ImportError) as exc:
        print(f"bandsolve: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    raise SystemExit(main())
