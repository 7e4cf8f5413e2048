"""Theory figures: the shape of the band against the token's old probability.

The figures ``bandsolve repro`` writes, as PNG and PDF (:data:`FIGURES`):

* ``fig1_bounds``: the paper's Figure 1 at delta = 0.1: (a) ratio bounds
  against p for Band-KL, Band-TV and Band-chi2, DCPO, Clip-Higher and PPO,
  with the simplex limits 0 and 1/p; (b) the same as the change p (r - 1).
* ``fig2_plane``: the paper's Figure 2: the (pi_old, pi_new) plane under a KL
  trust region with delta = 0.1, coloured by where Band-KL and Clip-Higher
  each allow or clip a move.
* ``bounds_all_divergences``: every built-in divergence side by side.
* ``bounds_delta_sweep``: Band-KL for several deltas.
* ``bounds_tail``: log-scale views of the tail, p from 1e-6.

Every function takes its grid as an argument and returns the Figure, so
tests can run them on small inputs. Only the public API is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

import bandsolve as bs
from bandsolve.baselines import clip_higher_bounds, dcpo_bounds, ppo_bounds

from ..plotting import plt, save_figure

STYLE: dict[str, dict[str, Any]] = {
    "band-kl": dict(color="#1f77b4", lw=2.2, label="Band-KL"),
    "band-tv": dict(color="#2ca02c", lw=2.0, label="Band-TV"),
    "band-chi2": dict(color="#9467bd", lw=2.0, label=r"Band-$\chi^2$"),
    "dcpo": dict(color="#ff7f0e", lw=1.8, ls="--", label="DCPO"),
    "clip-higher": dict(color="#d62728", lw=1.8, ls="-.", label="Clip-Higher [0.8, 1.28]"),
    "ppo": dict(color="0.35", lw=1.5, ls=":", label="PPO [0.8, 1.2]"),
    "simplex": dict(color="0.0", lw=1.0, ls=(0, (1, 1)), label="simplex limits 0 and 1/p"),
}
DIVERGENCE_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                     "#17becf", "#bcbd22", "#ff7f0e"]


def _unlabelled(style):
    """The style without its legend label (for a rule's second curve)."""
    return {k: v for k, v in style.items() if k != "label"}


def _rules(p, delta):
    """(key, lower, upper) for every rule of Figure 1."""
    bands = [(f"band-{name}", *bs.band(p, delta, name)) for name in ("kl", "tv", "chi2")]
    return bands + [("dcpo", *dcpo_bounds(p)), ("clip-higher", *clip_higher_bounds(p)),
                    ("ppo", *ppo_bounds(p))]


def _style_axes(ax, title, xlabel, ylabel):
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def figure1(p=None, delta=0.1, ylim=6.0):
    """The paper's Figure 1: bounds as ratios (a) and as probability changes (b)."""
    p = np.linspace(0.005, 1.0, 400) if p is None else np.asarray(p, dtype=float)
    fig, (ax_r, ax_d) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    ax_r.plot(p, 1.0 / p, **STYLE["simplex"])
    ax_r.plot(p, np.zeros_like(p), **_unlabelled(STYLE["simplex"]))
    ax_d.plot(p, 1.0 - p, **STYLE["simplex"])
    ax_d.plot(p, -p, **_unlabelled(STYLE["simplex"]))
    for key, lower, upper in _rules(p, delta):
        style = STYLE[key]
        ax_r.plot(p, upper, **style)
        ax_r.plot(p, lower, **_unlabelled(style))
        ax_d.plot(p, p * (upper - 1), **style)
        ax_d.plot(p, p * (lower - 1), **_unlabelled(style))
    ax_r.set_ylim(0, ylim)
    _style_axes(ax_r, rf"(a) ratio bounds, $\delta$ = {delta:g}", r"old probability $p$",
                r"ratio $r = \pi_{new}/\pi_{old}$")
    ax_d.set_ylim(-1.0, 1.0)
    _style_axes(ax_d, r"(b) allowed change in probability $p\,(r-1)$",
                r"old probability $p$", r"$\pi_{new} - \pi_{old}$")
    ax_r.legend(fontsize=8, loc="upper right")
    fig.suptitle("Figure 1: probability-aware bounds against fixed clipping", fontsize=12)
    return fig


# region codes of Figure 2
_BOTH, _BAND_ONLY, _CLIP_ONLY, _NEITHER = 0, 1, 2, 3
_REGIONS = {
    _BOTH: ("#9ecae1", "both allow"),
    _BAND_ONLY: ("#31a354", "only Band-KL allows"),
    _CLIP_ONLY: ("#e6550d", "only Clip-Higher allows"),
    _NEITHER: ("#f0f0f0", "both clip"),
}


def plane_regions(pi_old, pi_new, delta=0.1):
    """Region code for each (pi_old, pi_new) pair (NaN outside the simplex)."""
    old, new = np.meshgrid(pi_old, pi_new)
    lower, upper = bs.band(old, delta, "kl")
    c_lower, c_upper = clip_higher_bounds(old)
    ratio = new / old
    band_ok = (ratio >= lower) & (ratio <= upper)
    clip_ok = (ratio >= c_lower) & (ratio <= c_upper)
    return np.where(band_ok, np.where(clip_ok, _BOTH, _BAND_ONLY),
                    np.where(clip_ok, _CLIP_ONLY, _NEITHER)).astype(float)


def figure2(n=400, delta=0.1):
    """The paper's Figure 2: where Band-KL and Clip-Higher allow a move."""
    pi_old = np.linspace(1.0 / n, 1.0, n)
    pi_new = np.linspace(0.0, 1.0, n)
    code = plane_regions(pi_old, pi_new, delta)
    fig, ax = plt.subplots(figsize=(6.4, 5.8), constrained_layout=True)
    cmap = ListedColormap([_REGIONS[k][0] for k in range(4)])
    ax.imshow(code, origin="lower", extent=(0, 1, 0, 1), cmap=cmap, vmin=-0.5, vmax=3.5,
              interpolation="nearest", aspect="auto")
    ax.plot([0, 1], [0, 1], color="0.2", lw=0.8, ls="--", label=r"$\pi_{new} = \pi_{old}$")
    ax.legend(handles=[Patch(color=c, label=t) for c, t in _REGIONS.values()]
              + [ax.lines[0]], loc="upper left", fontsize=8)
    _style_axes(ax, rf"Figure 2: moves allowed under KL, $\delta$ = {delta:g}",
                r"$\pi_{old}(a)$", r"$\pi_{new}(a)$")
    return fig


def figure_all_divergences(p=None, delta=0.1):
    """Every built-in divergence's band, as ratios and as probability changes."""
    p = np.linspace(0.005, 1.0, 300) if p is None else np.asarray(p, dtype=float)
    names = list(bs.BUILTIN_DIVERGENCES) + ["alpha:0.5", "alpha:2"]
    fig, (ax_r, ax_d) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    for name, color in zip(names, DIVERGENCE_COLORS):
        lower, upper = bs.band(p, delta, name)
        ax_r.plot(p, upper, color=color, label=name)
        ax_r.plot(p, lower, color=color)
        ax_d.plot(p, p * (upper - 1), color=color, label=name)
        ax_d.plot(p, p * (lower - 1), color=color)
    ax_r.plot(p, 1 / p, **STYLE["simplex"])
    ax_r.set_ylim(0, 6)
    _style_axes(ax_r, rf"ratio bounds, $\delta$ = {delta:g}", r"$p$", r"$r$")
    _style_axes(ax_d, r"allowed change $p\,(r-1)$", r"$p$", r"$\pi_{new} - \pi_{old}$")
    ax_r.legend(fontsize=8, ncol=2)
    fig.suptitle("Every built-in divergence side by side", fontsize=12)
    return fig


def figure_delta_sweep(p=None, deltas=(0.01, 0.05, 0.1, 0.3, 1.0), divergence="kl"):
    """The band of one divergence for several trust-region radii."""
    p = np.linspace(0.005, 1.0, 300) if p is None else np.asarray(p, dtype=float)
    fig, ax = plt.subplots(figsize=(6.8, 4.8), constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    for k, delta in enumerate(deltas):
        lower, upper = bs.band(p, delta, divergence)
        color = cmap(k / max(len(deltas) - 1, 1))
        ax.plot(p, p * (upper - 1), color=color, label=rf"$\delta$ = {delta:g}")
        ax.plot(p, p * (lower - 1), color=color)
    ax.plot(p, 1 - p, **STYLE["simplex"])
    ax.plot(p, -p, color="0", lw=1.0, ls=(0, (1, 1)))
    _style_axes(ax, f"Band-{divergence}: allowed change for several radii", r"$p$",
                r"$p\,(r-1)$")
    ax.legend(fontsize=8)
    return fig


def figure_tail(p=None, delta=0.05):
    """Log-scale views of the tail: ratio bounds and probability changes from p = 1e-6."""
    p = np.logspace(-6, 0, 400) if p is None else np.asarray(p, dtype=float)
    fig, (ax_r, ax_d) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    for key, _lower, upper in _rules(p, delta):
        style = STYLE[key]
        ax_r.plot(p, upper, **style)
        ax_d.plot(p, p * (upper - 1), **style)
    ax_r.plot(p, 1 / p, **STYLE["simplex"])
    ax_r.set_xscale("log")
    ax_r.set_yscale("log")
    _style_axes(ax_r, rf"upper ratio bounds in the tail, $\delta$ = {delta:g}", r"$p$",
                r"upper bound on $r$")
    ax_d.set_xscale("log")
    ax_d.set_yscale("log")
    _style_axes(ax_d, r"allowed rise $p\,(r_{hi}-1)$ in the tail", r"$p$",
                r"$\pi_{new} - \pi_{old}$")
    ax_r.legend(fontsize=8)
    ax_d.annotate(r"Band-KL $\approx$ Band-TV for $p \ll \delta$: both let a tail token rise"
                  "\n" r"by about $\delta$ (KL: $1 - e^{-\delta}$), PPO by $0.2\,p$",
                  xy=(0.33, 0.04), xycoords="axes fraction", fontsize=8)
    fig.suptitle("Tail tokens: the band lets them rise, fixed clipping freezes them",
                 fontsize=12)
    return fig


FIGURES = {
    "fig1_bounds": figure1,
    "fig2_plane": figure2,
    "bounds_all_divergences": figure_all_divergences,
    "bounds_delta_sweep": figure_delta_sweep,
    "bounds_tail": figure_tail,
}


def write_figures(out: str = "figures") -> list[str]:
    """Every theory figure as out/NAME.png and .pdf; the paths written."""
    written = []
    for name, make in FIGURES.items():
        written += save_figure(make(), out, name)
    return written
