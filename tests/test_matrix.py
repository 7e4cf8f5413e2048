"""Every public path x every kind of divergence, against mpmath.

Paths: small batch and large batch (the warm start, one delta and
_solve.WARM_START_MIN_SIZE elements or more), from
p and from log p, the generic root finder in place of a closed form, torch
eager (float64 and float32), a torch BandTable, and a table exported to a
file and loaded back. Kinds: each built-in, the alpha family at values of a
spread over (-3, 4), and user generators with and without ``df``.

Each path is checked on the same sample of log p (the tails, p = 1, and both
sides of every saturation threshold) against the independent mpmath
reference, with the accuracy the README states for that path. The large
batch is checked in full against the same inputs solved in small batches.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import reference as ref

import bandsolve as bs
from bandsolve import _solve
from bandsolve import table as bt_table
from bandsolve._kernels._bind import kernels_for
from bandsolve.divergences import BUILTIN_NAMES

EPS32 = float(np.finfo(np.float32).eps)
DELTAS = (1e-6, 0.05, 2.0)


def _user_kl(with_df: bool):
    return bs.Divergence.from_generator(
        "user_kl" + ("_df" if with_df else ""),
        lambda u: u - 1 - math.log(u) if u > 0 else math.inf,
        df=(lambda u: 1.0 - 1.0 / u) if with_df else None)


def _user_hellinger():
    return bs.Divergence.from_generator("user_hellinger", lambda u: (math.sqrt(u) - 1.0) ** 2)


#: (id, the divergence, the reference's name for it, relative tolerance):
#: built-ins promise 1e-12; a user formula like u - 1 - log u cancels near
#: u = 1 and keeps about 1e-9 of the band's scale (README, "Accuracy")
KINDS = (
    *[(name, name, name, 1e-12) for name in
      BUILTIN_NAMES],
    *[(f"alpha:{a}", f"alpha:{a}", f"alpha:{a}", 1e-12)
      for a in (-2.7, -0.31, 0.137, 0.62, 0.93, 1.07, 1.9, 3.6)],
    ("user-kl", _user_kl(False), "kl", 1e-9),
    ("user-kl-with-df", _user_kl(True), "kl", 1e-9),
    ("user-hellinger", _user_hellinger(), "hellinger", 1e-9),
)
KIND_IDS = [k[0] for k in KINDS]


def _tolerance(truth: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    return np.maximum(rtol * np.minimum(truth, np.abs(truth - 1.0)),
                      atol * np.maximum(truth, 1.0))


@functools.cache
def _sample(kind_index: int, delta: float) -> np.ndarray:
    """log p: a fixed spread, plus both sides of each saturation threshold."""
    div = bs.get_divergence(KINDS[kind_index][1])
    logp = [0.0, -1e-14, -1e-6, -0.003, -0.1, -0.69, -2.3, -9.2, -30.0, -70.0, -300.0]
    for upper in (True, False):
        z = kernels_for(div).saturation_threshold(upper, delta)
        if math.isfinite(z) and abs(z) < 700:
            for dz in (-1e-6, 1e-6, -1e-2, 1e-2):
                logp.append(-math.log1p(math.exp(-(z + dz))))  # log sigmoid(z + dz)
    return np.array(sorted(set(logp)))


@functools.cache
def _truth(reference_name: str, logp: tuple, delta: float, from_logp: bool):
    out = []
    for side in ("lower", "upper"):
        if from_logp:
            values = [ref.bound(reference_name, x, delta, side, from_logp=True)[0]
                      for x in logp]
        else:
            values = [ref.bound(reference_name, math.exp(x), delta, side)[0] for x in logp]
        out.append(np.array([float(v) for v in values]))
    return tuple(out)


def _check(kind, delta, logp, got, *, from_logp=True, rtol=None, atol=4 * ref.EPS,
           where=""):
    _, _, reference_name, kind_rtol = kind
    truth = _truth(reference_name, tuple(float(x) for x in logp), delta, from_logp)
    for side, value, exact in zip(("lower", "upper"), got, truth):
        value = np.asarray(value, dtype=float)
        err = np.abs(value - exact)
        both_inf = np.isinf(value) & np.isinf(exact)
        tol = _tolerance(exact, kind_rtol if rtol is None else rtol, atol)
        bad = ~both_inf & ~(err <= tol)
        assert not bad.any(), (
            f"{kind[0]} {where} {side}, delta={delta}: log p={logp[bad][:3]}, "
            f"got {value[bad][:3]}, exact {exact[bad][:3]}, worst {np.max(err[bad] / tol[bad]):.3g}x")


# --- numpy --------------------------------------------------------------------------
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("k", range(len(KINDS)), ids=KIND_IDS)
def test_numpy_small_batch_from_p_and_from_logp(k, delta):
    kind = KINDS[k]
    logp = _sample(k, delta)
    _check(kind, delta, logp, bs.band_from_logp(logp, delta, kind[1]), where="from log p")
    p = np.exp(logp)
    _check(kind, delta, np.log(p), bs.band(p, delta, kind[1]), from_logp=False, where="from p")


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("k", range(len(KINDS)), ids=KIND_IDS)
def test_numpy_large_batch_takes_the_warm_start(k, delta):
    kind = KINDS[k]
    sample = _sample(k, delta)
    filler = -np.geomspace(1e-12, 700.0, 40_000)
    logp = np.concatenate([sample, filler])
    lower, upper = bs.band_from_logp(logp, delta, kind[1])
    _check(kind, delta, sample, (lower[:sample.size], upper[:sample.size]), where="large")
    # the rest against the same inputs solved cold, in batches below the warm start
    cold_chunks = -(-logp.size // (_solve.WARM_START_MIN_SIZE - 1))
    cold = [np.concatenate(parts) for parts in zip(*(
        bs.band_from_logp(chunk, delta, kind[1]) for chunk in np.array_split(logp, cold_chunks)))]
    for got, expected in zip((lower, upper), cold):
        finite = np.isfinite(expected)
        tol = 2 * _tolerance(expected[finite], kind[3], 4 * ref.EPS)
        assert np.all(np.abs(got[finite] - expected[finite]) <= tol), kind[0]
        np.testing.assert_array_equal(got[~finite], expected[~finite])
    p_lower, p_upper = bs.band(np.exp(logp), delta, kind[1])
    _check(kind, delta, np.log(np.exp(sample)), (p_lower[:sample.size], p_upper[:sample.size]),
           from_logp=False, where="large from p")


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("k", [i for i, kind in enumerate(KINDS)
                               if bs.get_divergence(kind[1]).has_closed_form],
                         ids=[kind[0] for kind in KINDS
                              if bs.get_divergence(kind[1]).has_closed_form])
def test_generic_root_finder_in_place_of_the_closed_form(k, delta):
    kind = KINDS[k]
    logp = _sample(k, delta)
    root = bs.get_divergence(kind[1]).without_closed_form()
    _check(kind, delta, logp, bs.band_from_logp(logp, delta, root), where="root finder")
    big = np.concatenate([logp, -np.geomspace(1e-9, 50.0, 40_000)])
    lower, upper = bs.band_from_logp(big, delta, root)
    _check(kind, delta, logp, (lower[:logp.size], upper[:logp.size]), where="root, large")


# --- torch -----------------------------------------------------------------------------
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("k", range(len(KINDS)), ids=KIND_IDS)
def test_torch_eager_float64_and_float32(k, delta):
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    kind = KINDS[k]
    logp = _sample(k, delta)
    lower, upper = bt.band_from_logp(torch.from_numpy(logp), delta, kind[1])
    assert lower.dtype == torch.float64
    _check(kind, delta, logp, (lower.numpy(), upper.numpy()), where="torch float64")
    # float32: the README's claim, for log p >= -80, at the float32 input itself
    logp32 = logp[logp >= -80].astype(np.float32)
    lower, upper = bt.band_from_logp(torch.from_numpy(logp32), delta, kind[1])
    assert lower.dtype == torch.float32
    _check(kind, delta, logp32.astype(np.float64), (lower.numpy(), upper.numpy()),
           rtol=max(1e-5, kind[3]), atol=16 * EPS32, where="torch float32")


def _table_claim(data):
    """What a table's certificate proves, plus float64 evaluation rounding."""
    return dict(rtol=max(data.rtol, 0.0), atol=bt_table.ATOL + 8 * ref.EPS)


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("k", range(len(KINDS)), ids=KIND_IDS)
def test_torch_table_and_an_exported_table(k, delta, tmp_path):
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    kind = KINDS[k]
    logp = _sample(k, delta)
    table = bt.BandTable.build(kind[1], delta)
    lower, upper = table(torch.from_numpy(logp))
    claim = _table_claim(table.data)
    _check(kind, delta, logp, (lower.numpy(), upper.numpy()), where="BandTable", **claim)
    path = bt_table.save(table.data, tmp_path / "band.npz")
    loaded = _load_table(path, kind[1])
    np.testing.assert_array_equal(loaded(torch.from_numpy(logp))[0].numpy(), lower.numpy())
    lower, upper = bt_table.evaluate_numpy(_load_data(path, kind[1]), logp)
    _check(kind, delta, logp, (lower, upper), where="exported table", **claim)


def _load_table(path, divergence):
    import bandsolve.torch as bt

    if isinstance(divergence, str):
        return bt.BandTable.load(path)
    return bt.BandTable.load(path, divergence=divergence)


def _load_data(path, divergence):
    if isinstance(divergence, str):
        return bt_table.load(path)
    return bt_table.load(path, divergence=divergence)
