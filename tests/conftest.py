"""Session fixtures shared by the whole suite, and the Hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from support.redis_server import redis_server

# No property test may pass or fail by luck. Timing is luck on a machine shared by parallel
# jobs, so neither profile has a deadline or the too_slow health check. "ci" also has no
# example database: a failing example saved by an earlier run would replay in every later
# one and keep the checkout red whatever the change. It keeps seeds varying (unlike
# Hypothesis's own "ci", which derandomizes), so each CI run explores new examples; a
# failure prints its seed (`--hypothesis-seed=N`) and blob to reproduce it.
# Hypothesis loads its own "ci" at import where it sees a CI variable: so do we, with ours.
IN_CI = "ci" == settings.get_current_profile_name()
settings.register_profile(
    "default",
    settings.get_profile("default"),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    deadline=None,
    database=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "default"))


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis for the store tests (``REDIS_URL``, or a redis-server of our own)."""
    with redis_server() as url:
        yield url
