"""The SkyRL plug-in against the real SkyRL package (pytest -m trainers).

Configuration goes through SkyRL's own strict CLI parser
(``from_cli_overrides``) and the advantages through SkyRL's own
loss-reduction pre-scaling, so the tests fail if SkyRL stops accepting the
documented keys or changes how a reduction mode is realised. Loss and
gradients are checked against the surrogate written out in numpy with bounds
from the numpy core, and against SkyRL's built-in ``regular`` / ``dual_clip``
losses when the band is replaced by [1 - eps, 1 + eps].
"""

import sys

import numpy as np
import pytest

pytestmark = pytest.mark.trainers

torch = pytest.importorskip("torch")
pytest.importorskip("skyrl")  # SkyRL 0.4 needs Python >= 3.12 (tests/trainer_envs.sh)

ppo_utils = pytest.importorskip("skyrl.backends.skyrl_train.utils.ppo_utils")

from problems import clipped_surrogate_reference, policy_batch  # noqa: E402
from skyrl.train.config import AlgorithmConfig, SkyRLTrainConfig  # noqa: E402

import bandsolve as bs  # noqa: E402
import bandsolve.integrations.skyrl as plugin  # noqa: E402

PolicyLossRegistry = ppo_utils.PolicyLossRegistry

SHAPE = (4, 9)
MAX_SEQ_LEN = 12
MICRO_BATCH = 2
PROMPTS = [(0, 1), (1, 4)]  # two prompts: one sequence and three sequences
MODES = ["token_mean", "token_mean_legacy", "sequence_mean", "seq_mean_token_sum_norm",
         "prompt_mean"]
BAND_ARGS = [
    "trainer.algorithm.policy_loss_type=bandpo",
    "trainer.algorithm.band_delta=0.1",
    "trainer.algorithm.band_divergence=tv",
    "trainer.algorithm.band_max_ratio=5",
    "trainer.algorithm.clip_ratio_c=2.0",
]


def _config(args, mode="token_mean", config_cls=None):
    """SkyRL's top-level config as its entry point parses the command line."""
    config_cls = config_cls or plugin.BandPOTrainConfig
    return config_cls.from_cli_overrides([
        *args,
        f"trainer.algorithm.loss_reduction={mode}",
        f"trainer.algorithm.max_seq_len={MAX_SEQ_LEN}",
        f"trainer.micro_train_batch_size_per_gpu={MICRO_BATCH}",
    ])


def _batch(seed=0):
    return policy_batch(seed, SHAPE, min_p=1e-3, spread=0.7, keep=0.75)


def _scaled_advantages(cfg, adv, mask):
    """The advantages as SkyRL's trainer hands them to the loss for one mini-batch."""
    t = torch.tensor
    return ppo_utils.apply_loss_reduction_to_advantages_minibatch(
        advantages=t(adv), loss_mask=t(mask), loss_reduction=cfg.trainer.algorithm.loss_reduction,
        micro_batch_size=cfg.trainer.micro_train_batch_size_per_gpu,
        max_seq_len=cfg.trainer.algorithm.max_seq_len, prompt_boundaries=PROMPTS)


def _weights(mask, mode):
    """Each token's weight in the loss, as SkyRL's loss_reduction defines it."""
    batch = mask.shape[0]
    if mode == "token_mean":
        return mask / mask.sum()
    if mode == "token_mean_legacy":  # token mean per micro-batch, then the mean of those
        n_micro = batch // MICRO_BATCH
        w = np.zeros_like(mask)
        for i in range(n_micro):
            rows = slice(i * MICRO_BATCH, (i + 1) * MICRO_BATCH)
            w[rows] = mask[rows] / mask[rows].sum() / n_micro
        return w
    if mode == "sequence_mean":
        return mask / mask.sum(axis=1, keepdims=True) / batch
    if mode == "seq_mean_token_sum_norm":
        return mask / (batch * MAX_SEQ_LEN)
    assert mode == "prompt_mean"
    w = np.zeros_like(mask)
    for start, end in PROMPTS:
        w[start:end] = mask[start:end] / mask[start:end].sum() / len(PROMPTS)
    return w


