"""``bandsolve bounds``: the band for some probabilities, beside PPO's clip."""

from __future__ import annotations

import re

from . import COMMANDS, aligned_table, builtin_divergences

PPO_EPS = 0.2
# a negative number, exponent forms included (-1e-5, -.5e3), for argparse
_NEGATIVE_NUMBER = re.compile(r"^-((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf|infinity)$", re.IGNORECASE)


def _bounds_table(args) -> str:
    import numpy as np  # here, not at the top: `bandsolve bounds --help` needs none

    from .. import api

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
    return aligned_table(header, cols, rows)


def add(sub) -> None:
    parser = sub.add_parser("bounds", help=COMMANDS["bounds"],
                            description="Print ratio bounds and the allowed change in "
                                        "probability, beside PPO's clip.")
    # argparse takes "-1e-5" for an option; log-probabilities are written so
    parser._negative_number_matcher = _NEGATIVE_NUMBER
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--p", type=float, nargs="+", help="old probabilities in [0, 1]")
    group.add_argument("--logp", type=float, nargs="+", help="old log-probabilities <= 0")
    parser.add_argument("--delta", type=float, default=0.05, help="trust-region radius (0.05)")
    parser.add_argument("--divergence", default="kl",
                        help=", ".join(builtin_divergences()) + " or alpha:<a>")
    parser.add_argument("--max-ratio", type=float, default=None, help="cap on the upper bound")
    parser.set_defaults(run=lambda args: print(_bounds_table(args)))
