"""The autoregressive study's endpoints, report rows and its own page
(:class:`.study.Result` -> text).

The transformer decides the rows; the tabular policy is the secondary
setting, reported beside it. Each row's verdict is the deciding setting's,
by :func:`.endpoints.verdict` over the row's tests (:data:`.endpoints.ROWS`)
with the family's Holm p-values.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bandsolve.torch.losses import P_BUCKETS

from ..claims import Claim
from ..stats import effect_text, mean_and_ci, nanmean
from ..tables import markdown_table
from . import endpoints as prereg
from . import tuning
from .figure import knob_text
from .setting import LEARNING_RATES, MATCHED_METRICS, SettingResult
from .study import NAME, Result
from .task import CLASSES, SIGNS

__all__ = ["FAMILY", "endpoints", "page", "rows"]

#: the Holm family of the deciding setting's endpoints: this study's own
FAMILY = "ar"
#: the commit that holds the endpoints and verdict rules the committed results were judged by
RULES_COMMIT = "61ba11a"
NAMES = {"no-clip": "no clip", "ppo": "PPO", "clip-higher": "Clip-Higher", "dcpo": "DCPO",
         "band-kl": "Band-KL", "band-tv": "Band-TV"}


def _value(result: SettingResult, which: str, label: str, metric: str, how: str) -> str:
    """The mean over seeds ± its 95% t half-width, as the text writes it;
    "log max" as a geometric mean."""
    per = prereg.per_seed(result.runs[(which, label)], metric, how, result.config.window)
    mean, half = (v[0] for v in mean_and_ci(per[None]))
    if how == "log max":
        mean, half = np.exp(mean), np.exp(mean + half) - np.exp(mean)
    return f"{float(mean):.3g} ± {float(half):.2g}"


def _label(result: SettingResult, which: str, label: str) -> str:
    rule, _, kind = label.partition("@")
    knob = knob_text(result, rule, result.knob_of[(which, label)])
    tag = {"": "tuned", "matched": "matched step"}.get(kind, "")
    return f"{NAMES[rule]} {knob}".strip() + (f" ({tag})" if tag else "")


def _rules_at(result: SettingResult, which: str, metric: str, how: str) -> str:
    return ", ".join(f"{_label(result, which, label)} {_value(result, which, label, metric, how)}"
                     for label in tuning.RULES)


def setting(result: SettingResult) -> str:
    c, t = result.config, result.config.task
    policy = ("tabular policy (one softmax per state)" if c.model is None else
              f"causal transformer ({c.model.layers} layer{'s' * (c.model.layers > 1)}, width "
              f"{c.model.width}, "
              f"{c.model.heads} heads, prompts of {c.model.prompt} tokens; a supervised stage "
              "fits it to Zipf targets first)")
    return (f"{policy}; {t.contexts} contexts, answers of {t.length} tokens of {t.vocab}, the "
            f"head pays {t.head_pay:g} and first tokens of ranks {list(t.tail_ranks)} pay "
            f"{t.tail_pay:g}; GRPO {t.group} samples, {t.epochs} epochs x {t.minibatches} "
            f"mini-batches, {t.steps} steps, Adam lr {c.primary_lr:g} (primary) and "
            f"{c.high_lr:g} (high); {c.seeds} paired seeds; each rule tuned on {c.pilot_seeds} "
            f"pilot seeds of their own stream (best final reward); final = mean of the last "
            f"{c.window} steps; values are means over seeds ± a 95% t half-width")


def tuned_text(result: SettingResult) -> str:
    return "; ".join(
        f"lr {result.config.lr(w):g}: " + ", ".join(
            f"{NAMES[rule]} {knob_text(result, rule, result.tuned[(w, rule)])}"
            for rule in tuning.RULES if rule != "no-clip") for w in LEARNING_RATES)


def verdict_text(result: SettingResult, row: str | None = None) -> str:
    verdict, won, lost = result.verdict if row is None else result.rows[row]
    if not result.decides:
        return (f"smoke run ({result.config.seeds} seeds, fewer than the pre-registered "
                f"{prereg.MIN_SEEDS}): its rules read \"{verdict}\", which decides nothing")
    text = f"verdict {verdict}"
    if lost:
        text += "; a tuned baseline is significantly better in: " + ", ".join(lost)
    elif verdict != "reproduces":
        text += "; held: " + (", ".join(won) or "none")
    return text


def _test(result: SettingResult, name: str) -> str:
    return f"{name} {effect_text(result.tests[name], result.adjusted[name])}"


def _matched(result: SettingResult, metric: str) -> str:
    """Each rule at its matched step against PPO 0.2 (descriptive, unadjusted)."""
    target = result.pilot[("primary", tuning.TARGET[0], tuning.TARGET[1])]["step_kl_late"]
    parts = []
    for rule in result.matched:
        d = result.matched_tests[(rule, metric)]
        parts.append(f"{NAMES[rule]} {knob_text(result, rule, result.matched[rule])} "
                     f"{effect_text(d, d['p'], adjusted=False)}")
    parts += [f"{NAMES[rule]} not matched ({why.partition(': ')[2]})"
              for rule, why in result.unmatched.items()]
    return (f"at the matched step (PPO 0.2's pilot mean per-step KL over the second half, "
            f"{target:.3g}), minus PPO 0.2 (descriptive, unadjusted): " + "; ".join(parts))


def _clips(result: SettingResult, which: str) -> str:
    """Clip shares over training (A > 0 tail, A > 0 head, A < 0 head, all)."""
    keys = ("clip/pos/tail", "clip/pos/head", "clip/neg/head", "clipfrac")
    return ", ".join(f"{_label(result, which, label)} " + " / ".join(
        f"{float(nanmean(result.runs[(which, label)][k])):.2f}" for k in keys)
        for label in tuning.RULES)


def tail_text(result: SettingResult) -> str:
    mech = result.mechanism
    where = "; ".join(f"{what}: Band-KL - PPO "
                      f"{effect_text(m['diff'], m['diff']['p'], adjusted=False)}"
                      for what, m in mech.items() if m["diff"] is not None)
    return (f"At lr {result.config.primary_lr:g}, final tail mass: "
            f"{_rules_at(result, 'primary', 'tail_mass', 'final')}. "
            f"{_test(result, 'final tail mass, Band-KL - PPO')}; "
            f"{_test(result, 'final tail mass, Band-KL - Clip-Higher')}; "
            f"{_matched(result, 'tail_mass')}. Clip shares over training (A > 0 tail / A > 0 "
            f"head / A < 0 head / all signed): {_clips(result, 'primary')}. Where Band-KL's "
            f"difference from PPO comes from: {prereg.source(mech)} ({where}). "
            f"{verdict_text(result, 'tail').capitalize()}")


def stability_text(result: SettingResult) -> str:
    return (f"At lr {result.config.high_lr:g}, largest per-step KL (geometric mean): "
            f"{_rules_at(result, 'high', 'step_kl', 'log max')}; final reward: "
            f"{_rules_at(result, 'high', 'reward', 'final')}. "
            f"{_test(result, 'log largest step KL, no clip - Band-KL')}; "
            f"{_test(result, 'final reward, Band-KL - no clip')}. "
            f"{verdict_text(result, 'stability').capitalize()}")


def entropy_text(result: SettingResult) -> str:
    return (f"At lr {result.config.primary_lr:g}, final first-token entropy: "
            f"{_rules_at(result, 'primary', 'entropy', 'final')} nats; averaged over "
            f"training: {_rules_at(result, 'primary', 'entropy', 'mean')}. "
            f"{_test(result, 'final entropy, Band-KL - PPO')}; {_matched(result, 'entropy')}. "
            f"{verdict_text(result, 'entropy').capitalize()}")


ROW_TEXT = {"tail": tail_text, "stability": stability_text, "entropy": entropy_text}
CLAIMS = {
    "tail": ("Fixed clipping freezes low-probability tokens: high-advantage tail tokens gain "
             "more mass under the band than under PPO's or Clip-Higher's clip, each tuned",
             "the mechanism behind the entropy collapse (Figure 1)"),
    "stability": ("Under many updates per batch (far off-policy) no clipping becomes unstable "
                  "and the band's trust region does not",
                  "the trust-region half of the claim"),
    "entropy": ("BandPO keeps the policy entropy near 0.2 where clipping collapses it to "
                "about 0.02", "0.2 against 0.02"),
}


def endpoints(result: Result) -> dict[str, dict]:
    """The family's tests (:data:`.endpoints.FAMILY`) of the setting that decides."""
    return dict(result.deciding.tests)


