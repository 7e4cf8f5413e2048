"""The OpenRLHF plug-in against the real OpenRLHF package (pytest -m trainers).

Everything runs through OpenRLHF's own code: its ``PolicyLoss`` computes the
surrogate, dual clip, reduction and importance-sampling corrections, its
``ActorPPOTrainer.__init__`` builds the loss from OpenRLHF's arguments, its
``training_step`` runs the actor (OpenRLHF's ``Actor`` around a tiny
transformers model) and its command ``train_ppo_ray`` parses the options.
On the CPU three things stand in (each named where it is used): flash-attn
and vLLM, which install only with CUDA (tests/openrlhf_stand_ins.py), and
DeepSpeed's engine in the strategy (``backward`` is ``loss.backward()``).

The plug-in is checked against OpenRLHF's built-in ``PolicyLoss`` with the
band replaced by OpenRLHF's fixed interval, and against the surrogate written
out in numpy with bounds from the numpy core.
"""

import sys
import types

import numpy as np
import pytest

pytestmark = pytest.mark.trainers

torch = pytest.importorskip("torch")
pytest.importorskip("openrlhf")

import openrlhf_stand_ins  # noqa: E402

openrlhf_stand_ins.install()

from openrlhf.models import Actor  # noqa: E402
from openrlhf.models.loss import PolicyLoss  # noqa: E402
from openrlhf.trainer.ppo_utils.experience import Experience  # noqa: E402
from openrlhf.trainer.ray import ppo_actor  # noqa: E402
from problems import clipped_surrogate_reference, policy_batch  # noqa: E402

import bandsolve as bs  # noqa: E402
import bandsolve.integrations.openrlhf as plugin  # noqa: E402
from bandsolve.torch import BandSettings  # noqa: E402
from bandsolve.torch import settings as band_settings  # noqa: E402

EPS_LOW, EPS_HIGH = 0.2, 0.28
SHAPE = (4, 9)
#: OpenRLHF's train/rollout importance-sampling corrections (PolicyLoss's
#: is_correction_*): off, TIS, ICEPOP, seq-mask-TIS and a binary-KL trust region
CORRECTIONS = {
    "off": {},
    "tis": dict(is_correction_level="token", is_correction_mode="clip",
                is_correction_threshold=(0.0, 1.05)),
    "icepop": dict(is_correction_level="token", is_correction_mode="mask",
                   is_correction_threshold=(0.97, 1.03)),
    "seq-mask-tis": dict(is_correction_level="seq", is_correction_mode="mask",
                         is_correction_threshold=(0.99, 1.01)),
    "binary-kl": dict(is_correction_level="token", is_correction_mode="mask",
                      is_correction_gating="binary_kl", is_correction_threshold=(0.0, 2e-3)),
}
#: the global-batch arguments training_step passes (loss_utils.get_loss_batch_info)
BATCH_INFO = {"local": {}, "global": {"dp_size": 2, "batch_num_tokens": 50.0,
                                      "global_batch_size": 6.0}}


def _batch(seed=0, dtype=torch.float64):
    old, new, adv, mask = policy_batch(seed, SHAPE, min_p=1e-3, spread=0.5, keep=0.75)
    rollout = old + np.random.default_rng(seed + 100).normal(0.0, 0.03, SHAPE)
    rollout = np.minimum(rollout, 0.0)
    return tuple(torch.tensor(a, dtype=dtype) for a in (old, new, adv, mask, rollout))


def _run(loss_fn, old, new, adv, mask, rollout, **batch_info):
    """loss_fn called as ActorPPOTrainer.training_step calls it; (outputs, d loss / d log_probs)."""
    log_probs = new.clone().requires_grad_()
    out = loss_fn(log_probs, old, adv, action_mask=mask, rollout_log_probs=rollout, **batch_info)
    out[0].backward()
    return out, log_probs.grad


@pytest.fixture
def fixed_band(monkeypatch):
    """The band replaced by OpenRLHF's [1 - EPS_LOW, 1 + EPS_HIGH]; counts its calls."""
    calls = []

    def fixed(old_log_prob, *args, **kwargs):
        calls.append(old_log_prob.shape)
        return (torch.full_like(old_log_prob, 1.0 - EPS_LOW),
                torch.full_like(old_log_prob, 1.0 + EPS_HIGH))

    # the plug-in's band comes through BandSettings.bounds, which calls band_from_logp there
    monkeypatch.setattr(band_settings, "band_from_logp", fixed)
    return calls


