"""The TRL plug-in end to end (pytest -m trainers): a tiny language model built
locally from a config (no downloads), a programmatic reward, a few GRPO steps
with several optimisation steps per batch so that ratios leave 1."""

import numpy as np
import pytest

pytestmark = pytest.mark.trainers

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

import bandsolve as bs  # noqa: E402
from bandsolve.integrations.trl import BandGRPOConfig, BandGRPOTrainer  # noqa: E402


def _example():
    """examples/trl_grpo.py, the script users start from: the test trains the
    same tiny model it builds."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()
WORDS = EXAMPLE.WORDS


def reward_count_a(completions, **kwargs):
    """The share of the word "a" in each completion: verifiable, dense."""
    return [c.split().count("a") / max(len(c.split()), 1) for c in completions]


class _SpyTrainer(BandGRPOTrainer):
    """Records the old log-probabilities and the epsilons TRL saw each call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        if torch.is_tensor(self.epsilon_low):
            self.seen.append((self.epsilon_low.detach().clone(),
                              self.epsilon_high.detach().clone()))
        return super()._get_per_token_logps_and_entropies(*args, **kwargs)


def _trainer(tmp_path, cls=_SpyTrainer, **overrides):
    model, tokenizer = EXAMPLE.tiny_model_and_tokenizer()
    prompts = [" ".join(np.random.default_rng(i).choice(WORDS, 3)) for i in range(16)]
    settings = dict(
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=6, num_iterations=3, learning_rate=0.05, max_steps=4,
        logging_steps=1, report_to="none", use_cpu=True, seed=0, save_strategy="no",
        band_delta=0.05, band_divergence="kl", band_max_ratio=10.0, loss_type="dapo")
    settings.update(overrides)
    return cls(model=model, reward_funcs=reward_count_a,
               args=BandGRPOConfig(**settings), processing_class=tokenizer,
               train_dataset=datasets.Dataset.from_dict({"prompt": prompts}))


def test_grpo_steps_use_the_band(tmp_path):
    trainer = _trainer(tmp_path)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "band/upper_mean" in entry]
    assert logs, "the band metrics were never logged"
    # TRL's own clip metrics were computed against the band: the band binds
    assert any(entry["clip_ratio/region_mean"] > 0 for entry in logs)
    assert all(np.isfinite(entry["loss"]) for entry in logs)
    # every loss evaluation saw per-token epsilons equal to the band of its
    # old log-probabilities (numpy core, float32 tolerance)
    assert trainer.seen
    for eps_low, eps_high in trainer.seen:
        assert eps_low.shape == eps_high.shape and eps_low.dim() == 2
        assert torch.all(eps_high >= 0) and torch.all(eps_low >= 0)
    # after training the scalar epsilons are back
    assert isinstance(trainer.epsilon_low, float)


