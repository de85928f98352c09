"""Tests for RunAgentInput.from_json: reading request bodies, good and bad."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import strategies

import ambient_runs
from ambient_runs import InvalidInputError, RunAgentInput
from ambient_runs import events as ev
from ambient_runs._wire import encode_json

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NULL_NOT_ALLOWED = (
    "null is not allowed here; omit the key instead (AG-UI optional fields are never null)"
)

#: The messages of HTTP_AGENT_BODY, as HttpAgent 1.0.0 put them on the wire (the
#: activity message the agent also held was filtered out by the client).
HTTP_AGENT_MESSAGES: list[dict[str, Any]] = [
    {"id": "d1", "role": "developer", "content": "dev"},
    {"id": "s1", "role": "system", "content": "sys"},
    {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"},
            },
            {
                "type": "document",
                "source": {"type": "data", "value": "AA==", "mimeType": "application/pdf"},
            },
        ],
    },
    {
        "id": "a1",
        "role": "assistant",
        "content": "ok",
        "toolCalls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q":1}'},
            }
        ],
    },
    {"id": "t1", "role": "tool", "content": "42", "toolCallId": "c1"},
    {"id": "r1", "role": "reasoning", "content": "thinking"},
    {"id": "u2", "role": "user", "content": "plain"},
]

#: A request body captured from the real @ag-ui/client 1.0.0 HttpAgent (second run,
#: answering an interrupt), byte for byte.
HTTP_AGENT_BODY = json.dumps(
    {
        "threadId": "th",
        "runId": "r2",
        "protocolVersion": "1.0",
        "state": {},
        "messages": HTTP_AGENT_MESSAGES,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "resume": [{"interruptId": "i1", "status": "resolved", "payload": {"ok": True}}],
    },
    separators=(",", ":"),
).encode()

HTTP_AGENT_INPUT = RunAgentInput(
    thread_id="th",
    run_id="r2",
    protocol_version="1.0",
    state={},
    messages=[
        ev.DeveloperMessage(id="d1", content="dev"),
        ev.SystemMessage(id="s1", content="sys"),
        ev.UserMessage(
            id="u1",
            content=[
                ev.TextPart(text="look"),
                ev.ImagePart(source=ev.UrlSource(value="https://x/y.png", mime_type="image/png")),
                ev.DocumentPart(source=ev.DataSource(value="AA==", mime_type="application/pdf")),
            ],
        ),
        ev.AssistantMessage(
            id="a1",
            content="ok",
            tool_calls=[
                ev.ToolCall(id="c1", function=ev.FunctionCall(name="search", arguments='{"q":1}'))
            ],
        ),
        ev.ToolMessage(id="t1", content="42", tool_call_id="c1"),
        ev.ReasoningMessage(id="r1", content="thinking"),
        ev.UserMessage(id="u2", content="plain"),
    ],
    tools=[],
    context=[],
    forwarded_props={},
    resume=[ev.ResumeEntry(interrupt_id="i1", status="resolved", payload={"ok": True})],
)


def body(**fields: Any) -> bytes:
    """Return a minimal valid body (threadId, runId, messages) with *fields* set over it."""
    return json.dumps({"threadId": "t", "runId": "r", "messages": [], **fields}).encode()


def problems_of(data: bytes | str) -> list[str]:
    """Return the problems from_json reports for *data*, failing if it is accepted."""
    with pytest.raises(InvalidInputError) as caught:
        RunAgentInput.from_json(data)
    return list(caught.value.problems)


def nested(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    """Return JSON text nesting *depth* levels deep."""
    return opener * depth + closer * depth


def check_from_json(data: bytes | str) -> None:
    """
    Assert that from_json returns an input it could echo, or raises InvalidInputError.

    Any other exception, or an accepted input that cannot be encoded, fails.
    """
    try:
        result = RunAgentInput.from_json(data)
    except InvalidInputError as exc:
        problems = exc.problems
    else:
        assert isinstance(result, RunAgentInput)
        encode_json(
            ev.RunStartedEvent(thread_id=result.thread_id, run_id=result.run_id, input=result)
        )
        return
    assert problems
    assert all(p.startswith("$") for p in problems)


class TestAccepts:
    def test_http_agent_body(self) -> None:
        """HttpAgent 1.0.0's body (each non-activity role, parts, tool calls, resume) parses."""
        expected = HTTP_AGENT_INPUT

        actual = RunAgentInput.from_json(HTTP_AGENT_BODY)

        assert expected == actual

    @pytest.mark.parametrize("kind", [bytes, bytearray, str])
    def test_bytes_bytearray_and_str(self, kind: type[Any]) -> None:
        """The body may be given as bytes, a bytearray or an already decoded str."""
        data = HTTP_AGENT_BODY if kind is not str else HTTP_AGENT_BODY.decode()
        expected = HTTP_AGENT_INPUT

        actual = RunAgentInput.from_json(kind(data))

        assert expected == actual

    def test_tools_and_context(self) -> None:
        """Frontend tools (with a JSON Schema) and context entries are read."""
        data = body(
            tools=[
                {
                    "name": "confirm",
                    "description": "Ask the user",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                }
            ],
            context=[{"description": "tz", "value": "UTC"}],
        )
        expected = (
            (
                ev.Tool(
                    name="confirm",
                    description="Ask the user",
                    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
                ),
            ),
            (ev.Context(description="tz", value="UTC"),),
        )

        result = RunAgentInput.from_json(data)

        assert expected == (result.tools, result.context)

    def test_activity_messages_are_accepted(self) -> None:
        """An activity message, which the schema allows though HttpAgent filters it, is read."""
        data = body(messages=[{"id": "a", "role": "activity", "activityType": "p", "content": {}}])

        actual = RunAgentInput.from_json(data).messages

        assert (ev.ActivityMessage(id="a", activity_type="p", content={}),) == actual

    def test_unknown_keys_are_ignored(self) -> None:
        """Unknown members are ignored at the top level and in every nested object."""
        wire = json.loads(HTTP_AGENT_BODY)
        wire["future"] = {"x": 1}
        for message in wire["messages"]:
            message["extra"] = [1]
        wire["messages"][2]["content"][1]["hint"] = "hi"
        wire["messages"][2]["content"][1]["source"]["etag"] = "e"
        wire["messages"][3]["toolCalls"][0]["index"] = 0
        wire["messages"][3]["toolCalls"][0]["function"]["strict"] = True
        wire["resume"][0]["note"] = None
        wire["tools"] = [{"name": "n", "description": "d", "version": 2}]
        wire["context"] = [{"description": "d", "value": "v", "weight": 1}]
        expected = attrs.evolve(
            HTTP_AGENT_INPUT,
            tools=[ev.Tool(name="n", description="d")],
            context=[ev.Context(description="d", value="v")],
        )

        actual = RunAgentInput.from_json(json.dumps(wire))

        assert expected == actual

    @pytest.mark.parametrize(
        "key",
        [
            "protocolVersion",
            "parentRunId",
            "state",
            "tools",
            "context",
            "forwardedProps",
            "resume",
        ],
    )
    def test_null_top_level_optionals_read_as_absent(self, key: str) -> None:
        """A null top-level optional is read as absent, as the official Python server reads it."""
        expected = RunAgentInput(thread_id="t", run_id="r")

        actual = RunAgentInput.from_json(body(**{key: None}))

        assert expected == actual

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(value=strategies.run_agent_inputs)
    def test_round_trip(self, value: RunAgentInput) -> None:
        """Any input survives encode_json then from_json unchanged."""
        actual = RunAgentInput.from_json(encode_json(value))

        assert value == actual

    def test_moderate_nesting_is_fine(self) -> None:
        """Free-form JSON nested a few hundred levels deep is accepted."""
        data = body()[:-1] + b',"forwardedProps":' + nested(200) + b"}"

        actual = RunAgentInput.from_json(data).forwarded_props

        assert json.loads(nested(200)) == actual

    def test_huge_string_parses_quickly(self) -> None:
        """A 50 MB string parses in well under a few seconds, unchanged."""
        big = "x" * 50_000_000
        data = body(forwardedProps=big, messages=[{"id": "u", "role": "user", "content": "é"}])
        start = time.perf_counter()

        result = RunAgentInput.from_json(data)

        elapsed = time.perf_counter() - start
        assert big == result.forwarded_props
        assert elapsed < 5

    def test_is_reexported(self) -> None:
        """RunAgentInput and InvalidInputError are public names of ambient_runs."""
        expected = (RunAgentInput, InvalidInputError)

        actual = (ambient_runs.RunAgentInput, ambient_runs.InvalidInputError)

        assert expected == actual


