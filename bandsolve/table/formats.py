"""Table files: the flat layout of :func:`to_arrays` with its sha256
:func:`checksum`, written and read as ``.npz`` (numpy) or ``.pt`` (torch);
:func:`load` refuses a file whose checksum, stated certificate or sampled
bounds are not those of a table built here."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_write, check_writable_folder
from ..divergences import DivergenceLike
from .certify import check_against_solver, table_divergence
from .data import (
    DEGREE,
    INTERVALS_PER_SIGN,
    OCTAVE_MAX,
    OCTAVE_MIN,
    PER_OCTAVE,
    BandTableData,
    TableIntegrityError,
    TableSide,
    check_table,
)
from .fit import build

__all__ = ["to_arrays", "from_arrays", "checksum", "save", "load", "FORMAT",
           "FORMAT_VERSION"]

FORMAT = "bandsolve.table"
# 2: a sha256 checksum of every field (version 1 had none and is refused)
FORMAT_VERSION = 2

_SIDE_FIELDS = ("center", "threshold")
_GRID = {"octave_min": OCTAVE_MIN, "octave_max": OCTAVE_MAX, "per_octave": PER_OCTAVE}


def to_arrays(table: BandTableData) -> dict:
    """The table as a flat dict of numpy arrays and scalars (the file layout),
    with ``checksum``: the sha256 of every other field (see :func:`checksum`)."""
    check_table(table)
    out = {"format": np.array(FORMAT), "format_version": np.array(FORMAT_VERSION),
           "divergence": np.array(table.divergence), "delta": np.array(table.delta),
           "max_ratio": np.array(table.max_ratio), "rtol": np.array(table.rtol),
           "lower_at_one": np.array(table.lower_at_one),
           "atol": np.array(table.atol), **{k: np.array(v) for k, v in _GRID.items()}}
    for name in ("upper", "lower"):
        side = getattr(table, name)
        out[f"{name}_coefficients"] = side.coefficients
        for field in _SIDE_FIELDS:
            out[f"{name}_{field}"] = np.array(getattr(side, field))
    out["checksum"] = np.array(checksum(out))
    return out


def checksum(arrays) -> str:
    """sha256, in hex, of every field but ``checksum``: names in sorted order,
    each with its dtype, shape and little-endian bytes, so that the digest
    is the same for the .npz and the .pt layout and on any machine."""
    digest = hashlib.sha256()
    for name in sorted(k for k in arrays if k != "checksum"):
        value = np.asarray(arrays[name])
        if value.dtype.kind in "US":
            data = str(value).encode()
            kind = "str"
        else:
            canonical = value.astype(value.dtype.newbyteorder("<"), copy=False)
            data = np.ascontiguousarray(canonical).tobytes()
            kind = canonical.dtype.kind + str(canonical.dtype.itemsize)
        digest.update(f"{name}:{kind}:{value.shape}:".encode())
        digest.update(data)
    return digest.hexdigest()


def from_arrays(arrays: Mapping[str, np.ndarray], *, source: str = "the table") -> BandTableData:
    """Inverse of :func:`to_arrays`. ValueError for anything that is not a
    table of this format version; TableIntegrityError when the checksum
    does not match the fields (``source`` names the file in the message)."""
    try:
        if str(arrays["format"]) != FORMAT:
            raise ValueError(f"not a bandsolve table (format {str(arrays['format'])!r})")
        version = int(arrays["format_version"])
        if version != FORMAT_VERSION:
            raise ValueError(f"{source} has table format version {version}; this bandsolve "
                             f"reads version {FORMAT_VERSION} (version 1 files carry no "
                             "checksum: export the table again with bandsolve export)")
        if str(arrays["checksum"]) != checksum(arrays):
            raise TableIntegrityError(
                f"{source} was modified or corrupted: its checksum does not match its "
                "contents, so its bounds are not the ones that were certified. Export "
                "the table again with bandsolve export")
        for field, expected in _GRID.items():
            if int(arrays[field]) != expected:
                raise ValueError(f"table grid {field} = {int(arrays[field])}; this bandsolve "
                                 f"reads {expected}")
        sides: dict[str, Any] = {}  # BandTableData's upper and lower, by name
        for name in ("upper", "lower"):
            coefficients = np.ascontiguousarray(arrays[f"{name}_coefficients"], dtype=np.float64)
            if coefficients.ndim != 2 or coefficients.shape[1] != DEGREE + 1 or \
                    coefficients.shape[0] not in (INTERVALS_PER_SIGN, 2 * INTERVALS_PER_SIGN):
                raise ValueError(f"{name} coefficients have shape {coefficients.shape}")
            sides[name] = TableSide(coefficients=coefficients,
                                    **{f: float(arrays[f"{name}_{f}"]) for f in _SIDE_FIELDS})
        scalars: dict[str, Any] = {}
        for field in ("delta", "max_ratio", "lower_at_one", "rtol", "atol"):
            value = np.asarray(arrays[field])
            if value.shape != () or value.dtype.kind != "f":
                raise TableIntegrityError(f"{source}: field {field!r} is not a float scalar "
                                          f"(shape {value.shape}, dtype {value.dtype})")
            scalars[field] = float(value)
        _check_metadata(scalars, source)
        return BandTableData(divergence=str(arrays["divergence"]), **scalars, **sides)
    except KeyError as exc:
        raise ValueError(f"not a bandsolve table: no field {exc}") from None


#: the range a stored certificate tolerance can have at all; whether it is
#: the honest one is checked by rebuilding it (load with verify=True)
MAX_STORED_TOLERANCE = 1.0


def _check_metadata(scalars: dict, source: str) -> None:
    """Every stored number inside the range a table built here can have."""
    delta, cap = scalars["delta"], scalars["max_ratio"]
    # a subnormal delta is allowed, as build and docs/torch.md allow it
    if not (np.isfinite(delta) and delta > 0.0):
        raise TableIntegrityError(f"{source}: delta {delta!r} is not a positive, finite radius")
    if not cap >= 1.0:
        raise TableIntegrityError(f"{source}: max_ratio {cap!r} is below 1")
    for field in ("rtol", "atol"):
        value = scalars[field]
        if not 0.0 <= value <= MAX_STORED_TOLERANCE:
            raise TableIntegrityError(f"{source}: its certificate {field} = {value!r} lies "
                                      f"outside [0, {MAX_STORED_TOLERANCE:g}]: no table built "
                                      "by bandsolve carries it")
    if not 0.0 <= scalars["lower_at_one"] <= 1.0:
        raise TableIntegrityError(f"{source}: lower_at_one {scalars['lower_at_one']!r} lies "
                                  "outside [0, 1]")


def _table_path(path, name: str = "path") -> Path:
    """``path`` as a Path, or a TypeError naming the argument: pathlib's own
    ('expected str, bytes or os.PathLike object, not NoneType') names neither
    the argument nor the function."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{name} must be a file path (a str or os.PathLike) naming a .npz or "
                        f".pt table (got {type(path).__name__} {path!r:.60})")
    return Path(path)


