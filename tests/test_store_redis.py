"""RedisStore against a real redis-server: large cursors, the pools, the shared reader."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from ambient_runs.stores import Page, StoreUnavailableError
from ambient_runs.stores.redis import RedisStore


def events(n: int, start: int = 0) -> list[bytes]:
    return [
        json.dumps({"type": "CUSTOM", "name": "n", "value": i}).encode()
        for i in range(start, start + n)
    ]


@pytest.fixture
async def admin(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    made = RedisStore(redis_url, prefix=f"t-{uuid.uuid4().hex}:", retention=60)
    try:
        yield made
    finally:
        await made.aclose()


async def opened(store: RedisStore, run: str = "r") -> None:
    await store.create("t", run, input=b"{}", owner="w1", lease=10)


class TestLargeCursors:
    @pytest.mark.parametrize("after", [10**14, 2**53, 10**19, 10**30])
    async def test_a_cursor_past_the_log_reads_nothing(
        self, store: RedisStore, after: int
    ) -> None:
        """A 15-digit (or larger) cursor is an empty page, not a Lua '0-1e+14' error."""
        await opened(store)
        await store.append("t", "r", events(3))

        page = await store.read("t", "r", after)
        waited = await store.read("t", "r", after, wait=0.05)

        assert Page([], None) == page
        assert Page([], None) == waited

    async def test_sequence_numbers_past_1e14_keep_their_digits(
        self, store: RedisStore, admin: aioredis.Redis
    ) -> None:
        """A log whose numbers reach 10**14 gets stream ids and reads in plain digits."""
        await opened(store)
        base = store._base("t", "r")
        await admin.hset(f"{base}:meta", "last", str(10**14))

        last = await store.append("t", "r", events(2), first=10**14 + 1)
        page = await store.read("t", "r", 10**14)
        again = await store.append("t", "r", events(2), first=10**14 + 1)
        ids = [entry_id for entry_id, _ in await admin.xrange(f"{base}:events")]

        assert 10**14 + 2 == last == again
        assert [10**14 + 1, 10**14 + 2] == [seq for seq, _ in page.entries]
        assert [f"0-{10**14 + 2}".encode()] == ids


class TestPools:
    async def test_followers_holding_every_read_connection_leave_the_owner_alone(
        self, redis_url: str
    ) -> None:
        """With the read pool taken the owner creates, appends and renews; a read says why."""
        pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=1, timeout=0.2)
        client = aioredis.Redis(connection_pool=pool)
        store = RedisStore(client=client, prefix=f"t-{uuid.uuid4().hex}:", pool_timeout=0.2)
        try:
            hold = asyncio.create_task(client.blpop([f"nothing-{uuid.uuid4().hex}"], timeout=2))
            await asyncio.sleep(0.05)  # the BLPOP takes the pool's only connection

            await store.create("t", "r", input=b"{}", owner="w1", lease=10)
            last = await store.append("t", "r", events(2), first=1)
            renewed = await store.renew("t", "r", owner="w1", lease=10)
            with pytest.raises(StoreUnavailableError, match="came free within") as raised:
                await store.info("t", "r")

            assert (2, True) == (last, renewed)
            assert "No connection available" in str(raised.value.__cause__)
            hold.cancel()
            await asyncio.gather(hold, return_exceptions=True)
        finally:
            await store.aclose()
            await client.aclose(close_connection_pool=True)

    async def test_a_redis_nobody_listens_on_is_store_unavailable_everywhere(self) -> None:
        """Every method names the failure StoreUnavailableError, redis-py's error as its cause."""
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # closed again below: nothing listens there
        store = RedisStore(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5)
        calls = {
            "create": store.create("t", "r", input=b"{}", owner="w", lease=1),
            "append": store.append("t", "r", events(1), first=1),
            "read": store.read("t", "r", 0),
            "read waiting": store.read("t", "r", 0, wait=1),
            "info": store.info("t", "r"),
            "renew": store.renew("t", "r", owner="w", lease=1),
            "end_lost": store.end_lost("t", "r", b"{}"),
            "request_cancel": store.request_cancel("t", "r"),
        }
        try:
            for name, call in calls.items():
                with pytest.raises(StoreUnavailableError) as raised:
                    await call
                assert isinstance(raised.value, ConnectionError), name
                assert "redis" in type(raised.value.__cause__).__module__, name
        finally:
            await store.aclose()

    def test_bad_pool_settings_are_refused(self, redis_url: str) -> None:
        """A pool of no connection, or a timeout of no time, is a mistake said at once."""
        with pytest.raises(ValueError, match="max_connections"):
            RedisStore(redis_url, max_connections=0)
        with pytest.raises(ValueError, match="owner_connections"):
            RedisStore(redis_url, owner_connections=0)
        with pytest.raises(ValueError, match="pool_timeout"):
            RedisStore(redis_url, pool_timeout=0)