class TestRejects:
    @pytest.mark.parametrize(
        "data",
        [b"", b"{", b"nope", b"{'threadId': 't'}", b"{}x", b'{"a":1,}', b"\x00"],
        ids=["empty", "unclosed", "word", "single quotes", "trailing", "trailing comma", "NUL"],
    )
    def test_not_json(self, data: bytes) -> None:
        """Text that is not JSON is reported at $ as invalid JSON."""
        expected = ["$"]

        with pytest.raises(InvalidInputError, match=r"^invalid JSON") as caught:
            RunAgentInput.from_json(data)

        assert expected == [p.partition(":")[0] for p in caught.value.problems]

    @pytest.mark.parametrize(
        "data",
        [body(state=float("nan")), body(state=[float("inf")]), body()[:-1] + b',"state":-1e400}'],
        ids=["NaN", "Infinity", "overflow"],
    )
    def test_non_finite_numbers(self, data: bytes) -> None:
        """NaN, Infinity and numbers beyond the double range are not JSON and are rejected."""
        (problem,) = problems_of(data)

        assert "is not a JSON number" in problem

    @pytest.mark.parametrize(
        "data",
        [
            b"\xff",
            b'{"threadId":"\xc3(","runId":"r","messages":[]}',
            b'{"threadId":"\xed\xa0\x80","runId":"r","messages":[]}',
            '{"threadId":"t","runId":"r","messages":[]}'.encode("utf-16"),
            '{"threadId":"t","runId":"r","messages":[]}'.encode("utf-32"),
            b'\xef\xbb\xbf{"threadId":"t","runId":"r","messages":[]}',
        ],
        ids=["0xff", "bad continuation", "encoded surrogate", "UTF-16", "UTF-32", "BOM"],
    )
    def test_not_utf8(self, data: bytes) -> None:
        """A body that is not plain UTF-8 (bad bytes, UTF-16/32, a BOM) is rejected."""
        with pytest.raises(InvalidInputError, match=r"^invalid JSON"):
            RunAgentInput.from_json(data)

    @pytest.mark.parametrize(
        "data",
        [
            b'{"threadId":"t\\ud800","runId":"r","messages":[]}',
            b'{"threadId":"t","runId":"r","messages":[],"state":{"\\udfff":1}}',
            '{"threadId":"t\ud83d","runId":"r","messages":[]}',
        ],
        ids=["escaped", "escaped key", "in a str body"],
    )
    def test_lone_surrogates(self, data: bytes | str) -> None:
        """A lone surrogate, which UTF-8 cannot carry back out, is rejected."""
        expected = ["$: a string holds a lone surrogate, which UTF-8 cannot encode"]

        actual = problems_of(data)

        assert expected == actual

    def test_escaped_surrogate_pair_is_fine(self) -> None:
        """A correctly escaped surrogate pair is one character, and accepted."""
        expected = "😀"

        actual = RunAgentInput.from_json(
            b'{"threadId":"\\ud83d\\ude00","runId":"r","messages":[]}'
        )

        assert expected == actual.thread_id

    @pytest.mark.parametrize(
        ("data", "kind"),
        [
            (b"[]", "an array"),
            (b'"threadId"', "a string"),
            (b"42", "a number"),
            (b"4.2", "a number"),
            (b"null", "null"),
            (b"true", "a boolean"),
        ],
    )
    def test_not_an_object(self, data: bytes, kind: str) -> None:
        """A body that is JSON but not an object is rejected, naming what it is."""
        expected = [f"$: expected a JSON object, got {kind}"]

        actual = problems_of(data)

        assert expected == actual

    def test_every_bad_field_at_once(self) -> None:
        """Wrong types anywhere are all listed together, each by its JSON path."""
        data = json.dumps(
            {
                "threadId": 1,
                "runId": None,
                "state": [],
                "messages": [
                    {"id": 1, "role": "user", "content": 5},
                    {
                        "id": "a",
                        "role": "assistant",
                        "toolCalls": [{"id": "c", "type": "function", "function": {}}],
                    },
                ],
                "tools": {},
                "context": [{"description": 1, "value": "v"}],
                "resume": [{"interruptId": "i", "status": "done"}],
            }
        )
        expected = [
            "$.threadId: expected a string, got int",
            "$.runId: expected a string, got null",
            "$.messages[0].id: expected a string, got int",
            "$.messages[0].content: expected a string or an array of content parts, got int",
            "$.messages[1].toolCalls[0].function.name: required, missing",
            "$.messages[1].toolCalls[0].function.arguments: required, missing",
            "$.tools: expected an array, got dict",
            "$.context[0].description: expected a string, got int",
            "$.resume[0].status: expected 'resolved' or 'cancelled', got 'done'",
        ]

        actual = problems_of(data)

        assert expected == actual

    @pytest.mark.parametrize(
        ("fields", "path"),
        [
            ({"threadId": None}, "$.threadId"),
            ({"runId": None}, "$.runId"),
            ({"messages": None}, "$.messages"),
            ({"messages": [{"id": None, "role": "system", "content": "s"}]}, "$.messages[0].id"),
            (
                {"messages": [{"id": "u", "role": "user", "content": None}]},
                "$.messages[0].content",
            ),
            (
                {"messages": [{"id": "t", "role": "tool", "content": "x", "toolCallId": None}]},
                "$.messages[0].toolCallId",
            ),
            (
                {
                    "messages": [
                        {"id": "u", "role": "user", "content": [{"type": "text", "text": None}]}
                    ]
                },
                "$.messages[0].content[0].text",
            ),
            ({"tools": [{"name": None, "description": "d"}]}, "$.tools[0].name"),
            ({"context": [{"description": "d", "value": None}]}, "$.context[0].value"),
            ({"resume": [{"interruptId": None, "status": "resolved"}]}, "$.resume[0].interruptId"),
        ],
    )
    def test_null_in_required_fields(self, fields: dict[str, Any], path: str) -> None:
        """A null where a value is required is reported at its path."""
        actual = [p.partition(": ")[0] for p in problems_of(body(**fields))]

        assert [path] == actual

    @pytest.mark.parametrize(
        ("message", "path"),
        [
            ({"id": "u", "role": "user", "content": "c", "name": None}, "$.messages[0].name"),
            (
                {"id": "u", "role": "user", "content": "c", "subagentRunId": None},
                "$.messages[0].subagentRunId",
            ),
            ({"id": "a", "role": "assistant", "content": None}, "$.messages[0].content"),
            (
                {"id": "u", "role": "user", "content": "c", "metadata": None},
                "$.messages[0].metadata",
            ),
            (
                {"id": "t", "role": "tool", "content": "c", "toolCallId": "x", "error": None},
                "$.messages[0].error",
            ),
        ],
    )
    def test_null_in_nested_optional_slots(self, message: dict[str, Any], path: str) -> None:
        """Inside messages, a null optional is rejected as the client would reject it."""
        expected = [f"{path}: {NULL_NOT_ALLOWED}"]

        actual = problems_of(body(messages=[message]))

        assert expected == actual

    @pytest.mark.parametrize(
        ("messages", "expected"),
        [
            (
                [{"id": "x", "role": "bot", "content": "c"}],
                "$.messages[0]: unknown message role 'bot'",
            ),
            (
                [{"id": "x", "content": "c"}],
                "$.messages[0]: unknown message role None",
            ),
            (
                [{"id": "u", "role": "user", "content": [{"type": "binary", "data": "AA=="}]}],
                "$.messages[0].content[0]: unknown content part type 'binary'",
            ),
            (
                [
                    {
                        "id": "u",
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "s3", "value": "v"}}],
                    }
                ],
                "$.messages[0].content[0].source: unknown source type 's3'",
            ),
        ],
        ids=["role", "no role", "part type", "source type"],
    )
    def test_unknown_tags(self, messages: list[Any], expected: str) -> None:
        """Unknown roles, content part types and source types are named by path."""
        (problem,) = problems_of(body(messages=messages))

        actual = problem.partition(";")[0]

        assert expected == actual

    @pytest.mark.parametrize(
        "data",
        [
            body()[:-1] + b',"forwardedProps":' + nested(10_000) + b"}",
            body()[:-1] + b',"state":' + nested(10_000, b'{"a":', b"}") + b"}",
            nested(10_000),
            nested(10_000, b'{"a":', b"}"),
        ],
        ids=["forwardedProps", "state objects", "whole body", "whole body objects"],
    )
    def test_deep_nesting(self, data: bytes) -> None:
        """10,000 levels of nesting, in a free-form field or as the body, fail cleanly."""
        expected = ["$: nesting exceeds the recursion limit"]

        actual = problems_of(data)

        assert expected == actual

    def test_huge_integer(self) -> None:
        """An integer literal too long for Python to convert fails cleanly."""
        data = body()[:-1] + b',"state":' + b"9" * 5_000 + b"}"

        (problem,) = problems_of(data)

        assert problem.startswith("$: ")

    def test_error_is_a_value_error(self) -> None:
        """InvalidInputError is caught by a plain except ValueError."""
        with pytest.raises(ValueError, match="invalid RunAgentInput"):
            RunAgentInput.from_json(b"{}")


