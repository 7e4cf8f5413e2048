"""The command line and the input checks a new user meets first (issue 19,
items 13 and 15), each named after the papercut it removes."""

import subprocess
import sys

import numpy as np
import pytest

import bandsolve as bs
from bandsolve import convex, verify
from bandsolve.cli import main


def test_cli_bounds_accepts_minus_inf_as_a_log_probability(capsys):
    # argparse took "-inf" for an option and refused it
    assert main(["bounds", "--logp", "-inf", "-0.5"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    assert rows[0].split()[:3] == ["0", "0", "inf"]


def test_cli_bounds_p_zero_row_prints_no_negative_zero(capsys):
    assert main(["bounds", "--p", "0", "0.5"]) == 0
    assert "-0 " not in capsys.readouterr().out + " "


@pytest.mark.parametrize("command", [[], ["verify"], ["doctor"]])
def test_cli_help_shows_no_rest_double_backticks(command):
    out = subprocess.run([sys.executable, "-m", "bandsolve.cli", *command, "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "``" not in out, out


def test_longdouble_delta_below_float64_range_names_the_cause_not_zero():
    # "delta must be positive: got 0.0" for a positive 1e-4000
    tiny = np.longdouble("1e-4000")
    if tiny == 0:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(ValueError, match="below float64's range"):
        bs.band(0.5, tiny)


def test_max_ratio_beyond_float64_is_no_cap_not_an_overflow_error():
    # max_ratio=10**400 raised a raw OverflowError
    assert bs.band(1e-3, 0.05, max_ratio=10**400)[1] == bs.band(1e-3, 0.05)[1]
    with pytest.raises(ValueError, match="max_ratio"):
        bs.band(0.5, 0.05, max_ratio=-10**400)


@pytest.mark.parametrize("argument", ["p", "delta"])
def test_numpy_masked_array_is_refused_not_its_mask_ignored(argument):
    masked = np.ma.masked_array([0.5, 2.0], mask=[False, True])
    args = {"p": 0.5, "delta": 0.05, argument: masked}
    with pytest.raises(TypeError, match="masked array"):
        bs.band(args["p"], args["delta"])


def test_verify_unsolved_program_is_certified_in_mpmath_or_fails(monkeypatch):
    # an unverified program used to leave verify at PASS, exit 0
    def no_solver(self, p, delta, side, estimate):
        raise convex.ConvexSolveError("every rung ended 'optimal_inaccurate' (forced)")

    monkeypatch.setattr(convex.search.BoundSolver, "solve", no_solver)
    rows = verify.run(divergences=("kl",), p_values=(0.3,), deltas=(0.05,), sizes=(),
                      progress=False)
    assert rows[0].failures and rows[0].mpmath_only == 2 and rows[0].passed
    true_band = bs.band
    monkeypatch.setattr(verify.api, "band",
                        lambda p, d, name, **kw: tuple(b * 1.001 for b in true_band(p, d, name)))
    rows = verify.run(divergences=("kl",), p_values=(0.3,), deltas=(0.05,), sizes=(),
                      progress=False)
    assert rows[0].uncertified == 2 and not rows[0].passed


def test_verify_checks_its_output_folder_before_the_sweep(monkeypatch, tmp_path):
    # --out /proc/x ran the whole sweep before failing
    monkeypatch.setattr(verify, "run", lambda **kw: pytest.fail("the sweep ran"))
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert main(["verify", "--quiet", "--out", str(blocked / "sub")]) == 2


def test_export_refuses_a_table_bandsolve_torch_would_refuse(tmp_path, capsys):
    # export wrote tables whose certificate the torch functions refuse (kl at
    # delta = 1e-100: rtol 1.4e10); a subnormal delta is certified (its band is
    # 1 to within 1e-12) and both accept it, as docs/torch.md now says
    assert main(["export", "--delta", "1e-100", "--out", str(tmp_path / "t.npz")]) == 2
    assert "float32 promise" in capsys.readouterr().err
    assert not (tmp_path / "t.npz").exists()
    assert main(["export", "--delta", "1e-320", "--out", str(tmp_path / "s.npz")]) == 0
