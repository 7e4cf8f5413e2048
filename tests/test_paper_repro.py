"""The reproduction runs end to end and every theory claim reproduces."""

import pytest

from bandsolve.cli import main as cli_main
from bandsolve.paper_repro import repro

#: the upward margin vanishes for Pearson chi2 (p (r_hi - 1) = sqrt(delta p (1 - p)))
CONTRADICTED = {"upward_margin_as_p_vanishes"}


@pytest.mark.parametrize("claim", repro.THEORY, ids=lambda f: f.__name__)
def test_theory_claim_verdict(claim):
    row = claim()
    expected = "contradicted" if claim.__name__ in CONTRADICTED else "reproduces"
    assert row.verdict == expected, row


def test_upward_margin_row_compares_against_the_closed_forms():
    """tv's margin is delta, chi2's is sqrt(delta p (1 - p)) (gaps printed at 1e-16)."""
    row = repro.upward_margin_as_p_vanishes()
    assert "tv 0.05 .. 0.05" in row.ours and "chi2 0.0222 .. 2.24e-05" in row.ours


def test_p_one_row_is_a_computed_limit_not_an_audit_of_the_papers_code():
    row = repro.limits_at_p_one()
    assert "0.049 gap" not in row.claim and "paper's code" not in row.claim
    assert "against 0.048771" in row.ours  # 1 - exp(-0.05)


def test_report_counts_the_four_verdicts():
    claims = [repro.Claim("a", "", "", v) for v in
              ("reproduces", "reproduces", "contradicted", "consistent, not run")]
    text = repro.report(claims, 1.0)
    assert ("Of 4 rows: 2 reproduces; 1 consistent, not run; 0 not reproduced at this scale; "
            "1 contradicted.") in text


def test_repro_writes_the_report_and_figures(tmp_path):
    report = tmp_path / "REPORT.md"
    assert cli_main(["repro", "--out-report", str(report), "--figures", str(tmp_path),
                     "--skip-dynamics"]) == 0
    text = report.read_text()
    # no row for writing the figures: that is not a claim
    assert text.count("| reproduces |") == len(repro.THEORY) - len(CONTRADICTED)
    assert "not reproduced at this scale" in text and "skipped (--skip-dynamics)" in text
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
    text = repro.report([repro.Claim("a", "", "", "reproduces")], 1.0, "figs",
                        ("fig1_bounds",))
    assert "{links}" not in text and "[`fig1_bounds.png`](figs/fig1_bounds.png)" in text