# --------------------------------------------------------------------------- fuzzing

#: Keys and string values the schema knows, so fuzzed bodies get past the first checks.
VOCABULARY = (
    "threadId",
    "runId",
    "messages",
    "state",
    "tools",
    "context",
    "forwardedProps",
    "resume",
    "protocolVersion",
    "parentRunId",
    "id",
    "role",
    "content",
    "type",
    "text",
    "source",
    "value",
    "mimeType",
    "toolCalls",
    "toolCallId",
    "function",
    "name",
    "arguments",
    "metadata",
    "subagentRunId",
    "interruptId",
    "status",
    "payload",
    "description",
    "user",
    "assistant",
    "tool",
    "system",
    "developer",
    "reasoning",
    "activity",
    "image",
    "url",
    "data",
    "resolved",
)

any_text = st.sampled_from(VOCABULARY) | st.text(st.characters(exclude_categories=()), max_size=6)
any_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats()  # NaN and infinities included: json.dumps writes them as NaN/Infinity
    | any_text
)
any_json = st.recursive(
    any_scalar,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=5)
    ),
    max_leaves=20,
)
any_object = st.dictionaries(any_text, any_json, max_size=8)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Return the path of every node in JSON *value*, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(paths(item, (*prefix, index)))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """Return *base* (a JSON value) with one to four nodes replaced, removed or added to."""
    value = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths(value)))
        if not path:
            value = draw(any_json)
            continue
        *parents, last = path
        parent = value
        for step in parents:
            parent = parent[step]
        kind = draw(st.sampled_from(("replace", "remove", "add")))
        if kind == "replace":
            parent[last] = draw(any_json)
        elif kind == "remove":
            del parent[last]
        elif isinstance(parent[last], dict):
            parent[last][draw(any_text)] = draw(any_json)
        elif isinstance(parent[last], list):
            parent[last].append(draw(any_json))
        else:
            parent[last] = draw(any_json)
    return value


