"""Files bandsolve writes: whole or not at all, and clear errors at every bad
destination (issue 34, items 1, 3 and 4).

The kill test: a writer process rewrites an existing file over and over,
alternating two contents, and is killed with SIGKILL at a random moment; the
file must then load as exactly one of the two. The writers are forked from
one clean, single-threaded helper process (not from pytest), which imported
everything once, so a hundred kills take seconds.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bandsolve import table
from bandsolve._files import atomic_write, output_folder

TRIES = 100

_HELPER = textwrap.dedent("""
    import os, random, signal, sys, time
    import numpy as np
    from bandsolve import table
    from bandsolve.studies.plotting import save_figure
    from bandsolve.studies.tables import history_rows, write_csv
    import matplotlib.pyplot as plt

    kind, folder, tries = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def figure(k):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(np.arange(50) ** (1 + k))
        return fig

    if kind in ("npz", "pt"):
        tables = [table.build("kl", 0.05), table.build("kl", 0.1)]
        path = os.path.join(folder, "t." + kind)
        write = lambda k: table.save(tables[k], path)
        def read():
            loaded = table.load(path, verify=False)  # the checksum is still checked
            for k, t in enumerate(tables):
                if loaded.delta == t.delta and np.array_equal(
                        loaded.upper.coefficients, t.upper.coefficients):
                    return k
            return "neither"
    elif kind == "csv":
        results = [{"ppo": {"reward": np.full((300, 8), float(k))}} for k in (0, 1)]
        path = os.path.join(folder, "study.csv")
        write = lambda k: write_csv(path, ["rule", "seed", "step", "reward"],
                                    history_rows(("ppo",), results[k]["ppo"], ["reward"]))
        contents = []
    elif kind == "figure":
        path = os.path.join(folder, "fig.png")
        write = lambda k: save_figure(figure(k), folder, "fig")
        contents = []
    if kind in ("csv", "figure"):
        for k in (0, 1):
            write(k)
            with open(path, "rb") as fh:
                contents.append(fh.read())
        assert contents[0] != contents[1]
        def read():
            with open(path, "rb") as fh:
                data = fh.read()
            return contents.index(data) if data in contents else "neither"

    write(0)
    start = time.perf_counter()
    write(1)
    write(0)
    seconds = (time.perf_counter() - start) / 2
    rng = random.Random(0)
    seen = []
    for _ in range(tries):
        pid = os.fork()
        if pid == 0:  # the writer: old, new, old, ... until killed
            k = 1
            while True:
                write(k)
                k = 1 - k
        time.sleep(rng.uniform(0.0, 3.0 * seconds))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        try:
            seen.append(read())
        except Exception as exc:
            seen.append(f"{type(exc).__name__}: {exc}")
    print("SEEN", seen.count(0), seen.count(1),
          [s for s in seen if s not in (0, 1)][:3])
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the writers are forked")
@pytest.mark.parametrize("kind", ["npz", "pt", "csv", "figure"])
def test_a_writer_killed_at_any_moment_leaves_the_old_file_or_the_new_one(kind, tmp_path):
    """table.save opened the target with "wb": a kill during `bandsolve
    export` left the user's table empty or torn (3 of 3 tries)."""
    if kind == "pt":
        pytest.importorskip("torch")
    result = subprocess.run([sys.executable, "-c", _HELPER, kind, str(tmp_path), str(TRIES)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = result.stdout.split("SEEN", 1)[1].split()
    old, new = int(counts[0]), int(counts[1])
    assert old + new == TRIES, result.stdout
    # the kills landed at different moments: both contents were seen
    assert old > 0 and new > 0, result.stdout


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    os.chmod(path, 0o640)
    with pytest.raises(RuntimeError), atomic_write(path) as fh:
        fh.write("half of the new")
        raise RuntimeError("stopped")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.md"], "a temporary file was left behind"
    with atomic_write(path) as fh:
        fh.write("new")
    assert path.read_text() == "new"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640), "the file lost its permissions"


def test_atomic_write_makes_a_new_file_with_the_umask_permissions(tmp_path):
    mask = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "new.csv") as fh:
            fh.write("a,b\n")
    finally:
        os.umask(mask)
    assert os.stat(tmp_path / "new.csv").st_mode & 0o777 == 0o640


def test_atomic_write_names_the_path_of_a_bad_destination(tmp_path):
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        with atomic_write(tmp_path):
            pass
    missing = tmp_path / "no" / "such" / "file.md"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        with atomic_write(missing):
            pass


