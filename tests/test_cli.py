import subprocess
import sys

import numpy as np
import pytest

import bandsolve as bs
from bandsolve.cli import main


def test_bounds_table(capsys):
    assert main(["bounds", "--divergence", "kl", "--delta", "0.05", "--p", "0.08", "0.5", "0.9"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "delta=0.05" in out[0] and "PPO clip is [0.8, 1.2]" in out[0]
    assert out[1].split() == ["p", "lower", "upper", "p(lower-1)", "p(upper-1)",
                              "PPO", "p(-eps)", "PPO", "p(+eps)"]
    lo, hi = bs.band([0.08, 0.5, 0.9], 0.05, "kl")
    for line, p, l, h in zip(out[3:], [0.08, 0.5, 0.9], lo, hi):
        cells = [float(c) for c in line.split()]
        np.testing.assert_allclose(cells[:5], [p, l, h, p * (l - 1), p * (h - 1)], rtol=1e-5)
        np.testing.assert_allclose(cells[5:], [-0.2 * p, 0.2 * p], rtol=1e-5)


def test_bounds_from_logp_and_errors(capsys):
    assert main(["bounds", "--logp", "-2.5", "--divergence", "alpha:0.5"]) == 0
    assert main(["bounds", "--p", "1.5"]) == 2
    assert "p must lie in [0, 1]" in capsys.readouterr().err


def test_console_script_runs():
    done = subprocess.run([sys.executable, "-m", "bandsolve", "bounds", "--p", "0.08"],
                          capture_output=True, text=True, check=True)
    assert "0.112844" in done.stdout


def _tiny_sweep(monkeypatch):
    from bandsolve import verify

    monkeypatch.setattr(verify, "run", lambda progress=True: verify.__dict__["_run_full"](
        divergences=("kl",), p_values=(0.3,), deltas=(0.05,), sizes=(2,), progress=False))


def test_verify_writes_to_out(tmp_path, monkeypatch):
    from bandsolve import verify

    monkeypatch.setitem(verify.__dict__, "_run_full", verify.run)
    _tiny_sweep(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--quiet", "--out", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "verify.md").exists()
    assert not (tmp_path / "bandsolve-output").exists()


def test_verify_writes_to_bandsolve_output_by_default(tmp_path, monkeypatch):
    from bandsolve import verify

    monkeypatch.setitem(verify.__dict__, "_run_full", verify.run)
    _tiny_sweep(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "--quiet"]) == 0
    text = (tmp_path / "bandsolve-output" / "verify.md").read_text()
    assert "certified interval" in text and "| `kl` |" in text


def test_bounds_command_imports_no_cvxpy_mpmath_matplotlib_or_tqdm():
    # cli.py built every subcommand's parser, importing the reproduction (and
    # with it convex, mpmath, tqdm) just to print a band
    code = ("import sys; from bandsolve.cli import main; main(['bounds', '--p', '0.5']); "
            "print(sorted(m for m in ('cvxpy', 'mpmath', 'matplotlib', 'tqdm') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines()[-1] == "[]", out


# --- bad destinations: a clean error that names the path, before any work (issue 34) ----


def _fail_if_built(monkeypatch):
    from bandsolve import table

    monkeypatch.setattr(table, "build", lambda *a, **k: pytest.fail("the table was built"))


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_export_onto_a_folder_names_the_path_before_building(suffix, tmp_path, capsys,
                                                             monkeypatch):
    """A .pt export to a folder gave torch's raw RuntimeError traceback."""
    pytest.importorskip("torch")
    _fail_if_built(monkeypatch)
    (tmp_path / f"t{suffix}").mkdir()
    assert main(["export", "--out", str(tmp_path / f"t{suffix}")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bandsolve: error:") and f"t{suffix}" in err and "is a folder" in err
    assert main(["export", "--out", str(tmp_path / "missing" / f"t{suffix}")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_export_pt_without_torch_names_the_extra_before_building(tmp_path, capsys, monkeypatch):
    """It built the whole table first, then printed only "No module named 'torch'"."""
    monkeypatch.setitem(sys.modules, "torch", None)
    _fail_if_built(monkeypatch)
    assert main(["export", "--out", str(tmp_path / "t.pt")]) == 2
    err = capsys.readouterr().err
    assert 'bandsolve[torch]' in err and ".npz" in err
    assert not (tmp_path / "t.pt").exists()


@pytest.mark.parametrize("command", ["repro", "verify"])
def test_out_naming_an_existing_file_is_a_clean_error(command, tmp_path, capsys):
    """Both printed a bare "[Errno 17] File exists"."""
    taken = tmp_path / "taken"
    taken.write_text("mine")
    args = [command, "--out", str(taken)] + (["--quiet"] if command == "verify" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--out" in err and str(taken) in err and "is a file, not a folder" in err
    assert taken.read_text() == "mine"


def test_export_into_a_missing_folder_is_a_clean_error(tmp_path, capsys):
    """`bandsolve export --out nodir/kl.pt` printed torch's raw traceback."""
    assert main(["export", "--divergence", "kl", "--delta", "0.05",
                 "--out", str(tmp_path / "nodir" / "kl.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_version_flag_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("bandsolve ")


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
    out = subprocess.run([sys.executable, "-m", "bandsolve", *command, "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "``" not in out, out


def test_verify_checks_its_output_folder_before_the_sweep(monkeypatch, tmp_path):
    # --out /proc/x ran the whole sweep before failing
    from bandsolve import verify

    monkeypatch.setattr(verify, "run", lambda **kw: pytest.fail("the sweep ran"))
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert main(["verify", "--quiet", "--out", str(blocked / "sub")]) == 2


def test_regression_cli_reads_negative_log_probabilities_in_exponent_form(capsys):
    assert main(["bounds", "--logp", "-1e-5", "0", "-1e-320", "-800"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3 + 4


def test_regression_cli_reports_solver_errors_without_a_traceback(capsys, monkeypatch):
    # No built-in input raises BandSolveError any more (alpha:3 at p = 1e-300,
    # delta = 1e300 did until issue 18.5), so the solver's error is injected.
    from bandsolve import api

    def unresolved(*args, **kwargs):
        raise api.BandSolveError("alpha:3: the binary divergence evaluates to +inf")

    monkeypatch.setattr(api, "band", unresolved)
    assert main(["bounds", "--p", "1e-300", "--delta", "1e300", "--divergence", "alpha:3"]) == 2
    assert "bandsolve: error:" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "-3", "two"])
def test_repro_refuses_a_job_count_below_one(jobs, capsys, tmp_path, monkeypatch):
    """Regression: --jobs 0 and --jobs -3 were accepted silently; they are
    refused by the parser before anything is written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(["repro", "--skip-dynamics", "--jobs", jobs])
    assert stopped.value.code == 2
    assert "argument --jobs" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_repro_refused_for_a_file_in_the_way_leaves_no_folder_behind(tmp_path, capsys,
                                                                      monkeypatch):
    """Regression: `repro --figures afile` was refused cleanly but left an empty
    ./bandsolve-output, and --resume under --skip-dynamics made a folder that
    nothing uses."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    assert main(["repro", "--skip-dynamics", "--figures", "afile"]) == 2
    assert "--figures" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert main(["repro", "--skip-dynamics", "--out", "out", "--resume", "kept"]) == 0
    assert (tmp_path / "out" / "REPORT.md").exists() and not (tmp_path / "kept").exists()


def test_regression_bounds_into_a_closed_pipe_exits_quietly():
    """`bandsolve bounds --p $(seq 0 0.001 1) | head -1` ended with
    'bandsolve: error: [Errno 32] Broken pipe' and exit 2. A reader that
    stops early now ends the command as it ends coreutils' writers: no words
    on stderr, exit 141 (128 + SIGPIPE)."""
    from bandsolve.cli import EXIT_CLOSED_PIPE

    values = [f"{p:.4f}" for p in np.linspace(0, 1, 5001)]  # well over a pipe's 64 KiB
    proc = subprocess.Popen([sys.executable, "-m", "bandsolve", "bounds", "--p", *values],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"Band-kl bounds")
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert err == b"" and proc.returncode == EXIT_CLOSED_PIPE


def test_regression_repro_resume_naming_a_file_is_refused_even_when_skipping_dynamics(
        tmp_path, capsys, monkeypatch):
    """`repro --resume FILE --skip-dynamics` accepted a plain file as the
    folder of kept runs; it is refused, and the file is left as it was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    assert main(["repro", "--skip-dynamics", "--resume", "afile"]) == 2
    assert "--resume 'afile' is a file, not a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize("command", [
    ["bounds", "--p", "0", "1e-300", "0.08", "0.5", "1"],
    ["bounds", "--divergence", "alpha:0.5", "--delta", "1e-300", "--logp", "-700", "-1e-300"],
    ["calibrate", "--at-p", "5e-324"],
    ["export", "--divergence", "tv", "--delta", "0.05", "--out", "t.npz"],
    ["repro", "--skip-dynamics", "--out", "r"],
    ["doctor"],
], ids=lambda c: " ".join(c[:2]))
def test_regression_commands_run_with_warnings_as_errors(command, tmp_path):
    """Trainers run their suites with warnings as errors, and `calibrate
    --at-p 5e-324` printed two numpy overflow warnings: each command runs
    under `python -W error` in a fresh process, where a warning raised by
    bandsolve or by a library it calls fails it."""
    run = subprocess.run([sys.executable, "-W", "error", "-m", "bandsolve", *command],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Warning" not in run.stderr, run.stderr[-3000:]
