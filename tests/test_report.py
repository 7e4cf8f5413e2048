"""The report: it runs end to end, every theory claim reproduces, it counts
what it decides and says what it is, its links and file names resolve, and
it composes the studies' rows (on a tiny configuration)."""

import csv
import dataclasses
import pathlib
import re

import pytest

from bandsolve.cli import main as cli_main
from bandsolve.studies import report as repro
from bandsolve.studies.claims import DESCRIPTIVE, NOT_RUN, VERDICTS, Claim
from bandsolve.studies.theory import claims as theory

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: the upward margin vanishes for Pearson chi2 (p (r_hi - 1) = sqrt(delta p (1 - p)))
CONTRADICTED = {"upward_margin_as_p_vanishes"}


@pytest.mark.parametrize("claim", theory.THEORY, ids=lambda f: f.__name__)
def test_theory_claim_verdict(claim):
    row = claim()
    expected = "contradicted" if claim.__name__ in CONTRADICTED else "reproduces"
    assert row.verdict == expected, row


def test_upward_margin_row_compares_against_the_closed_forms():
    """tv's margin is delta, chi2's is sqrt(delta p (1 - p)) (gaps printed at 1e-16)."""
    row = theory.upward_margin_as_p_vanishes()
    assert "tv 0.05 .. 0.05" in row.ours and "chi2 0.0222 .. 2.24e-05" in row.ours


def test_p_one_row_is_a_computed_limit_not_an_audit_of_the_papers_code():
    row = theory.limits_at_p_one()
    assert "0.049 gap" not in row.claim and "paper's code" not in row.claim
    assert "against 0.048771" in row.ours  # 1 - exp(-0.05)


def test_report_counts_the_four_verdicts():
    claims = [Claim("a", "", "", v) for v in
              ("reproduces", "reproduces", "contradicted", "consistent, not run")]
    text = repro.report(claims, 1.0)
    assert ("Of 4 rows with a verdict: 2 reproduces; 1 consistent, not run; 0 not reproduced "
            "at this scale; 1 contradicted.") in text


def test_regression_rows_that_decide_nothing_are_not_counted_as_verdicts():
    """A retired endpoint's row (the sequence task's (a)) read "not reproduced
    at this scale" and was counted so. A row is counted only with one of the
    four verdicts; a skipped part and a descriptive row are named apart."""
    claims = [Claim("a", "", "", "reproduces"), Claim("b", "", "", NOT_RUN),
              Claim("c", "", "", DESCRIPTIVE)]
    text = repro.report(claims, 1.0)
    assert ("Of 1 rows with a verdict: 1 reproduces; 0 consistent, not run; 0 not reproduced "
            "at this scale; 0 contradicted (1 not run, 1 descriptive, not counted).") in text


def test_repro_writes_the_report_and_figures(tmp_path):
    report = tmp_path / "REPORT.md"
    assert cli_main(["repro", "--out-report", str(report), "--figures", str(tmp_path),
                     "--skip-dynamics"]) == 0
    text = report.read_text()
    # no row for writing the figures: that is not a claim; the GPU cost row is
    # read from the committed measurement
    assert text.count("| reproduces |") == len(theory.THEORY) - len(CONTRADICTED) + 1
    assert "on one NVIDIA H200 on 2026-12-04" in text and "skipped (--skip-dynamics)" in text
    assert (tmp_path / "fig1_bounds.png").exists() and (tmp_path / "fig2_plane.pdf").exists()


def test_repro_writes_under_the_current_directory_by_default(tmp_path, monkeypatch):
    """Issue 9.7: outputs go to ./bandsolve-output, never into the package."""
    import bandsolve

    package_dir = __import__("pathlib").Path(bandsolve.__file__).parent
    before = {p for p in package_dir.rglob("*") if p.suffix in (".md", ".png", ".pdf")}
    monkeypatch.chdir(tmp_path)
    assert cli_main(["repro", "--skip-dynamics"]) == 0
    out = tmp_path / "bandsolve-output"
    text = (out / "REPORT.md").read_text()
    assert (out / "figures" / "fig1_bounds.png").exists()
    assert "](figures/fig1_bounds.png)" in text  # links resolve from the report
    after = {p for p in package_dir.rglob("*") if p.suffix in (".md", ".png", ".pdf")}
    assert after == before


def test_repro_skip_dynamics_links_only_the_figures_it_made(tmp_path):
    # REPORT.md linked dynamics_*.png that --skip-dynamics never made
    report = tmp_path / "REPORT.md"
    figures = tmp_path / "figures"
    assert cli_main(["repro", "--out-report", str(report), "--figures", str(figures),
                     "--skip-dynamics"]) == 0
    import re

    for target in re.findall(r"\]\(([^)]+\.png)\)", report.read_text()):
        assert (tmp_path / target).exists(), target
    assert "dynamics_bandit.png" not in report.read_text()


def test_report_links_the_figures_not_a_literal_placeholder():
    # a lost f-prefix once wrote "Figures: {links};" into REPORT.md
    text = repro.report([Claim("a", "", "", "reproduces")], 1.0, "figs",
                        ("fig1_bounds",))
    assert "{links}" not in text and "[`fig1_bounds.png`](figs/fig1_bounds.png)" in text


def test_resumed_report_does_not_pass_off_its_time_as_the_studys():
    """A report finished by ``--resume`` timed only its last invocation; it
    says so, and names the command that made it."""
    text = repro.report([Claim("a", "", "", "reproduces")], 118.0,
                        command="bandsolve repro --full --jobs 16 --resume DIR", resumed=True)
    assert "Generated by `bandsolve repro --full --jobs 16 --resume DIR` in 118 s (this " \
           "invocation; it reused the runs" in text
    assert "(this invocation" not in repro.report([Claim("a", "", "", "reproduces")], 1.0)


