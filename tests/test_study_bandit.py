"""The tail-token bandit and the stress test: deterministic under a seed, the
bandit's qualitative ordering, its entropies, clip shares, the figure and
the CSV, clean interruption, and results that do not depend on jobs."""

import csv
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bandsolve.studies import rules  # noqa: E402
from bandsolve.studies.bandit import claims as bandit_claims  # noqa: E402
from bandsolve.studies.bandit import figure as bandit_figure  # noqa: E402
from bandsolve.studies.bandit import study as bandit_study  # noqa: E402
from bandsolve.studies.bandit import task  # noqa: E402
from bandsolve.studies.stats import nanmean  # noqa: E402
from bandsolve.studies.stress import study as stress_study  # noqa: E402
from bandsolve.studies.tables import write_csv  # noqa: E402
from bandsolve.torch.losses import P_BUCKETS  # noqa: E402

TINY_BANDIT = task.BanditConfig(contexts=4, vocab=60, tail_good=(20, 40), steps=6, seeds=2)


def test_bandit_is_deterministic_under_a_seed():
    first, _ = task.run_bandit("band-kl", TINY_BANDIT, seed=3)
    second, _ = task.run_bandit("band-kl", TINY_BANDIT, seed=3)
    other, _ = task.run_bandit("band-kl", TINY_BANDIT, seed=4)
    for metric in task.METRICS:
        assert first[metric].shape == (TINY_BANDIT.steps, TINY_BANDIT.seeds)
        np.testing.assert_array_equal(first[metric], second[metric])
    assert not np.array_equal(first["entropy"], other["entropy"])


def test_bandit_ordering_band_unfreezes_the_high_paying_tail():
    """The mechanism on a short run: the tail pays more than the head; under
    PPO's clip upper clips stop nearly every positive-advantage tail token and
    the tail stays frozen, under Band-KL few are stopped and the tail wins."""
    config = dataclasses.replace(task.BanditConfig(), contexts=16, steps=100, seeds=4)
    results = {rule: task.run_bandit(rule, config)[0] for rule in ("ppo", "band-kl")}
    late = {rule: task.late_per_seed(h) for rule, h in results.items()}
    assert np.all(late["band-kl"]["tail_mass"] > late["ppo"]["tail_mass"] + 0.2)
    ppo_tail = nanmean(results["ppo"]["clip/pos/p<1e-3"])
    band_tail = nanmean(results["band-kl"]["clip/pos/p<1e-3"])
    assert ppo_tail > 0.5 > 0.3 > band_tail


def test_bandit_entropies_are_the_entropies_of_their_distributions():
    """Against a direct numpy computation on the policy: the entropy among
    rewarding tokens and of the paying token given success."""
    # a zero learning rate keeps the Zipf start, whose distribution is known
    frozen = dataclasses.replace(TINY_BANDIT, steps=1, seeds=1, contexts=1, lr=0.0)
    history, _ = task.run_bandit("no-clip", frozen, seed=0)
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
    history, _ = task.run_bandit("no-clip", TINY_BANDIT, seed=0)
    for sign in rules.SIGNS:
        for name, _, _ in P_BUCKETS:
            values = history[f"clip/{sign}/{name}"]
            assert np.all(np.isnan(values) | (values == 0))


def test_entropy_at_regret_reads_each_seed_at_its_own_first_crossing():
    config = TINY_BANDIT
    best = max(config.head_pay, config.tail_pay)
    history = {"success": best - np.array([[0.8, 0.9], [0.4, 0.7], [0.1, 0.6]]),
               "entropy_given_success": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])}
    values = task.entropy_at_regret(history, config, 0.5)
    assert values[0] == 3.0 and np.isnan(values[1])


def test_interrupt_keeps_the_finished_steps():
    class StopAfter:
        def __init__(self, n):
            self.n = n

        def update(self, _):
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt

    history, interrupted = task.run_bandit("ppo", TINY_BANDIT, progress=StopAfter(3))
    assert interrupted and history["entropy"].shape == (3, TINY_BANDIT.seeds)


def test_bandit_study_writes_csv_and_figure(tmp_path):
    result = bandit_study.run(TINY_BANDIT, rules=("ppo", "band-kl"))
    header, rows = result.table()
    write_csv(str(tmp_path / "b.csv"), header, rows)
    with open(tmp_path / "b.csv") as fh:
        read = list(csv.DictReader(fh))
    assert len(read) == 2 * TINY_BANDIT.seeds * TINY_BANDIT.steps
    assert set(task.METRICS) <= set(read[0])
    assert float(read[0]["entropy"]) == pytest.approx(result.histories["ppo"]["entropy"][0, 0],
                                                      rel=1e-5)
    assert set(bandit_claims.summary(result)) == {"ppo", "band-kl"}


def test_bandit_figure_has_a_curve_per_rule_and_the_bars():
    result = bandit_study.run(TINY_BANDIT)
    fig = bandit_figure.draw(result)
    axes = fig.axes
    assert len(axes) == 6
    for ax in axes[:4]:
        assert len(ax.get_lines()) == len(rules.RULES)
    assert len(axes[4].patches) == len(rules.RULES) * len(P_BUCKETS)
    assert [t.get_text() for t in axes[5].get_legend().get_texts()] == \
        [style["label"] for _, style in rules.RULES.values()]


def test_stress_no_clip_takes_larger_updates_than_the_band():
    """Many epochs per batch: without a clip the worst update's KL is far
    larger than under Band-KL, whose ratios stay in the band."""
    config = task.BanditConfig(contexts=8, steps=20, seeds=3, epochs=32)
    worst = {rule: task.max_step_kl(task.run_bandit(rule, config)[0])
             for rule in ("no-clip", "band-kl")}
    assert np.all(worst["no-clip"] > 3 * worst["band-kl"])
    history = {"success": np.full((30, 2), 0.5)}
    np.testing.assert_allclose(task.late_regret(history, config), 0.4)


def test_stress_study_runs_its_rules_with_the_bandits_code():
    result = stress_study.run(dataclasses.replace(TINY_BANDIT, epochs=8),
                              rules=("no-clip", "constant", "band-kl"))
    assert list(result.histories) == ["no-clip", "constant", "band-kl"]
    assert result.histories["constant"]["step_kl"].shape == (TINY_BANDIT.steps, TINY_BANDIT.seeds)


def test_bandit_study_results_do_not_depend_on_jobs():
    one = bandit_study.run(TINY_BANDIT, 1, rules=("ppo", "band-kl"))
    two = bandit_study.run(TINY_BANDIT, 2, rules=("ppo", "band-kl"))
    for rule in one.histories:
        for metric in task.METRICS:
            np.testing.assert_array_equal(one.histories[rule][metric],
                                          two.histories[rule][metric])
    assert one.table() == two.table()


def test_study_configurations_are_frozen_and_passed():
    quick, full = bandit_study.smoke_config(), bandit_study.full_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.steps = full.steps  # type: ignore[misc]
    assert quick.tail_pay > quick.head_pay  # a high-advantage tail
    assert stress_study.smoke_config().epochs == stress_study.full_config().epochs == 32
