"""The verl plug-in against the real verl package (pytest -m trainers).

Configuration goes through verl's own Hydra config tree with the overrides
the plug-in documents, so the test fails if verl stops accepting them. Loss
and gradients are checked against the surrogate written out in numpy with
bounds from the numpy core.
"""

import os

import numpy as np
import pytest

pytestmark = pytest.mark.trainers

torch = pytest.importorskip("torch")
verl = pytest.importorskip("verl")

from hydra import compose, initialize_config_dir  # noqa: E402
from problems import clipped_surrogate_reference, policy_batch  # noqa: E402
from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

import bandsolve as bs  # noqa: E402

BAND_OVERRIDES = [
    "actor_rollout_ref.actor.policy_loss.loss_mode=bandpo",
    "actor_rollout_ref.actor.policy_loss._target_=bandsolve.integrations.verl.BandPOPolicyLossConfig",
    "+actor_rollout_ref.actor.policy_loss.band_delta=0.1",
    "+actor_rollout_ref.actor.policy_loss.band_divergence=tv",
    "+actor_rollout_ref.actor.policy_loss.band_max_ratio=5",
]


def _actor_config(overrides, agg_mode="token-mean"):
    """verl's ActorConfig as its trainer builds it from ppo_trainer.yaml."""
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=[
            *overrides,
            f"actor_rollout_ref.actor.loss_agg_mode={agg_mode}",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.n=1",
        ])
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


def _batch(seed=0, shape=(4, 9)):
    return policy_batch(seed, shape, min_p=1e-3, spread=0.7, keep=0.75)


def _reference(old, new, adv, mask, delta, divergence, max_ratio, dual_clip, mode):
    """(loss, d loss / d log_prob, clip fraction) written out in numpy."""
    lower, upper = bs.band_from_logp(old, delta, divergence, max_ratio=max_ratio)
    per_token, grad, active, _ = clipped_surrogate_reference(np.exp(new - old), adv, lower,
                                                             upper, dual_clip)
    if mode == "token-mean":
        weight = mask / mask.sum()
    else:  # seq-mean-token-mean
        weight = mask / mask.sum(axis=1, keepdims=True) / mask.shape[0]
    clipfrac = (active * mask).sum() / mask.sum()
    return (per_token * weight).sum(), grad * weight, clipfrac


def test_import_verl_registers_bandpo_through_the_entry_point():
    from bandsolve.integrations.verl import compute_policy_loss_bandpo

    assert get_policy_loss_fn("bandpo") is compute_policy_loss_bandpo


def test_the_documented_overrides_reach_the_actor_config():
    actor = _actor_config(BAND_OVERRIDES)
    assert type(actor.policy_loss).__name__ == "BandPOPolicyLossConfig"
    assert (actor.policy_loss.loss_mode, actor.policy_loss.band_delta,
            actor.policy_loss.band_divergence, actor.policy_loss.band_max_ratio) == \
        ("bandpo", 0.1, "tv", 5)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_loss_and_gradients_on_a_real_actor_config(mode):
    actor = _actor_config(BAND_OVERRIDES, agg_mode=mode)
    old, new, adv, mask = _batch()
    t = torch.tensor
    log_prob = t(new).requires_grad_()
    loss, metrics = get_policy_loss_fn(actor.policy_loss.loss_mode)(
        old_log_prob=t(old), log_prob=log_prob, advantages=t(adv),
        response_mask=t(mask).bool(), loss_agg_mode=actor.loss_agg_mode, config=actor)
    loss.backward()
    ref_loss, ref_grad, ref_clipfrac = _reference(old, new, adv, mask, 0.1, "tv", 5.0,
                                                  actor.clip_ratio_c, mode)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(log_prob.grad.numpy(), ref_grad, rtol=1e-9, atol=1e-15)
    assert float(metrics["actor/pg_clipfrac"]) == pytest.approx(ref_clipfrac, rel=1e-6)
    assert 0.0 < ref_clipfrac < 1.0  # the band binds on some tokens, not all
    assert {"actor/pg_clipfrac_lower", "actor/ppo_kl", "actor/band/wider_than_clip_higher",
            "actor/band/clipfrac/p<1e-3"} <= set(metrics)


