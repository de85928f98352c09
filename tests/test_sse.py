"""Tests for `ambient_runs.sse`: SSE frames, byte for byte the official encoder's."""

from __future__ import annotations

import ast
import asyncio
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import ag_ui.core
import pytest
from ag_ui.encoder import EventEncoder
from hypothesis import HealthCheck, given, settings
from support import strategies

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._wire import to_wire
from ambient_runs.errors import InvalidEventError
from ambient_runs.testing import make_input

INPUT = {"threadId": "t", "runId": "r", "messages": []}

EVENTS = [
    ev.RunStartedEvent(thread_id="t", run_id="r", protocol_version="1.0"),
    ev.TextMessageStartEvent(message_id="m", role="assistant", subagent_run_id="s1"),
    ev.TextMessageContentEvent(message_id="m", delta='naïve\nline two \u2028 "quoted" 🙂'),
    ev.StateSnapshotEvent(snapshot={"n": 1.5, "none": None, "list": [1e-7, 1e21]}),
    ev.CustomEvent(name="c", value=None),
    ev.RunErrorEvent(message="boom", code="E"),
]


def official(event: ev.BaseEvent) -> Any:
    """Return the official pydantic event equal to *event*."""
    model: Any = getattr(ag_ui.core, type(event).__name__)
    return model.model_validate(to_wire(event))


async def aiterate(*items: ev.BaseEvent, pause: float = 0) -> AsyncIterator[ev.BaseEvent]:
    """Yield *items*, sleeping *pause* seconds before each."""
    for item in items:
        await asyncio.sleep(pause)
        yield item


class TestEncode:
    @pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
    def test_matches_the_official_encoder(self, event: ev.BaseEvent) -> None:
        """The frame is the official EventEncoder's, byte for byte."""
        assert EventEncoder().encode(official(event)).encode() == sse.encode(event)

    def test_is_one_data_line_with_lf_endings(self) -> None:
        """A frame is one ``data:`` line and a blank line, LF only, newlines escaped."""
        frame = sse.encode(EVENTS[2])

        assert (True, True, False, 0) == (
            frame.startswith(b"data: {"),
            frame.endswith(b"}\n\n"),
            b"\r" in frame,
            frame.count(b"\n", 0, -2),
        )

    def test_keeps_non_ascii_raw(self) -> None:
        """Non-ASCII text is sent as raw UTF-8, not escaped."""
        assert "naïve".encode() in sse.encode(EVENTS[2])

    def test_content_type(self) -> None:
        """The media type is the one the official encoder reports."""
        assert EventEncoder().get_content_type() == sse.CONTENT_TYPE

    def test_is_defined_by_a_def(self) -> None:
        """ "Go to definition" on ``sse.encode`` finds a def with the documented signature."""
        tree = ast.parse(Path(sse.__file__).read_text())
        defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assigned = [
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign | ast.AnnAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        ]

        assert "encode" in defs
        assert "encode" not in assigned
        assert ("encode", "ambient_runs.sse", ["obj"]) == (
            sse.encode.__name__,
            sse.encode.__module__,
            list(inspect.signature(sse.encode).parameters),
        )
        assert "SSE frame" in (sse.encode.__doc__ or "")

    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(event=strategies.events())
    def test_same_bytes_as_its_reference_definition(self, event: ev.BaseEvent) -> None:
        """The fast encoder that runs writes what the def's own body writes."""
        reference = sse.encode.__wrapped__  # type: ignore[attr-defined]

        assert reference(event) == sse.encode(event)

    @pytest.mark.parametrize(
        "event",
        [
            ev.CustomEvent(name="c", value=float("nan")),
            ev.CustomEvent(name="c", value={1, 2}),
            ev.TextMessageContentEvent(message_id="m", delta="a\ud800b"),
            ev.RawEvent(event={"s": "\udfff"}),
        ],
        ids=["nan", "set", "surrogate-fast-path", "surrogate-general-path"],
    )
    def test_fails_as_its_reference_definition(self, event: ev.BaseEvent) -> None:
        """What has no JSON form fails the same way through both."""
        reference = sse.encode.__wrapped__  # type: ignore[attr-defined]
        with pytest.raises(InvalidEventError) as fast:
            sse.encode(event)
        with pytest.raises(InvalidEventError) as slow:
            reference(event)

        assert str(slow.value) == str(fast.value)


