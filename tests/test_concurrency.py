"""Threads, processes and a read-only numba cache (issue 9, item 9).

numba's GNU OpenMP layer kills a child forked after the parent ran a parallel
kernel, and its workqueue layer aborts on concurrent launches; either would
take the whole test process down, so every scenario runs in a subprocess
with a timeout, and the serial result is computed there too.
"""

import os
import subprocess
import sys
import textwrap

import pytest

_BATCH = textwrap.dedent("""
    import math
    import numpy as np
    import bandsolve as bs

    rng = np.random.default_rng(7)
    P = rng.uniform(1e-6, 1.0, 60_000)
    MINE = bs.Divergence.from_generator(
        "my_kl", lambda u: u - 1 - math.log(u) if u > 0 else math.inf)

    def job(seed):
        delta = 0.01 * (1 + seed % 3)
        return [bs.band(P, delta, name) for name in ("kl", "tv", "alpha:0.5")] + \\
               [bs.band_from_logp(np.log(P[:1000]), delta, MINE)]

    def same(a, b):
        return all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
                   for x, y in zip(a, b))
""")


def _run(body: str, timeout: float = 240.0, env=None) -> str:
    code = _BATCH + textwrap.dedent(body)
    if env is None:  # the package's own choice of threading layer, not the caller's
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_eight_threads_at_once_give_the_serial_result():
    out = _run("""
        import threading
        serial = [job(i) for i in range(8)]
        results = [None] * 8
        def work(i):
            for _ in range(3):
                results[i] = job(i)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(all(same(r, s) for r, s in zip(results, serial)))
    """)
    assert out.strip() == "True"


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_process_pool_gives_the_serial_result(method, tmp_path):
    """fork after the parent has run the parallel kernels is the case GNU
    OpenMP's layer turns into 'Terminating: fork() called from a process
    already using GNU OpenMP' and a pool that never returns."""
    # spawn and forkserver import the jobs by module name: give them a file
    (tmp_path / "batch.py").write_text(_BATCH)
    out = _run(f"""
        import multiprocessing as mp
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import batch
        if __name__ == "__main__":
            serial = [batch.job(i) for i in range(4)]  # the parent's threads are started
            with mp.get_context("{method}").Pool(2) as pool:
                results = pool.map(batch.job, range(4))
            print(all(batch.same(r, s) for r, s in zip(results, serial)))
    """)
    assert out.strip().splitlines()[-1] == "True"


def test_import_and_first_call_work_without_a_writable_numba_cache():
    """A read-only site-packages under a read-only home: numba finds no
    folder for its cache, and raised 'cannot cache function' at import.
    Simulated by making every cache locator fail, since root writes anywhere."""
    code = textwrap.dedent("""
        import numba.core.caching as caching

        def read_only(self):
            raise PermissionError("read-only file system")

        caching._CacheLocator.ensure_cache_path = read_only
        import bandsolve as bs
        lower, upper = bs.band([0.08, 0.5], 0.05)
        print(round(float(upper[0]), 5), round(float(lower[1]), 5))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # the README's worked example: 2.41055 at p = 0.08, 0.691516 at p = 0.5
    assert result.stdout.split() == ["2.41055", "0.69152"]


def test_the_threading_layer_is_fork_safe_unless_the_user_chose_one():
    out = _run("""
        import numba
        job(0)
        print(numba.threading_layer())
    """)
    assert out.strip() in ("tbb", "workqueue")
    env = dict(os.environ, NUMBA_THREADING_LAYER="omp")
    out = _run("""
        import numba
        job(0)
        print(numba.threading_layer())
    """, env=env)
    assert out.strip() == "omp"
