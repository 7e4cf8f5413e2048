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


def test_ci_pins_the_solver_stack_inside_the_measured_range():
    pins = dict(re.findall(r"^([a-z]+)==(\S+)", (ROOT / ".ci" / "constraints.txt").read_text(), re.M))
    pyproject = (ROOT / "pyproject.toml").read_text()
    for name in ("cvxpy", "clarabel"):
        low, high = re.search(rf'"{name}>=([\d.]+),<([\d.]+)"', pyproject).groups()
        as_tuple = lambda v: tuple(int(x) for x in v.split("."))
        assert as_tuple(low) <= as_tuple(pins[name]) < as_tuple(high), (name, pins[name])
    assert "PIP_CONSTRAINT" in (ROOT / ".ci" / "run").read_text()
