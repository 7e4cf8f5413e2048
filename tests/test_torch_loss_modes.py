"""The band as a mask (``mode="mask"``), the band around the rollout policy
(``rollout_log_prob``) and the fixed clip's fractions beside the band's,
against their equations written out in numpy with bounds from the numpy core."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from problems import policy_batch  # noqa: E402

import bandsolve as bs  # noqa: E402
from bandsolve.torch import (  # noqa: E402
    LOSS_AGG_MODES,
    Band,
    PolicyLossConfig,
    PPOClip,
    aggregate,
    loss_terms,
    policy_loss,
    rollout_anchored,
)


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


def _numpy_band(rule, log_p):
    if isinstance(rule, PPOClip):
        return np.full_like(log_p, 1 - rule.eps), np.full_like(log_p, 1 + rule.eps)
    return bs.band_from_logp(log_p, rule.delta, rule.divergence, max_ratio=rule.max_ratio)


def _masked_reference(ratio, adv, lower, upper, dual_clip):
    """-A r, 0 where the ratio left [lower, upper] the way A pushes it; dual clip."""
    outside = ((adv > 0) & (ratio > upper)) | ((adv < 0) & (ratio < lower))
    per_token = np.where(outside, 0.0, -adv * ratio)
    grad = np.where(outside, 0.0, -adv * ratio)  # d/d log pi of -A r
    if dual_clip is not None:
        dual = (adv < 0) & (per_token > -adv * dual_clip)
        per_token = np.where(dual, -adv * dual_clip, per_token)
        grad = np.where(dual, 0.0, grad)
    return per_token, grad, outside


RULES = [Band(0.05, "kl"), Band(0.2, "tv", max_ratio=None), PPOClip(0.2)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: type(r).__name__ + getattr(r, "divergence", ""))
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("dual_clip", [None, 2.0])
def test_mask_mode_loss_and_gradient_match_the_equation(rule, mode, dual_clip):
    old, new, adv, mask = policy_batch(3, (5, 9), spread=0.8)
    log_prob = _t(new).requires_grad_()
    loss, metrics = policy_loss(log_prob, _t(old), _t(adv), _t(mask),
                                PolicyLossConfig(rule=rule, loss_agg_mode=mode,
                                                 dual_clip=dual_clip, mode="mask"))
    loss.backward()
    lower, upper = _numpy_band(rule, old)
    per_token, grad, outside = _masked_reference(np.exp(new - old), adv, lower, upper, dual_clip)
    # the aggregation's weights, from the aggregation of a matrix of ones
    # (checked against verl's agg_loss in test_torch_trainer_edges.py)
    ones = _t(np.ones_like(per_token)).requires_grad_()
    aggregate(ones, _t(mask), mode).backward()
    weights = ones.grad.numpy()
    assert loss.item() == pytest.approx((per_token * weights).sum(), rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(log_prob.grad.numpy(), grad * weights, rtol=1e-12, atol=1e-15)
    # the share of dropped tokens is the clip fraction's
    dropped = (outside * mask).sum() / mask.sum()
    got = float(metrics["clipfrac_upper"]) + float(metrics["clipfrac_lower"])
    assert got == pytest.approx(dropped, rel=1e-6)
    assert 0 < dropped < 1


@pytest.mark.parametrize("dual_clip", [None, 2.0])
def test_mask_and_clip_give_the_same_gradient_and_differ_only_on_dropped_tokens(dual_clip):
    """The clip zeroes the gradient exactly where the mask drops the token: the
    two modes' gradients are equal token by token; their per-token losses
    differ only there (the clipped -A clip(r) against 0)."""
    old, new, adv, mask = policy_batch(4, (6, 11), spread=0.9)
    rule = Band(0.05, "kl")
    terms = {}
    grads = {}
    for mode in ("clip", "mask"):
        log_prob = _t(new).requires_grad_()
        terms[mode] = loss_terms(log_prob, _t(old), _t(adv), _t(mask), rule, dual_clip, mode)
        aggregate(terms[mode].pg_losses, _t(mask), "token-sum").backward()
        grads[mode] = log_prob.grad.numpy()
    np.testing.assert_array_equal(grads["clip"], grads["mask"])
    lower, upper = _numpy_band(rule, old)
    _, _, outside = _masked_reference(np.exp(new - old), adv, lower, upper, None)
    differ = (terms["clip"].pg_losses != terms["mask"].pg_losses).numpy() & (mask > 0)
    np.testing.assert_array_equal(differ, outside & (mask > 0) & (adv != 0))
    assert differ.sum() > 3


def test_a_bad_mode_is_refused_when_the_config_is_made():
    with pytest.raises(ValueError, match="mode must be one of"):
        PolicyLossConfig(mode="masked")
    old, new, adv, mask = policy_batch(0)
    with pytest.raises(ValueError, match="mode must be one of"):
        loss_terms(_t(new), _t(old), _t(adv), _t(mask), Band(), None, "Mask")


def test_the_band_around_the_rollout_policy_clips_pi_over_pi_rollout_by_its_band():
    """With rollout log-probabilities the token is clipped exactly where
    pi / pi_rollout leaves the band of pi_rollout (numpy core), while the
    surrogate keeps the trainer's ratio r = pi / pi_old."""
    rng = np.random.default_rng(7)
    old, new, adv, mask = policy_batch(5, (6, 13), spread=0.5)
    rollout = np.minimum(old + rng.normal(0.0, 0.4, old.shape), 0.0)  # a stale policy
    rule = Band(0.05, "kl")
    log_prob = _t(new).requires_grad_()
    terms = loss_terms(log_prob, _t(old), _t(adv), _t(mask), rule, None, "clip", _t(rollout))
    aggregate(terms.pg_losses, _t(mask), "token-sum").backward()

    lo_roll, hi_roll = bs.band_from_logp(rollout, 0.05, "kl", max_ratio=10.0)
    behaviour_ratio = np.exp(new - rollout)  # pi / pi_rollout
    clipped = ((adv > 0) & (behaviour_ratio > hi_roll)) | ((adv < 0) & (behaviour_ratio < lo_roll))
    r = np.exp(new - old)
    want_grad = np.where(clipped, 0.0, -adv * r) * mask
    np.testing.assert_allclose(log_prob.grad.numpy(), want_grad, rtol=1e-9, atol=1e-15)
    assert (clipped & (mask > 0)).sum() > 3
    # the bounds on r are the rollout band, rescaled by pi_rollout / pi_old
    shift = np.exp(rollout - old)
    real = mask > 0
    np.testing.assert_allclose(terms.lower.numpy()[real], (lo_roll * shift)[real], rtol=1e-9)
    np.testing.assert_allclose(terms.upper.numpy()[real], (hi_roll * shift)[real], rtol=1e-9)
    # and the anchor changes which tokens the band clips
    plain = loss_terms(_t(new), _t(old), _t(adv), _t(mask), rule)
    assert not torch.equal(plain.upper, terms.upper)


