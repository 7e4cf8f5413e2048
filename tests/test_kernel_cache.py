"""The on-disk cache of compiled kernels heals (issue 34, item 2).

Each scenario runs in fresh processes on a cache folder of its own. The
numbers each process prints are checked against the mpmath reference, and
numba's own cache log (NUMBA_DEBUG_CACHE) says what was loaded and what was
compiled and saved, independently of bandsolve's code.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import reference as ref

import bandsolve

P = [1e-3, 0.08, 0.5, 0.9]
DELTA = 0.05

_CALL = textwrap.dedent(f"""
    import warnings
    warnings.simplefilter("always")
    import numpy as np
    import bandsolve as bs
    # more elements than the interpreter takes (_bind.INTERPRET_MAX): compiled
    lower, upper = bs.band(np.array({P!r} * 25), {DELTA!r}, "kl")
    n = {len(P)}
    print("RESULT", *map(repr, lower[:n].tolist() + upper[:n].tolist()))
""")


def _run(cache: os.PathLike | None, *, debug: bool = False, xdg: os.PathLike | None = None,
         start: bool = False):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "NUMBA_DEBUG_CACHE", "PYTHONWARNINGS")}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    if xdg is not None:
        env["XDG_CACHE_HOME"] = str(xdg)
    if debug:
        env["NUMBA_DEBUG_CACHE"] = "1"
    args = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    process = subprocess.Popen([sys.executable, "-c", _CALL], **args)
    return process if start else _finish(process)


def _finish(process):
    """(stdout, stderr with numba's cache log, which numba prints to stdout)."""
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    log = "\n".join(line for line in out.splitlines() if line.startswith("[cache]"))
    return out, err + "\n" + log


def _check_numbers(out: str) -> None:
    line = next(line for line in out.splitlines() if line.startswith("RESULT"))
    values = [float(v) for v in line.split()[1:]]
    lower, upper = values[:len(P)], values[len(P):]
    for p, lo, hi in zip(P, lower, upper):
        assert ref.error_ratio(lo, ref.bound("kl", p, DELTA, "lower")[0]) <= 1, (p, lo)
        assert ref.error_ratio(hi, ref.bound("kl", p, DELTA, "upper")[0]) <= 1, (p, hi)


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "KernelCacheWarning" in line]


