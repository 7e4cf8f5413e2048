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
    "actor_rollout_ref.actor.policy_loss._target_=bandsolve.torch.verl.BandPOPolicyLossConfig",
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
    from bandsolve.torch.verl import compute_policy_loss_bandpo

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
