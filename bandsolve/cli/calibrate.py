"""``bandsolve calibrate``: the options parsed here, the deltas found by
:func:`bandsolve.calibrate.table`.

The arguments are declared without importing the kernels (numba), so that
``bandsolve calibrate --help`` answers at once; tests/test_import_cost.py checks
that the names below are :data:`bandsolve.calibrate.TARGETS` and the built-in
divergences.
"""

from __future__ import annotations

import argparse
import warnings

from . import COMMANDS, aligned_table, builtin_divergences

#: bandsolve.calibrate.TARGETS, spelled out for the parser
TARGETS = ("width", "mean_change", "mean_divergence", "clip_fraction")


def _load_sample(path: str, option: str):
    """A .npy file (no pickles), or text with one number per entry."""
    import os

    import numpy as np

    if not os.path.exists(path):
        # unlike `bounds --logp`, which takes numbers: say what this option wants
        raise ValueError(f"{option} {path}: no such file; {option} takes a .npy or text "
                         "file of log-probabilities, one per token (for the width at "
                         "one probability, use --at-p)")
    if os.path.isdir(path):
        raise ValueError(f"{option} {path}: a folder; {option} takes a .npy or text file "
                         "of log-probabilities, one per token")
    try:
        if path.endswith(".npy"):
            return np.load(path, allow_pickle=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an empty file: reported as an empty sample
            return np.loadtxt(path, dtype=float, ndmin=1)
    except ValueError as exc:
        # numpy's words for a file that is not an array of numbers (for a .npy
        # that is not one, it suggests allow_pickle=True, which would load
        # and run a pickle: never what this option wants)
        kind = "a .npy file of numbers" if path.endswith(".npy") else "one number per entry"
        detail = str(exc).splitlines()[0][:120]
        if "pickle" in detail:
            detail = "no .npy array of numbers in it: Python objects are never loaded"
        raise ValueError(f"{option} {path}: cannot be read as {kind} ({detail})") from None
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot be read ({exc.strerror or exc})") from None


def format_table(rows, *, clip: float, clip_high: float | None, target: str,
                 where: str) -> str:
    """The rows of :func:`bandsolve.calibrate.table` side by side, under a
    header naming the clip rule, the target and the sample (``where``)."""
    from ..calibrate import Unreachable

    high = clip_high if clip_high is not None else clip
    rule = f"[1 - {clip:.10g}, 1 + {high:.10g}]"
    cells, notes = [], []
    for r in rows:
        if isinstance(r, Unreachable):
            cells.append((r.divergence, "unreachable", "", "", ""))
            notes.append(f"{r.divergence}: {r.reason}")
            continue
        cells.append((r.divergence, f"{r.delta:.6g}", f"{r.goal:.6g}", f"{r.achieved:.6g}",
                      str(r.excluded)))
    header = f"delta matching the clip {rule}: target {target}, {where}"
    cols = ("divergence", "delta", "clip rule", "band at delta", "excluded")
    return aligned_table(header, cols, cells, notes)


def _run(args: argparse.Namespace) -> None:
    import numpy as np

    from ..calibrate import resolve_target, table

    logp = _load_sample(args.logp, "--logp") if args.logp else None
    new_logp = _load_sample(args.new_logp, "--new-logp") if args.new_logp else None
    width = args.target in (None, "width")
    at_p = args.at_p if args.at_p is not None or logp is not None or not width else 0.5
    rows = table(args.divergence, clip=args.match_clip, clip_high=args.clip_high, at_p=at_p,
                 logp=logp, new_logp=new_logp, target=args.target,
                 clip_fraction=args.clip_fraction, max_ratio=args.max_ratio)
    where = (f"at p = {at_p:.10g}" if logp is None else
             f"over {np.size(logp)} tokens of {args.logp}")
    print(format_table(rows, clip=args.match_clip, clip_high=args.clip_high,
                       target=resolve_target(args.target, at_p=at_p, new_logp=new_logp),
                       where=where))


def add(sub) -> None:
    divergences = builtin_divergences()
    parser = sub.add_parser(
        "calibrate", help=COMMANDS["calibrate"],
        description="Print, for each divergence, the delta at which the band matches the "
                    "clip rule [1 - eps_low, 1 + eps_high] (see bandsolve.calibrate for the "
                    "targets). Without --logp: the width at --at-p (default 0.5).")
    parser.add_argument("--match-clip", type=float, default=0.2,
                        help="the clip rule's eps_low (0.2)")
    parser.add_argument("--clip-high", type=float, default=None,
                        help="its eps_high (default: --match-clip; Clip-Higher uses 0.28)")
    parser.add_argument("--at-p", type=float, default=None,
                        help="reference probability of the width target (default 0.5)")
    parser.add_argument("--logp", default=None,
                        help="old log-probabilities, .npy or text: mean_change, "
                             "mean_divergence or (with --new-logp) clip_fraction")
    parser.add_argument("--new-logp", default=None,
                        help="new log-probabilities of the same tokens, for clip_fraction")
    parser.add_argument("--target", choices=TARGETS, default=None,
                        help="width (with --at-p), mean_change (default with --logp), "
                             "mean_divergence, clip_fraction (default with --new-logp)")
    parser.add_argument("--clip-fraction", type=float, default=None,
                        help="the share to match (default: the clip rule's on the batch)")
    parser.add_argument("--divergence", nargs="+", default=list(divergences),
                        help="divergences to calibrate (default: " + " ".join(divergences)
                             + ")")
    parser.add_argument("--max-ratio", type=float, default=None, help="cap on the upper bound")
    parser.set_defaults(run=_run)
