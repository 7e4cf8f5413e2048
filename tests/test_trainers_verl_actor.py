"""The verl plug-in through verl's own actor loss path (pytest -m trainers).

verl 0.9's actor computes its loss with ``verl.workers.utils.losses.ppo_loss``
on a TensorDict of jagged (nested) per-sequence tensors and the global batch
information its engine adds (``dp_size``, ``batch_num_tokens``,
``global_batch_size``). These tests build that batch as verl does, take the
log-probabilities from a real forward pass of a tiny random causal LM (no
download), and check ``loss_mode=bandpo``

* learns: a few optimiser steps raise a programmatic reward;
* has the loss and gradients of the surrogate written out in numpy for every
  ``loss_agg_mode`` verl accepts, with and without data parallelism;
* treats ``rollout_is_weights`` and bypass mode as verl's ``vanilla`` does;
* masks exactly the tokens verl's ``dppo_kl`` / ``dppo_tv`` mask when the
  band's divergence and delta are theirs.
"""

import copy
import functools
import os

import numpy as np
import pytest

pytestmark = pytest.mark.trainers

torch = pytest.importorskip("torch")
verl = pytest.importorskip("verl")
transformers = pytest.importorskip("transformers")

from hydra import compose, initialize_config_dir  # noqa: E402
from problems import clipped_surrogate_reference  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402

import bandsolve as bs  # noqa: E402

#: every mode verl's ActorConfig accepts (checked below) and agg_loss implements
AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean",
             "seq-mean-token-sum-norm")
VOCAB, TARGET = 64, 7


# ---------------------------------------------------------------- verl config

def _compose(overrides):
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose("ppo_trainer", overrides=[
            *overrides,
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.n=1",
        ])


@functools.cache
def _actor_cached(overrides):
    return omega_conf_to_dataclass(_compose(list(overrides)).actor_rollout_ref.actor)


def _actor(overrides=(), agg_mode="token-mean", loss_scale_factor=None):
    """verl's ActorConfig as its trainer builds it (a fresh copy: ppo_loss writes to it)."""
    extra = (f"actor_rollout_ref.actor.loss_agg_mode={agg_mode}",
             "actor_rollout_ref.actor.loss_scale_factor="
             + ("null" if loss_scale_factor is None else str(loss_scale_factor)))
    return copy.deepcopy(_actor_cached(tuple(overrides) + extra))


def _band(delta=0.1, divergence="kl", max_ratio=5.0, dual_clip=True):
    return (
        "actor_rollout_ref.actor.policy_loss.loss_mode=bandpo",
        "actor_rollout_ref.actor.policy_loss._target_=bandsolve.integrations.verl.BandPOPolicyLossConfig",
        f"+actor_rollout_ref.actor.policy_loss.band_delta={delta}",
        f"+actor_rollout_ref.actor.policy_loss.band_divergence={divergence}",
        "+actor_rollout_ref.actor.policy_loss.band_max_ratio="
        + ("null" if max_ratio is None else str(max_ratio)),
        f"+actor_rollout_ref.actor.policy_loss.band_dual_clip={str(dual_clip).lower()}",
    )


# ------------------------------------------------------- tiny LM and rollouts

@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny matmuls: one thread is ~100x faster than oversubscribed intra-op threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tiny_lm(seed=0, dtype=torch.float32, head_scale=1.0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).to(dtype)
    with torch.no_grad():
        model.lm_head.weight.mul_(head_scale)  # peakier token distributions
    return model


def _perturbed(model, seed, scale):
    other = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(scale * p.std().nan_to_num(0.0) * torch.randn(p.shape, generator=gen,
                                                                  dtype=p.dtype))
    return other


def _padded_ids(seqs):
    ids = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.as_tensor(s)
    return ids


def _model_log_probs(model, seqs):
    """verl's engine output: log p(x[t+1] | x[:t+1]) at every position, jagged.

    The labels are the flattened input ids rolled left by one, as in verl's
    engine (so each sequence's last entry is junk that ppo_loss slices off).
    Right padding under a causal mask leaves every real position unchanged.
    """
    lens = [len(s) for s in seqs]
    logits = model(input_ids=_padded_ids(seqs)).logits
    logp = torch.log_softmax(logits, dim=-1)
    flat_logp = torch.cat([logp[i, :n] for i, n in enumerate(lens)])
    labels = torch.roll(torch.cat([torch.as_tensor(s) for s in seqs]), shifts=-1, dims=0)
    values = flat_logp.gather(-1, labels[:, None]).squeeze(-1)
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lens)]))
    return torch.nested.nested_tensor_from_jagged(values, offsets)