def check_destination(path: str | os.PathLike) -> Path:
    """The table file ``path`` as :func:`save` will write it, or the error it
    would end in, raised before a table is built: a folder in the way, an
    unknown suffix, ``.pt`` without torch, or a folder that is missing or
    cannot be written to (tried by writing a file there)."""
    path = _table_path(path)
    if path.is_dir():
        raise IsADirectoryError(f"cannot write the table {str(path)!r}: it is a folder")
    if path.suffix not in (".npz", ".pt"):
        raise ValueError(f"cannot write the table {str(path)!r}: unknown table format "
                         f"{path.suffix!r}: use .npz or .pt")
    if path.suffix == ".pt" and importlib.util.find_spec("torch") is None:
        raise ImportError(f"writing {str(path)!r} as .pt needs torch: pip install "
                          "\"bandsolve[torch]\", or write the table as .npz (numpy only)")
    check_writable_folder(path.parent, f"the table {str(path)!r}")
    return path


#: Both formats are zip files. Their last bytes, the zip comment, hold
#: ``bandsolve-sha256:`` and the hex sha256 of every byte before the comment's
#: length: a change to any byte of the file (a zip timestamp, padding that no
#: reader looks at) is seen, where the checksum of the fields sees only
#: what the readers parse. Zip readers (numpy, torch, unzip) ignore the comment.
_SEAL = b"bandsolve-sha256:"
_SEAL_BYTES = len(_SEAL) + 64


def _seal(archive: bytes) -> bytes:
    """``archive`` (a zip file with no comment) with the sha256 comment."""
    if archive[-2:] != b"\0\0":  # pragma: no cover - numpy and torch write no comment
        raise RuntimeError("the table's zip archive already has a comment")
    body = archive[:-2]
    comment = _SEAL + hashlib.sha256(body).hexdigest().encode()
    return body + len(comment).to_bytes(2, "little") + comment


def _check_seal(raw: bytes, source: str) -> None:
    """Raise TableIntegrityError unless the file's sha256 comment matches its
    bytes. A file with no comment at all (written before the seal) is left to
    the field checksum."""
    if raw[-2:] == b"\0\0":
        return
    end = len(raw) - _SEAL_BYTES
    if end >= 2 and raw[end - 2:end] == _SEAL_BYTES.to_bytes(2, "little") \
            and raw[end:end + len(_SEAL)] == _SEAL \
            and raw[end + len(_SEAL):] == hashlib.sha256(raw[:end - 2]).hexdigest().encode():
        return
    raise TableIntegrityError(f"{source} was modified or corrupted: its sha256 does not match "
                              "its bytes (it is damaged, truncated or not a bandsolve table). "
                              "Export the table again with bandsolve export")