def _with_holm(result: SettingResult, adjusted: dict) -> SettingResult:
    """``result`` read with the report's Holm p-values for its family."""
    held = {n: adjusted[n] for n in result.tests}
    return dataclasses.replace(result, adjusted=held,
                               verdict=prereg.verdict(result.tests, held),
                               rows={row: prereg.verdict(result.tests, held, names)
                                     for row, names in prereg.ROWS.items()})


def rows(result: Result, adjusted: dict[str, float]) -> list[Claim]:
    """The tail-mass, stability and entropy rows: the transformer decides
    (its tests with the family's Holm p-values ``adjusted``); the tabular
    policy is the secondary setting, read with its own family's. A setting
    not run is said so."""
    transformer, tabular = result.transformer, result.tabular
    if transformer is not None:
        transformer = _with_holm(transformer, adjusted)
    elif tabular is not None:
        tabular = _with_holm(tabular, adjusted)
    out = []
    for row, text in ROW_TEXT.items():
        parts = []
        if transformer is not None:
            parts.append(f"Transformer (decides; {setting(transformer)}; tuned: "
                         f"{tuned_text(transformer)}): {text(transformer)}")
        else:
            parts.append("The transformer study, which decides this row, was not run; the "
                         "tabular policy's verdict stands in")
        if tabular is not None:
            parts.append(f"{'Secondary, t' if transformer is not None else 'T'}abular "
                         f"({setting(tabular)}; tuned: {tuned_text(tabular)}"
                         f"{'; its own Holm family' if transformer is not None else ''}): "
                         f"{text(tabular)}")
        deciding = transformer if transformer is not None else tabular
        assert deciding is not None  # the config holds at least one setting
        out.append(Claim(*CLAIMS[row], ". ".join(parts) + f" (every number: figures/{NAME}.md)",
                         deciding.rows[row][0]))
    return out