class TestFrames:
    async def test_encodes_each_event_in_order(self) -> None:
        """Each event becomes its frame, in order."""
        frames = [f async for f in sse.frames(aiterate(*EVENTS))]

        assert [sse.encode(e) for e in EVENTS] == frames

    async def test_keep_alive_comments_fill_the_silence(self) -> None:
        """A keep-alive comment goes out after each stretch of silence; events are intact."""
        frames = [f async for f in sse.frames(aiterate(*EVENTS[:2], pause=0.06), keep_alive=0.02)]

        data = [f for f in frames if f != sse.KEEP_ALIVE]
        assert [sse.encode(e) for e in EVENTS[:2]] == data
        assert frames.count(sse.KEEP_ALIVE) >= 1
        assert frames[-1] != sse.KEEP_ALIVE

    async def test_no_keep_alive_while_events_flow(self) -> None:
        """A busy stream carries no comments."""
        frames = [f async for f in sse.frames(aiterate(*EVENTS), keep_alive=5)]

        assert [sse.encode(e) for e in EVENTS] == frames

    async def test_keep_alive_must_be_positive(self) -> None:
        """A zero or negative keep-alive interval is refused at once."""
        with pytest.raises(ValueError, match="keep_alive"):
            sse.frames(aiterate(), keep_alive=0)


