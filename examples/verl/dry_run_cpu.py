"""The verl launch configuration of run_grpo.sh, checked on a CPU down to verl's ppo_loss.

Needs: ``pip install ".[verl]"`` (verl 0.9, torch on the CPU is enough); no GPU,
model or data. It composes verl's own ``ppo_trainer`` config with the lines of
``bandpo_overrides.txt``, builds the ActorConfig as verl's trainer does, and
runs verl's ``ppo_loss`` (the function verl 0.9's actor calls) on a random
jagged batch, as verl's engine hands it over. It prints the loss and the band
metrics, and exits non-zero if verl did not run bandsolve's loss.

Then it trains a tiny random causal LM (built here, no download) for a few
GRPO rounds through the same ``ppo_loss``, four optimizer steps per rollout
batch (as ``ppo_epochs=4`` or mini-batches below the batch give), so that the
policy moves between rollout and loss and the clip binds; it prints the band's
clip fraction beside the one verl's fixed [1 - clip_ratio_low, 1 +
clip_ratio_high] would have had on the same ratios (``actor/band/fixed_clipfrac_*``).

    python examples/verl/dry_run_cpu.py
"""

from __future__ import annotations

import pathlib
import sys

import torch
import verl
from hydra import compose, initialize_config_dir
from tensordict import TensorDict
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.utils.losses import ppo_loss

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # examples/tiny_lm.py

from tiny_lm import clip_line, train  # noqa: E402


def actor_config():
    overrides = [line.strip() for line in (HERE / "bandpo_overrides.txt").read_text().splitlines()
                 if line.strip()]
    config_dir = pathlib.Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose("ppo_trainer", overrides=[
            *overrides, "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.n=1"])
    return omega_conf_to_dataclass(config.actor_rollout_ref.actor)


def jagged(rows, dtype):
    return torch.nested.as_nested_tensor([torch.as_tensor(r, dtype=dtype) for r in rows],
                                         layout=torch.jagged)


def random_batch(generator, n=4, vocab=32):
    """Prompts and responses of several lengths, old log-probs from a peaked
    policy (tail tokens included), a new policy a little off, and advantages."""
    prompts = [torch.randint(vocab, (int(k),), generator=generator).tolist()
               for k in torch.randint(2, 5, (n,), generator=generator)]
    responses = [torch.randint(vocab, (int(k),), generator=generator).tolist()
                 for k in torch.randint(3, 8, (n,), generator=generator)]
    old = [-torch.empty(len(r), dtype=torch.float64).exponential_(0.5, generator=generator)
           for r in responses]
    new = [o + 0.5 * torch.randn(len(o), dtype=torch.float64, generator=generator) for o in old]
    advantages = [torch.full((len(r),), float(torch.randn(1, generator=generator)),
                             dtype=torch.float64) for r in responses]
    data = TensorDict({
        "prompts": jagged(prompts, torch.long), "responses": jagged(responses, torch.long),
        "input_ids": jagged([p + r for p, r in zip(prompts, responses)], torch.long),
        "response_mask": jagged([[1] * len(r) for r in responses], torch.long),
        "old_log_probs": jagged(old, torch.float64), "advantages": jagged(advantages, torch.float64),
    }, batch_size=[n])
    data["loss_mask"] = data["response_mask"]
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=sum(map(len, responses)),
                         global_batch_size=n)
    # the engine's output: a log-prob at every position of prompt + response,
    # the response's at the positions before each response token
    full = []
    for p, r_new in zip(prompts, new):
        values = torch.zeros(len(p) + len(r_new), dtype=torch.float64)
        values[len(p) - 1:len(p) + len(r_new) - 1] = r_new
        full.append(values)
    return data, jagged(full, torch.float64)