async def xread_calls(admin: aioredis.Redis) -> int:
    stats = await admin.info("commandstats")
    return int(stats.get("cmdstat_xread", {}).get("calls", 0))


class TestSharedReader:
    async def test_many_waiting_reads_of_a_run_share_one_xread(
        self, store: RedisStore, admin: aioredis.Redis
    ) -> None:
        """200 reads waiting on one run all get the batch, from one or two XREADs, not 200."""
        await opened(store)
        await store.append("t", "r", events(1))
        before = await xread_calls(admin)

        waiting = [asyncio.create_task(store.read("t", "r", 1, wait=5)) for _ in range(200)]
        await asyncio.sleep(0.1)
        await store.append("t", "r", events(2, 1))
        pages = await asyncio.gather(*waiting)
        calls = await xread_calls(admin) - before

        assert all([(2, events(1, 1)[0]), (3, events(1, 2)[0])] == p.entries for p in pages)
        assert calls <= 3

    async def test_a_thousand_waiters_half_of_them_leaving_leave_nothing_behind(
        self, store: RedisStore
    ) -> None:
        """1,000 waits on one run, 500 cancelled (followers gone): the rest get the batch."""
        await opened(store)
        waiting = [asyncio.create_task(store.read("t", "r", 0, wait=10)) for _ in range(1000)]
        await asyncio.sleep(0.1)
        for task in waiting[::2]:
            task.cancel()
        await store.append("t", "r", events(2))
        pages = await asyncio.gather(*waiting[1::2])

        assert all([(1, events(1)[0]), (2, events(1, 1)[0])] == p.entries for p in pages)
        await asyncio.wait(waiting[::2])
        assert all(t.cancelled() for t in waiting[::2])
        # No waiter outlives its read: the reader's table is what a later wait starts from.
        assert {} == store._reader._waiting

    async def test_reads_of_several_runs_share_the_reader_and_each_gets_its_own(
        self, store: RedisStore
    ) -> None:
        """Waits on two runs (one begun while the other waits) each get their own run's events."""
        await opened(store, "a")
        first = asyncio.create_task(store.read("t", "a", 0, wait=5))
        await asyncio.sleep(0.05)
        await opened(store, "b")
        second = asyncio.create_task(store.read("t", "b", 0, wait=5))
        await asyncio.sleep(0.05)

        await store.append("t", "b", events(1, 7))
        await store.append("t", "a", events(1, 3), final=True)
        a, b = await asyncio.gather(first, second)

        assert Page([(1, events(1, 3)[0])], 1) == a
        assert Page([(1, events(1, 7)[0])], None) == b

    async def test_a_wait_that_runs_out_is_an_empty_page(self, store: RedisStore) -> None:
        """Nothing appended within the wait: an empty page, as without the shared reader."""
        await opened(store)

        assert Page([], None) == await store.read("t", "r", 0, wait=0.1)


class TestSharedCalls:
    async def test_a_read_after_an_append_sees_it_though_equal_reads_are_under_way(
        self, store: RedisStore
    ) -> None:
        """Equal concurrent reads share a round trip, but never one sent before the caller's
        append returned: read-your-writes holds."""
        await opened(store)
        last = 0
        for i in range(30):
            before = [asyncio.create_task(store.read("t", "r", 0)) for _ in range(3)]
            for _ in range(i % 4):
                await asyncio.sleep(0)  # the earlier reads at every stage of their trip
            last = await store.append("t", "r", events(1, i), first=last + 1)
            page = await store.read("t", "r", 0)
            await asyncio.gather(*before)

            assert last == page.entries[-1][0]

    async def test_equal_reads_made_together_share_one_round_trip(
        self, store: RedisStore, admin: aioredis.Redis
    ) -> None:
        """100 equal reads started in one turn of the loop cost one script call."""
        await opened(store)
        await store.append("t", "r", events(3))
        await store.read("t", "r", 0)  # the read script is loaded (a first EVALSHA fails)
        stats = await admin.info("commandstats")
        before = int(stats.get("cmdstat_evalsha", {}).get("calls", 0))

        pages = await asyncio.gather(*(store.read("t", "r", 1) for _ in range(100)))
        stats = await admin.info("commandstats")
        calls = int(stats["cmdstat_evalsha"]["calls"]) - before

        assert all([2, 3] == [seq for seq, _ in page.entries] for page in pages)
        assert 1 == calls

    async def test_a_wait_past_the_log_does_not_spin_on_the_batches_before_it(
        self, store: RedisStore, admin: aioredis.Redis
    ) -> None:
        """Batches that land before a far cursor are read once, not again and again."""
        await opened(store)
        waiting = asyncio.create_task(store.read("t", "r", 1000, wait=0.5))
        await asyncio.sleep(0.05)
        before = await xread_calls(admin)
        for i in range(5):
            await store.append("t", "r", events(1, i))

        assert Page([], None) == await waiting
        assert await xread_calls(admin) - before < 20
