"""CI cannot flake on a random draw: under CI=true the suite runs hypothesis
derandomized, with no example database, and CI pins the solver stack inside the
range pyproject.toml allows."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _profile_under(env: dict) -> str:
    code = ("import sys; sys.path.insert(0, 'tests'); import conftest; "
            "from hypothesis import settings; d = settings.default; "
            "print(d.derandomize, d.database is None)")
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "BANDSOLVE_HYPOTHESIS")}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, check=True).stdout.strip()


def test_ci_loads_a_derandomized_hypothesis_profile_without_a_database():
    assert _profile_under({"CI": "true"}) == "True True"
    assert _profile_under({}) == "False False"  # locally: random draws, remembered failures


def test_ci_pins_the_solver_stack_at_the_verify_extras_pins():
    """The verify extra pins cvxpy and Clarabel exactly, at the versions the
    tolerances were measured with; CI's constraints hold the same versions."""
    pins = dict(re.findall(r"^([a-z]+)==(\S+)", (ROOT / ".ci" / "constraints.txt").read_text(), re.M))
    pyproject = (ROOT / "pyproject.toml").read_text()
    verify = re.search(r"^verify = \[(.*)\]$", pyproject, re.M).group(1)
    for name in ("cvxpy", "clarabel"):
        assert f'"{name}=={pins[name]}"' in verify, (name, pins[name], verify)
    assert "PIP_CONSTRAINT" in (ROOT / ".ci" / "run").read_text()


def test_core_dependencies_hold_no_verifier_plots_or_tight_pins():
    """A trainer's environment gets the core: numpy, scipy and numba with
    lower bounds only (issue 31)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    core = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.M | re.S).group(1)
    names = re.findall(r'^\s*"([A-Za-z0-9_-]+)', core, re.M)
    assert names == ["numpy", "scipy", "numba"], names
    assert "==" not in core and "<" not in core, core