@pytest.mark.parametrize("batch_info", BATCH_INFO)
@pytest.mark.parametrize("correction", CORRECTIONS)
@pytest.mark.parametrize("token_level_loss", [True, False])
@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_with_openrlhfs_fixed_interval_it_is_openrlhfs_policy_loss(
        fixed_band, dual_clip, token_level_loss, correction, batch_info):
    """Band replaced by [1 - 0.2, 1 + 0.28]: loss, gradient and every metric are
    those of OpenRLHF's own PolicyLoss, for each option the plug-in supports."""
    options = dict(dual_clip=dual_clip, token_level_loss=token_level_loss,
                   **CORRECTIONS[correction])
    theirs_fn = PolicyLoss(clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH, **options)
    ours_fn = plugin.BandPolicyLoss.from_policy_loss(theirs_fn, BandSettings())
    batch = _batch(seed=3)
    theirs, their_grad = _run(theirs_fn, *batch, **BATCH_INFO[batch_info])
    ours, our_grad = _run(ours_fn, *batch, **BATCH_INFO[batch_info])
    assert fixed_band, "the plug-in never asked for the band"
    assert len(ours) == len(theirs) == 5  # loss, clip_ratio, ppo_kl, vllm_kl, is_filter_ratio
    assert ours[0].dtype == theirs[0].dtype
    assert ours[0].item() == pytest.approx(theirs[0].item(), rel=1e-12)
    torch.testing.assert_close(our_grad, their_grad, rtol=1e-12, atol=1e-15)
    for mine, their in zip(ours[1:], theirs[1:]):
        if their is None:
            assert mine is None
        else:
            assert mine.item() == pytest.approx(their.item(), rel=1e-12, abs=1e-15)
    assert 0.0 < theirs[1].item() < 1.0  # the clip binds somewhere, not everywhere
    if correction != "off":
        assert theirs[4].item() > 0.0  # the correction filters something
    # the fixed interval is restored after the call
    assert (ours_fn.clip_eps_low, ours_fn.clip_eps_high) == (EPS_LOW, EPS_HIGH)


def test_float32_as_openrlhf_trains_matches_openrlhfs_loss(fixed_band):
    theirs_fn = PolicyLoss(clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH, dual_clip=3.0)
    ours_fn = plugin.BandPolicyLoss.from_policy_loss(theirs_fn)
    batch = _batch(seed=4, dtype=torch.float32)
    theirs, their_grad = _run(theirs_fn, *batch)
    ours, our_grad = _run(ours_fn, *batch)
    assert ours[0].dtype == torch.float32
    assert ours[0].item() == pytest.approx(theirs[0].item(), rel=1e-6)
    torch.testing.assert_close(our_grad, their_grad, rtol=1e-6, atol=1e-9)
    assert ours[1].item() == theirs[1].item()


def _reference(old, new, adv, mask, band, dual_clip, token_level_loss):
    """(loss, d loss / d log_probs) written out in numpy: the surrogate with
    bounds from the numpy core, reduced as OpenRLHF's aggregate_loss reduces
    (token level: masked sum / tokens; else the mean over sequences of
    their token means)."""
    old, new, adv, mask = (t.numpy() for t in (old, new, adv, mask))
    lower, upper = bs.band_from_logp(old, band.delta, band.divergence, max_ratio=band.max_ratio)
    per_token, grad, _, _ = clipped_surrogate_reference(np.exp(new - old), adv, lower, upper,
                                                        dual_clip)
    if token_level_loss:
        weight = mask / mask.sum()
    else:
        counts = mask.sum(axis=1, keepdims=True)
        weight = mask / (counts + 1e-8) / (counts > 0).sum()
    return (per_token * weight).sum(), grad * weight


@pytest.mark.parametrize("token_level_loss", [True, False])
@pytest.mark.parametrize("dual_clip", [None, 2.0])
@pytest.mark.parametrize("band", [BandSettings(0.05, "kl", 10.0), BandSettings(0.1, "tv", None),
                                  BandSettings(0.2, "hellinger", 2.0)])
def test_loss_and_gradient_match_the_numpy_band_surrogate(band, dual_clip, token_level_loss):
    old, new, adv, mask, _ = _batch(seed=5)
    ours_fn = plugin.BandPolicyLoss(band, dual_clip=dual_clip, token_level_loss=token_level_loss)
    (loss, *_), grad = _run(ours_fn, old, new, adv, mask, None)
    ref_loss, ref_grad = _reference(old, new, adv, mask, band, dual_clip, token_level_loss)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(grad.numpy(), ref_grad, rtol=1e-9, atol=1e-15)


