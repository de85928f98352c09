"""
RedisStore under chaos: a stalled Redis, a killed one, 500 followers, a full one.

Each test starts a redis-server of its own on a free 127.0.0.1 port
(`_redis.RedisProcess`) and signals that PID only; every test is bounded in
time (its waits have timeouts, its loops a count).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from _chaos import append_until_logged, batch, logged_values, xread_calls
from support.redis_server import RedisProcess

from ambient_runs.stores import (
    Entry,
    StoreFullError,
    StoreUnavailableError,
    follow,
)
from ambient_runs.stores.redis import RedisStore

STALL = 8.0  # seconds the server is stopped mid-appends (issue 31: 6 s wrote twice, 5 of 5)


@pytest.fixture
async def admin(server: RedisProcess) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(server.url)
    try:
        yield client
    finally:
        await client.aclose()


def short_timeouts(server: RedisProcess, **options: object) -> RedisStore:
    """A store that gives up on a silent Redis after 1 s (the default is 5 s)."""
    settings: dict[str, object] = {
        "socket_timeout": 1.0,
        "pool_timeout": 1.0,
        "connect_timeout": 1.0,
        **options,
    }
    return RedisStore(server.url, prefix=f"c-{uuid.uuid4().hex}:", **settings)  # type: ignore[arg-type]


async def stall_after(server: RedisProcess, ready: asyncio.Event, seconds: float) -> None:
    """Once *ready*, SIGSTOP the server for *seconds*, then SIGCONT it."""
    await ready.wait()
    server.pause()
    try:
        await asyncio.sleep(seconds)  # the stall itself, not a synchronisation
    finally:
        server.resume()


async def owner_through_a_stall(
    store: RedisStore, server: RedisProcess, *, stall: float, idempotent: bool
) -> tuple[int, list[float]]:
    """Append 60 batches of 5 events, 20 ms apart, stalling after the 20th; return the total."""
    await store.create("t", "r", input=b"{}", owner="w1", lease=60)
    ready = asyncio.Event()
    staller = asyncio.create_task(stall_after(server, ready, stall))
    failures: list[float] = []
    size, batches = 5, 60
    for i in range(batches):
        first = i * size + 1
        last = await append_until_logged(
            store,
            batch(size, i * size),
            first=first if idempotent else None,
            final=i == batches - 1,
            failures=failures,
        )
        if idempotent:
            assert first + size - 1 == last
        if i == 20:
            ready.set()
        await asyncio.sleep(0.02)
    await staller
    return size * batches, failures


class TestStall:
    async def test_an_8s_stall_mid_appends_duplicates_and_loses_nothing(
        self, server: RedisProcess, admin: aioredis.Redis
    ) -> None:
        """SIGSTOP 8 s: the owner sees only StoreUnavailableError, retries with first, and the
        log is exact."""
        store = short_timeouts(server)
        try:
            started = time.monotonic()
            total, failures = await owner_through_a_stall(
                store, server, stall=STALL, idempotent=True
            )
            took = time.monotonic() - started
            values = await logged_values(server.url, store._keys("t", "r")[1])
            stats = await admin.info("commandstats")
        finally:
            await store.aclose()

        assert list(range(total)) == values  # no duplicate, no gap, in order
        assert failures, "the stall was not felt"
        assert max(failures) - min(failures) > STALL - 2  # failing all along the stall
        assert took < STALL + 20
        # Every append that reached Redis ran its script: more than the 60 batches (and the
        # create) means tries the owner saw time out did run, and found their batch logged.
        evalsha = stats["cmdstat_evalsha"]
        ran = evalsha["calls"] - evalsha.get("failed_calls", 0) - evalsha.get("rejected_calls", 0)
        assert ran > 61

    async def test_without_first_the_same_stall_writes_a_batch_twice(
        self, server: RedisProcess
    ) -> None:
        """The control: retrying the old way (no first) after a 3 s stall logs a batch twice."""
        store = short_timeouts(server, socket_timeout=0.5, pool_timeout=0.5)
        try:
            total, failures = await owner_through_a_stall(
                store, server, stall=3.0, idempotent=False
            )
            values = await logged_values(server.url, store._keys("t", "r")[1])
        finally:
            await store.aclose()

        assert failures
        assert len(values) > total
        assert list(range(total)) == sorted(set(values))


class TestKillAndRestart:
    async def test_named_errors_while_down_and_recovery_on_the_same_store(
        self, server: RedisProcess, caplog: pytest.LogCaptureFixture
    ) -> None:
        """kill -9: every call is StoreUnavailableError; after a restart the same object works,
        cancels included, with one warning logged and no task exception left unretrieved."""
        caplog.set_level(logging.DEBUG)
        store = short_timeouts(server)
        try:
            await store.create("t", "r", input=b"{}", owner="w1", lease=60)
            await store.append("t", "r", batch(2, 0), first=1)
            # The cancel subscription is live: a cancel of another run reaches its waiter.
            await store.create("t", "c", input=b"{}", owner="w1", lease=60)
            heard = asyncio.create_task(store.wait_cancel("t", "c"))
            await asyncio.sleep(0)
            assert await store.request_cancel("t", "c")
            await asyncio.wait_for(heard, 5)
            # A waiter for a cancel that will come only after the restart.
            waiting = asyncio.create_task(store.wait_cancel("t", "r"))
            base = store._base("t", "r").encode()
            for _ in range(500):  # until it waits on the subscription (internal state)
                if base in store._cancels._waiters and store._cancels._subscribed.is_set():
                    break
                await asyncio.sleep(0.01)
            follower = asyncio.create_task(store.read("t", "r", 2, wait=10))
            for _ in range(500):  # until the shared reader carries its wait
                if store._reader._waiting:
                    break
                await asyncio.sleep(0.01)

            server.kill()

            with pytest.raises(StoreUnavailableError):
                await asyncio.wait_for(follower, 5)
            down = {
                "create": store.create("t", "x", input=b"{}", owner="w1", lease=1),
                "append": store.append("t", "r", batch(1, 2), first=3),
                "read": store.read("t", "r", 0),
                "info": store.info("t", "r"),
                "renew": store.renew("t", "r", owner="w1", lease=60),
                "end_lost": store.end_lost("t", "r", b"{}"),
                "request_cancel": store.request_cancel("t", "r"),
            }
            for name, call in down.items():
                started = time.monotonic()
                with pytest.raises(StoreUnavailableError):
                    await call
                assert time.monotonic() - started < 3, name
            assert not waiting.done()

            server.start()  # the same port, empty (no persistence)

            await store.create("t", "r", input=b"{}", owner="w1", lease=60)
            assert 2 == await append_until_logged(store, batch(2, 0), first=1, within=10)
            assert [1, 2] == [seq for seq, _ in (await store.read("t", "r", 0)).entries]
            assert await store.request_cancel("t", "r")
            await asyncio.wait_for(waiting, 10)
        finally:
            await store.aclose()
        gc.collect()

        dropped = [
            r
            for r in caplog.records
            if r.levelno >= logging.WARNING and "cancel subscription" in r.getMessage()
        ]
        assert 1 == len(dropped)
        assert str(server.port) in dropped[0].getMessage()
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


class TestFollowers:
    async def test_500_followers_share_one_reader_and_leave_the_owner_alone(
        self, server: RedisProcess, admin: aioredis.Redis
    ) -> None:
        """500 followers of one run on one store with 20 read connections: every one gets every
        event in order, the owner's appends and renewals all succeed within bounds, and Redis
        sees at most the pools' connections."""
        store = RedisStore(
            server.url, prefix=f"c-{uuid.uuid4().hex}:", max_connections=20, owner_connections=8
        )
        followers, size, batches = 500, 5, 100
        try:
            await store.create("t", "r", input=b"{}", owner="w1", lease=3)
            got: list[list[Entry]] = [[] for _ in range(followers)]

            async def follower(i: int) -> None:
                async for entry in follow(store, "t", "r"):
                    got[i].append(entry)

            tasks = [asyncio.create_task(follower(i)) for i in range(followers)]
            clients: list[int] = []
            stop = asyncio.Event()

            async def sample() -> None:
                while not stop.is_set():
                    clients.append(len(await admin.client_list()) - 1)  # not the admin itself
                    await asyncio.sleep(0.05)

            renewals: list[tuple[float, bool]] = []

            async def renew() -> None:
                while not stop.is_set():
                    started = time.monotonic()
                    held = await store.renew("t", "r", owner="w1", lease=3)
                    renewals.append((time.monotonic() - started, held))
                    await asyncio.sleep(0.2)

            sampler = asyncio.create_task(sample())
            renewer = asyncio.create_task(renew())
            before = await xread_calls(admin)
            appends: list[float] = []
            for i in range(batches):
                if i == batches - 1:  # renewals end with the run: a renew after it says False
                    stop.set()
                    await renewer
                started = time.monotonic()
                await store.append(
                    "t", "r", batch(size, i * size), first=i * size + 1, final=i == batches - 1
                )
                appends.append(time.monotonic() - started)
                await asyncio.sleep(0.02)
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            xreads = await xread_calls(admin) - before
            stop.set()
            await asyncio.gather(sampler, renewer)
        finally:
            await store.aclose()

        expected = [(i + 1, line) for i, line in enumerate(batch(size * batches, 0))]
        assert all(expected == entries for entries in got)
        assert max(appends) < 2.0  # the loop is shared with 500 followers on a busy CI box
        assert renewals
        assert all(held for _, held in renewals)
        assert max(took for took, _ in renewals) < 2.0
        assert max(clients) <= 20 + 8 + 2  # the pools, the shared reader, the subscription
        assert xreads < 3 * batches  # one XREAD per batch or so, not one per follower


