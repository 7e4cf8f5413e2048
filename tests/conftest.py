import math
import os

import pytest
from hypothesis import HealthCheck, settings

# mpmath references are slow: no deadlines, and a modest example count by
# default. BANDSOLVE_HYPOTHESIS=thorough runs ten times as many. CI (which
# sets CI=true) runs the "ci" profile: derandomized, so a run is a function
# of the commit and cannot flake; random exploration stays a local job.
settings.register_profile("default", deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=400,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=40, derandomize=True,
                          database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
_IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile(os.environ.get("BANDSOLVE_HYPOTHESIS", "ci" if _IN_CI else "default"))

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