def test_a_token_beyond_ppos_interval_but_inside_its_band_keeps_its_gradient():
    """Ratio 1.5 with advantage +1 at old p = 0.05 and 0.5: Band-KL (delta 0.05)
    admits 1.5 at p = 0.05 (upper 2.98) and clips it at p = 0.5 (upper 1.31);
    OpenRLHF's [0.8, 1.2] clips both."""
    p = np.array([[0.05, 0.5]])
    _, upper = bs.band_from_logp(np.log(p), 0.05, "kl")
    assert upper[0, 0] > 1.5 > upper[0, 1]
    old = torch.log(torch.tensor(p))
    new = old + np.log(1.5)
    ones = torch.ones_like(old)
    band_fn = plugin.BandPolicyLoss(BandSettings(0.05, "kl"))
    _, band_grad = _run(band_fn, old, new, ones, ones, None)
    _, ppo_grad = _run(PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2), old, new, ones, ones, None)
    assert band_grad[0, 0] != 0.0 and band_grad[0, 1] == 0.0
    assert ppo_grad[0, 0] == 0.0 and ppo_grad[0, 1] == 0.0
    # -A r / 2 tokens: d/d log p of the kept token
    assert band_grad[0, 0].item() == pytest.approx(-1.5 / 2, rel=1e-12)


@pytest.mark.parametrize("token_level_loss", [True, False])
@pytest.mark.parametrize("dual_clip", [None, 2.0])
def test_mask_mode_drops_the_tokens_beyond_the_band_and_keeps_the_clips_gradient(
        dual_clip, token_level_loss):
    """mode="mask": -A r over the kept tokens at OpenRLHF's reduction (written
    out with numpy bounds), the clip mode's gradient, and as clip ratio the
    share of dropped tokens (the clip mode's count of clipped ones)."""
    old, new, adv, mask, _ = _batch(seed=8)
    band = BandSettings(0.05, "kl", 10.0)
    options = plugin.BandLossOptions(mode="mask")
    mask_fn = plugin.BandPolicyLoss(band, options, dual_clip=dual_clip,
                                    token_level_loss=token_level_loss)
    clip_fn = plugin.BandPolicyLoss(band, dual_clip=dual_clip, token_level_loss=token_level_loss)
    (loss, clip_ratio, *_), grad = _run(mask_fn, old, new, adv, mask, None)
    (clip_loss, clip_clip_ratio, *_), clip_grad = _run(clip_fn, old, new, adv, mask, None)
    o, n, a, m = (x.numpy() for x in (old, new, adv, mask))
    lower, upper = bs.band_from_logp(o, 0.05, "kl", max_ratio=10.0)
    ratio = np.exp(n - o)
    outside = ((a > 0) & (ratio > upper)) | ((a < 0) & (ratio < lower))
    per_token = np.where(outside, 0.0, -a * ratio)
    if dual_clip is not None:
        per_token = np.where(a < 0, np.minimum(per_token, -a * dual_clip), per_token)
    counts = m.sum(1)  # OpenRLHF's sequence means divide by counts + 1e-8
    want = ((per_token * m).sum() / m.sum() if token_level_loss
            else ((per_token * m).sum(1) / (counts + 1e-8)).sum() / (counts > 0).sum())
    assert loss.item() == pytest.approx(want, rel=1e-10)
    np.testing.assert_allclose(grad.numpy(), clip_grad.numpy(), rtol=1e-12, atol=0)
    assert clip_ratio.item() == pytest.approx((outside * m).sum() / m.sum(), rel=1e-6)
    assert clip_ratio.item() == pytest.approx(clip_clip_ratio.item(), abs=1e-7)
    assert (outside & (m > 0)).any() and loss.item() != pytest.approx(clip_loss.item())


