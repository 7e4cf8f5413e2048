#!/usr/bin/env bash
# The GPU checks of bandsolve.torch (issues 41 and 42.6), for one lent device
# (one H100 or H200), in under 10 minutes, exiting with its own status:
#
#   1. the CUDA tests: tests/test_torch_cuda.py (the band at p near 1, log p
#      down to -1e4, subnormal and huge deltas, the device-side assert and
#      its message, eager against compiled, no synchronisation, no compile,
#      warnings as errors) and the CUDA tests of test_torch_bounds.py and
#      test_torch_fused.py; at most TEST_TIMEOUT seconds (default 420);
#   2. the torch benchmark at 32,768 and 524,288 tokens (device time and
#      host time per call, eager, table, compiled), at most BENCH_TIMEOUT
#      seconds (default 150).
#
# Run from the repository root, with the environment set up as
# benchmarks/device_run.sh sets it up:  bash benchmarks/device/torch.sh
# What it writes goes to $OUT (default /tmp/device-out/torch). Exit status:
# 0 when every step passed, else the first failing step's (124 for a step
# that ran out of time).
set -uo pipefail
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
out=${OUT:-/tmp/device-out}/torch
mkdir -p "$out"
status=0

{ nvidia-smi -L; "$python" -c "import torch; print(torch.__version__, torch.cuda.is_available())"
  date -u; } 2>&1 | tee "$out/device.txt"

timeout "${TEST_TIMEOUT:-420}" "$python" -m pytest -p no:cacheprovider -n 0 -q -rs \
    tests/test_torch_cuda.py "tests/test_torch_bounds.py" "tests/test_torch_fused.py" \
    -k "cuda" > "$out/cuda_tests.log" 2>&1
step=$?
tail -n 40 "$out/cuda_tests.log"
[ "$status" -eq 0 ] && status=$step

timeout "${BENCH_TIMEOUT:-150}" "$python" benchmarks/gpu_bench.py --sizes 32768 524288 \
    --repeat 20 --out "$out/gpu_bench.md" > "$out/gpu_bench.log" 2>&1
step=$?
tail -n 40 "$out/gpu_bench.log"
[ "$status" -eq 0 ] && status=$step

echo "benchmarks/device/torch.sh: exit status $status" | tee -a "$out/device.txt"
exit "$status"
