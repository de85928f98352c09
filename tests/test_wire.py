"""Tests for ambient_runs._wire: the wire form of AG-UI objects and its JSON text."""

from __future__ import annotations

import datetime
import re
from typing import Any

import attrs
import pytest
from ag_ui.core import CustomEvent as OfficialCustomEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import strategies

from ambient_runs import InvalidEventError, InvalidInputError
from ambient_runs import events as ev
from ambient_runs._wire import encode_json, from_wire, to_wire, wire_name

PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NULL_NOT_ALLOWED = (
    "null is not allowed here; omit the key instead (AG-UI optional fields are never null)"
)
CAMEL_CASE = re.compile(r"^[a-z]+(?:[A-Z][a-z]*)*$")


def problem_paths(exc: InvalidInputError) -> list[str]:
    """Return the JSON paths *exc* names, in order."""
    return [problem.partition(": ")[0] for problem in exc.problems]


def nested_lists(depth: int) -> list[Any]:
    """Return a list nested *depth* deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class TestWireName:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("type", "type"),
            ("message_id", "messageId"),
            ("subagent_run_id", "subagentRunId"),
            ("cache_write_input_tokens", "cacheWriteInputTokens"),
            ("from_", "from"),
        ],
    )
    def test_camel_case(self, name: str, expected: str) -> None:
        """Field names are camel-cased, and from_ is spelled from."""
        actual = wire_name(name)

        assert expected == actual


class TestToWire:
    def test_keys_are_camel_case_in_official_order(self) -> None:
        """Every field goes out under its camelCase name, in the official models' order."""
        event = ev.ToolCallStartEvent(
            timestamp=1,
            raw_event={"k": 1},
            metadata={"m": 2},
            subagent_run_id="s",
            tool_call_id="c",
            tool_call_name="search",
            parent_message_id="p",
        )

        expected = [
            ("type", "TOOL_CALL_START"),
            ("timestamp", 1),
            ("rawEvent", {"k": 1}),
            ("metadata", {"m": 2}),
            ("subagentRunId", "s"),
            ("toolCallId", "c"),
            ("toolCallName", "search"),
            ("parentMessageId", "p"),
        ]

        actual = list(to_wire(event).items())

        assert expected == actual

    def test_none_optionals_are_omitted(self) -> None:
        """Optional fields without a value are left out, never written as null."""
        expected = {"type": "TEXT_MESSAGE_START", "messageId": "m"}

        actual = to_wire(ev.TextMessageStartEvent(message_id="m"))

        assert expected == actual

    def test_nested_none_optionals_are_omitted(self) -> None:
        """Nested messages, tool calls, parts, sources and inputs omit empty optionals too."""
        event = ev.RunStartedEvent(
            thread_id="t",
            run_id="r",
            input=ev.RunAgentInput(
                thread_id="t",
                run_id="r",
                messages=[
                    ev.AssistantMessage(
                        id="a",
                        tool_calls=[
                            ev.ToolCall(id="c", function=ev.FunctionCall(name="f", arguments="{}"))
                        ],
                    ),
                    ev.UserMessage(
                        id="u", content=[ev.ImagePart(source=ev.UrlSource(value="https://x"))]
                    ),
                ],
            ),
        )

        expected = {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "r",
            "input": {
                "threadId": "t",
                "runId": "r",
                "messages": [
                    {
                        "id": "a",
                        "role": "assistant",
                        "toolCalls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                    {
                        "id": "u",
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "url", "value": "https://x"}}
                        ],
                    },
                ],
            },
        }

        actual = to_wire(event)

        assert expected == actual

    @PROPERTY
    @given(event=strategies.events())
    def test_keys_are_exactly_the_fields_with_values(self, event: Any) -> None:
        """The wire keys are the camelCase names of all fields but the optional ones left None."""
        expected = {
            wire_name(a.name)
            for a in attrs.fields(type(event))
            if not (a.default is None and getattr(event, a.name) is None)
        }

        actual = to_wire(event)

        assert expected == set(actual)
        assert all(CAMEL_CASE.match(key) for key in actual)

    @pytest.mark.parametrize(
        ("event", "expected"),
        [
            pytest.param(
                ev.CustomEvent(name="n", value=None),
                {"type": "CUSTOM", "name": "n", "value": None},
                id="CUSTOM.value",
            ),
            pytest.param(
                ev.StateSnapshotEvent(snapshot=None),
                {"type": "STATE_SNAPSHOT", "snapshot": None},
                id="STATE_SNAPSHOT.snapshot",
            ),
            pytest.param(
                ev.RawEvent(event=None),
                {"type": "RAW", "event": None},
                id="RAW.event",
            ),
            pytest.param(
                ev.TextMessageEndEvent(message_id="m", metadata={"k": None}),
                {"type": "TEXT_MESSAGE_END", "metadata": {"k": None}, "messageId": "m"},
                id="inside metadata",
            ),
            pytest.param(
                ev.StateSnapshotEvent(snapshot={"a": None, "b": [None, {"c": None}]}),
                {"type": "STATE_SNAPSHOT", "snapshot": {"a": None, "b": [None, {"c": None}]}},
                id="inside state",
            ),
            pytest.param(
                ev.StateDeltaEvent(
                    delta=[
                        ev.AddOperation(path="/a", value=None),
                        ev.ReplaceOperation(path="/b", value=None),
                        ev.TestOperation(path="/c", value=None),
                    ]
                ),
                {
                    "type": "STATE_DELTA",
                    "delta": [
                        {"op": "add", "path": "/a", "value": None},
                        {"op": "replace", "path": "/b", "value": None},
                        {"op": "test", "path": "/c", "value": None},
                    ],
                },
                id="patch values",
            ),
            pytest.param(
                ev.RunFinishedEvent(thread_id="t", run_id="r", result={"x": None}),
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": {"x": None}},
                id="inside result",
            ),
        ],
    )
    def test_meaningful_nulls_are_kept(self, event: Any, expected: dict[str, Any]) -> None:
        """Required nullable payloads and nulls inside free-form JSON stay on the wire."""
        actual = to_wire(event)

        assert expected == actual

    @pytest.mark.parametrize(
        ("operation", "expected"),
        [
            (ev.MoveOperation(from_="/a", path="/b"), {"op": "move", "from": "/a", "path": "/b"}),
            (ev.CopyOperation(from_="/a", path="/b"), {"op": "copy", "from": "/a", "path": "/b"}),
        ],
        ids=["move", "copy"],
    )
    def test_move_and_copy_use_from(self, operation: Any, expected: dict[str, Any]) -> None:
        """The source path of move and copy goes out as "from", not "from_" or "fromPath"."""
        actual = to_wire(operation)

        assert expected == actual

    def test_reasoning_message_start_always_has_role(self) -> None:
        """REASONING_MESSAGE_START always carries role "reasoning", which zod requires."""
        expected = {"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "reasoning"}

        actual = to_wire(ev.ReasoningMessageStartEvent(message_id="m"))

        assert expected == actual

    @PROPERTY
    @given(event=strategies.EVENTS[ev.ReasoningMessageStartEvent])
    def test_reasoning_message_start_role_survives_any_fields(self, event: Any) -> None:
        """Whatever else it carries, a REASONING_MESSAGE_START has role "reasoning"."""
        expected = "reasoning"

        actual = to_wire(event)["role"]

        assert expected == actual

    @PROPERTY
    @given(event=strategies.events())
    def test_type_is_a_plain_string(self, event: Any) -> None:
        """The type discriminator is a plain str (not an EventType member) naming the type."""
        actual = to_wire(event)["type"]

        assert str is type(actual)
        assert type(event).TYPE.value == actual

    def test_sequences_become_lists(self) -> None:
        """Tuples of messages, parts and patch operations go out as JSON arrays (lists)."""
        wire = to_wire(
            ev.MessagesSnapshotEvent(
                messages=(ev.UserMessage(id="u", content=(ev.TextPart(text="hi"),)),)
            )
        )

        actual = (type(wire["messages"]), type(wire["messages"][0]["content"]))

        assert (list, list) == actual

    def test_free_form_json_is_not_copied(self) -> None:
        """Free-form payloads are passed through as the same object."""
        value: dict[str, Any] = {"a": [1, 2]}

        actual = to_wire(ev.CustomEvent(name="n", value=value))["value"]

        assert value is actual


class TestFromWire:
    @PROPERTY
    @given(event=strategies.events())
    def test_round_trip(self, event: Any) -> None:
        """from_wire(to_wire(event)) gives back an equal event of the same class."""
        actual = from_wire(to_wire(event))

        assert event == actual
        assert type(event) is type(actual)

    @pytest.mark.parametrize(
        "cls", [pytest.param(cls, id=cls.__name__) for cls in ev.EVENT_CLASSES.values()]
    )
    @settings(max_examples=5, deadline=None)
    @given(data=st.data())
    def test_dispatches_on_type(self, cls: type[Any], data: st.DataObject) -> None:
        """The "type" member picks the event class."""
        wire = to_wire(data.draw(strategies.EVENTS[cls]))

        actual = type(from_wire(wire))

        assert cls is actual

    def test_dispatches_messages_on_role(self) -> None:
        """Each message in a snapshot is read as the class its "role" names."""
        wire = {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                {"id": "1", "role": "developer", "content": "d"},
                {"id": "2", "role": "system", "content": "s"},
                {"id": "3", "role": "assistant"},
                {"id": "4", "role": "user", "content": "u"},
                {"id": "5", "role": "tool", "content": "t", "toolCallId": "c"},
                {"id": "6", "role": "activity", "activityType": "a", "content": {}},
                {"id": "7", "role": "reasoning", "content": "r"},
            ],
        }

        actual = [type(m) for m in from_wire(wire).messages]

        assert [
            ev.DeveloperMessage,
            ev.SystemMessage,
            ev.AssistantMessage,
            ev.UserMessage,
            ev.ToolMessage,
            ev.ActivityMessage,
            ev.ReasoningMessage,
        ] == actual

    def test_dispatches_parts_and_sources_on_type(self) -> None:
        """Content parts and their sources are read as the classes their "type" names."""
        wire = {
            "type": "TOOL_CALL_RESULT",
            "messageId": "m",
            "toolCallId": "c",
            "content": [
                {"type": "text", "text": "t"},
                {"type": "image", "source": {"type": "data", "value": "AA==", "mimeType": "a/b"}},
                {"type": "audio", "source": {"type": "url", "value": "u"}},
                {"type": "video", "source": {"type": "file", "value": "f"}},
                {"type": "document", "source": {"type": "url", "value": "u"}},
            ],
        }

        content = from_wire(wire).content
        actual = [type(p) for p in content], [type(p.source) for p in content[1:]]

        assert (
            [ev.TextPart, ev.ImagePart, ev.AudioPart, ev.VideoPart, ev.DocumentPart],
            [ev.DataSource, ev.UrlSource, ev.FileSource, ev.UrlSource],
        ) == actual

    def test_dispatches_patch_operations_on_op(self) -> None:
        """Patch operations are read as the classes their "op" names, "from" included."""
        wire = {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "add", "path": "/a", "value": 1},
                {"op": "remove", "path": "/a"},
                {"op": "replace", "path": "/a", "value": 2},
                {"op": "move", "from": "/a", "path": "/b"},
                {"op": "copy", "from": "/b", "path": "/c"},
                {"op": "test", "path": "/c", "value": 2},
            ],
        }

        actual = from_wire(wire).delta

        assert (
            ev.AddOperation(path="/a", value=1),
            ev.RemoveOperation(path="/a"),
            ev.ReplaceOperation(path="/a", value=2),
            ev.MoveOperation(from_="/a", path="/b"),
            ev.CopyOperation(from_="/b", path="/c"),
            ev.TestOperation(path="/c", value=2),
        ) == actual

    @pytest.mark.parametrize(
        ("wire", "expected"),
        [
            (
                {
                    "type": "RUN_FINISHED",
                    "threadId": "t",
                    "runId": "r",
                    "outcome": {"type": "success"},
                },
                ev.RunFinishedSuccessOutcome(),
            ),
            (
                {
                    "type": "RUN_FINISHED",
                    "threadId": "t",
                    "runId": "r",
                    "outcome": {"type": "interrupt", "interrupts": [{"id": "i", "reason": "r"}]},
                },
                ev.RunFinishedInterruptOutcome(interrupts=[ev.Interrupt(id="i", reason="r")]),
            ),
            (
                {
                    "type": "RUN_FINISHED",
                    "threadId": "t",
                    "runId": "r",
                    "outcome": {"type": "cancelled"},
                },
                ev.RunFinishedCancelledOutcome(),
            ),
            (
                {
                    "type": "SUBAGENT_FINISHED",
                    "subagentRunId": "s",
                    "outcome": {"type": "success"},
                },
                ev.SubagentFinishedSuccessOutcome(),
            ),
            (
                {
                    "type": "SUBAGENT_FINISHED",
                    "subagentRunId": "s",
                    "outcome": {"type": "suspended", "interruptIds": ["i"]},
                },
                ev.SubagentFinishedSuspendedOutcome(interrupt_ids=["i"]),
            ),
        ],
        ids=["success", "interrupt", "cancelled", "subagent success", "subagent suspended"],
    )
    def test_dispatches_outcomes_on_type(self, wire: dict[str, Any], expected: Any) -> None:
        """RUN_FINISHED and SUBAGENT_FINISHED outcomes are read as the class their "type" names."""
        actual = from_wire(wire).outcome

        assert expected == actual

    @pytest.mark.parametrize(
        ("wire", "expected"),
        [
            (
                {"type": "THINKING_START"},
                ["$.type: expected one of the 31 AG-UI event types, got 'THINKING_START'"],
            ),
            ({"stepName": "s"}, ["$.type: expected one of the 31 AG-UI event types, got None"]),
            ({"type": 5}, ["$.type: expected one of the 31 AG-UI event types, got 5"]),
            (
                {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "1", "role": "bot"}]},
                [
                    "$.messages[0]: unknown message role 'bot'; expected one of 'developer', "
                    "'system', 'assistant', 'user', 'tool', 'activity', 'reasoning'"
                ],
            ),
            (
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m",
                    "toolCallId": "c",
                    "content": [{"type": "binary", "data": "AA=="}],
                },
                [
                    "$.content[0]: unknown content part type 'binary'; expected one of 'text', "
                    "'image', 'audio', 'video', 'document'"
                ],
            ),
            (
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m",
                    "toolCallId": "c",
                    "content": [{"type": "image", "source": {"type": "blob", "value": "v"}}],
                },
                [
                    "$.content[0].source: unknown source type 'blob'; expected one of 'data', "
                    "'url', 'file'"
                ],
            ),
            (
                {"type": "STATE_DELTA", "delta": [{"op": "merge", "path": "/a"}]},
                [
                    "$.delta[0]: unknown patch operation op 'merge'; expected one of 'add', "
                    "'remove', 'replace', 'move', 'copy', 'test'"
                ],
            ),
            (
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "ok"}},
                [
                    "$.outcome: unknown run outcome type 'ok'; expected one of 'success', "
                    "'interrupt', 'cancelled'"
                ],
            ),
        ],
        ids=[
            "retired type",
            "no type",
            "type not a string",
            "role",
            "part",
            "source",
            "op",
            "outcome",
        ],
    )
    def test_unknown_tags_are_rejected(self, wire: dict[str, Any], expected: list[str]) -> None:
        """An unknown type, role, part type, source type, op or outcome type is named by path."""
        with pytest.raises(InvalidInputError) as caught:
            from_wire(wire)

        assert expected == list(caught.value.problems)

    @pytest.mark.parametrize(
        "value", [[], "RUN_STARTED", 1, None], ids=["array", "string", "number", "null"]
    )
    def test_non_objects_are_rejected(self, value: object) -> None:
        """A wire event must be a JSON object."""
        with pytest.raises(InvalidInputError) as caught:
            from_wire(value)

        expected = ["$"]

        assert expected == problem_paths(caught.value)

    def test_unknown_keys_are_ignored(self) -> None:
        """Unknown members, at the top and nested, are ignored rather than rejected."""
        wire = {
            "type": "MESSAGES_SNAPSHOT",
            "future": 1,
            "messages": [{"id": "u", "role": "user", "content": "hi", "extra": {"x": 1}}],
        }

        actual = from_wire(wire)

        assert ev.MessagesSnapshotEvent(messages=[ev.UserMessage(id="u", content="hi")]) == actual

    @pytest.mark.parametrize(
        ("wire", "path"),
        [
            ({"type": "STEP_STARTED", "stepName": "s", "subagentRunId": None}, "$.subagentRunId"),
            ({"type": "STEP_STARTED", "stepName": "s", "timestamp": None}, "$.timestamp"),
            ({"type": "STEP_STARTED", "stepName": "s", "metadata": None}, "$.metadata"),
            ({"type": "TEXT_MESSAGE_START", "messageId": "m", "name": None}, "$.name"),
            ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": None}, "$.role"),
            ({"type": "TEXT_MESSAGE_CHUNK", "messageId": None}, "$.messageId"),
            ({"type": "RUN_ERROR", "message": "m", "code": None}, "$.code"),
            ({"type": "RUN_ERROR", "message": "m", "usage": None}, "$.usage"),
            (
                {
                    "type": "SUBAGENT_STARTED",
                    "subagentRunId": "s",
                    "name": "n",
                    "description": None,
                },
                "$.description",
            ),
            (
                {
                    "type": "SUBAGENT_STARTED",
                    "subagentRunId": "s",
                    "name": "n",
                    "parentSubagentRunId": None,
                },
                "$.parentSubagentRunId",
            ),
            ({"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": None}, "$.outcome"),
            (
                {
                    "type": "SUBAGENT_FINISHED",
                    "subagentRunId": "s",
                    "outcome": {"type": "suspended", "interruptIds": None},
                },
                "$.outcome.interruptIds",
            ),
            (
                {
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": "m",
                    "activityType": "a",
                    "content": {},
                    "replace": None,
                },
                "$.replace",
            ),
            (
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [{"id": "a", "role": "assistant", "subagentRunId": None}],
                },
                "$.messages[0].subagentRunId",
            ),
            (
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [{"id": "a", "role": "assistant", "toolCalls": None}],
                },
                "$.messages[0].toolCalls",
            ),
            (
                {
                    "type": "RUN_FINISHED",
                    "threadId": "t",
                    "runId": "r",
                    "outcome": {
                        "type": "interrupt",
                        "interrupts": [{"id": "i", "reason": "r", "subagentRunId": None}],
                    },
                },
                "$.outcome.interrupts[0].subagentRunId",
            ),
            (
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m",
                    "toolCallId": "c",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "url", "value": "u", "mimeType": None},
                        }
                    ],
                },
                "$.content[0].source.mimeType",
            ),
            (
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m",
                    "toolCallId": "c",
                    "content": "x",
                    "role": None,
                },
                "$.role",
            ),
        ],
    )
    def test_null_in_optional_slot_is_rejected(self, wire: dict[str, Any], path: str) -> None:
        """A null where an optional field could only be omitted is rejected, as the client does."""
        with pytest.raises(InvalidInputError) as caught:
            from_wire(wire)

        assert [f"{path}: {NULL_NOT_ALLOWED}"] == list(caught.value.problems)

    @pytest.mark.parametrize(
        ("wire", "expected"),
        [
            pytest.param(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": "c",
                    "toolCallName": "f",
                    "parentMessageId": None,
                },
                ev.ToolCallStartEvent(tool_call_id="c", tool_call_name="f"),
                id="TOOL_CALL_START.parentMessageId",
            ),
            pytest.param(
                {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "parentMessageId": None},
                ev.ToolCallChunkEvent(tool_call_id="c"),
                id="TOOL_CALL_CHUNK.parentMessageId",
            ),
            pytest.param(
                {
                    "type": "RUN_FINISHED",
                    "threadId": "t",
                    "runId": "r",
                    "outcome": None,
                    "result": None,
                },
                ev.RunFinishedEvent(thread_id="t", run_id="r"),
                id="RUN_FINISHED.outcome and result",
            ),
            pytest.param(
                {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "result": None},
                ev.SubagentFinishedEvent(subagent_run_id="s"),
                id="SUBAGENT_FINISHED.result",
            ),
            pytest.param(
                {"type": "STEP_STARTED", "stepName": "s", "rawEvent": None},
                ev.StepStartedEvent(step_name="s"),
                id="rawEvent",
            ),
            pytest.param(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m",
                    "toolCallId": "c",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "url", "value": "u"},
                            "metadata": None,
                        }
                    ],
                },
                ev.ToolCallResultEvent(
                    message_id="m",
                    tool_call_id="c",
                    content=[ev.ImagePart(source=ev.UrlSource(value="u"))],
                ),
                id="media part metadata",
            ),
            pytest.param(
                {
                    "type": "RUN_STARTED",
                    "threadId": "t",
                    "runId": "r",
                    "input": {
                        "threadId": "t",
                        "runId": "r",
                        "messages": [],
                        "forwardedProps": None,
                        "tools": [{"name": "f", "description": "d", "parameters": None}],
                        "resume": [{"interruptId": "i", "status": "resolved", "payload": None}],
                    },
                },
                ev.RunStartedEvent(
                    thread_id="t",
                    run_id="r",
                    input=ev.RunAgentInput(
                        thread_id="t",
                        run_id="r",
                        tools=[ev.Tool(name="f", description="d")],
                        resume=[ev.ResumeEntry(interrupt_id="i", status="resolved")],
                    ),
                ),
                id="RUN_STARTED.input forwardedProps, parameters, payload",
            ),
        ],
    )
    def test_legacy_nulls_read_as_absent(self, wire: dict[str, Any], expected: Any) -> None:
        """The nulls the client's compatibility boundary converts are read as absent."""
        actual = from_wire(wire)

        assert expected == actual

    @pytest.mark.parametrize(
        ("wire", "expected"),
        [
            (
                {"type": "REASONING_MESSAGE_START", "messageId": "m"},
                "$.role: expected 'reasoning', got missing",
            ),
            (
                {"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "assistant"},
                "$.role: expected 'reasoning', got 'assistant'",
            ),
            (
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [
                        {
                            "id": "a",
                            "role": "assistant",
                            "toolCalls": [{"id": "c", "function": {"name": "f", "arguments": ""}}],
                        }
                    ],
                },
                "$.messages[0].toolCalls[0].type: expected 'function', got missing",
            ),
        ],
        ids=["reasoning role missing", "reasoning role wrong", "tool call type missing"],
    )
    def test_fixed_tags_are_required(self, wire: dict[str, Any], expected: str) -> None:
        """Fixed tags nothing dispatches on (reasoning role, tool call type) are still checked."""
        with pytest.raises(InvalidInputError) as caught:
            from_wire(wire)

        assert [expected] == list(caught.value.problems)

    def test_every_problem_reported_at_once(self) -> None:
        """All bad fields are listed together, each by its JSON path."""
        wire = {
            "type": "TEXT_MESSAGE_START",
            "timestamp": 1.5,
            "subagentRunId": None,
            "messageId": 1,
            "role": "tool",
        }

        with pytest.raises(InvalidInputError) as caught:
            from_wire(wire)

        assert [
            "$.timestamp: expected an integer, got float",
            f"$.subagentRunId: {NULL_NOT_ALLOWED}",
            "$.messageId: expected a string, got int",
            "$.role: expected 'developer' or 'system' or 'assistant' or 'user', got 'tool'",
        ] == list(caught.value.problems)

    @pytest.mark.parametrize(
        ("wire", "expected"),
        [
            (
                {"type": "STEP_STARTED", "stepName": "s", "timestamp": "1"},
                "$.timestamp: expected an integer, got str",
            ),
            (
                {"type": "STEP_STARTED", "stepName": "s", "timestamp": True},
                "$.timestamp: expected an integer, got bool",
            ),
            ({"type": "STEP_STARTED", "stepName": 1}, "$.stepName: expected a string, got int"),
            ({"type": "STEP_STARTED"}, "$.stepName: required, missing"),
            (
                {"type": "STEP_STARTED", "stepName": None},
                "$.stepName: expected a string, got null",
            ),
            (
                {"type": "STEP_STARTED", "stepName": "s", "metadata": []},
                "$.metadata: expected an object, got list",
            ),
            (
                {
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": "m",
                    "activityType": "a",
                    "content": "x",
                    "replace": False,
                },
                "$.content: expected an object, got str",
            ),
            (
                {
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": "m",
                    "activityType": "a",
                    "content": {},
                    "replace": 0,
                },
                "$.replace: expected a boolean, got int",
            ),
            (
                {"type": "STATE_DELTA", "delta": {"op": "add"}},
                "$.delta: expected an array, got dict",
            ),
        ],
        ids=[
            "int as str",
            "int as bool",
            "str as int",
            "missing",
            "required null",
            "metadata",
            "content",
            "bool",
            "array",
        ],
    )
    def test_types_are_strict(self, wire: dict[str, Any], expected: str) -> None:
        """Values of the wrong JSON type are not coerced but reported by path."""
        with pytest.raises(InvalidInputError) as caught:
            from_wire(wire)

        assert [expected] == list(caught.value.problems)

    @pytest.mark.parametrize(
        ("wire", "path"),
        [
            ({"type": "STEP_STARTED", "stepName": "s", "timestamp": 2**53}, "$.timestamp"),
            (
                {"type": "RUN_ERROR", "message": "m", "usage": [{}, {"inputTokens": -1}]},
                "$.usage[1].inputTokens",
            ),
            ({"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "a"}]}, "$.delta[0].path"),
            (
                {"type": "STATE_DELTA", "delta": [{"op": "move", "from": "a", "path": "/b"}]},
                "$.delta[0].from",
            ),
            (
                {
                    "type": "RUN_FINISHED",
                    "threadId": "t",
                    "runId": "r",
                    "outcome": {"type": "interrupt", "interrupts": []},
                },
                "$.outcome.interrupts",
            ),
        ],
        ids=["timestamp range", "negative count", "pointer", "from pointer", "no interrupts"],
    )
    def test_constructor_checks_reported_by_path(self, wire: dict[str, Any], path: str) -> None:
        """What the constructors reject is reported under the wire path of the field."""
        with pytest.raises(InvalidInputError) as caught:
            from_wire(wire)

        assert [path] == problem_paths(caught.value)

    def test_error_is_a_value_error(self) -> None:
        """InvalidInputError is caught by a plain except ValueError."""
        with pytest.raises(ValueError, match="invalid event"):
            from_wire({"type": "NOPE"})


class TestEncodeJson:
    def test_compact_raw_utf8(self) -> None:
        """The JSON is compact and UTF-8, with non-ASCII and U+2028 unescaped, newlines escaped."""
        event = ev.TextMessageContentEvent(message_id="m", delta='é\u2028😀\n"\x00')

        actual = encode_json(event)

        assert (
            '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"é\u2028😀\\n\\"\\u0000"}'.encode()
            == actual
        )

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (1e-05, b"0.00001"),
            (-1e-05, b"-0.00001"),
            (2.5e-05, b"0.000025"),
            (9.99e-05, b"0.0000999"),
            (1e-07, b"1e-7"),
            (-1.5e-06, b"-1.5e-6"),
            (1e-10, b"1e-10"),
            (0.0001, b"0.0001"),
            (1e16, b"1e+16"),
            (1.0, b"1.0"),
            (-0.0, b"-0.0"),
            (2**53, b"9007199254740992"),
        ],
    )
    def test_float_spelling(self, value: float, expected: bytes) -> None:
        """Numbers are spelled as pydantic spells them (0.00001, not 1e-05; 1e-7, not 1e-07)."""
        actual = encode_json(ev.CustomEvent(name="n", value=value))

        assert b'{"type":"CUSTOM","name":"n","value":' + expected + b"}" == actual

    @PROPERTY
    @given(value=strategies.floats())
    def test_float_spelling_matches_official(self, value: float) -> None:
        """Every finite float is spelled exactly as the official model_dump_json spells it."""
        expected = (
            OfficialCustomEvent(name="n", value=[value]).model_dump_json(by_alias=True).encode()
        )

        actual = encode_json(ev.CustomEvent(name="n", value=[value]))

        assert expected == actual

    @pytest.mark.parametrize(
        "text",
        ["1e-05", "2.5e-07", 'q"1e-05', "\\1e-05", '\\"1e-05"'],
    )
    def test_float_like_strings_untouched(self, text: str) -> None:
        """Text that looks like a small float is left alone, in values, keys and escapes alike."""
        event = ev.CustomEvent(name=text, value={text: [text, 1e-05]})

        actual = encode_json(event)

        assert (
            OfficialCustomEvent(name=text, value={text: [text, 1e-05]})
            .model_dump_json(by_alias=True)
            .encode()
            == actual
        )

    @pytest.mark.parametrize(
        "event",
        [
            pytest.param(ev.CustomEvent(name="n", value=float("nan")), id="NaN"),
            pytest.param(ev.CustomEvent(name="n", value=float("inf")), id="inf"),
            pytest.param(ev.CustomEvent(name="n", value=[float("-inf")]), id="-inf"),
            pytest.param(ev.CustomEvent(name="n", value={1, 2}), id="set"),
            pytest.param(ev.CustomEvent(name="n", value=b"x"), id="bytes"),
            pytest.param(ev.CustomEvent(name="n", value=datetime.date(2026, 1, 1)), id="date"),
            pytest.param(ev.CustomEvent(name="n", value={"k": object()}), id="object"),
            pytest.param(ev.CustomEvent(name="n", value="\ud800"), id="lone surrogate value"),
            pytest.param(ev.CustomEvent(name="n", value={"\udfff": 1}), id="lone surrogate key"),
            pytest.param(
                ev.TextMessageContentEvent(message_id="m", delta="a\ud83d"),
                id="lone surrogate field",
            ),
            pytest.param(
                ev.StepStartedEvent(step_name="s", metadata={"m": float("nan")}),
                id="NaN in metadata",
            ),
            pytest.param(ev.CustomEvent(name="n", value=nested_lists(100_000)), id="too deep"),
        ],
    )
    def test_unencodable_raises_invalid_event_error(self, event: Any) -> None:
        """Values with no JSON form raise InvalidEventError naming the event class."""
        with pytest.raises(InvalidEventError) as caught:
            encode_json(event)

        assert str(caught.value).startswith(f"{type(event).__name__} has no JSON form: ")

    def test_encodes_non_events(self) -> None:
        """Messages and other records encode the same way as events."""
        expected = b'{"id":"a","role":"assistant","content":"hi"}'

        actual = encode_json(ev.AssistantMessage(id="a", content="hi"))

        assert expected == actual
