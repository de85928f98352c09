"""MemoryStore's bounds (issue 31, item 8), idempotent appends and discards."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
from test_detached_failures import request

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_RUNS,
    MemoryStore,
    RunEndedError,
    RunNotFoundError,
    SequenceGapError,
    StoreFullError,
    StoreUnavailableError,
)

MiB = 1024 * 1024


def events(n: int, size: int = 10) -> list[bytes]:
    return [json.dumps({"type": "CUSTOM", "name": "n", "value": "x" * size}).encode()] * n


async def opened(store: MemoryStore, run: str, input: bytes = b"{}", owner: str = "w") -> None:
    await store.create("t", run, input=input, owner=owner, lease=10)


async def ended(store: MemoryStore, run: str, n: int = 1) -> None:
    await opened(store, run)
    await store.append("t", run, events(n), final=True)


class TestBounds:
    def test_the_defaults_keep_a_whole_run_of_a_million_events(self) -> None:
        """The documented maximum run (1,000,000 text deltas) fits the default bounds."""
        store = MemoryStore()
        delta = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"run-msg-1","delta":"word "}'

        assert (store.max_events, store.max_runs, store.max_bytes) == (
            DEFAULT_MAX_EVENTS,
            DEFAULT_MAX_RUNS,
            DEFAULT_MAX_BYTES,
        )
        assert DEFAULT_MAX_EVENTS == 1_000_000
        assert DEFAULT_MAX_EVENTS * (len(delta) + 48) < DEFAULT_MAX_BYTES

    async def test_ended_runs_are_evicted_oldest_first_to_make_room(self) -> None:
        """Past max_runs, the run that ended first goes; runs still going are kept."""
        store = MemoryStore(max_runs=3)
        await opened(store, "live")
        await ended(store, "old")
        await ended(store, "newer")

        await opened(store, "new")

        with pytest.raises(RunNotFoundError):
            await store.info("t", "old")
        assert {"live", "newer", "new"} == {k[1] for k in store._runs}

    async def test_live_runs_alone_filling_it_refuse_a_new_run(self) -> None:
        """StoreFullError is a StoreUnavailableError, and names the bound and the fix."""
        store = MemoryStore(max_runs=2)
        await opened(store, "a")
        await opened(store, "b")

        with pytest.raises(StoreFullError, match="max_runs=2") as caught:
            await opened(store, "c")

        assert isinstance(caught.value, StoreUnavailableError)
        assert isinstance(caught.value, ConnectionError)
        assert "raise the bounds" in str(caught.value)

    async def test_bytes_are_bounded_and_a_terminal_event_is_always_taken(self) -> None:
        """An append that does not fit is refused; the run can still end."""
        store = MemoryStore(max_bytes=20_000)
        await opened(store, "r")
        await store.append("t", "r", events(50, 100))

        with pytest.raises(StoreFullError):
            await store.append("t", "r", events(50, 100))
        last = await store.append("t", "r", events(1), final=True)

        assert last == 51
        assert store.size <= 20_000 + len(events(1)[0]) + 48

    async def test_trimmed_and_evicted_bytes_are_given_back(self) -> None:
        """size counts what is held: trimming past max_events and evicting free their bytes."""
        store = MemoryStore(max_events=10, max_runs=1)
        await opened(store, "r")
        for _ in range(100):
            await store.append("t", "r", events(10))
        held = store.size
        await store.append("t", "r", events(1), final=True)
        await opened(store, "s")  # evicts r

        one = len(events(1)[0]) + 48  # an event, with its bookkeeping
        assert held == 2 + 1024 + 10 * one  # the input, the run's own, the last ten events
        assert store.size == 2 + 1024


class TestIdempotentAppends:
    async def test_a_batch_already_written_is_not_written_again(self) -> None:
        store = MemoryStore()
        await opened(store, "r")
        assert await store.append("t", "r", events(3), first=1) == 3

        again = await store.append("t", "r", events(3), first=1)
        # A batch lands whole or not at all, so one that half-overlaps the log is no retry.
        with pytest.raises(SequenceGapError):
            await store.append("t", "r", events(4), first=3)

        assert 3 == again
        assert (await store.info("t", "r")).last == 3

    async def test_a_retried_final_batch_that_landed_returns_its_end(self) -> None:
        store = MemoryStore()
        await opened(store, "r")
        await store.append("t", "r", events(2), final=True, first=1)

        assert await store.append("t", "r", events(2), final=True, first=1) == 2
        with pytest.raises(RunEndedError):
            await store.append("t", "r", events(1), first=3)

    async def test_a_gap_is_refused(self) -> None:
        store = MemoryStore()
        await opened(store, "r")

        with pytest.raises(SequenceGapError, match="does not fit"):
            await store.append("t", "r", events(1), first=2)


class TestDiscard:
    async def test_only_the_owners_run_without_events_is_discarded(self) -> None:
        store = MemoryStore()
        await opened(store, "empty", owner="me")
        await opened(store, "other", owner="them")
        await opened(store, "started", owner="me")
        await store.append("t", "started", events(1))

        assert await store.discard("t", "empty", owner="me")
        assert not await store.discard("t", "other", owner="me")
        assert not await store.discard("t", "started", owner="me")
        assert not await store.discard("t", "never", owner="me")
        with pytest.raises(RunNotFoundError):
            await store.info("t", "empty")


async def test_300_posts_with_1_mb_inputs_stay_within_the_bound() -> None:
    """Issue 31: 300 such POSTs added 289 MB, kept for an hour; now at most max_bytes."""
    bound = 64 * MiB

    async def agent(run: ar.Run) -> None:
        ar.say("ok")

    store = MemoryStore(max_bytes=bound)
    app = AgentApp(agent, store=store)
    text = "x" * 990_000
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        sizes = []
        for i in range(300):
            payload = {
                "threadId": "t",
                "runId": f"r{i}",
                "messages": [{"id": f"m{i}", "role": "user", "content": text}],
                "state": {},
            }
            answer = await request(app, "POST", "/", payload)
            assert answer.status == 200
            assert answer.events()[-1]["type"] == "RUN_FINISHED"
            sizes.append(store.size)
        del answer, payload
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()

    assert max(sizes) <= bound
    assert len(store._runs) < 300  # the oldest ended runs were evicted
    assert grown < bound + 8 * MiB
    print(f"\nheld at most {max(sizes) / MiB:.1f} MiB, grew {grown / MiB:.1f} MiB")


async def test_a_retry_never_takes_the_worker_lost_event_for_its_own() -> None:
    """A follower ended the run lost at the owner's next place: the owner's retry is refused."""
    store = MemoryStore()
    await store.create("t", "r", input=b"{}", owner="w", lease=1e-9)  # lapsed at once
    await store.append("t", "r", events(2), first=1)
    assert await store.end_lost("t", "r", b'{"type":"RUN_ERROR","message":"lost"}')

    with pytest.raises(RunEndedError):
        await store.append("t", "r", events(1), first=3)
    assert await store.append("t", "r", events(2), first=1) == 2  # its own batch, landed


async def test_redis_discards_only_the_owners_run_without_events(redis_url: str) -> None:
    """RedisStore.discard: the same contract as MemoryStore's, against a real Redis."""
    import uuid

    from ambient_runs.stores.redis import RedisStore

    store = RedisStore(redis_url, prefix=f"discard-{uuid.uuid4().hex}:")
    try:
        for run in ("empty", "started"):
            await store.create("t", run, input=b"{}", owner="me", lease=10)
        await store.append("t", "started", events(1))

        assert not await store.discard("t", "empty", owner="them")
        assert not await store.discard("t", "started", owner="me")
        assert await store.discard("t", "empty", owner="me")
        with pytest.raises(RunNotFoundError):
            await store.info("t", "empty")
        await store.create("t", "empty", input=b"{}", owner="me", lease=10)  # free again
    finally:
        await store.aclose()
