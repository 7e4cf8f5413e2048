"""``bandsolve repro``: run every study, write its CSV and figure, collect its
claims, write REPORT.md. It composes and only composes.

Everything is written under ``--out`` (default ``./bandsolve-output``):
``DIR/REPORT.md`` and ``DIR/figures/``; ``--out-report`` and ``--figures``
place either elsewhere. Nothing is written inside the installed package.

The rows come from each study's ``claims`` module: the theory's (computed
from the public API), then each training study's, whose verdicts are read
from paired tests in pre-registered Holm families (:data:`FAMILIES`), then
the one measured row. The training runs are pinned to the same CPU kernels
on every machine (:mod:`.jobs`), so a rerun writes the same CSV bytes.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from .._files import atomic_write, output_folder, refuse_file_in_the_way
from .._progress import Progress
from .claims import DESCRIPTIVE, NOT_RUN, VERDICTS, Claim
from .jobs import PINNED_NUMERICS, Jobs, kernels_used
from .stats import holm
from .tables import markdown_table, write_csv
from .theory import claims as theory
from .theory import figure as theory_figure

__all__ = ["FAMILIES", "ReproConfig", "Reproduction", "Study", "report", "run", "studies",
           "train"]

#: the pre-registered Holm families: name -> what the report says of it
FAMILIES = {
    "ar": "the autoregressive study against tuned baselines (the transformer's five endpoints)",
    "sgd": "the SGD bandit, stress test and sequence task (their endpoints)",
}


@dataclasses.dataclass(frozen=True)
class Study:
    """One study as the report runs it: its modules and its configuration."""

    name: str
    study: Any
    figure: Any
    claims: Any
    config: Any


def studies(full: bool) -> list[Study]:
    """The training studies, in the report's order, at the quick or full size
    (imported here, not above: they need torch, which --skip-dynamics does not)."""
    from . import autoregressive, bandit, frontier, sequence, stress

    return [Study(part.study.NAME, part.study, part.figure, part.claims,
                  part.study.full_config() if full else part.study.smoke_config())
            for part in (autoregressive, bandit, stress, sequence, frontier)]


def train(figures_dir: str, studies: list[Study], jobs: int | Jobs = 1) -> list[Claim]:
    """Run each study, write its CSV and figure (and its page, ``NAME.md``,
    where its claims have one) into ``figures_dir``, and collect its rows,
    with each family's Holm-adjusted p-values."""
    from .plotting import save_figure

    done = []
    for study in studies:
        result = study.study.run(study.config, jobs)
        header, rows = result.table()
        write_csv(os.path.join(figures_dir, f"{study.name}.csv"), header, rows)
        save_figure(study.figure.draw(result), figures_dir, study.name)
        if hasattr(study.claims, "page"):  # a study's own page of every number behind its rows
            with atomic_write(os.path.join(figures_dir, f"{study.name}.md")) as fh:
                fh.write(study.claims.page(result))
        done.append((study, result, study.claims.endpoints(result)))
    adjusted: dict[str, float] = {}
    for family in FAMILIES:
        tests = {name: diff for study, _, endpoints in done if study.claims.FAMILY == family
                 for name, diff in endpoints.items()}
        adjusted.update(zip(tests, holm([d["p"] for d in tests.values()])))
    return [row for study, result, _ in done for row in study.claims.rows(result, adjusted)]


#: the figures the report links, when this run made them
FIGURES = ("fig1_bounds", "fig2_plane", "dynamics_ar", "dynamics_bandit", "dynamics_sequence",
           "dynamics_frontier", "dynamics_stress")


def _numerics_text() -> str:
    pins = ", ".join(f"{k}={v}" for k, v in PINNED_NUMERICS.items())
    used = kernels_used()
    here = "this run had them" if used <= {"AVX2"} else (
        f"this machine ran torch's {', '.join(sorted(used))} kernels instead: its numbers may "
        "differ from the committed run's by what docs/reproduce.md states")
    return (f"Every training run uses torch on one thread and the same CPU kernels on every "
            f"machine ({pins}; {here}), so that the same code and seeds write the same CSV "
            "bytes on any x86-64 machine with AVX2 (docs/reproduce.md).")


def report(claims: list[Claim], seconds: float, figures_link: str = "figures",
           figures_made=FIGURES, command: str = "bandsolve repro", resumed: bool = False,
           full: bool = False, trained: bool = True) -> str:
    """The report's markdown; ``figures_link`` is the figures folder relative
    to the report, so that its links resolve wherever both are written;
    ``figures_made`` are the figures this run wrote, the only ones linked;
    ``command`` the command line, ``resumed`` whether it reused runs kept by
    an earlier invocation (then its time is not the study's), ``full``
    whether the studies ran at their full size and ``trained`` whether they
    ran at all."""
    when = (" (this invocation; it reused the runs that earlier invocations kept, so the "
            "study took longer)" if resumed else "")
    lines = ["# Reproducing BandPO (Li et al., ICML 2026) with bandsolve", "",
             f"Generated by `{command}` in {seconds:.0f} s{when}. "
             "Each row computes the paper's claim afresh; nothing below is typed in by hand.", ""]
    if trained and not full:
        lines += ["**This is the quick smoke run**: every training study runs at a few seeds "
                  "and steps, so that the whole takes minutes. It shows that each part runs "
                  "end to end; its training verdicts have too few seeds to decide a claim (a "
                  "true effect often reads \"not reproduced at this scale\" here). The full "
                  "run decides them: `bandsolve repro --full` (a checkout's "
                  "`paper_repro/full/REPORT.md`).", ""]
    lines += markdown_table(("claim", "paper", "ours", "verdict"),
                            [(c.claim, c.paper, c.ours, c.verdict) for c in claims])
    counted = [c for c in claims if c.verdict in VERDICTS]
    counts = "; ".join(f"{sum(c.verdict == v for c in counted)} {v}" for v in VERDICTS)
    marks = [f"{n} {mark}" for mark in (NOT_RUN, DESCRIPTIVE)
             if (n := sum(c.verdict == mark for c in claims))]
    links = ", ".join(f"[`{name}.png`]({figures_link}/{name}.png)" for name in figures_made)
    families = "; ".join(FAMILIES.values())
    tail = (" Verdicts of the training rows come from paired differences over seeds (95% t "
            "intervals, Cohen's d_z), Holm-corrected within the pre-registered families: "
            f"{families}. {_numerics_text()}" if trained else "")
    lines += [f"Of {len(counted)} rows with a verdict: {counts}"
              + (f" ({', '.join(marks)}, not counted)" if marks else "") + "." + tail
              + f" Figures: {links}; every metric of the training studies is in the CSV beside "
              "its figure.", ""]
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ReproConfig:
    """What :func:`run` reproduces and where it writes (``bandsolve repro``'s options).

    ``out``: the folder for ``REPORT.md`` and ``figures/``; ``out_report`` and
    ``figures`` place either elsewhere. ``full``: the long training studies;
    ``skip_dynamics``: the theory claims and figures only. ``jobs``: processes
    for the studies (their runs are seeded per task, so results do not depend
    on it); ``resume``: a folder that keeps each finished run of the studies
    and reuses those already there (pickles: use a folder you trust).
    """

    out: str = "bandsolve-output"
    out_report: str | None = None
    figures: str | None = None
    full: bool = False
    skip_dynamics: bool = False
    jobs: int = 1
    resume: str | None = None


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """What :func:`run` made: the report's markdown and where it and the figures went."""

    text: str
    report_path: str
    figures_dir: str


def _training_skipped(why: str) -> Claim:
    return Claim("The training studies (entropy, tail tokens, stability, the sequence task)",
                 "Figures 3-5", why, NOT_RUN)


def run(config: ReproConfig = ReproConfig()) -> Reproduction:
    """Reproduce the claims and figures, and write the report (see :class:`ReproConfig`)."""
    report_path = config.out_report or os.path.join(config.out, "REPORT.md")
    figures_dir = config.figures or os.path.join(config.out, "figures")
    # before any work: a file in the way, or no permission, is said at once,
    # and a file in the way of any folder before any folder is made
    folders = [(os.path.dirname(os.path.abspath(report_path)),
                "--out-report's folder" if config.out_report else "--out"),
               (figures_dir, "--figures" if config.figures else "--out's figures folder")]
    # --resume names a folder whatever runs (a file there is refused), made
    # only when the training studies, the one part that keeps runs, run
    if config.resume:
        refuse_file_in_the_way(config.resume, "--resume")
        if not config.skip_dynamics:
            folders.append((config.resume, "--resume"))
    for folder, option in folders:
        refuse_file_in_the_way(folder, option)
    if os.path.isdir(report_path):
        raise IsADirectoryError(f"the report {report_path!r} would replace a folder: name a "
                                "file with --out-report")
    for folder, option in folders:
        output_folder(folder, option)
    start = time.perf_counter()
    kept_before = (os.path.isdir(config.resume) and os.listdir(config.resume)
                   if config.resume else [])
    claims = []
    with Progress(total=len(theory.THEORY) + 1, desc="paper_repro", unit="claim") as bar:
        for step in theory.THEORY:
            bar.set_postfix_str(step.__name__)
            claims.append(step())
            bar.update(1)
        bar.set_postfix_str("figures")
        theory_figure.write_figures(figures_dir)
        bar.update(1)
    trained = False
    if config.skip_dynamics:
        claims.append(_training_skipped("skipped (--skip-dynamics)"))
    else:
        try:
            import torch  # noqa: F401  (the studies train with bandsolve.torch)
        except ImportError:
            claims.append(_training_skipped("not run: it needs torch "
                                            "(pip install \"bandsolve[torch]\")"))
        else:
            claims += train(figures_dir, studies(config.full),
                            Jobs(config.jobs, config.resume, pinned=True))
            trained = True
    claims.append(theory.gpu_cost())
    link = os.path.relpath(os.path.abspath(figures_dir),
                           os.path.dirname(os.path.abspath(report_path))).replace(os.sep, "/")
    # a skipped or failed study leaves its figures unmade: link none of them
    made = [name for name in FIGURES
            if os.path.exists(os.path.join(figures_dir, f"{name}.png"))]
    command = " ".join(["bandsolve repro"] + ["--full"] * config.full
                       + ["--skip-dynamics"] * config.skip_dynamics
                       + [f"--jobs {config.jobs}"] * (config.jobs != 1)
                       + ["--resume DIR"] * (config.resume is not None))
    resumed = config.resume is not None and not config.skip_dynamics and bool(kept_before)
    text = report(claims, time.perf_counter() - start, link, made, command, resumed,
                  config.full, trained)
    with atomic_write(report_path) as fh:
        fh.write(text)
    return Reproduction(text, report_path, figures_dir)

