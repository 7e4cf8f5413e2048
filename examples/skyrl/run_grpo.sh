#!/usr/bin/env bash
# GRPO with BandPO's band as the ratio clip, on SkyRL 0.4 (unmodified), on GPUs.
#
# Needs: Python >= 3.12 and a CUDA machine with SkyRL's full training stack,
# installed as SkyRL documents (pip install "skyrl[skyrl-train]"), then bandsolve
# in the same environment, on every Ray worker:
#   pip install ".[skyrl]"          (from a bandsolve checkout or wheel)
# and GSM8K in SkyRL's parquet format ($DATA, from SkyRL's gsm8k example).
#
# trainer.override_entrypoint=bandsolve.integrations.skyrl imports the plug-in before Ray
# starts and adds the band keys to SkyRL's strict config. The band's settings are
# the lines of bandpo_overrides.txt, which dry_run_cpu.py checks on a CPU.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${DATA:-$HOME/data/gsm8k}"
MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
GPUS="${GPUS:-1}"
mapfile -t BAND < <(grep -v '^\s*$' "$HERE/bandpo_overrides.txt")

python3 -m skyrl.train.entrypoints.main_base \
    trainer.override_entrypoint=bandsolve.integrations.skyrl \
    data.train_data="['$DATA/train.parquet']" \
    data.val_data="['$DATA/validation.parquet']" \
    trainer.policy.model.path="$MODEL" \
    trainer.algorithm.advantage_estimator=grpo \
    trainer.placement.policy_num_gpus_per_node="$GPUS" \
    generator.num_inference_engines="$GPUS" \
    generator.n_samples_per_prompt=8 \
    trainer.train_batch_size=256 \
    trainer.policy_mini_batch_size=64 \
    trainer.micro_train_batch_size_per_gpu=8 \
    trainer.epochs=1 \
    trainer.logger=console \
    "${BAND[@]}" "$@"
