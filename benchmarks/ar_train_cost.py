"""CPU time of the autoregressive study's training (issue 30, repro --full's budget).

    python benchmarks/ar_train_cost.py [--steps 10] [--rounds 3]

Times, in one process and one thread, the pilot's shape (PPO and the two
bands over 5 deltas, 11 rules at 4 seeds) trained one rule per call, as the
study did before issue 30, against all 11 in one ``train_rules`` call (the
same results, bit for bit: tests/test_autoregressive.py); and one study run
(16 seeds). CPU time (``time.process_time``), so that a loaded machine
slows the wall clock more than the numbers; the ratio is per round.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bandsolve.studies.autoregressive.study import BANDS, full_config, make_rule
from bandsolve.studies.autoregressive.task import train_rules


def _cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = full_config()
    task = type(config.task)(steps=args.steps)
    rules = [make_rule("ppo", 0.0)] + [make_rule(b, d) for b in BANDS
                                       for d in config.pilot_deltas]
    pilot = range(config.pilot_seeds)
    train_rules(rules[:1], type(task)(steps=2), pilot)  # warm: imports, numba
    rows = []
    for _ in range(args.rounds):
        alone = _cpu(lambda: [train_rules([r], task, pilot) for r in rules])
        together = _cpu(lambda: train_rules(rules, task, pilot))
        study = _cpu(lambda: train_rules(rules[1:2], task, range(config.seeds)))
        rows.append((alone, together, study))
    per_step = [[x / args.steps * 1e3 for x in row] for row in rows]
    print(f"{args.steps} steps, {args.rounds} rounds; CPU ms per step (median [min, max]):")
    for i, name in enumerate((f"pilot, {len(rules)} rules one per call, {len(pilot)} seeds",
                              f"pilot, {len(rules)} rules in one call, {len(pilot)} seeds",
                              f"study run, one rule, {config.seeds} seeds")):
        values = [r[i] for r in per_step]
        print(f"  {name}: {statistics.median(values):.0f} [{min(values):.0f}, {max(values):.0f}]")
    ratios = [a / t for a, t, _ in rows]
    print(f"pilot, one per call / in one call: {statistics.median(ratios):.2f}x "
          f"[{min(ratios):.2f}, {max(ratios):.2f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