@torch.no_grad()
def _rollout(model, prompts, n, max_len, gen):
    """n sampled responses per prompt (sampled together), cut to lengths in [2, max_len]."""
    out_prompts, responses = [], []
    for prompt in prompts:
        seqs = torch.tensor([prompt] * n)
        for _ in range(max_len):
            logits = model(input_ids=seqs).logits[:, -1].double()
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
            seqs = torch.cat([seqs, nxt], dim=1)
        for row in seqs.tolist():
            length = int(torch.randint(2, max_len + 1, (1,), generator=gen))
            out_prompts.append(list(prompt))
            responses.append(row[len(prompt):len(prompt) + length])
    return out_prompts, responses


def _response_values(nested, prompts, responses):
    """Per-response log-probs (list of 1-d tensors) out of the full-sequence jagged output."""
    values, out, start = nested.values(), [], 0
    for p, r in zip(prompts, responses):
        end = start + len(p) + len(r)
        out.append(values[end - len(r) - 1:end - 1])
        start = end
    return out


# ------------------------------------------------------------ verl batch

def _nested(rows, dtype):
    return torch.nested.as_nested_tensor([torch.as_tensor(r, dtype=dtype) for r in rows],
                                         layout=torch.jagged)


def _rows(padded, lengths):
    return [padded[i, :n] for i, n in enumerate(lengths)]


def _pad(rows):
    out = np.zeros((len(rows), max(len(r) for r in rows)))
    for i, r in enumerate(rows):
        out[i, :len(r)] = np.asarray(r, dtype=float)
    return out


def _verl_batch(prompts, responses, fields, *, dp_size=1, batch_num_tokens=None,
                global_batch_size=None):
    """The TensorDict verl 0.9's v1 trainer and FSDP engine hand to ppo_loss.

    Per-sequence fields are jagged tensors (the trainer's response_to_nested);
    ``loss_mask`` is the response mask (left_right_2_no_padding), and the
    engine adds dp_size and the global token count (all-reduced over dp);
    global_batch_size is the trainer's ppo_mini_batch_size * rollout.n.
    ``fields`` maps names to padded numpy arrays, cut to each response's length.
    """
    lengths = [len(r) for r in responses]
    data = {"prompts": _nested(prompts, torch.long), "responses": _nested(responses, torch.long),
            "input_ids": _nested([p + r for p, r in zip(prompts, responses)], torch.long)}
    for key, value in fields.items():
        dtype = torch.long if key == "response_mask" else torch.float64
        data[key] = _nested(_rows(value, lengths), dtype)
    td = TensorDict(data, batch_size=[len(responses)])
    td["loss_mask"] = td["response_mask"]
    local_tokens = int(fields["response_mask"].sum())
    tu.assign_non_tensor(
        td, dp_size=dp_size,
        batch_num_tokens=local_tokens if batch_num_tokens is None else batch_num_tokens,
        global_batch_size=len(responses) if global_batch_size is None else global_batch_size)
    return td


# ------------------------------------------------------------ numpy reference

def _np_agg_weights(mask, mode, dp_size=1, batch_num_tokens=None, global_batch_size=None,
                    loss_scale_factor=None):
    """verl's agg_loss written out: loss = sum(W * per_token_loss), W per token."""
    mask = mask.astype(float)
    n_seq = (mask.sum(axis=1) > 0).sum()
    gbs = n_seq if global_batch_size is None else global_batch_size
    if mode == "token-mean":
        return mask / (mask.sum() if batch_num_tokens is None else batch_num_tokens) * dp_size
    if mode == "token-sum":
        return mask * dp_size
    if mode == "seq-mean-token-sum":
        return mask / gbs * dp_size
    if mode == "seq-mean-token-sum-norm":
        horizon = mask.shape[1] if loss_scale_factor is None else loss_scale_factor
        return mask / gbs * dp_size / horizon
    if mode == "seq-mean-token-mean":
        # verl adds 1e-8 to the integer token count, promoted to float32: absorbed
        return mask / mask.sum(axis=1, keepdims=True).clip(1) / gbs * dp_size
    raise AssertionError(mode)


