#!/usr/bin/env bash
# GRPO with BandPO's band as the ratio clip, on verl 0.9 (unmodified), on GPUs.
#
# Needs: a CUDA machine with verl's own GPU stack installed as verl documents
# (pip install "verl[fsdp]" and vLLM), then bandsolve in the same environment:
#   pip install ".[verl]"          (from a bandsolve checkout or wheel)
# and GSM8K in verl's parquet format in $DATA (default ~/data/gsm8k): verl's
# package on the index ships no data-preparation step, so run this one first:
#   python examples/verl/prepare_gsm8k.py --out ~/data/gsm8k
#
# The band binds only if the policy moves before the loss is taken: 256 prompts
# in mini-batches of 64 give four optimizer steps per batch (docs/verl.md).
#
# The band's settings are the lines of bandpo_overrides.txt, the same lines
# dry_run_cpu.py checks on a CPU down to verl's ppo_loss.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${DATA:-$HOME/data/gsm8k}"
MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
GPUS="${GPUS:-1}"
mapfile -t BAND < <(grep -v '^\s*$' "$HERE/bandpo_overrides.txt")

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files="$DATA/train.parquet" \
    data.val_files="$DATA/test.parquet" \
    data.train_batch_size=256 \
    data.max_prompt_length=512 \
    data.max_response_length=1024 \
    actor_rollout_ref.model.path="$MODEL" \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.use_kl_loss=false \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    trainer.n_gpus_per_node="$GPUS" \
    trainer.nnodes=1 \
    trainer.total_epochs=1 \
    trainer.logger='["console"]' \
    trainer.project_name=bandsolve \
    trainer.experiment_name=grpo-bandpo-kl \
    "${BAND[@]}" "$@"
