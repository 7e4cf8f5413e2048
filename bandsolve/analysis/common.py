"""Helpers shared by the analysis modules: seed statistics (paired by seed,
Holm, a seed-clustered bootstrap), the CSV writer, the curve plot and the
figure writer. It imports no study module and no torch, so that every analysis
module (the torch-free theory figures too) can import it and no import circle
forms; the compared rules live in :mod:`bandsolve.analysis.rules`."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import hashlib
import math
import multiprocessing
import os
import pathlib
import pickle
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .._files import atomic_write  # noqa: E402


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


def write_csv(path, results: dict, metrics):
    """One row per (rule, seed, step) with every metric."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic_write(path, newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["rule", "seed", "step", *metrics])
        for rule, history in results.items():
            steps, seeds = history[metrics[0]].shape
            for s in range(seeds):
                for t in range(steps):
                    writer.writerow([rule, s, t + 1,
                                     *(f"{history[m][t, s]:.6g}" for m in metrics)])
    return path


def band_plot(ax, results, metric, ylabel, title, styles, log=False, x=None,
              xlabel="GRPO step", limits=(None, None)):
    """Mean over seeds with a 95% band; on a log axis, of log(metric) (a
    geometric mean), so that the band stays positive. ``styles`` maps each
    rule to its plot style; ``x`` defaults to the steps 1, 2, ...
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
        steps = np.arange(1, centre.size + 1) if x is None else np.asarray(x)[:centre.size]
        style = styles[rule]
        centres.append(centre)
        ax.plot(steps, centre, lw=1.8, **style)
        ax.fill_between(steps, low, high, color=style["color"], alpha=0.15, lw=0)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
        means = np.concatenate(centres) if centres else np.zeros(0)
        means = means[np.isfinite(means) & (means > 0)]
        if means.size:
            ax.set_ylim(means.min() / 10.0, means.max() * 10.0)
    ax.grid(True, alpha=0.3)


def clip_share_bars(ax, results, names, styles, skip=0):
    """Bars of each rule's positive-advantage clipped share per old-probability
    bucket: one group per bucket in ``names``, one bar per rule, the mean of
    ``history[f"clip/pos/{name}"][skip:]`` (``skip`` drops leading rows, such
    as an evaluation before the first update). The caller titles the axes."""
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


@dataclasses.dataclass(frozen=True)
class Jobs:
    """How a study runs its tasks: in ``processes`` processes and, where
    ``resume`` names a folder, with each finished task's result kept there so
    that a later run of the same study reuses it. A study stopped part-way
    (Ctrl-C, a time limit) then resumes where it stopped, and one run may be
    finished on another machine. An entry is named by the task (its ``repr``),
    the task's function and a digest of the package's source, so an edit to
    the code starts afresh. Entries are pickles: resume only from a folder you
    trust."""

    processes: int = 1
    resume: str | None = None

    @classmethod
    def of(cls, jobs: int | Jobs) -> Jobs:
        return jobs if isinstance(jobs, Jobs) else cls(processes=int(jobs))

    def _path(self, function, task) -> str | None:
        text = repr(task)
        if self.resume is None or " at 0x" in text:  # no stable name: never reused
            return None
        digest = hashlib.sha256(_source_digest().encode())
        digest.update(f"{function.__module__}.{function.__qualname__}\n{text}".encode())
        return os.path.join(self.resume, f"{function.__name__}-{digest.hexdigest()[:32]}.pkl")

    def load(self, function, task):
        """The kept result of ``function(task)``, or None. A kept result that
        cannot be read (damaged on disk) is removed with a warning, and the
        task runs again."""
        path = self._path(function, task)
        if path is None or not os.path.exists(path):
            return None
        try:
            with open(path, "rb") as fh:
                return pickle.load(fh)
        except Exception as exc:  # truncated, zeroed, foreign: whatever unpickling trips on
            warnings.warn(f"bandsolve: the kept result {path} cannot be read "
                          f"({type(exc).__name__}: {exc}); removed it, and the task runs "
                          "again", RuntimeWarning, stacklevel=2)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None

    def keep(self, function, task, result) -> None:
        path = self._path(function, task)
        if path is None:
            return
        os.makedirs(self.resume, exist_ok=True)  # type: ignore[arg-type]
        with atomic_write(path, "wb") as fh:  # a run stopped mid-write leaves no torn entry
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)


#: parts of the package that no task runs (the report and the command line):
#: editing them keeps the kept results
_NOT_RUN_BY_TASKS = ("paper_repro", "cli")


@functools.cache
def _source_digest() -> str:
    """sha256 of the package's modules that a task may run: a kept result
    belongs to one version of that code."""
    root = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in _NOT_RUN_BY_TASKS:
            continue
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run_tasks(function, tasks, jobs: int | Jobs = 1, on_done=None, complete=None) -> list:
    """``[function(task) for task in tasks]``, as ``jobs`` says (a process
    count, or a :class:`Jobs`). ``function`` must be a module-level function,
    and each task carry its own seed, so that the results do not depend on the
    number of processes; ``on_done(task, result)`` is called as each finishes
    (in completion order; kept results first). Where ``jobs.resume`` is set,
    a result is kept unless ``complete(result)`` is false (a run cut short)."""
    jobs = Jobs.of(jobs)
    results: list = [None] * len(tasks)
    pending = []
    for i, task in enumerate(tasks):
        kept = jobs.load(function, task)
        if kept is None:
            pending.append(i)
            continue
        results[i] = kept
        if on_done is not None:
            on_done(task, kept)

    def finished(i, result):
        results[i] = result
        if complete is None or complete(result):
            jobs.keep(function, tasks[i], result)
        if on_done is not None:
            on_done(tasks[i], result)

    if jobs.processes <= 1 or len(pending) <= 1:
        for i in pending:
            finished(i, function(tasks[i]))
        return results
    # spawn, not fork: a forked torch may hang in its thread pool
    with ProcessPoolExecutor(jobs.processes,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(function, tasks[i]): i for i in pending}
        for future in as_completed(futures):
            finished(futures[future], future.result())
    return results


@contextlib.contextmanager
def one_thread():
    """torch on one thread inside: the same sums in the same order whatever
    the number of processes (and no oversubscription when there are many)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
