"""The autoregressive study's figure (:func:`draw`): per setting and learning
rate (a row), the mass on the paying tail, the first token's entropy and the
per-step KL(old || new) of the answer over training, per tuned rule, with a
95% t band over the paired seeds."""

from __future__ import annotations

from ..plotting import band_plot, plt
from ..rules import STYLES
from .setting import LEARNING_RATES, SettingResult


def knob_text(result: SettingResult, rule: str, knob: float) -> str:
    """``rule``'s knob as text: "eps 0.1", "delta 0.003"; empty for no clip."""
    k = result.config.knob(rule)
    return f"{k.name} {knob:.3g}" if k.name else ""


def _style(result: SettingResult, which: str, rule: str) -> dict:
    style = dict(STYLES[rule])
    base = style["label"].split(" [")[0]  # "PPO [0.8, 1.2]" names PPO at 0.2: drop the interval
    knob = knob_text(result, rule, result.tuned[(which, rule)])
    style["label"] = f"{base} {knob}".strip()
    return style


def draw(study_result):
    """The figure of a :class:`.study.Result` (a matplotlib Figure; the
    report saves it): a row per setting and learning rate, the transformer's first."""
    parts = [r for r in (study_result.transformer, study_result.tabular) if r is not None]
    fig, axes = plt.subplots(2 * len(parts), 3, figsize=(17, 4.1 * 2 * len(parts)),
                             squeeze=False)
    for i, result in enumerate(parts):
        config = result.config
        policy = ("tabular policy" if config.model is None else
                  f"transformer ({config.model.layers} layer{'s' * (config.model.layers > 1)}, "
                  f"width {config.model.width})")
        for row, which in zip(axes[2 * i:2 * i + 2], LEARNING_RATES):
            rules = [rule for (w, rule) in result.tuned if w == which]
            here = {rule: result.runs[(which, rule)] for rule in rules}
            styles = {rule: _style(result, which, rule) for rule in rules}
            tag = f"{policy}, Adam lr {config.lr(which):g}"
            band_plot(row[0], here, "tail_mass", "mass on the paying tail first tokens",
                      f"{tag}: tail mass", styles, limits=(0.0, 1.0))
            band_plot(row[1], here, "entropy", "first-token entropy, nats",
                      f"{tag}: entropy", styles, limits=(0.0, None))
            band_plot(row[2], here, "step_kl", "KL(old || new) of the answer, log scale",
                      f"{tag}: per-step KL", styles, log=True)
            for ax in row:
                ax.title.set_fontsize(10)
            row[0].legend(fontsize=8, title=f"tuned on pilot seeds (lr {config.lr(which):g})",
                          title_fontsize=8)
    first = parts[0].config
    fig.suptitle(f"Autoregressive task: a rewarded head (pays {first.task.head_pay:g}) against "
                 f"first tokens of ranks {list(first.task.tail_ranks)} that pay "
                 f"{first.task.tail_pay:g}; GRPO {first.task.group} samples, "
                 f"{first.task.epochs} epochs x {first.task.minibatches} mini-batches, Adam\n"
                 "every rule at its knob tuned on pilot seeds; mean over the paired study seeds "
                 "and a 95% t band", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig
