"""What bandsolve's verl plug-in costs every verl process: ``import verl`` with
verl's plug-in discovery off (VERL_USE_EXTERNAL_PLUGINS=none, the baseline), on (auto, which
imports bandsolve's entry point), and with the plug-in module imported eagerly
(the old entry point), in fresh interpreters, alternating, over several rounds.

    python benchmarks/import_cost.py --rounds 5      (in an environment with verl)

Prints, per setting, the median and range of wall time, peak memory (max RSS)
and the number of modules imported, and whether numba was among them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = """
import json, resource, sys, time
start = time.perf_counter()
import verl
from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
print(json.dumps({"seconds": time.perf_counter() - start,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "modules": len(sys.modules), "numba": "numba" in sys.modules,
                  "bandpo": "bandpo" in POLICY_LOSS_REGISTRY}))
"""


#: name -> the environment it sets: discovery off (no bandsolve), the lazy entry
#: point (what bandsolve installs), and the plug-in module imported eagerly (what
#: the entry point used to name, reproduced with verl's VERL_USE_EXTERNAL_MODULES)
SETTINGS = {
    "none": {"VERL_USE_EXTERNAL_PLUGINS": "none"},
    "auto": {"VERL_USE_EXTERNAL_PLUGINS": "auto"},
    "eager": {"VERL_USE_EXTERNAL_PLUGINS": "none",
              "VERL_USE_EXTERNAL_MODULES": "bandsolve.integrations.verl"},
}


def measure(setting: str) -> dict:
    env = {**os.environ, **SETTINGS[setting]}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    measure("none")  # warm the file cache once, unmeasured
    for _ in range(args.rounds):
        for policy in runs:
            runs[policy].append(measure(policy))
    for policy, results in runs.items():
        seconds = [r["seconds"] for r in results]
        rss = [r["max_rss_mb"] for r in results]
        print(f"{policy:<5} ({' '.join(f'{k}={v}' for k, v in SETTINGS[policy].items())}) "
              f"import verl: "
              f"{statistics.median(seconds):.2f} s [{min(seconds):.2f}-{max(seconds):.2f}], "
              f"max RSS {statistics.median(rss):.0f} MB [{min(rss):.0f}-{max(rss):.0f}], "
              f"{results[0]['modules']} modules, numba imported: {results[0]['numba']}, "
              f"bandpo registered: {results[0]['bandpo']}")


if __name__ == "__main__":
    main()
