"""GRPO with BandPO's band as the ratio clip, through TRL's GRPOTrainer.

Needs: ``pip install ".[trl]"`` (from a bandsolve checkout or wheel).

* ``python examples/trl_grpo.py --tiny``: a CPU run of 8 steps, with a one-layer
  model and a word-level tokenizer built here (no download), each generated
  batch reused for 4 updates (``num_iterations=4``), so that the policy moves
  between generation and loss and the clip binds. CI runs it.
* ``python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct``: a real model
  from the Hugging Face hub (network and, in practice, a GPU), on a toy task
  whose reward is checkable: answer with the sum of two small numbers.

The band's settings are ``--delta``, ``--divergence``, ``--max-ratio`` and
``--mode`` (clip or mask); the logs show TRL's ``clip_ratio/*`` (measured
against the band) and ``band/*`` (clip fractions and band widths by
old-probability bucket, and ``band/fixed_clipfrac_*``, what TRL's own
[1 - epsilon, 1 + epsilon] would have clipped on the same ratios). At the end
it prints the band's clip fraction beside the fixed clip's, averaged over the
steps.
"""

from __future__ import annotations

import argparse
import random
import re

from datasets import Dataset

from bandsolve.integrations.trl import BandGRPOConfig, BandGRPOTrainer

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h"]


def tiny_model_and_tokenizer():
    """A one-layer Llama and a word-level tokenizer over WORDS, built locally."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id)
    return transformers.LlamaForCausalLM(config), tokenizer


def reward_share_of_a(completions, **kwargs):
    """Tiny task: the share of the word "a" in each completion."""
    return [c.split().count("a") / max(len(c.split()), 1) for c in completions]


def reward_correct_sum(completions, answer, **kwargs):
    """Real task: 1 if the first integer in the completion is the sum, else 0."""
    found = [re.search(r"-?\d+", c if isinstance(c, str) else c[0]["content"]) for c in completions]
    return [float(m is not None and int(m.group()) == a) for m, a in zip(found, answer)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--tiny", action="store_true", help="CPU smoke run, no download")
    source.add_argument("--model", help="a causal LM on the Hugging Face hub")
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--divergence", default="kl")
    parser.add_argument("--max-ratio", type=float, default=10.0)
    parser.add_argument("--mode", choices=("clip", "mask"), default="clip")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--output-dir", default="bandsolve-trl-grpo")
    args = parser.parse_args(argv)

    rng = random.Random(0)
    if args.tiny:
        model, tokenizer = tiny_model_and_tokenizer()
        prompts = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(16)]
        dataset, reward = Dataset.from_dict({"prompt": prompts}), reward_share_of_a
        sizes = dict(per_device_train_batch_size=8, num_generations=4, max_completion_length=6,
                     learning_rate=0.05, max_steps=args.steps or 8, use_cpu=True)
    else:
        model, tokenizer = args.model, None
        pairs = [(rng.randint(0, 50), rng.randint(0, 50)) for _ in range(512)]
        dataset = Dataset.from_dict({
            "prompt": [f"What is {x} + {y}? Answer with the number only." for x, y in pairs],
            "answer": [x + y for x, y in pairs]})
        reward = reward_correct_sum
        sizes = dict(per_device_train_batch_size=16, num_generations=8, max_completion_length=16,
                     learning_rate=1e-6, max_steps=args.steps or 200)
    config = BandGRPOConfig(
        output_dir=args.output_dir, num_iterations=4, loss_type="dapo", logging_steps=1,
        report_to="none", save_strategy="no", seed=0, band_delta=args.delta,
        band_divergence=args.divergence, band_max_ratio=args.max_ratio, band_mode=args.mode,
        **sizes)
    trainer = BandGRPOTrainer(model=model, reward_funcs=reward, args=config,
                              processing_class=tokenizer, train_dataset=dataset)
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "band/clipfrac_upper" in entry]
    print({key: round(value, 4) for key, value in steps[-1].items()
           if key.startswith(("band/clipfrac", "clip_ratio/", "reward"))})

    def mean(*keys):
        return sum(sum(entry[k] for k in keys) for entry in steps) / len(steps)

    band = mean("band/clipfrac_upper", "band/clipfrac_lower")
    fixed = mean("band/fixed_clipfrac_upper", "band/fixed_clipfrac_lower")
    print(f"clip fraction, mean of {len(steps)} steps: band ({args.divergence}, delta "
          f"{args.delta}) {band:.4f}; TRL's fixed [{1 - config.epsilon:g}, "
          f"{1 + (config.epsilon_high or config.epsilon):g}] on the same ratios {fixed:.4f}")


if __name__ == "__main__":
    main()