def _reference(old, new, adv, mask, delta, divergence, max_ratio, dual_clip, mode):
    """(loss, d loss / d log_probs, clip ratio, dual-clip ratio) written out in numpy."""
    lower, upper = bs.band_from_logp(old, delta, divergence, max_ratio=max_ratio)
    per_token, grad, active, dual = clipped_surrogate_reference(np.exp(new - old), adv, lower,
                                                                upper, dual_clip)
    weight = _weights(mask, mode)
    clip_ratio = (active * mask).sum() / mask.sum()
    return (per_token * weight).sum(), grad * weight, clip_ratio, (dual * mask).sum() / mask.sum()


def _run(cfg, old, new, adv, mask, loss_name=None, **kwargs):
    """The registered loss called as SkyRL's worker calls it; (loss, grad, metrics)."""
    algorithm = cfg.trainer.algorithm
    fn = PolicyLossRegistry.get(loss_name or algorithm.policy_loss_type)
    log_probs = torch.tensor(new).requires_grad_()
    loss, metrics = fn(log_probs, torch.tensor(old), _scaled_advantages(cfg, adv, mask),
                       config=algorithm, loss_mask=torch.tensor(mask), **kwargs)
    loss.backward()
    return loss, log_probs.grad.numpy(), metrics


def test_the_registry_returns_bandpo():
    assert "bandpo" in PolicyLossRegistry.list_available()
    assert PolicyLossRegistry.get("bandpo") is plugin.compute_policy_loss_bandpo
    plugin.register()  # idempotent: importing twice or re-registering is harmless
    assert PolicyLossRegistry.get("bandpo") is plugin.compute_policy_loss_bandpo


def test_the_documented_keys_reach_the_algorithm_config():
    algorithm = _config(BAND_ARGS).trainer.algorithm
    assert type(algorithm) is plugin.BandPOAlgorithmConfig
    assert (algorithm.policy_loss_type, algorithm.band_delta, algorithm.band_divergence,
            algorithm.band_max_ratio, algorithm.band_dual_clip, algorithm.band_validate) == \
        ("bandpo", 0.1, "tv", 5, True, True)
    assert _config(["trainer.algorithm.band_max_ratio=null"]).trainer.algorithm \
        .band_max_ratio is None
    # SkyRL's own config class refuses them: BandPOTrainConfig is what makes them legal
    with pytest.raises(ValueError, match="band_delta"):
        _config(BAND_ARGS, config_cls=SkyRLTrainConfig)


@pytest.mark.parametrize("mode", MODES)
def test_loss_and_gradients_for_every_loss_reduction(mode):
    cfg = _config(BAND_ARGS, mode)
    old, new, adv, mask = _batch()
    loss, grad, metrics = _run(cfg, old, new, adv, mask)
    ref_loss, ref_grad, ref_clip, ref_dual = _reference(old, new, adv, mask, 0.1, "tv", 5.0,
                                                        2.0, mode)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-9, atol=1e-15)
    assert metrics["clip_ratio"] == pytest.approx(ref_clip, rel=1e-6)
    assert metrics["dual_clip_ratio"] == pytest.approx(ref_dual, rel=1e-6)
    assert 0.0 < ref_clip < 1.0 and ref_dual > 0.0  # band and dual clip both bind somewhere
    assert all(isinstance(v, float) for v in metrics.values())
    assert {"ppo_kl", "band/wider_than_clip_higher", "band/clipfrac/p<1e-3"} <= set(metrics)


def test_defaults_on_skyrls_own_config():
    """policy_loss_type=bandpo alone on SkyRL's AlgorithmConfig: delta 0.05, kl,
    max_ratio 10, dual clip at SkyRL's clip_ratio_c (3)."""
    cfg = _config(["trainer.algorithm.policy_loss_type=bandpo"], config_cls=SkyRLTrainConfig)
    assert type(cfg.trainer.algorithm) is AlgorithmConfig
    old, new, adv, mask = _batch(seed=1)
    loss, grad, _ = _run(cfg, old, new, adv, mask)
    ref_loss, ref_grad, _, _ = _reference(old, new, adv, mask, 0.05, "kl", 10.0, 3.0,
                                          "token_mean")
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-9, atol=1e-15)
    # and BandPOAlgorithmConfig's defaults are the same
    assert _run(_config([]), old, new, adv, mask)[0].item() == pytest.approx(ref_loss, rel=1e-12)