def save(table: BandTableData, path: str | os.PathLike) -> Path:
    """Write ``table`` as ``.npz`` (numpy) or ``.pt`` (torch, needs torch).

    The file is replaced atomically: a process killed while saving leaves the
    old file whole, or the new one."""
    path = check_destination(path)
    arrays = to_arrays(table)  # which checks that table is a BandTableData
    archive = io.BytesIO()
    if path.suffix == ".npz":
        np.savez(archive, **arrays)
    else:
        import torch

        torch.save({k: (torch.from_numpy(v) if v.dtype.kind == "f" and v.ndim else v.item())
                    for k, v in arrays.items()}, archive)
    with atomic_write(path, "wb") as fh:
        fh.write(_seal(archive.getvalue()))
    return path


def load(path: str | os.PathLike, *, verify: bool = True,
         divergence: DivergenceLike | None = None) -> BandTableData:
    """Read a table written by :func:`save` (``.npz`` or ``.pt``).

    The stored checksum is always checked. With ``verify=True`` (the
    default) a sample of the table is also re-checked against the solver
    (:func:`check_against_solver`, a few hundred milliseconds), which catches
    a file rewritten with a matching checksum. ``divergence`` is needed for
    that when the table holds a user-defined divergence.

    Raises
    ------
    TableIntegrityError
        The checksum does not match, or the sample disagrees with the solver.
    ValueError
        Not a table, another format version, or an unknown suffix.
    """
    if not isinstance(verify, bool | np.bool_):
        # "no" and "false" are truthy: they would have verified silently
        raise TypeError(f"verify must be True or False (got {verify!r})")
    path = _table_path(path)
    source = f"table file {str(path)!r}"
    if path.suffix not in (".npz", ".pt"):
        raise ValueError(f"unknown table format {path.suffix!r}: use .npz or .pt")
    if path.suffix == ".pt":
        try:
            import torch
        except ImportError:
            raise ImportError(f"reading {str(path)!r} needs torch: pip install "
                              "\"bandsolve[torch]\", or export the table as .npz") from None
    # a missing file, a folder or no permission is the OSError of open(), with
    # the path; everything after is the file's content
    with open(path, "rb") as file:
        raw = file.read()
    _check_seal(raw, source)
    with io.BytesIO(raw) as fh:
        try:
            if path.suffix == ".npz":
                # our own handle: np.load(path) leaks its file when the zip is damaged
                with np.load(fh, allow_pickle=False) as data:
                    arrays = {k: np.asarray(data[k]) for k in data.files}
            else:
                raw = torch.load(fh, map_location="cpu", weights_only=True)
                if not isinstance(raw, dict):
                    raise TableIntegrityError(
                        f"{source} is not a bandsolve table: it holds a {type(raw).__name__}, "
                        "not the dict of arrays that save() writes")
                arrays = {k: (v.numpy() if hasattr(v, "numpy") else np.array(v))
                          for k, v in raw.items()}
        except TableIntegrityError:
            raise
        except Exception as exc:
            # truncated, byte-flipped or foreign files: the zip reader and the
            # unpickler raise whatever the damage trips (BadZipFile, EOFError,
            # UnpicklingError, even IndexError from torch's unpickler); none of
            # them is a table
            raise TableIntegrityError(f"{source} cannot be read as a table: it is damaged or "
                                      f"not a bandsolve table ({type(exc).__name__}: {exc})"
                                      ) from exc
    try:
        table = from_arrays(arrays, source=source)
    except TableIntegrityError:
        raise
    except Exception as exc:  # missing fields, another format, odd shapes: name the file
        raise TableIntegrityError(f"{source}: {exc}") from None
    if verify:
        _check_certificate(table, divergence, source)
        check_against_solver(table, divergence, source=source)
    return table


def _check_certificate(table: BandTableData, divergence: DivergenceLike | None,
                       source: str) -> None:
    """The certificate a file states must be the one its settings earn: the
    loader rebuilds the table for the same divergence, delta and max_ratio
    (about 0.3 s) and compares. A file cannot loosen its own tolerance, so
    the solver check that follows holds it to the honest one."""
    div = table_divergence(table, divergence, source)
    honest = build(div, table.delta, max_ratio=None if table.max_ratio == math.inf
                   else table.max_ratio)
    for field in ("rtol", "atol"):
        stated, earned = getattr(table, field), getattr(honest, field)
        if stated > earned:
            raise TableIntegrityError(
                f"{source} states a certificate {field} = {stated!r}, but a table of "
                f"{table.divergence} at delta = {table.delta!r} is certified to {earned!r}: "
                "the file was rewritten. Export it again")
