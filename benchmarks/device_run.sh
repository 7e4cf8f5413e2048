#!/usr/bin/env bash
# The one prepared run for a lent GPU machine (one H100 or H200, 16 cores, no
# network), sized to the device budget (15 minutes a session, 10 a command):
#
#   1. the CUDA tests (tests/test_torch_*.py with a device: the fused eager
#      CUDA kernel of issue 33, CUDA graphs, asynchronous validation), ~2 min;
#   2. issue 33's eager target: benchmarks/gpu_bench.py at 32,768 and 524,288
#      tokens without the compiled variants, ~1 min;
#   3. issue 30's GPU study: benchmarks/gpu_ar_study.py, which its docstring
#      sizes at under 10 minutes (left out with AR_STUDY_TIMEOUT=0).
#
# Run from the repository root:  bash benchmarks/device_run.sh
# The machine has torch, numba, scipy, matplotlib, mpmath and pytest but not
# always cvxpy or hypothesis: wheels of what is missing travel in .whl/ (see
# the device tool's README). Everything goes to $OUT (default /tmp/device-out);
# commit what it wrote into benchmarks/ with the device and date.
set -uo pipefail
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache MPLBACKEND=Agg
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
{ nproc; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; date -u; } \
    | tee "$out/device.txt"
timeout "${TEST_TIMEOUT:-180}" python3 -m pytest -p no:cacheprovider -n 0 -q -rs \
    tests/test_torch_bounds.py tests/test_torch_fused.py -k "cuda or async or device" \
    2>&1 | tail -n 30 | tee "$out/cuda_tests.log"
timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/gpu_bench.py --sizes 32768 524288 \
    --no-compile --out "$out/gpu_eager.md" 2>&1 | tail -n 30 | tee "$out/gpu_bench.log"
if [ "${AR_STUDY_TIMEOUT:-420}" -gt 0 ]; then
    timeout "${AR_STUDY_TIMEOUT:-420}" python3 benchmarks/gpu_ar_study.py --device cuda \
        --out "$out/gpu_ar_study.csv" 2>&1 | tail -n 40 | tee "$out/gpu_ar_study.log"
fi
