"""What a trainer hands the torch layer (issue 19, items 3-5): old
log-probabilities that are not log-probabilities, padding, and verl's
aggregation modes on batches with empty rows."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bandsolve.torch import Band, PolicyLossConfig, policy_loss  # noqa: E402
from bandsolve.torch.losses import LOSS_AGG_MODES, aggregate  # noqa: E402


@pytest.mark.parametrize("value", [math.inf, 3.0, 0.01])
def test_band_bounds_positive_old_log_prob_is_refused_not_clamped_into_p_one(value):
    # Band().bounds clamped to <= 0 before validating: +inf gave the p = 1 band
    with pytest.raises(ValueError, match="log_prob"):
        Band().bounds(torch.tensor([value, -1.0]))


def test_band_bounds_nan_old_log_prob_is_refused():
    with pytest.raises(ValueError, match="NaN"):
        Band().bounds(torch.tensor([math.nan]))


@pytest.mark.parametrize("dtype, above", [(torch.float32, 1e-6), (torch.float64, 1e-12),
                                          (torch.bfloat16, 0.0078125)])
def test_band_bounds_softmax_rounding_above_zero_is_the_p_one_band(dtype, above):
    lower, upper = Band().bounds(torch.tensor([above, 0.0], dtype=dtype))
    assert torch.equal(lower[0], lower[1]) and torch.equal(upper[0], upper[1])


def _np_agg(loss, mask, mode):
    """verl's agg_loss written out in numpy (one rank): sequence means over the
    rows that have a token. The mask weighs each token, as verl multiplies by
    it (verl_F.masked_sum: where(mask != 0, loss, 0) * mask)."""
    loss = np.where(mask != 0, loss, 0.0) * mask
    tokens = mask.sum(axis=1)
    if mode == "token-mean":
        return loss.sum() / tokens.sum()
    if mode == "token-sum":
        return loss.sum()
    rows = tokens > 0
    per_row = loss.sum(axis=1)
    if mode == "seq-mean-token-mean":
        per_row = per_row[rows] / tokens[rows]
        return per_row.sum() / rows.sum()
    value = per_row[rows].sum() / rows.sum()
    return value / mask.shape[1] if mode == "seq-mean-token-sum-norm" else value


def _batch_with_an_empty_row():
    rng = np.random.default_rng(0)
    loss = rng.normal(size=(3, 5))
    mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=float)
    return loss, mask


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_aggregate_with_a_fully_masked_row_excludes_it_as_verl_does(mode):
    # seq-mean-token-mean / -sum counted the empty row in the mean:
    # 0.028783 and 0.143915 where verl gives 0.043174 and 0.215872
    loss, mask = _batch_with_an_empty_row()
    value = float(aggregate(torch.tensor(loss), torch.tensor(mask), mode))
    assert value == pytest.approx(_np_agg(loss, mask, mode), rel=1e-12)


@pytest.mark.trainers
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_aggregate_matches_verls_own_agg_loss_with_empty_rows(mode):
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    loss, mask = _batch_with_an_empty_row()
    ours = aggregate(torch.tensor(loss), torch.tensor(mask), mode)
    verls = core_algos.agg_loss(torch.tensor(loss), torch.tensor(mask), mode)
    assert float(ours) == pytest.approx(float(verls), rel=1e-7)


def _batch_with_weights():
    loss, mask = _batch_with_an_empty_row()
    mask[0, :3] = (0.5, 0.25, 1.0)  # token weights, as verl multiplies by them
    mask[2, 4] = 0.125
    loss[1, 0] = math.nan  # under weight 0: never matters
    return loss, mask


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_regression_aggregate_read_a_fractional_mask_as_one(mode):
    """aggregate counted every nonzero mask entry as a whole token (mask.bool()),
    where verl multiplies the loss by the mask: a weight of 0.5 counted as 1
    (token-mean -0.4672 where verl's formula gives -0.4445)."""
    loss, mask = _batch_with_weights()
    value = float(aggregate(torch.tensor(loss), torch.tensor(mask), mode))
    assert value == pytest.approx(_np_agg(loss, mask, mode), rel=1e-12)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_regression_a_row_whose_weights_sum_to_zero_stayed_in_the_sequence_sum(mode):
    """verl's sequence modes keep the rows of positive weight, in the sum as
    in the count; a row weighted [1, -1, 0, 0, 0] was left out of the count
    but not the sum (seq-mean-token-mean -0.731 against verl's 0.297)."""
    loss, mask = _batch_with_an_empty_row()
    mask[1, :2] = (1.0, -1.0)
    value = float(aggregate(torch.tensor(loss), torch.tensor(mask), mode))
    assert value == pytest.approx(_np_agg(loss, mask, mode), rel=1e-12)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_regression_a_nan_mask_entry_counted_as_a_whole_token(mode):
    """A NaN in the mask read as True: the loss came out as a number, as if
    that token had weight 1. verl's product makes it NaN, and so does ours."""
    loss, mask = _batch_with_an_empty_row()
    mask[0, 1] = math.nan
    assert math.isnan(float(aggregate(torch.tensor(loss), torch.tensor(mask), mode)))


@pytest.mark.trainers
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_aggregate_matches_verls_own_agg_loss_with_token_weights(mode):
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    loss, mask = _batch_with_weights()
    loss = np.nan_to_num(loss)  # verl's sequence modes multiply a NaN by 0
    ours = aggregate(torch.tensor(loss), torch.tensor(mask), mode)
    verls = core_algos.agg_loss(torch.tensor(loss), torch.tensor(mask), mode)
    assert float(ours) == pytest.approx(float(verls), rel=1e-7)


def _policy_batch():
    torch.manual_seed(0)
    old = -torch.rand(3, 5, dtype=torch.float64) * 3
    new = old + 0.3 * torch.randn(3, 5, dtype=torch.float64)
    adv = torch.randn(3, 1, dtype=torch.float64).expand(3, 5).clone()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float64)
    return new, old, adv, mask


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_policy_loss_nan_and_inf_under_the_mask_do_not_matter(mode):
    # a NaN old log-prob at a masked (padding) token aborted the loss
    new, old, adv, mask = _policy_batch()
    config = PolicyLossConfig(rule=Band(delta=0.05), loss_agg_mode=mode)
    reference, _ = policy_loss(new, old, adv, mask, config)
    padded_old, padded_adv, padded_new = old.clone(), adv.clone(), new.clone()
    padded_old[mask == 0] = math.nan
    padded_adv[mask == 0] = math.inf
    padded_new[mask == 0] = math.nan
    loss, metrics = policy_loss(padded_new, padded_old, padded_adv, mask, config)
    assert float(loss) == float(reference)
    assert all(bool(torch.isfinite(v)) for v in metrics.values())


