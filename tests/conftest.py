import os

from hypothesis import HealthCheck, settings

# mpmath references are slow: no deadlines, and a modest example count by
# default. BANDSOLVE_HYPOTHESIS=thorough runs ten times as many.
settings.register_profile("default", deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=400,
                          suppress_health_check=[HealthCheck.too_slow])
# CI (CI=true): the same examples on every run, so that a run cannot fail on a
# draw the previous one never made; no example database carries over either.
# BANDSOLVE_HYPOTHESIS still chooses explicitly.
settings.register_profile("ci", deadline=None, max_examples=40, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true") else "default"
settings.load_profile(os.environ.get("BANDSOLVE_HYPOTHESIS", _default))
