"""What ``import bandsolve`` and one ``band`` call load (issue 22, part 1):
the problem layer must not drag in its verifier's libraries."""

import os
import subprocess
import sys

import pytest

HEAVY = ("cvxpy", "mpmath", "matplotlib")


def _imported_by(code: str) -> set:
    """Top-level packages that ``python -X importtime -c code`` imports."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    names = set()
    for line in run.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize("code", [
    "import bandsolve; bandsolve.band(0.3, 0.05)",
    "import bandsolve; bandsolve.band(0.3, 0.05, 'alpha:0.5'); "
    "bandsolve.Divergence.from_generator('mine', lambda u: (u - 1.0) ** 2)",
])
def test_divergences_load_no_cvxpy_mpmath_or_matplotlib(code):
    names = _imported_by(code)
    assert "bandsolve" in names  # the parse saw the imports
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


CLI_HEAVY = ("numba", "numpy", "cvxpy", "mpmath", "matplotlib", "torch", "scipy", "tqdm")


@pytest.mark.parametrize("command", ["", "bounds", "calibrate", "verify", "export", "repro",
                                     "doctor"])
def test_cli_help_imports_no_numba_numpy_or_solvers(command):
    """`bandsolve verify --help`, `calibrate --help` and `repro --help` took
    about 2 s each (numba and the kernels, cvxpy, matplotlib) to print their
    options; each command now declares its arguments without them."""
    args = ", ".join(repr(a) for a in (command, "--help") if a)
    names = _imported_by(f"import sys; from bandsolve.cli import main\n"
                         f"try:\n    main([{args}])\nexcept SystemExit:\n    pass")
    assert "bandsolve" in names
    assert not names & set(CLI_HEAVY), sorted(names & set(CLI_HEAVY))


def test_cli_declarations_match_the_library():
    """The parser's names, spelled out so that --help imports nothing, are
    the library's."""
    from bandsolve import BUILTIN_DIVERGENCES, calibrate
    from bandsolve.cli import DEFAULT_OUT, builtin_divergences
    from bandsolve.cli import calibrate as cli_calibrate
    from bandsolve.studies.report import ReproConfig

    assert cli_calibrate.TARGETS == calibrate.TARGETS
    assert builtin_divergences() == tuple(BUILTIN_DIVERGENCES)
    assert DEFAULT_OUT == "bandsolve-output" == ReproConfig().out
