"""Regression tests for what an outside tester found in a fresh venv with the
wheel (issue 19's hostile pass), each named after the break it catches."""

import numpy as np
import pytest

import bandsolve as bs
from bandsolve import table


@pytest.mark.parametrize("name", ["alpha:1e200", "alpha:1e13", "alpha:-1e20"])
def test_alpha_parameter_beyond_the_verified_range_is_refused_up_front(name):
    """alpha:1e200 was parsed, then the root finder "did not converge" with a
    message about user generators; alpha:1e20 raised "+inf next to the bound"."""
    with pytest.raises(ValueError, match=r"\|a\| <= 1e\+12"):
        bs.band(0.5, 0.05, name)


def test_alpha_parameter_at_the_edge_of_the_range_is_accepted():
    lower, upper = bs.band(np.array([1e-6, 0.5]), 0.05, "alpha:1e12")
    assert np.all((0 <= lower) & (lower <= 1) & (1 <= upper))


@pytest.mark.parametrize("logp", [np.nan, 0.5, np.inf])
def test_table_evaluate_numpy_refuses_invalid_logp_instead_of_nan(logp):
    """evaluate_numpy raised IndexError (index -2^63) for NaN, 0.5 and +inf;
    then it returned NaN bounds. It refuses them as band_from_logp does."""
    built = table.build("kl", 0.05)
    with pytest.raises(ValueError, match="logp"):
        table.evaluate_numpy(built, np.array([logp]))


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


def test_export_into_a_missing_folder_is_a_clean_error(tmp_path, capsys):
    """`bandsolve export --out nodir/kl.pt` printed torch's raw traceback."""
    from bandsolve.cli import main

    assert main(["export", "--divergence", "kl", "--delta", "0.05",
                 "--out", str(tmp_path / "nodir" / "kl.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_exported_subnormal_delta_table_loads(tmp_path):
    """export accepted delta = 1e-320 (as docs/torch.md says it should), and
    the loader then refused its own file: "not a positive normal float"."""
    from bandsolve.cli import main

    path = tmp_path / "s.npz"
    assert main(["export", "--divergence", "kl", "--delta", "1e-320", "--out", str(path)]) == 0
    assert table.load(path).delta == 1e-320


def test_version_flag_prints_the_version(capsys):
    from bandsolve.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("bandsolve ")


@pytest.mark.parametrize("name", [None, 42, ""])
def test_user_divergence_name_must_be_a_string(name):
    """from_generator(None, f) was accepted; the torch adapter then refused it,
    and a table saved under the name 42 would not reload."""
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        bs.Divergence.from_generator(name, lambda u: (u - 1.0) ** 2)


def test_user_divergence_under_torch_compile_says_how_instead_of_failing_in_numpy():
    """torch.compile(fullgraph=True) over band_from_logp with a user Divergence
    failed inside dynamo ("ndarray attribute access"); the default compile hit
    FakeTensor's missing setflags. fullgraph now names the way out, and the
    default compile breaks the graph there and solves eagerly."""
    torch = pytest.importorskip("torch")
    import bandsolve.torch as bt

    user = bs.Divergence.from_generator("user_chi2", lambda u: (u - 1.0) ** 2)
    logp = torch.log(torch.linspace(0.01, 0.99, 16, dtype=torch.float64))
    eager = bt.band_from_logp(logp, 0.05, user)
    torch._dynamo.reset()
    strict = torch.compile(lambda lp: bt.band_from_logp(lp, 0.05, user), fullgraph=True)
    with pytest.raises(Exception, match="runs eagerly only"):
        strict(logp)
    torch._dynamo.reset()
    lenient = torch.compile(lambda lp: bt.band_from_logp(lp, 0.05, user))
    for got, want in zip(lenient(logp), eager):
        assert torch.equal(got, want)


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
