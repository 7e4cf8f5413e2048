"""The autoregressive task and its two policies (issue 40): the exact metrics
against a brute-force enumeration and against sampling, the transformer's
shared-prompt passes against full sequences through torch's own attention,
the clip counts against the loss's gradient and a token-by-token loop, and
replicas that train together as each would alone."""

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")  # bandsolve.studies needs the repro extra

import torch.nn.functional as F  # noqa: E402

from bandsolve.studies.autoregressive import grpo  # noqa: E402
from bandsolve.studies.autoregressive import task as ar  # noqa: E402
from bandsolve.studies.autoregressive.tabular import TablePolicy, zipf_logits  # noqa: E402
from bandsolve.studies.autoregressive.transformer import (  # noqa: E402
    ModelConfig,
    _linear,
    pretrain,
)
from bandsolve.studies.jobs import one_thread  # noqa: E402
from bandsolve.studies.rules import make_rule  # noqa: E402
from bandsolve.torch.losses import P_BUCKETS  # noqa: E402

SMALL = ar.TaskConfig(vocab=6, tail_ranks=(3, 5), keep=2, contexts=3, group=4, minibatches=2,
                      steps=3)
TINY_MODEL = ModelConfig(layers=2, width=16, heads=2, prompt=2, sft_steps=3)
TWO = ar.TaskConfig(vocab=8, length=2, tail_ranks=(3, 5), keep=2, contexts=3, group=4,
                    minibatches=2, steps=2)


def _random_table(rng, config, leading=()):
    logits = rng.normal(0, 1.5, (*leading, config.contexts, config.states, config.vocab))
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _rank_sets(row, keep):
    return np.argsort(-row, kind="stable")[:keep].tolist()


def _enumerate(log_probs, prior, config, c):
    """Every answer of context c: (probability, reward, first token), read
    from the prior's ranks by hand."""
    V, L = config.vocab, config.length
    p = np.exp(log_probs[c])
    first_rank = np.argsort(np.argsort(-prior[c, 0], kind="stable"), kind="stable") + 1
    out = []
    for answer in itertools.product(range(V), repeat=L):
        prob = p[0, answer[0]]
        kept = True
        for k in range(1, L):
            state = 1 + (k - 1) * V + answer[k - 1]
            prob *= p[state, answer[k]]
            kept &= answer[k] in _rank_sets(prior[c, state], config.keep)
        r1 = first_rank[answer[0]]
        pay = config.tail_pay if r1 in config.tail_ranks else config.head_pay if r1 == 1 else 0
        out.append((prob, pay * kept, answer[0], r1))
    return out


def _h(weights):
    q = np.asarray(weights, float) / np.sum(weights)
    q = q[q > 0]
    return float(-(q * np.log(q)).sum())


@pytest.mark.parametrize("config", [SMALL, TWO], ids=["3 tokens", "2 tokens"])
def test_exact_metrics_match_a_brute_force_enumeration_of_the_tree(config):
    rng = np.random.default_rng(5)
    prior, log_probs, other = (_random_table(rng, config) for _ in range(3))
    task = ar.read_task(torch.tensor(prior)[None], config)
    got = {k: float(v[0]) for k, v in ar.exact_metrics(torch.tensor(log_probs)[None],
                                                       task).items()}
    expect = {k: [] for k in got}
    kls = []
    for c in range(config.contexts):
        rows = _enumerate(log_probs, prior, config, c)
        probs = np.array([row[0] for row in rows])
        assert math.isclose(probs.sum(), 1.0, rel_tol=1e-12)
        first, success = np.zeros(config.vocab), np.zeros(config.vocab)
        expect["reward"].append(sum(p * r for p, r, _, _ in rows))
        tail = head = 0.0
        for p, r, t1, r1 in rows:
            first[t1] += p
            success[t1] += p * (r > 0)
            tail += p * (r1 in config.tail_ranks)
            head += p * (r1 == 1)
        paying = np.array([p > 0 for p in task.pay[0, c].numpy()])
        expect["tail_mass"].append(tail)
        expect["head_mass"].append(head)
        expect["entropy"].append(_h(first))
        expect["entropy_sequence"].append(_h(probs))
        expect["entropy_rewarding"].append(_h(first * paying))
        expect["entropy_given_success"].append(_h(success))
        q = np.array([row[0] for row in _enumerate(other, prior, config, c)])
        kls.append(float((probs * np.log(probs / q)).sum()))
    for key, values in expect.items():
        assert got[key] == pytest.approx(np.mean(values), rel=1e-10), key
    kl = ar.sequence_kl(torch.tensor(log_probs)[None], torch.tensor(other)[None], config.length)
    assert float(kl[0]) == pytest.approx(np.mean(kls), rel=1e-10)


