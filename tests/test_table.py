"""Exported bound tables: the certificate holds away from its own check points,
files round-trip, and bad files are refused."""

import math

import numpy as np
import pytest
from problems import ALL_DIVERGENCES

import bandsolve as bs
from bandsolve import table
from bandsolve.cli import main


def _random_logp(seed, n=4000):
    """log p at random z = logit p, none of them the certification points."""
    rng = np.random.default_rng(seed)
    z = np.concatenate([rng.uniform(-40, 40, n), rng.normal(0, 3, n),
                        -np.exp(rng.uniform(0, np.log(690), n // 4)),
                        np.exp(rng.uniform(0, np.log(690), n // 4))])
    return -np.logaddexp(0.0, -z)


def _assert_certified(data, logp, lower, upper):
    ref_lower, ref_upper = bs.band_from_logp(logp, data.delta, data.divergence,
                                             max_ratio=data.max_ratio)
    for got, ref in ((lower, ref_lower), (upper, ref_upper)):
        finite = np.isfinite(ref)
        assert np.array_equal(got[~finite], ref[~finite])
        r, g = ref[finite], got[finite]
        # 2x the certificate: the check is dense, not a proof
        tol = np.maximum(2 * data.rtol * np.minimum(r, np.abs(r - 1)),
                         2 * data.atol * np.maximum(r, 1))
        assert np.all(np.abs(g - r) <= tol), float(np.max(np.abs(g - r) / tol))


@pytest.mark.parametrize("divergence", ALL_DIVERGENCES)
@pytest.mark.parametrize("delta", [1e-6, 0.05, 3.0])
def test_certificate_holds_at_random_points(divergence, delta):
    data = table.build(divergence, delta)
    assert data.rtol <= 1e-9, data.describe()  # what the README quotes
    logp = _random_logp(hash((divergence, delta)) % 2**32)
    _assert_certified(data, logp, *table.evaluate_numpy(data, logp))


def test_thresholds_are_the_numpy_cores():
    data = table.build("tv", 0.1)
    # tv's upper bound saturates where 1 - p <= delta, the lower where p <= delta
    assert math.isclose(1 / (1 + math.exp(-data.upper.threshold)), 0.9, rel_tol=1e-14)
    assert math.isclose(1 / (1 + math.exp(-data.lower.threshold)), 0.1, rel_tol=1e-14)
    assert data.upper.threshold == -data.lower.threshold
    kl = table.build("kl", 0.1)
    assert kl.upper.threshold == math.inf and kl.lower.threshold == -math.inf


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_files_round_trip(tmp_path, suffix):
    if suffix == ".pt":
        pytest.importorskip("torch")
    data = table.build("hellinger", 0.2, max_ratio=5.0)
    path = table.save(data, tmp_path / f"t{suffix}")
    back = table.load(path)
    assert (back.divergence, back.delta, back.max_ratio, back.rtol, back.atol,
            back.lower_at_one) == (data.divergence, data.delta, data.max_ratio, data.rtol,
                                   data.atol, data.lower_at_one)
    for side in ("upper", "lower"):
        a, b = getattr(data, side), getattr(back, side)
        assert (a.center, a.threshold) == (b.center, b.threshold)
        assert np.array_equal(a.coefficients, b.coefficients)
    logp = _random_logp(3, 500)
    _assert_certified(back, logp, *table.evaluate_numpy(back, logp))


def test_cli_export_writes_a_loadable_certified_table(tmp_path, capsys):
    out = tmp_path / "kl.npz"
    assert main(["export", "--divergence", "kl", "--delta", "0.05", "--max-ratio", "10",
                 "--out", str(out)]) == 0
    assert "certified" in capsys.readouterr().out
    data = table.load(out)
    assert (data.divergence, data.delta, data.max_ratio) == ("kl", 0.05, 10.0)


def test_cli_export_refuses_an_unknown_format(tmp_path, capsys):
    assert main(["export", "--out", str(tmp_path / "t.csv")]) == 2
    assert "use .npz or .pt" in capsys.readouterr().err


def test_bad_files_are_refused(tmp_path):
    data = table.build("kl", 0.05)
    arrays = table.to_arrays(data)
    for key, value, match in (("format", np.array("other"), "not a bandsolve table"),
                              ("format_version", np.array(99), "version"),
                              ("per_octave", np.array(7), "per_octave"),
                              ("upper_coefficients", np.zeros((3, 6)), "shape")):
        bad = dict(arrays, **{key: value})
        bad["checksum"] = np.array(table.checksum(bad))  # consistent, yet not a valid table
        with pytest.raises(ValueError, match=match):
            table.from_arrays(bad)
    missing = {k: v for k, v in arrays.items() if k != "delta"}
    missing["checksum"] = np.array(table.checksum(missing))
    with pytest.raises(ValueError, match="no field"):
        table.from_arrays(missing)
    with pytest.raises(ValueError, match="use .npz or .pt"):
        table.save(data, tmp_path / "t.txt")


@pytest.mark.parametrize("kwargs, error", [(dict(delta=0.0), ValueError),
                                           (dict(delta=[0.1, 0.2]), ValueError),
                                           (dict(divergence="nope"), ValueError),
                                           (dict(max_ratio=0.5), ValueError)])
def test_build_rejects_bad_arguments(kwargs, error):
    with pytest.raises(error):
        table.build(**{"divergence": "kl", "delta": 0.05, **kwargs})


def test_torch_table_round_trip_on_device(tmp_path):
    torch = pytest.importorskip("torch")
    from bandsolve.torch import BandTable

    original = BandTable.build("chi2", 0.05, max_ratio=10.0)
    path = original.save(tmp_path / "chi2.pt")
    loaded = BandTable.load(path)
    logp = torch.tensor(_random_logp(5, 1000))
    for a, b in zip(original(logp), loaded(logp)):
        assert torch.equal(a, b)
    _assert_certified(loaded.data, logp.numpy(), *(t.numpy() for t in loaded(logp)))


@pytest.mark.parametrize("divergence", ["kl", "tv", "chi2"])
def test_numpy_table_evaluation_is_the_device_code_to_rounding_in_float64(divergence):
    # torch/bounds.py evaluated a copy of the numpy evaluation that differed at
    # p = 0 and for NaN (the numpy one raised IndexError), so the certificate
    # did not check what the device ran. Now they differ only where torch's
    # exp / expm1 round differently from numpy's (the 8 eps of the claim)
    torch = pytest.importorskip("torch")
    from bandsolve.torch import BandTable

    data = table.build(divergence, 0.05, max_ratio=10.0)
    logp = np.concatenate([_random_logp(7, 1000), [0.0, -0.0, -np.inf, -1e300, -1e-300,
                                                   np.nan, 0.5]])
    expected = table.evaluate_numpy(data, logp, validate=False)
    got = BandTable(data)(torch.tensor(logp), validate=False)
    for g, e in zip(got, expected):
        g = g.numpy()
        exact = ~np.isfinite(e) | (e == 0.0) | (e == 1.0)
        np.testing.assert_array_equal(g[exact], e[exact])
        assert np.all(np.abs(g - e)[~exact] <= 8 * np.finfo(float).eps * np.maximum(e, 1.0)[~exact])


@pytest.mark.parametrize("call", ["save", "evaluate_numpy", "to_arrays"])
def test_table_functions_given_a_non_table_raise_type_error_not_attribute_error(call, tmp_path):
    """table.save(None, path) and table.evaluate_numpy(None, logp) raised
    AttributeError ('NoneType' object has no attribute 'divergence')."""
    calls = {"save": lambda: table.save(None, tmp_path / "t.npz"),
             "evaluate_numpy": lambda: table.evaluate_numpy({"lower": 1}, np.array([-0.1])),
             "to_arrays": lambda: table.to_arrays("kl")}
    with pytest.raises(TypeError, match="must be a BandTableData"):
        calls[call]()
    assert not (tmp_path / "t.npz").exists()


@pytest.mark.parametrize("logp", [np.nan, 0.5, np.inf])
def test_table_evaluate_numpy_refuses_invalid_logp_instead_of_nan(logp):
    """evaluate_numpy raised IndexError (index -2^63) for NaN, 0.5 and +inf;
    then it returned NaN bounds. It refuses them as band_from_logp does."""
    built = table.build("kl", 0.05)
    with pytest.raises(ValueError, match="logp"):
        table.evaluate_numpy(built, np.array([logp]))


def test_exported_subnormal_delta_table_loads(tmp_path):
    """export accepted delta = 1e-320 (as docs/torch.md says it should), and
    the loader then refused its own file: "not a positive normal float"."""
    path = tmp_path / "s.npz"
    assert main(["export", "--divergence", "kl", "--delta", "1e-320", "--out", str(path)]) == 0
    assert table.load(path).delta == 1e-320


@pytest.mark.parametrize("logp", [-5e-324, -1e-310, -1e-301])
def test_float64_table_refuses_logp_beyond_its_certified_range(logp):
    """A float64 table at log p = -5e-324 (1 - p subnormal) gave 0.98646455 for
    rkl at delta 10 where the band is 0.98647084 (6e6 times its certificate),
    silently: it extrapolated past 1 - p = 1e-300. Readers and the validated
    torch table now refuse such inputs; band_from_logp solves them."""
    built = table.build("rkl", 10.0)
    with pytest.raises(ValueError, match="within 1e-300 of 0"):
        table.evaluate_numpy(built, np.array([-0.5, logp]))
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    device_table = bt.BandTable.build("rkl", 10.0)
    with pytest.raises(ValueError, match="within 1e-300 of 0"):
        device_table(torch.tensor([logp], dtype=torch.float64))
    lower, _ = bt.band_from_logp(torch.tensor([logp], dtype=torch.float64), 10.0, "rkl")
    assert float(lower) == float(bs.band_from_logp(logp, 10.0, "rkl")[0])


def test_table_at_p_one_and_at_the_range_edge_is_still_evaluated():
    built = table.build("rkl", 10.0)
    lower, upper = table.evaluate_numpy(built, np.array([0.0, -1e-300, -0.0]))
    assert np.all(np.isfinite(lower)) and np.all(upper >= 1.0)


def test_export_refuses_a_table_bandsolve_torch_would_refuse(tmp_path, capsys):
    # export wrote tables whose certificate the torch functions refuse (kl at
    # delta = 1e-100: rtol 1.4e10); a subnormal delta is certified (its band is
    # 1 to within 1e-12) and both accept it, as docs/torch.md now says
    assert main(["export", "--delta", "1e-100", "--out", str(tmp_path / "t.npz")]) == 2
    assert "float32 promise" in capsys.readouterr().err
    assert not (tmp_path / "t.npz").exists()
    assert main(["export", "--delta", "1e-320", "--out", str(tmp_path / "s.npz")]) == 0


def test_a_user_generator_growing_like_r_squared_builds_a_table_again():
    """Once the solver refused to guess an upper bound past delta/p = e^1390
    for a user generator without a growth form, the table certificate's
    point beyond the grid (log p = -1e300) made table.build raise for
    (u - 1)^2. There the bound's limit as p -> 0 is +inf: the table must hold
    it, and every checked point inside the grid must still agree."""
    mine = bs.Divergence.from_generator("mine_sq", lambda u: (u - 1.0) ** 2)
    built = table.build(mine, 0.05)
    assert built.rtol <= 1e-6
    lower, upper = table.evaluate_numpy(built, np.array([-1e300, -50.0]))
    assert upper[0] == math.inf and lower[0] == 0.0
    # inside the grid, the chi2 closed form: r = 1 + sqrt(delta (1 - p) / p)
    p = math.exp(-50.0)
    assert upper[1] == pytest.approx(1 + math.sqrt(0.05 * (1 - p) / p), rel=1e-6)


@pytest.mark.parametrize("path", [None, 3, 2.5, ["kl.npz"], {"path": "kl.npz"}])
def test_regression_table_paths_that_are_not_paths_name_the_argument(path, tmp_path):
    """`table.load(None)` (and save, and a non-path of any kind) raised
    pathlib's bare 'expected str, bytes or os.PathLike object, not NoneType',
    which names neither the argument nor what it wants."""
    data = table.build("tv", 0.05)
    for call in (lambda: table.load(path), lambda: table.save(data, path),
                 lambda: table.check_destination(path)):
        with pytest.raises(TypeError, match=r"^path must be a file path \(a str or "
                                            r"os\.PathLike\) naming a \.npz or \.pt table"):
            call()
    table.save(data, str(tmp_path / "kl.npz").encode())  # a bytes path is a path
    assert table.load(tmp_path / "kl.npz").delta == 0.05
