"""The sequence task: its problems and wrong head, the exact answer tree and
metrics, deterministic GRPO, the variants, the selection on validation, the
endpoints, the CSV and figure, and resumed runs that equal a fresh one."""

import csv
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bandsolve.studies import rules  # noqa: E402
from bandsolve.studies.jobs import Jobs  # noqa: E402
from bandsolve.studies.sequence import claims as seq_claims  # noqa: E402
from bandsolve.studies.sequence import figure as seq_figure  # noqa: E402
from bandsolve.studies.sequence import study as seq_study  # noqa: E402
from bandsolve.studies.sequence import task as sequence  # noqa: E402
from bandsolve.studies.tables import write_csv  # noqa: E402

TINY_SEQUENCE = sequence.SequenceConfig(width=16, layers=1, heads=2, sft_steps=5,
                                        prompts_per_step=4, group=4, epochs=2, minibatches=2,
                                        steps=4, eval_every=2, k=4, seeds=2,
                                        rules=("ppo", "clip-higher", "band-kl"))


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
    runs = [seq_study._run_task((TINY_SEQUENCE, rules.RULES["band-kl"][0], 1, "band-kl"))
            for _ in range(2)]
    for metric in sequence.METRICS:
        assert len(runs[0][metric]) == 1 + TINY_SEQUENCE.steps // TINY_SEQUENCE.eval_every
        np.testing.assert_array_equal(runs[0][metric], runs[1][metric])


def test_sequence_results_do_not_depend_on_jobs():
    one = seq_study.run(TINY_SEQUENCE, jobs=1).runs
    two = seq_study.run(TINY_SEQUENCE, jobs=2).runs
    assert one.keys() == two.keys()
    for label in one:
        for metric in sequence.METRICS:
            np.testing.assert_array_equal(one[label][metric], two[label][metric])


def test_variants_have_no_duplicate_rules():
    with pytest.raises(ValueError, match="eps_high"):
        seq_study.variants(dataclasses.replace(TINY_SEQUENCE, eps_high=(0.2, 0.28)))
    # the full run's grids with every rule the task offers
    every = dataclasses.replace(seq_study.full_config(), rules=sequence.RULES)
    runs = seq_study.variants(every)
    assert len({repr(obj) for *_, obj in runs}) == len(runs)
    assert {rule for rule, *_ in runs} == set(sequence.RULES)


def test_the_full_sequence_run_keeps_every_rule_its_family_compares():
    """The full run leaves the descriptive control out (issue 30: its
    budget), never Band-KL, the family's controls or no clip."""
    full = seq_study.full_config()
    ran = {rule for rule, *_ in seq_study.variants(full)}
    assert ran == {"band-kl", "no-clip", *seq_claims.CONTROLS}
    assert len(seq_study.variants(full)) == 3 + 2 + 3 + 1  # the grids of PPO, Clip-Higher, Band-KL


def test_constant_control_bounds():
    old = torch.log(torch.tensor([0.01, 0.5, 0.95], dtype=torch.float64))
    lo, hi = rules.CONTROLS["constant"][0].bounds(old)
    assert torch.all(lo == 0.8) and torch.all(hi == 10.0)


def test_endpoints_read_each_seed_along_its_own_run():
    config = dataclasses.replace(TINY_SEQUENCE, steps=20, eval_every=10, matched_success=0.5)
    history = {"train/success": np.array([[0.2, 0.2], [0.4, 0.3], [0.8, 0.4]]),
               "train/entropy_given_success": np.array([[1.0, 1.0], [2.0, 2.0], [4.0, 3.0]])}
    # seed 0: success 0.5 a quarter of the way from 10 to 20, entropy 2 + 0.25 * 2;
    # seed 1 never gets there
    values = seq_claims.entropy_at_matched(history, config)
    assert values[0] == pytest.approx(2.5) and np.isnan(values[1])


def test_regression_the_retired_endpoint_is_gone_not_computed_and_filtered():
    """Endpoint (a), retired in issue 30, was still computed and then
    filtered out of the family, and the figure still drew its line at 1/2."""
    assert not any(name.startswith("(a)") for name in seq_claims.ENDPOINTS)
    assert not hasattr(seq_claims, "steps_to_half")


def test_select_chooses_on_validation_not_test():
    base = {m: np.zeros((2, 2)) for m in sequence.METRICS}
    good_val = dict(base, **{"validation/success": np.array([[0, 0], [0.9, 0.9]]),
                             "test/success": np.array([[0, 0], [0.1, 0.1]])})
    good_test = dict(base, **{"validation/success": np.array([[0, 0], [0.5, 0.5]]),
                              "test/success": np.array([[0, 0], [0.9, 0.9]])})
    chosen = seq_study.select({("ppo", 0.1): good_test, ("ppo", 0.3): good_val})
    assert chosen["ppo"][0] == 0.3


def test_sequence_study_writes_csv_and_figure(tmp_path):
    result = seq_study.run(TINY_SEQUENCE)
    header, rows = result.table()
    write_csv(str(tmp_path / "s.csv"), header, rows)
    assert result.runs[("ppo", 0.2)]["test/success"].shape == (3, TINY_SEQUENCE.seeds)
    assert set(result.selected) == {"ppo", "clip-higher", "band-kl"}
    fig = seq_figure.draw(result)
    assert all(len(ax.get_lines()) >= 3 for ax in fig.axes[:4])
    assert "endpoint a" not in " ".join(ax.get_title() for ax in fig.axes)
    with open(tmp_path / "s.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 3 * TINY_SEQUENCE.seeds * 3


def test_sequence_resumed_in_processes_equals_a_fresh_run(tmp_path):
    """Kept results written by worker processes and read back give the same
    study as one fresh run in this process."""
    fresh = seq_study.run(TINY_SEQUENCE, jobs=1).runs
    jobs = Jobs(2, resume=str(tmp_path / "kept"))
    seq_study.run(TINY_SEQUENCE, jobs=jobs)
    kept = sorted((tmp_path / "kept").iterdir())
    assert len(kept) == TINY_SEQUENCE.seeds * len(seq_study.variants(TINY_SEQUENCE))
    kept[0].unlink()  # as if stopped before the last run finished
    resumed = seq_study.run(TINY_SEQUENCE, jobs=jobs).runs
    assert resumed.keys() == fresh.keys()
    for label in fresh:
        for metric in sequence.METRICS:
            np.testing.assert_array_equal(resumed[label][metric], fresh[label][metric])
