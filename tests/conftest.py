"""Session fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _redis import redis_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis for the store tests (``REDIS_URL``, or a redis-server of our own)."""
    with redis_server() as url:
        yield url