DEFAULT = (0.05, "kl", 10.0, 3.0)  # delta, divergence, max_ratio, dual clip


@pytest.mark.parametrize("args, expected, baseline", [
    (["trainer.algorithm.band_delta=0.02"], (0.02, "kl", 10.0, 3.0), DEFAULT),
    (["trainer.algorithm.band_divergence=hellinger"], (0.05, "hellinger", 10.0, 3.0), DEFAULT),
    (["trainer.algorithm.band_max_ratio=1.5"], (0.05, "kl", 1.5, 3.0), DEFAULT),
    (["trainer.algorithm.band_delta=2", "trainer.algorithm.band_max_ratio=null"],
     (2.0, "kl", None, 3.0), (2.0, "kl", 10.0, 3.0)),
    (["trainer.algorithm.band_dual_clip=false"], (0.05, "kl", 10.0, None), DEFAULT),
    (["trainer.algorithm.clip_ratio_c=1.5"], (0.05, "kl", 10.0, 1.5), DEFAULT),
])
def test_each_key_changes_the_loss_as_predicted(args, expected, baseline):
    old, new, adv, mask = _batch(seed=2)
    old[:, ::2] = np.log(0.02)  # bands wider than the cap of 10 (hi <= 1/p) ...
    new[:, ::2] = old[:, ::2] + 2.5  # ... ratios of 12: past the cap and the dual clip
    loss, grad, _ = _run(_config(args), old, new, adv, mask)
    ref_loss, ref_grad, _, _ = _reference(old, new, adv, mask, *expected, "token_mean")
    baseline_loss, _, _, _ = _reference(old, new, adv, mask, *baseline, "token_mean")
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-9, atol=1e-15)
    assert ref_loss != pytest.approx(baseline_loss, rel=1e-6)  # the key made a difference


@pytest.mark.parametrize("loss_type, dual", [("regular", False), ("dual_clip", True)])
@pytest.mark.parametrize("mode", ["token_mean", "sequence_mean"])
def test_with_a_constant_band_it_is_skyrls_own_ppo_loss(monkeypatch, loss_type, dual, mode):
    """Band replaced by SkyRL's [1 - eps_clip_low, 1 + eps_clip_high]: the same loss
    and gradient as SkyRL's ``regular`` (no dual clip) or ``dual_clip`` loss."""
    def constant_band(log_prob, *args, **kwargs):
        return torch.full_like(log_prob, 0.8), torch.full_like(log_prob, 1.28)

    # the plug-in's band comes through BandSettings.bounds (issue 22: one settings
    # object and one loss body for every plug-in), which calls band_from_logp there
    from bandsolve.torch import settings as band_settings

    monkeypatch.setattr(band_settings, "band_from_logp", constant_band)
    common = ["trainer.algorithm.eps_clip_low=0.2", "trainer.algorithm.eps_clip_high=0.28",
              "trainer.algorithm.clip_ratio_c=2.0"]
    cfg = _config([*common, f"trainer.algorithm.policy_loss_type={loss_type}",
                   f"trainer.algorithm.band_dual_clip={str(dual).lower()}"], mode)
    old, new, adv, mask = _batch(seed=3)
    ours, our_grad, ours_m = _run(cfg, old, new, adv, mask, loss_name="bandpo")
    theirs, their_grad, theirs_m = _run(cfg, old, new, adv, mask)
    # SkyRL's exp runs in float32 (safe_exp_delta), ours in the input dtype
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    np.testing.assert_allclose(our_grad, their_grad, rtol=1e-6, atol=1e-12)
    assert ours_m["clip_ratio"] == pytest.approx(theirs_m["clip_ratio"], rel=1e-6)
    assert 0.0 < ours_m["clip_ratio"] < 1.0


