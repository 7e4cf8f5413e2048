"""``bandsolve calibrate``: declared here, run by :mod:`bandsolve.calibrate`.

The arguments are declared without importing the kernels (numba), so that
``bandsolve calibrate --help`` answers at once; tests/test_hostile2.py checks
that the names below are :data:`bandsolve.calibrate.TARGETS` and the built-in
divergences.
"""

from __future__ import annotations

from . import COMMANDS

#: bandsolve.calibrate.TARGETS, spelled out for the parser
TARGETS = ("width", "mean_change", "mean_divergence", "clip_fraction")
#: bandsolve.BUILTIN_DIVERGENCES, the divergences compared by default
DIVERGENCES = ("kl", "rkl", "tv", "chi2", "neyman_chi2", "hellinger", "js")


def _run(args) -> None:
    from ..calibrate import table

    print(table(args))


def add(sub) -> None:
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
    parser.add_argument("--divergence", nargs="+", default=list(DIVERGENCES),
                        help="divergences to calibrate (default: " + " ".join(DIVERGENCES)
                             + ")")
    parser.add_argument("--max-ratio", type=float, default=None, help="cap on the upper bound")
    parser.set_defaults(run=_run)
