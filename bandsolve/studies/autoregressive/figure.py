"""The figure of :mod:`.study` (:func:`draw`): per setting (a row), the
mass on the high-paying tail, the first token's entropy and the per-step
KL(old || new) over training, per rule, with a 95% t band over seeds."""

from __future__ import annotations

from ..plotting import band_plot, plt
from ..rules import STYLES
from .study import Result


def _style(label: str) -> dict:
    base, _, fixed = label.partition("@")
    style = dict(STYLES[base])
    if fixed:
        style.update(ls=(0, (1, 1)), alpha=0.8, label=f"{style['label']} delta {fixed}")
    return style


def draw(result: Result):
    results, config, matched = result.results, result.config, result.matched
    settings = config.settings
    fig, axes = plt.subplots(len(settings), 3, figsize=(17, 3.9 * len(settings)), squeeze=False)
    for row, setting in zip(axes, settings):
        here = {lab: h for (s, lab), h in results.items() if s == setting}
        styles = {lab: _style(lab) for lab in here}
        optimizer, lr = setting
        deltas = ", ".join(f"{b.removeprefix('band-')} {d:.3g}" + ("" if inside else "*")
                           for b, (d, inside) in matched[setting].items())
        tag = f"{optimizer} lr {lr:g}" + (" (primary)" if setting == config.primary else "")
        band_plot(row[0], here, "tail_mass", "mass on the paying tail first tokens",
                  f"{tag}: tail mass", styles, limits=(0.0, 1.0))
        band_plot(row[1], here, "entropy", "first-token entropy, nats",
                  f"{tag}: first-token entropy", styles, limits=(0.0, None))
        band_plot(row[2], here, "step_kl", "KL(old || new) of the sequence, log scale",
                  f"{tag}: per-step KL (delta {deltas})", styles, log=True)
        row[2].title.set_fontsize(9)
    widest = max(axes[:, 0], key=lambda ax: len(ax.get_lines()))
    handles, labels = widest.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    task = config.task
    fig.suptitle(f"Tabular autoregressive task ({task.contexts} contexts, {task.vocab} tokens x 3, "
                 f"head pays {task.head_pay:g}, tail ranks {list(task.tail_ranks)} pay "
                 f"{task.tail_pay:g})\nGRPO {task.group} samples, {task.epochs} epochs x "
                 f"{task.minibatches} mini-batches, {config.seeds} paired seeds, mean and 95% "
                 "t band; * delta not matched to PPO's step (the nearest pilot point)",
                 fontsize=12)
    fig.tight_layout(rect=(0, 0.03, 1, 0.96))
    return fig
