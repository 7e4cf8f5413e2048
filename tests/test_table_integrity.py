"""Tampered and corrupted table files are refused (issue 9, item 10), and a
table's accuracy is the one its certificate proves (item 5)."""

import math

import numpy as np
import pytest
import reference as ref

import bandsolve as bs
from bandsolve import table
from bandsolve.divergences import SAMPLE_NAMES


@pytest.fixture(scope="module")
def kl_table():
    return table.build("kl", 0.05, max_ratio=10)


EPS32 = float(np.finfo(np.float32).eps)


def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _arrays(path):
    with np.load(path) as data:
        return {k: data[k].copy() for k in data.files}


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_regression_tampered_coefficient_fails_the_checksum(kl_table, tmp_path, suffix):
    if suffix == ".pt":
        torch = pytest.importorskip("torch")
    path = table.save(kl_table, tmp_path / f"kl{suffix}")
    assert table.load(path).delta == 0.05
    if suffix == ".npz":
        arrays = _arrays(path)
        arrays["lower_coefficients"][123, 2] *= 1 + 1e-9
        np.savez(path, **arrays)
    else:
        raw = torch.load(path, weights_only=True)
        raw["lower_coefficients"][123, 2] *= 1 + 1e-9
        torch.save(raw, path)
    with pytest.raises(table.TableIntegrityError, match="modified or corrupted"):
        table.load(path)
    with pytest.raises(table.TableIntegrityError):  # verify=False skips the solver, not this
        table.load(path, verify=False)


def test_regression_tampered_file_with_a_recomputed_checksum_fails_verify(kl_table, tmp_path):
    """An attacker-consistent file: the coefficients changed and the checksum
    recomputed to match. Only the check against the solver can see it."""
    path = table.save(kl_table, tmp_path / "kl.npz")
    arrays = _arrays(path)
    arrays["upper_coefficients"][5000, 0] += 1e-6  # one interval of 37,888
    arrays["checksum"] = np.array(table.checksum(arrays))
    np.savez(path, **arrays)
    with pytest.raises(table.TableIntegrityError,
                       match=r"upper bound .*interval 5000 of the upper table.* from the solver"):
        table.load(path)
    assert table.load(path, verify=False).delta == 0.05  # the caller's explicit choice


def test_corrupted_threshold_is_caught(kl_table, tmp_path):
    tv = table.build("tv", 0.05)
    path = table.save(tv, tmp_path / "tv.npz")
    arrays = _arrays(path)
    arrays["upper_threshold"] = np.array(float(arrays["upper_threshold"]) + 0.5)
    np.savez(path, **arrays)
    with pytest.raises(table.TableIntegrityError, match="checksum"):
        table.load(path)
    arrays["checksum"] = np.array(table.checksum(arrays))
    np.savez(path, **arrays)
    with pytest.raises(table.TableIntegrityError, match="solver"):
        table.load(path)


def test_version_1_files_are_refused_with_the_fix(kl_table, tmp_path):
    path = table.save(kl_table, tmp_path / "kl.npz")
    arrays = _arrays(path)
    arrays["format_version"] = np.array(1)
    del arrays["checksum"]
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="version 1 .*bandsolve export"):
        table.load(path)


def test_user_divergence_table_needs_the_divergence_to_verify(tmp_path):
    mine = bs.Divergence.from_generator("mine", lambda u: (u - 1.0) ** 2)
    path = table.save(table.build(mine, 0.05), tmp_path / "mine.npz")
    with pytest.raises(ValueError, match="pass divergence="):
        table.load(path)
    assert table.load(path, divergence=mine).divergence == "mine"
    assert table.load(path, verify=False).divergence == "mine"


@pytest.mark.parametrize("verify", ["yes", "false", 1, None])
def test_regression_load_read_a_non_bool_verify_by_its_truth(kl_table, tmp_path, verify):
    """verify="false" is truthy and verified; verify=0 or None skipped the
    check a caller may have meant to keep. Only True or False is taken."""
    path = table.save(kl_table, tmp_path / "kl.npz")
    with pytest.raises(TypeError, match="verify must be True or False"):
        table.load(path, verify=verify)
    assert table.load(path, verify=np.bool_(False)).delta == 0.05


def test_torch_band_table_load_verifies(kl_table, tmp_path):
    pytest.importorskip("torch")
    import bandsolve.torch as bt

    path = table.save(kl_table, tmp_path / "kl.pt")
    assert bt.BandTable.load(path).delta == 0.05
    arrays = _arrays(table.save(kl_table, tmp_path / "kl.npz"))
    arrays["delta"] = np.array(0.06)  # claims another radius
    arrays["checksum"] = np.array(table.checksum(arrays))
    np.savez(tmp_path / "kl.npz", **arrays)
    with pytest.raises(table.TableIntegrityError):
        bt.BandTable.load(tmp_path / "kl.npz")


