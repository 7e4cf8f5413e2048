"""Every file bandsolve writes goes through here: whole or not at all.

:func:`atomic_write` writes into a temporary file beside the target, flushes
and syncs it, and only then renames it over the target (``os.replace``, atomic
on POSIX and Windows within one folder). A process killed at any moment leaves
either the old file, whole, or the new one, whole; never an empty or a torn
file. The rename keeps the permissions a plain ``open(path, "w")`` would have
given (the old file's, or the umask's), not the temporary file's private ones.

:func:`output_folder` makes a folder the user named for output, or says in
plain words why it cannot (a file is in the way, no permission), before any
long work starts.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["atomic_write", "output_folder"]


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


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """``open(path, mode)`` for writing, replacing ``path`` only once the
    ``with`` block has finished without an exception.

    ``mode`` is ``"w"`` or ``"wb"`` (plus ``open``'s keyword arguments, such
    as ``newline``). Raises ``IsADirectoryError`` where ``path`` is a folder,
    and the ``OSError`` of the folder (missing, read-only) before anything is
    written; each names the path.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes with mode 'w' or 'wb', not {mode!r}")
    target = os.fspath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(f"cannot write {target!r}: it is a folder")
    folder = os.path.dirname(os.path.abspath(target))
    temporary = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex[:12]}.part")
    try:
        # mode 0o666 less the umask, as open(path, "w") would make it
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileNotFoundError:
        raise FileNotFoundError(f"cannot write {target!r}: the folder {folder!r} does not "
                                "exist") from None
    except PermissionError:
        raise PermissionError(f"cannot write {target!r}: no permission to create files in "
                              f"{folder!r}") from None
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):  # an old file keeps its permissions
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(folder)


def output_folder(path: str | os.PathLike, option: str = "--out") -> str:
    """Make the folder ``path`` (and its parents) for output, and check that it
    can be written to; ``option`` names it in the error."""
    folder = os.fspath(path)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(f"{option} {folder!r} is a file, not a folder: name a folder "
                                 "(it is made if missing)")
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent is a file
        raise NotADirectoryError(f"{option} {folder!r}: a part of that path is a file, not a "
                                 "folder") from None
    except PermissionError:
        raise PermissionError(f"{option} {folder!r}: no permission to make that folder") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{option} {folder!r}: no permission to write in that folder")
    return folder