class TestCheckKeepAlive:
    @pytest.mark.parametrize("keep_alive", [None, 0.5, 15])
    def test_returns_a_valid_interval(self, keep_alive: float | None) -> None:
        """None and positive numbers of seconds are returned as they are."""
        assert keep_alive == sse.check_keep_alive(keep_alive)

    @pytest.mark.parametrize("keep_alive", [0, -1, float("nan")])
    def test_refuses_others_naming_the_fix(self, keep_alive: float) -> None:
        """Zero, negative and NaN intervals are refused with a message saying what fits."""
        with pytest.raises(ValueError, match="positive number of seconds or None"):
            sse.check_keep_alive(keep_alive)

    @pytest.mark.parametrize("keep_alive", [None, 0.01])
    async def test_aclose_closes_the_source(self, keep_alive: float | None) -> None:
        """Closing the frames closes the events they came from, even mid-wait."""
        closed = asyncio.Event()

        async def source() -> AsyncIterator[ev.BaseEvent]:
            try:
                yield EVENTS[0]
                await asyncio.sleep(10)
                yield EVENTS[1]
            finally:
                closed.set()

        frames = sse.frames(source(), keep_alive=keep_alive)
        await anext(frames)
        if keep_alive is not None:
            assert sse.KEEP_ALIVE == await anext(frames)  # waiting on the source meanwhile
        await frames.aclose()

        assert closed.is_set()

    @pytest.mark.parametrize("keep_alive", [None, 1])
    async def test_a_failing_source_ends_with_run_error(self, keep_alive: float | None) -> None:
        """An exception from the source becomes a RUN_ERROR frame, and the frames end."""

        async def source() -> AsyncIterator[ev.BaseEvent]:
            yield EVENTS[0]
            msg = "source broke"
            raise RuntimeError(msg)

        frames = sse.frames(source(), keep_alive=keep_alive)
        await anext(frames)

        assert (
            b'data: {"type":"RUN_ERROR","message":"The agent failed; '
            b"the server's log has the details.\","
            b'"code":"RuntimeError"}\n\n' == (await anext(frames))
        )
        with pytest.raises(StopAsyncIteration):
            await anext(frames)

    async def test_an_event_that_will_not_encode_ends_with_run_error(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An event that fails in encode ends the frames with RUN_ERROR, naming the error."""
        real = sse.encode

        def encode(event: ev.BaseEvent) -> bytes:
            if event is EVENTS[1]:
                msg = "no JSON form"
                raise ar.InvalidEventError(msg)
            return real(event)

        async def source() -> AsyncIterator[ev.BaseEvent]:
            yield EVENTS[0]
            yield EVENTS[1]
            yield EVENTS[2]

        monkeypatch.setattr(sse, "encode", encode)
        out = [f async for f in sse.frames(source())]

        assert [
            real(EVENTS[0]),
            b'data: {"type":"RUN_ERROR","message":"The agent failed; '
            b"the server's log has the details.\","
            b'"code":"InvalidEventError"}\n\n',
        ] == out

    async def test_a_failure_after_the_terminal_event_propagates(self) -> None:
        """Once the terminal frame went out, a later failure is not a second terminal."""
        finished = ev.RunFinishedEvent(thread_id="t", run_id="r")

        async def source() -> AsyncIterator[ev.BaseEvent]:
            yield finished
            msg = "late"
            raise RuntimeError(msg)

        frames = sse.frames(source())
        assert sse.encode(finished) == await anext(frames)
        with pytest.raises(RuntimeError, match="late"):
            await anext(frames)


class TestBatches:
    """`sse._batches`, what `AgentApp` sends: `frames`, every ready frame joined in one item."""

    async def test_any_iterable_gives_one_frame_per_batch(self) -> None:
        """A source that is not an EventStream is taken one event at a time."""
        batches = [b async for b in sse._batches(aiterate(*EVENTS), None)]

        assert [sse.encode(e) for e in EVENTS] == batches

    async def test_a_stream_gives_the_bytes_of_frames_in_fewer_items(self) -> None:
        """Over a run's stream: the same bytes as `frames`, every buffered event per item."""

        async def agent(run: ar.Run) -> None:
            with ar.message(id="m") as m:
                for i in range(500):
                    m.write(f"{i} ")
                    await ar.drain()

        one_by_one = [f async for f in sse.frames(ar.stream(agent, INPUT))]
        batches = [b async for b in sse._batches(ar.stream(agent, INPUT), None)]

        assert b"".join(one_by_one) == b"".join(batches)
        assert 504 == len(one_by_one)
        assert len(batches) <= 12, [b.count(b"data: ") for b in batches]

    @pytest.mark.parametrize("keep_alive", [None, 0.01])
    async def test_closing_closes_the_stream_and_cancels_the_agent(
        self, keep_alive: float | None
    ) -> None:
        """aclose mid-wait closes the run's stream: the agent is cancelled."""
        cancelled = asyncio.Event()

        async def agent(run: ar.Run) -> None:
            ar.say("first")
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        batches = sse._batches(ar.stream(agent, INPUT), keep_alive)
        assert b"RUN_STARTED" in await anext(batches)  # alone: the agent has not run yet
        assert b'"delta":"first"' in await anext(batches)  # it runs, and sleeps
        if keep_alive is not None:
            assert sse.KEEP_ALIVE == await anext(batches)
        await batches.aclose()

        assert cancelled.is_set()

    @pytest.mark.parametrize("keep_alive", [None, 1])
    async def test_a_failing_source_ends_with_run_error(self, keep_alive: float | None) -> None:
        """An exception from the source becomes a RUN_ERROR frame, and the batches end."""

        async def source() -> AsyncIterator[ev.BaseEvent]:
            yield EVENTS[0]
            msg = "source broke"
            raise RuntimeError(msg)

        batches = [b async for b in sse._batches(source(), keep_alive)]

        assert [
            sse.encode(EVENTS[0]),
            b'data: {"type":"RUN_ERROR","message":"The agent failed; '
            b"the server's log has the details.\","
            b'"code":"RuntimeError"}\n\n',
        ] == batches

    async def test_the_run_error_follows_the_runs_error_policy(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A stream's run with expose_errors shows the failure's text, as `frames` does."""
        real = sse.encode

        def encode(event: ev.BaseEvent) -> bytes:
            if isinstance(event, ev.TextMessageContentEvent):
                msg = "no JSON form"
                raise ar.InvalidEventError(msg)
            return real(event)

        async def agent(run: ar.Run) -> None:
            ar.say("hi")

        monkeypatch.setattr(sse, "encode", encode)
        events = ar.stream(agent, make_input(), expose_errors=True)
        body = b"".join([b async for b in sse._batches(events, None)])

        assert body.endswith(
            b'data: {"type":"RUN_ERROR","message":"no JSON form","code":"InvalidEventError"}\n\n'
        )

    async def test_a_failure_after_the_terminal_event_propagates(self) -> None:
        """Once the terminal frame went out, a later failure is not a second terminal."""
        finished = ev.RunFinishedEvent(thread_id="t", run_id="r")

        async def source() -> AsyncIterator[ev.BaseEvent]:
            yield finished
            msg = "late"
            raise RuntimeError(msg)

        batches = sse._batches(source(), None)
        assert sse.encode(finished) == await anext(batches)
        with pytest.raises(RuntimeError, match="late"):
            await anext(batches)
