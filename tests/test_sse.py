"""Tests for `ambient_runs.sse`: SSE frames, byte for byte the official encoder's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import ag_ui.core
import pytest
from ag_ui.encoder import EventEncoder

from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._wire import to_wire

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

    async def test_source_errors_propagate(self) -> None:
        """An exception from the source reaches the consumer, with keep-alive too."""

        async def source() -> AsyncIterator[ev.BaseEvent]:
            yield EVENTS[0]
            msg = "source broke"
            raise RuntimeError(msg)

        frames = sse.frames(source(), keep_alive=1)
        await anext(frames)

        with pytest.raises(RuntimeError, match="source broke"):
            await anext(frames)
