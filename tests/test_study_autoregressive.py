"""The tabular autoregressive study (issue 30): its exact metrics against a
brute-force enumeration and against sampling, its pairing of seeds, the
pilot's delta matching, and the pre-registered verdict on constructed inputs."""

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bandsolve.studies.autoregressive import study as ar_study  # noqa: E402
from bandsolve.studies.autoregressive import task as ar  # noqa: E402
from bandsolve.studies.stats import holm, paired_difference  # noqa: E402

SMALL = ar.TaskConfig(vocab=6, tail_ranks=(3, 5), keep=2, contexts=3, group=4, minibatches=2,
                      steps=3)


def _random_policy(rng, config):
    logits = rng.normal(0, 1.5, (config.contexts, config.states, config.vocab))
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _enumerate(log_probs, task, c):
    """Every sequence of context c: (probability, reward, first token)."""
    V = log_probs.shape[-1]
    p = np.exp(log_probs[c])
    out = []
    for t1, t2, t3 in itertools.product(range(V), repeat=3):
        prob = p[0, t1] * p[1 + t1, t2] * p[1 + V + t2, t3]
        kept = task.prior[c, 1 + t1].argsort()[::-1][:2].tolist()
        kept3 = task.prior[c, 1 + V + t2].argsort()[::-1][:2].tolist()
        reward = task.pay[c, t1] if (t2 in kept and t3 in kept3) else 0.0
        out.append((prob, reward, t1, (t1, t2, t3)))
    return out


def _h(weights):
    q = np.asarray(weights, float) / np.sum(weights)
    q = q[q > 0]
    return float(-(q * np.log(q)).sum())


def test_exact_metrics_match_a_brute_force_enumeration_of_the_tree():
    rng = np.random.default_rng(5)
    task = ar.make_task(SMALL, rng)
    log_probs = _random_policy(rng, SMALL)
    other = _random_policy(rng, SMALL)
    got = ar.exact_metrics(log_probs, task)
    expect = {k: [] for k in got}
    kls = []
    for c in range(SMALL.contexts):
        rows = _enumerate(log_probs, task, c)
        probs = np.array([r[0] for r in rows])
        assert math.isclose(probs.sum(), 1.0, rel_tol=1e-12)
        expect["reward"].append(sum(p * r for p, r, _, _ in rows))
        first = np.zeros(SMALL.vocab)
        success = np.zeros(SMALL.vocab)
        for p, r, t1, _ in rows:
            first[t1] += p
            success[t1] += p * (r > 0)
        paying = task.pay[c] > 0
        expect["tail_mass"].append(first[task.tail[c]].sum())
        expect["head_mass"].append(first[paying & ~task.tail[c]].sum())
        expect["entropy"].append(_h(first))
        expect["entropy_sequence"].append(_h(probs))
        expect["entropy_rewarding"].append(_h(first * paying))
        expect["entropy_given_success"].append(_h(success))
        q = np.array([r[0] for r in _enumerate(other, task, c)])
        kls.append(float((probs * np.log(probs / q)).sum()))
    for key, values in expect.items():
        assert got[key] == pytest.approx(np.mean(values), rel=1e-10), key
    assert ar.sequence_kl(log_probs, other) == pytest.approx(np.mean(kls), rel=1e-10)


def test_the_sampler_draws_the_policy_the_exact_metrics_describe():
    """Monte Carlo: 200,000 sequences' mean reward and first-token frequencies
    within 5 standard errors of the exact values."""
    rng = np.random.default_rng(11)
    task = ar.make_task(SMALL, rng)
    log_probs = _random_policy(rng, SMALL)
    n = 200_000
    u = torch.tensor(rng.random((1, SMALL.contexts, n, 3)))
    state, token = ar.sample(torch.tensor(log_probs)[None], u, SMALL.vocab)
    assert state[..., 0].eq(0).all() and state[..., 1].eq(1 + token[..., 0]).all()
    t1, t2, t3 = (t[0].numpy() for t in token.unbind(-1))
    cs = np.arange(SMALL.contexts)[:, None]
    reward = task.pay[cs, t1] * task.ok2[cs, t1, t2] * task.ok3[cs, t2, t3]
    exact = ar.exact_metrics(log_probs, task)
    se = reward.std() / math.sqrt(reward.size)
    assert abs(reward.mean() - exact["reward"]) < 5 * se
    freq = np.stack([(t1 == v).mean(1) for v in range(SMALL.vocab)], -1)
    p1 = np.exp(log_probs[:, 0])
    assert np.all(np.abs(freq - p1) < 5 * np.sqrt(p1 * (1 - p1) / n) + 1e-12)


def test_the_tail_starts_rare_and_pays_more_than_the_head():
    task = ar.make_task(ar.TaskConfig(), np.random.default_rng(0))
    p1 = np.exp(task.prior[:, 0] - np.log(np.exp(task.prior[:, 0]).sum(-1, keepdims=True)))
    assert np.all((p1[task.tail] > 0.015) & (p1[task.tail] < 0.04))
    assert np.all(task.pay[task.tail] > task.pay[(task.pay > 0) & ~task.tail].max())


