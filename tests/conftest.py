"""Shared test settings.

Hypothesis runs derandomized by default so that every run of `make test` tries the same
examples; `HYPOTHESIS_PROFILE=thorough` explores fresh random ones, many more of them.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=300, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