class TestFuzz:
    @FUZZ
    @given(data=st.binary(max_size=200))
    def test_arbitrary_bytes(self, data: bytes) -> None:
        """Arbitrary bytes give a RunAgentInput or InvalidInputError, never anything else."""
        check_from_json(data)

    @FUZZ
    @given(value=any_json | any_object)
    def test_arbitrary_json(self, value: Any) -> None:
        """Arbitrary JSON values (NaN, surrogates and all) give an input or InvalidInputError."""
        check_from_json(json.dumps(value).encode())

    @FUZZ
    @given(value=mutated(json.loads(HTTP_AGENT_BODY)))
    def test_mutated_http_agent_body(self, value: Any) -> None:
        """Random edits of a real HttpAgent body give an input or InvalidInputError."""
        check_from_json(json.dumps(value).encode())

    @FUZZ
    @given(data=st.data())
    def test_mutated_random_body(self, data: st.DataObject) -> None:
        """Random edits of any valid body give an input or InvalidInputError."""
        base = json.loads(encode_json(data.draw(strategies.run_agent_inputs)))

        check_from_json(json.dumps(data.draw(mutated(base))).encode())

    @FUZZ
    @given(value=mutated(json.loads(HTTP_AGENT_BODY)))
    def test_mutated_body_as_str(self, value: Any) -> None:
        """The same holds for a str body with raw (unescaped) non-ASCII and surrogates."""
        check_from_json(json.dumps(value, ensure_ascii=False))