def test_band_matches_the_numpy_core_inside_trl(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    trainer = _trainer(tmp_path, max_steps=1)
    captured = {}
    trl_loss = GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        captured["old"] = inputs["old_per_token_logps"].detach().clone()
        captured["mask"] = inputs["completion_mask"].bool().clone()
        captured["eps"] = (self.epsilon_low.clone(), self.epsilon_high.clone())
        return trl_loss(self, model, inputs)

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", spy)
    trainer.train()
    old = captured["old"].double().numpy()
    lower, upper = bs.band_from_logp(np.minimum(old, 0.0), 0.05, "kl", max_ratio=10.0)
    eps_low, eps_high = (e.double().numpy() for e in captured["eps"])
    # completion tokens only: padding's old log-probs are not looked at (its
    # band is p = 1's, and TRL masks its loss)
    real = captured["mask"].numpy()
    assert real.any() and not real.all()
    np.testing.assert_allclose((1.0 - eps_low)[real], lower[real], rtol=1e-5, atol=4e-7)
    np.testing.assert_allclose((1.0 + eps_high)[real], upper[real], rtol=1e-5, atol=4e-7)


@pytest.mark.parametrize("overrides, match", [
    (dict(loss_type="cispo"), "does not clip"),
    (dict(importance_sampling_level="sequence"), "per-token"),
    (dict(band_divergence="nope"), "unknown divergence"),
    (dict(band_delta=-1.0), "positive"),
    (dict(band_mode="masked"), "mode must be one of"),
    (dict(band_anchor="behaviour"), "band_anchor must be one of"),
    (dict(band_anchor="rollout"), "use_vllm"),
])
def test_bad_settings_are_refused(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        _trainer(tmp_path, **overrides)


def test_trl_logs_the_band_metrics_by_bucket_as_verl_does(tmp_path):
    from bandsolve.torch import P_BUCKETS

    trainer = _trainer(tmp_path)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "band/clipfrac_upper" in entry]
    assert logs, "the band metrics were never logged"
    for entry in logs:
        for name, _, _ in P_BUCKETS:
            for metric in ("clipfrac", "band_width", "tokens"):
                assert f"band/{metric}/{name}" in entry
        # the band's clip fractions agree with TRL's own count of clipped
        # tokens (clip_ratio/region_mean), computed by TRL from its ratio
        ours = entry["band/clipfrac_upper"] + entry["band/clipfrac_lower"]
        assert ours == pytest.approx(entry["clip_ratio/region_mean"], abs=1e-6)
    assert any(entry["band/clipfrac_upper"] + entry["band/clipfrac_lower"] > 0 for entry in logs)


def test_trl_private_loss_changed_shape_fails_naming_supported_versions(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    # a TRL whose _compute_loss no longer computes the new log-probabilities
    # through _get_per_token_logps_and_entropies
    monkeypatch.setattr(GRPOTrainer, "_compute_loss",
                        lambda self, model, inputs: sum(p.sum() for p in model.parameters()) * 0.0)
    trainer = _trainer(tmp_path, max_steps=1)
    with pytest.raises(RuntimeError, match=r"Supported: trl>=1\.0,<2"):
        trainer.train()


def test_trl_without_the_private_log_prob_method_is_refused_at_construction(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    monkeypatch.delattr(GRPOTrainer, "_get_per_token_logps_and_entropies")
    with pytest.raises(RuntimeError, match="_get_per_token_logps_and_entropies.*Supported"):
        _trainer(tmp_path, cls=BandGRPOTrainer)


def test_luspo_is_refused_its_ratio_is_per_sequence(tmp_path):
    """docs/trl.md listed luspo as supported: TRL's luspo takes a sequence-level
    ratio, and at token level (the plug-in's) TRL sums its loss over padding
    tokens too, where the band has no meaning."""
    with pytest.raises(ValueError, match="luspo's ratio is per sequence"):
        _trainer(tmp_path, loss_type="luspo")


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_with_a_constant_band_it_is_trls_own_loss(tmp_path, monkeypatch, loss_type):
    """Band replaced by TRL's own [1 - epsilon, 1 + epsilon_high]: the plug-in's
    loss and gradients equal TRL's built-in loss (GRPOTrainer._compute_loss with
    its scalar epsilons) on the same batch, for each clipping loss_type."""
    import inspect

    from trl import GRPOTrainer

    from bandsolve.torch import settings as band_settings

    if f'"{loss_type}"' not in inspect.getsource(GRPOTrainer._compute_loss):
        pytest.skip(f"trl {__import__('trl').__version__} has no loss_type {loss_type!r}")
    low, high = 0.2, 0.28
    # the last batch, evaluated after the model has moved: ratios != 1
    trainer, inputs = _captured_batch(tmp_path, monkeypatch, loss_type=loss_type, epsilon=low,
                                      epsilon_high=high)
    assert inputs.get("old_per_token_logps") is not None

    def loss_and_grads(compute):
        return _loss_and_grads(trainer, inputs, compute)

    def constant_band(log_prob, *args, **kwargs):
        return (torch.full_like(log_prob, 1.0 - low), torch.full_like(log_prob, 1.0 + high))

    banded, _ = loss_and_grads(BandGRPOTrainer._compute_loss)
    monkeypatch.setattr(band_settings, "band_from_logp", constant_band)
    ours, our_grads = loss_and_grads(BandGRPOTrainer._compute_loss)
    theirs, their_grads = loss_and_grads(GRPOTrainer._compute_loss)
    assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-9)
    assert len(our_grads) == len(their_grads) > 0
    for mine, trls in zip(our_grads, their_grads):
        torch.testing.assert_close(mine, trls, rtol=1e-5, atol=1e-7)
    # the clip binds on this batch (TRL's own metric, from the call just made), and
    # the band is not TRL's interval there
    assert trainer._metrics["eval"]["clip_ratio/region_mean"][-1] > 0
    assert banded != pytest.approx(theirs, rel=1e-6)


def _captured_batch(tmp_path, monkeypatch, **overrides):
    """A trainer after three steps, and the inputs of its last loss call (a
    batch whose old log-probabilities are not the model's: ratios != 1)."""
    from trl import GRPOTrainer

    trainer = _trainer(tmp_path, cls=BandGRPOTrainer, max_steps=3, **overrides)
    captured = {}
    trl_loss = GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        captured["inputs"] = {k: v.detach().clone() if torch.is_tensor(v) else v
                              for k, v in inputs.items()}
        return trl_loss(self, model, inputs)

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", spy)
    trainer.train()
    monkeypatch.setattr(GRPOTrainer, "_compute_loss", trl_loss)
    trainer.model.eval()  # no dropout: every call sees the same forward pass
    return trainer, captured["inputs"]


def _loss_and_grads(trainer, inputs, compute=None):
    """(loss, parameter gradients) of ``compute`` (the trainer's own
    _compute_loss by default) on a copy of ``inputs``."""
    trainer.model.zero_grad()
    torch.manual_seed(0)
    if compute is None:
        loss = trainer._compute_loss(trainer.model, dict(inputs))
    else:
        loss = compute(trainer, trainer.model, dict(inputs))
    loss.backward()
    return loss.item(), [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]


def test_mask_mode_drops_the_tokens_beyond_the_band_and_keeps_the_clips_gradient(
        tmp_path, monkeypatch):
    """band_mode="mask" through TRL's own dapo loss: the loss is
    sum(-A r) over the tokens inside the band (numpy core), divided by TRL's
    normaliser; every parameter gradient equals the clip mode's."""
    trainer, inputs = _captured_batch(tmp_path, monkeypatch)
    clip_loss, clip_grads = _loss_and_grads(trainer, inputs)
    new_log_prob = trainer._get_per_token_logps_and_entropies(
        trainer.model, torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1),
        torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1),
        inputs["completion_ids"].size(1))[0].detach().double().numpy()
    trainer.band_mode = "mask"
    mask_loss, mask_grads = _loss_and_grads(trainer, inputs)

    old = inputs["old_per_token_logps"].double().numpy()
    mask = inputs["completion_mask"].double().numpy()
    adv = np.broadcast_to(inputs["advantages"].double().numpy()[:, None], old.shape)
    lower, upper = bs.band_from_logp(np.minimum(old, 0.0), 0.05, "kl", max_ratio=10.0)
    ratio = np.exp(new_log_prob - old)
    outside = ((adv > 0) & (ratio > upper)) | ((adv < 0) & (ratio < lower))
    normaliser = inputs["num_items_in_batch"] / trainer.accelerator.num_processes
    want = (np.where(outside, 0.0, -adv * ratio) * mask).sum() / float(normaliser)
    assert mask_loss == pytest.approx(want, rel=1e-5, abs=1e-7)
    assert (outside & (mask > 0)).any() and mask_loss != pytest.approx(clip_loss, rel=1e-6)
    for mine, clip in zip(mask_grads, clip_grads):
        torch.testing.assert_close(mine, clip, rtol=1e-5, atol=1e-7)


