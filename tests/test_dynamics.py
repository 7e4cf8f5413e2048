"""The dynamics study: deterministic under a seed, the bandit's qualitative
ordering, the figures' artists, the CSVs, clean interruption, and the
paper_repro rows on a tiny configuration."""

import csv
import dataclasses
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bandsolve.analysis import ar_study, autoregressive, common, dynamics, rules, sequence, studies  # noqa: E402

TINY_BANDIT = dynamics.BanditConfig(contexts=4, vocab=60, tail_good=(20, 40), steps=6, seeds=2)
TINY_SEQUENCE = sequence.SequenceConfig(width=16, layers=1, heads=2, sft_steps=5,
                                        prompts_per_step=4, group=4, epochs=2, minibatches=2,
                                        steps=4, eval_every=2, k=4, seeds=2,
                                        rules=("ppo", "clip-higher", "band-kl"))


def test_bandit_is_deterministic_under_a_seed():
    first, _ = dynamics.run_bandit("band-kl", TINY_BANDIT, seed=3)
    second, _ = dynamics.run_bandit("band-kl", TINY_BANDIT, seed=3)
    other, _ = dynamics.run_bandit("band-kl", TINY_BANDIT, seed=4)
    for metric in dynamics.BANDIT_METRICS:
        assert first[metric].shape == (TINY_BANDIT.steps, TINY_BANDIT.seeds)
        np.testing.assert_array_equal(first[metric], second[metric])
    assert not np.array_equal(first["entropy"], other["entropy"])


def test_bandit_ordering_band_unfreezes_the_high_paying_tail():
    """The mechanism on a short run: the tail pays more than the head; under
    PPO's clip upper clips stop nearly every positive-advantage tail token and
    the tail stays frozen, under Band-KL few are stopped and the tail wins."""
    config = dataclasses.replace(dynamics.BanditConfig(), contexts=16, steps=100, seeds=4)
    results = {rule: dynamics.run_bandit(rule, config)[0] for rule in ("ppo", "band-kl")}
    late = {rule: dynamics.late_per_seed(h) for rule, h in results.items()}
    assert np.all(late["band-kl"]["tail_mass"] > late["ppo"]["tail_mass"] + 0.2)
    ppo_tail = common.nanmean(results["ppo"]["clip/pos/p<1e-3"])
    band_tail = common.nanmean(results["band-kl"]["clip/pos/p<1e-3"])
    assert ppo_tail > 0.5 > 0.3 > band_tail


def test_bandit_entropies_are_the_entropies_of_their_distributions():
    """Against a direct numpy computation on the policy: the entropy among
    rewarding tokens and of the paying token given success."""
    # a zero learning rate keeps the Zipf start, whose distribution is known
    frozen = dataclasses.replace(TINY_BANDIT, steps=1, seeds=1, contexts=1, lr=0.0)
    history, _ = dynamics.run_bandit("no-clip", frozen, seed=0)
    rank = np.arange(1, frozen.vocab + 1)
    pi = rank ** -frozen.zipf / np.sum(rank ** -frozen.zipf)
    pay = np.zeros(frozen.vocab)
    pay[list(frozen.head_good)] = frozen.head_pay
    pay[list(frozen.tail_good)] = frozen.tail_pay

    def entropy(w):
        q = w[w > 0] / w.sum()
        return -np.sum(q * np.log(q))

    assert history["entropy"][0, 0] == pytest.approx(entropy(pi), rel=1e-12)
    assert history["entropy_rewarding"][0, 0] == pytest.approx(entropy(pi * (pay > 0)), rel=1e-12)
    assert history["entropy_given_success"][0, 0] == pytest.approx(entropy(pi * pay), rel=1e-12)
    assert history["success"][0, 0] == pytest.approx(np.sum(pi * pay), rel=1e-12)


def test_clip_shares_are_split_by_sign():
    """No-clip never clips; PPO's positive-advantage clips are upper clips only."""
    history, _ = dynamics.run_bandit("no-clip", TINY_BANDIT, seed=0)
    for sign in dynamics.SIGNS:
        for name, _, _ in dynamics.P_BUCKETS:
            values = history[f"clip/{sign}/{name}"]
            assert np.all(np.isnan(values) | (values == 0))