def pilot_table(result: SettingResult) -> list[str]:
    c = result.config
    out = []
    for (w, rule, knob), row in sorted(result.pilot.items(), key=lambda kv: (
            LEARNING_RATES.index(kv[0][0]), tuning.RULES.index(kv[0][1]), kv[0][2])):
        marks = []
        if result.tuned[(w, rule)] == knob:
            marks.append("**tuned**")
        if (w, rule, knob) not in [(w, k.rule, g) for k in c.knobs for g in k.grid]:
            marks.append("grown")
        out.append((f"{c.lr(w):g}", NAMES[rule], knob_text(result, rule, knob) or "-",
                    f"{row['reward']:.3f} ± {row['reward_sd']:.3f}", f"{row['tail_mass']:.3f}",
                    f"{row['entropy']:.3f}", f"{row['step_kl_late']:.3g}",
                    f"{row['largest_step_kl']:.3g}", f"{row['clipfrac']:.3f}",
                    " ".join(marks)))
    return markdown_table(("lr", "rule", "knob", "final reward (sd over pilot seeds)",
                           "final tail mass", "final entropy", "mean step KL, 2nd half",
                           "largest step KL", "clip share", ""), out)


def finals_table(result: SettingResult) -> list[str]:
    out = []
    for (w, label) in result.runs:
        cells = [f"{result.config.lr(w):g}", _label(result, w, label)]
        for metric, how in (("reward", "final"), ("tail_mass", "final"), ("entropy", "final"),
                            ("entropy", "mean"), ("entropy_sequence", "final"),
                            ("step_kl", "mean"), ("step_kl", "log max")):
            cells.append(_value(result, w, label, metric, how))
        out.append(cells)
    return markdown_table(("lr", "rule", "final reward", "final tail mass", "final entropy",
                           "entropy over training", "final answer entropy", "mean step KL",
                           "largest step KL (geo.)"), out)