def _np_surrogate(new, old, adv, lower, upper, dual_clip, weights=None):
    """Per-token -min(r A, clip(r, lo, hi) A), the dual clip, rollout IS weights; and d/d logp."""
    ratio = np.exp(np.clip(new - old, -20.0, 20.0))
    per_token, grad, _, _ = clipped_surrogate_reference(ratio, adv, lower, upper, dual_clip)
    if weights is not None:  # vanilla: pg_losses * rollout_is_weights, then agg_loss
        per_token, grad = per_token * weights, grad * weights
    return per_token, grad


def _band_bounds(old, delta, divergence, max_ratio):
    return bs.band_from_logp(np.minimum(old, 0.0), delta, divergence, max_ratio=max_ratio)


# ------------------------------------------------------------ the LM problem

@functools.cache
def _lm_problem(seed=0):
    """Real rollouts and old/new/rollout log-probs of a tiny LM (float64), as numpy."""
    gen = torch.Generator().manual_seed(seed)
    model_old = _tiny_lm(seed, torch.float64, head_scale=40.0)
    model_new = _perturbed(model_old, seed + 1, 0.35)
    model_rollout = _perturbed(model_old, seed + 2, 0.15)
    prompt_list = [torch.randint(0, VOCAB, (int(n),), generator=gen).tolist()
                   for n in torch.randint(2, 6, (6,), generator=gen)]
    prompts, responses = _rollout(model_rollout, prompt_list, 4, 12, gen)
    with torch.no_grad():
        nested_new = _model_log_probs(model_new, [p + r for p, r in zip(prompts, responses)])
        old = _pad([x.numpy() for x in _response_values(
            _model_log_probs(model_old, [p + r for p, r in zip(prompts, responses)]),
            prompts, responses)])
        rollout = _pad([x.numpy() for x in _response_values(
            _model_log_probs(model_rollout, [p + r for p, r in zip(prompts, responses)]),
            prompts, responses)])
    new = _pad([x.numpy() for x in _response_values(nested_new, prompts, responses)])
    lengths = np.array([len(r) for r in responses])
    mask = (np.arange(new.shape[1])[None, :] < lengths[:, None]).astype(float)
    rng = np.random.default_rng(seed)
    mask[rng.random(mask.shape) < 0.1] = 0.0  # a few masked tokens inside responses too
    mask[:, 0] = 1.0
    mask[lengths == 0] = 0.0
    adv = (rng.standard_normal((len(responses), 1)) + 0.3 * rng.standard_normal(new.shape)) * mask
    return prompts, responses, nested_new, old, new, rollout, adv, mask


def _run_ppo_loss(actor, prompts, responses, nested_new, fields, **batch_info):
    """ppo_loss on a leaf copy of the model's log-probs; (loss, metrics, d loss/d logp padded)."""
    leaf = nested_new.values().detach().clone().requires_grad_()
    log_probs = torch.nested.nested_tensor_from_jagged(leaf, nested_new.offsets())
    data = _verl_batch(prompts, responses, fields, **batch_info)
    loss, metrics = ppo_loss(actor, {"log_probs": log_probs}, data)
    loss.backward()
    grad = _pad([g.numpy() for g in _response_values(
        torch.nested.nested_tensor_from_jagged(leaf.grad, nested_new.offsets()),
        prompts, responses)])
    return loss, metrics, grad


# ================================================================= tests

def test_agg_modes_are_the_ones_verl_accepts():
    for mode in AGG_MODES:
        assert _actor(agg_mode=mode).loss_agg_mode == mode
    with pytest.raises(Exception, match="loss_agg_mode"):
        _actor(agg_mode="seq-sum-token-mean")


