"""The dynamics study's configurations and its command line.

    python -m analysis.dynamics [--full] [--part bandit|sequence|both|frontier|ar] [--out figures]
                                [--jobs N]

A :class:`StudyConfig` (frozen) holds one configuration per part; it is
passed to every run, never read from a module global, so that a test passes a
tiny one. :func:`quick_study` is the default (minutes on 2 cores),
:func:`full_study` the long run (more seeds and steps, an Adam variant).
"""

from __future__ import annotations

import argparse
import dataclasses

from . import ar_study, frontier, sequence
from .ar_study import ARStudyConfig
from .common import mean_and_ci
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
    #: the high-off-policy stress test: the bandit with many epochs per batch
    #: (None: not run)
    stress: BanditConfig | None = None
    #: the autoregressive study under Adam (issue 30): the centre of the
    #: training rows
    ar: ARStudyConfig = dataclasses.field(default_factory=ar_study.smoke_config)


def quick_study() -> StudyConfig:
    """The default: about 3 minutes on 2 idle cores (docs/reproduce.md has the
    measured parts). The sequence task runs PPO, Clip-Higher, Band-KL, no
    clip and the constant [0.8, 10] clip at one setting each; the full study
    runs every rule and control over grids."""
    return StudyConfig(
        bandit=BanditConfig(contexts=16, steps=80, seeds=5),
        bandit_adam=None,
        # the frontier's grids reach down to steps smaller than PPO's at eps = 0.2
        # (a band lets tail tokens move, so its per-step KL at delta = 0.01 is
        # already above PPO's)
        frontier=FrontierConfig(BanditConfig(contexts=8, steps=60, seeds=3),
                                optimizers=(("sgd", 2.5),),
                                eps=(0.1, 0.2, 0.4), eps_high=(0.28, 0.6),
                                dcpo_scale=(0.5, 2.0), deltas=(0.01, 0.05, 0.2)),
        sequence=SequenceConfig(steps=40, seeds=4,
                                rules=("no-clip", "ppo", "clip-higher", "band-kl", "constant")),
        stress=BanditConfig(contexts=16, steps=60, seeds=5, epochs=32),
        ar=ar_study.smoke_config())


#: the full run's sequence rules: those of its Holm family, and no clip
FULL_SEQUENCE_RULES = ("no-clip", "ppo", "clip-higher", "band-kl")


def full_study() -> StudyConfig:
    """The long run, sized for 25 minutes with ``--jobs 2`` on 2 cores
    (issue 30): about 50 minutes of CPU time measured part by part on the
    shared machine at load 7-12, about 36 on an idle one (docs/reproduce.md):
    the sequence task about 30 (9 variants x 8 seeds x 200 steps), the
    autoregressive study about 10, the frontier, bandit and stress test about
    8 together. Before issue 30 the sequence task ran 19 variants a seed, and
    the whole took about 65 CPU minutes (10.5 minutes with ``--jobs 16`` on a
    16-core machine, paper_repro/full/README.md)."""
    return StudyConfig(
        bandit=BanditConfig(steps=600, seeds=10),
        # the Adam check is the autoregressive study's now (issue 30)
        bandit_adam=None,
        frontier=FrontierConfig(BanditConfig(steps=300, seeds=5),
                                eps=(0.05, 0.1, 0.2, 0.3, 0.5), eps_high=(0.28, 0.4, 0.6),
                                dcpo_scale=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0),
                                deltas=(0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2)),
        # the rules its Holm family compares (Band-KL against PPO and Clip-Higher,
        # each over its grid) and no clip; the other bands and the controls,
        # descriptive only, cost 10 of 19 runs a seed and are left out since
        # issue 30 (the autoregressive study now answers what they asked)
        sequence=SequenceConfig(steps=200, seeds=8, eval_every=10, ppo_eps=(0.1, 0.2, 0.3),
                                eps_high=(0.28, 0.4), deltas=(0.02, 0.05, 0.1),
                                rules=FULL_SEQUENCE_RULES),
        stress=BanditConfig(steps=100, seeds=10, epochs=32),
        ar=ar_study.full_config())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Entropy-collapse dynamics study")
    parser.add_argument("--full", action="store_true", help="more seeds and steps")
    parser.add_argument("--part", choices=("bandit", "sequence", "both", "frontier", "ar"),
                        default="both", help="both: bandit and sequence; frontier: every "
                                             "rule over its own hyperparameter; ar: the "
                                             "autoregressive study under Adam")
    parser.add_argument("--out", default="figures")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes (runs are seeded per task: the results do not "
                             "depend on it)")
    args = parser.parse_args(argv)
    config = full_study() if args.full else quick_study()
    if args.part == "ar":
        result = ar_study.run_study(config.ar, out=args.out, jobs=args.jobs)
        print("\n".join(result["paths"]))
        verdict, held, why = result["verdict"]
        for name, diff in result["tests"].items():
            print(f"{name}: {diff['mean']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}], "
                  f"d_z {diff['d']:+.2f}, Holm p {result['adjusted'][name]:.2g}")
        print(f"verdict: {verdict}; held: {', '.join(held) or 'none'}; "
              f"not: {', '.join(why) or 'none'}")
        return 0
    if args.part == "frontier":
        result = frontier.study(config.frontier, out=args.out, jobs=args.jobs)
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
            _, summary, paths = bandit_study(bandit, out=args.out, name=name, jobs=args.jobs)
            print("\n".join(paths))
            for rule, row in summary.items():
                print(f"{rule:12s} " + "  ".join(f"{k} {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"
                                                  for k, v in row.items()))
    if args.part in ("sequence", "both"):
        _, selected, paths = sequence.sequence_study(config.sequence, out=args.out,
                                                     jobs=args.jobs)
        print("\n".join(paths))
        for rule, (value, history) in selected.items():
            mean, ci = mean_and_ci(history["test/success"][-1:])
            print(f"{rule:16s} chosen {value:g}: final test success {mean[0]:.3f} ± {ci[0]:.3f}")
    return 0
