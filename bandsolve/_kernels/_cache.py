"""The on-disk cache of compiled kernels: numba's, made to heal itself.

numba keeps each compiled function as an index file (``.nbi``) and one data
file per signature (``.nbc``), and trusts both: one truncated, zeroed or
overwritten file makes the import of the module that compiles it fail, in
every process, until someone deletes the file by hand. Trainers share one
cache between many processes on a node, and a full disk or a bad copy is
enough. :class:`KernelCache` is numba's ``FunctionCache`` with three changes:

* every file carries a sha256 of its contents, and a data file the key it
  was saved under, so damage (a flipped bit included) and a data file that a
  race between processes left under another key are both seen on loading;
* an entry that cannot be loaded, for whatever reason, is discarded with one
  :class:`KernelCacheWarning` naming the file and the cache folder, and the
  kernel is compiled again (and saved again), with the right numbers;
* an entry that cannot be saved (a full disk) warns and runs from memory.

Where the cache lives: ``NUMBA_CACHE_DIR`` when it is set, else the user's
cache folder (numba's ``user_cache_dir``, such as ``~/.cache/numba``), never
inside the installed package. The files are named ``*.checked.nbi`` and
``*.checked.*.nbc``, so numba's own unchecked files (from older versions of
bandsolve) are never read.

This relies on numba's cache classes, which numba does not document as
public; :func:`kernel_cache` returns None where they differ from what this
module expects, and the kernel then caches as plain numba does.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import importlib
import io
import os
import pickle
import shutil
import sys
import types
import warnings
from typing import Any

import numba

__all__ = ["DISCARDED", "KernelCacheWarning", "kernel_cache"]

#: a version tag inside every index: another format or numba version is stale, not damaged
_FORMAT = ("bandsolve-checked-cache", 1, numba.__version__)
_DIGEST_BYTES = hashlib.sha256().digest_size


class KernelCacheWarning(RuntimeWarning):
    """A compiled-kernel cache entry could not be loaded or saved; bandsolve
    compiled the kernel again (or ran it from memory) and goes on."""


class _DamagedEntry(Exception):
    """A cache file whose contents are not what was written (not an OSError,
    which numba reads as "the file went away")."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _seal(payload: bytes) -> bytes:
    return hashlib.sha256(payload).digest() + payload


def _unseal(raw: bytes, path: str) -> bytes:
    digest, payload = raw[:_DIGEST_BYTES], raw[_DIGEST_BYTES:]
    if len(raw) < _DIGEST_BYTES or hashlib.sha256(payload).digest() != digest:
        raise _DamagedEntry(path, f"its checksum does not match its {len(raw)} bytes")
    return payload


# numba's classes (Any to mypy, which does not follow numba)
_UserProvided: Any
_UserWide: Any
_FunctionCache: Any
_IndexDataCacheFile: Any
_CompileResultCacheImpl: Any
try:  # the parts of numba this module builds on; absent or renamed: plain caching
    from numba.core import caching as _numba_caching

    _caching: Any = _numba_caching
    _UserProvided = getattr(_caching, "UserProvidedCacheLocator", None) \
        or _caching._UserProvidedCacheLocator
    _UserWide = getattr(_caching, "UserWideCacheLocator", None) \
        or _caching._UserWideCacheLocator
    _FunctionCache = _caching.FunctionCache
    _IndexDataCacheFile = _caching.IndexDataCacheFile
    _CompileResultCacheImpl = _caching.CompileResultCacheImpl
except (ImportError, AttributeError):  # pragma: no cover - another numba
    _caching = None