class TestFull:
    async def test_a_redis_at_maxmemory_is_store_full_until_memory_is_freed(
        self, server: RedisProcess, admin: aioredis.Redis
    ) -> None:
        """maxmemory with noeviction: appends raise StoreFullError, reads go on, and the same
        batch retried once memory is freed lands exactly once."""
        store = short_timeouts(server)
        try:
            await store.create("t", "r", input=b"{}", owner="w1", lease=60)
            used = int((await admin.info("memory"))["used_memory"])
            await admin.config_set("maxmemory-policy", "noeviction")
            await admin.config_set("maxmemory", str(used + 2_000_000))
            big = "x" * 20_000
            size, last, refused = 5, 0, None
            for i in range(400):
                events = [
                    b'{"type":"CUSTOM","name":"n","value":%d,"pad":"%s"}' % (n, big.encode())
                    for n in range(i * size, i * size + size)
                ]
                try:
                    last = await store.append("t", "r", events, first=last + 1)
                except StoreFullError as error:
                    refused = (error, events)
                    break
            assert refused is not None, "Redis never filled up"
            error, events = refused
            page = await store.read("t", "r", 0, limit=10_000)

            await admin.config_set("maxmemory", "0")
            after = await store.append("t", "r", events, first=last + 1)
            again = await store.append("t", "r", events, first=last + 1)
        finally:
            await store.aclose()

        assert isinstance(error, StoreUnavailableError)
        assert "maxmemory" in str(error)
        assert last == len(page.entries)
        assert last + size == after == again