def test_the_rollout_anchor_takes_the_band_around_rollout_log_probs():
    """anchor="rollout": the band of OpenRLHF's rollout_log_probs (vLLM's) as
    bounds on its ratio pi / pi_old, OpenRLHF's TIS correction applied on top;
    refused where OpenRLHF asks vLLM for no log-probabilities."""
    old, new, adv, mask, _ = _batch(seed=9)
    rollout = torch.clamp(old + 0.3 * torch.randn(old.shape, generator=torch.Generator()
                                                  .manual_seed(9), dtype=old.dtype), max=0.0)
    options = plugin.BandLossOptions(anchor="rollout")
    fn = plugin.BandPolicyLoss(BandSettings(0.05, "kl", 10.0), options, **CORRECTIONS["tis"])
    (loss, *_), grad = _run(fn, old, new, adv, mask, rollout)
    o, n, a, m, r = (x.numpy() for x in (old, new, adv, mask, rollout))
    lower, upper = bs.band_from_logp(r, 0.05, "kl", max_ratio=10.0)
    behaviour = np.exp(n - r)
    clipped = ((a > 0) & (behaviour > upper)) | ((a < 0) & (behaviour < lower))
    tis = np.clip(np.exp(o - r), 0.0, 1.05)
    want = np.where(clipped, 0.0, -a * np.exp(n - o)) * tis * m / m.sum()
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-9, atol=1e-15)
    assert (clipped & (m > 0)).any()
    with pytest.raises(ValueError, match="is_correction_level"):
        plugin.BandPolicyLoss(BandSettings(), options)
    with pytest.raises(ValueError, match="band_anchor must be one of"):
        plugin.BandLossOptions(anchor="vllm")


def test_padding_never_reaches_the_band():
    """Old log-probabilities under the mask are never looked at: +5 there (no
    log-probability) neither raises nor changes the loss."""
    old, new, adv, mask, _ = _batch(seed=6)
    padded = torch.where(mask.bool(), old, torch.full_like(old, 5.0))
    band_fn = plugin.BandPolicyLoss(BandSettings())
    assert band_fn(new, padded, adv, action_mask=mask)[0].item() == \
        band_fn(new, old, adv, action_mask=mask)[0].item()


def test_bad_old_log_probs_are_refused():
    old, new, adv, mask, _ = _batch(seed=7)
    old[1, 0] = float("nan")  # a real token
    with pytest.raises(ValueError, match="NaN"):
        plugin.BandPolicyLoss(BandSettings())(new, old, adv, action_mask=mask)


def test_gspo_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="per-token"):
        plugin.BandPolicyLoss(BandSettings(), policy_loss_type="gspo")
    with pytest.raises(TypeError, match="BandSettings"):
        plugin.BandPolicyLoss({"delta": 0.05})
    with pytest.raises(TypeError, match="PolicyLoss"):
        plugin.BandPolicyLoss.from_policy_loss(object())


# ------------------------------------------------------------ the actor path

def _args(**actor):
    """OpenRLHF's nested arguments, as train_ppo_ray's parser makes them, for
    what ActorPPOTrainer reads."""
    ns = types.SimpleNamespace
    actor_args = dict(eps_clip_low_high=(EPS_LOW, EPS_HIGH), dual_clip=None,
                      loss_agg_mode="token-mean", policy_loss_type="ppo", aux_loss_coef=0.0,
                      entropy_coef=None)
    actor_args.update(actor)
    return ns(
        actor=ns(**actor_args),
        algo=ns(advantage=ns(is_correction_level="off", is_correction_mode="mask",
                             is_correction_gating="ratio", is_correction_threshold=(0.5, 5.0)),
                kl=ns(use_loss=False)),
        train=ns(max_epochs=1, dynamic_batch_enable=False, colocate_all=False,
                 async_enable=False),
        ds=ns(packing_samples=False),
        vllm=ns(sync_backend="nccl"),
    )


class _Strategy:
    """DeepspeedStrategy's part training_step uses, without DeepSpeed's engine
    (which needs a process group and, for its optimizers, CUDA): backward is
    loss.backward(), the optimizer step is recorded."""

    ring_attn_group = None

    def __init__(self, args):
        self.args = args
        self.steps = 0

    def backward(self, loss, model, optimizer):
        loss.backward()

    def optimizer_step(self, optimizer, model, scheduler, name="model"):
        self.steps += 1

    def get_grad_norm(self, model):
        return 0.0

    def is_rank_0(self):
        return True


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny random Llama saved as a pretrained model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=48, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    return str(path)