def test_defaults_without_the_band_keys():
    """loss_mode=bandpo alone: delta 0.05, kl, max_ratio 10, on verl's own config class."""
    actor = _actor_config(["actor_rollout_ref.actor.policy_loss.loss_mode=bandpo"])
    assert type(actor.policy_loss).__name__ == "PolicyLossConfig"
    old, new, adv, mask = _batch(seed=1)
    t = torch.tensor
    loss, _ = get_policy_loss_fn("bandpo")(t(old), t(new), t(adv), t(mask).bool(),
                                           "token-mean", actor)
    ref_loss, _, _ = _reference(old, new, adv, mask, 0.05, "kl", 10.0, actor.clip_ratio_c,
                                "token-mean")
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)


def test_bad_old_log_probs_are_refused():
    actor = _actor_config(BAND_OVERRIDES)
    old, new, adv, mask = _batch()
    old[1, 2] = np.nan
    t = torch.tensor
    with pytest.raises(ValueError, match="NaN"):
        get_policy_loss_fn("bandpo")(t(old), t(new), t(adv), t(mask).bool(), "token-mean",
                                     actor)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
def test_with_a_constant_band_it_is_verls_own_vanilla_loss(monkeypatch, mode):
    """Band replaced by verl's [1 - clip_ratio_low, 1 + clip_ratio_high]: the same
    loss, gradient and clip fractions as verl's ``vanilla`` (PPO with the dual
    clip at clip_ratio_c) on the same batch and actor config."""
    from bandsolve.torch import settings as band_settings

    low, high = 0.2, 0.28

    def constant_band(log_prob, *args, **kwargs):
        return torch.full_like(log_prob, 1.0 - low), torch.full_like(log_prob, 1.0 + high)

    # every plug-in's band comes through BandSettings.bounds, which calls this
    monkeypatch.setattr(band_settings, "band_from_logp", constant_band)
    actor = _actor_config([*BAND_OVERRIDES, f"actor_rollout_ref.actor.clip_ratio_low={low}",
                           f"actor_rollout_ref.actor.clip_ratio_high={high}",
                           "actor_rollout_ref.actor.clip_ratio_c=2.0"], agg_mode=mode)
    old, new, adv, mask = _batch(seed=3)
    adv[0, :] = -np.abs(adv[0, :]) - 1.0  # negative advantages, for the dual clip
    new[0, :3] = old[0, :3] + 1.2  # ratios above clip_ratio_c there

    def run(loss_mode):
        log_prob = torch.tensor(new).requires_grad_()
        loss, metrics = get_policy_loss_fn(loss_mode)(
            old_log_prob=torch.tensor(old), log_prob=log_prob, advantages=torch.tensor(adv),
            response_mask=torch.tensor(mask).bool(), loss_agg_mode=mode, config=actor)
        loss.backward()
        return loss.item(), log_prob.grad.numpy(), metrics

    ours, our_grad, ours_m = run("bandpo")
    theirs, their_grad, theirs_m = run("vanilla")
    assert ours == pytest.approx(theirs, rel=1e-12)
    np.testing.assert_allclose(our_grad, their_grad, rtol=1e-12, atol=1e-15)
    for key in ("actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl"):
        # the fractions are float32 means, summed in another order (verl's one mask,
        # ours upper + lower)
        assert float(ours_m[key]) == pytest.approx(float(theirs_m[key]), rel=1e-6, abs=1e-12), key
    assert 0.0 < float(theirs_m["actor/pg_clipfrac"]) < 1.0
    assert float(theirs_m["actor/pg_clipfrac_lower"]) > 0.0  # the dual clip bound somewhere
