"""The band's share of a trainer's first step, in the trainer's own environment.

    python benchmarks/trainer_first_step.py --python ENV/bin/python --trainer verl [--rounds 3]

``ENV`` is an environment built as ``tests/trainer_envs.sh`` builds it (verl
0.9.x or TRL 1.x, CPU torch); this checkout's bandsolve is put first on its
path. Each round runs one fresh process with empty numba and inductor caches
(cold), then one more on the caches it left (warm). The process makes the
call a first training step makes on 32,768 float32 tokens (64 x 512):

* verl: ``get_policy_loss_fn("bandpo")(old, new, advantages, mask, "token-mean",
  config)``, verl's own registry and config;
* TRL: ``BandSettings.bounds(old_log_prob, mask=...)``, what
  ``BandGRPOTrainer`` calls once per micro-batch, after ``import trl``.

Printed: the first call's CPU and wall seconds (median over rounds, lowest
and highest in brackets), cold and warm, and the second call's (steady state).
Target (issue 41): <= 10 s for the band on the first step with empty caches.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _report import spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SETUP = """
import json, time, torch
g = torch.Generator().manual_seed(0)
shape = (64, 512)
old = -torch.rand(shape, generator=g) * 10 - 1e-6
"""

CALLS = {
    "verl": _SETUP + """
from omegaconf import OmegaConf
import bandsolve.integrations.verl  # registers bandpo
from verl.trainer.ppo import core_algos
config = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2,
    "clip_ratio_c": 3.0, "global_batch_info": {},
    "policy_loss": {"loss_mode": "bandpo", "band_delta": 0.05, "band_divergence": "kl"}})
new = old + 0.05 * torch.randn(shape, generator=g)
advantages = torch.randn(shape, generator=g)
mask = torch.ones(shape)
fn = core_algos.get_policy_loss_fn("bandpo")
def call():
    fn(old, new, advantages, mask, "token-mean", config)
""",
    "trl": _SETUP + """
import trl  # noqa: F401
from bandsolve.integrations import trl as plugin  # noqa: F401
import bandsolve.torch as bt
mask = torch.ones(shape, dtype=torch.bool)
settings = bt.BandSettings(delta=0.05, divergence="kl", max_ratio=10.0)
def call():
    settings.bounds(old, mask=mask)
""",
}

_TIMED = """
times = []
for _ in range(2):
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    times.append((time.process_time() - cpu, time.perf_counter() - wall))
print("TIMES", json.dumps(times))
"""


def _one(python: str, trainer: str, caches: str) -> list:
    env = {**os.environ, "NUMBA_CACHE_DIR": os.path.join(caches, "numba"),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(caches, "inductor"),
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([python, "-c", CALLS[trainer] + _TIMED], env=env, capture_output=True,
                          text=True, timeout=900, cwd=caches)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    line = next(line for line in done.stdout.splitlines() if line.startswith("TIMES"))
    return json.loads(line.split(" ", 1)[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the trainer environment's python")
    parser.add_argument("--trainer", choices=sorted(CALLS), required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rows: dict = {"cold": [], "warm": []}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as caches:
            print(f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)
            rows["cold"].append(_one(args.python, args.trainer, caches))
            rows["warm"].append(_one(args.python, args.trainer, caches))
    print(f"{args.trainer}, 32,768 float32 tokens, {args.rounds} rounds "
          "(first call CPU / wall s; second call CPU s):")
    for name, runs in rows.items():
        first_cpu, first_wall = [r[0][0] for r in runs], [r[0][1] for r in runs]
        second = [r[1][0] for r in runs]
        print(f"| {args.trainer} | {name} | {spread(first_cpu, 2, '')} | {spread(first_wall, 2, '')} "
              f"| {spread(second, 2, '')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