def test_bandpo_learns_through_ppo_loss_on_a_tiny_lm():
    """GRPO-style loop: rollouts, group-normalised reward, ppo_loss(bandpo), Adam."""
    actor = _actor(_band(delta=0.1, divergence="kl", max_ratio=5.0))
    model = _tiny_lm(0, torch.float32)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    gen = torch.Generator().manual_seed(0)
    prompt_list = [[1, 2, 3], [4, 5], [9, 8, 7, 6]]
    rewards, clipfracs = [], []
    for _ in range(10):
        prompts, responses = _rollout(model, prompt_list, 6, 8, gen)
        reward = np.array([np.mean(np.array(r) == TARGET) for r in responses])
        grouped = reward.reshape(len(prompt_list), -1)
        adv_seq = ((grouped - grouped.mean(1, keepdims=True))
                   / (grouped.std(1, keepdims=True) + 1e-6)).reshape(-1)
        rewards.append(reward.mean())
        seqs = [p + r for p, r in zip(prompts, responses)]
        with torch.no_grad():
            old_rows = _response_values(_model_log_probs(model, seqs), prompts, responses)
        old = _pad([x.double().numpy() for x in old_rows])
        mask = _pad([np.ones(len(r)) for r in responses])
        fields = {"response_mask": mask, "old_log_probs": old,
                  "advantages": adv_seq[:, None] * mask}
        for _ in range(2):  # two PPO epochs on each rollout batch
            data = _verl_batch(prompts, responses, fields)
            out = {"log_probs": _model_log_probs(model, seqs)}
            loss, metrics = ppo_loss(actor, out, data)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            clipfracs.append(float(metrics["actor/pg_clipfrac"].aggregate()))
    assert np.isfinite(rewards).all()
    assert np.mean(rewards[:2]) < 0.1
    assert np.mean(rewards[-3:]) > np.mean(rewards[:2]) + 0.5, rewards
    assert max(clipfracs) > 0.0  # the band did bind on the second epochs


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("dp", [False, True], ids=["dp1", "dp2"])
def test_ppo_loss_gradients_match_numpy(mode, dp):
    prompts, responses, nested_new, old, new, _, adv, mask = _lm_problem()
    lsf = 7 if dp else None
    info = dict(dp_size=2, batch_num_tokens=int(2 * mask.sum() + 5),
                global_batch_size=2 * len(responses) + 1) if dp else {}
    actor = _actor(_band(delta=0.1, divergence="kl", max_ratio=5.0), agg_mode=mode,
                   loss_scale_factor=lsf)
    fields = {"response_mask": mask, "old_log_probs": old, "advantages": adv}
    loss, metrics, grad = _run_ppo_loss(actor, prompts, responses, nested_new, fields, **info)

    lower, upper = _band_bounds(old, 0.1, "kl", 5.0)
    per_token, ref_grad = _np_surrogate(new, old, adv, lower, upper, actor.clip_ratio_c)
    weights = _np_agg_weights(mask, mode, loss_scale_factor=lsf, **info)
    assert loss.dtype == torch.float64
    assert loss.item() == pytest.approx((per_token * weights).sum(), rel=1e-10, abs=1e-14)
    np.testing.assert_allclose(grad, ref_grad * weights, rtol=1e-9, atol=1e-14)
    # the problem exercises both clip sides and the dual clip
    ratio = np.exp(new - old)
    on = mask > 0
    assert ((ratio > upper) & (adv > 0) & on).any() and ((ratio < lower) & (adv < 0) & on).any()
    assert ((ratio > actor.clip_ratio_c) & (adv < 0) & on).any()
    assert ((ratio >= lower) & (ratio <= upper) & on).sum() > 0.1 * on.sum()
    assert metrics["actor/pg_loss"].aggregate() == pytest.approx(loss.item(), rel=1e-12)


