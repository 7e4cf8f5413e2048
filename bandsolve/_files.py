"""Every file bandsolve writes goes through here: whole or not at all.

:func:`atomic_write` writes into a temporary file beside the target, flushes
and syncs it, and only then renames it over the target (``os.replace``, atomic
on POSIX and Windows within one folder). A process killed at any moment leaves
either the old file, whole, or the new one, whole; never an empty or a torn
file. The rename keeps the permissions a plain ``open(path, "w")`` would have
given (the old file's, or the umask's), not the temporary file's private ones.
A temporary file is named after its writer (host and process id); the next
write of the same file removes those whose writer was killed.

:func:`output_folder` makes a folder the user named for output, or says in
plain words why it cannot (a file is in the way, no permission), before any
long work starts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import uuid
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["atomic_write", "check_writable_folder", "output_folder"]


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _cannot_write(exc: OSError, what: str, folder: str) -> OSError:
    """``exc`` again, its message naming ``what`` the user asked for, not a
    temporary file (a read-only file system, a full disk, /proc)."""
    if isinstance(exc, FileNotFoundError) and not os.path.isdir(folder):
        return FileNotFoundError(f"{what}: the folder {folder!r} does not exist")
    if isinstance(exc, NotADirectoryError):
        return NotADirectoryError(f"{what}: a part of {folder!r} is a file, not a folder")
    named = type(exc)(f"{what}: the folder {folder!r} takes no new file "
                      f"({exc.strerror or exc})")
    named.errno = exc.errno
    return named


def _writer_tag() -> str:
    """This writer, as its temporary files name it: host and process id, so
    that a later writer can tell a dead one's leftovers from a live one's."""
    host = "".join(c if c.isalnum() or c == "-" else "_" for c in socket.gethostname())
    return f"{host or 'host'}-{os.getpid()}"


def _create_temporary(target: str) -> tuple[int, str]:
    """A new, empty file beside ``target``, with the mode 0o666 less the
    umask that open(path, "w") would give it; the raw OSError otherwise."""
    temporary = os.path.join(
        os.path.dirname(target),
        f".{os.path.basename(target)}.{_writer_tag()}.{uuid.uuid4().hex[:12]}.part")
    return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temporary


def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, but another user's
        return False
    return False


def _remove_dead_writers_parts(target: str) -> None:
    """Delete the temporary files of ``target`` that a killed writer left:
    those of a process on this host that no longer runs. Another host's,
    or a live process's, are left alone (it may still be writing)."""
    folder, name = os.path.split(target)
    host = _writer_tag().rsplit("-", 1)[0]
    prefix = f".{name}.{host}-"
    try:
        entries = [e for e in os.listdir(folder) if e.startswith(prefix) and e.endswith(".part")]
    except OSError:
        return
    for entry in entries:
        pid = entry[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and _process_is_gone(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


def check_writable_folder(folder: str | os.PathLike, what: str) -> None:
    """Raise the ``OSError`` that writing a file into ``folder`` would end in,
    naming ``what``: found by creating and removing a file there, which (unlike
    ``os.access``) also sees a read-only file system, and root on /proc."""
    folder = os.path.abspath(folder)
    try:
        fd, temporary = _create_temporary(os.path.join(folder, "probe"))
    except OSError as exc:
        raise _cannot_write(exc, f"cannot write {what}", folder) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(temporary)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """``open(path, mode)`` for writing, replacing ``path`` only once the
    ``with`` block has finished without an exception.

    ``mode`` is ``"w"`` or ``"wb"`` (plus ``open``'s keyword arguments, such
    as ``newline``). A symbolic link is written through, as ``open`` would:
    the file it points to is replaced, and the link stays. The new file keeps
    the old one's permissions and, where the process may set them, its owner.
    Raises ``IsADirectoryError`` where ``path`` is a folder, and the
    ``OSError`` of the folder (missing, read-only, full) otherwise; each names
    the path, never the temporary file.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes with mode 'w' or 'wb', not {mode!r}")
    target = os.path.realpath(os.fspath(path))  # through symbolic links
    what = f"cannot write {os.fspath(path)!r}"
    if os.path.isdir(target):
        raise IsADirectoryError(f"{what}: it is a folder")
    try:
        fd, temporary = _create_temporary(target)
    except OSError as exc:
        raise _cannot_write(exc, what, os.path.dirname(target)) from None
    try:
        try:
            with os.fdopen(fd, mode, **open_kwargs) as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileNotFoundError):
                old = os.stat(target)
                os.chmod(temporary, stat.S_IMODE(old.st_mode))
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.chown(temporary, old.st_uid, old.st_gid)
            os.replace(temporary, target)
        except OSError as exc:  # a full disk, a folder that went away
            raise _cannot_write(exc, what, os.path.dirname(target)) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(os.path.dirname(target))
    _remove_dead_writers_parts(target)


def refuse_file_in_the_way(path: str | os.PathLike, option: str = "--out") -> None:
    """NotADirectoryError where ``path``, an output folder, is a file: checked
    for every folder of a command before any is made, so that a refusal
    leaves nothing behind."""
    folder = os.fspath(path)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(f"{option} {folder!r} is a file, not a folder: name a folder "
                                 "(it is made if missing)")


def output_folder(path: str | os.PathLike, option: str = "--out") -> str:
    """Make the folder ``path`` (and its parents) for output, and check that a
    file can be written there; ``option`` names it in the error."""
    folder = os.fspath(path)
    refuse_file_in_the_way(folder, option)
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent is a file
        raise NotADirectoryError(f"{option} {folder!r}: a part of that path is a file, not a "
                                 "folder") from None
    except OSError as exc:
        raise _cannot_write(exc, f"cannot make {option} {folder!r}", folder) from None
    check_writable_folder(folder, f"into {option} {folder!r}")
    return folder
