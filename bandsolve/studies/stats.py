"""The studies' statistics: means over seeds, paired differences, Holm's
correction and a seed-clustered bootstrap; no torch, no plotting."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["cluster_bootstrap", "effect_text", "holm", "mean_and_ci", "nanmean",
           "paired_difference"]


def nanmean(values, axis=None):
    """np.nanmean without its warning for all-NaN slices (an empty p bucket): NaN."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def mean_and_ci(values: np.ndarray):
    """Mean over seeds (axis 1) and the half-width of a 95% t-interval."""
    from scipy import stats

    n = values.shape[1]
    mean = nanmean(values, axis=1)
    if n < 2:
        return mean, np.zeros_like(mean)
    sem = np.std(values, axis=1, ddof=1) / math.sqrt(n)
    return mean, stats.t.ppf(0.975, n - 1) * sem


def paired_difference(treated, control) -> dict[str, float]:
    """Mean of the per-seed differences ``treated - control`` (both runs share
    each seed's random streams, so the difference cancels the seed's noise),
    its 95% t-interval, the two-sided p-value of a zero mean, and Cohen's d_z
    (mean difference over the differences' standard deviation)."""
    from scipy import stats

    diff = np.asarray(treated, dtype=float) - np.asarray(control, dtype=float)
    if diff.ndim != 1 or diff.size < 2 or not np.all(np.isfinite(diff)):
        raise ValueError("paired_difference needs two equal-length finite samples of >= 2 seeds")
    n = diff.size
    mean = float(diff.mean())
    sd = float(diff.std(ddof=1))
    if sd == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        return dict(mean=mean, low=mean, high=mean, p=p, d=math.copysign(math.inf, mean)
                    if mean else 0.0, n=n)
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    p = float(2 * stats.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
    return dict(mean=mean, low=mean - half, high=mean + half, p=p, d=mean / sd, n=n)


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error over the family)."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    m = p.size
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adjusted[i] = min(running, 1.0)
    return adjusted


def cluster_bootstrap(per_seed, draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-seed values (each a mean over that seed's contexts, the
    cluster) and a 95% percentile interval from resampling whole seeds."""
    values = np.asarray(per_seed, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(draws, values.size))
    means = values[picks].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def effect_text(diff: dict, p: float, adjusted: bool = True) -> str:
    """A paired difference as the report writes it: mean [95% interval],
    Cohen's d_z, the p-value (Holm-adjusted, or as it is where ``adjusted``
    is false) and the number of seeds."""
    return (f"{diff['mean']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}], d_z "
            f"{diff['d']:+.2f}, {'Holm ' if adjusted else ''}p {p:.2g}, {diff['n']} seeds")
