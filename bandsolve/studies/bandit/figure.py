"""The bandit study's figure (:func:`draw`)."""

from __future__ import annotations

import numpy as np

from ..plotting import band_plot, clip_share_bars, legend_panel, plt
from ..rules import DELTA, STYLES
from ..stats import nanmean
from .study import Result
from .task import regret

__all__ = ["draw"]


def draw(result: Result):
    """The bandit study's figure: entropy given success, regret, tail mass, entropy given success at
    matched regret, and positive-advantage clip shares by p bucket; mean and
    95% CI over seeds."""
    results, config = result.histories, result.config
    title_suffix = " (interrupted)" if result.interrupted else ""
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    band_plot(axes[0, 0], results, "entropy_given_success",
              "H(token | it paid), nats, log scale",
              "Entropy of the paying token given success (geometric mean)", STYLES, log=True)
    regrets = {rule: dict(history, regret=regret(history, config))
               for rule, history in results.items()}
    band_plot(axes[0, 1], regrets, "regret", "best reward - expected reward, log scale",
              "Regret against the best token (geometric mean)", STYLES, log=True)
    band_plot(axes[0, 2], results, "tail_mass", "mass on rewarding tail tokens",
              f"Mass on the high-paying tail (pays {config.tail_pay:g}; head pays "
              f"{config.head_pay:g})", STYLES, limits=(0.0, 1.0))
    ax = axes[1, 0]
    for rule, history in regrets.items():
        mean_regret = nanmean(history["regret"], axis=1)
        entropy = np.exp(nanmean(np.log(np.maximum(history["entropy_given_success"], 1e-12)),
                                 axis=1))
        ax.plot(np.maximum(mean_regret, 1e-6), entropy, lw=1.8, **STYLES[rule])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("regret (training runs left to right)")
    ax.set_ylabel("H(token | it paid), nats")
    ax.set_title("Entropy given success at matched reward", fontsize=11)
    ax.grid(True, alpha=0.3, which="both")
    ax = axes[1, 1]
    clip_share_bars(ax, results, STYLES)
    ax.set_ylabel("clipped share of positive-advantage tokens")
    ax.set_title("Upper clips on positive advantage, by old probability", fontsize=11)
    handles, labels = axes[0, 1].get_legend_handles_labels()
    legend_panel(axes[1, 2], handles, labels, f"clipping rule (Band: delta = {DELTA})", 11)
    fig.suptitle(f"High-advantage-tail bandit: {config.contexts} contexts x {config.vocab} Zipf "
                 f"tokens, GRPO ({config.group} samples, {config.epochs} epochs, "
                 f"{config.optimizer} lr {config.lr:g}), {config.seeds} seeds, "
                 f"95% CI{title_suffix}", fontsize=13)
    fig.tight_layout()
    return fig
