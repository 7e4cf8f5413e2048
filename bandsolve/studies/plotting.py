"""The studies' plots: a metric over training with a 95% band over seeds,
clip shares by old-probability bucket, a legend panel, and the figure writer
(PNG and PDF, byte-identical when regenerated)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .._files import atomic_write  # noqa: E402
from .stats import mean_and_ci, nanmean  # noqa: E402

__all__ = ["band_plot", "clip_share_bars", "legend_panel", "plt", "save_figure"]


def band_plot(ax, results, metric, ylabel, title, styles, log=False, limits=(None, None)):
    """Mean over seeds with a 95% band; on a log axis, of log(metric) (a
    geometric mean), so that the band stays positive. ``styles`` maps each
    rule to its plot style; the x axis is the GRPO step, 1, 2, ...
    ``limits``: the metric's range (a probability's (0, 1), an entropy's
    (0, None)); the band is drawn within it, since a t interval over a few
    seeds can leave a range its metric cannot (the mean never does). On a
    log axis the view spans the means and a decade either side: a band over
    a few seeds can cover twenty decades, which would flatten every mean."""
    centres = []
    for rule, history in results.items():
        values = history[metric]
        if log:
            mean, ci = mean_and_ci(np.log(np.maximum(values, 1e-12)))
            centre, low, high = np.exp(mean), np.exp(mean - ci), np.exp(mean + ci)
        else:
            centre, ci = mean_and_ci(values)
            low, high = centre - ci, centre + ci
        low, high = np.clip(low, *limits), np.clip(high, *limits)
        steps = np.arange(1, centre.size + 1)
        style = styles[rule]
        centres.append(centre)
        ax.plot(steps, centre, lw=1.8, **style)
        ax.fill_between(steps, low, high, color=style["color"], alpha=0.15, lw=0)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
        means = np.concatenate(centres) if centres else np.zeros(0)
        means = means[np.isfinite(means) & (means > 0)]
        if means.size:
            ax.set_ylim(means.min() / 10.0, means.max() * 10.0)
    ax.grid(True, alpha=0.3)


def clip_share_bars(ax, results, styles, skip=0):
    """Bars of each rule's positive-advantage clipped share per old-probability
    bucket: one group per bucket of ``P_BUCKETS``, one bar per rule, the mean of
    ``history[f"clip/pos/{name}"][skip:]`` (``skip`` drops leading rows, such
    as an evaluation before the first update). The caller titles the axes."""
    from bandsolve.torch.losses import P_BUCKETS  # not above: the theory's figures need no torch

    names = [name for name, _, _ in P_BUCKETS]
    width = 0.8 / len(results)
    for i, (rule, history) in enumerate(results.items()):
        values = [float(nanmean(history[f"clip/pos/{name}"][skip:])) for name in names]
        ax.bar(np.arange(len(names)) + i * width, values, width, color=styles[rule]["color"])
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=20, fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)


def legend_panel(ax, handles, labels, title, fontsize):
    """Turn ``ax`` into a frameless panel that holds only the figure's legend."""
    ax.axis("off")
    ax.legend(handles, labels, loc="center", fontsize=fontsize, frameon=False, title=title)


def save_figure(fig, out, name):
    """Write ``fig`` as out/name.png and out/name.pdf, close it, return the paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = os.path.join(out, f"{name}.{ext}")
        # no creation date in the PDF: regenerated figures stay byte-identical
        with atomic_write(path, "wb") as fh:
            fig.savefig(fh, format=ext, dpi=130,
                        metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(path)
    plt.close(fig)
    return paths
