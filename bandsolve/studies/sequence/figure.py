"""The sequence study's figure (:func:`draw`)."""

from __future__ import annotations

import numpy as np

from ..plotting import clip_share_bars, legend_panel, plt
from ..rules import STYLES
from ..stats import mean_and_ci, nanmean
from .study import Result

__all__ = ["draw"]


def draw(result: Result):
    """The selected run of each rule: test head-wrong correct mass and
    head-right success over training, H(answer | success) against current
    test success, and the positive-advantage clip shares by p bucket."""
    selected, config = result.selected, result.config
    fig, axes = plt.subplots(2, 3, figsize=(18, 9.5))
    evaluations = next(iter(selected.values()))[1]["test/success"].shape[0]
    x = config.eval_every * np.arange(evaluations)
    panels = [("train/success_head_wrong", "correct mass (mean over prompts)",
               "Training head-wrong prompts: correct mass"),
              ("test/success_head_wrong", "correct mass (mean over prompts)",
               "Test head-wrong prompts (unseen): correct mass"),
              ("test/success_head_right", "success probability",
               "Test head-right prompts (unseen): success probability")]
    for ax, (metric, ylabel, title) in zip(axes[0], panels):
        for rule, (_, history) in selected.items():
            mean, ci = mean_and_ci(history[metric])
            ax.plot(x, mean, lw=1.6, **STYLES[rule])
            # within [0, 1], the metric's range, which a t interval can leave
            ax.fill_between(x, np.clip(mean - ci, 0.0, 1.0), np.clip(mean + ci, 0.0, 1.0),
                            color=STYLES[rule]["color"], alpha=0.12, lw=0)
        ax.set(title=title, xlabel="GRPO step (0: after the supervised fit)", ylabel=ylabel)
        ax.grid(True, alpha=0.3)
    ax = axes[1, 0]
    for rule, (_, history) in selected.items():
        ax.plot(nanmean(history["train/success"], axis=1),
                nanmean(history["train/entropy_given_success"], axis=1), lw=1.6, marker=".",
                **STYLES[rule])
    ax.axvline(config.matched_success, color="k", lw=0.8, ls=":")
    ax.set(title="Training prompts: H(answer | success) against current reward (b at the line)",
           xlabel="success probability on training prompts (a line joins a rule's evaluations)",
           ylabel="H(answer | success), nats")
    ax.grid(True, alpha=0.3)
    ax = axes[1, 1]
    # evaluation 0 is the supervised fit, before any update: it has no clip shares
    clip_share_bars(ax, {rule: history for rule, (_, history) in selected.items()}, STYLES,
                    skip=1)
    ax.set(title="Clipped share of positive-advantage tokens, by old probability",
           ylabel="clipped share (per mini-batch update)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    labels = [f"{label} (chosen {value:g})" if np.isfinite(value) else label
              for label, (value, _) in zip(labels, selected.values())]
    legend_panel(axes[1, 2], handles, labels, "rule (hyperparameter chosen on validation)", 10)
    fig.suptitle(f"Sequence task with a wrong head: three digits summing to T without E; "
                 f"{config.layers}-layer transformer after SFT, GRPO ({config.group} samples, "
                 f"{config.epochs} epochs x {config.minibatches} mini-batches), "
                 f"{config.seeds} seeds, exact metrics, 95% CI", fontsize=12)
    fig.tight_layout()
    return fig
