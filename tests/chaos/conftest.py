"""The chaos suite: RedisStore against a redis-server of its own, stalled, killed and filled."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The helpers of tests/ are importable from here (no packages in tests/).
_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from support.redis_server import RedisProcess, redis_process  # noqa: E402


@pytest.fixture
def server() -> Iterator[RedisProcess]:
    """A redis-server for this test alone (never REDIS_URL): it is about to be broken."""
    with redis_process() as started:
        yield started
