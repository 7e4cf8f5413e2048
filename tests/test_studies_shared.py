"""The studies' shared pieces: the paired t-test, Holm's correction, the
seed-clustered bootstrap, and the runner (resuming, damaged entries)."""

import os
import pickle

import numpy as np
import pytest

from bandsolve.studies import jobs as runner
from bandsolve.studies.stats import cluster_bootstrap, holm, paired_difference


def test_paired_difference_is_the_paired_t_test():
    """Against scipy's paired t-test (an independent implementation)."""
    from scipy import stats

    rng = np.random.default_rng(5)
    control = rng.normal(1.0, 1.0, 8)
    treated = control + rng.normal(0.3, 0.1, 8)  # shared seed noise cancels in the pair
    diff = paired_difference(treated, control)
    reference = stats.ttest_rel(treated, control)
    assert diff["p"] == pytest.approx(reference.pvalue, rel=1e-10)
    low, high = reference.confidence_interval(0.95)
    assert (diff["low"], diff["high"]) == (pytest.approx(low), pytest.approx(high))
    d = treated - control
    assert diff["d"] == pytest.approx(d.mean() / d.std(ddof=1))
    with pytest.raises(ValueError, match="finite"):
        paired_difference([1.0, np.nan], [0.0, 0.0])


def test_holm_adjusts_step_down():
    # by hand: sorted 0.01, 0.02, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.02), max(0.04, 0.04)
    np.testing.assert_allclose(holm([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])


def test_cluster_bootstrap_resamples_whole_seeds():
    mean, low, high = cluster_bootstrap([0.0, 1.0, 0.0, 1.0], draws=4000)
    assert mean == 0.5 and 0.0 <= low < 0.5 < high <= 1.0
    assert cluster_bootstrap([0.3, 0.3, 0.3]) == (pytest.approx(0.3),) * 3


CALLS: list = []


def _square_and_count(task):
    CALLS.append(task)
    return task * task


class _NoStableName:
    """A task whose repr names its memory address (object's default)."""

    def __mul__(self, other):
        return 0


def test_run_tasks_resumes_from_kept_results(tmp_path):
    """A study stopped part-way (a time limit, Ctrl-C) resumes: a task whose
    result is kept is not run again, and the results are those of a fresh run."""
    jobs = runner.Jobs(1, resume=str(tmp_path / "kept"))
    CALLS.clear()
    assert runner.run_tasks(_square_and_count, [1, 2, 3], jobs) == [1, 4, 9]
    assert CALLS == [1, 2, 3]
    CALLS.clear()
    done = []
    assert runner.run_tasks(_square_and_count, [1, 2, 3, 4], jobs,
                            on_done=lambda task, result: done.append(task)) == [1, 4, 9, 16]
    assert CALLS == [4] and sorted(done) == [1, 2, 3, 4]
    # without resume, nothing is kept or reused
    CALLS.clear()
    assert runner.run_tasks(_square_and_count, [1, 2], 1) == [1, 4] and CALLS == [1, 2]


def test_run_tasks_keeps_no_partial_or_unnamed_result(tmp_path):
    """A run cut short (``complete`` false) and a task with no stable name
    (an address in its repr) are never reused: either would be read back as
    another run's result."""
    jobs = runner.Jobs(1, resume=str(tmp_path / "kept"))
    runner.run_tasks(_square_and_count, [5], jobs, complete=lambda result: False)
    runner.run_tasks(_square_and_count, [_NoStableName()], jobs)
    assert not (tmp_path / "kept").exists() or not list((tmp_path / "kept").iterdir())
    CALLS.clear()
    runner.run_tasks(_square_and_count, [5], jobs)
    assert CALLS == [5]


@pytest.mark.parametrize("damage", [b"", b"\x80\x05garbage", b"\0" * 64])
def test_run_tasks_runs_again_a_damaged_kept_result(tmp_path, damage):
    """A kept result damaged on disk stopped every later --resume with an
    UnpicklingError or EOFError; it is now removed with a warning and rerun."""
    jobs = runner.Jobs(1, resume=str(tmp_path / "kept"))
    runner.run_tasks(_square_and_count, [3, 4], jobs)
    (kept,) = [p for p in (tmp_path / "kept").iterdir() if p.read_bytes() == pickle.dumps(
        16, protocol=pickle.HIGHEST_PROTOCOL)]
    kept.write_bytes(damage)
    CALLS.clear()
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        assert runner.run_tasks(_square_and_count, [3, 4], jobs) == [9, 16]
    assert CALLS == [4]
    CALLS.clear()
    assert runner.run_tasks(_square_and_count, [3, 4], jobs) == [9, 16] and CALLS == []


def _worker_kernels(task):
    import torch

    return torch.backends.cpu.get_cpu_capability()


def test_regression_unpinned_workers_ran_a_pin_this_process_never_had(monkeypatch):
    """``bandsolve repro`` pins its environment for its own process; run in
    a process whose torch already ran AVX-512 (a test calling the command),
    that pin reached the workers of every later unpinned study, which then
    computed on AVX2 and differed from the same study run in-process by an
    ulp. Unpinned workers run what this process runs; pinned ones the pin;
    and a pinned run leaves this process's environment as it was."""
    torch = pytest.importorskip("torch")
    here = torch.backends.cpu.get_cpu_capability()
    if here not in ("AVX2", "AVX512"):
        pytest.skip(f"torch runs {here} kernels here")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # a pin this process's torch never had
    assert runner.run_tasks(_worker_kernels, [1, 2], runner.Jobs(2)) == [here, here]
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    monkeypatch.delenv("MKL_CBWR", raising=False)
    pinned = runner.run_tasks(_worker_kernels, [1, 2], runner.Jobs(2, pinned=True))
    assert pinned == ([here, here] if runner.numerics_pinned() else ["AVX2", "AVX2"])
    assert "ATEN_CPU_CAPABILITY" not in os.environ and "MKL_CBWR" not in os.environ
