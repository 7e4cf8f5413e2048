"""CPU time of the autoregressive study's training (issue 40): what sizes the study.

    python benchmarks/ar_train_cost.py [--steps 3] [--rounds 3] [--replicas 4 24 44]

Times, in one process on one thread (as the study trains), GRPO steps of
the study's two policies at their configured sizes
(``bandsolve.studies.autoregressive.configs``): the transformer (2 layers,
width 64, 32 contexts x 16 answers, 4 x 4 mini-batches) and the tabular
policy, each with ``--replicas`` replicas trained in one batched model (a
pilot task holds 24, a primary-rate study task 44). Reported: CPU
milliseconds per replica-step (``time.process_time``: a loaded machine slows
the wall clock more than these), median and range over ``--rounds``, and
the ratio of each replica count's per-replica cost to the smallest's, per
round, so that the load cancels. The supervised stage is timed once per
round on 4 seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import numpy as np
import torch

from bandsolve.studies.autoregressive import configs, grpo
from bandsolve.studies.autoregressive.tabular import TablePolicy, zipf_logits
from bandsolve.studies.autoregressive.task import read_task, seed_rng
from bandsolve.studies.autoregressive.transformer import pretrain
from bandsolve.studies.rules import make_rule


def _policy(config, replicas: int):
    task = config.task
    if config.model is None:
        prior = np.stack([zipf_logits(task, seed_rng(99, s, "start"), (task.contexts, task.states))
                          for s in range(replicas)])
        return TablePolicy(prior), read_task(torch.log_softmax(torch.tensor(prior), -1), task)
    model = dataclasses.replace(config.model, sft_steps=1)
    net, _ = pretrain(task, model, 99, [0])
    with torch.no_grad():
        return net.tile(replicas), read_task(net.table(), task).tile(replicas)


def _cpu_per_replica_step(config, replicas: int, steps: int) -> float:
    policy, task = _policy(config, replicas)
    rules = [make_rule("band-kl", 0.003)]
    rngs = [seed_rng(99, s, "grpo") for s in range(replicas)]
    start = time.process_time()
    grpo.train(policy, task, rules, replicas, rngs, dataclasses.replace(config.task, steps=steps),
               config.primary_lr)
    return (time.process_time() - start) / (steps * replicas)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replicas", type=int, nargs="+", default=[4, 24, 44])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"load {os.getloadavg()[0]:.1f}; {args.steps} steps, {args.rounds} rounds")
    for name in ("transformer", "tabular"):
        config = getattr(configs, name)()
        _cpu_per_replica_step(config, 2, 1)  # warm: imports, the band's kernels
        rows = []
        for _ in range(args.rounds):
            rows.append([_cpu_per_replica_step(config, n, args.steps) for n in args.replicas])
        print(f"{name}: CPU ms per replica-step, median [min, max] over rounds; ratio to "
              f"{args.replicas[0]} replicas")
        for i, n in enumerate(args.replicas):
            values = [r[i] * 1e3 for r in rows]
            ratios = [r[i] / r[0] for r in rows]
            print(f"  {n:3d} replicas: {statistics.median(values):7.2f} [{min(values):.2f}, "
                  f"{max(values):.2f}]  ratio {statistics.median(ratios):.2f}")
        if config.model is not None:
            seconds = []
            for _ in range(args.rounds):
                start = time.process_time()
                pretrain(config.task, config.model, 99, range(4))
                seconds.append(time.process_time() - start)
            print(f"  supervised stage, 4 seeds x {config.model.sft_steps} steps: "
                  f"{statistics.median(seconds):.1f} CPU s [{min(seconds):.1f}, "
                  f"{max(seconds):.1f}]")
    print(f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