def test_ppo_loss_on_verl_left_right_padded_batch():
    """The other layout ppo_loss reads: left-padded prompts, right-padded responses,
    converted by verl's own left_right_2_no_padding (padded fields stay padded)."""
    from verl.workers.utils.padding import left_right_2_no_padding

    prompts, responses, nested_new, old, new, _, adv, mask = _lm_problem()
    n, width_p, width_r = len(prompts), max(map(len, prompts)), new.shape[1]
    prompt_ids = torch.zeros(n, width_p, dtype=torch.long)
    response_ids = torch.zeros(n, width_r, dtype=torch.long)
    attention = torch.zeros(n, width_p + width_r, dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        prompt_ids[i, width_p - len(p):] = torch.tensor(p)
        response_ids[i, :len(r)] = torch.tensor(r)
        attention[i, width_p - len(p):width_p + len(r)] = 1
    t = torch.tensor
    td = TensorDict({
        "prompts": prompt_ids, "responses": response_ids,
        "input_ids": torch.cat([prompt_ids, response_ids], dim=1), "attention_mask": attention,
        "position_ids": (attention.cumsum(dim=1) - 1).clamp(min=0),
        "response_mask": t(mask).long(), "old_log_probs": t(old), "advantages": t(adv),
    }, batch_size=[n])
    td = left_right_2_no_padding(td)
    assert td["input_ids"].is_nested and not td["old_log_probs"].is_nested
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=n)
    leaf = nested_new.values().detach().clone().requires_grad_()
    log_probs = torch.nested.nested_tensor_from_jagged(leaf, nested_new.offsets())
    actor = _actor(_band(delta=0.1, divergence="kl", max_ratio=5.0), agg_mode="seq-mean-token-sum")
    loss, _ = ppo_loss(actor, {"log_probs": log_probs}, td)
    loss.backward()
    grad = _pad([g.numpy() for g in _response_values(
        torch.nested.nested_tensor_from_jagged(leaf.grad, nested_new.offsets()),
        prompts, responses)])
    lower, upper = _band_bounds(old, 0.1, "kl", 5.0)
    per_token, ref_grad = _np_surrogate(new, old, adv, lower, upper, actor.clip_ratio_c)
    weights = _np_agg_weights(mask, "seq-mean-token-sum", global_batch_size=n)
    assert loss.item() == pytest.approx((per_token * weights).sum(), rel=1e-10)
    np.testing.assert_allclose(grad, ref_grad * weights, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("loss_mode", ["bandpo", "vanilla"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_rollout_is_weights_are_applied_as_vanilla_applies_them(loss_mode, mode):
    """Decoupled mode: verl's token-level TIS weights multiply each token's loss."""
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_rejection_mask

    prompts, responses, nested_new, old, new, rollout, adv, mask = _lm_problem()
    t = torch.tensor
    is_proto, rs_mask, _ = compute_rollout_correction_and_rejection_mask(
        old_log_prob=t(old), rollout_log_prob=t(rollout), response_mask=t(mask),
        rollout_is="token", rollout_is_threshold=2.0)
    is_weights = is_proto.batch["rollout_is_weights"].numpy()
    assert np.allclose(rs_mask.numpy(), mask)  # no rejection sampling configured
    assert is_weights[mask > 0].std() > 0.05 and is_weights.max() <= 2.0  # weights vary

    overrides = _band(delta=0.1, divergence="kl", max_ratio=5.0) if loss_mode == "bandpo" else ()
    actor = _actor(overrides, agg_mode=mode)
    fields = {"response_mask": mask, "old_log_probs": old, "advantages": adv,
              "rollout_is_weights": is_weights}
    loss, _, grad = _run_ppo_loss(actor, prompts, responses, nested_new, fields)
    if loss_mode == "bandpo":
        lower, upper = _band_bounds(old, 0.1, "kl", 5.0)
    else:
        lower, upper = 1 - actor.clip_ratio_low, 1 + actor.clip_ratio_high
    per_token, ref_grad = _np_surrogate(new, old, adv, lower, upper, actor.clip_ratio_c,
                                        weights=is_weights)
    weights = _np_agg_weights(mask, mode)
    assert loss.item() == pytest.approx((per_token * weights).sum(), rel=1e-10)
    np.testing.assert_allclose(grad, ref_grad * weights, rtol=1e-9, atol=1e-14)
    unweighted, _, _ = _run_ppo_loss(actor, prompts, responses, nested_new,
                                     {k: v for k, v in fields.items()
                                      if k != "rollout_is_weights"})
    assert abs(unweighted.item() - loss.item()) > 1e-3 * abs(loss.item())


def test_bypass_mode_in_the_v1_trainer_keeps_bandpo_on_rollout_log_probs():
    """verl 0.9's default (v1) trainer, bypass_mode=true: old_log_probs := rollout_log_probs.

    It does not touch loss_mode and adds no rollout_is_weights, so the band is
    centred on the rollout policy's probabilities.
    """
    cfg = _compose([*_band(delta=0.1, divergence="tv", max_ratio=5.0),
                    "algorithm.rollout_correction.bypass_mode=true"])
    assert cfg.trainer.use_v1 is True
    assert cfg.algorithm.rollout_correction.bypass_mode is True
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert actor.policy_loss.loss_mode == "bandpo"

    prompts, responses, nested_new, old, new, rollout, adv, mask = _lm_problem()
    data_fields = {"response_mask": mask, "rollout_log_probs": rollout, "advantages": adv}
    # what verl.trainer.ppo.v1.trainer_base._compute_old_log_prob does in bypass mode
    data_fields["old_log_probs"] = data_fields.pop("rollout_log_probs")
    loss, _, grad = _run_ppo_loss(actor, prompts, responses, nested_new, data_fields)
    lower, upper = _band_bounds(rollout, 0.1, "tv", 5.0)
    per_token, ref_grad = _np_surrogate(new, rollout, adv, lower, upper, actor.clip_ratio_c)
    weights = _np_agg_weights(mask, "token-mean")
    assert loss.item() == pytest.approx((per_token * weights).sum(), rel=1e-10)
    np.testing.assert_allclose(grad, ref_grad * weights, rtol=1e-9, atol=1e-14)


def test_bypass_mode_in_the_legacy_trainer_replaces_bandpo():
    """Pins a verl behaviour users must know: the legacy (use_v1=false) trainer's
    apply_bypass_mode rewrites policy_loss.loss_mode to "bypass_mode", which runs
    vanilla PPO-clip (or REINFORCE); loss_mode=bandpo is silently dropped there."""
    from verl import DataProto
    from verl.trainer.ppo.rollout_corr_helper import apply_bypass_mode

    cfg = _compose([*_band(), "algorithm.rollout_correction.bypass_mode=true"])
    policy_loss = cfg.actor_rollout_ref.actor.policy_loss
    batch = DataProto.from_dict(tensors={"rollout_log_probs": torch.zeros(2, 3),
                                         "old_log_probs": torch.ones(2, 3)})
    apply_bypass_mode(batch, cfg.algorithm.rollout_correction, policy_loss)
    assert policy_loss.loss_mode == "bypass_mode"
    assert torch.equal(batch.batch["old_log_probs"], batch.batch["rollout_log_probs"])


# ------------------------------------------------------ DPPO cross-check

def _dppo_problem(seed, n=4096):
    """Many tokens, p_old log-uniform on [1e-4, 0.995], probabilities spread around delta."""
    rng = np.random.default_rng(seed)
    old = rng.uniform(np.log(1e-4), np.log(0.995), n)
    log_ratio = rng.normal(0.0, 1.0, n)
    new = np.minimum(old + log_ratio, np.log1p(-1e-6))  # p_new < 1
    adv = rng.standard_normal(n)
    return old[None], new[None], adv[None]


def _binary_kl(p, q, eps=0.0):
    return p * np.log(p / q) + (1 - p) * np.log((1 - p + eps) / (1 - q + eps))


def _dppo_case(seed, divergence, delta):
    """(old, new, adv, mask, verl's divergence per token, dppo's actor): the
    problem, its ties left out: tokens within 1e-9 (relative) of delta, or
    where verl's 1e-8 stabiliser in log((1 - p_old + 1e-8) / (1 - p_new + 1e-8))
    could flip the side."""
    old, new, adv = _dppo_problem(seed)
    p_old, p_new = np.exp(old), np.exp(new)
    if divergence == "kl":
        exact, verl_div = _binary_kl(p_old, p_new), _binary_kl(p_old, p_new, eps=1e-8)
    else:
        exact = verl_div = np.abs(p_new - p_old)
    tie = np.abs(exact - delta) <= np.maximum(1e-9 * delta, 10 * np.abs(verl_div - exact))
    assert tie.sum() < 0.01 * tie.size
    dppo = "dppo_kl" if divergence == "kl" else "dppo_tv"
    actor = _actor((f"actor_rollout_ref.actor.policy_loss.loss_mode={dppo}",
                    f"actor_rollout_ref.actor.clip_ratio_low={delta}",
                    f"actor_rollout_ref.actor.clip_ratio_high={delta}",
                    "actor_rollout_ref.actor.clip_ratio_c=1e12"), agg_mode="token-sum")
    return old, new, adv, (~tie).astype(float), verl_div, actor


def _grad_and_mask(loss_mode, actor, old, new, adv, mask):
    _, grad = _loss_and_grad(loss_mode, actor, old, new, adv, mask)
    return grad, (grad == 0.0) & (mask > 0)


@pytest.mark.parametrize("divergence,dppo", [("kl", "dppo_kl"), ("tv", "dppo_tv")])
@pytest.mark.parametrize("delta", [0.02, 0.2])
def test_band_masks_exactly_the_tokens_dppo_masks(divergence, dppo, delta):
    """verl's DPPO-Binary (arXiv 2602.04879) masks a token iff its binary
    divergence from the old probability exceeds delta *in the direction the
    advantage pushes*: A > 0 and p_new > p_old, or A <= 0 and p_new < p_old.
    dppo_kl's divergence is KL(Bern(p_old) || Bern(p_new)) (bandsolve "kl"),
    dppo_tv's is |p_new - p_old| (bandsolve "tv"); delta is actor.clip_ratio_high
    for A > 0 and actor.clip_ratio_low for A <= 0. That is exactly "the ratio
    leaves the band on the side the sign of A clips", i.e. where BandPO's
    gradient is zero; with dual clip and TIS truncation off the two gradients
    are equal token by token."""
    old, new, adv, mask, verl_div, dppo_actor = _dppo_case(
        int(delta * 100) + (divergence == "tv"), divergence, delta)
    p_old, p_new = np.exp(old), np.exp(new)
    band_actor = _actor(_band(delta=delta, divergence=divergence, max_ratio=None,
                              dual_clip=False), agg_mode="token-sum")
    dppo_grad, dppo_masked = _grad_and_mask(dppo, dppo_actor, old, new, adv, mask)
    band_grad, band_masked = _grad_and_mask("bandpo", band_actor, old, new, adv, mask)

    lower, upper = _band_bounds(old, delta, divergence, None)
    ratio = np.exp(new - old)
    outside = np.where(adv > 0, ratio > upper, ratio < lower) & (mask > 0)
    # the rule in verl's own terms, written out
    rule = np.where(adv > 0, (verl_div > delta) & (p_new > p_old),
                    (verl_div > delta) & (p_new < p_old)) & (mask > 0)
    np.testing.assert_array_equal(dppo_masked, rule)
    np.testing.assert_array_equal(dppo_masked, outside)
    np.testing.assert_array_equal(band_masked, outside)
    np.testing.assert_allclose(band_grad, dppo_grad, rtol=1e-12, atol=0)
    # both sides occur, and the other side of the band is not masked for that sign
    assert (outside & (adv > 0)).sum() > 50 and (outside & (adv < 0)).sum() > 50
    assert ((ratio < lower) & (adv > 0) & (mask > 0)).sum() > 50
    assert ((ratio > upper) & (adv < 0) & (mask > 0)).sum() > 50


def test_dppo_kl_is_not_the_reverse_kl_band():
    """Direction check: with bandsolve's "rkl" (KL(pi_new || pi_old)) the sets differ."""
    old, new, adv = _dppo_problem(5)
    delta = 0.2
    lower, upper = _band_bounds(old, delta, "rkl", None)
    ratio = np.exp(new - old)
    rkl_outside = np.where(adv > 0, ratio > upper, ratio < lower)
    actor = _actor(("actor_rollout_ref.actor.policy_loss.loss_mode=dppo_kl",
                    f"actor_rollout_ref.actor.clip_ratio_low={delta}",
                    f"actor_rollout_ref.actor.clip_ratio_high={delta}",
                    "actor_rollout_ref.actor.clip_ratio_c=1e12"), agg_mode="token-sum")
    _, dppo_masked = _grad_and_mask("dppo_kl", actor, old, new, adv, np.ones_like(old))
    assert (dppo_masked != rkl_outside).sum() > 20


def _loss_and_grad(loss_mode, actor, old, new, adv, mask):
    """verl's registered loss at token-sum: (loss, d loss / d log_prob)."""
    log_prob = torch.tensor(new).requires_grad_()
    loss, _ = get_policy_loss_fn(loss_mode)(
        old_log_prob=torch.tensor(old), log_prob=log_prob, advantages=torch.tensor(adv),
        response_mask=torch.tensor(mask).bool(), loss_agg_mode="token-sum", config=actor)
    loss.backward()
    return loss.item(), log_prob.grad.numpy()


@pytest.mark.parametrize("divergence,dppo", [("kl", "dppo_kl"), ("tv", "dppo_tv")])
@pytest.mark.parametrize("delta", [0.02, 0.2])
def test_mask_mode_is_verls_dppo_loss_and_gradient(divergence, dppo, delta):
    """band_mode=mask with kl and tv at verl's delta is verl's dppo_kl / dppo_tv:
    the gradients are equal token by token, and the loss, sum over the kept
    tokens of -A r, is the sum of dppo's per-token gradients. (dppo's loss value
    is -A sg(min(r, c)) log pi on the kept tokens, a surrogate whose value is
    not the objective but whose gradient is -A r; its truncation at
    clip_ratio_c is set out of reach, as the band's dual clip is off.)"""
    old, new, adv, mask, _, dppo_actor = _dppo_case(
        int(delta * 100) + (divergence == "tv") + 10, divergence, delta)
    band_actor = _actor((*_band(delta=delta, divergence=divergence, max_ratio=None,
                                dual_clip=False),
                         "+actor_rollout_ref.actor.policy_loss.band_mode=mask"),
                        agg_mode="token-sum")
    assert band_actor.policy_loss.band_mode == "mask"
    _, dppo_grad = _loss_and_grad(dppo, dppo_actor, old, new, adv, mask)
    band_loss, band_grad = _loss_and_grad("bandpo", band_actor, old, new, adv, mask)
    np.testing.assert_allclose(band_grad, dppo_grad, rtol=1e-12, atol=0)
    assert band_loss == pytest.approx(dppo_grad.sum(), rel=1e-12)
    # and dropped tokens are where dppo masks (its gradient is 0 there)
    assert ((dppo_grad == 0) & (mask > 0)).sum() > 100
    # the clip mode has the same gradient, another loss value
    clip_actor = _actor(_band(delta=delta, divergence=divergence, max_ratio=None,
                              dual_clip=False), agg_mode="token-sum")
    clip_loss, clip_grad = _loss_and_grad("bandpo", clip_actor, old, new, adv, mask)
    np.testing.assert_array_equal(clip_grad, band_grad)
    assert clip_loss != pytest.approx(band_loss, rel=1e-6)


def test_the_rollout_anchor_takes_the_band_around_rollout_log_probs():
    """band_anchor=rollout with the rollout_log_probs verl's PolicyLossFn
    declares: the token is clipped where pi / pi_rollout leaves the band of
    pi_rollout, verl's rollout_is_weights still multiply the loss; without
    rollout_log_probs (verl 0.9's ppo_loss passes none) the step fails naming
    bypass mode."""
    prompts, responses, nested_new, old, new, rollout, adv, mask = _lm_problem()
    actor = _actor((*_band(delta=0.1, divergence="kl", max_ratio=5.0, dual_clip=False),
                    "+actor_rollout_ref.actor.policy_loss.band_anchor=rollout"),
                   agg_mode="token-sum")
    weights = np.exp(np.clip(old - rollout, -20, 20)).clip(max=2.0) * mask
    t = torch.tensor
    log_prob = t(new).requires_grad_()
    loss, metrics = get_policy_loss_fn("bandpo")(
        t(old), log_prob, t(adv), t(mask).bool(), "token-sum", actor,
        rollout_is_weights=t(weights), rollout_log_probs=t(rollout))
    loss.backward()
    lower, upper = _band_bounds(rollout, 0.1, "kl", 5.0)
    behaviour = np.exp(new - rollout)
    clipped = ((adv > 0) & (behaviour > upper)) | ((adv < 0) & (behaviour < lower))
    want = np.where(clipped, 0.0, -adv * np.exp(new - old)) * weights * mask
    np.testing.assert_allclose(log_prob.grad.numpy(), want, rtol=1e-9, atol=1e-14)
    assert (clipped & (mask > 0)).sum() > 0 and "actor/band/fixed_clipfrac_upper" in metrics
    with pytest.raises(ValueError, match="bypass_mode=true"):
        _run_ppo_loss(actor, prompts, responses, nested_new,
                      {"response_mask": mask, "old_log_probs": old, "advantages": adv})
