"""
Hypothesis strategies that build valid instances of every AG-UI 1.0 object.

Every optional field is drawn both present and absent (``None``). Strings
include the empty string (a legal id), non-ASCII text, control characters and
``\\u2028`` but never a lone surrogate (UTF-8 cannot carry one). JSON values
nest dicts, lists and nulls, and mix integers up to 2**53 with finite floats,
small ones (``1e-7``, ``2.5e-05``) included because their spelling differs
between Python and the official encoder. Timestamps reach the ±(2**53 - 1)
bounds.

``EVENTS``, ``MESSAGES``, ``PARTS``, ``SOURCES``, ``OPERATIONS`` and ``NESTED``
map each class to the strategy that builds it (``ALL_NESTED`` merges the last
four); the tests check that every class of `ambient_runs.events` has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from hypothesis import strategies as st

from ambient_runs import events as ev

T = TypeVar("T")

MAX_SAFE_INTEGER = 2**53 - 1

#: Strings that have broken JSON encoders before: empty, separators JavaScript
#: treats as line ends, control characters, quotes, non-BMP characters, and text
#: that looks like a small float.
AWKWARD_STRINGS = (
    "",
    " ",
    "\u2028",
    "\u2029",
    "\x00",
    "\x1f",
    "\x7f",
    "\n\r\t\b\f",
    '"\\/',
    "é",
    "日本語",
    "😀",
    "\ufeff",
    "\U0010ffff",
    "1e-05",
    "2.5e-05 and 1e-07",
    "</script>",
)

#: Floats whose shortest spelling differs between ``json.dumps`` and pydantic,
#: and the extremes of the double range.
AWKWARD_FLOATS = (
    1e-7,
    2.5e-05,
    1e-05,
    -1e-05,
    1.234e-06,
    9.99e-05,
    0.0001,
    0.1,
    -0.0,
    0.0,
    1.5,
    1e16,
    1e22,
    1.7976931348623157e308,
    5e-324,
)

AWKWARD_INTS = (0, 1, -1, 2**31, 2**53, -(2**53), MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER)


def texts(max_size: int = 12) -> st.SearchStrategy[str]:
    """Any string without a lone surrogate, awkward ones often."""
    return st.sampled_from(AWKWARD_STRINGS) | st.text(
        st.characters(exclude_categories=("Cs",)), max_size=max_size
    )


def ids() -> st.SearchStrategy[str]:
    """An id: any string, the empty one included."""
    return texts()


def optional(strategy: st.SearchStrategy[T]) -> st.SearchStrategy[T | None]:
    """*strategy* or ``None`` (an absent optional field)."""
    return st.none() | strategy


def floats() -> st.SearchStrategy[float]:
    """A finite float, awkward ones often."""
    return st.sampled_from(AWKWARD_FLOATS) | st.floats(allow_nan=False, allow_infinity=False)


def ints() -> st.SearchStrategy[int]:
    """An integer within ±2**53."""
    return st.sampled_from(AWKWARD_INTS) | st.integers(-(2**53), 2**53)


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Any JSON value: nested objects and arrays, nulls, ints, finite floats, strings."""
    scalars = st.none() | st.booleans() | ints() | floats() | texts()
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(texts(), children, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def json_objects() -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object whose values are any JSON, nulls included."""
    return st.dictionaries(texts(), json_values(), max_size=3)


def timestamps() -> st.SearchStrategy[int]:
    """A timestamp: any integer within ±(2**53 - 1), the bounds often."""
    return st.sampled_from((0, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER)) | st.integers(
        -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER
    )


def token_counts() -> st.SearchStrategy[int]:
    """A token count: a non-negative integer up to 2**53 - 1."""
    return st.sampled_from((0, MAX_SAFE_INTEGER)) | st.integers(0, MAX_SAFE_INTEGER)


def pointers() -> st.SearchStrategy[str]:
    """A JSON Pointer: ``""`` or ``/a/b`` with ``~0`` and ``~1`` escapes."""
    token = texts().map(lambda s: s.replace("~", "~0").replace("/", "~1"))
    return st.sampled_from(("", "/", "/a/b", "/~0/~1", "/0", "/-")) | st.lists(
        token, max_size=3
    ).map(lambda tokens: "".join(f"/{t}" for t in tokens))


def _build(cls: Callable[..., T], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[T]:
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


# --------------------------------------------------------------------------- content parts

SOURCES: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.DataSource: _build(ev.DataSource, value=texts(), mime_type=texts()),
    ev.UrlSource: _build(ev.UrlSource, value=texts(), mime_type=optional(texts())),
    ev.FileSource: _build(
        ev.FileSource, value=texts(), provider=optional(texts()), mime_type=optional(texts())
    ),
}


def sources() -> st.SearchStrategy[ev.PartSource]:
    """Any content-part source."""
    return st.one_of(*SOURCES.values())


def _media(cls: type[Any]) -> st.SearchStrategy[Any]:
    return _build(cls, id=optional(ids()), source=sources(), metadata=optional(json_values()))


PARTS: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.TextPart: _build(
        ev.TextPart, id=optional(ids()), text=texts(), metadata=optional(json_values())
    ),
    ev.ImagePart: _media(ev.ImagePart),
    ev.AudioPart: _media(ev.AudioPart),
    ev.VideoPart: _media(ev.VideoPart),
    ev.DocumentPart: _media(ev.DocumentPart),
}


def parts() -> st.SearchStrategy[ev.ContentPart]:
    """Any content part."""
    return st.one_of(*PARTS.values())


def contents() -> st.SearchStrategy[str | list[ev.ContentPart]]:
    """Message content: a string or a list of content parts (possibly empty)."""
    return texts() | st.lists(parts(), max_size=3)


# --------------------------------------------------------------------------- messages

function_calls = _build(ev.FunctionCall, name=texts(), arguments=texts())
tool_calls = _build(
    ev.ToolCall,
    id=ids(),
    function=function_calls,
    encrypted_value=optional(texts()),
    metadata=optional(json_objects()),
)

_MESSAGE_BASE: dict[str, st.SearchStrategy[Any]] = {
    "subagent_run_id": optional(ids()),
    "id": ids(),
    "metadata": optional(json_objects()),
}


def _message(cls: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return _build(cls, **_MESSAGE_BASE, **fields)


_NAMED: dict[str, st.SearchStrategy[Any]] = {
    "name": optional(texts()),
    "encrypted_value": optional(texts()),
}

MESSAGES: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.DeveloperMessage: _message(ev.DeveloperMessage, **_NAMED, content=texts()),
    ev.SystemMessage: _message(ev.SystemMessage, **_NAMED, content=texts()),
    ev.AssistantMessage: _message(
        ev.AssistantMessage,
        **_NAMED,
        content=optional(texts()),
        tool_calls=optional(st.lists(tool_calls, max_size=2)),
    ),
    ev.UserMessage: _message(ev.UserMessage, **_NAMED, content=contents()),
    ev.ToolMessage: _message(
        ev.ToolMessage,
        content=contents(),
        tool_call_id=ids(),
        error=optional(texts()),
        encrypted_value=optional(texts()),
    ),
    ev.ActivityMessage: _message(
        ev.ActivityMessage, activity_type=texts(), content=json_objects()
    ),
    ev.ReasoningMessage: _message(
        ev.ReasoningMessage, content=texts(), encrypted_value=optional(texts())
    ),
}


def messages(*, activity: bool = True) -> st.SearchStrategy[ev.Message]:
    """Any message; without activity messages when *activity* is false."""
    return st.one_of(
        *(s for cls, s in MESSAGES.items() if activity or cls is not ev.ActivityMessage)
    )


# --------------------------------------------------------------------------- input

tools = _build(
    ev.Tool,
    name=texts(),
    description=texts(),
    parameters=optional(json_values()),
    metadata=optional(json_objects()),
)
contexts = _build(ev.Context, description=texts(), value=texts())
resume_entries = _build(
    ev.ResumeEntry,
    interrupt_id=ids(),
    status=st.sampled_from(("resolved", "cancelled")),
    payload=optional(json_values()),
    metadata=optional(json_objects()),
)
run_agent_inputs = _build(
    ev.RunAgentInput,
    thread_id=ids(),
    run_id=ids(),
    protocol_version=optional(st.just("1.0") | texts()),
    parent_run_id=optional(ids()),
    state=optional(json_values()),
    messages=st.lists(messages(), max_size=3),
    tools=optional(st.lists(tools, max_size=2)),
    context=optional(st.lists(contexts, max_size=2)),
    forwarded_props=optional(json_values()),
    resume=optional(st.lists(resume_entries, max_size=2)),
)

# --------------------------------------------------------------------------- outcomes

interrupts = _build(
    ev.Interrupt,
    subagent_run_id=optional(ids()),
    id=ids(),
    reason=st.sampled_from(("tool_call", "input_required", "confirmation")) | texts(),
    message=optional(texts()),
    tool_call_id=optional(ids()),
    response_schema=optional(json_objects()),
    expires_at=optional(st.just("2026-12-02T10:00:00Z") | texts()),
    metadata=optional(json_objects()),
)
run_finished_outcomes: st.SearchStrategy[ev.RunFinishedOutcome] = st.one_of(
    _build(ev.RunFinishedSuccessOutcome, pending_tool_call_ids=optional(st.lists(ids()))),
    _build(
        ev.RunFinishedInterruptOutcome, interrupts=st.lists(interrupts, min_size=1, max_size=3)
    ),
    st.builds(ev.RunFinishedCancelledOutcome),
)
subagent_finished_outcomes: st.SearchStrategy[ev.SubagentFinishedOutcome] = st.one_of(
    st.builds(ev.SubagentFinishedSuccessOutcome),
    _build(ev.SubagentFinishedSuspendedOutcome, interrupt_ids=optional(st.lists(ids()))),
)
token_usages = _build(
    ev.TokenUsage,
    provider=optional(texts()),
    model=optional(texts()),
    input_tokens=optional(token_counts()),
    output_tokens=optional(token_counts()),
    total_tokens=optional(token_counts()),
    reasoning_tokens=optional(token_counts()),
    cached_input_tokens=optional(token_counts()),
    cache_write_input_tokens=optional(token_counts()),
)
usages = optional(st.lists(token_usages, max_size=2))

# --------------------------------------------------------------------------- JSON Patch

OPERATIONS: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.AddOperation: _build(ev.AddOperation, path=pointers(), value=json_values()),
    ev.RemoveOperation: _build(ev.RemoveOperation, path=pointers()),
    ev.ReplaceOperation: _build(ev.ReplaceOperation, path=pointers(), value=json_values()),
    ev.MoveOperation: _build(ev.MoveOperation, from_=pointers(), path=pointers()),
    ev.CopyOperation: _build(ev.CopyOperation, from_=pointers(), path=pointers()),
    ev.TestOperation: _build(ev.TestOperation, path=pointers(), value=json_values()),
}


def patches() -> st.SearchStrategy[list[Any]]:
    """An RFC 6902 patch: a list of operations, possibly empty."""
    return st.lists(st.one_of(*OPERATIONS.values()), max_size=3)


NESTED: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.FunctionCall: function_calls,
    ev.ToolCall: tool_calls,
    ev.Tool: tools,
    ev.Context: contexts,
    ev.ResumeEntry: resume_entries,
    ev.RunAgentInput: run_agent_inputs,
    ev.Interrupt: interrupts,
    ev.TokenUsage: token_usages,
    ev.RunFinishedSuccessOutcome: _build(
        ev.RunFinishedSuccessOutcome, pending_tool_call_ids=optional(st.lists(ids()))
    ),
    ev.RunFinishedInterruptOutcome: _build(
        ev.RunFinishedInterruptOutcome, interrupts=st.lists(interrupts, min_size=1, max_size=3)
    ),
    ev.RunFinishedCancelledOutcome: st.builds(ev.RunFinishedCancelledOutcome),
    ev.SubagentFinishedSuccessOutcome: st.builds(ev.SubagentFinishedSuccessOutcome),
    ev.SubagentFinishedSuspendedOutcome: _build(
        ev.SubagentFinishedSuspendedOutcome, interrupt_ids=optional(st.lists(ids()))
    ),
}

# --------------------------------------------------------------------------- events


def _event(cls: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    base: dict[str, st.SearchStrategy[Any]] = {
        "timestamp": optional(timestamps()),
        "raw_event": optional(json_values()),
        "metadata": optional(json_objects()),
    }
    if cls in ev.ATTRIBUTABLE:
        base["subagent_run_id"] = optional(ids())
    return _build(cls, **base, **fields)


_TEXT_ROLES = st.sampled_from(("developer", "system", "assistant", "user"))

EVENTS: dict[type[Any], st.SearchStrategy[Any]] = {
    ev.TextMessageStartEvent: _event(
        ev.TextMessageStartEvent,
        message_id=ids(),
        role=optional(_TEXT_ROLES),
        name=optional(texts()),
    ),
    ev.TextMessageContentEvent: _event(
        ev.TextMessageContentEvent, message_id=ids(), delta=texts()
    ),
    ev.TextMessageEndEvent: _event(ev.TextMessageEndEvent, message_id=ids()),
    ev.TextMessageChunkEvent: _event(
        ev.TextMessageChunkEvent,
        message_id=optional(ids()),
        role=optional(_TEXT_ROLES),
        delta=optional(texts()),
        name=optional(texts()),
    ),
    ev.ToolCallStartEvent: _event(
        ev.ToolCallStartEvent,
        tool_call_id=ids(),
        tool_call_name=texts(),
        parent_message_id=optional(ids()),
    ),
    ev.ToolCallArgsEvent: _event(ev.ToolCallArgsEvent, tool_call_id=ids(), delta=texts()),
    ev.ToolCallEndEvent: _event(ev.ToolCallEndEvent, tool_call_id=ids()),
    ev.ToolCallChunkEvent: _event(
        ev.ToolCallChunkEvent,
        tool_call_id=optional(ids()),
        tool_call_name=optional(texts()),
        parent_message_id=optional(ids()),
        delta=optional(texts()),
    ),
    ev.ToolCallResultEvent: _event(
        ev.ToolCallResultEvent,
        message_id=ids(),
        tool_call_id=ids(),
        content=contents(),
        role=optional(st.just("tool")),
    ),
    ev.StateSnapshotEvent: _event(ev.StateSnapshotEvent, snapshot=json_values()),
    ev.StateDeltaEvent: _event(ev.StateDeltaEvent, delta=patches()),
    ev.MessagesSnapshotEvent: _event(
        ev.MessagesSnapshotEvent, messages=st.lists(messages(), max_size=3)
    ),
    ev.ActivitySnapshotEvent: _event(
        ev.ActivitySnapshotEvent,
        message_id=ids(),
        activity_type=texts(),
        content=json_objects(),
        replace=optional(st.booleans()),
    ),
    ev.ActivityDeltaEvent: _event(
        ev.ActivityDeltaEvent, message_id=ids(), activity_type=texts(), patch=patches()
    ),
    ev.RawEvent: _event(ev.RawEvent, event=json_values(), source=optional(texts())),
    ev.CustomEvent: _event(ev.CustomEvent, name=texts(), value=json_values()),
    ev.RunStartedEvent: _event(
        ev.RunStartedEvent,
        thread_id=ids(),
        run_id=ids(),
        protocol_version=optional(st.just("1.0")),
        parent_run_id=optional(ids()),
        input=optional(run_agent_inputs),
    ),
    ev.RunFinishedEvent: _event(
        ev.RunFinishedEvent,
        thread_id=ids(),
        run_id=ids(),
        result=optional(json_values()),
        outcome=optional(run_finished_outcomes),
        usage=usages,
    ),
    ev.RunErrorEvent: _event(
        ev.RunErrorEvent, message=texts(), code=optional(texts()), usage=usages
    ),
    ev.StepStartedEvent: _event(ev.StepStartedEvent, step_name=texts()),
    ev.StepFinishedEvent: _event(ev.StepFinishedEvent, step_name=texts()),
    ev.ReasoningStartEvent: _event(ev.ReasoningStartEvent, message_id=ids()),
    ev.ReasoningMessageStartEvent: _event(ev.ReasoningMessageStartEvent, message_id=ids()),
    ev.ReasoningMessageContentEvent: _event(
        ev.ReasoningMessageContentEvent, message_id=ids(), delta=texts()
    ),
    ev.ReasoningMessageEndEvent: _event(ev.ReasoningMessageEndEvent, message_id=ids()),
    ev.ReasoningMessageChunkEvent: _event(
        ev.ReasoningMessageChunkEvent, message_id=optional(ids()), delta=optional(texts())
    ),
    ev.ReasoningEndEvent: _event(ev.ReasoningEndEvent, message_id=ids()),
    ev.ReasoningEncryptedValueEvent: _event(
        ev.ReasoningEncryptedValueEvent,
        subtype=st.sampled_from(("tool-call", "message")),
        entity_id=ids(),
        encrypted_value=texts(),
    ),
    ev.SubagentStartedEvent: _event(
        ev.SubagentStartedEvent,
        subagent_run_id=ids(),
        name=texts(),
        description=optional(texts()),
        parent_subagent_run_id=optional(ids()),
        parent_tool_call_id=optional(ids()),
        parent_message_id=optional(ids()),
    ),
    ev.SubagentFinishedEvent: _event(
        ev.SubagentFinishedEvent,
        subagent_run_id=ids(),
        result=optional(json_values()),
        outcome=optional(subagent_finished_outcomes),
    ),
    ev.SubagentErrorEvent: _event(
        ev.SubagentErrorEvent, subagent_run_id=ids(), message=texts(), code=optional(texts())
    ),
}


def events() -> st.SearchStrategy[ev.Event]:
    """Any of the 31 events."""
    return st.one_of(*EVENTS.values())


#: Every class that is not an event or a message, with its strategy.
ALL_NESTED: Mapping[type[Any], st.SearchStrategy[Any]] = {
    **PARTS,
    **SOURCES,
    **OPERATIONS,
    **NESTED,
}
