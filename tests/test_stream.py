"""Tests for `ambient_runs._stream`: an agent's events as an async iterator."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from typing import Any

import pytest

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._outcomes import GENERIC_MESSAGE
from ambient_runs._stream import EventStream, StreamStatistics, stream
from ambient_runs.testing import assert_valid, capture_events, make_input, wire

INPUT = {"threadId": "t", "runId": "r", "messages": []}


def stream_tasks() -> set[asyncio.Task[Any]]:
    """Return the agent tasks of every stream still alive in this loop."""
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("ambient_runs.stream")}


async def collect(events: EventStream) -> list[ev.BaseEvent]:
    """Read *events* to the end."""
    return [e async for e in events]


async def hello(run: ar.Run) -> None:
    """Say hello in three streamed pieces."""
    with ar.message(id="m") as m:
        for piece in ("Hel", "lo", "!"):
            m.write(piece)
            await asyncio.sleep(0)


class TestStream:
    async def test_events_arrive_in_emit_order(self) -> None:
        """Every event reaches the consumer, in the order the agent emitted it."""
        with capture_events() as emitted:
            received = await collect(stream(hello, INPUT))

        assert emitted == received
        assert [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
        ] == [e["type"] for e in wire(received)]
        assert_valid(received)

    async def test_return_value_becomes_the_run_result(self) -> None:
        """What the agent returns is RUN_FINISHED.result."""

        async def agent(run: ar.Run) -> dict[str, int]:
            return {"answer": 42}

        *_, last = await collect(stream(agent, INPUT))

        assert ev.RunFinishedEvent(thread_id="t", run_id="r", result={"answer": 42}) == last

    async def test_none_return_value_sends_no_result(self) -> None:
        """An agent returning None finishes the run without a result."""
        *_, last = await collect(stream(hello, INPUT))

        assert ev.RunFinishedEvent(thread_id="t", run_id="r") == last

    async def test_accepts_a_run_agent_input(self) -> None:
        """The input may be a RunAgentInput as well as its wire dict."""
        first, *_ = await collect(stream(hello, make_input("t2", "r2")))

        assert ("t2", "r2") == (first.thread_id, first.run_id)  # type: ignore[attr-defined]

    async def test_passes_run_options_through(self) -> None:
        """Transformers, state and echo_input reach the Run."""

        def shout(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.TextMessageContentEvent):
                return ev.TextMessageContentEvent(message_id=event.message_id, delta="HI")
            return event

        async def agent(run: ar.Run) -> Any:
            ar.say("hi")
            return run.state()

        events = await collect(
            stream(agent, INPUT, transformers=[shout], state={"n": 1}, echo_input=True)
        )

        assert "HI" == events[2].delta  # type: ignore[attr-defined]
        assert {"n": 1} == events[-1].result  # type: ignore[attr-defined]
        assert events[0].input is not None  # type: ignore[attr-defined]

    async def test_invalid_input_raises_at_once(self) -> None:
        """A wire dict that is not a RunAgentInput fails when the stream is made."""
        with pytest.raises(ar.InvalidInputError):
            stream(hello, {"threadId": 1})

    async def test_refuses_a_sink(self) -> None:
        """The stream owns the run's sink."""
        with pytest.raises(TypeError, match="sink"):
            stream(hello, INPUT, sink=print)

    async def test_refuses_a_negative_buffer(self) -> None:
        """The high-water mark cannot be negative."""
        with pytest.raises(ValueError, match="buffer"):
            stream(hello, INPUT, buffer=-1)

    async def test_does_not_start_before_iterated(self) -> None:
        """The agent task starts on the first iteration, not when the stream is made."""
        events = stream(hello, INPUT)
        await asyncio.sleep(0)

        assert set() == stream_tasks()
        assert "not started" in repr(events)
        await events.aclose()

    async def test_events_from_threads_wake_the_consumer(self) -> None:
        """Events a worker thread emits reach a consumer that is waiting for them."""

        async def agent(run: ar.Run) -> None:
            for i in range(3):
                await asyncio.to_thread(run.say, f"from a thread {i}")
                await asyncio.sleep(0.01)

        events = await collect(stream(agent, INPUT))

        deltas = [e.delta for e in events if isinstance(e, ev.TextMessageContentEvent)]
        assert [f"from a thread {i}" for i in range(3)] == deltas