if _caching is not None:

    class _Impl(_CompileResultCacheImpl):
        # NUMBA_CACHE_DIR, else the user-wide folder: not numba's default
        # first choice, the __pycache__ beside the source, which for an
        # installed package is inside site-packages
        _locator_classes = [_UserProvided, _UserWide]

    class _CheckedFile(_IndexDataCacheFile):
        """numba's index and data files, sealed with a sha256."""

        def __init__(self, cache_path, filename_base, source_stamp):
            base = f"{filename_base}.checked"
            super().__init__(cache_path, base, source_stamp)
            self._version = _FORMAT
            self.data_glob = os.path.join(glob.escape(cache_path), glob.escape(base) + ".*.nbc")

        @property
        def index_path(self) -> str:
            return self._index_path

        def save(self, key, data):
            super().save(key, (key, data))

        def load(self, key):
            entry = super().load(key)
            if entry is None:
                return None
            stored_key, data = entry
            # two processes saving different signatures at once can leave the
            # index naming a data file the other one wrote: a miss, not a load
            return data if stored_key == key else None

        def _save_index(self, overloads):
            body = pickle.dumps(self._version, protocol=-1) \
                + self._dump((self._source_stamp, overloads))
            with self._open_for_write(self._index_path) as fh:
                fh.write(_seal(body))
            _caching._cache_log("[cache] index saved to %r", self._index_path)

        def _load_index(self):
            try:
                with open(self._index_path, "rb") as fh:
                    raw = fh.read()
            except FileNotFoundError:
                return {}
            except OSError as exc:  # a folder in its place, no permission to read
                raise _DamagedEntry(self._index_path, f"cannot be read: {exc.strerror}") from exc
            stream = io.BytesIO(_unseal(raw, self._index_path))
            try:
                if pickle.load(stream) != self._version:
                    return {}  # another format or numba: stale, rewritten on saving
                stamp, overloads = pickle.loads(stream.read())
            except Exception as exc:  # sealed but unreadable: written by something else
                raise _DamagedEntry(self._index_path, f"{type(exc).__name__}: {exc}") from exc
            _caching._cache_log("[cache] index loaded from %r", self._index_path)
            return overloads if stamp == self._source_stamp else {}

        def _save_data(self, name, data):
            with self._open_for_write(self._data_path(name)) as fh:
                fh.write(_seal(self._dump(data)))
            _caching._cache_log("[cache] data saved to %r", self._data_path(name))

        def _load_data(self, name):
            path = self._data_path(name)
            try:
                with open(path, "rb") as fh:
                    raw = fh.read()
            except FileNotFoundError:  # removed since the index was read: a miss
                raise
            except OSError as exc:  # numba would take any OSError for a miss, and keep it
                raise _DamagedEntry(path, f"cannot be read: {exc.strerror}") from exc
            payload = _unseal(raw, path)
            try:
                data = pickle.loads(payload)
            except Exception as exc:
                raise _DamagedEntry(path, f"{type(exc).__name__}: {exc}") from exc
            _caching._cache_log("[cache] data loaded from %r", path)
            return data

    class KernelCache(_FunctionCache):
        """numba's per-function cache, sealed, and healing where it cannot load."""

        _impl_class = _Impl

        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = _CheckedFile(self._cache_path, self._impl.filename_base,
                                            (self._impl.locator.get_source_stamp(),
                                             _sources_digest()))

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception as exc:  # any entry that cannot be loaded is compiled again
                self._discard(exc)
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except _DamagedEntry as exc:  # the index was damaged since it was read
                self._discard(exc)
                self._try_save(sig, data)
            except Exception as exc:
                self._not_saved(exc)

        def _try_save(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception as exc:
                self._not_saved(exc)

        def _discard(self, exc: Exception) -> None:
            files = self._cache_file
            where = exc.path if isinstance(exc, _DamagedEntry) else files.index_path
            reason = exc.reason if isinstance(exc, _DamagedEntry) else \
                f"{type(exc).__name__}: {exc}"
            for path in [files.index_path, *glob.glob(files.data_glob)]:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                with contextlib.suppress(OSError):
                    os.unlink(path)
            DISCARDED.append(where)
            warnings.warn(f"bandsolve: the compiled-kernel cache entry {where} could not be "
                          f"loaded ({reason}); discarded it and compiled the kernel again. "
                          f"Cache folder: {self._cache_path}", KernelCacheWarning,
                          stacklevel=_caller_outside())

        def _not_saved(self, exc: Exception) -> None:
            reason = getattr(exc, "strerror", None) or f"{type(exc).__name__}: {exc}"
            _warn_once(f"bandsolve: could not save compiled kernels in the cache folder "
                       f"{self._cache_path} ({reason}); they run from memory and compile "
                       "again in the next process")


#: the messages already given in this process: one per cause, not one per
#: kernel (numba compiles inside catch_warnings, which resets the registry
#: that would otherwise keep a repeated warning quiet)
_WARNED: set[str] = set()
#: the damaged entries discarded (and compiled again) in this process, for
#: ``bandsolve doctor``
DISCARDED: list[str] = []


@functools.cache
def _sources_digest() -> str:
    """A sha256 of the kernels' and the divergences' sources. numba stamps an
    entry with its own file only, but a kernel carries the code of what it
    inlines from other files: a checkout that changed ``_vecmath.py`` alone
    was served kernels compiled from the old one (an ulp apart, where the
    test of the interpreter compiled fresh)."""
    digest = hashlib.sha256()
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in ("_kernels", "divergences"):
        for path in sorted(glob.glob(os.path.join(glob.escape(package), folder, "*.py"))):
            with open(path, "rb") as fh:
                digest.update(os.path.basename(path).encode() + b"\0" + fh.read())
    return digest.hexdigest()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, KernelCacheWarning, stacklevel=_caller_outside())


#: the frames a warning passes over: this package and the machinery below it
#: (numba warns from deep inside its dispatcher; a kernel may compile as its
#: module is imported)
_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
             os.path.dirname(numba.__file__) + os.sep, os.path.dirname(importlib.__file__),
             contextlib.__file__, functools.__file__, "<frozen importlib")


def _caller_outside() -> int:
    """The ``stacklevel`` of the first frame outside bandsolve and numba, so
    that a warning names the user's line, not this module's."""
    frame: types.FrameType | None = sys._getframe(2)
    level = 2  # level 1 is the function that warns
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        # warnings.warn itself passes over importlib's bootstrap frames uncounted
        if not ("importlib" in frame.f_code.co_filename
                and "_bootstrap" in frame.f_code.co_filename):
            level += 1
        frame = frame.f_back
    return level


def kernel_cache(py_func):
    """The :class:`KernelCache` of ``py_func``, or None where numba's cache
    classes are not the ones this module builds on. Raises numba's
    ``RuntimeError("cannot cache ...")`` where no cache folder is writable."""
    if _caching is None:  # pragma: no cover - another numba
        return None
    cache = KernelCache(py_func)
    asked = numba.config.CACHE_DIR
    if asked and not isinstance(cache._impl.locator, _UserProvided):
        # numba moves on to the next folder without a word
        why = "it is not a folder" if os.path.exists(asked) and not os.path.isdir(asked) \
            else "a file cannot be written there"
        _warn_once(f"bandsolve: NUMBA_CACHE_DIR={asked} cannot be used ({why}); compiled "
                   f"kernels are cached in {os.path.dirname(cache.cache_path)} instead")
    return cache
