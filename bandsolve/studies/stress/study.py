"""The stress test: the tail-token bandit (:mod:`..bandit.task`) with 32
epochs per batch, far off-policy, under no clip, a loose constant clip, the
fixed clips and the bands; :func:`run` returns the bandit study's
:class:`~..bandit.study.Result` and writes nothing."""

from __future__ import annotations

from ..bandit.study import Result, run_rules
from ..bandit.task import BanditConfig
from ..jobs import Jobs

__all__ = ["NAME", "RULES", "full_config", "run", "smoke_config"]

#: the name of the study's CSV and figure
NAME = "dynamics_stress"
#: no clip and a loose constant clip against the fixed clips and the bands
RULES = ("no-clip", "constant", "ppo", "clip-higher", "dcpo", "band-kl", "band-tv", "band-chi2")


def smoke_config() -> BanditConfig:
    """``bandsolve repro``'s quick run: 16 contexts, 60 steps, 5 seeds, 32 epochs."""
    return BanditConfig(contexts=16, steps=60, seeds=5, epochs=32)


def full_config() -> BanditConfig:
    """``--full``: 64 contexts, 100 steps, 10 seeds, 32 epochs."""
    return BanditConfig(steps=100, seeds=10, epochs=32)


def run(config: BanditConfig, jobs: int | Jobs = 1, rules=RULES, seed: int = 0) -> Result:
    """Every rule of ``rules`` under many updates per batch."""
    return run_rules(config, rules, jobs, NAME, seed)
