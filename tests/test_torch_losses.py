"""bandsolve.torch's clipped surrogates against the equation, token by token."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from problems import policy_batch  # noqa: E402

import bandsolve as bs  # noqa: E402
from bandsolve import baselines  # noqa: E402
from bandsolve.torch import (  # noqa: E402
    DCPO,
    LOSS_AGG_MODES,
    Band,
    ClipHigher,
    NoClip,
    PolicyLossConfig,
    PPOClip,
    aggregate,
    policy_loss,
)


def _batch(seed=0, shape=(4, 7)):
    return policy_batch(seed, shape)


def _numpy_bounds(rule, old):
    p = np.exp(old)
    if isinstance(rule, NoClip):
        return np.zeros_like(p), np.full_like(p, np.inf)
    if isinstance(rule, PPOClip):
        return baselines.ppo_bounds(p, rule.eps)
    if isinstance(rule, ClipHigher):
        return baselines.clip_higher_bounds(p, rule.eps_low, rule.eps_high)
    if isinstance(rule, DCPO):
        return baselines.dcpo_bounds(p, rule.eps_low, rule.eps_high, rule.max_ratio)
    return bs.band_from_logp(old, rule.delta, rule.divergence, max_ratio=rule.max_ratio)


def _reference_loss(rule, old, new, adv, mask, mode, dual_clip):
    """max(-A r, -A clip(r, lo, hi)), dual clip, aggregation: written out in numpy."""
    lo, hi = _numpy_bounds(rule, old)
    r = np.exp(new - old)
    per_token = np.maximum(-adv * r, -adv * np.clip(r, lo, hi))
    if dual_clip is not None:
        per_token = np.where(adv < 0, np.minimum(per_token, -dual_clip * adv), per_token)
    if mode == "token-mean":
        return (per_token * mask).sum() / mask.sum()
    if mode == "token-sum":
        return (per_token * mask).sum()
    rows = mask.sum(-1) > 0  # verl's sequence means skip rows without a token
    seq = (per_token * mask).sum(-1)[rows]
    if mode == "seq-mean-token-mean":
        seq = seq / mask.sum(-1)[rows]
    value = seq.sum() / rows.sum()
    return value / mask.shape[-1] if mode == "seq-mean-token-sum-norm" else value


RULES = [NoClip(), PPOClip(0.2), ClipHigher(0.2, 0.28), DCPO(), Band(0.05, "kl"),
         Band(0.1, "chi2", max_ratio=None)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: type(r).__name__ + getattr(r, "divergence", ""))
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_loss_matches_the_equation(rule, mode, dual_clip):
    old, new, adv, mask = _batch()
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    loss, _ = policy_loss(t(new), t(old), t(adv), t(mask),
                          PolicyLossConfig(rule=rule, loss_agg_mode=mode, dual_clip=dual_clip))
    expected = _reference_loss(rule, old, new, adv, mask, mode, dual_clip)
    assert float(loss) == pytest.approx(expected, rel=1e-12)


def test_clipped_tokens_get_no_gradient_and_the_band_frees_the_tail():
    """A tail token (p = 0.01) pushed to r = 2 with A > 0: PPO zeroes its
    gradient, Band-KL (r_hi(0.01) = 5.9 at delta 0.05) does not."""
    old = torch.log(torch.tensor([[0.01, 0.5]], dtype=torch.float64))
    adv = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    for rule, tail_grad_is_zero in ((PPOClip(), True), (Band(0.05, "kl"), False)):
        new = (old + torch.log(torch.tensor([[2.0, 1.1]], dtype=torch.float64))).requires_grad_()
        loss, metrics = policy_loss(new, old, adv, mask, PolicyLossConfig(rule=rule))
        loss.backward()
        assert (new.grad[0, 0] == 0) == tail_grad_is_zero
        assert new.grad[0, 1] != 0  # r = 1.1 is inside both
        assert float(metrics["clipfrac_upper"]) == (0.5 if tail_grad_is_zero else 0.0)


def test_dual_clip_caps_the_loss_for_negative_advantages():
    old = torch.zeros(1, 1, dtype=torch.float64)
    new = torch.full((1, 1), math.log(50.0), dtype=torch.float64)
    adv = torch.full((1, 1), -1.0, dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.float64)
    loss, _ = policy_loss(new, old, adv, mask, PolicyLossConfig(rule=PPOClip(), dual_clip=3.0))
    assert float(loss) == pytest.approx(3.0)
    loss, _ = policy_loss(new, old, adv, mask, PolicyLossConfig(rule=PPOClip()))
    assert float(loss) == pytest.approx(50.0)


def test_metrics_by_bucket_and_band_width():
    p = torch.tensor([[5e-4, 5e-3, 0.05, 0.3, 0.7, 0.95]], dtype=torch.float64)
    old = torch.log(p)
    new = old + math.log(1.5)
    adv = torch.ones_like(p)
    mask = torch.ones_like(p)
    _, m = policy_loss(new, old, adv, mask, PolicyLossConfig(rule=Band(0.05, "kl")))
    lo, hi = bs.band(p.numpy(), 0.05, "kl", max_ratio=10.0)
    assert float(m["wider_than_clip_higher"]) == pytest.approx(np.mean((hi - lo) > 0.48))
    # metrics are accumulated in float32
    assert float(m["band_width/0.1<=p<0.5"]) == pytest.approx(hi[0, 3] - lo[0, 3], rel=1e-6)
    # r = 1.5 exceeds the band only for the confident tokens
    clipped = 1.5 > hi[0]
    assert float(m["clipfrac_upper"]) == pytest.approx(clipped.mean())
    assert float(m["clipfrac/p>=0.9"]) == float(clipped[5])
    assert int(m["tokens/p<1e-3"]) == 1


def test_band_rule_matches_the_numpy_core_and_keeps_the_device_and_dtype():
    old = torch.log(torch.tensor([0.0, 1e-6, 0.08, 0.5, 1.0]))
    lo, hi = Band(0.05, "kl", max_ratio=10).bounds(old)
    assert lo.dtype == torch.float32 and lo.device == old.device
    ref_lo, ref_hi = bs.band_from_logp(old.double().numpy(), 0.05, "kl", max_ratio=10)
    # float32 results: 1e-6 relative, and float64's 5e-324 underflows to 0
    np.testing.assert_allclose(lo.numpy(), ref_lo, rtol=1e-6, atol=1e-38)
    np.testing.assert_allclose(hi.numpy(), ref_hi, rtol=1e-6, atol=1e-38)


def test_aggregate_empty_sequence_is_excluded_from_sequence_means_as_in_verl():
    # the empty row used to count in the mean (0.5 here); verl's agg_loss skips it
    loss_mat = torch.ones(2, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert float(aggregate(loss_mat, mask, "token-mean")) == 1.0
    assert float(aggregate(loss_mat, mask, "seq-mean-token-mean")) == 1.0
    assert float(aggregate(loss_mat, mask, "seq-mean-token-sum")) == 2.0


@pytest.mark.parametrize("make, match", [
    (lambda: PolicyLossConfig(loss_agg_mode="mean"), "loss_agg_mode"),
    (lambda: PolicyLossConfig(dual_clip=1.0), "dual_clip"),
    (lambda: Band(0.05, "nope"), "unknown divergence"),
])
def test_bad_configuration(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_inputs_must_share_a_shape():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="share one shape"):
        policy_loss(x, x, x, torch.ones(2, 4))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(delta=-0.1), ValueError, "positive"),
    (dict(max_ratio=0.5), ValueError, "max_ratio"),
    (dict(divergence="nope"), ValueError, "unknown divergence"),
    (dict(validate="maybe"), ValueError, "validate must be"),
])
def test_band_settings_are_refused_when_made_not_at_the_first_step(kwargs, error, match):
    # the TRL plug-in validated its settings by computing a band of torch.zeros(1)
    from bandsolve.torch import BandSettings

    with pytest.raises(error, match=match):
        BandSettings(**kwargs)


def _loss_batch():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(3, 5, generator=g) * 3
    return torch, old + 0.1, old, torch.randn(3, 5, generator=g), torch.ones(3, 5)


@pytest.mark.parametrize("which", ["int old_log_prob", "numpy log_prob", "int advantages"])
def test_policy_loss_with_a_wrong_input_type_names_the_argument(which):
    """An int64 old_log_prob raised torch.finfo's "requires a floating point
    input type"; a numpy log_prob "all inputs must be on one device (got
    ['cpu', 'cpu'])"."""
    torch, new, old, adv, mask = _loss_batch()
    from bandsolve.torch.losses import policy_loss

    args = {"int old_log_prob": (new, old.long(), adv, mask),
            "numpy log_prob": (new.numpy(), old, adv, mask),
            "int advantages": (new, old, adv.long(), mask)}[which]
    with pytest.raises(TypeError, match=which.split()[1]):
        policy_loss(*args)


@pytest.mark.parametrize("value", ["3", True])
def test_policy_loss_config_dual_clip_of_the_wrong_type_is_a_type_error(value):
    """dual_clip="3" raised "'>' not supported between 'str' and 'float'"."""
    pytest.importorskip("torch")
    from bandsolve.torch.losses import PolicyLossConfig

    with pytest.raises(TypeError, match="dual_clip must be a number"):
        PolicyLossConfig(dual_clip=value)
