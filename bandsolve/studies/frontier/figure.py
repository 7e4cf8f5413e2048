"""The frontier's figure (:func:`draw`)."""

from __future__ import annotations

from ..plotting import plt
from ..rules import STYLES
from .study import BANDS, CLIPS, REFERENCE, Result, frontier_curve, summarize, verdict

__all__ = ["draw"]


def draw(result: Result):
    """Late entropy and tail mass against reward over training, one curve
    per rule over its grid, per optimiser, with the descriptive verdict."""
    summary, optimizers = summarize(result.rows), result.optimizers
    fig, axes = plt.subplots(len(optimizers), 2, figsize=(12, 4.6 * len(optimizers)),
                             squeeze=False)
    for row, optimizer in enumerate(optimizers):
        for col, (metric, label) in enumerate((("entropy", "late entropy (nats)"),
                                               ("tail_mass", "late mass on rewarding tail"))):
            ax = axes[row, col]
            for rule in (*CLIPS, *BANDS):
                curve = frontier_curve(summary, optimizer, rule, metric)
                if curve.size == 0:
                    continue
                style = {k: v for k, v in STYLES[rule].items() if k != "zorder"}
                ax.errorbar(curve[:, 0], curve[:, 2], xerr=curve[:, 1], yerr=curve[:, 3],
                            marker="o", ms=4, capsize=2, lw=1.5, **style)
                ref = summary.get((optimizer, "grid", *REFERENCE))
                if rule == REFERENCE[0] and ref is not None:
                    ax.plot(ref["reward"][0], ref[metric][0], marker="*", ms=14, color="0.2",
                            ls="none", label="PPO eps = 0.2")
            v = verdict(summary, optimizer, metric)
            ax.set_yscale("log")
            ax.set_xlabel("expected reward per sample, mean over training")
            ax.set_ylabel(label)
            ax.set_title(f"{optimizer.upper()}: the band frontier {v['verdict']}\n"
                         f"({v['higher']} higher, {v['lower']} lower of {v['comparisons']})",
                         fontsize=10)
            ax.grid(True, alpha=0.3, which="both")
    axes[0, 0].legend(fontsize=8, loc="best")
    fig.suptitle("Reward-entropy frontier: each rule over its own hyperparameter "
                 "(reward over training, late entropy and tail mass; 95% CI over seeds)",
                 fontsize=12)
    fig.tight_layout()
    return fig
