"""How the studies run their tasks: in processes, resumable, on pinned numerics.

:func:`run_tasks` is ``[function(task) for task in tasks]`` in ``jobs``
processes (:class:`Jobs`), keeping each finished result in a folder to resume
from. Each task carries its own seed and runs torch on one thread
(:func:`one_thread`), so that results do not depend on the number of
processes or threads.

Nor, where the report asks for it (``Jobs(pinned=True)``), on the machine:
torch picks its CPU kernels by what the processor offers, and its AVX-512
kernels round some sums and functions differently from its AVX2 ones. One ulp
is enough: the runs with many updates per batch are chaotic, and a run under
this machine's own AVX-512 kernels changed 1,901 of the 2,401 rows of the
quick run's ``dynamics_stress.csv``. Pinned, every run uses ATen's AVX2
kernels and oneMKL's AVX2 code branch (:data:`PINNED_NUMERICS`), which every
x86-64 processor of the last decade has, and writes the same bytes on each
such machine; docs/reproduce.md says how far the numbers move elsewhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import multiprocessing
import os
import pathlib
import pickle
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed

from .._files import atomic_write

__all__ = ["Jobs", "PINNED_NUMERICS", "kernels_used", "numerics_pinned", "one_thread",
           "pin_numerics", "run_tasks"]

#: The environment of a pinned run: ATen's AVX2 kernels (torch reads this
#: when it first chooses a CPU kernel) and oneMKL's AVX2 code branch (its
#: conditional numerical reproducibility), whatever the processor offers.
PINNED_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
#: torch's name for the kernels PINNED_NUMERICS asks for
_PINNED_CAPABILITY = "AVX2"


def pin_numerics() -> None:
    """Put :data:`PINNED_NUMERICS` into this process's environment: it holds
    for every worker started from now on, and for this process's own runs
    if torch has not chosen its CPU kernels yet (``bandsolve repro`` pins
    before it imports torch)."""
    os.environ.update(PINNED_NUMERICS)


def _capability() -> str:
    """The CPU kernels torch runs in this process (AVX2, AVX512, DEFAULT, ...)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def numerics_pinned() -> bool:
    """Whether this process runs on the pinned numerics: its environment holds
    :data:`PINNED_NUMERICS` and torch chose the kernels it names."""
    return (all(os.environ.get(k) == v for k, v in PINNED_NUMERICS.items())
            and _capability() == _PINNED_CAPABILITY)


@dataclasses.dataclass(frozen=True)
class Jobs:
    """How a study runs its tasks: in ``processes`` processes and, where
    ``resume`` names a folder, with each finished task's result kept there so
    that a later run of the same study reuses it. A study stopped part-way
    (Ctrl-C, a time limit) then resumes where it stopped, and one run may be
    finished on another machine. An entry is named by the task (its ``repr``),
    the task's function, the kernels torch ran and a digest of the package's
    source, so an edit to the code starts afresh. Entries are pickles: resume
    only from a folder you trust.

    ``pinned``: run every task on :data:`PINNED_NUMERICS` (in worker
    processes where this one's torch already chose other kernels), so that
    the results are the same bytes on every x86-64 machine with AVX2; the
    report's runs are pinned, a study called from Python runs where it is
    called unless asked.
    """

    processes: int = 1
    resume: str | None = None
    pinned: bool = False

    def _path(self, function, task) -> str | None:
        text = repr(task)
        if self.resume is None or " at 0x" in text:  # no stable name: never reused
            return None
        digest = hashlib.sha256(_source_digest().encode())
        kernels = "pinned" if self.pinned else "unpinned"
        digest.update(f"{function.__module__}.{function.__qualname__}\n{kernels}\n{text}".encode())
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