def test_a_seed_trains_the_same_whatever_seeds_run_beside_it():
    """Pairing: seed 1's run is its own (task and stream from the seed alone),
    and a pilot stream gives other seeds."""
    from bandsolve.studies.rules import band

    rule = band("kl", 0.05)
    both = ar.train(rule, SMALL, [0, 1])
    alone = ar.train(rule, SMALL, [1])
    pilot = ar.train(rule, SMALL, [1], stream=1)
    for metric in ar.METRICS:
        np.testing.assert_array_equal(both[metric][:, 1], alone[metric][:, 0])
    assert not np.array_equal(alone["reward"], pilot["reward"])


@pytest.mark.parametrize("optimizer, lr", [("adam", 0.1), ("sgd", 2.0)])
def test_rules_trained_together_train_as_each_would_alone(optimizer, lr):
    """train_rules (the pilot's rules in one table, sharing each seed's
    uniforms and mini-batch orders) gives every rule exactly its own run:
    no replica leaks into another through the loss, the optimizer or the
    shared draws."""
    from bandsolve.studies.rules import RULES, band

    rules = [RULES["ppo"][0], band("kl", 0.01), band("tv", 0.05), RULES["no-clip"][0]]
    together = ar.train_rules(rules, SMALL, [0, 2], optimizer, lr)
    for rule, got in zip(rules, together):
        alone = ar.train_rules([rule], SMALL, [0, 2], optimizer, lr)[0]
        for metric in ar.METRICS:
            np.testing.assert_array_equal(got[metric], alone[metric], err_msg=metric)
    # the rules differ, so a replica mixed up with another would show
    assert not np.array_equal(together[0]["step_kl"], together[3]["step_kl"])


def test_bucket_counts_equal_a_token_by_token_count():
    """The clip counts, kept per token and bucketed once per step, against a
    plain loop over every token (sign of its advantage, bucket of its old
    probability; each token updated once per epoch)."""
    from bandsolve.torch.losses import P_BUCKETS

    rng = np.random.default_rng(3)
    epochs = 4
    p = 10.0 ** rng.uniform(-5, 0, (2, 30, 3))
    advantage = rng.choice([-1.0, 0.0, 1.0], (2, 30, 3))
    counts = rng.integers(0, epochs + 1, (2, 30, 3)).astype(float)
    clipped, total = ar.bucket_counts(torch.tensor(counts), epochs, torch.tensor(np.log(p)),
                                      torch.tensor(advantage))
    want_c = np.zeros((2, 2, len(P_BUCKETS)))
    want_t = np.zeros_like(want_c)
    for r, i, k in itertools.product(range(2), range(30), range(3)):
        if advantage[r, i, k] == 0:
            continue
        a = 0 if advantage[r, i, k] > 0 else 1
        b = [j for j, (_, low, high) in enumerate(P_BUCKETS) if low <= p[r, i, k] < high]
        assert len(b) == 1
        want_c[r, a, b[0]] += counts[r, i, k]
        want_t[r, a, b[0]] += epochs
    np.testing.assert_array_equal(clipped.numpy(), want_c)
    np.testing.assert_array_equal(total.numpy(), want_t)


def test_update_and_count_counts_the_tokens_whose_gradient_the_clip_zeroed():
    """The count against the loss's own gradient: a token is counted where
    its ratio gets no gradient from the step (and its advantage is not 0),
    and at its place in the rollout batch (``pick``)."""
    from bandsolve.studies.rules import band

    rng = np.random.default_rng(4)
    old = torch.tensor(np.log(rng.uniform(1e-4, 1.0, (2, 6, 3))))
    advantage = torch.tensor(rng.choice([-1.0, 1.0], (2, 6, 3)))
    lower, upper = band("kl", 0.05).bounds(old)
    ratio = torch.tensor(np.exp(rng.normal(0, 0.6, (2, 6, 3))), requires_grad=True)
    opt = torch.optim.SGD([ratio], lr=0.0)  # the step changes nothing; the gradient stays
    pick = torch.tensor(np.stack([rng.permutation(10)[:6] for _ in range(2)]))[..., None]
    pick = pick.expand(-1, -1, 3)
    counts = torch.zeros(2, 10, 3, dtype=torch.float64)
    ar.update_and_count(opt, ratio, advantage, lower.double(), upper.double(), 1.0, counts, pick)
    zeroed = (ratio.grad == 0).double()
    assert 0 < zeroed.sum() < zeroed.numel()  # both kinds of token are there
    want = torch.zeros_like(counts).scatter_(1, pick, zeroed)
    np.testing.assert_array_equal(counts.numpy(), want.numpy())