def test_the_rollout_anchor_takes_the_band_around_vllms_log_probs(tmp_path, monkeypatch):
    """band_anchor="rollout" (vLLM's sampling_per_token_logps, here stood in for:
    no vLLM on a CPU): TRL's loss clamps to the band of the rollout
    probabilities, written as bounds on TRL's ratio pi / pi_old."""
    from trl import GRPOTrainer

    trainer, inputs = _captured_batch(tmp_path, monkeypatch)
    old = inputs["old_per_token_logps"]
    gen = torch.Generator().manual_seed(0)
    rollout = torch.clamp(old + 0.3 * torch.randn(old.shape, generator=gen), max=0.0)
    trainer.band_anchor = "rollout"  # construction refuses it without vLLM
    seen = {}
    trl_loss = GRPOTrainer._compute_loss

    def spy(self, model, batch):
        seen["eps"] = (self.epsilon_low.clone(), self.epsilon_high.clone())
        return trl_loss(self, model, batch)

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", spy)
    trainer._compute_loss(trainer.model, {**inputs, "sampling_per_token_logps": rollout})
    real = inputs["completion_mask"].bool().numpy()
    o, r = old.double().numpy(), rollout.double().numpy()
    lower, upper = bs.band_from_logp(r, 0.05, "kl", max_ratio=10.0)
    shift = np.exp(r - o)
    eps_low, eps_high = (e.double().numpy() for e in seen["eps"])
    np.testing.assert_allclose((1.0 - eps_low)[real], (lower * shift)[real], rtol=1e-5, atol=4e-7)
    np.testing.assert_allclose((1.0 + eps_high)[real], (upper * shift)[real], rtol=1e-5, atol=4e-7)
    with pytest.raises(RuntimeError, match="sampling_per_token_logps"):
        trainer._compute_loss(trainer.model, dict(inputs))


def test_band_metrics_are_read_once_per_logged_step_not_per_micro_batch(tmp_path, monkeypatch):
    """The plug-in gathered and .item()-ed each of its 24 metrics on every
    micro-batch (a device sync each): now its micro-batches' metrics stay on the
    device until TRL logs, and are gathered once per logged step."""
    import bandsolve.integrations.trl as plugin

    calls = {"gather": 0, "record": 0}
    trainer = _trainer(tmp_path, cls=BandGRPOTrainer, max_steps=3,
                       gradient_accumulation_steps=2, per_device_train_batch_size=4)
    gather = trainer.accelerator.gather

    def counting_gather(value):
        import inspect

        if inspect.stack()[1].frame.f_globals.get("__name__") == plugin.__name__:
            calls["gather"] += 1
        return gather(value)

    record = BandGRPOTrainer._record_band

    def counting_record(self, *args):
        calls["record"] += 1
        return record(self, *args)

    monkeypatch.setattr(trainer.accelerator, "gather", counting_gather)
    monkeypatch.setattr(BandGRPOTrainer, "_record_band", counting_record)
    monkeypatch.setattr(torch.Tensor, "item", _no_item(torch.Tensor.item, plugin.__name__))
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "band/clipfrac_upper" in entry]
    assert calls["record"] >= 2 * len(logged) >= 4  # micro-batches: two per step at least
    assert calls["gather"] == len(logged)


def _no_item(item, module):
    """Tensor.item that fails when called from ``module`` (a host sync there)."""
    def checked(self):
        import inspect

        if inspect.stack()[1].frame.f_globals.get("__name__") == module:
            raise AssertionError("a .item() (device sync) in the plug-in")
        return item(self)
    return checked
