"""What the chaos tests and their figures share: an owner that appends through failures."""

from __future__ import annotations

import asyncio
import json
import time

import redis.asyncio as aioredis

from ambient_runs.stores import RunStore, StoreUnavailableError

__all__ = ["append_until_logged", "batch", "logged_values", "xread_calls"]


def batch(size: int, start: int) -> list[bytes]:
    """Events *start* … *start + size - 1*, each carrying its own number as its value."""
    return [
        json.dumps({"type": "CUSTOM", "name": "n", "value": i}).encode()
        for i in range(start, start + size)
    ]


async def append_until_logged(
    store: RunStore,
    events: list[bytes],
    *,
    first: int | None,
    final: bool = False,
    within: float = 30.0,
    failures: list[float] | None = None,
) -> int:
    """
    Append as a careful owner does: on StoreUnavailableError, the same batch again.

    With *first* the retries are safe; without it (the old way) a try that
    timed out here but ran in Redis is logged twice. Each failure's time is
    added to *failures*; any other error propagates.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            return await store.append("t", "r", events, first=first, final=final)
        except StoreUnavailableError:
            if failures is not None:
                failures.append(time.monotonic())
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def logged_values(url: str, key: str) -> list[int]:
    """Every event value of the stream *key*, in log order, read straight from Redis."""
    client = aioredis.Redis.from_url(url)
    try:
        entries = await client.xrange(key)
    finally:
        await client.aclose()
    values: list[int] = []
    for _, fields in entries:
        values.extend(json.loads(line)["value"] for line in fields[b"d"].split(b"\n"))
    return values


async def xread_calls(client: aioredis.Redis) -> int:
    """How many XREAD commands the server has run."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_xread", {}).get("calls", 0))
