from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Property tests run the same in CI and locally (the same drawn inputs on every run: derandomized; set
# HYPOTHESIS_PROFILE=explore to draw new ones); the machine is small and shared, so no deadlines.
settings.register_profile("dnnbench", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dnnbench"))
