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
