"""
Print the Redis chaos figures (the docs' "Redis under load and failure" section quotes them).

    PYTHONPATH=. .venv/bin/python tests/chaos/figures.py [followers ...]

Each figure against a redis-server of its own (`support.redis_server.RedisProcess`,
127.0.0.1, a free port), from one RedisStore (one worker) in this process:

- followers held: N `follow()` readers of one run on a store with the default pools
  (20 read connections, 8 owner ones), the owner appending 100 batches of 5 events 20 ms
  apart; every follower must get all 500 events in order; the peak of CLIENT LIST and the
  XREAD count show the sharing;
- the stall: SIGSTOP for 8 s after the 20th of 60 batches (1 s socket timeout), the owner
  retrying with ``first=``; duplicated and lost events counted from the log itself;
- append rate: events/s of appends with ``first=`` awaited one after the other (one run),
  and of 50 runs appending at once, for batches of 1, 10 and 100 events.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis.asyncio as aioredis
from _chaos import append_until_logged, batch, logged_values, xread_calls
from support.redis_server import RedisProcess, redis_process

from ambient_runs.stores import Entry, follow
from ambient_runs.stores.redis import RedisStore


async def followers_held(server: RedisProcess, followers: int) -> None:
    store = RedisStore(server.url, prefix=f"f-{uuid.uuid4().hex}:")
    admin = aioredis.Redis.from_url(server.url)
    size, batches = 5, 100
    try:
        await store.create("t", "r", input=b"{}", owner="w1", lease=3)
        got: list[list[Entry]] = [[] for _ in range(followers)]

        async def follower(i: int) -> None:
            async for entry in follow(store, "t", "r"):
                got[i].append(entry)

        tasks = [asyncio.create_task(follower(i)) for i in range(followers)]
        peak, slowest, renew_slowest = 0, 0.0, 0.0
        before = await xread_calls(admin)
        started = time.perf_counter()
        for i in range(batches):
            t = time.perf_counter()
            await store.append(
                "t", "r", batch(size, i * size), first=i * size + 1, final=i == batches - 1
            )
            slowest = max(slowest, time.perf_counter() - t)
            if i % 10 == 0:
                t = time.perf_counter()
                assert await store.renew("t", "r", owner="w1", lease=3)
                renew_slowest = max(renew_slowest, time.perf_counter() - t)
                peak = max(peak, len(await admin.client_list()) - 1)
            await asyncio.sleep(0.02)
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        took = time.perf_counter() - started
        xreads = await xread_calls(admin) - before
    finally:
        await store.aclose()
        await admin.aclose()
    expected = [(i + 1, line) for i, line in enumerate(batch(size * batches, 0))]
    complete = sum(entries == expected for entries in got)
    print(
        f"followers held: {complete}/{followers} got all {size * batches} events in order "
        f"in {took:.1f} s; peak Redis connections {peak}; XREADs {xreads} for {batches} "
        f"batches; slowest append {slowest * 1000:.1f} ms, slowest renew "
        f"{renew_slowest * 1000:.1f} ms"
    )


async def stall(server: RedisProcess) -> None:
    store = RedisStore(
        server.url,
        prefix=f"s-{uuid.uuid4().hex}:",
        socket_timeout=1,
        pool_timeout=1,
        connect_timeout=1,
    )
    failures: list[float] = []
    size, batches = 5, 60
    try:
        await store.create("t", "r", input=b"{}", owner="w1", lease=60)
        started = time.perf_counter()
        for i in range(batches):
            if i == 20:
                server.pause()
                asyncio.get_running_loop().call_later(8.0, server.resume)
            await append_until_logged(
                store,
                batch(size, i * size),
                first=i * size + 1,
                final=i == batches - 1,
                failures=failures,
            )
            await asyncio.sleep(0.02)
        took = time.perf_counter() - started
        values = await logged_values(server.url, store._keys("t", "r")[1])
    finally:
        await store.aclose()
    counts = Counter(values)
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    lost = len(set(range(size * batches)) - set(counts))
    print(
        f"stall survived: SIGSTOP 8 s, {len(failures)} StoreUnavailableError seen by the owner, "
        f"all {batches} batches logged after {took:.1f} s; events duplicated {duplicated}, "
        f"lost {lost}"
    )


async def append_rate(server: RedisProcess) -> None:
    store = RedisStore(server.url, prefix=f"a-{uuid.uuid4().hex}:")
    try:
        for size in (1, 10, 100):
            events = batch(size, 0)
            await store.create("t", f"one-{size}", input=b"{}", owner="w", lease=60)
            count, last = 0, 0
            started = time.perf_counter()
            while time.perf_counter() - started < 2.0:
                last = await store.append("t", f"one-{size}", events, first=last + 1)
                count += size
            one = count / (time.perf_counter() - started)

            runs = [f"many-{size}-{i}" for i in range(50)]
            for run in runs:
                await store.create("t", run, input=b"{}", owner="w", lease=60)
            total = 0

            async def owner(run: str, events: list[bytes], deadline: float) -> None:
                nonlocal total
                last = 0
                while time.perf_counter() < deadline:
                    last = await store.append("t", run, events, first=last + 1)
                    total += len(events)

            started = time.perf_counter()
            await asyncio.gather(*(owner(run, events, started + 2.0) for run in runs))
            many = total / (time.perf_counter() - started)
            print(
                f"append rate, batches of {size}: {one:,.0f} events/s one run at a time, "
                f"{many:,.0f} events/s over 50 concurrent runs"
            )
    finally:
        await store.aclose()


async def main(counts: list[int]) -> None:
    for followers in counts:
        with redis_process() as server:
            await followers_held(server, followers)
    with redis_process() as server:
        await stall(server)
    with redis_process() as server:
        await append_rate(server)


if __name__ == "__main__":
    asyncio.run(main([int(n) for n in sys.argv[1:]] or [500, 2000]))
