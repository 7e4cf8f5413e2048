"""The reward-entropy frontier (bandsolve.studies.frontier): deterministic
under a seed, its quick mode on a tiny grid, the matched-step-size
interpolation and the verdict's logic on constructed summaries."""

import csv
import math

import numpy as np
import pytest

from bandsolve.studies.bandit.task import BanditConfig
from bandsolve.studies.frontier import claims as frontier_claims
from bandsolve.studies.frontier import figure as frontier_figure
from bandsolve.studies.frontier import study as frontier
from bandsolve.studies.tables import write_csv

TINY = frontier.FrontierConfig(
    BanditConfig(contexts=2, vocab=60, tail_good=(20, 40), group=8, steps=8, seeds=2),
    optimizers=(("sgd", 2.5),), eps=(0.2, 0.5), eps_high=(0.28, 0.6), dcpo_scale=(1.0, 2.0),
    deltas=(0.05, 0.2))


@pytest.fixture(scope="module")
def tiny():
    return frontier.run(TINY, progress=False)


def test_tiny_study_writes_csv_and_figure_and_is_deterministic(tiny, tmp_path):
    header, table = tiny.table()
    write_csv(str(tmp_path / "dynamics_frontier.csv"), header, table)
    with open(tmp_path / "dynamics_frontier.csv", newline="") as fh:
        rows = [dict(r, value=float(r["value"]), **{m: float(r[m]) for m in frontier.METRICS})
                for r in csv.DictReader(fh)]
    assert len(rows) == len(tiny.rows)
    # the CSV holds every metric at full precision
    assert [r["entropy"] for r in rows] == [r["entropy"] for r in tiny.rows]
    again = frontier.run(TINY, progress=False)
    assert [r["entropy"] for r in again.rows] == [r["entropy"] for r in tiny.rows]
    # every rule on its grid (the bands also at the delta matched to PPO's eps = 0.2)
    grid = {(r["rule"], r["value"]) for r in rows if r["kind"] == "grid"}
    assert ("ppo", 0.2) in grid and ("band-tv", pytest.approx(0.1)) in [
        (rule, value) for rule, value in grid]
    assert {r["rule"] for r in rows} == {*frontier.CLIPS, *frontier.BANDS}
    assert all(r["step_kl"] >= 0 and 0 < r["entropy"] for r in rows)
    fig = frontier_figure.draw(tiny)
    assert len(fig.axes) == 2 and "band frontier" in fig.axes[0].get_title()
    (row,) = frontier_claims.rows(tiny, {})
    assert row.verdict == "descriptive" and "in tail mass it" in row.ours
    assert frontier_claims.endpoints(tiny) == {}


def test_matched_delta_is_calibrate_delta():
    grids = frontier.grids(TINY)
    tv = [value for _, value, _ in grids["band-tv"]]
    assert any(abs(v - 0.1) < 1e-9 for v in tv)  # tv: delta = eps p = 0.2 * 0.5


def _rows(rule, values_kl):
    return [dict(rule=rule, value=v, step_kl=kl) for v, kl in values_kl]


def test_matched_values_interpolate_log_log_and_report_unbracketed():
    rows = (_rows("ppo", [(0.2, 1e-3)]) + _rows("band-kl", [(0.01, 1e-4), (0.1, 1e-2)])
            + _rows("band-tv", [(0.01, 2e-3), (0.1, 5e-3)]))
    matched = frontier.matched_values(rows)
    assert matched["band-kl"] == pytest.approx(math.sqrt(0.01 * 0.1))  # midway in log-log
    assert matched["band-tv"] is None


def _summary(optimizer, curves):
    """curves: rule -> [(reward, entropy, ci)], as summarize would give."""
    out = {}
    for rule, points in curves.items():
        for k, (reward, entropy, ci) in enumerate(points):
            out[(optimizer, "grid", rule, float(k))] = {
                "reward": (reward, 0.0), "entropy": (entropy, ci), "tail_mass": (entropy, ci),
                "step_kl": (1.0, 0.0)}
    return out


@pytest.mark.parametrize("band_entropy, expected", [
    (2.0, "dominates"), (0.5, "is dominated"), (1.0, "neither dominates nor is dominated")])
def test_verdict_compares_at_equal_reward_beyond_the_ci(band_entropy, expected):
    clip = [(0.1, 1.0, 0.05), (0.5, 1.0, 0.05)]
    band = [(0.2, band_entropy, 0.05), (0.4, band_entropy, 0.05)]
    curves = {rule: clip for rule in frontier.CLIPS} | {rule: band for rule in frontier.BANDS}
    v = frontier.verdict(_summary("sgd", curves), "sgd", "entropy")
    assert v["verdict"] == expected and v["comparisons"] == 18


def test_verdict_without_reward_overlap_says_so():
    curves = {rule: [(0.1, 1.0, 0.1), (0.2, 1.0, 0.1)] for rule in frontier.CLIPS}
    curves |= {rule: [(0.8, 5.0, 0.1)] for rule in frontier.BANDS}
    v = frontier.verdict(_summary("sgd", curves), "sgd", "entropy")
    assert v["comparisons"] == 0 and v["verdict"].startswith("is not comparable")


def test_summary_ci_is_the_seed_ci():
    rows = [dict(optimizer="sgd", kind="grid", rule="ppo", value=0.2, seed=s, reward=x,
                 entropy=x, tail_mass=x, step_kl=x) for s, x in enumerate([1.0, 2.0, 3.0])]
    stats = frontier.summarize(rows)[("sgd", "grid", "ppo", 0.2)]["entropy"]
    assert stats[0] == pytest.approx(2.0)
    # 95% t interval, 2 degrees of freedom: 4.303 * 1 / sqrt(3)
    assert stats[1] == pytest.approx(4.303 / np.sqrt(3), rel=1e-3)


def test_unmatched_rules_report_their_kl_range():
    rows = [dict(optimizer="sgd", kind="grid", rule=rule, value=v, seed=0, step_kl=kl)
            for rule, v, kl in (("ppo", 0.2, 1e-3), ("band-kl", 0.01, 3e-3),
                                ("band-kl", 0.05, 5e-3), ("band-tv", 0.01, 5e-4),
                                ("band-tv", 0.1, 2e-3))]
    assert frontier.unmatched(rows, "sgd") == {"band-kl": (3e-3, 5e-3, 1e-3)}
