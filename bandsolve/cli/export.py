"""``bandsolve export``: a certified bound table written to a file."""

from __future__ import annotations

from . import COMMANDS, builtin_divergences

#: the loosest table certificate export writes: bandsolve.torch's own limit
_EXPORT_RTOL_LIMIT = 1e-5


def _run_export(args):
    from .. import table

    # before the build: a bad suffix or place, or .pt without torch, is said
    # at once, not after seconds of work
    table.check_destination(args.out)
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


def add(sub) -> None:
    parser = sub.add_parser(
        "export", help=COMMANDS["export"],
        description="Tabulate the band of one divergence at one delta as a certified "
                    "piecewise polynomial in logit p (see bandsolve.table), for "
                    "bandsolve.torch.BandTable.load or any reader of the documented layout.")
    parser.add_argument("--divergence", default="kl",
                        help=", ".join(builtin_divergences()) + " or alpha:<a>")
    parser.add_argument("--delta", type=float, default=0.05, help="trust-region radius (0.05)")
    parser.add_argument("--max-ratio", type=float, default=None, help="cap on the upper bound")
    parser.add_argument("--out", required=True, help="output file, .npz (numpy) or .pt (torch)")
    parser.set_defaults(run=_run_export)
