import os

from hypothesis import HealthCheck, settings

# mpmath references are slow: no deadlines, and a modest example count by
# default. BANDSOLVE_HYPOTHESIS=thorough runs ten times as many.
settings.register_profile("default", deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=400,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("BANDSOLVE_HYPOTHESIS", "default"))
