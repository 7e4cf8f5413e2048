"""The autoregressive study against tuned baselines (issue 40): a small
causal transformer, which decides the report's rows, and the tabular policy,
the secondary setting, each run by :mod:`.setting` (every rule tuned on
pilot seeds, then compared on paired study seeds by :mod:`.endpoints`).

:func:`run` returns a frozen :class:`Result` and writes nothing; the report
writes its :meth:`Result.table` as the CSV ``NAME.csv``.
"""

from __future__ import annotations

import dataclasses

from ..jobs import Jobs
from ..tables import history_rows
from . import configs, setting
from .setting import SettingConfig, SettingResult
from .task import METRICS

__all__ = ["ARStudyConfig", "NAME", "Result", "full_config", "run", "smoke_config"]

#: the name of the study's CSV and figure
NAME = "dynamics_ar"
#: the settings, in the report's order: the first that ran decides
SETTINGS = ("transformer", "tabular")


@dataclasses.dataclass(frozen=True)
class ARStudyConfig:
    """The two settings; None leaves one out."""

    transformer: SettingConfig | None
    tabular: SettingConfig | None

    def __post_init__(self):
        if self.transformer is None and self.tabular is None:
            raise ValueError("the study needs at least one setting (transformer or tabular)")
        for name in SETTINGS:
            c = getattr(self, name)
            if c is not None and c.kind != name:
                raise ValueError(f"the {name} setting holds a {c.kind} configuration")


@dataclasses.dataclass(frozen=True)
class Result:
    """Each setting's :class:`~.setting.SettingResult` (None where it did not run)."""

    config: ARStudyConfig
    transformer: SettingResult | None
    tabular: SettingResult | None

    @property
    def deciding(self) -> SettingResult:
        """The setting whose family decides the rows: the transformer where it ran."""
        deciding = self.transformer if self.transformer is not None else self.tabular
        assert deciding is not None  # the config holds at least one setting
        return deciding

    def table(self) -> tuple[list[str], list[list]]:
        """One row per (setting, learning rate, run, seed, step) with every metric."""
        header = ["setting", "lr", "label", "knob", "seed", "step", *METRICS]
        rows = []
        for name in SETTINGS:
            result = getattr(self, name)
            if result is None:
                continue
            for (which, label), history in result.runs.items():
                key = (name, f"{result.config.lr(which):g}", label,
                       f"{result.knob_of[(which, label)]:.6g}")
                rows += history_rows(key, history, METRICS)
        return header, rows


def full_config() -> ARStudyConfig:
    """The pre-registered study: the transformer (decides) and the tabular policy."""
    return ARStudyConfig(configs.transformer(), configs.tabular())


def smoke_config() -> ARStudyConfig:
    """Both settings at smoke sizes (about a minute of CPU): decides nothing."""
    return ARStudyConfig(configs.transformer_smoke(), configs.tabular_smoke())


def run(config: ARStudyConfig, jobs: int | Jobs = 1) -> Result:
    """Each setting that is configured, the transformer first."""
    return Result(config, *(None if getattr(config, name) is None
                            else setting.run(getattr(config, name), jobs)
                            for name in SETTINGS))
