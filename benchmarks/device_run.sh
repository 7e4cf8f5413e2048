#!/usr/bin/env bash
# One prepared run on a lent GPU machine (16 cores, one H200, no network):
# the full dynamics study of `bandsolve repro --full` over 16 processes, and
# benchmarks/gpu_study.py (the paper's cost claim beside a 1.5B decoder step,
# and the wrong-head sequence study at 16 seeds). The machine has torch,
# numba, scipy, matplotlib, mpmath and tqdm but not cvxpy: its wheels travel
# in .whl/ (see /work/.library/device/README.md). Results go to $OUT.
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
mkdir -p "$out" /tmp/repro-full
nproc; nvidia-smi -L
# --resume: the runs that finish are kept, so a study stopped by the time
# limit is finished elsewhere (`bandsolve repro --full --resume DIR`)
timeout "${REPRO_TIMEOUT:-330}" python3 -m bandsolve repro --full --jobs "$(nproc)" \
    --out /tmp/repro-full --resume /tmp/repro-full/kept 2>&1 | tail -n 60 \
    | tee "$out/repro_full.log"
tar czf "$out/repro_full.tgz" -C /tmp/repro-full .
if [ "${STUDY_TIMEOUT:-200}" -gt 0 ]; then
    timeout "${STUDY_TIMEOUT:-200}" python3 benchmarks/gpu_study.py --out "$out/gpu_study.csv" \
        2>&1 | tail -n 40 | tee "$out/gpu_study.log"
fi
