#!/usr/bin/env bash
# The autoregressive study on one GPU (issue 40): its FLOP count, then the study at --size gpu, resumable.
# Under 10 minutes on one H100 per call, exiting with its own status (no pipe hides a failure).
#
#   bash benchmarks/device/ar_study.sh          # from the repository root
#
# 1. the cost, counted by FlopCounterMode (prints; runs nothing else);
# 2. the study at --size gpu (4 layers of width 128, full float32, every seed
#    of a task in one batched model), its tasks kept in /tmp/ar-kept so that a
#    second invocation resumes what a time limit cut short.
# Everything goes to $OUT (default /tmp/device-out): ar_gpu.csv (one row per
# study run, seed and step, flushed once per learning rate), ar_gpu_summary.csv
# (the pilot table, the tuned knobs, the family's tests and the verdict, the
# device and time) and ar_study.log. Commit what it wrote into benchmarks/
# with the device and date.
set -uo pipefail
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/numba-cache} MPLBACKEND=Agg
export PYTHONPATH=${PYTHONPATH:-$PWD}
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
python3 -m bandsolve.studies.autoregressive.gpu --size gpu --device cuda --flops \
    > "$out/ar_study.log" 2>&1 || { cat "$out/ar_study.log"; exit 1; }
timeout "${AR_STUDY_TIMEOUT:-540}" python3 -m bandsolve.studies.autoregressive.gpu \
    --size gpu --device cuda --out "$out/ar_gpu.csv" --resume /tmp/ar-kept \
    >> "$out/ar_study.log" 2>&1
status=$?
tail -n 20 "$out/ar_study.log"
exit $status
