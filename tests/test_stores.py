"""The run stores: MemoryStore and RedisStore behave alike, against a real Redis."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from ambient_runs.stores import (
    EventsExpiredError,
    MemoryStore,
    RunEndedError,
    RunExistsError,
    RunNotFoundError,
    RunStore,
    follow,
)
from ambient_runs.stores.redis import RedisStore

KINDS = ["memory", "redis"]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RunStore]:
    if request.param == "memory":
        made: RunStore = MemoryStore(retention=60, max_events=50)
    else:
        url = request.getfixturevalue("redis_url")
        made = RedisStore(url, prefix=f"t-{uuid.uuid4().hex}:", retention=60, max_events=50)
    try:
        yield made
    finally:
        await made.aclose()


def events(n: int, start: int = 0) -> list[bytes]:
    return [
        json.dumps({"type": "CUSTOM", "name": "n", "value": i}).encode()
        for i in range(start, start + n)
    ]


async def opened(store: RunStore, run: str = "r", lease: float = 10) -> None:
    await store.create("t", run, input=b'{"threadId":"t"}', owner="w1", lease=lease)


class TestLog:
    async def test_appends_get_dense_ids_and_read_after_a_cursor(self, store: RunStore) -> None:
        await opened(store)
        assert await store.append("t", "r", events(3)) == 3
        assert await store.append("t", "r", events(2, 3)) == 5

        page = await store.read("t", "r", 2)

        assert [seq for seq, _ in page.entries] == [3, 4, 5]
        assert [json.loads(e)["value"] for _, e in page.entries] == [2, 3, 4]
        assert page.end is None

    async def test_read_honours_limit_and_an_empty_tail(self, store: RunStore) -> None:
        await opened(store)
        await store.append("t", "r", events(10))

        assert [s for s, _ in (await store.read("t", "r", 0, limit=4)).entries] == [1, 2, 3, 4]
        assert (await store.read("t", "r", 10)).entries == []

    async def test_final_append_ends_the_run_and_later_appends_fail(self, store: RunStore) -> None:
        await opened(store)
        await store.append("t", "r", events(2), final=True)

        info = await store.info("t", "r")
        assert (info.last, info.end, info.lease_alive) == (2, 2, False)
        assert (await store.read("t", "r", 0)).end == 2
        with pytest.raises(RunEndedError, match="already ended"):
            await store.append("t", "r", events(1))

    async def test_info_carries_the_input_and_owner(self, store: RunStore) -> None:
        await opened(store)

        info = await store.info("t", "r")

        assert (info.input, info.owner, info.lease, info.end) == (
            b'{"threadId":"t"}',
            "w1",
            10,
            None,
        )
        assert info.lease_alive
        assert not info.cancel_requested

    async def test_unknown_runs_and_duplicates_are_named_errors(self, store: RunStore) -> None:
        with pytest.raises(RunNotFoundError, match="never ran on this store"):
            await store.read("t", "nope", 0)
        with pytest.raises(RunNotFoundError):
            await store.info("t", "nope")
        await opened(store)
        with pytest.raises(RunExistsError, match="new runId"):
            await opened(store)

    async def test_thread_and_run_ids_do_not_collide(self, store: RunStore) -> None:
        await store.create("a:b", "c", input=b"{}", owner="w", lease=5)
        await store.create("a", "b:c", input=b"{}", owner="w", lease=5)
        await store.append("a:b", "c", events(1))

        assert (await store.info("a", "b:c")).last == 0

    async def test_a_trimmed_cursor_is_events_expired(self, store: RunStore) -> None:
        await opened(store)
        for i in range(30):
            await store.append("t", "r", events(10, i * 10))

        with pytest.raises(EventsExpiredError, match="no longer stored") as caught:
            await store.read("t", "r", 0)
        assert caught.value.first > 1
        page = await store.read("t", "r", 295)
        assert [s for s, _ in page.entries] == [296, 297, 298, 299, 300]
        kept = await store.read("t", "r", 250, limit=100)  # at least the last 50 are kept
        assert [s for s, _ in kept.entries] == list(range(251, 301))

    async def test_reads_span_many_batches_and_stop_at_the_limit(self, store: RunStore) -> None:
        await opened(store, "many")
        for i in range(45):  # more batches than one scan of the log holds
            await store.append("t", "many", events(1, i))

        every = await store.read("t", "many", 0, limit=1000)
        middle = await store.read("t", "many", 10, limit=30)

        assert [s for s, _ in every.entries] == list(range(1, 46))
        assert [json.loads(e)["value"] for _, e in every.entries] == list(range(45))
        assert [s for s, _ in middle.entries] == list(range(11, 41))

    async def test_a_cursor_inside_a_batch_reads_the_rest_of_it(self, store: RunStore) -> None:
        await opened(store)
        await store.append("t", "r", events(10))
        await store.append("t", "r", events(10, 10), final=True)

        for after in (0, 4, 9, 10, 15, 19):
            page = await store.read("t", "r", after, limit=7)
            seqs = list(range(after + 1, min(after + 8, 21)))
            assert [s for s, _ in page.entries] == seqs, after
            assert [json.loads(e)["value"] for _, e in page.entries] == [s - 1 for s in seqs]
        assert (await store.read("t", "r", 20)).entries == []

    async def test_a_line_break_in_an_event_is_refused(self, store: RunStore) -> None:
        await opened(store)
        with pytest.raises(ValueError, match="event 1 of the batch holds a line break"):
            await store.append("t", "r", [b"{}", b'{"a":\n1}'])
        with pytest.raises(ValueError, match="line break"):
            await store.append("t", "r", [b'{"a":1}\r'])
        with pytest.raises(ValueError, match="final append needs the terminal event"):
            await store.append("t", "r", [], final=True)

        assert (await store.info("t", "r")).last == 0


class TestRedisLayout:
    async def test_each_append_is_one_stream_entry(self, redis_url: str) -> None:
        import redis.asyncio as aioredis

        prefix = f"t-{uuid.uuid4().hex}:"
        store = RedisStore(redis_url, prefix=prefix, max_events=25)
        client = aioredis.Redis.from_url(redis_url)
        try:
            await opened(store)
            await store.append("t", "r", events(3))
            await store.append("t", "r", events(4, 3))
            key = f"{prefix}1:t:r:events"

            batches = await client.xrange(key)
            assert [(i, f[b"f"]) for i, f in batches] == [(b"0-3", b"1"), (b"0-7", b"4")]
            assert batches[1][1][b"d"].split(b"\n") == events(4, 3)

            for i in range(6):  # 37 events; the last 25 are 13-37: batches ending before 13 go
                await store.append("t", "r", events(5, 7 + 5 * i))
            kept = [i for i, _ in await client.xrange(key)]
            assert kept == [b"0-17", b"0-22", b"0-27", b"0-32", b"0-37"]
        finally:
            await client.aclose()
            await store.aclose()


class TestFollow:
    async def test_a_follower_sees_everything_live_up_to_the_end(self, store: RunStore) -> None:
        await opened(store)
        await store.append("t", "r", events(2))

        async def produce() -> None:
            for i in range(5):
                await asyncio.sleep(0.01)
                await store.append("t", "r", events(1, 2 + i), final=i == 4)

        seen: list[int] = []
        async with asyncio.timeout(10), asyncio.TaskGroup() as tg:
            tg.create_task(produce())
            async for seq, _ in follow(store, "t", "r", 1, poll=0.05):
                seen.append(seq)

        assert seen == [2, 3, 4, 5, 6, 7]

    async def test_many_followers_each_get_the_whole_tail(self, store: RunStore) -> None:
        await opened(store)

        async def collect() -> list[int]:
            return [seq async for seq, _ in follow(store, "t", "r", poll=0.05)]

        async with asyncio.timeout(10):
            followers = [asyncio.create_task(collect()) for _ in range(5)]
            await asyncio.sleep(0.05)
            for i in range(4):
                await store.append("t", "r", events(3, i * 3), final=i == 3)
            results = await asyncio.gather(*followers)

        assert results == [list(range(1, 13))] * 5

    async def test_a_lapsed_lease_ends_the_run_with_worker_lost(self, store: RunStore) -> None:
        await opened(store, lease=0.2)
        await store.append("t", "r", events(1))

        async with asyncio.timeout(10):
            tail = [json.loads(e) async for _, e in follow(store, "t", "r", poll=0.05)]

        assert tail[-1]["type"] == "RUN_ERROR"
        assert tail[-1]["code"] == "worker_lost"
        assert (await store.info("t", "r")).end == 2
        with pytest.raises(RunEndedError):  # the owner, back, cannot append any more
            await store.append("t", "r", events(1))

    async def test_a_renewed_lease_is_not_lost(self, store: RunStore) -> None:
        await opened(store, lease=0.3)
        for _ in range(4):
            await asyncio.sleep(0.1)
            assert await store.renew("t", "r", owner="w1", lease=0.3)

        assert not await store.end_lost("t", "r", b"{}")
        assert not await store.renew("t", "r", owner="someone else", lease=0.3)
        assert (await store.info("t", "r")).lease_alive

    async def test_end_lost_ends_a_run_once(self, store: RunStore) -> None:
        await opened(store, lease=0.05)
        await asyncio.sleep(0.15)

        done = await asyncio.gather(*(store.end_lost("t", "r", b'{"n":1}') for _ in range(5)))

        assert sorted(done) == [False] * 4 + [True]
        assert (await store.info("t", "r")).end == 1


class TestCancel:
    async def test_the_owner_hears_a_cancel_request(self, store: RunStore) -> None:
        await opened(store)
        async with asyncio.timeout(10):
            waiting = asyncio.create_task(store.wait_cancel("t", "r"))
            await asyncio.sleep(0.05)
            assert not waiting.done()
            assert await store.request_cancel("t", "r")
            await waiting

        assert (await store.info("t", "r")).cancel_requested

    async def test_a_cancel_made_before_waiting_is_not_missed(self, store: RunStore) -> None:
        await opened(store)
        await store.request_cancel("t", "r")

        async with asyncio.timeout(10):
            await store.wait_cancel("t", "r")

    async def test_an_ended_run_cannot_be_cancelled(self, store: RunStore) -> None:
        await opened(store)
        await store.append("t", "r", events(1), final=True)

        assert not await store.request_cancel("t", "r")
        with pytest.raises(RunNotFoundError):
            await store.request_cancel("t", "other")


class TestRetention:
    async def test_a_finished_run_expires_after_retention(self, redis_url: str) -> None:
        stores: list[RunStore] = [
            MemoryStore(retention=0.2),
            RedisStore(redis_url, prefix=f"t-{uuid.uuid4().hex}:", retention=0.2),
        ]
        for store in stores:
            await opened(store)
            await store.append("t", "r", events(3), final=True)
        await asyncio.sleep(0.4)
        for store in stores:
            with pytest.raises(RunNotFoundError):
                await store.read("t", "r", 0)
            await store.aclose()

    def test_bad_settings_are_refused(self, redis_url: str) -> None:
        with pytest.raises(ValueError, match="retention"):
            MemoryStore(retention=0)
        with pytest.raises(ValueError, match="max_events"):
            MemoryStore(max_events=0)
        with pytest.raises(ValueError, match="retention must be a positive number"):
            RedisStore(redis_url, retention=-1)
        with pytest.raises(ValueError, match="max_events must be at least 1"):
            RedisStore(redis_url, max_events=0)
        with pytest.raises(TypeError, match="url or client"):
            RedisStore()
