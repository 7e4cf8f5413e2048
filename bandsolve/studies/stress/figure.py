"""The stress test's figure (:func:`draw`)."""

from __future__ import annotations

from ..bandit.study import Result
from ..bandit.task import regret
from ..plotting import band_plot, legend_panel, plt
from ..rules import DELTA, STYLES

__all__ = ["draw"]


def draw(result: Result):
    """Per-step KL and regret over training under many updates per batch."""
    results, config = result.histories, result.config
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    band_plot(axes[0], results, "step_kl", "KL(pi_old || pi_new) per step, log scale",
              "Size of each update (geometric mean)", STYLES, log=True)
    regrets = {rule: dict(history, regret=regret(history, config))
               for rule, history in results.items()}
    band_plot(axes[1], regrets, "regret", "best reward - expected reward",
              "Regret against the best token", STYLES, limits=(0.0, None))
    handles, labels = axes[0].get_legend_handles_labels()
    legend_panel(axes[2], handles, labels, f"clipping rule (Band: delta = {DELTA})", 10)
    fig.suptitle(f"High-off-policy stress test: the bandit with {config.epochs} epochs per "
                 f"batch ({config.contexts} contexts, {config.optimizer} lr {config.lr:g}), "
                 f"{config.seeds} seeds, 95% CI", fontsize=12)
    fig.tight_layout()
    return fig
