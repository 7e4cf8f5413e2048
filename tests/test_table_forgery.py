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


def test_user_generator_table_certificate_holds_out_to_p_1e_300():
    """Issue 19.10: between |logit p| = 690 and 690.78 (p or 1 - p from 1e-300
    to 1e-299.7) the certificate's check points saw nothing, and a user
    Hellinger table was 2.3x over its stored certificate there. The reference
    is the float64 root finder; fresh points may exceed a dense check's
    certificate slightly (a user generator's solves carry about 1e-10 of
    noise), so the allowance is that of ``check_against_solver``: twice the
    certificate plus 8 eps."""
    import math

    import bandsolve as bs
    from bandsolve.divergences import Divergence

    hellinger = Divergence.from_generator("user-hellinger", lambda u: (math.sqrt(u) - 1.0) ** 2)
    built = table.build(hellinger, 0.05)
    z = np.concatenate([np.linspace(690.0, 690.7755, 400), -np.linspace(690.0, 690.7755, 400)])
    logp = -np.logaddexp(0.0, -z)
    got = table.evaluate_numpy(built, logp)
    expected = bs.band_from_logp(logp, 0.05, hellinger)
    for g, r in zip(got, expected):
        allowed = 2 * np.maximum(built.rtol * np.minimum(r, np.abs(r - 1.0)),
                                 built.atol * np.maximum(r, 1.0)) \
            + 8 * np.finfo(float).eps * np.maximum(r, 1.0)
        assert np.all(np.abs(g - r) <= allowed), np.max(np.abs(g - r) / allowed)


def test_uncertifiable_user_table_is_refused_without_an_overflow_warning():
    """A user alpha = 1.5 generator's table misses its root finder by 1e60
    near p = 1e-205 at delta = 0.05, so build refuses it; the certificate's
    error / distance overflowed first and raised a RuntimeWarning (an error
    under this suite's filters) instead of the refusal."""
    from bandsolve.divergences import Divergence

    user = Divergence.from_generator("user_alpha_1_5",
                                     lambda u: (u**1.5 - 1 - 1.5 * (u - 1)) / 0.75)
    try:
        built = table.build(user, 0.05)
    except ValueError as exc:
        assert "cannot be certified" in str(exc)
    else:  # if it certifies, its certificate must be finite and honest
        assert np.isfinite(built.rtol)
        table.check_against_solver(built, user, seed=0)