def test_the_sampler_draws_the_policy_the_exact_metrics_describe():
    """Monte Carlo: 200,000 answers' mean reward and first-token frequencies
    within 5 standard errors of the exact values."""
    rng = np.random.default_rng(11)
    log_probs = torch.tensor(_random_table(rng, SMALL, (1,)))
    task = ar.read_task(torch.tensor(_random_table(rng, SMALL, (1,))), SMALL)
    n = 200_000
    state, token = ar.sample(log_probs, torch.tensor(rng.random((1, SMALL.contexts, n, 3))))
    assert state[..., 0].eq(0).all() and state[..., 1].eq(1 + token[..., 0]).all()
    assert state[..., 2].eq(1 + SMALL.vocab + token[..., 1]).all()
    reward = ar.rewards(task, token).numpy()
    exact = ar.exact_metrics(log_probs, task)
    assert abs(reward.mean() - float(exact["reward"][0])) < 5 * reward.std() / math.sqrt(
        reward.size)
    t1 = token[0, ..., 0].numpy()
    freq = np.stack([(t1 == v).mean(1) for v in range(SMALL.vocab)], -1)
    p1 = np.exp(log_probs[0, :, 0].numpy())
    assert np.all(np.abs(freq - p1) < 5 * np.sqrt(p1 * (1 - p1) / n) + 1e-12)


def test_the_tabular_start_has_a_rare_tail_that_pays_more_than_the_head():
    config = ar.TaskConfig()
    prior = zipf_logits(config, ar.seed_rng(0, 0, "start"), (config.contexts, config.states))
    log_probs = torch.log_softmax(torch.tensor(prior), -1)
    task = ar.read_task(log_probs, config)
    p1 = log_probs[:, 0].exp()
    assert torch.all((p1[task.tail] > 0.015) & (p1[task.tail] < 0.04))
    assert task.head.sum(-1).eq(1).all() and task.tail.sum(-1).eq(4).all()
    assert task.kept.sum(-1).eq(config.keep).all()
    assert torch.all(task.pay[task.tail] > task.pay[task.head].max())


def test_the_task_refuses_a_tail_that_pays_no_more_than_the_head():
    with pytest.raises(ValueError, match="tail must pay more"):
        ar.TaskConfig(head_pay=1.0, tail_pay=1.0)


