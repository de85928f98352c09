"""Tests for ambient_runs.transform and the run's transformer pipeline."""

from __future__ import annotations

import itertools

import pytest
from support.events import types_of

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import transform
from ambient_runs.testing import assert_valid, make_input
from ambient_runs.transform import RedactContent, StampMetadata, Timestamps


class TestTimestamps:
    def test_stamps_integer_ms_from_the_injected_clock(self) -> None:
        """Every event gets the next value of the injected clock as its timestamp."""
        clock = itertools.count(1_000)

        with ar.Run(make_input("t", "r"), transformers=[Timestamps(lambda: next(clock))]) as run:
            ar.say("hi")

        assert [1000, 1001, 1002, 1003, 1004] == [e.timestamp for e in run.events]

    def test_keeps_an_existing_timestamp(self) -> None:
        """An event that already has a timestamp keeps it."""
        event = ev.CustomEvent(name="x", value=1, timestamp=7)

        assert event is Timestamps(lambda: 99)(event)

    def test_default_clock_gives_ints(self) -> None:
        """The default clock produces integer milliseconds, which the protocol requires."""
        stamped = Timestamps()(ev.CustomEvent(name="x", value=None))

        assert isinstance(stamped.timestamp, int)

    def test_a_float_clock_is_refused_by_the_event(self) -> None:
        """A clock returning floats cannot put a float timestamp on the wire."""
        with pytest.raises(ar.InvalidEventError, match="timestamp"):
            Timestamps(lambda: 1.5)(ev.CustomEvent(name="x", value=None))  # type: ignore[arg-type,return-value]


class TestStampMetadata:
    def test_merges_fields_and_the_event_wins(self) -> None:
        """Configured fields are merged into metadata; the event's own keys take precedence."""
        stamp = StampMetadata({"tenant": "acme", "k": "default"})

        out = stamp(ev.CustomEvent(name="x", value=None, metadata={"k": "own"}))

        assert {"tenant": "acme", "k": "own"} == out.metadata

    def test_rejects_the_reserved_key(self) -> None:
        """The ag-ui metadata key is reserved for the protocol."""
        with pytest.raises(ValueError, match="reserved"):
            StampMetadata({"ag-ui": 1})


class TestRedactContent:
    def test_redacts_matching_deltas_and_keeps_ids(self) -> None:
        """Text deltas matching the predicate are replaced; ids and attribution stay."""
        redact = RedactContent(lambda text: "secret" in text)
        event = ev.TextMessageContentEvent(message_id="m", delta="a secret", subagent_run_id="s")

        out = redact(event)

        assert ("[redacted]", "m", "s") == (out.delta, out.message_id, out.subagent_run_id)

    def test_leaves_other_content_alone(self) -> None:
        """Non-matching text and events without content pass through untouched."""
        redact = RedactContent(lambda text: "secret" in text)
        fine = ev.TextMessageContentEvent(message_id="m", delta="hello")
        other = ev.StepStartedEvent(step_name="secret")

        assert (fine, other) == (redact(fine), redact(other))

    def test_redacts_text_parts_of_tool_results(self) -> None:
        """Text parts of a tool result are redacted part by part."""
        redact = RedactContent(lambda text: text == "pw", replacement="***")
        event = ev.ToolCallResultEvent(
            message_id="m",
            tool_call_id="c",
            content=[ev.TextPart(text="pw"), ev.TextPart(text="ok")],
        )

        out = redact(event)

        assert ("***", "ok") == tuple(p.text for p in out.content)  # type: ignore[union-attr]


class TestContentFields:
    def test_read_from_the_model(self) -> None:
        """The text fields RedactContent looks at are every delta or content that holds text."""
        expected = {
            ev.TextMessageContentEvent: "delta",
            ev.TextMessageChunkEvent: "delta",
            ev.ReasoningMessageContentEvent: "delta",
            ev.ReasoningMessageChunkEvent: "delta",
            ev.ToolCallArgsEvent: "delta",
            ev.ToolCallChunkEvent: "delta",
            ev.ToolCallResultEvent: "content",
        }

        assert expected == transform._CONTENT_FIELDS

    def test_a_new_text_event_would_be_found(self) -> None:
        """The rule is by field and type: a text delta counts, a patch or an object does not."""
        assert (True, True, False, False) == (
            transform._holds_text(str),
            transform._holds_text(str | None),
            transform._holds_text(tuple[ev.JsonPatchOperation, ...]),
            transform._holds_text(dict[str, object]),
        )


class TestPipeline:
    def test_transformers_apply_in_order(self) -> None:
        """Each transformer sees the previous one's output."""
        seen: list[str] = []

        def first(event: ev.BaseEvent) -> ev.BaseEvent:
            seen.append("first")
            return event

        def second(event: ev.BaseEvent) -> ev.BaseEvent:
            seen.append("second")
            return event

        with ar.Run(make_input("t", "r"), transformers=[first, second]):
            pass

        assert ["first", "second", "first", "second"] == seen

    def test_a_transformer_can_drop_events(self) -> None:
        """Returning None drops the event: it is neither verified nor delivered."""

        def drop_custom(event: ev.BaseEvent) -> ev.BaseEvent | None:
            return None if isinstance(event, ev.CustomEvent) else event

        with ar.Run(make_input("t", "r"), transformers=[drop_custom]) as run:
            ar.emit(ev.CustomEvent(name="x", value=1))

        assert ["RUN_STARTED", "RUN_FINISHED"] == types_of(list(run.events))

    def test_a_transformer_can_expand_events(self) -> None:
        """Returning several events sends each, in order, each verified."""

        def annotate(event: ev.BaseEvent) -> list[ev.BaseEvent]:
            if isinstance(event, ev.TextMessageEndEvent):
                return [event, ev.CustomEvent(name="ended", value=event.message_id)]
            return [event]

        with ar.Run(make_input("t", "r"), transformers=[annotate]) as run:
            mid = ar.say("hi")

        events = list(run.events)
        assert "CUSTOM" == events[4].TYPE.value
        assert mid == events[4].value  # type: ignore[attr-defined]
        assert_valid(events)

    def test_transformer_output_is_verified(self) -> None:
        """A transformer that breaks the protocol is stopped by the verifier."""

        def break_it(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.TextMessageStartEvent):
                return ev.TextMessageContentEvent(message_id="nope", delta="x")
            return event

        with ar.Run(make_input("t", "r"), transformers=[break_it]) as run:
            with pytest.raises(ar.ProtocolError):
                ar.say("hi")
            run.events.drain()

        assert ["RUN_FINISHED"] == types_of(run.events.drain())
