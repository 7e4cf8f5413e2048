"""Each plug-in's loss on a CUDA batch against the same loss on the CPU (issue 42, item 6).

The batches hold the old log-probabilities where float32 is hardest: p near 1
(log p in [-1e-7, 0]), log p below -30 down to -1e4, and ordinary ones, with
deltas from 1e-8 to 10. Without a CUDA device every test here skips ("needs
a CUDA device"; pytest's -rs summary counts them); where a trainer is not
installed its tests skip too. benchmarks/device/plugins.sh runs them on a
lent GPU. ``BANDSOLVE_PLUGIN_TEST_DEVICE=cpu`` runs them against the CPU
itself, which checks the tests' own code where no GPU is.
"""

import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import bandsolve as bs  # noqa: E402
from bandsolve.torch import BandSettings, PolicyLossConfig, policy_loss  # noqa: E402

DEVICE = os.environ.get("BANDSOLVE_PLUGIN_TEST_DEVICE", "cuda")
on_device = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                               reason="needs a CUDA device")
pytestmark = on_device


def _hard_batch(seed=0, shape=(8, 96), dtype=torch.float32):
    """(old, new, advantages, mask) on the CPU: a third of the old log-probs in
    [-1e-7, 0], a third in [-1e4, -30] (log-uniform in magnitude), a third in
    between; new = old moved by N(0, 0.3), below 0."""
    rng = np.random.default_rng(seed)
    n = shape[0] * shape[1]
    near_one = -rng.uniform(0.0, 1e-7, n)
    tail = -np.exp(rng.uniform(np.log(30.0), np.log(1e4), n))
    middle = -np.exp(rng.uniform(np.log(1e-7), np.log(30.0), n))
    pick = rng.integers(0, 3, n)
    old = np.choose(pick, [near_one, tail, middle]).reshape(shape)
    new = np.minimum(old + rng.normal(0.0, 0.3, shape), 0.0)
    adv = rng.normal(0.0, 1.0, (shape[0], 1)) + 0.3 * rng.normal(0.0, 1.0, shape)
    mask = (rng.uniform(size=shape) < 0.9).astype(float)
    mask[:, 0] = 1.0
    return tuple(torch.tensor(a, dtype=dtype) for a in (old, new, adv, mask))


def _on(device, tensors):
    return tuple(t.to(device) for t in tensors)


def _loss_and_grad(fn, old, new, adv, mask):
    """fn(old, log_prob, adv, mask) -> loss; (loss, d loss / d log_prob) on the CPU."""
    log_prob = new.detach().clone().requires_grad_()
    loss = fn(old, log_prob, adv, mask)
    loss.backward()
    return loss.detach().cpu().double(), log_prob.grad.detach().cpu().double()


def _agree(fn, batch, rtol=2e-5):
    """fn's loss and gradient on DEVICE equal fn's on the CPU, both in the
    batch's dtype; tokens whose ratio sits at a bound to rounding may fall on
    either side on either device: at most 1 in 500 gradients differ."""
    cpu_loss, cpu_grad = _loss_and_grad(fn, *batch)
    dev_loss, dev_grad = _loss_and_grad(fn, *_on(DEVICE, batch))
    assert torch.isfinite(dev_loss) and torch.isfinite(dev_grad).all()
    close = torch.isclose(dev_grad, cpu_grad, rtol=rtol, atol=1e-9)
    assert (~close).double().mean() <= 2e-3, int((~close).sum())
    assert dev_loss.item() == pytest.approx(cpu_loss.item(), rel=1e-4, abs=1e-7)
    return cpu_loss, cpu_grad


# ------------------------------------------------------------ bandsolve.torch

