"""The dynamics study's configurations and its command line.

    python -m analysis.dynamics [--full] [--part bandit|sequence|both|frontier] [--out figures]

A :class:`StudyConfig` (frozen) holds one configuration per part; it is
passed to every run, never read from a module global, so that a test passes a
tiny one. :func:`quick_study` is the default (minutes on 2 cores),
:func:`full_study` the long run (more seeds and steps, an Adam variant).
"""

from __future__ import annotations

import argparse
import dataclasses

from . import frontier, sequence
from .dynamics import BanditConfig, bandit_study
from .frontier import FrontierConfig
from .sequence import SequenceConfig


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    bandit: BanditConfig
    #: the Adam robustness check (None: not run)
    bandit_adam: BanditConfig | None
    frontier: FrontierConfig
    sequence: SequenceConfig


def quick_study() -> StudyConfig:
    """The default: a few minutes on 2 cores."""
    # the frontier's grids reach down to steps smaller than PPO's at eps = 0.2
    # (a band lets tail tokens move, so its per-step KL at delta = 0.01 is
    # already above PPO's)
    return StudyConfig(
        bandit=BanditConfig(contexts=16, steps=100, seeds=5),
        bandit_adam=None,
        # the bandit settles within about 60 steps (figures/dynamics_bandit.png)
        frontier=FrontierConfig(BanditConfig(contexts=8, steps=80, seeds=4),
                                optimizers=(("sgd", 2.5),),
                                eps=(0.1, 0.2, 0.4), eps_high=(0.28, 0.6),
                                dcpo_scale=(0.5, 2.0), deltas=(0.01, 0.05, 0.2)),
        sequence=SequenceConfig(steps=60, seeds=3))


def full_study() -> StudyConfig:
    """The long run: about an hour on 2 cores."""
    return StudyConfig(
        bandit=BanditConfig(steps=600, seeds=10),
        bandit_adam=BanditConfig(steps=600, seeds=10, optimizer="adam", lr=0.05),
        frontier=FrontierConfig(BanditConfig(steps=300, seeds=5),
                                eps=(0.05, 0.1, 0.2, 0.3, 0.5), eps_high=(0.28, 0.4, 0.6),
                                dcpo_scale=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0),
                                deltas=(0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2)),
        sequence=SequenceConfig(steps=300, seeds=6, k=32, eval_every=10))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Entropy-collapse dynamics study")
    parser.add_argument("--full", action="store_true", help="more seeds and steps")
    parser.add_argument("--part", choices=("bandit", "sequence", "both", "frontier"),
                        default="both", help="both: bandit and sequence; frontier: every "
                                             "rule over its own hyperparameter")
    parser.add_argument("--out", default="figures")
    args = parser.parse_args(argv)
    config = full_study() if args.full else quick_study()
    if args.part == "frontier":
        result = frontier.study(config.frontier, out=args.out)
        print("\n".join(result["paths"]))
        for (optimizer, metric), v in result["verdicts"].items():
            print(f"{optimizer} {metric}: the band frontier {v['verdict']} ({v['higher']} higher, "
                  f"{v['lower']} lower of {v['comparisons']} comparisons)")
        return 0
    if args.part in ("bandit", "both"):
        for name, bandit in (("dynamics_bandit", config.bandit),
                             ("dynamics_bandit_adam", config.bandit_adam)):
            if bandit is None:
                continue
            _, summary, paths = bandit_study(bandit, out=args.out, name=name)
            print("\n".join(paths))
            for rule, row in summary.items():
                print(f"{rule:12s} " + "  ".join(f"{k} {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"
                                                  for k, v in row.items()))
    if args.part in ("sequence", "both"):
        _, summary, paths = sequence.sequence_study(config.sequence, out=args.out)
        print("\n".join(paths))
        for rule, row in summary.items():
            print(f"{rule:12s} " + "  ".join(f"{k} {v[0]:.3f} ± {v[1]:.3f}"
                                              for k, v in row.items()))
    return 0
