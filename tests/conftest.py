import os

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