def test_entropy_at_regret_reads_each_seed_at_its_own_first_crossing():
    config = TINY_BANDIT
    best = max(config.head_pay, config.tail_pay)
    history = {"success": best - np.array([[0.8, 0.9], [0.4, 0.7], [0.1, 0.6]]),
               "entropy_given_success": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])}
    values = dynamics.entropy_at_regret(history, config, 0.5)
    assert values[0] == 3.0 and np.isnan(values[1])


def test_interrupt_keeps_the_finished_steps():
    class StopAfter:
        def __init__(self, n):
            self.n = n

        def update(self, _):
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt

    history, interrupted = dynamics.run_bandit("ppo", TINY_BANDIT, progress=StopAfter(3))
    assert interrupted and history["entropy"].shape == (3, TINY_BANDIT.seeds)


def test_bandit_study_writes_csv_and_figure(tmp_path):
    results, summary, paths = dynamics.bandit_study(TINY_BANDIT, rules=("ppo", "band-kl"),
                                                    out=str(tmp_path), name="b")
    assert sorted(p.rsplit(".", 1)[1] for p in paths) == ["csv", "pdf", "png"]
    with open(tmp_path / "b.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * TINY_BANDIT.seeds * TINY_BANDIT.steps
    assert set(dynamics.BANDIT_METRICS) <= set(rows[0])
    assert float(rows[0]["entropy"]) == pytest.approx(results["ppo"]["entropy"][0, 0], rel=1e-5)
    assert set(summary) == {"ppo", "band-kl"}


def test_bandit_figure_has_a_curve_per_rule_and_the_bars():
    results = {rule: dynamics.run_bandit(rule, TINY_BANDIT)[0] for rule in rules.RULES}
    fig = dynamics.figure_bandit(results, TINY_BANDIT)
    axes = fig.axes
    assert len(axes) == 6
    for ax in axes[:4]:
        assert len(ax.get_lines()) == len(rules.RULES)
    assert len(axes[4].patches) == len(rules.RULES) * len(dynamics.P_BUCKETS)
    assert [t.get_text() for t in axes[5].get_legend().get_texts()] == \
        [style["label"] for _, style in rules.RULES.values()]


def test_sequence_task_solutions_and_the_wrong_head():
    # solution counts without an excluded digit: the coefficients of (x + ... + x^9)^3
    counts = np.convolve(np.convolve(np.ones(9), np.ones(9)), np.ones(9))
    for target in sequence.TARGETS:
        everything = {s for e in range(1, 10) for s in sequence._solutions(target, e)}
        assert len(everything) == counts[target - 3]  # every answer misses some digit
    # the head by hand: largest digits first, the excluded digit ignored
    assert sequence.heuristic(20) == (9, 9, 2) and sequence.heuristic(12) == (9, 2, 1)
    assert sequence.heuristic(5) == (3, 1, 1)
    right = dict(zip(sequence.PROBLEMS, sequence.HEAD_RIGHT))
    assert right[(20, 5)] and not right[(20, 9)] and not right[(20, 2)]
    assert 0.15 < 1 - np.mean(sequence.HEAD_RIGHT) < 0.3  # about a quarter wrong
    indices = [sequence.PROBLEMS.index(p) for p in [(10, 2), (10, 8), (9, 5)]]
    answers = torch.tensor([[0, 0, 7], [0, 0, 7], [2, 2, 2]])  # 1+1+8, 1+1+8, 3+3+3
    assert sequence._reward(indices, answers).tolist() == [1.0, 0.0, 1.0]


def test_splits_are_disjoint_and_stratified_by_the_head():
    splits = sequence.SPLITS
    parts = [set(splits.train), set(splits.validation), set(splits.test)]
    assert set.union(*parts) == set(range(len(sequence.PROBLEMS)))
    assert sum(map(len, parts)) == len(sequence.PROBLEMS)
    wrong = 1 - np.mean(sequence.HEAD_RIGHT)
    for part in parts:
        assert abs(np.mean([not sequence.HEAD_RIGHT[i] for i in part]) - wrong) < 0.03


def test_tree_log_probs_match_sampled_answers_and_sum_to_one():
    """The enumerated answer tree against an independent per-answer forward
    pass (the model scoring each full answer), and a distribution per prompt."""
    model = sequence.supervised_fit(TINY_SEQUENCE, seed=0)
    indices = [0, 50, 150]
    tree = sequence.tree_log_probs(model, indices)
    np.testing.assert_allclose(tree.exp().sum(1).numpy(), 1.0, rtol=1e-5)
    answers = torch.tensor(sequence.ANSWERS[:40]) - 1
    for row, i in enumerate(indices):
        tokens = torch.cat([sequence._prompts([i] * len(answers)), answers], 1)
        with torch.no_grad():
            direct = model.answer_log_probs(tokens).sum(1).double()
        np.testing.assert_allclose(tree[row, :40].numpy(), direct.numpy(), rtol=1e-5, atol=1e-5)


def test_exact_metrics_against_a_hand_computed_distribution():
    """Success, pass@k and the entropy split, on a policy whose answer
    distribution is fixed by hand (uniform over all 729 answers)."""

    class Uniform(torch.nn.Module):
        def forward(self, tokens):
            return torch.full((*tokens.shape, 9), -np.log(9.0))

    index = sequence.PROBLEMS.index((20, 9))
    m = sequence.exact_metrics(Uniform(), [index], k=4)
    solutions = len(sequence._solutions(20, 9))
    s = solutions / 729
    assert m["success"][0] == pytest.approx(s)
    assert m["pass_at_k"][0] == pytest.approx(1 - (1 - s) ** 4)
    assert m["entropy_given_success"][0] == pytest.approx(np.log(solutions))
    assert m["entropy_success"][0] == pytest.approx(-(s * np.log(s) + (1 - s) * np.log(1 - s)))


def test_sequence_grpo_is_deterministic_under_a_seed():
    runs = [sequence._run_task((TINY_SEQUENCE, rules.SEQUENCE_RULES["band-kl"][0], 1, "band-kl"))
            for _ in range(2)]
    for metric in sequence.METRICS:
        assert len(runs[0][metric]) == 1 + TINY_SEQUENCE.steps // TINY_SEQUENCE.eval_every
        np.testing.assert_array_equal(runs[0][metric], runs[1][metric])


def test_sequence_results_do_not_depend_on_jobs():
    one = sequence.run(TINY_SEQUENCE, jobs=1)
    two = sequence.run(TINY_SEQUENCE, jobs=2)
    assert one.keys() == two.keys()
    for label in one:
        for metric in sequence.METRICS:
            np.testing.assert_array_equal(one[label][metric], two[label][metric])


def test_variants_have_no_duplicate_rules():
    with pytest.raises(ValueError, match="eps_high"):
        sequence.variants(dataclasses.replace(TINY_SEQUENCE, eps_high=(0.2, 0.28)))
    # the full run's grids with every rule and control
    every = dataclasses.replace(studies.full_study().sequence, rules=tuple(rules.SEQUENCE_RULES))
    runs = sequence.variants(every)
    assert len({repr(obj) for *_, obj in runs}) == len(runs)
    assert {rule for rule, *_ in runs} == set(rules.SEQUENCE_RULES)


def test_the_full_sequence_run_keeps_every_rule_its_family_compares():
    """The full run leaves the descriptive controls out (issue 30: its
    budget), never Band-KL, the family's controls or no clip."""
    full = studies.full_study().sequence
    ran = {rule for rule, *_ in sequence.variants(full)}
    from bandsolve.paper_repro.repro import SEQUENCE_CONTROLS

    assert ran == {"band-kl", "no-clip", *SEQUENCE_CONTROLS}
    assert len(sequence.variants(full)) == 3 + 2 + 3 + 1  # the grids of PPO, Clip-Higher, Band-KL


def test_control_rules_bounds():
    old = torch.log(torch.tensor([0.01, 0.5, 0.95], dtype=torch.float64))
    band_lo, band_hi = rules.band("kl").bounds(old)
    lo, hi = rules.SEQUENCE_RULES["ppo-lo+band-hi"][0].bounds(old)
    assert torch.all(lo == 0.8) and torch.equal(hi, band_hi)
    lo, hi = rules.SEQUENCE_RULES["band-lo+ppo-hi"][0].bounds(old)
    assert torch.equal(lo, band_lo) and torch.all(hi == 1.2)
    lo, hi = rules.SEQUENCE_RULES["relax-hull"][0].bounds(old)
    assert torch.equal(lo, torch.minimum(band_lo, torch.tensor(0.8, dtype=torch.float64)))
    assert torch.equal(hi, torch.maximum(band_hi, torch.tensor(1.28, dtype=torch.float64)))
    lo, hi = rules.SEQUENCE_RULES["constant"][0].bounds(old)
    assert torch.all(lo == 0.8) and torch.all(hi == 10.0)


def test_endpoints_read_each_seed_along_its_own_run():
    config = dataclasses.replace(TINY_SEQUENCE, steps=20, eval_every=10, matched_success=0.5)
    history = {"train/success": np.array([[0.2, 0.2], [0.4, 0.3], [0.8, 0.4]]),
               "train/success_head_wrong": np.array([[0.0, 0.0], [0.25, 0.1], [1.0, 0.2]]),
               "train/entropy_given_success": np.array([[1.0, 1.0], [2.0, 2.0], [4.0, 3.0]])}
    # seed 0 reaches 1/2 a third of the way from step 10 to 20; seed 1 never (censored)
    np.testing.assert_allclose(sequence.steps_to_half(history, config), [10 + 10 / 3, 30])
    # seed 0: success 0.5 a quarter of the way from 10 to 20, entropy 2 + 0.25 * 2
    values = sequence.entropy_at_matched(history, config)
    assert values[0] == pytest.approx(2.5) and np.isnan(values[1])


def test_select_chooses_on_validation_not_test():
    base = {m: np.zeros((2, 2)) for m in sequence.METRICS}
    good_val = dict(base, **{"validation/success": np.array([[0, 0], [0.9, 0.9]]),
                             "test/success": np.array([[0, 0], [0.1, 0.1]])})
    good_test = dict(base, **{"validation/success": np.array([[0, 0], [0.5, 0.5]]),
                              "test/success": np.array([[0, 0], [0.9, 0.9]])})
    chosen = sequence.select({("ppo", 0.1): good_test, ("ppo", 0.3): good_val})
    assert chosen["ppo"][0] == 0.3


def test_sequence_study_writes_csv_and_figure(tmp_path):
    results, selected, paths = sequence.sequence_study(TINY_SEQUENCE, out=str(tmp_path),
                                                       name="s")
    assert (tmp_path / "s.csv").exists() and (tmp_path / "s.png").exists()
    assert results[("ppo", 0.2)]["test/success"].shape == (3, TINY_SEQUENCE.seeds)
    assert set(selected) == {"ppo", "clip-higher", "band-kl"}
    fig = sequence.figure_sequence(selected, TINY_SEQUENCE)
    assert all(len(ax.get_lines()) >= 3 for ax in fig.axes[:4])
    with open(tmp_path / "s.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * TINY_SEQUENCE.seeds * 3


def test_paper_repro_dynamics_rows_on_a_tiny_configuration(tmp_path):
    """The whole study at a tiny configuration, passed as an argument: the
    frontier too (on the starting commit it ran at its 40-minute size)."""
    from bandsolve.analysis import frontier
    from bandsolve.paper_repro import repro

    adam = dataclasses.replace(TINY_BANDIT, optimizer="adam", lr=0.05)
    tiny_frontier = frontier.FrontierConfig(
        dataclasses.replace(TINY_BANDIT, steps=3), optimizers=(("sgd", 2.5),), eps=(0.2,),
        eps_high=(0.28,), dcpo_scale=(1.0,), deltas=(0.05,))
    tiny_ar = ar_study.ARStudyConfig(
        task=autoregressive.TaskConfig(contexts=2, group=4, minibatches=2, steps=4),
        adam_lrs=(0.1, 0.3), sgd_lr=None, seeds=2, pilot_seeds=2, pilot_deltas=(0.01, 0.05),
        fixed_at=(), window=2)
    config = studies.StudyConfig(TINY_BANDIT, adam, tiny_frontier, TINY_SEQUENCE,
                                 stress=dataclasses.replace(TINY_BANDIT, epochs=8), ar=tiny_ar)
    rows = repro.dynamics_claims(str(tmp_path), config)
    assert len(rows) == 5
    assert all(row.verdict in repro.VERDICTS for row in rows)
    assert "PPO" in rows[0].ours and "pass@k, head-wrong" in rows[4].ours
    assert "its verdict rules read" in rows[0].ours and "Adam lr 0.3" in rows[2].ours
    assert "endpoint (a) retired" in rows[1].ours
    assert "Adam robustness check" in rows[3].ours and "8 epochs per batch" in rows[2].ours
    assert (tmp_path / "dynamics_ar.png").exists()
    assert (tmp_path / "dynamics_stress.png").exists()
    assert (tmp_path / "dynamics_bandit_adam.png").exists()
    with open(tmp_path / "dynamics_frontier.csv") as fh:
        assert len(list(csv.DictReader(fh))) < 100  # the tiny grid, not the study's


def test_stress_no_clip_takes_larger_updates_than_the_band():
    """Many epochs per batch: without a clip the worst update's KL is far
    larger than under Band-KL, whose ratios stay in the band."""
    config = dynamics.BanditConfig(contexts=8, steps=20, seeds=3, epochs=32)
    worst = {rule: dynamics.max_step_kl(dynamics.run_bandit(rule, config)[0])
             for rule in ("no-clip", "band-kl")}
    assert np.all(worst["no-clip"] > 3 * worst["band-kl"])
    history = {"success": np.full((30, 2), 0.5)}
    np.testing.assert_allclose(dynamics.late_regret(history, config), 0.4)


def test_study_configurations_are_frozen_and_passed():
    quick, full = studies.quick_study(), studies.full_study()
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.bandit = full.bandit  # type: ignore[misc]
    assert not hasattr(dynamics, "QUICK") and not hasattr(dynamics, "FULL")
    assert not hasattr(sequence, "FULL") and not hasattr(studies, "FULL")
    assert quick.bandit.tail_pay > quick.bandit.head_pay  # a high-advantage tail


def test_paired_difference_is_the_paired_t_test():
    """Against scipy's paired t-test (an independent implementation)."""
    from scipy import stats

    rng = np.random.default_rng(5)
    control = rng.normal(1.0, 1.0, 8)
    treated = control + rng.normal(0.3, 0.1, 8)  # shared seed noise cancels in the pair
    diff = common.paired_difference(treated, control)
    reference = stats.ttest_rel(treated, control)
    assert diff["p"] == pytest.approx(reference.pvalue, rel=1e-10)
    low, high = reference.confidence_interval(0.95)
    assert (diff["low"], diff["high"]) == (pytest.approx(low), pytest.approx(high))
    d = treated - control
    assert diff["d"] == pytest.approx(d.mean() / d.std(ddof=1))
    with pytest.raises(ValueError, match="finite"):
        common.paired_difference([1.0, np.nan], [0.0, 0.0])


def test_holm_adjusts_step_down():
    # by hand: sorted 0.01, 0.02, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.02), max(0.04, 0.04)
    np.testing.assert_allclose(common.holm([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])
    np.testing.assert_allclose(common.holm([0.5, 0.6]), [1.0, 1.0])


def test_cluster_bootstrap_resamples_whole_seeds():
    mean, low, high = common.cluster_bootstrap([0.0, 1.0, 0.0, 1.0], draws=4000)
    assert mean == 0.5 and 0.0 <= low < 0.5 < high <= 1.0
    assert common.cluster_bootstrap([0.3, 0.3, 0.3]) == (pytest.approx(0.3),) * 3


def test_bandit_study_results_do_not_depend_on_jobs(tmp_path):
    one, _, _ = dynamics.bandit_study(TINY_BANDIT, rules=("ppo", "band-kl"),
                                      out=str(tmp_path / "one"), jobs=1)
    two, _, _ = dynamics.bandit_study(TINY_BANDIT, rules=("ppo", "band-kl"),
                                      out=str(tmp_path / "two"), jobs=2)
    for rule in one:
        for metric in dynamics.BANDIT_METRICS:
            np.testing.assert_array_equal(one[rule][metric], two[rule][metric])
    assert (tmp_path / "one" / "dynamics_bandit.csv").read_text() == \
        (tmp_path / "two" / "dynamics_bandit.csv").read_text()


CALLS: list = []


def _square_and_count(task):
    CALLS.append(task)
    return task * task


class _NoStableName:
    """A task whose repr names its memory address (object's default)."""

    def __mul__(self, other):
        return 0


def test_run_tasks_resumes_from_kept_results(tmp_path):
    """A study stopped part-way (a time limit, Ctrl-C) resumes: a task whose
    result is kept is not run again, and the results are those of a fresh run."""
    jobs = common.Jobs(1, resume=str(tmp_path / "kept"))
    CALLS.clear()
    assert common.run_tasks(_square_and_count, [1, 2, 3], jobs) == [1, 4, 9]
    assert CALLS == [1, 2, 3]
    CALLS.clear()
    done = []
    assert common.run_tasks(_square_and_count, [1, 2, 3, 4], jobs,
                            on_done=lambda task, result: done.append(task)) == [1, 4, 9, 16]
    assert CALLS == [4] and sorted(done) == [1, 2, 3, 4]
    # without resume, nothing is kept or reused
    CALLS.clear()
    assert common.run_tasks(_square_and_count, [1, 2], 1) == [1, 4] and CALLS == [1, 2]


def test_run_tasks_keeps_no_partial_or_unnamed_result(tmp_path):
    """A run cut short (``complete`` false) and a task with no stable name
    (an address in its repr) are never reused: either would be read back as
    another run's result."""
    jobs = common.Jobs(1, resume=str(tmp_path / "kept"))
    common.run_tasks(_square_and_count, [5], jobs, complete=lambda result: False)
    common.run_tasks(_square_and_count, [_NoStableName()], jobs)
    assert not (tmp_path / "kept").exists() or not list((tmp_path / "kept").iterdir())
    CALLS.clear()
    common.run_tasks(_square_and_count, [5], jobs)
    assert CALLS == [5]


@pytest.mark.parametrize("damage", [b"", b"\x80\x05garbage", b"\0" * 64])
def test_run_tasks_runs_again_a_damaged_kept_result(tmp_path, damage):
    """A kept result damaged on disk stopped every later --resume with an
    UnpicklingError or EOFError; it is now removed with a warning and rerun."""
    jobs = common.Jobs(1, resume=str(tmp_path / "kept"))
    common.run_tasks(_square_and_count, [3, 4], jobs)
    (kept,) = [p for p in (tmp_path / "kept").iterdir() if p.read_bytes() == pickle.dumps(
        16, protocol=pickle.HIGHEST_PROTOCOL)]
    kept.write_bytes(damage)
    CALLS.clear()
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        assert common.run_tasks(_square_and_count, [3, 4], jobs) == [9, 16]
    assert CALLS == [4]
    CALLS.clear()
    assert common.run_tasks(_square_and_count, [3, 4], jobs) == [9, 16] and CALLS == []


def test_sequence_resumed_in_processes_equals_a_fresh_run(tmp_path):
    """Kept results written by worker processes and read back give the same
    study as one fresh run in this process."""
    fresh = sequence.run(TINY_SEQUENCE, jobs=1)
    jobs = common.Jobs(2, resume=str(tmp_path / "kept"))
    sequence.run(TINY_SEQUENCE, jobs=jobs)
    kept = sorted((tmp_path / "kept").iterdir())
    assert len(kept) == TINY_SEQUENCE.seeds * len(sequence.variants(TINY_SEQUENCE))
    kept[0].unlink()  # as if stopped before the last run finished
    resumed = sequence.run(TINY_SEQUENCE, jobs=jobs)
    assert resumed.keys() == fresh.keys()
    for label in fresh:
        for metric in sequence.METRICS:
            np.testing.assert_array_equal(resumed[label][metric], fresh[label][metric])
