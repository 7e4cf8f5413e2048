"""The autoregressive study's tuning, endpoints and run (issue 40): the
tuning's rules on constructed pilots (an edge grows the grid or stops, a
matched step is interpolated or refused, never a silent grid end), the
verdict rules on constructed tests, and a tiny study end to end, resumed."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")  # bandsolve.studies needs the repro extra

from bandsolve.studies.autoregressive import configs, endpoints, setting, study, tuning  # noqa: E402
from bandsolve.studies.jobs import Jobs  # noqa: E402
from bandsolve.studies.rules import make_rule  # noqa: E402
from bandsolve.studies.stats import paired_difference  # noqa: E402

PPO = tuning.Knob("ppo", "eps", (0.05, 0.1, 0.2, 0.4), (0.01, 0.8))


def test_the_best_knob_is_the_largest_mean_pilot_reward():
    assert tuning.best((0.05, 0.1, 0.2, 0.4), [0.3, 0.5, 0.45, 0.2]) == 0.1


@pytest.mark.parametrize("rewards, expected", [
    ([0.3, 0.5, 0.45, 0.2], None),  # inside: no growth
    ([0.6, 0.5, 0.45, 0.2], 0.025),  # at the smallest eps: halve it (the edge's own ratio)
    ([0.1, 0.2, 0.3, 0.4], 0.8),  # at the largest: double it, up to the limit
])
def test_an_optimum_on_an_edge_extends_the_grid_by_its_own_ratio(rewards, expected):
    got = tuning.extension(PPO, PPO.grid, rewards)
    assert got == (None if expected is None else pytest.approx(expected))


def test_an_optimum_on_an_edge_past_the_limits_stops_naming_the_rule():
    with pytest.raises(tuning.GridEdgeError, match="ppo: the best pilot final reward is at "
                                                   "the largest eps"):
        tuning.extension(PPO, (0.1, 0.2, 0.4, 0.8), [0.1, 0.2, 0.3, 0.4])


def test_no_clip_has_no_knob_to_tune():
    knob = tuning.Knob("no-clip", "", (0.0,))
    assert tuning.extension(knob, (0.0,), [0.4]) is None
    with pytest.raises(ValueError, match="no clip has no knob"):
        tuning.Knob("no-clip", "", (0.1, 0.2, 0.3))


def test_the_matched_step_interpolates_in_log_knob_and_log_kl():
    grid = (1e-3, 1e-2, 0.1)
    kls = [3 * d ** 0.5 for d in grid]  # a power law: linear in log-log
    assert tuning.matched(tuning.Knob("band-kl", "delta", grid), grid, kls,
                          3 * 0.03 ** 0.5) == pytest.approx(0.03, rel=1e-12)


@pytest.mark.parametrize("kls, why", [
    ([0.2, 0.3, 0.4], "no pair of grid points brackets it"),  # every step above PPO's
    ([0.05, 0.2, 0.05], "2 pairs bracket it"),  # not monotone
])
def test_a_matched_step_the_grid_does_not_bracket_once_is_an_error_not_the_nearest_end(kls, why):
    grid = (1e-3, 1e-2, 0.1)
    with pytest.raises(tuning.MatchError, match=f"band-kl: .* {why}"):
        tuning.matched(tuning.Knob("band-kl", "delta", grid), grid, kls, 0.1)


def test_every_rule_is_built_at_its_knob():
    assert make_rule("ppo", 0.1).eps == 0.1
    assert make_rule("clip-higher", 0.4).eps_high == 0.4
    assert make_rule("clip-higher", 0.4).eps_low == 0.2
    dcpo = make_rule("dcpo", 2.0)
    assert (dcpo.eps_low, dcpo.eps_high) == (0.32, 0.4)
    assert make_rule("band-tv", 0.01).delta == 0.01
    assert make_rule("band-kl", 0.01).divergence == "kl"
    with pytest.raises(ValueError, match="rule must be one of"):
        make_rule("ppo2", 0.1)


def _runs(shifts, sd=0.05, n=16, steps=4, seed=3):
    """Histories whose family tests have paired differences of mean shifts[i]:
    every band run is the base, and each test's baseline (a different run or
    metric for each) is moved against it."""
    rng = np.random.default_rng(seed)
    base = {m: np.full((steps, n), 0.5) + rng.normal(0, sd, (steps, n)) for m in
            ("tail_mass", "entropy", "reward")}
    base["step_kl"] = np.exp(rng.normal(-3, sd, (steps, n)))
    runs = {(lr, rule): {m: v.copy() for m, v in base.items()}
            for lr in ("primary", "high") for rule in ("ppo", "clip-higher", "no-clip",
                                                       "band-kl")}
    for (lr, metric, _, _, baseline), shift in zip(endpoints.FAMILY.values(), shifts):
        noise = rng.normal(0, sd, n)
        noise -= noise.mean()
        if metric == "step_kl":  # a larger baseline step favours the band
            runs[(lr, baseline)][metric] = base[metric] * np.exp(shift + noise)
        else:
            runs[(lr, baseline)][metric] = base[metric] - shift - noise
    return runs


@pytest.mark.parametrize("shifts, expected, rows", [
    ((0.3, 0.3, 0.3, 0.3, 0.3), "reproduces",
     {"tail": "reproduces", "stability": "reproduces", "entropy": "reproduces"}),
    ((0.3, 0.0, 0.3, 0.3, 0.3), "not reproduced at this scale",
     {"tail": "not reproduced at this scale", "entropy": "reproduces"}),
    ((0.3, -0.3, 0.3, 0.3, 0.3), "contradicted",
     {"tail": "contradicted", "stability": "reproduces"}),
    ((0.3, 0.3, -0.3, 0.3, 0.3), "contradicted", {"entropy": "contradicted"}),
    ((0.3, 0.3, 0.3, 0.0, -0.3), "contradicted", {"stability": "contradicted"}),
])
def test_the_verdict_rules_return_each_verdict(shifts, expected, rows):
    tests = endpoints.family(_runs(shifts), window=2)
    adjusted = endpoints.adjust(tests)
    for name, shift in zip(endpoints.FAMILY, shifts):
        assert np.sign(tests[name]["mean"]) == np.sign(round(shift, 6)) or abs(
            tests[name]["mean"]) < 1e-9, name
    verdict, won, lost = endpoints.verdict(tests, adjusted)
    assert verdict == expected
    assert set(won) == {n for n, s in zip(endpoints.FAMILY, shifts) if s > 0}
    assert set(lost) == {n for n, s in zip(endpoints.FAMILY, shifts) if s < 0}
    for row, want in rows.items():
        assert endpoints.verdict(tests, adjusted, endpoints.ROWS[row])[0] == want


def test_the_family_is_one_holm_family_of_five():
    from bandsolve.studies.stats import holm

    tests = endpoints.family(_runs((0.3, 0.01, 0.3, 0.3, 0.3)), window=2)
    adjusted = endpoints.adjust(tests)
    raw = [t["p"] for t in tests.values()]
    assert list(adjusted) == list(endpoints.FAMILY)
    np.testing.assert_array_equal(list(adjusted.values()), holm(raw))
    assert min(adjusted.values()) == pytest.approx(min(1, 5 * min(raw)))
    assert all(a >= p for a, p in zip(adjusted.values(), raw))


def test_the_rules_commit_holds_the_endpoints_that_judge_the_committed_results():
    """The page names the commit of the verdict rules; that commit must hold
    endpoints.py as it is now, and nothing else (the rules came alone)."""
    import pathlib
    import shutil
    import subprocess

    from bandsolve.studies.autoregressive import claims

    root = pathlib.Path(endpoints.__file__).resolve().parents[3]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    git = ["git", "-C", str(root)]
    if subprocess.run([*git, "cat-file", "-e", f"{claims.RULES_COMMIT}^{{commit}}"],
                      capture_output=True).returncode:
        pytest.skip(f"{claims.RULES_COMMIT} is not in this clone's history (a shallow clone?)")
    path = "bandsolve/studies/autoregressive/endpoints.py"
    then = subprocess.run([*git, "show", f"{claims.RULES_COMMIT}:{path}"], capture_output=True,
                          check=True).stdout
    assert then == (root / path).read_bytes()
    touched = subprocess.run([*git, "show", "--format=", "--name-only", claims.RULES_COMMIT],
                             capture_output=True, text=True, check=True).stdout.split()
    assert touched == [path]


def test_the_mechanism_reads_which_clip_share_the_band_changes():
    rng = np.random.default_rng(0)
    ppo = {"clip/pos/tail": 0.3 + rng.normal(0, 0.01, (5, 16)),
           "clip/pos/head": 0.1 + rng.normal(0, 0.01, (5, 16))}
    band = {"clip/pos/tail": ppo["clip/pos/tail"] - 0.1, "clip/pos/head": ppo["clip/pos/head"]
            + rng.normal(0, 0.01, (5, 16))}
    band["clip/pos/tail"][1, 0] = np.nan  # a step without a positive-advantage tail token
    mech = endpoints.mechanism({("primary", "band-kl"): band, ("primary", "ppo"): ppo})
    assert mech["frees the tail"]["holds"] and not mech["holds the head"]["holds"]
    assert mech["frees the tail"]["diff"]["n"] == 16  # the NaN step is skipped, not the seed
    band["clip/pos/tail"][:, 3] = np.nan  # a seed whose tail never had A > 0 is left out
    mech = endpoints.mechanism({("primary", "band-kl"): band, ("primary", "ppo"): ppo})
    assert mech["frees the tail"]["diff"]["n"] == 15
    assert endpoints.source(mech) == "the band frees the tail, and not the other"


SMOKE = configs.tabular_smoke()


def test_a_study_config_names_a_knob_per_rule_and_holds_ppo_at_the_target():
    with pytest.raises(ValueError, match="one knob per rule"):
        dataclasses.replace(SMOKE, knobs=SMOKE.knobs[1:])
    with pytest.raises(ValueError, match="must hold the matched step's target"):
        dataclasses.replace(SMOKE, knobs=configs.knobs(
            ppo=(0.1, 0.3, 0.5), **{k: v for k, v in configs.GRIDS.items() if k != "ppo"}))
    with pytest.raises(ValueError, match="primary_lr < high_lr"):
        dataclasses.replace(SMOKE, primary_lr=0.5)


def test_every_grid_has_one_size_and_the_issue_ranges():
    """The same pilot budget per rule: every knob's grid has as many points;
    the bands' span the issue's 1e-4 to 0.1, PPO's reaches below 0.02 and holds 0.2."""
    for config in (configs.tabular(), configs.transformer()):
        sizes = {len(k.grid) for k in config.knobs if k.rule != "no-clip"}
        assert len(sizes) == 1
        for rule in ("band-kl", "band-tv"):
            grid = config.knob(rule).grid
            assert grid[0] == pytest.approx(1e-4) and grid[-1] == pytest.approx(0.1)
        ppo = config.knob("ppo").grid
        assert ppo[0] <= 0.02 and tuning.TARGET[1] in ppo
        assert config.seeds == 16 and config.pilot_seeds >= 4


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The tabular smoke study, run once and kept for resuming."""
    kept = tmp_path_factory.mktemp("kept")
    return setting.run(SMOKE, Jobs(1, str(kept))), kept


def test_no_rule_runs_at_a_knob_not_chosen_on_pilot_seeds(smoke):
    result, _ = smoke
    for (which, label), knob in result.knob_of.items():
        rule, _, kind = label.partition("@")
        if kind == "":
            assert knob == result.tuned[(which, rule)]
            assert (which, rule, knob) in result.pilot  # a pilot point, not a guess
            grid = sorted(k for (w, r, k) in result.pilot if (w, r) == (which, rule))
            rewards = [result.pilot[(which, rule, k)]["reward"] for k in grid]
            assert knob == grid[int(np.argmax(rewards))]
            if rule != "no-clip":
                assert grid[0] < knob < grid[-1]  # an edge grows the grid
        elif kind == "matched":
            assert result.matched[rule] == knob
        else:
            assert (rule, knob) == tuning.TARGET
    assert set(result.matched) | set(result.unmatched) == {"clip-higher", "dcpo", "band-kl",
                                                          "band-tv"}


def test_the_study_pairs_every_run_over_the_same_seeds_and_steps(smoke):
    result, _ = smoke
    shapes = {h["reward"].shape for h in result.runs.values()}
    assert shapes == {(SMOKE.task.steps, SMOKE.seeds)}
    assert set(result.tests) == set(endpoints.FAMILY)
    assert result.verdict[0] in endpoints.VERDICTS and not result.decides
    for rule in result.matched:
        for metric, how in setting.MATCHED_METRICS:
            want = paired_difference(
                endpoints.per_seed(result.runs[("primary", f"{rule}@matched")], metric, how,
                                   SMOKE.window),
                endpoints.per_seed(result.runs[("primary", "ppo@0.2")], metric, how,
                                   SMOKE.window))
            assert result.matched_tests[(rule, metric)] == want


def test_a_resumed_study_equals_a_fresh_one(smoke):
    """Every task kept: the second run trains nothing and returns the same numbers."""
    result, kept = smoke
    again = setting.run(SMOKE, Jobs(1, str(kept)))
    assert again.tuned == result.tuned and again.matched == result.matched
    for key, history in result.runs.items():
        for metric, values in history.items():
            np.testing.assert_array_equal(again.runs[key][metric], values)


def _tabular_only(result):
    return study.Result(study.ARStudyConfig(None, SMOKE), None, result)


def test_the_figure_draws_each_tuned_rule_at_both_rates(smoke):
    from bandsolve.studies.autoregressive import figure

    fig = figure.draw(_tabular_only(smoke[0]))
    axes = fig.axes
    assert len(axes) == 6
    for ax in axes:
        assert len(ax.get_lines()) == len(tuning.RULES)
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert any(label.startswith("PPO eps") for label in labels)


def test_the_rows_say_what_decides_them(smoke):
    """With the tabular setting alone its family decides, read with the
    report's Holm p-values: a p-value the report adjusts differently changes
    the verdict the row reads."""
    from bandsolve.studies.autoregressive import claims

    result = _tabular_only(smoke[0])
    assert claims.endpoints(result) == smoke[0].tests
    rows = claims.rows(result, smoke[0].adjusted)
    assert [r.claim for r in rows] == [c for c, _ in claims.CLAIMS.values()]
    assert all("was not run" in r.ours and "Tabular (" in r.ours for r in rows)
    assert all(r.verdict == smoke[0].rows[row][0] for r, row in zip(rows, endpoints.ROWS))
    assert "smoke run (3 seeds" in rows[0].ours.lower()
    won = {name: 1e-6 if smoke[0].tests[name]["mean"] > 0 else 1.0 for name in endpoints.FAMILY}
    stability = claims.rows(result, won)[1]
    favours = all(smoke[0].tests[n]["mean"] > 0 for n in endpoints.ROWS["stability"])
    assert stability.verdict == ("reproduces" if favours else "not reproduced at this scale")
    page = claims.page(result)
    assert page.count("**tuned**") == 2 * (len(tuning.RULES))
    assert "| 0.1 | PPO | eps 0.2 |" in page and "Not run." in page


def test_the_report_writes_the_studys_csv_figure_and_page(tmp_path, smoke):
    """Through the report's own train(): the CSV holds every run, seed and
    step of both settings' table, and the page sits beside the figure."""
    import csv

    from bandsolve.studies import report
    from bandsolve.studies.autoregressive import claims, figure

    config = study.ARStudyConfig(None, SMOKE)
    rows = report.train(str(tmp_path), [report.Study(study.NAME, study, figure, claims, config)])
    assert len(rows) == 3
    with open(tmp_path / f"{study.NAME}.csv") as fh:
        table = list(csv.DictReader(fh))
    result = smoke[0]
    assert len(table) == len(result.runs) * SMOKE.seeds * SMOKE.task.steps
    assert {r["setting"] for r in table} == {"tabular"}
    assert (tmp_path / f"{study.NAME}.png").exists()
    assert "## The tabular policy (secondary)" in (tmp_path / f"{study.NAME}.md").read_text()