@pytest.mark.parametrize("mode", ["clip", "mask"])
@pytest.mark.parametrize("delta, divergence", [(0.05, "kl"), (1e-8, "kl"), (10.0, "tv"),
                                               (0.05, "hellinger")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_policy_loss_on_the_device_matches_the_cpu(mode, delta, divergence, dtype):
    batch = _hard_batch(dtype=dtype)
    config = PolicyLossConfig(rule=BandSettings(delta, divergence), dual_clip=3.0, mode=mode)

    def fn(old, log_prob, adv, mask):
        return policy_loss(log_prob, old, adv, mask, config)[0]

    _agree(fn, batch)


def test_the_device_band_of_the_hard_batch_matches_the_numpy_core():
    """The bounds the losses above use, on the device, against the float64
    numpy core: p near 1 and log p down to -1e4 included (float32 input)."""
    old = _hard_batch()[0]
    lower, upper = BandSettings(0.05, "kl").bounds(old.to(DEVICE))
    want_lower, want_upper = bs.band_from_logp(old.double().numpy(), 0.05, "kl", max_ratio=10.0)
    np.testing.assert_allclose(lower.double().cpu().numpy(), want_lower, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(upper.double().cpu().numpy(), want_upper, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- the trainers

def _needs(trainer):
    """Skip without the device first (so that -rs counts what a GPU would run),
    then without the trainer."""
    if DEVICE == "cuda" and not torch.cuda.is_available():
        return pytest.mark.skip(reason="needs a CUDA device")
    return pytest.mark.skipif(importlib.util.find_spec(trainer) is None,
                              reason=f"{trainer} not installed")


@pytest.mark.trainers
@_needs("verl")
@pytest.mark.parametrize("mode", ["clip", "mask"])
def test_verl_bandpo_on_the_device_matches_the_cpu(mode):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    import bandsolve.integrations.verl  # noqa: F401  (registers bandpo)

    config = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2,
                               "clip_ratio_c": 3.0, "global_batch_info": {},
                               "policy_loss": {"band_delta": 0.05, "band_mode": mode}})
    weights = torch.rand(_hard_batch()[0].shape, generator=torch.Generator().manual_seed(1))

    def fn(old, log_prob, adv, mask):
        return get_policy_loss_fn("bandpo")(old, log_prob, adv, mask, "token-mean", config,
                                            rollout_is_weights=weights.to(old.device))[0]

    _agree(fn, _hard_batch())


@pytest.mark.trainers
@_needs("skyrl")
@pytest.mark.parametrize("mode", ["clip", "mask"])
def test_skyrl_bandpo_on_the_device_matches_the_cpu(mode):
    from skyrl.backends.skyrl_train.utils.ppo_utils import PolicyLossRegistry

    import bandsolve.integrations.skyrl as plugin

    config = plugin.BandPOAlgorithmConfig(band_delta=0.05, band_mode=mode)

    def fn(old, log_prob, adv, mask):
        scaled = adv * mask / mask.sum()  # SkyRL's token_mean pre-scaling
        return PolicyLossRegistry.get("bandpo")(log_prob, old, scaled, config, mask)[0]

    _agree(fn, _hard_batch())


@pytest.mark.trainers
@_needs("openrlhf")
@pytest.mark.parametrize("mode", ["clip", "mask"])
@pytest.mark.parametrize("anchor", ["old", "rollout"])
def test_openrlhf_band_policy_loss_on_the_device_matches_the_cpu(mode, anchor):
    import openrlhf_stand_ins

    openrlhf_stand_ins.install()  # only where flash-attn or vLLM is missing
    import bandsolve.integrations.openrlhf as plugin

    correction = dict(is_correction_level="token", is_correction_mode="clip",
                      is_correction_threshold=(0.0, 2.0)) if anchor == "rollout" else {}
    loss_fn = plugin.BandPolicyLoss(BandSettings(0.05, "kl"),
                                    plugin.BandLossOptions(mode=mode, anchor=anchor),
                                    dual_clip=3.0, **correction)

    def fn(old, log_prob, adv, mask):
        rollout = torch.clamp(old + 0.1, max=0.0) if anchor == "rollout" else None
        return loss_fn(log_prob, old, adv, action_mask=mask, rollout_log_probs=rollout)[0]

    _agree(fn, _hard_batch())


@pytest.mark.trainers
@_needs("trl")
def test_trl_trains_on_the_device_with_the_band_of_its_old_log_probs(tmp_path, monkeypatch):
    """BandGRPOTrainer on the device (the tiny model of examples/trl_grpo.py):
    the epsilons TRL's loss clamps with are the band of the old log-probs
    (numpy core), and the plug-in reads nothing from the device in the step."""
    pytest.importorskip("trl", minversion="1.0")
    import importlib.util as iu
    import pathlib

    import datasets
    from trl import GRPOTrainer

    from bandsolve.integrations.trl import BandGRPOConfig, BandGRPOTrainer

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "trl_grpo.py"
    spec = iu.spec_from_file_location("trl_grpo_example", path)
    example = iu.module_from_spec(spec)
    spec.loader.exec_module(example)
    model, tokenizer = example.tiny_model_and_tokenizer()
    prompts = [" ".join(np.random.default_rng(i).choice(example.WORDS, 3)) for i in range(16)]
    args = BandGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8,
                          num_generations=4, max_completion_length=6, num_iterations=3,
                          learning_rate=0.05, max_steps=3, logging_steps=1, report_to="none",
                          use_cpu=DEVICE == "cpu", seed=0, save_strategy="no", loss_type="dapo")
    trainer = BandGRPOTrainer(model=model, reward_funcs=example.reward_share_of_a, args=args,
                              processing_class=tokenizer,
                              train_dataset=datasets.Dataset.from_dict({"prompt": prompts}))
    seen = []
    trl_loss = GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        seen.append((inputs["old_per_token_logps"].detach().double().cpu().numpy(),
                     inputs["completion_mask"].bool().cpu().numpy(),
                     (1.0 - self.epsilon_low).detach().double().cpu().numpy()))
        return trl_loss(self, model, inputs)

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", spy)
    trainer.train()
    assert next(trainer.model.parameters()).device.type == torch.device(DEVICE).type
    assert seen
    for old, real, lower in seen:
        want, _ = bs.band_from_logp(np.minimum(old, 0.0), 0.05, "kl", max_ratio=10.0)
        np.testing.assert_allclose(lower[real], want[real], rtol=1e-5, atol=4e-7)
    logged = [e for e in trainer.state.log_history if "band/clipfrac_upper" in e]
    assert logged and all(np.isfinite(e["band/upper_mean"]) for e in logged)