@pytest.fixture
def trainer(monkeypatch, tiny_model):
    """OpenRLHF's ActorPPOTrainer, built by its own __init__ around OpenRLHF's
    Actor loading a tiny random Llama as PolicyModelActor loads the policy
    (bf16, OpenRLHF's default; eager attention, which needs no flash-attn)."""
    actor = Actor(tiny_model, attn_implementation="eager", param_dtype="bf16")
    # __init__ ends in torch.distributed.barrier() and torch.cuda.synchronize(),
    # and its replay buffer names torch.cuda.current_device() as the device it
    # would move experience to (unused by training_step): no process group and
    # no CUDA here
    monkeypatch.setattr(ppo_actor, "torch_dist_barrier_and_cuda_sync", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    def build(**actor_args):
        strategy = _Strategy(_args(**actor_args))
        scheduler = types.SimpleNamespace(get_last_lr=lambda: [0.0])
        return ppo_actor.ActorPPOTrainer(strategy, actor, ema_model=None, actor_optim=None,
                                         actor_scheduler=scheduler, micro_train_batch_size=2)

    return build


def _experience(actor, seed=0):
    """Two sequences of 12 tokens, the last 6 actions; old log-probs set so that
    the ratios spread over [0.5, 2.5], and the policy's probabilities spread."""
    gen = torch.Generator().manual_seed(seed)
    sequences = torch.randint(0, 48, (2, 12), generator=gen)
    attention_mask = torch.ones_like(sequences)
    action_mask = torch.ones(2, 6, dtype=torch.bool)
    action_mask[1, -2:] = False
    with torch.no_grad():
        current = actor(sequences, action_mask, attention_mask=attention_mask)
    log_ratio = torch.empty(2, 6).uniform_(np.log(0.5), np.log(2.5), generator=gen)
    old = torch.where(action_mask, torch.clamp(current - log_ratio, max=0.0), 0.0)
    advantages = torch.tensor([[1.0], [-1.0]]).expand(2, 6).clone()
    return Experience(sequences=sequences, attention_mask=attention_mask, action_mask=action_mask,
                      action_log_probs=old, advantages=advantages)


def _step(trainer, experience):
    """training_step on the experience; (its info, the gradient on the model)."""
    trainer.actor.model.zero_grad()
    trainer.training_step(experience, kl_ctl=0.0, step=0, loss_batch_info={})
    grads = torch.cat([p.grad.flatten() for p in trainer.actor.model.parameters()
                       if p.grad is not None])
    return dict(experience.info), grads


@pytest.mark.parametrize("dual_clip, loss_agg_mode", [(None, "token-mean"),
                                                      (3.0, "seq-mean-token-mean")])
def test_use_band_keeps_the_trainers_openrlhf_settings(trainer, dual_clip, loss_agg_mode):
    t = trainer(dual_clip=dual_clip, loss_agg_mode=loss_agg_mode)
    built = t.actor_loss_fn
    assert type(built) is PolicyLoss  # what OpenRLHF built from its arguments
    band = BandSettings(0.1, "tv")
    swapped = plugin.use_band(t, band)
    assert t.actor_loss_fn is swapped and isinstance(swapped, plugin.BandPolicyLoss)
    assert swapped.band == band
    for name in ("clip_eps_low", "clip_eps_high", "dual_clip", "token_level_loss",
                 "policy_loss_type", "is_correction_level", "is_correction_mode",
                 "is_correction_gating", "is_correction_threshold"):
        assert getattr(swapped, name) == getattr(built, name), name
    assert swapped.token_level_loss == (loss_agg_mode == "token-mean")
    assert plugin.use_band(t, band).band == band  # swapping again keeps one band loss


def test_actor_training_step_runs_the_band(trainer):
    """OpenRLHF's training_step after use_band: the gradient reaching the
    model and the clip ratio it logs are the band loss's on the actor's own
    log-probabilities, and differ from OpenRLHF's PPO clip's."""
    t = trainer(dual_clip=3.0)
    experience = _experience(t.actor)
    ppo_info, ppo_grads = _step(t, experience)

    band = BandSettings(0.05, "kl")
    plugin.use_band(t, band)
    band_info, band_grads = _step(t, _experience(t.actor))

    # the same loss, computed here on the actor's log-probabilities
    t.actor.model.zero_grad()
    e = _experience(t.actor)
    log_probs = t.actor(e.sequences, e.action_mask, attention_mask=e.attention_mask)
    direct = plugin.BandPolicyLoss(band, clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH,
                                   dual_clip=3.0)
    loss, clip_ratio, *_ = direct(log_probs, e.action_log_probs, e.advantages,
                                  action_mask=e.action_mask)
    loss.backward()
    want = torch.cat([p.grad.flatten() for p in t.actor.model.parameters() if p.grad is not None])

    torch.testing.assert_close(band_grads, want, rtol=1e-5, atol=1e-8)
    assert band_info["ppo_clip_ratio"].item() == pytest.approx(clip_ratio.item(), abs=1e-7)
    assert band_info["ppo_clip_ratio"].item() != pytest.approx(ppo_info["ppo_clip_ratio"].item())
    assert not torch.allclose(band_grads, ppo_grads)
    assert t.strategy.steps == 2


# -------------------------------------------------------------- the command

class _Stop(Exception):
    pass


def test_the_command_starts_openrlhfs_training_with_the_band_actor(monkeypatch):
    """``python -m bandsolve.integrations.openrlhf --band.* <train_ppo_ray options>``:
    OpenRLHF's parser gets its own options only, its strategy's args carry the
    band, and the policy actor group it starts is BandPolicyModelActor."""
    import ray
    from openrlhf.trainer.ray import launcher

    seen = {}

    def actor_group(num_nodes, num_gpus_per_node, actor_type, *args, **kwargs):
        seen["actor_type"] = actor_type
        raise _Stop

    monkeypatch.setattr(sys, "argv", ["bandsolve.integrations.openrlhf"])  # main replaces it
    monkeypatch.setattr(ray, "is_initialized", lambda: True)  # no Ray cluster started
    monkeypatch.setattr(launcher, "RayActorGroup", actor_group)
    import openrlhf.utils

    original = openrlhf.utils.get_strategy

    def get_strategy(args):
        seen["strategy"] = original(args)
        return seen["strategy"]

    monkeypatch.setattr(openrlhf.utils, "get_strategy", get_strategy)
    argv = ["--band.delta", "0.1", "--band.divergence=tv", "--band.max_ratio", "none",
            "--band.mode", "mask",
            "--actor.model_name_or_path", "tiny-model", "--reward.remote_url", "http://localhost",
            "--algo.advantage.estimator", "group_norm", "--rollout.n_samples_per_prompt", "2"]
    saved_actor = ppo_actor.PolicyModelActor
    with pytest.raises(_Stop):
        plugin.main(argv)
    assert seen["actor_type"] is plugin.BandPolicyModelActor
    args = seen["strategy"].args
    assert args.band == BandSettings(0.1, "tv", None)
    assert args.band_options == plugin.BandLossOptions(mode="mask")
    assert args.actor.model_name_or_path == "tiny-model"
    assert sys.argv[1:] == argv[7:]  # what OpenRLHF's parser read: the band's options stripped
    # the patches last for the command only
    assert ppo_actor.PolicyModelActor is saved_actor
    assert openrlhf.utils.get_strategy is get_strategy


def test_band_options_are_parsed_and_checked():
    band, options, rest = plugin.parse_band_args(["--x", "1", "--band.validate", "false",
                                                  "--band.delta=0.2", "--y",
                                                  "--band.anchor=rollout"])
    assert band == BandSettings(0.2, "kl", 10.0, False) and rest == ["--x", "1", "--y"]
    assert options == plugin.BandLossOptions(anchor="rollout")
    with pytest.raises(ValueError, match="mode must be one of"):
        plugin.parse_band_args(["--band.mode", "maskk"])
    with pytest.raises(ValueError, match="unknown option --band.detla"):
        plugin.parse_band_args(["--band.detla", "0.1"])
    with pytest.raises(ValueError, match="needs a value"):
        plugin.parse_band_args(["--band.delta", "--actor.x"])
    with pytest.raises(ValueError, match="delta"):
        plugin.parse_band_args(["--band.delta", "-1"])


def test_the_band_actor_is_openrlhfs_policy_actor():
    base = ppo_actor.PolicyModelActor.__ray_metadata__.modified_class
    cls = plugin.BandPolicyModelActor.__ray_metadata__.modified_class
    assert issubclass(cls, base)
    assert cls.__module__ == "bandsolve.integrations.openrlhf"  # importable in every worker


def test_python_dash_m_runs_the_command(monkeypatch):
    """``python -m bandsolve.integrations.openrlhf`` (the alias run as a script) reaches
    main: a bad --band.delta is refused before OpenRLHF parses anything."""
    import runpy

    # as in a fresh python -m: the alias not yet imported (here it replaced
    # itself with the plug-in when this file imported it)
    monkeypatch.delitem(sys.modules, "bandsolve.integrations.openrlhf")
    monkeypatch.setattr(sys, "argv", ["-m", "--band.delta", "-1", "--actor.model_name_or_path",
                                      "x"])
    with pytest.raises(ValueError, match="delta"):
        runpy.run_module("bandsolve.integrations.openrlhf", run_name="__main__")
