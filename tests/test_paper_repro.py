"""The reproduction runs end to end and every theory claim reproduces."""

import pytest

from bandsolve.cli import main as cli_main
from bandsolve.paper_repro import repro


@pytest.mark.parametrize("claim", repro.THEORY, ids=lambda f: f.__name__)
def test_theory_claim_reproduces(claim):
    row = claim()
    assert row.verdict == "reproduces", row


def test_repro_writes_the_report_and_figures(tmp_path):
    report = tmp_path / "REPORT.md"
    assert cli_main(["repro", "--out-report", str(report), "--figures", str(tmp_path),
                     "--skip-dynamics"]) == 0
    text = report.read_text()
    assert text.count("| reproduces |") == len(repro.THEORY) + 1  # the figures row too
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