def _saved(err: str) -> list[str]:
    return re.findall(r"\[cache\] (?:data|index) saved to '([^']+)'", err)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache filled by one process, and the data files a second one loaded."""
    cache = tmp_path_factory.mktemp("warm") / "numba"
    _run(cache)
    _, err = _run(cache, debug=True)
    assert not _saved(err), "a second process compiled again"
    loaded = re.findall(r"\[cache\] data loaded from '([^']+)'", err)
    assert loaded, err[-2000:]
    return cache, loaded


def _damage(path, mode):
    with open(path, "rb") as fh:
        data = bytearray(fh.read())
    if mode == "truncated":
        data = data[:10]
    elif mode == "zeroed":
        data = bytearray(len(data))
    elif mode == "flipped":  # one bit, past the header and the checksum
        data[len(data) // 2] ^= 0x10
    else:  # garbage
        data = bytearray(np.random.default_rng(0).integers(0, 256, len(data), dtype=np.uint8))
    with open(path, "wb") as fh:
        fh.write(bytes(data))


@pytest.mark.parametrize("kind", [".nbc", ".nbi"])
@pytest.mark.parametrize("mode", ["truncated", "zeroed", "flipped", "garbage"])
def test_a_damaged_cache_entry_warns_once_recompiles_and_heals(warm_cache, tmp_path, kind, mode):
    """Every kind of damage to one file, which numba alone turned into an
    UnpicklingError, EOFError or LLVM error at every import until the file
    was deleted by hand."""
    source, loaded = warm_cache
    cache = tmp_path / "numba"
    shutil.copytree(source, cache)
    data_file = loaded[len(loaded) // 2]
    victim = data_file if kind == ".nbc" else re.sub(r"\.\d+\.nbc$", ".nbi", data_file)
    victim = os.path.join(cache, os.path.relpath(victim, source))
    _damage(victim, mode)

    out, err = _run(cache)
    _check_numbers(out)
    warned = _warnings(err)
    assert len(warned) == 1, err[-3000:]
    assert victim in warned[0] and "Cache folder: " + os.path.dirname(victim) in warned[0]
    # it names the caller's line (here the -c script's), not bandsolve's or numba's
    assert warned[0].startswith("<string>:"), warned[0]

    # healed: the next process warns of nothing and compiles nothing
    out, err = _run(cache, debug=True)
    _check_numbers(out)
    assert not _warnings(err) and not _saved(err), err[-3000:]


def test_eight_processes_on_an_empty_cache_agree_and_leave_a_cache_that_loads(tmp_path):
    """Trainers start many workers at once on one node. Run with no
    NUMBA_CACHE_DIR, so it also shows where the cache goes by default: the
    user's cache folder (XDG_CACHE_HOME), not inside the installed package."""
    package = os.path.dirname(bandsolve.__file__)

    def in_package():
        return {os.path.join(d, f) for d, _, files in os.walk(package) for f in files
                if f.endswith((".nbi", ".nbc"))}

    before = in_package()
    processes = [_run(None, xdg=tmp_path, start=True) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:  # drain every pipe at once
        results = list(pool.map(_finish, processes))
    for out, err in results:
        _check_numbers(out)
        assert not _warnings(err), err[-3000:]
    assert list((tmp_path / "numba").rglob("*.nbi")), "nothing cached in the user cache folder"
    assert in_package() == before, "kernels were cached inside the package"

    out, err = _run(None, xdg=tmp_path, debug=True)
    _check_numbers(out)
    assert not _saved(err), f"the ninth process compiled again: {_saved(err)[:5]}"


def test_a_folder_in_place_of_a_cache_file_is_removed_and_the_kernel_cached_again(
        warm_cache, tmp_path):
    """numba took any OSError on reading a data file for a miss and then failed
    to save over the folder: every process warned and compiled from scratch."""
    source, loaded = warm_cache
    cache = tmp_path / "numba"
    shutil.copytree(source, cache)
    victim = os.path.join(cache, os.path.relpath(loaded[0], source))
    os.unlink(victim)
    os.mkdir(victim)
    out, err = _run(cache)
    _check_numbers(out)
    assert len(_warnings(err)) == 1 and victim in _warnings(err)[0], err[-3000:]
    out, err = _run(cache, debug=True)
    assert not _warnings(err) and not _saved(err), err[-3000:]


def test_an_unusable_numba_cache_dir_is_said_not_passed_over(tmp_path):
    """NUMBA_CACHE_DIR naming a file sent the kernels to ~/.cache without a word."""
    (tmp_path / "file").write_text("")
    out, err = _run(tmp_path / "file", xdg=tmp_path / "xdg")
    _check_numbers(out)
    warned = _warnings(err)
    assert len(warned) == 1 and "NUMBA_CACHE_DIR" in warned[0] and "not a folder" in warned[0]
    assert warned[0].startswith("<string>:"), warned[0]
    assert list((tmp_path / "xdg" / "numba").rglob("*.nbi"))


def test_regression_a_change_to_an_inlined_file_served_kernels_compiled_from_the_old_one(
        tmp_path):
    """numba stamps a cache entry with its own source file only, but a kernel
    carries what it inlines from other files: after a checkout that changed
    ``_vecmath.py`` alone, the root finder (``_solver.py``) and log1pmx
    (``_special.py``) still loaded, compiled from the old series. Now every
    entry is stamped with the kernels' and the divergences' sources too."""
    package = tmp_path / "src" / "bandsolve"
    shutil.copytree(os.path.dirname(bandsolve.__file__), package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "numba"

    def run():
        env = {k: v for k, v in os.environ.items()
               if k not in ("NUMBA_CACHE_DIR", "PYTHONWARNINGS")}
        env.update(NUMBA_CACHE_DIR=str(cache), NUMBA_DEBUG_CACHE="1",
                   PYTHONPATH=str(package.parent))
        done = subprocess.run([sys.executable, "-c", _CALL], env=env, capture_output=True,
                              text=True, timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        _check_numbers(done.stdout)
        return [path for path in re.findall(r"\[cache\] data saved to '([^']+)'", done.stdout)]

    assert run(), "the first process compiled nothing"
    assert not run(), "an unchanged package compiled again"
    with open(package / "_kernels" / "_vecmath.py", "a") as fh:
        fh.write("\n# a change to the series' file alone\n")
    saved = run()
    assert any("_special.log1pmx" in os.path.basename(path) for path in saved), saved