def engine_log_probs(model, seqs):
    """verl's engine output: log p(x[t+1] | x[:t+1]) at every position, jagged."""
    lens = [len(s) for s in seqs]
    ids = torch.zeros(len(seqs), max(lens), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.as_tensor(s)
    logp = torch.log_softmax(model(input_ids=ids).logits, dim=-1)
    flat = torch.cat([logp[i, :n] for i, n in enumerate(lens)])
    labels = torch.roll(torch.cat([torch.as_tensor(s) for s in seqs]), shifts=-1, dims=0)
    values = flat.gather(-1, labels[:, None]).squeeze(-1)
    offsets = torch.cumsum(torch.tensor([0, *lens]), 0)
    return torch.nested.nested_tensor_from_jagged(values, offsets)


def batch_of(model, pairs, advantages):
    """(the sequences, the TensorDict verl's trainer hands ppo_loss) of one
    rollout batch, the old log-probabilities from the model as it is."""
    seqs = [p + r for p, r in pairs]
    with torch.no_grad():
        old = engine_log_probs(model, seqs).values()
    offsets = torch.cumsum(torch.tensor([0, *map(len, seqs)]), 0)
    old_rows = [old[offsets[i + 1] - len(r) - 1:offsets[i + 1] - 1]
                for i, (_, r) in enumerate(pairs)]
    data = TensorDict({
        "prompts": jagged([p for p, _ in pairs], torch.long),
        "responses": jagged([r for _, r in pairs], torch.long),
        "input_ids": jagged(seqs, torch.long),
        "response_mask": jagged([[1] * len(r) for _, r in pairs], torch.long),
        "old_log_probs": jagged([o.tolist() for o in old_rows], torch.float32),
        "advantages": jagged([[float(a)] * len(r) for a, (_, r) in zip(advantages, pairs)],
                             torch.float32),
    }, batch_size=[len(pairs)])
    data["loss_mask"] = data["response_mask"]
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=sum(len(r) for _, r in pairs),
                         global_batch_size=len(pairs))
    return seqs, data


def ppo_step(actor):
    """One of train()'s steps: verl's ppo_loss with this actor config."""
    def step(model, batch):
        seqs, data = batch
        loss, metrics = ppo_loss(actor, {"log_probs": engine_log_probs(model, seqs)}, data)
        value = {k: float(v.aggregate() if hasattr(v, "aggregate") else v)
                 for k, v in metrics.items() if "clipfrac" in k}
        return (loss, value["actor/band/clipfrac_upper"] + value["actor/band/clipfrac_lower"],
                value["actor/band/fixed_clipfrac_upper"] + value["actor/band/fixed_clipfrac_lower"])
    return step


def main() -> None:
    actor = actor_config()
    loss_fn = get_policy_loss_fn(actor.policy_loss.loss_mode)
    from bandsolve.integrations.verl import compute_policy_loss_bandpo

    if loss_fn is not compute_policy_loss_bandpo:
        raise SystemExit(f"verl resolved {actor.policy_loss.loss_mode!r} to {loss_fn}, "
                         "not bandsolve's loss: run `bandsolve doctor`")
    data, log_probs = random_batch(torch.Generator().manual_seed(0))
    loss, metrics = ppo_loss(actor, {"log_probs": log_probs}, data)
    print(f"loss_mode={actor.policy_loss.loss_mode} band_delta={actor.policy_loss.band_delta} "
          f"band_divergence={actor.policy_loss.band_divergence} "
          f"loss_agg_mode={actor.loss_agg_mode}")
    print(f"ppo_loss = {float(loss):.6f}")
    for key in sorted(metrics):
        if "band" in key or "clipfrac" in key:
            value = metrics[key]
            value = value.aggregate() if hasattr(value, "aggregate") else value  # verl's Metric
            print(f"  {key} = {float(value):.4f}")

    steps, band, fixed = train(batch_of, ppo_step(actor))
    print(clip_line(steps, actor.policy_loss.band_divergence, actor.policy_loss.band_delta, band,
                    f"verl's fixed [{1 - actor.clip_ratio_low:g}, {1 + actor.clip_ratio_high:g}]",
                    fixed))


if __name__ == "__main__":
    main()