@functools.cache
def _source_digest() -> str:
    """sha256 of the modules a task may run (the package, less the command
    line and the report, which no task runs): a kept result belongs to one
    version of that code."""
    root = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "cli" or relative.as_posix() == "studies/report.py":
            continue
        digest.update(relative.as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _worker_numerics(pinned: bool) -> dict:
    """The environment a worker's torch must start under: the pinned one, or
    (unpinned) the CPU kernels this process's torch runs, so that a worker
    computes what this process would. Without it, a worker read whatever the
    environment held when it started: after ``bandsolve repro`` had pinned
    this process's environment (its own torch already on AVX-512), an
    unpinned study's workers ran AVX2 and their numbers differed from the
    same study run here by an ulp (tests/test_study_bandit.py)."""
    if pinned:
        return dict(PINNED_NUMERICS)
    import sys

    if "torch" not in sys.modules:
        return {}  # a worker's torch reads the environment as this one's would
    capability = _capability()
    return {"ATEN_CPU_CAPABILITY": capability.lower()} if capability in _CAPABILITIES else {}


#: torch's CPU kernel names that ATEN_CPU_CAPABILITY can ask for (lowercase)
_CAPABILITIES = frozenset({"DEFAULT", "AVX2", "AVX512"})


def _set_worker_numerics(environment: dict) -> None:
    os.environ.update(environment)


def _pinned_call(function, task):
    """``function(task)`` in a worker started with :data:`PINNED_NUMERICS`,
    with the kernels torch chose there."""
    return _capability(), function(task)


#: the CPU kernels pinned runs ran on in this process or its workers (a record
#: for the report, which says whether they were the pinned ones)
_RAN_ON: set[str] = set()


def kernels_used() -> set[str]:
    """torch's CPU kernels under which this process's pinned runs ran (AVX2
    where the pin held), in this process or in its workers."""
    return set(_RAN_ON)


@functools.cache
def _warn_unpinned(capability: str) -> None:
    warnings.warn(f"bandsolve: this machine runs torch's {capability} CPU kernels, not the "
                  f"{_PINNED_CAPABILITY} ones the studies pin (no AVX2, or not x86-64): "
                  "their numbers may differ from the committed run's by what "
                  "docs/reproduce.md states", RuntimeWarning, stacklevel=3)


def run_tasks(function, tasks, jobs: int | Jobs = 1, on_done=None, complete=None) -> list:
    """``[function(task) for task in tasks]``, as ``jobs`` says (a process
    count, or a :class:`Jobs`). ``function`` must be a module-level function,
    and each task carry its own seed, so that the results do not depend on the
    number of processes; ``on_done(task, result)`` is called as each finishes
    (in completion order; kept results first). Where ``jobs.resume`` is set,
    a result is kept unless ``complete(result)`` is false (a run cut short)."""
    jobs = jobs if isinstance(jobs, Jobs) else Jobs(processes=int(jobs))
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

    here = not jobs.pinned or numerics_pinned()
    if jobs.pinned and here and pending:
        _RAN_ON.add(_PINNED_CAPABILITY)
    if here and (jobs.processes <= 1 or len(pending) <= 1):
        for i in pending:
            finished(i, function(tasks[i]))
        return results
    if not pending:
        return results
    # spawn, not fork: a forked torch may hang in its thread pool; a spawned
    # worker reads the pinned environment before its torch chooses kernels
    # each worker's numerics are set by its initializer, before its torch
    # chooses kernels; this process's environment is left as it is
    with ProcessPoolExecutor(max(1, jobs.processes),
                             mp_context=multiprocessing.get_context("spawn"),
                             initializer=_set_worker_numerics,
                             initargs=(_worker_numerics(jobs.pinned),)) as pool:
        call = _pinned_call if jobs.pinned else None
        futures = {(pool.submit(call, function, tasks[i]) if call else
                    pool.submit(function, tasks[i])): i for i in pending}
        for future in as_completed(futures):
            result = future.result()
            if call is not None:
                capability, result = result
                _RAN_ON.add(capability)
                if capability != _PINNED_CAPABILITY:
                    _warn_unpinned(capability)
            finished(futures[future], result)
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