def test_output_folder_names_a_file_in_the_way(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(NotADirectoryError, match="--out .*taken.* is a file, not a folder"):
        output_folder(tmp_path / "taken")
    with pytest.raises(NotADirectoryError, match="a part of that path is a file"):
        output_folder(tmp_path / "taken" / "below")
    assert output_folder(tmp_path / "a" / "b") == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()


# --- table files: any damage is a TableIntegrityError --------------------------------


@pytest.fixture(scope="module")
def small_table():
    return table.build("kl", 0.05)


def _same(a, b) -> bool:
    return table.checksum(table.to_arrays(a)) == table.checksum(table.to_arrays(b))


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_any_damaged_byte_of_a_table_file_is_a_table_integrity_error(small_table, tmp_path,
                                                                     suffix):
    """A bit flip in the first bytes of a .pt file raised a raw IndexError from
    torch's unpickler (2 of 32 flips in bytes 0-3), and half the flips in its
    zip headers loaded unnoticed (bytes no reader looks at). Every bit of the
    first and last 96 bytes (zip headers, directory and the sha256 comment)
    and of 300 bytes spread over the file, and truncations: each refused."""
    if suffix == ".pt":
        pytest.importorskip("torch")
    path = table.save(small_table, tmp_path / f"t{suffix}")
    original = path.read_bytes()
    assert _same(table.load(path, verify=False), small_table)
    n = len(original)
    rng = np.random.default_rng(0)
    flips = [(i, bit) for i in [*range(96), *range(n - 96, n)] for bit in range(8)]
    flips += [(int(i), int(rng.integers(8))) for i in rng.integers(0, n, 300)]
    for i, bit in flips:
        damaged = bytearray(original)
        damaged[i] ^= 1 << bit
        path.write_bytes(bytes(damaged))
        with pytest.raises(table.TableIntegrityError):
            table.load(path, verify=False)
    for cut in (0, 1, 10, n // 2, n - 1):
        path.write_bytes(original[:cut])
        with pytest.raises(table.TableIntegrityError):
            table.load(path, verify=False)


def test_a_table_file_from_before_the_sha256_comment_still_loads(small_table, tmp_path):
    """Files written before the whole-file seal (no zip comment) are held to
    the checksum of their fields, as they were when written."""
    import zipfile

    path = table.save(small_table, tmp_path / "t.npz")
    with zipfile.ZipFile(path, "a") as archive:
        assert archive.comment.startswith(b"bandsolve-sha256:")
        archive.comment = b""
    assert _same(table.load(path), small_table)


def test_a_table_path_that_cannot_be_read_says_which(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        table.load(tmp_path / "missing.npz")
    (tmp_path / "folder.pt").mkdir()
    with pytest.raises(IsADirectoryError):
        table.load(tmp_path / "folder.pt")


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_saving_a_table_onto_a_folder_names_the_path(small_table, tmp_path, suffix):
    """A .pt export onto a folder gave a raw RuntimeError from torch."""
    if suffix == ".pt":
        pytest.importorskip("torch")
    (tmp_path / f"x{suffix}").mkdir()
    with pytest.raises(IsADirectoryError, match=f"x{suffix}.*is a folder"):
        table.save(small_table, tmp_path / f"x{suffix}")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        table.save(small_table, tmp_path / "missing" / f"x{suffix}")


def test_saving_a_pt_table_without_torch_names_the_extra(small_table, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"bandsolve\[torch\].*\.npz"):
        table.save(small_table, tmp_path / "x.pt")
    assert not list(tmp_path.iterdir())


def test_atomic_write_writes_through_a_symbolic_link(tmp_path):
    """The outside tester's export over a link replaced the link by a file and
    left the table it pointed to as it was; open(path, "w") writes through."""
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    with atomic_write(link) as fh:
        fh.write("new")
    assert link.is_symlink() and real.read_text() == "new"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root may give a file away")
def test_atomic_write_keeps_the_owner_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "theirs.csv"
    path.write_text("old")
    os.chown(path, 65534, 65534)
    with atomic_write(path) as fh:
        fh.write("new")
    assert (os.stat(path).st_uid, os.stat(path).st_gid) == (65534, 65534)


def test_a_full_disk_names_the_file_not_the_temporary_one(tmp_path, monkeypatch):
    """ENOSPC printed "[Errno 28] No space left on device" with no path, and a
    read-only file system named the hidden .part file."""
    import errno

    path = tmp_path / "report.md"
    path.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="report.md.*No space left") as caught:
        with atomic_write(path) as fh:
            fh.write("new")
    assert ".part" not in str(caught.value) and caught.value.errno == errno.ENOSPC
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["report.md"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a folder that takes no new file")
def test_a_table_destination_that_takes_no_file_is_found_before_the_build():
    """/proc exists, so "the folder '/proc' does not exist" was wrong, and a
    read-only place was found only after the table was built (os.access says
    yes to root): the check now writes a file there."""
    with pytest.raises(OSError, match="/proc/x.npz.*takes no new file"):
        table.check_destination("/proc/x.npz")


def test_a_table_destination_below_a_file_or_at_a_folder_says_so(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(NotADirectoryError, match="afile.* is a file, not a folder"):
        table.check_destination(tmp_path / "afile" / "x.npz")
    with pytest.raises(IsADirectoryError, match="it is a folder"):  # no suffix: not "format ''"
        table.check_destination(tmp_path)


def test_the_parts_a_killed_writer_left_are_removed_by_the_next_write(tmp_path):
    """A writer killed mid-write left its hidden .part file for good."""
    from bandsolve._files import _writer_tag, atomic_write

    host = _writer_tag().rsplit("-", 1)[0]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        parts = {
            "dead": tmp_path / f".out.csv.{host}-{dead.pid}.0123456789ab.part",
            "live": tmp_path / f".out.csv.{host}-{live.pid}.0123456789ab.part",
            "other host": tmp_path / f".out.csv.elsewhere-{dead.pid}.0123456789ab.part",
            "other file": tmp_path / f".other.csv.{host}-{dead.pid}.0123456789ab.part",
        }
        for part in parts.values():
            part.write_text("half a fi")
        with atomic_write(tmp_path / "out.csv") as fh:
            fh.write("whole\n")
        assert (tmp_path / "out.csv").read_text() == "whole\n"
        left = {name for name, part in parts.items() if part.exists()}
        assert left == {"live", "other host", "other file"}
        # and the write left no part of its own
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.csv")) \
            == sorted(parts[n].name for n in ("live", "other host"))
    finally:
        live.kill()
        live.wait()
