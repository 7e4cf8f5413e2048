#!/usr/bin/env bash
# Each trainer plug-in's loss on a CUDA batch (issue 42, item 6): the tests of
# tests/test_cuda_plugins.py on a lent GPU machine (one H100 or H200, no
# network), where they do not skip. About 1 to 3 minutes; the timeout (PLUGINS_TIMEOUT,
# default 480 s) keeps the step under the 10 minutes a command may run.
#
#   bash benchmarks/device/plugins.sh          (from the repository root)
#
# What runs: bandsolve.torch's policy loss (clip and mask, float32 and
# float64, deltas 1e-8 to 10) on batches whose old log-probabilities hold p
# near 1 and log p down to -1e4, against the same loss on the CPU; then verl's,
# SkyRL's and OpenRLHF's registered losses and a few BandGRPOTrainer steps on
# the device, for each trainer importable there. The machine's image has
# torch, transformers and accelerate but no trainer: wheels of a trainer and
# what it needs beyond the image travel in .whl/ (see the device tool's
# README); a trainer still missing is skipped and counted as such.
# The output goes to $OUT (default /tmp/device-out)/plugins.log; the script
# exits with pytest's status (0 when every test passed or skipped).
set -uo pipefail
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
if compgen -G ".whl/*.whl" > /dev/null && [ ! -d /tmp/site ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$([ -d /tmp/site ] && echo /tmp/site:)$PWD:$PWD/tests"
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  for m in verl trl skyrl openrlhf transformers; do
      python3 -c "import importlib.metadata as md; print('$m', md.version('$m'))" 2>/dev/null \
          || echo "$m not installed"
  done; } 2>&1 | tee "$out/plugins_device.txt"
# addopts cleared: one process (no -n auto), whatever plug-ins pytest has there; -rs:
# the skipped tests and why, counted
timeout "${PLUGINS_TIMEOUT:-480}" python3 -m pytest -p no:cacheprovider -q -rs \
    -o addopts="" tests/test_cuda_plugins.py 2>&1 | tee "$out/plugins.log"
status=${PIPESTATUS[0]}
echo "plugins.sh: pytest exit status $status" | tee -a "$out/plugins.log"
exit "$status"