def test_policy_loss_clamps_the_log_ratio_as_verl_does():
    old = torch.tensor([[-1.0]], dtype=torch.float64)
    adv = torch.tensor([[-1.0]], dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.float64)
    config = PolicyLossConfig(rule=Band(delta=0.05), dual_clip=None)
    far, _ = policy_loss(old + 50.0, old, adv, mask, config)
    at_clamp, _ = policy_loss(old + 20.0, old, adv, mask, config)
    assert float(far) == float(at_clamp) == pytest.approx(math.exp(20.0))


def _verl_loss(old, new, adv, mask, validate=True):
    verl_plugin = pytest.importorskip("bandsolve.integrations.verl")
    omegaconf = pytest.importorskip("omegaconf")
    config = omegaconf.OmegaConf.create({"clip_ratio_c": 3.0, "policy_loss": {
        "band_delta": 0.05, "band_validate": validate}})
    return verl_plugin.compute_policy_loss_bandpo(old, new, adv, mask, "token-mean", config)


@pytest.mark.trainers
@pytest.mark.parametrize("value", [math.inf, 3.0])
def test_verl_bandpo_refuses_a_positive_old_log_prob_on_an_unmasked_token(value):
    # clamped before validation, +inf and +3.0 gave a finite loss and no error
    pytest.importorskip("verl")
    new, old, adv, mask = _policy_batch()
    old[0, 0] = value
    with pytest.raises(ValueError, match="log_prob"):
        _verl_loss(old, new, adv, mask)


@pytest.mark.trainers
def test_verl_bandpo_padding_values_do_not_matter():
    pytest.importorskip("verl")
    new, old, adv, mask = _policy_batch()
    reference, _ = _verl_loss(old, new, adv, mask)
    padded = old.clone()
    padded[mask == 0] = math.nan
    loss, _ = _verl_loss(padded, new, adv, mask)
    assert float(loss) == float(reference)


def test_meta_tensor_is_a_clear_error_not_a_raw_torch_error():
    import bandsolve.torch as bt

    with pytest.raises(ValueError, match="meta tensor"):
        bt.band_from_logp(torch.empty(3, device="meta"), 0.05)


def test_sparse_tensor_is_a_clear_error_not_a_raw_torch_error():
    import bandsolve.torch as bt

    sparse = torch.tensor([[-0.5, 0.0], [0.0, -1.0]]).to_sparse()
    with pytest.raises(TypeError, match="to_dense"):
        bt.band_from_logp(sparse, 0.05)
