"""Tables that cannot be forged or half-read (issue 19, items 8, 9 and 11):
a file's stated certificate must be the one its settings earn, its numbers
must lie in range, alpha tables reload, and a damaged file is a
TableIntegrityError that names it."""

import os

import numpy as np
import pytest

from bandsolve import table
from bandsolve.table import TableIntegrityError


@pytest.fixture(scope="module")
def kl_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "kl.npz"
    table.save(table.build("kl", 0.05), path)
    return path


def _forge(source, target, **edits):
    """Rewrite fields and recompute the checksum, as a forger would."""
    with np.load(source) as data:
        arrays = {k: data[k] for k in data.files}
    for field, change in edits.items():
        arrays[field] = change(arrays[field])
    arrays["checksum"] = np.array(table.checksum(arrays))
    np.savez(target, **arrays)
    return target


@pytest.mark.parametrize("edits", [
    dict(upper_coefficients=lambda c: c + 0.3, rtol=lambda _: np.array(1e6)),
    dict(upper_coefficients=lambda c: c + 0.3, atol=lambda _: np.array(1.0)),
    # inside the range a table may have, yet looser than kl at 0.05 earns
    dict(upper_coefficients=lambda c: c + 1e-7, atol=lambda _: np.array(1e-6)),
], ids=["rtol-1e6", "atol-1", "atol-1e-6"])
def test_table_shifted_with_a_loosened_certificate_and_fresh_checksum_is_refused(
        kl_file, tmp_path, edits):
    forged = _forge(kl_file, tmp_path / "forged.npz", **edits)
    with pytest.raises(TableIntegrityError, match="forged.npz"):
        table.load(forged)


@pytest.mark.parametrize("field, value", [("atol", -1.0), ("rtol", np.nan), ("max_ratio", 0.5),
                                          ("delta", -0.05), ("lower_at_one", 2.0)])
def test_table_metadata_out_of_range_is_refused(kl_file, tmp_path, field, value):
    forged = _forge(kl_file, tmp_path / "forged.npz", **{field: lambda _: np.array(value)})
    with pytest.raises(TableIntegrityError, match=field):
        table.load(forged, verify=False)


def test_table_delta_stored_as_an_array_is_an_integrity_error(kl_file, tmp_path):
    forged = _forge(kl_file, tmp_path / "forged.npz", delta=lambda d: np.array([d]))
    with pytest.raises(TableIntegrityError, match="delta"):
        table.load(forged, verify=False)


def test_exported_alpha_table_with_a_parameter_g_would_round_reloads(tmp_path):
    # the name was stored with {a:g}: "alpha:2" for 2.0000001, refused by its own loader
    path = tmp_path / "a.npz"
    built = table.build("alpha:2.0000001", 0.3)
    assert built.divergence == "alpha:2.0000001"
    table.save(built, path)
    assert table.load(path).divergence == "alpha:2.0000001"


@pytest.mark.parametrize("damage", ["truncated", "byte-flipped", "random"])
def test_damaged_table_file_is_a_table_integrity_error_naming_the_file(kl_file, tmp_path, damage):
    raw = kl_file.read_bytes()
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    elif damage == "byte-flipped":
        flipped = bytearray(raw)
        for i in range(len(raw) // 3, len(raw) // 3 + 64):
            flipped[i] ^= 0xFF
        raw = bytes(flipped)
    else:
        raw = np.random.default_rng(0).bytes(4000)
    path = tmp_path / f"{damage}.npz"
    path.write_bytes(raw)
    with pytest.raises(TableIntegrityError, match=f"{damage}.npz"):
        table.load(path)


def test_missing_table_file_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        table.load(tmp_path / "absent.npz")
    assert not os.path.exists(tmp_path / "absent.npz")
