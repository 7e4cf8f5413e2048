import math
import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

# One suite for everyone: `python -m pytest` draws the same hypothesis
# examples on every run and every machine (derandomized: the examples are a
# function of the test and of the pinned hypothesis version, pyproject's
# "test" extra), so the README's test command is the same test for each
# user, CI included. mpmath references are slow: no deadlines, 40 examples.
# BANDSOLVE_HYPOTHESIS=thorough explores instead: ten times as many random
# examples, a local example database that replays what failed; a failure it
# finds becomes a named regression test (docs/development.md).
settings.register_profile("default", deadline=None, max_examples=40, derandomize=True,
                          database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
# explicit: a profile registered after "default" inherits the loaded one's settings
settings.register_profile("thorough", deadline=None, max_examples=400, print_blob=True,
                          derandomize=False,
                          database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("BANDSOLVE_HYPOTHESIS", "default"))

#: The core, for a fast loop while you work (``python -m pytest -m core``,
#: docs/development.md): the numpy API and its out=, the divergences against
#: their mpmath references, the kernels' special functions, the properties,
#: the float64-edge accuracy and the import layers. The full suite stays the test
#: command; this subset skips the convex programs, the certificates, torch,
#: tables, the CLI, the studies and the trainers.
CORE_FILES = frozenset({
    "test_api.py", "test_out.py", "test_special.py", "test_vecmath.py",
    "test_properties.py", "test_accuracy_edges.py", "test_layers.py",
})


@pytest.fixture(autouse=True)
def _environment_restored():
    """A test that runs ``bandsolve repro`` in this process (``cli.main``) pins
    its numerics in ``os.environ``, as the command does for its own process:
    taken back after each test, so that the workers a later test starts
    inherit what this process's torch runs, not a pin it never had."""
    keys = ("ATEN_CPU_CAPABILITY", "MKL_CBWR")
    before = {key: os.environ.get(key) for key in keys}
    yield
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def readme_kl():
    """The README's user-defined KL, verbatim: a generator with no derivative,
    the kind of Divergence a user writes first."""
    import bandsolve as bs

    return bs.Divergence.from_generator(
        "my_kl", lambda u: u - 1 - math.log(u) if u > 0 else math.inf)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in CORE_FILES:
            item.add_marker(pytest.mark.core)