def _full_sequences(net, tokens):
    """The reference: whole sequences (replicas, n, T) through every layer
    with torch's scaled_dot_product_attention (causal), log-softmax at every
    position."""
    R, N, T = tokens.shape
    m = net.model
    index = torch.arange(R)[:, None]
    h = net.embed[index, tokens.reshape(R, -1)].reshape(R, N, T, -1) + net.position[:, None, :T]
    D = h.shape[-1]
    for i in range(m.layers):
        q, k, v = (x.reshape(R, N, T, m.heads, -1).transpose(2, 3) for x in _linear(
            F.layer_norm(h, (D,)), getattr(net, f"qkv{i}")).chunk(3, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + _linear(a.transpose(2, 3).reshape(R, N, T, D), getattr(net, f"attn_out{i}"))
        h = h + _linear(F.gelu(_linear(F.layer_norm(h, (D,)), getattr(net, f"mlp_in{i}"))),
                        getattr(net, f"mlp_out{i}"))
    return torch.log_softmax(_linear(F.layer_norm(h, (D,)), net.head), -1)


def test_the_transformer_tree_and_batch_equal_full_sequences_through_torch_attention():
    torch.manual_seed(0)
    net, _ = pretrain(TWO, TINY_MODEL, 9, range(2), dtype=torch.float64)
    R, C, P, V = 2, TWO.contexts, TINY_MODEL.prompt, TWO.vocab
    with torch.no_grad():
        table = net.table()
        seqs = torch.cat([net.prompt_tokens[:, :, None, :].expand(-1, -1, V, -1),
                          torch.arange(V).expand(R, C, V)[..., None]], -1)
        ref = _full_sequences(net, seqs.reshape(R, C * V, P + 1)).reshape(R, C, V, P + 1, V)
        for a in range(V):  # causal: the first token's distribution does not see it
            torch.testing.assert_close(table[:, :, 0], ref[:, :, a, P - 1], rtol=0, atol=1e-12)
        torch.testing.assert_close(table[:, :, 1:], ref[:, :, :, P], rtol=0, atol=1e-12)
        contexts = torch.tensor([[0, 2, 1, 2], [1, 1, 0, 2]])
        tokens = torch.randint(0, V, (R, 4, 2))
        got = net.log_probs(contexts, tokens)
        r = torch.arange(R)[:, None]
        want = torch.stack([table[r, contexts, 0].gather(-1, tokens[..., :1])[..., 0],
                            table[r, contexts, 1 + tokens[..., 0]].gather(
                                -1, tokens[..., 1:])[..., 0]], -1)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_the_supervised_stage_fits_a_zipf_head_with_distinct_prompts():
    config = ar.TaskConfig(vocab=16, length=2, contexts=4)
    net, fit = pretrain(config, ModelConfig(layers=1, width=32, heads=2, prompt=2,
                                            sft_steps=150, sft_lr=1e-2), 3, range(2))
    zipf = np.arange(1, 17) ** -1.1
    zipf /= zipf.sum()
    assert fit["head_p"] == pytest.approx(zipf[0], rel=0.1)
    assert fit["tail_p"] == pytest.approx(zipf[[7, 9, 11, 13]].mean(), rel=0.2)
    codes = net.prompt_tokens[..., 0] * 16 + net.prompt_tokens[..., 1]
    assert all(len(set(row.tolist())) == 4 for row in codes)
    again, _ = pretrain(config, ModelConfig(layers=1, width=32, heads=2, prompt=2,
                                            sft_steps=150, sft_lr=1e-2), 3, [1])
    for name, value in again.weights().items():  # a seed's model is its own
        torch.testing.assert_close(value[0], net.weights()[name][1], rtol=0, atol=0)


def test_clip_shares_equal_a_token_by_token_count():
    """The clip shares against a plain loop over every token (sign of its
    advantage, bucket of its old probability, class; each token updated
    once per epoch)."""
    rng = np.random.default_rng(3)
    epochs, shape = 4, (2, 30, 3)
    p = 10.0 ** rng.uniform(-5, 0, shape)
    advantage = rng.choice([-1.0, 0.0, 1.0], shape)
    counts = rng.integers(0, epochs + 1, shape).astype(float)
    classes = rng.integers(0, len(ar.CLASSES), shape)
    got = grpo.clip_shares(torch.tensor(counts), epochs, torch.tensor(np.log(p)),
                           torch.tensor(advantage), torch.tensor(classes))
    for r in range(2):
        for sign, s in zip(ar.SIGNS, (1, -1)):
            for name, low, high in P_BUCKETS:
                inside = (np.sign(advantage[r]) == s) & (p[r] >= low) & (p[r] < high)
                want = counts[r][inside].sum() / (epochs * inside.sum()) if inside.any() \
                    else math.nan
                assert got[f"clip/{sign}/{name}"][r].item() == pytest.approx(want, nan_ok=True)
            for i, name in enumerate(ar.CLASSES):
                inside = (np.sign(advantage[r]) == s) & (classes[r] == i)
                want = counts[r][inside].sum() / (epochs * inside.sum())
                assert got[f"clip/{sign}/{name}"][r].item() == pytest.approx(want)
        signed = advantage[r] != 0
        assert got["clipfrac"][r].item() == pytest.approx(counts[r][signed].sum()
                                                          / (epochs * signed.sum()))


def _tabular(config, stream, seeds, n):
    prior = np.stack([zipf_logits(config, ar.seed_rng(stream, s, "start"),
                                  (config.contexts, config.states)) for s in seeds])
    task = ar.read_task(torch.log_softmax(torch.tensor(prior), -1), config)
    return TablePolicy(np.concatenate([prior] * n)), task.tile(n)


def _train(kind, rules, seeds, config, lr, stream=4):
    with one_thread():  # as the study trains: the same sums in the same order
        return _train_here(kind, rules, seeds, config, lr, stream)


def _train_here(kind, rules, seeds, config, lr, stream):
    if kind == "tabular":
        policy, task = _tabular(config, stream, seeds, len(rules))
    else:
        base, _ = pretrain(config, TINY_MODEL, stream, seeds)
        with torch.no_grad():
            task = ar.read_task(base.table(), config).tile(len(rules))
        policy = base.tile(len(rules))
    rngs = [ar.seed_rng(stream, s, "grpo") for s in seeds]
    return grpo.train(policy, task, [make_rule(*r) for r in rules], len(seeds), rngs,
                      config, lr)


@pytest.mark.parametrize("kind, config, lr", [("tabular", SMALL, 0.1),
                                               ("transformer", TWO, 3e-3)])
def test_replicas_trained_together_train_as_each_would_alone(kind, config, lr):
    """Every rule and seed in one batched model gives each replica exactly
    its own run, bit for bit: no replica leaks into another through the
    loss, the optimizer or the shared draws, and a seed's run is its own."""
    rules = [("ppo", 0.2), ("band-kl", 0.01), ("band-tv", 0.05), ("no-clip", 0.0)]
    together = _train(kind, rules, [0, 2], config, lr)
    for i, rule in enumerate(rules):
        alone = _train(kind, [rule], [2], config, lr)
        for metric in ar.METRICS:
            np.testing.assert_array_equal(together[metric][:, 2 * i + 1], alone[metric][:, 0],
                                          err_msg=f"{rule} {metric}")
    assert np.all(together["clipfrac"][:, 6:] == 0)  # nothing bounds no clip
    assert together["clipfrac"][:, :2].max() > 0
    # the rules differ, so a replica mixed up with another would show
    assert not np.array_equal(together["step_kl"][:, 0], together["step_kl"][:, 6])


def test_a_clipped_token_is_counted_where_the_clip_zeroed_its_gradient():
    """The count of one mini-batch update against the loss's own gradient,
    through the trainer: with one epoch of one mini-batch at lr 0 the policy
    never moves, so each token's ratio is 1 and a clip with lower > 1 zeroes
    exactly the negative-advantage tokens."""

    class Above:  # a clip the ratio 1 lies below: the lower side binds for A < 0
        def bounds(self, old):
            return torch.full_like(old, 1.5), torch.full_like(old, 2.0)

    config = ar.TaskConfig(vocab=6, tail_ranks=(3, 5), keep=2, contexts=3, group=4,
                           epochs=1, minibatches=1, steps=1)
    policy, task = _tabular(config, 1, [0], 1)
    rngs = [ar.seed_rng(1, 0, "grpo")]
    history = grpo.train(policy, task, [Above()], 1, rngs, config, 0.0)
    u = torch.tensor(ar.seed_rng(1, 0, "grpo").random((1, 3, 4, 3)))
    _, token = ar.sample(policy.table().detach(), u)
    adv = ar.grpo_advantages(ar.rewards(task, token))
    signed = (adv != 0).sum().item() * 3
    assert history["clipfrac"][0, 0] == pytest.approx((adv < 0).sum().item() * 3 / signed)
    assert np.isnan(history["clip/pos/head"][0, 0]) or history["clip/pos/head"][0, 0] == 0