class TestStreamErrors:
    async def test_agent_exception_ends_the_stream_with_run_error(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The exception becomes the last event, RUN_ERROR; it is logged, not raised."""

        async def agent(run: ar.Run) -> None:
            ar.say("working")
            msg = "the model is down"
            raise ConnectionError(msg)

        with caplog.at_level(logging.ERROR, logger="ambient_runs"):
            events = await collect(stream(agent, INPUT, expose_errors=True))

        assert ev.RunErrorEvent(message="the model is down", code="ConnectionError") == events[-1]
        assert_valid(events)
        [record] = caplog.records
        assert isinstance(record.exc_info and record.exc_info[1], ConnectionError)

    async def test_run_that_cannot_start_still_ends_with_run_error(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A run that fails before RUN_STARTED gets a RUN_ERROR from the stream itself."""

        def broken(event: ev.BaseEvent) -> ev.BaseEvent:
            msg = "transformer broke"
            raise RuntimeError(msg)

        with caplog.at_level(logging.CRITICAL, logger="ambient_runs"):
            events = await collect(stream(hello, INPUT, transformers=[broken]))

        # Its RUN_ERROR fails in the same transformer: a generic one goes out past it.
        assert [ev.RunErrorEvent(message=GENERIC_MESSAGE, code="RuntimeError")] == events
        assert_valid(events)

    async def test_interrupt_is_not_an_error(self) -> None:
        """Interrupted ends the run with an interrupt outcome; the stream ends normally."""

        async def agent(run: ar.Run) -> None:
            raise ar.Interrupted(ar.Interrupt(id="i1", reason="confirmation"))

        *_, last = await collect(stream(agent, INPUT))

        assert isinstance(last.outcome, ev.RunFinishedInterruptOutcome)  # type: ignore[attr-defined]


async def forever(run: ar.Run) -> None:
    """Emit a delta every 10 ms for (at most) ten seconds."""
    with ar.message() as m:
        for i in range(1000):
            m.write(f"{i} ")
            await asyncio.sleep(0.01)


class TestStreamClosing:
    async def test_aclose_cancels_the_agent_with_a_cancelled_outcome(self) -> None:
        """Closing early cancels the agent; the run ends with the cancelled outcome."""
        with capture_events() as emitted:
            events = stream(forever, INPUT)
            async for event in events:
                if isinstance(event, ev.TextMessageContentEvent):
                    break
            await events.aclose()

        assert set() == stream_tasks()
        assert isinstance(emitted[-1].outcome, ev.RunFinishedCancelledOutcome)  # type: ignore[attr-defined]
        assert_valid(emitted)
        assert [] == [e async for e in events]

    async def test_aclosing_a_finished_stream_does_nothing(self) -> None:
        """aclose after the end (e.g. through contextlib.aclosing) is harmless."""
        async with contextlib.aclosing(stream(hello, INPUT)) as events:
            received = [e async for e in events]

        assert "RUN_FINISHED" == wire(received)[-1]["type"]
        assert "closed" in repr(events)

    async def test_cancelled_consumer_cancels_the_agent(self) -> None:
        """A consumer task cancelled while it waits for an event takes the agent down."""
        agent_cancelled = asyncio.Event()

        async def agent(run: ar.Run) -> None:
            try:
                await forever(run)
            except asyncio.CancelledError:
                agent_cancelled.set()
                raise

        async def consume() -> None:
            async for _ in stream(agent, INPUT):
                pass

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer

        assert agent_cancelled.is_set()
        assert set() == stream_tasks()

    async def test_dropped_stream_cancels_the_agent(self) -> None:
        """A stream dropped without aclose (break, then forgotten) cancels its agent."""
        async for _ in stream(forever, INPUT):
            break
        agents = stream_tasks()
        gc.collect()
        await asyncio.wait(agents, timeout=1)

        assert set() == stream_tasks()


class TestStreamBackpressure:
    async def test_drain_waits_while_the_consumer_does_not_read(self) -> None:
        """A producer that drains stops near the high-water mark while nobody reads."""
        emitted = 0

        async def producer(run: ar.Run) -> None:
            nonlocal emitted
            with ar.message() as m:
                for _ in range(10_000):
                    m.write("x")
                    emitted += 1
                    if emitted % 10 == 0:
                        await ar.drain()

        events = stream(producer, INPUT, buffer=100, verify=False)
        await anext(events)
        await asyncio.sleep(0.05)  # the consumer stalls; the producer must stop too

        assert emitted <= 100 + 10
        assert 110 >= events.statistics().buffered > 100
        received = 1 + len([e async for e in events])
        assert 10_000 + 4 == received

    async def test_drain_lets_a_woken_consumer_run_first(self) -> None:
        """Below the mark, drain() yields to a consumer it woke: the first event is not held."""
        written = 0
        seen_at: list[int] = []

        async def producer(run: ar.Run) -> None:
            nonlocal written
            with ar.message() as m:
                for _ in range(2000):
                    m.write("x")
                    written += 1
                    await ar.drain()

        events = stream(producer, INPUT, buffer=1024, verify=False)
        async for _ in events:
            seen_at.append(written)

        assert 2004 == len(seen_at)
        assert seen_at[0] <= 1  # RUN_STARTED is read before the second write
        # ...and the consumer keeps up in doubling batches, never near the mark.
        assert events.statistics().max_buffered <= 300

    async def test_run_started_goes_out_before_the_agent_runs(self) -> None:
        """Time to first byte: the first frame never waits for an agent that never yields."""
        written = 0

        async def producer(run: ar.Run) -> None:
            nonlocal written
            with ar.message() as m:
                for _ in range(500):  # no drain(), no await: a burst to the end
                    m.write("x")
                    written += 1

        for read in ("_take", "_now"):  # what AgentApp and sse.frames read
            written = 0
            events = stream(producer, INPUT)
            take = getattr(events, read)
            first = await take()
            assert (written, len(first)) == (0, 1)
            assert isinstance(first[0], ev.RunStartedEvent)
            rest: list[Any] = []
            while batch := await take():
                rest.extend(batch)
            assert written == 500
            assert [type(e) for e in (rest[0], rest[-2], rest[-1])] == [
                ev.TextMessageStartEvent,
                ev.TextMessageEndEvent,
                ev.RunFinishedEvent,
            ]
            assert len(rest) == 1 + 500 + 2

    async def test_batches_double_while_the_agent_bursts(self) -> None:
        """What `AgentApp` reads (`_take`): every buffered event, in batches that double."""

        async def producer(run: ar.Run) -> None:
            with ar.message() as m:
                for _ in range(3000):
                    m.write("x")
                    await ar.drain()

        events = stream(producer, INPUT, verify=False)
        sizes = []
        while batch := await events._take():
            sizes.append(len(batch))

        assert 3004 == sum(sizes)
        assert sizes[0] <= 4
        assert max(sizes) <= 256 + 1
        assert len(sizes) <= 24, sizes

    @pytest.mark.parametrize("how", ["drain", "astream"])
    async def test_an_agent_that_awaits_is_read_as_it_goes(self, how: str) -> None:
        """
        An agent draining after every token (or `astream`) is not run through to the end
        before its consumer: the first delta is read after the first few tokens, and the
        consumer is never more than one batch behind (not after a thousand).
        """
        read: list[bytes] = []
        # Before each token: how many deltas the consumer has read (after RUN_STARTED
        # and TEXT_MESSAGE_START).
        seen: list[int] = []

        async def tokens() -> Any:
            for _ in range(1000):
                seen.append(len(read) - 2)
                yield "x"

        async def agent(run: ar.Run) -> None:
            with ar.message() as m:
                if how == "astream":
                    await m.astream(tokens())
                    return
                async for token in tokens():
                    m.write(token)
                    await ar.drain()

        async for frame in sse.frames(stream(agent, INPUT)):
            read.append(frame)

        assert 2 + 1000 + 2 == len(read)
        assert seen[8] >= 1, seen[:9]  # the first delta was read before the 9th token
        assert max(i - n for i, n in enumerate(seen)) <= 256  # at most a batch behind

    async def test_million_events_to_a_slow_consumer_stay_bounded(self) -> None:
        """A fast producer of 1,000,000 events never buffers much past the high-water mark."""
        total, every, high = 1_000_000, 100, 1024

        async def producer(run: ar.Run) -> None:
            with ar.message() as m:
                for i in range(total):
                    m.write("x")
                    if i % every == 0:
                        await ar.drain()

        events = stream(producer, INPUT, buffer=high, verify=False)
        received = 0
        async for _ in events:
            received += 1
            if received % 64 == 0:
                await asyncio.sleep(0)  # the consumer lets the loop run: a slow client

        stats = events.statistics()
        assert total + 4 == received
        assert StreamStatistics(buffered=0, max_buffered=stats.max_buffered, high_water=high) == (
            stats
        )
        assert stats.max_buffered <= high + every + 4

    async def test_astream_applies_backpressure(self) -> None:
        """MessageHandle.astream drains after every chunk."""

        async def chunks() -> Any:
            for _ in range(1000):
                yield "x"

        async def producer(run: ar.Run) -> None:
            with ar.message() as m:
                await m.astream(chunks())

        events = stream(producer, INPUT, buffer=10)
        received = [e async for e in events]

        assert 1004 == len(received)
        assert events.statistics().max_buffered <= 10 + 2

    async def test_without_a_consumer_drain_returns_at_once(self) -> None:
        """Run.drain outside a stream returns at once (nothing to wait for)."""
        async with ar.Run(INPUT) as run:
            await run.drain()
            ar.say("done")

        assert 5 == len(run.events)
