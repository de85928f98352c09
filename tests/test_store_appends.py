"""append(first=): the idempotent-append contract, alike on MemoryStore and RedisStore."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from ambient_runs.stores import (
    MemoryStore,
    RunEndedError,
    RunStore,
    SequenceGapError,
    worker_lost_event,
)
from ambient_runs.stores.redis import RedisStore


@pytest.fixture(params=["memory", "redis"])
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


async def opened(store: RunStore, lease: float = 10) -> None:
    await store.create("t", "r", input=b"{}", owner="w1", lease=lease)


async def values(store: RunStore) -> list[tuple[int, int]]:
    page = await store.read("t", "r", 0, limit=10_000)
    return [(seq, json.loads(event)["value"]) for seq, event in page.entries]


class TestFirst:
    async def test_batches_with_first_are_logged_in_order(self, store: RunStore) -> None:
        """A batch whose first is the log's next number is written; append returns its last."""
        await opened(store)

        assert 3 == await store.append("t", "r", events(3), first=1)
        assert 5 == await store.append("t", "r", events(2, 3), first=4)
        assert [(i + 1, i) for i in range(5)] == await values(store)

    async def test_a_retried_batch_that_landed_is_not_written_again(self, store: RunStore) -> None:
        """The same batch with the same first again writes nothing and says where it ended."""
        await opened(store)
        await store.append("t", "r", events(3), first=1)
        await store.append("t", "r", events(2, 3), first=4)

        again = await store.append("t", "r", events(2, 3), first=4)
        older = await store.append("t", "r", events(3), first=1)

        assert (5, 3) == (again, older)
        assert [(i + 1, i) for i in range(5)] == await values(store)

    async def test_a_retried_final_batch_after_the_end_returns_its_last(
        self, store: RunStore
    ) -> None:
        """The terminal batch retried after it landed is no RunEndedError: it is the same batch."""
        await opened(store)
        await store.append("t", "r", events(2), first=1)
        await store.append("t", "r", events(1, 2), first=3, final=True)

        assert 3 == await store.append("t", "r", events(1, 2), first=3, final=True)
        with pytest.raises(RunEndedError):
            await store.append("t", "r", events(1, 3), first=4)

    async def test_a_batch_past_the_log_is_a_gap(self, store: RunStore) -> None:
        """A first beyond the log's next number raises SequenceGapError and writes nothing."""
        await opened(store)
        await store.append("t", "r", events(2), first=1)

        with pytest.raises(SequenceGapError) as raised:
            await store.append("t", "r", events(2, 2), first=5)

        assert (5, 2) == (raised.value.first, raised.value.last)
        assert isinstance(raised.value, ValueError)
        assert [(1, 0), (2, 1)] == await values(store)

    async def test_other_events_at_the_same_numbers_do_not_count_as_landed(
        self, store: RunStore
    ) -> None:
        """A batch whose numbers are taken by different events is a conflict, not a retry."""
        await opened(store)
        await store.append("t", "r", events(2), first=1)

        with pytest.raises(SequenceGapError):
            await store.append("t", "r", events(2, 100), first=1)
        with pytest.raises(SequenceGapError):
            await store.append("t", "r", events(1, 1), first=1)  # a batch boundary apart
        assert [(1, 0), (2, 1)] == await values(store)

    async def test_a_batch_a_follower_ended_before_is_refused_as_ended(
        self, store: RunStore
    ) -> None:
        """When worker_lost took the batch's number, the owner's retry learns the run ended."""
        await opened(store, lease=0.05)
        await store.append("t", "r", events(2), first=1)
        await store.renew("t", "r", owner="w1", lease=0.001)
        for _ in range(200):
            if await store.end_lost("t", "r", worker_lost_event(0.05)):
                break
            await asyncio.sleep(0.01)

        with pytest.raises(RunEndedError):
            await store.append("t", "r", events(1, 2), first=3)

    async def test_a_first_below_one_is_refused(self, store: RunStore) -> None:
        """Sequence numbers start at 1."""
        await opened(store)

        with pytest.raises(ValueError, match="first"):
            await store.append("t", "r", events(1), first=0)

    async def test_appends_without_first_still_work(self, store: RunStore) -> None:
        """first is optional: callers that never pass it append as before."""
        await opened(store)

        assert 2 == await store.append("t", "r", events(2))
        assert 3 == await store.append("t", "r", events(1, 2), first=3)

    async def test_a_retry_of_a_batch_trimmed_since_counts_as_landed(
        self, store: RunStore
    ) -> None:
        """Past max_events the retried batch is gone, nothing to compare: its numbers are taken."""
        await opened(store)
        for start in range(0, 70, 10):
            await store.append("t", "r", events(10, start), first=start + 1)

        assert 10 == await store.append("t", "r", events(10), first=1)
        assert 70 == (await store.info("t", "r")).last
