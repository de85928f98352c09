"""A real redis-server for the store tests: started on a free port, stopped by PID."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["redis_server"]

if str(ROOT := Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._redis import redis_server as spawned


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """Yield the URL of a Redis: ``REDIS_URL`` if set, else our own redis-server."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with spawned() as own:
        yield own