def test_the_task_refuses_a_tail_that_pays_no_more_than_the_head():
    with pytest.raises(ValueError, match="tail must pay more"):
        ar.TaskConfig(head_pay=1.0, tail_pay=1.0)


def test_match_delta_interpolates_in_log_log_and_flags_the_grid_end():
    deltas = (0.01, 0.02, 0.05, 0.1)
    kls = [3 * d ** 1.5 for d in deltas]  # a power law: log-log linear
    delta, inside = ar_study.match_delta(deltas, kls, 3 * 0.03 ** 1.5)
    assert inside and delta == pytest.approx(0.03, rel=1e-12)
    assert ar_study.match_delta(deltas, kls, 1e-9) == (pytest.approx(0.01), False)


def _tests_from(shifts, sd=0.1, n=16):
    """A family whose test i has paired differences of mean shifts[i]."""
    rng = np.random.default_rng(3)
    tests = {}
    for name, shift in zip(ar_study.FAMILY, shifts):
        noise = rng.normal(0, sd, n)
        tests[name] = paired_difference(shift + noise - noise.mean(), np.zeros(n))
    adjusted = dict(zip(tests, holm([t["p"] for t in tests.values()])))
    return tests, adjusted


@pytest.mark.parametrize("shifts, matches, expected, reason", [
    ((0.3, 0.3, 0.3, 0.3, 0.3), {0.1: False, 0.3: False}, "reproduces", None),
    ((0.3, 0.3, 0.3, 0.3, 0.0), {0.1: False, 0.3: False}, "not reproduced at this scale",
     "entropy over training"),
    ((-0.05, 0.3, 0.3, 0.3, 0.3), {0.1: False, 0.3: False}, "contradicted",
     "no better than PPO on tail mass"),
    ((0.3, 0.3, 0.3, 0.3, -0.3), {0.1: False, 0.3: False}, "contradicted",
     "entropy is significantly below"),
    ((0.3, 0.3, 0.3, 0.3, 0.3), {0.1: True, 0.3: True}, "contradicted",
     "no clip matches it"),
])
def test_verdict_rules_return_each_verdict(shifts, matches, expected, reason):
    tests, adjusted = _tests_from(shifts)
    verdict, held, why = ar_study.verdict(tests, adjusted, matches)
    assert verdict == expected
    if reason is not None:
        assert any(reason in w for w in why)
    if expected == "reproduces":
        assert held == list(ar_study.FAMILY) and why == []


def test_no_clip_matches_reads_both_outcomes_at_every_adam_rate():
    config = ar_study.ARStudyConfig(task=SMALL, adam_lrs=(0.1, 0.3), sgd_lr=None, seeds=8,
                                    fixed_at=(), window=2)
    rng = np.random.default_rng(0)

    def history(level):
        return {m: np.full((SMALL.steps, 8), level) + rng.normal(0, 0.01, (SMALL.steps, 8))
                for m in ("tail_mass", "reward")}

    results = {(("adam", 0.1), "band-kl"): history(0.8), (("adam", 0.1), "no-clip"): history(0.5),
               (("adam", 0.3), "band-kl"): history(0.5), (("adam", 0.3), "no-clip"): history(0.5)}
    assert ar_study.no_clip_matches(results, config) == {0.1: False, 0.3: True}


def test_a_tiny_study_writes_its_csv_figure_and_summary(tmp_path):
    import csv

    from bandsolve.studies.autoregressive import claims as ar_rows
    from bandsolve.studies.autoregressive import figure as ar_figure
    from bandsolve.studies.plotting import save_figure
    from bandsolve.studies.tables import write_csv

    config = ar_study.ARStudyConfig(task=SMALL, adam_lrs=(0.1, 0.3), sgd_lr=None, seeds=2,
                                    pilot_seeds=2, pilot_deltas=(0.01, 0.05),
                                    fixed_at=(("adam", 0.1),), window=2)
    result = ar_study.run(config)
    write_csv(str(tmp_path / "ar.csv"), *result.table())
    save_figure(ar_figure.draw(result), str(tmp_path), "ar")
    assert (tmp_path / "ar.png").exists() and (tmp_path / "ar.pdf").exists()
    with open(tmp_path / "ar.csv") as fh:
        rows = list(csv.DictReader(fh))
    # 6 rules at each of 2 rates, 2 fixed-delta bands at one, 2 seeds, 3 steps
    assert len(rows) == (6 * 2 + 2) * 2 * SMALL.steps
    assert {r["rule"] for r in rows} >= {"band-kl", "band-kl@0.05", "dcpo"}
    text = ar_rows.summary_markdown(result, "test", 1.0)
    assert result.verdict[0] in text and text.count("| Adam lr 0.1 | band-kl |") == 1
    # two seeds: a smoke run, whose verdict the report does not state as the study's
    assert "Smoke run (2 seeds" in text and "Pre-registered study verdict" not in text