def _cost_csv(path, bisection_ms):
    rows = ["part,name,dtype,tokens,value,unit"]
    for dtype, ms in zip(("float32", "bfloat16"), bisection_ms):
        rows += [f"cost,bisection,{dtype},32768,{ms},ms",
                 f"cost,band_from_logp,{dtype},32768,{ms / 8},ms"]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_gpu_cost_row_is_computed_from_the_csv_against_a_stated_factor(tmp_path):
    gpu_cost_row = theory._gpu_cost
    text, verdict = gpu_cost_row(_cost_csv(tmp_path / "near.csv", (14.0, 11.0)))
    assert verdict == "reproduces" and "14.0 ms (float32)" in text and "8x less" in text
    _, verdict = gpu_cost_row(_cost_csv(tmp_path / "far.csv", (30.0, 11.0)))
    assert verdict == "not reproduced at this scale"
    text, verdict = gpu_cost_row(tmp_path / "missing.csv")
    assert verdict == "not run" and "not in an installed package" in text


def test_regression_the_quick_report_says_it_is_the_smoke_run():
    """The quick run's REPORT never said it was the smoke run, so its
    underpowered verdicts read like the full run's; it says so now, and the
    full run's does not."""
    rows = [Claim("a", "", "", "not reproduced at this scale")]
    quick = repro.report(rows, 1.0, full=False)
    assert "**This is the quick smoke run**" in quick and "`bandsolve repro --full`" in quick
    assert "smoke run" not in repro.report(rows, 1.0, full=True)
    assert "smoke run" not in repro.report(rows, 1.0, trained=False)


#: file names a report may cite: a checkout's paths and the figures
_CITED = re.compile(r"(?<![\w/.-])((?:docs|paper_repro|benchmarks|figures|tests)/[\w./-]+"
                    r"\.(?:md|png|pdf|csv|py|sh))")


@pytest.mark.parametrize("report", ["paper_repro/REPORT.md", "paper_repro/full/REPORT.md"])
def test_regression_every_file_a_committed_report_names_exists(report):
    """Row 2 cited "MATH.md's rules", a file the project does not have (it
    has docs/math.md). Every file a committed report names exists: a figure
    beside the report's figures folder, anything else in the checkout."""
    path = ROOT / report
    text = path.read_text()
    assert "MATH.md" not in text.replace("docs/math.md", "")
    names = set(_CITED.findall(text))
    assert names, "the pattern reads no file name: it tests nothing"
    for name in names:
        where = path.parent / name if name.startswith("figures/") and (
            path.parent / "figures").is_dir() else ROOT / name
        assert where.exists(), (report, name)


def _tiny_studies():
    from bandsolve.studies import autoregressive, bandit, frontier, sequence, stress
    from bandsolve.studies.bandit.task import BanditConfig
    from bandsolve.studies.sequence.task import SequenceConfig

    tiny_bandit = BanditConfig(contexts=4, vocab=60, tail_good=(20, 40), steps=6, seeds=2)
    configs = {
        # the tabular setting alone, at its smoke size: the transformer's smoke is the quick run's
        autoregressive: autoregressive.study.ARStudyConfig(
            None, autoregressive.configs.tabular_smoke()),
        bandit: tiny_bandit,
        stress: dataclasses.replace(tiny_bandit, epochs=8),
        sequence: SequenceConfig(width=16, layers=1, heads=2, sft_steps=5, prompts_per_step=4,
                                 group=4, epochs=2, minibatches=2, steps=4, eval_every=2, k=4,
                                 seeds=2, rules=("ppo", "clip-higher", "band-kl")),
        frontier: frontier.study.FrontierConfig(
            dataclasses.replace(tiny_bandit, steps=3), optimizers=(("sgd", 2.5),), eps=(0.2,),
            eps_high=(0.28,), dcpo_scale=(1.0,), deltas=(0.05,)),
    }
    return [repro.Study(part.study.NAME, part.study, part.figure, part.claims, config)
            for part, config in configs.items()]


def test_report_composes_every_studys_rows_on_a_tiny_configuration(tmp_path):
    """Every study at a tiny configuration, passed as an argument, as the
    report runs them: each writes its CSV and figure, and its rows come with
    its family's Holm p-values."""
    pytest.importorskip("torch")
    studies = _tiny_studies()
    rows = repro.train(str(tmp_path), studies)
    assert [s.name for s in studies] == [s.name for s in repro.studies(full=False)]
    assert len(rows) == 3 + 1 + 1 + 2 + 1
    assert all(row.verdict in (*VERDICTS, DESCRIPTIVE) for row in rows)
    assert rows[-1].verdict == DESCRIPTIVE  # the frontier decides nothing
    assert "PPO" in rows[0].ours and "At lr 0.3" in rows[1].ours
    assert "8 epochs per batch" in rows[4].ours and "pass@k, head-wrong" in rows[6].ours
    assert "Holm p" in rows[3].ours and "Clip binds" in rows[5].ours
    for study in studies:
        assert (tmp_path / f"{study.name}.png").exists()
        assert (tmp_path / f"{study.name}.csv").exists()
    with open(tmp_path / "dynamics_frontier.csv") as fh:
        assert len(list(csv.DictReader(fh))) < 100  # the tiny grid, not the study's