def test_skyrls_entry_point_dispatches_to_the_plugin(monkeypatch):
    """``trainer.override_entrypoint=bandsolve.integrations.skyrl`` on SkyRL's main_base:
    the plug-in's main parses with BandPOTrainConfig and runs SkyRL's experiment."""
    import ray
    from skyrl.train.entrypoints import main_base

    seen = {}

    class FakeEntrypoint:
        @staticmethod
        def remote(cfg):
            seen["ran"] = cfg
            return "done"

    monkeypatch.setattr(main_base, "validate_cfg", lambda cfg: seen.setdefault("validated", cfg))
    monkeypatch.setattr(main_base, "initialize_ray", lambda cfg: seen.setdefault("ray", cfg))
    monkeypatch.setattr(main_base, "skyrl_entrypoint", FakeEntrypoint)
    monkeypatch.setattr(ray, "get", lambda ref: ref)
    monkeypatch.setattr(sys, "argv", ["main_base", "trainer.override_entrypoint=bandsolve.integrations.skyrl",
                                      *BAND_ARGS])
    main_base.main()
    cfg = seen["ran"]
    assert seen["validated"] is cfg and seen["ray"] is cfg
    assert type(cfg) is plugin.BandPOTrainConfig
    assert (cfg.trainer.algorithm.band_delta, cfg.trainer.algorithm.band_divergence) == (0.1, "tv")


def test_bad_old_log_probs_are_refused():
    cfg = _config(BAND_ARGS)
    old, new, adv, mask = _batch()
    old[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _run(cfg, old, new, adv, mask)


def test_mask_mode_keeps_the_clips_gradient_and_drops_the_tokens_beyond_the_band():
    """trainer.algorithm.band_mode=mask through SkyRL's parser and registry:
    the loss is -A r over the kept tokens at SkyRL's weights (numpy core), the
    gradient the clip mode's."""
    cfg = _config([*BAND_ARGS, "trainer.algorithm.band_mode=mask",
                   "trainer.algorithm.band_dual_clip=false"])
    assert cfg.trainer.algorithm.band_mode == "mask"
    clip_cfg = _config([*BAND_ARGS, "trainer.algorithm.band_dual_clip=false"])
    old, new, adv, mask = _batch(seed=5)
    loss, grad, _ = _run(cfg, old, new, adv, mask)
    clip_loss, clip_grad, _ = _run(clip_cfg, old, new, adv, mask)
    lower, upper = bs.band_from_logp(old, 0.1, "tv", max_ratio=5.0)
    ratio = np.exp(new - old)
    outside = ((adv > 0) & (ratio > upper)) | ((adv < 0) & (ratio < lower))
    weight = _weights(mask, "token_mean")
    assert loss.item() == pytest.approx((np.where(outside, 0.0, -adv * ratio) * weight).sum(),
                                        rel=1e-9)
    np.testing.assert_allclose(grad, clip_grad, rtol=1e-12, atol=0)
    assert (outside & (mask > 0)).any() and loss.item() != pytest.approx(clip_loss.item())


def test_the_rollout_anchor_takes_the_band_around_skyrls_rollout_logprobs():
    """band_anchor=rollout: the band of the inference engine's log-probabilities
    (rollout_logprobs, which SkyRL's worker passes), as bounds on SkyRL's
    ratio; without them the loss says so."""
    cfg = _config([*BAND_ARGS, "trainer.algorithm.band_anchor=rollout",
                   "trainer.algorithm.band_dual_clip=false"])
    old, new, adv, mask = _batch(seed=6)
    rollout = np.minimum(old + np.random.default_rng(6).normal(0.0, 0.3, old.shape), 0.0)
    loss, grad, metrics = _run(cfg, old, new, adv, mask, rollout_logprobs=torch.tensor(rollout))
    lower, upper = bs.band_from_logp(rollout, 0.1, "tv", max_ratio=5.0)
    behaviour = np.exp(new - rollout)
    clipped = ((adv > 0) & (behaviour > upper)) | ((adv < 0) & (behaviour < lower))
    want = np.where(clipped, 0.0, -adv * np.exp(new - old)) * _weights(mask, "token_mean")
    np.testing.assert_allclose(grad, want, rtol=1e-9, atol=1e-15)
    assert (clipped & (mask > 0)).any() and "band/fixed_clipfrac_upper" in metrics
    with pytest.raises(ValueError, match="rollout_logprobs"):
        _run(cfg, old, new, adv, mask)