# --- item 5: one claim per path, the one the certificate proves ------------------------
def _within_certificate(data, got, truth):
    allowed = np.maximum(data.rtol * np.minimum(truth, np.abs(truth - 1.0)),
                         (data.atol + 8 * ref.EPS) * np.maximum(truth, 1.0))
    return np.abs(got - truth) <= allowed


def test_regression_kl_delta_1e_6_table_lower_bound_within_certificate():
    """The README claimed max(1e-10 min(r, |r-1|), 64 eps max(r, 1)) for float64
    tables; at kl, delta = 1e-6, log p = -16.2 the lower bound is 7.3e-14 off,
    inside the certificate's 1e-12 max(r, 1) but not that claim."""
    data = table.build("kl", 1e-6)
    lower, upper = table.evaluate_numpy(data, np.array([-16.2]))
    truth = float(ref.bound("kl", -16.2, 1e-6, "lower", from_logp=True)[0])
    assert _within_certificate(data, lower, np.array([truth])).all()
    assert data.rtol == 0.0  # the certificate needs only its absolute term here


@pytest.mark.parametrize("delta", [1e-6, 1e-4, 1e-2, 0.05, 1.0, 10.0])
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_float64_table_is_within_its_certificate_across_delta(name, delta):
    """numpy and torch float64 within the certificate; torch float32 within
    max(1e-5 min(r, |r-1|), 16 eps32 max(r, 1)) for log p >= -80."""
    data = table.build(name, delta)
    rng = np.random.default_rng(11)
    z = np.concatenate([rng.uniform(-690, 690, 20_000), rng.normal(0, 3, 20_000)])
    for side in (data.upper, data.lower):
        if math.isfinite(side.threshold):
            offset = 10.0 ** rng.uniform(-14, 1, 2_000)
            z = np.concatenate([z, side.threshold + rng.normal(0, 1e-3, 4_000),
                                side.threshold + offset, side.threshold - offset])
    logp = np.concatenate([-np.logaddexp(0.0, -z), [0.0, -np.inf]])
    core = bs.band_from_logp(logp, delta, name)
    results = {"numpy": table.evaluate_numpy(data, logp)}
    torch = _torch_or_none()
    if torch is not None:
        import bandsolve.torch as bt

        device_table = bt.BandTable(data)
        results["torch"] = [t.numpy() for t in device_table(torch.tensor(logp))]
    for where, got in results.items():
        for g, r in zip(got, core):
            finite = np.isfinite(r)
            assert np.array_equal(g[~finite], r[~finite]), (name, where)
            assert _within_certificate(data, g[finite], r[finite]).all(), (name, where)
    if torch is not None:
        x = torch.tensor(logp[logp >= -80.0], dtype=torch.float32)
        core32 = bs.band_from_logp(x.double().numpy(), delta, name)
        for g, r in zip(device_table(x), core32):
            g = g.double().numpy()
            r32 = r[np.isfinite(r) & (r < 3.4e38)]
            g32 = g[np.isfinite(r) & (r < 3.4e38)]
            allowed = np.maximum(1e-5 * np.minimum(r32, np.abs(r32 - 1.0)),
                                 16 * EPS32 * np.maximum(r32, 1.0))
            assert np.all(np.abs(g32 - r32) <= allowed), (name, "float32")
    # and at a few points against mpmath itself
    for x in logp[:: logp.size // 8]:
        for side, g in zip(("lower", "upper"), table.evaluate_numpy(data, np.array([x]))):
            truth = float(ref.bound(name, float(x), delta, side, from_logp=True)[0])
            assert _within_certificate(data, g, np.array([truth])).all(), (name, x, side)


@pytest.mark.parametrize("payload", ["tensor", "list"])
def test_foreign_pt_file_is_a_table_integrity_error_naming_the_file(tmp_path, payload):
    """A .pt holding a tensor or a list raised AttributeError ('Tensor' object
    has no attribute 'items')."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "foreign.pt"
    torch.save(torch.ones(3) if payload == "tensor" else [1, 2], path)
    with pytest.raises(table.TableIntegrityError, match="foreign.pt"):
        table.load(path)


def test_npz_without_the_table_fields_names_the_file(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, a=np.ones(2))
    with pytest.raises(table.TableIntegrityError, match="other.npz"):
        table.load(path)
