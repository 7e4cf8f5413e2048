#!/usr/bin/env bash
# The prepared runs for a lent GPU machine (one H100 or H200, 16 cores, no
# network), one step per command: each step is benchmarks/device/STEP.sh, runs
# in under 10 minutes on one H100 (the device tool's limit for a command) and
# exits with its own status, so that a failing test fails the step.
#
#   bash benchmarks/device_run.sh           list the steps and what each runs
#   bash benchmarks/device_run.sh STEP      run one; its output goes to $OUT
#
# The machine has torch, numba, scipy, matplotlib, mpmath and pytest but not
# always cvxpy or hypothesis: wheels of what is missing travel in .whl/ (see
# the device tool's README), installed here once into /tmp/site. Everything a
# step writes goes to $OUT (default /tmp/device-out); commit what it wrote into
# benchmarks/ with the device and the date.
set -uo pipefail
cd "$(dirname "$0")/.."
steps=()
for script in benchmarks/device/*.sh; do
    steps+=("$(basename "$script" .sh)")
done
if [ $# -eq 0 ]; then
    echo "steps (bash benchmarks/device_run.sh STEP):"
    for step in "${steps[@]}"; do
        # each script's first comment line says what it runs
        echo "  $step: $(sed -n '2s/^# *//p' "benchmarks/device/$step.sh")"
    done
    exit 0
fi
step="$1"
shift
if [ ! -f "benchmarks/device/$step.sh" ]; then
    echo "device_run.sh: no step '$step' (the steps: ${steps[*]})" >&2
    exit 2
fi
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache MPLBACKEND=Agg
if compgen -G ".whl/*.whl" > /dev/null && [ ! -d /tmp/site ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site .whl/*.whl || exit 1
fi
# every step imports what it installed (the CUDA tests need hypothesis) and
# this checkout's bandsolve
[ -d /tmp/site ] && export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/site:$PWD"
export OUT="${OUT:-/tmp/device-out}"
mkdir -p "$OUT"
{ nproc; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; date -u; } \
    > "$OUT/device.txt" 2>&1
exec bash "benchmarks/device/$step.sh" "$@"