def clips_table(result: SettingResult) -> list[str]:
    names = [n for n, _, _ in P_BUCKETS] + list(CLASSES)
    out = []
    for (w, label), h in result.runs.items():
        for sign in SIGNS:
            out.append([f"{result.config.lr(w):g}", _label(result, w, label),
                        "A > 0" if sign == "pos" else "A < 0"]
                       + [f"{float(nanmean(h[f'clip/{sign}/{n}'])):.3f}" for n in names])
    return markdown_table(("lr", "rule", "sign", *names), out)


def family_table(result: SettingResult) -> list[str]:
    out = []
    for name, (w, *_rest) in prereg.FAMILY.items():
        d = result.tests[name]
        out.append((name, f"{result.config.lr(w):g}", f"{d['mean']:+.4f} [{d['low']:+.4f}, "
                    f"{d['high']:+.4f}]", f"{d['d']:+.2f}", f"{d['p']:.2g}",
                    f"{result.adjusted[name]:.2g}"))
    return markdown_table(("test (positive favours the band)", "lr",
                           "paired difference [95% t]", "d_z", "p", "Holm p"), out)


def page(study_result: Result) -> str:
    """The study on its own page (``NAME.md`` beside its figure): every number behind the rows."""
    lines = ["# The autoregressive study against tuned baselines (issue 40)", "",
             "The endpoints and verdict rules are `bandsolve.studies.autoregressive.endpoints`"
             + (f", committed alone in {RULES_COMMIT} before these runs." if RULES_COMMIT
                else ".") + " Written by `bandsolve repro` beside the study's figure and CSV.",
             ""]
    for title, result in (("The transformer (decides)", study_result.transformer),
                          ("The tabular policy (secondary)", study_result.tabular)):
        if result is None:
            lines += [f"## {title}", "", "Not run.", ""]
            continue
        lines += [f"## {title}", "", setting(result) + ".", ""]
        if result.fit:
            lines += ["Supervised stage (mean over seeds): " + "; ".join(
                f"{phase}: " + ", ".join(f"{k} {np.mean([f[k] for f in fits]):.4g}"
                                         for k in fits[0])
                for phase, fits in result.fit.items()) + ".", ""]
        lines += [f"CPU time of its tasks: {result.cpu_seconds / 60:.1f} minutes.", "",
                  "### Pilot (pilot seeds; every grid point the same seeds and steps)", "",
                  *pilot_table(result),
                  "Tuned knobs (best pilot final reward): " + tuned_text(result) + ". Matched "
                  "step at the primary rate (interpolated in log knob so that the pilot mean "
                  "per-step KL over the second half equals PPO 0.2's): " + ", ".join(
                      f"{NAMES[r]} {knob_text(result, r, k)}" for r, k in result.matched.items())
                  + "".join(f"; {NAMES[r]} not matched: {why}" for r, why in
                            result.unmatched.items()) + ".", "",
                  "### Study seeds: every rule (mean ± 95% t half-width)", "",
                  *finals_table(result),
                  "### The pre-registered family (one Holm family)", "", *family_table(result),
                  f"**{verdict_text(result).capitalize()}.** Rows: " + "; ".join(
                      f"{row}: {verdict_text(result, row)}" for row in prereg.ROWS) + ".", "",
                  "### Matched step (descriptive, unadjusted)", "",
                  "; ".join(f"{metric}: {_matched(result, metric)}"
                            for metric, _ in MATCHED_METRICS) + ".", "",
                  "### How often each clip binds (share of token-updates zeroed, over training)",
                  "", *clips_table(result),
                  f"Where Band-KL's difference from tuned PPO comes from: "
                  f"{prereg.source(result.mechanism)}.", ""]
    return "\n".join(lines)
