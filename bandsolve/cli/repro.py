"""``bandsolve repro``: the options parsed here, the paper's reproduction run
by :func:`bandsolve.studies.report.run`.

The options are declared here, without importing the reproduction
(matplotlib, cvxpy, the kernels), so that ``bandsolve repro --help`` answers
at once; a missing dependency is reported when the command runs.
"""

from __future__ import annotations

import argparse

from . import COMMANDS, DEFAULT_OUT


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 process, got {value}")
    return value


def _run(args: argparse.Namespace) -> int:
    try:
        from ..studies import jobs, report
    except ImportError as exc:  # matplotlib or another dependency is missing
        raise ValueError(f"bandsolve repro could not start: {exc}") from exc
    # before torch is imported (the report imports it only to train): this
    # process's own runs then use the pinned CPU kernels too, with no worker
    jobs.pin_numerics()
    done = report.run(report.ReproConfig(
        out=args.out, out_report=args.out_report, figures=args.figures, full=args.full,
        skip_dynamics=args.skip_dynamics, jobs=args.jobs, resume=args.resume))
    print(done.text)
    print(f"wrote {done.report_path} and the figures in {done.figures_dir}")
    return 0


def add(sub) -> None:
    parser = sub.add_parser("repro", help=COMMANDS["repro"],
                            description="Run the reproduction: the paper's theory claims, "
                                        "figures 1 and 2, the small dynamics study (quick "
                                        "unless --full), and a REPORT.md. Everything goes "
                                        "under --out; nothing is written into the package "
                                        "(compiled kernels are cached in NUMBA_CACHE_DIR if "
                                        "set, else in the user cache folder, such as "
                                        "~/.cache/numba; torch's fused kernels, where torch "
                                        "is used, in TORCHINDUCTOR_CACHE_DIR if set, else "
                                        "in torch's default, a folder under the system's "
                                        "temporary directory).")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"folder for REPORT.md and figures/ (default ./{DEFAULT_OUT})")
    parser.add_argument("--out-report", help="where to write the report (default OUT/REPORT.md)")
    parser.add_argument("--figures", help="folder for the figures (default OUT/figures)")
    parser.add_argument("--full", action="store_true",
                        help="the long training studies, which decide the rows: the "
                             "autoregressive study on a small transformer and the tabular "
                             "policy, every rule tuned on pilot seeds, at 16 paired seeds "
                             "(about 2.5 hours on 2 cores; resumable with --resume)")
    parser.add_argument("--skip-dynamics", action="store_true",
                        help="theory claims and figures only (seconds)")
    parser.add_argument("--jobs", type=_positive_int, default=1,
                        help="processes for the dynamics study (default 1); runs are seeded "
                             "per task, so the results do not depend on it")
    parser.add_argument("--resume", metavar="DIR",
                        help="keep each finished run of the dynamics study in DIR and reuse "
                             "those already there: a stopped study resumes where it stopped "
                             "(entries are pickles: use a folder you trust)")
    parser.set_defaults(run=_run)