def test_rollout_anchored_bounds_of_an_unbounded_band_stay_unbounded():
    lower, upper = rollout_anchored((torch.zeros(3), torch.full((3,), float("inf"))),
                                    torch.zeros(3), torch.tensor([-1.0, 0.0, -30.0]))
    assert torch.equal(lower, torch.zeros(3)) and torch.isinf(upper).all()


def test_fixed_clip_fractions_are_the_fixed_intervals_on_the_same_ratios():
    old, new, adv, mask = policy_batch(6, (5, 12), spread=0.6)
    terms = loss_terms(_t(new), _t(old), _t(adv), _t(mask), Band(0.05, "kl"))
    metrics = terms.clip_metrics(_t(mask), fixed=(0.8, 1.28))
    r = np.exp(new - old)
    upper = ((r > 1.28) & (adv > 0) & (mask > 0)).sum() / mask.sum()
    lower = ((r < 0.8) & (adv < 0) & (mask > 0)).sum() / mask.sum()
    assert float(metrics["fixed_clipfrac_upper"]) == pytest.approx(upper, rel=1e-6)
    assert float(metrics["fixed_clipfrac_lower"]) == pytest.approx(lower, rel=1e-6)
    band = float(metrics["clipfrac_upper"]) + float(metrics["clipfrac_lower"])
    assert band != pytest.approx(upper + lower)  # the band is not the fixed interval here
    assert "fixed_clipfrac_upper" not in terms.clip_metrics(_t(mask))
