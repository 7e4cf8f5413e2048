"""The dynamics study: deterministic under a seed, the bandit's qualitative
ordering, the figures' artists, the CSVs, clean interruption, and the
paper_repro rows on a tiny configuration."""

import csv
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bandsolve.analysis import dynamics, frontier, sequence  # noqa: E402

TINY_BANDIT = dynamics.BanditConfig(contexts=4, vocab=60, tail_good=(20, 40), steps=6, seeds=2)
TINY_SEQUENCE = sequence.SequenceConfig(width=16, layers=1, heads=2, sft_steps=5,
                                        prompts_per_step=4, group=4, epochs=2, steps=4,
                                        eval_every=2, k=4, seeds=2)


def test_bandit_is_deterministic_under_a_seed():
    first, _ = dynamics.run_bandit("band-kl", TINY_BANDIT, seed=3)
    second, _ = dynamics.run_bandit("band-kl", TINY_BANDIT, seed=3)
    other, _ = dynamics.run_bandit("band-kl", TINY_BANDIT, seed=4)
    for metric in dynamics.BANDIT_METRICS:
        assert first[metric].shape == (TINY_BANDIT.steps, TINY_BANDIT.seeds)
        np.testing.assert_array_equal(first[metric], second[metric])
    assert not np.array_equal(first["entropy"], other["entropy"])


def test_bandit_ordering_band_keeps_entropy_and_tail_mass():
    """The qualitative claim on a short run: more late entropy and more mass
    on the rewarding tail tokens under Band-KL than under PPO's clip."""
    config = dataclasses.replace(dynamics.BanditConfig(), steps=200, seeds=5)
    results = {rule: dynamics.run_bandit(rule, config)[0] for rule in ("ppo", "band-kl")}
    summary = dynamics.summarize_bandit(results)
    assert summary["band-kl"]["entropy"][0] > summary["ppo"]["entropy"][0]
    assert summary["band-kl"]["tail_mass"][0] > summary["ppo"]["tail_mass"][0] + 0.05
    # the mechanism: PPO clips nearly every sampled tail token, the band almost none
    ppo_tail = dynamics.nanmean(results["ppo"]["clipfrac/p<1e-3"])
    band_tail = dynamics.nanmean(results["band-kl"]["clipfrac/p<1e-3"])
    assert ppo_tail > 0.5 > 0.05 > band_tail


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
    results = {rule: dynamics.run_bandit(rule, TINY_BANDIT)[0] for rule in dynamics.RULES}
    fig = dynamics.figure_bandit(results, TINY_BANDIT)
    axes = fig.axes
    assert len(axes) == 6
    for ax in axes[:4]:
        assert len(ax.get_lines()) == len(dynamics.RULES)
    assert len(axes[4].patches) == len(dynamics.RULES) * len(dynamics.P_BUCKETS)
    assert [t.get_text() for t in axes[5].get_legend().get_texts()] == \
        [style["label"] for _, style in dynamics.RULES.values()]


def test_sequence_task_reward_and_canonical_answers():
    # solution counts without an excluded digit: the coefficients of (x + ... + x^9)^3
    counts = np.convolve(np.convolve(np.ones(9), np.ones(9)), np.ones(9))
    for target in sequence.TARGETS:
        everything = {s for e in range(1, 10) for s in sequence._solutions(target, e)}
        assert len(everything) == counts[target - 3]  # every answer misses some digit
    for target, excluded in sequence.PROBLEMS:
        canonical = sequence._canonical(target, excluded)
        assert sum(canonical) == target and excluded not in canonical
        assert all(canonical >= s for s in sequence._solutions(target, excluded))
    assert set(sequence.HELD_OUT_PROBLEMS).isdisjoint(sequence.TRAIN_PROBLEMS)
    assert len(sequence.HELD_OUT_PROBLEMS) == len(sequence.PROBLEMS) // 5
    prompts = sequence._prompts([(10, 2), (10, 8), (9, 5)])
    answers = torch.tensor([[0, 0, 7], [0, 0, 7], [2, 2, 2]])  # 1+1+8, 1+1+8, 3+3+3
    assert sequence._reward(prompts, answers).tolist() == [1.0, 0.0, 1.0]


def test_sequence_grpo_is_deterministic_under_a_seed():
    import copy

    base = sequence.supervised_fit(TINY_SEQUENCE, seed=1)
    runs = [sequence.grpo(copy.deepcopy(base), "band-kl", TINY_SEQUENCE, seed=1)[0]
            for _ in range(2)]
    for metric in sequence.SEQUENCE_METRICS:
        assert len(runs[0][metric]) == 1 + TINY_SEQUENCE.steps // TINY_SEQUENCE.eval_every
        assert runs[0][metric] == runs[1][metric]


def test_sequence_study_writes_csv_and_figure(tmp_path):
    results, summary, paths = sequence.sequence_study(TINY_SEQUENCE, rules=("ppo", "band-kl"),
                                                      out=str(tmp_path), name="s")
    assert (tmp_path / "s.csv").exists() and (tmp_path / "s.png").exists()
    assert results["ppo"]["heldout_mean_at_k"].shape == (3, TINY_SEQUENCE.seeds)
    assert 0.0 <= summary["band-kl"]["heldout_pass_at_k"][0] <= 1.0
    fig = sequence.figure_sequence(results, TINY_SEQUENCE)
    assert all(len(ax.get_lines()) == 2 for ax in fig.axes[:5])


def test_paper_repro_dynamics_rows_on_a_tiny_configuration(tmp_path, monkeypatch):
    from bandsolve.paper_repro import repro

    adam = dataclasses.replace(TINY_BANDIT, optimizer="adam", lr=0.05)
    monkeypatch.setattr(dynamics, "FULL", {"bandit": TINY_BANDIT, "bandit-adam": adam})
    monkeypatch.setattr(sequence, "FULL", TINY_SEQUENCE)
    # the frontier too: unpatched, this test ran the 40-minute full frontier
    monkeypatch.setattr(frontier, "FULL", frontier.FrontierConfig(
        TINY_BANDIT, eps=(0.2,), eps_high=(0.28,), dcpo_scale=(1.0,), deltas=(0.05,)))
    rows = repro.dynamics_claims(str(tmp_path), full=True)
    assert len(rows) == 3
    assert all(row.verdict in ("reproduces", "reproduces qualitatively", "does not reproduce",
                               "not reproduced at this scale") for row in rows)
    assert "PPO" in rows[0].ours and "mean@4" in rows[2].ours
    assert "Adam variant" in rows[1].ours
    assert (tmp_path / "dynamics_bandit_adam.png").exists()
