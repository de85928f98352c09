"""
The AG-UI 1.0 object model: every event, message, content part and input record.

Each class is a frozen attrs class with snake_case fields, named as in the
official SDK (``ag_ui.core``). Field order follows the official models so that
the JSON bytes match the official encoder. The wire form (camelCase keys, no
``null`` for an absent optional field) lives in `ambient_runs.to_wire` and
`ambient_runs.from_wire`; nothing here knows about it.

Construction rejects what the schema forbids (a float or out-of-range
timestamp, a negative token count, a ``tool`` text role, an interrupt outcome
with no interrupts, a malformed JSON Pointer, …) with `InvalidEventError`
naming the class and the field. Free-form JSON payloads (``metadata``,
``value``, ``snapshot``, ``result``, …) are checked when encoded.

*Attributable* events carry ``subagent_run_id``: absent means the parent agent
produced the event. On ``SUBAGENT_*`` events the same field *identifies* the
invocation and is required.

Why one large module: it is the protocol's schema written as classes, about
eighty short declarations and the validators they share, and little else. Each
family has one list, its union (`Event`, `Message`, `ContentPart`, …), from
which its registry (`EVENT_CLASSES`, `MESSAGE_CLASSES`, …) and this module's
``__all__`` are derived; the wire form (`ambient_runs._wire`) and the verifier
read those. Split by family, the classes would import each other both ways
(events hold messages, messages hold parts, the input holds messages).

Why its declarations look alike: many protocol records have the same shape
(a message id and a delta; a name, an encrypted value, metadata and content),
so a line-shape comparison (the ``duplicates`` tool) pairs them. They are
schema, not logic, and they stay spelled out: folding records of one shape into
a shared base would put the base's fields first (attrs orders inherited fields
before a class's own) and break the official field order the bytes follow.

Adding an event type: add its `EventType` member, its class (``TYPE``, a
``type`` discriminator, fields in the official model's order) and its name in
the `Event` union. Everything else here follows; the verifier needs its rule.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Callable, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    TypeAlias,
    TypeVar,
    cast,
    get_args,
    get_origin,
)

import attrs

from ambient_runs._codegen import compile_function
from ambient_runs.errors import InvalidEventError

if TYPE_CHECKING:
    from attrs import Attribute

# __all__ is derived at the end of the module, from what is defined here.

T = TypeVar("T")

#: Largest magnitude of a timestamp and of a token count (JavaScript's safe integers).
MAX_SAFE_INTEGER = 2**53 - 1

#: The metadata key the protocol reserves for itself (the official ``AGUI_METADATA_KEY``).
AGUI_METADATA_KEY = "ag-ui"

JSON: TypeAlias = Any
"""Any JSON value: dict, list, str, int, float, bool or None. Checked when encoded."""

Metadata: TypeAlias = dict[str, Any]
"""Free-form metadata: a JSON object (never null, never an array)."""

TextMessageRole: TypeAlias = Literal["developer", "system", "assistant", "user"]
"""The roles a text message may stream under; ``tool`` is not one of them."""


class EventType(enum.StrEnum):
    """
    The 31 AG-UI 1.0 event types, spelled as on the wire.

    .. versionadded:: 0.1.0
    """

    TEXT_MESSAGE_START = "TEXT_MESSAGE_START"
    TEXT_MESSAGE_CONTENT = "TEXT_MESSAGE_CONTENT"
    TEXT_MESSAGE_END = "TEXT_MESSAGE_END"
    TEXT_MESSAGE_CHUNK = "TEXT_MESSAGE_CHUNK"
    TOOL_CALL_START = "TOOL_CALL_START"
    TOOL_CALL_ARGS = "TOOL_CALL_ARGS"
    TOOL_CALL_END = "TOOL_CALL_END"
    TOOL_CALL_CHUNK = "TOOL_CALL_CHUNK"
    TOOL_CALL_RESULT = "TOOL_CALL_RESULT"
    STATE_SNAPSHOT = "STATE_SNAPSHOT"
    STATE_DELTA = "STATE_DELTA"
    MESSAGES_SNAPSHOT = "MESSAGES_SNAPSHOT"
    ACTIVITY_SNAPSHOT = "ACTIVITY_SNAPSHOT"
    ACTIVITY_DELTA = "ACTIVITY_DELTA"
    RAW = "RAW"
    CUSTOM = "CUSTOM"
    RUN_STARTED = "RUN_STARTED"
    RUN_FINISHED = "RUN_FINISHED"
    RUN_ERROR = "RUN_ERROR"
    STEP_STARTED = "STEP_STARTED"
    STEP_FINISHED = "STEP_FINISHED"
    REASONING_START = "REASONING_START"
    REASONING_MESSAGE_START = "REASONING_MESSAGE_START"
    REASONING_MESSAGE_CONTENT = "REASONING_MESSAGE_CONTENT"
    REASONING_MESSAGE_END = "REASONING_MESSAGE_END"
    REASONING_MESSAGE_CHUNK = "REASONING_MESSAGE_CHUNK"
    REASONING_END = "REASONING_END"
    REASONING_ENCRYPTED_VALUE = "REASONING_ENCRYPTED_VALUE"
    SUBAGENT_STARTED = "SUBAGENT_STARTED"
    SUBAGENT_FINISHED = "SUBAGENT_FINISHED"
    SUBAGENT_ERROR = "SUBAGENT_ERROR"


# --------------------------------------------------------------------------- validators
# Plain functions rather than attrs.validators combinators: they run on every event
# construction, so each is one type check and a branch.


def _fail(inst: object, attribute: Attribute[Any], expected: str, value: object) -> None:
    msg = f"{type(inst).__name__}.{attribute.name} must be {expected}, got {value!r}"
    raise InvalidEventError(msg)


def _str(inst: object, attribute: Attribute[Any], value: object) -> None:
    if type(value) is not str and not isinstance(value, str):
        _fail(inst, attribute, "a string", value)


def _opt_str(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        _fail(inst, attribute, "a string or absent (None)", value)


def _opt_bool(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        _fail(inst, attribute, "a bool or absent (None)", value)


def _opt_metadata(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, dict):
        _fail(inst, attribute, "a dict (a JSON object) or absent (None)", value)


def _dict(inst: object, attribute: Attribute[Any], value: object) -> None:
    if not isinstance(value, dict):
        _fail(inst, attribute, "a dict (a JSON object)", value)


def _timestamp(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and (
        type(value) is not int or not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    ):
        _fail(inst, attribute, f"an int within ±{MAX_SAFE_INTEGER} (e.g. ms since epoch)", value)


def _count(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and (type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER):
        _fail(inst, attribute, f"a non-negative int up to {MAX_SAFE_INTEGER}", value)


def _one_of(*allowed: str) -> Any:
    expected = " or ".join(repr(a) for a in allowed)

    def check(inst: object, attribute: Attribute[Any], value: object) -> None:
        if value not in allowed or not isinstance(value, str):
            _fail(inst, attribute, expected, value)

    return check


def _opt_one_of(*allowed: str) -> Any:
    check = _one_of(*allowed)

    def opt_check(inst: object, attribute: Attribute[Any], value: object) -> None:
        if value is not None:
            check(inst, attribute, value)

    return opt_check


_POINTER = re.compile(r"^(/([^/~]|~[01])*)*$")


def _pointer(inst: object, attribute: Attribute[Any], value: object) -> None:
    # fullmatch, not match: ``$`` also matches before a final newline, so match()
    # took "\n" for the empty pointer; the official models and zod reject it.
    if not isinstance(value, str) or _POINTER.fullmatch(value) is None:
        _fail(inst, attribute, 'a JSON Pointer ("" or "/a/b", with ~0 and ~1 escapes)', value)


def _tuple_of(*kinds: type) -> Any:
    names = " or ".join(k.__name__ for k in kinds)

    def check(inst: object, attribute: Attribute[Any], value: object) -> None:
        # The converter has made every list or tuple a tuple. Anything else (a str,
        # which would pass item by item as characters; a generator, which this loop
        # would consume; None or a number, which are not iterable) is rejected.
        if not isinstance(value, tuple):
            _fail(inst, attribute, f"a sequence of {names}", value)
        for item in value:  # type: ignore[attr-defined]
            if not isinstance(item, kinds):
                _fail(inst, attribute, f"a sequence of {names}", value)

    return check


def _opt_tuple_of(*kinds: type) -> Any:
    check = _tuple_of(*kinds)

    def opt_check(inst: object, attribute: Attribute[Any], value: object) -> None:
        if value is not None:
            check(inst, attribute, value)

    return opt_check


def _to_tuple(value: Any) -> Any:
    if isinstance(value, tuple):
        return value
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Sequence):
        return value  # left for the validator to reject with the field's name
    return tuple(value)


def _opt_to_tuple(value: Any) -> Any:
    return None if value is None else _to_tuple(value)


def _type_first(cls: type, fields: list[Attribute[Any]]) -> list[Attribute[Any]]:
    """Put the ``type`` discriminator first, where the official models have it."""
    for index, field in enumerate(fields):
        if field.name == "type" and index:
            return [field, *fields[:index], *fields[index + 1 :]]
    return fields


# --------------------------------------------------------------------------- content parts


@attrs.frozen(kw_only=True)
class DataSource:
    """Inline base64 data; *mime_type* is required. .. versionadded:: 0.1.0"""

    type: Literal["data"] = attrs.field(default="data", init=False, repr=False)
    value: str = attrs.field(validator=_str)
    mime_type: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True)
class UrlSource:
    """A URL the consumer can fetch. .. versionadded:: 0.1.0"""

    type: Literal["url"] = attrs.field(default="url", init=False, repr=False)
    value: str = attrs.field(validator=_str)
    mime_type: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True)
class FileSource:
    """An opaque provider file handle. .. versionadded:: 0.1.0"""

    type: Literal["file"] = attrs.field(default="file", init=False, repr=False)
    value: str = attrs.field(validator=_str)
    provider: str | None = attrs.field(default=None, validator=_opt_str)
    mime_type: str | None = attrs.field(default=None, validator=_opt_str)


PartSource: TypeAlias = DataSource | UrlSource | FileSource
_SOURCES: tuple[type[Any], ...] = get_args(PartSource)


def _source(inst: object, attribute: Attribute[Any], value: object) -> None:
    if not isinstance(value, _SOURCES):
        _fail(inst, attribute, "a DataSource, UrlSource or FileSource", value)


@attrs.frozen(kw_only=True)
class TextPart:
    """A text content part. .. versionadded:: 0.1.0"""

    type: Literal["text"] = attrs.field(default="text", init=False, repr=False)
    id: str | None = attrs.field(default=None, validator=_opt_str)
    text: str = attrs.field(validator=_str)
    metadata: JSON = None


@attrs.frozen(kw_only=True)
class _MediaPart:
    id: str | None = attrs.field(default=None, validator=_opt_str)
    source: PartSource = attrs.field(validator=_source)
    metadata: JSON = None


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ImagePart(_MediaPart):
    """An image content part. .. versionadded:: 0.1.0"""

    type: Literal["image"] = attrs.field(default="image", init=False, repr=False)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class AudioPart(_MediaPart):
    """An audio content part. .. versionadded:: 0.1.0"""

    type: Literal["audio"] = attrs.field(default="audio", init=False, repr=False)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class VideoPart(_MediaPart):
    """A video content part. .. versionadded:: 0.1.0"""

    type: Literal["video"] = attrs.field(default="video", init=False, repr=False)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class DocumentPart(_MediaPart):
    """A document content part. .. versionadded:: 0.1.0"""

    type: Literal["document"] = attrs.field(default="document", init=False, repr=False)


ContentPart: TypeAlias = TextPart | ImagePart | AudioPart | VideoPart | DocumentPart
_PARTS: tuple[type[Any], ...] = get_args(ContentPart)


def _content(inst: object, attribute: Attribute[Any], value: object) -> None:
    if isinstance(value, str):
        return
    if isinstance(value, tuple) and all(isinstance(p, _PARTS) for p in value):
        return
    _fail(inst, attribute, "a string or a sequence of content parts", value)


def _to_tuple_unless_str(value: Any) -> Any:
    return value if isinstance(value, str) else _to_tuple(value)


# --------------------------------------------------------------------------- messages


@attrs.frozen(kw_only=True)
class FunctionCall:
    """The function a tool call invokes; *arguments* is JSON text. .. versionadded:: 0.1.0"""

    name: str = attrs.field(validator=_str)
    arguments: str = attrs.field(validator=_str)


def _function(inst: object, attribute: Attribute[Any], value: object) -> None:
    if not isinstance(value, FunctionCall):
        _fail(inst, attribute, "a FunctionCall", value)


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call inside an assistant message. .. versionadded:: 0.1.0"""

    id: str = attrs.field(validator=_str)
    type: Literal["function"] = attrs.field(default="function", init=False, repr=False)
    function: FunctionCall = attrs.field(validator=_function)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


@attrs.frozen(kw_only=True)
class _MessageBase:
    subagent_run_id: str | None = attrs.field(default=None, validator=_opt_str)
    id: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True)
class DeveloperMessage(_MessageBase):
    """A developer message. .. versionadded:: 0.1.0"""

    role: Literal["developer"] = attrs.field(default="developer", init=False, repr=False)
    name: str | None = attrs.field(default=None, validator=_opt_str)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)
    content: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True)
class SystemMessage(_MessageBase):
    """A system message. .. versionadded:: 0.1.0"""

    role: Literal["system"] = attrs.field(default="system", init=False, repr=False)
    name: str | None = attrs.field(default=None, validator=_opt_str)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)
    content: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True)
class AssistantMessage(_MessageBase):
    """An assistant message: text, tool calls, or both. .. versionadded:: 0.1.0"""

    role: Literal["assistant"] = attrs.field(default="assistant", init=False, repr=False)
    name: str | None = attrs.field(default=None, validator=_opt_str)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)
    content: str | None = attrs.field(default=None, validator=_opt_str)
    tool_calls: tuple[ToolCall, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(ToolCall)
    )


@attrs.frozen(kw_only=True)
class UserMessage(_MessageBase):
    """A user message: text or content parts. .. versionadded:: 0.1.0"""

    role: Literal["user"] = attrs.field(default="user", init=False, repr=False)
    name: str | None = attrs.field(default=None, validator=_opt_str)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)
    content: str | tuple[ContentPart, ...] = attrs.field(
        converter=_to_tuple_unless_str, validator=_content
    )

    def text(self) -> str:
        """
        Return the message as plain text: the string, or its text parts joined by newlines.

        Non-text parts (images, audio, …) are dropped.
        """
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@attrs.frozen(kw_only=True)
class ToolMessage(_MessageBase):
    """The result of a tool call. .. versionadded:: 0.1.0"""

    role: Literal["tool"] = attrs.field(default="tool", init=False, repr=False)
    content: str | tuple[ContentPart, ...] = attrs.field(
        converter=_to_tuple_unless_str, validator=_content
    )
    tool_call_id: str = attrs.field(validator=_str)
    error: str | None = attrs.field(default=None, validator=_opt_str)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


@attrs.frozen(kw_only=True)
class ActivityMessage(_MessageBase):
    """A structured activity; *content* is a JSON object. .. versionadded:: 0.1.0"""

    role: Literal["activity"] = attrs.field(default="activity", init=False, repr=False)
    activity_type: str = attrs.field(validator=_str)
    content: dict[str, JSON] = attrs.field(validator=_dict)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


@attrs.frozen(kw_only=True)
class ReasoningMessage(_MessageBase):
    """A reasoning message. .. versionadded:: 0.1.0"""

    role: Literal["reasoning"] = attrs.field(default="reasoning", init=False, repr=False)
    content: str = attrs.field(validator=_str)
    encrypted_value: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


Message: TypeAlias = (
    DeveloperMessage
    | SystemMessage
    | AssistantMessage
    | UserMessage
    | ToolMessage
    | ActivityMessage
    | ReasoningMessage
)
_MESSAGES: tuple[type[Any], ...] = get_args(Message)

# --------------------------------------------------------------------------- input


@attrs.frozen(kw_only=True)
class Tool:
    """A frontend tool the client offers; *parameters* is a JSON Schema. .. versionadded:: 0.1.0"""

    name: str = attrs.field(validator=_str)
    description: str = attrs.field(validator=_str)
    parameters: JSON = None
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


@attrs.frozen(kw_only=True)
class Context:
    """An ambient context entry that should reach the model. .. versionadded:: 0.1.0"""

    description: str = attrs.field(validator=_str)
    value: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True)
class ResumeEntry:
    """The answer to one interrupt of an earlier run. .. versionadded:: 0.1.0"""

    interrupt_id: str = attrs.field(validator=_str)
    status: Literal["resolved", "cancelled"] = attrs.field(
        validator=_one_of("resolved", "cancelled")
    )
    payload: JSON = None
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


@attrs.frozen(kw_only=True)
class RunAgentInput:
    """
    The body of a run request.

    Absent ``tools``, ``context`` and ``resume`` mean the same as empty; absent
    ``state`` means ``{}``. Parse untrusted bytes with `RunAgentInput.from_json`.

    .. versionadded:: 0.1.0
    """

    thread_id: str = attrs.field(validator=_str)
    run_id: str = attrs.field(validator=_str)
    protocol_version: str | None = attrs.field(default=None, validator=_opt_str)
    parent_run_id: str | None = attrs.field(default=None, validator=_opt_str)
    state: JSON = None
    messages: tuple[Message, ...] = attrs.field(
        factory=tuple, converter=_to_tuple, validator=_tuple_of(*_MESSAGES)
    )
    tools: tuple[Tool, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(Tool)
    )
    context: tuple[Context, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(Context)
    )
    forwarded_props: JSON = None
    resume: tuple[ResumeEntry, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(ResumeEntry)
    )

    @classmethod
    def from_json(cls, data: bytes | bytearray | str) -> RunAgentInput:
        """
        Parse a request body.

        Unknown keys are ignored, as the protocol asks of producers.

        Raises:
            InvalidInputError: The body is not JSON, not an object, or does not fit
                the schema; the message lists every bad field by JSON path.
        """
        from ambient_runs._wire import parse_input_json

        return parse_input_json(data)

    @classmethod
    def from_wire(cls, data: object) -> RunAgentInput:
        """
        Build an input from its wire form (a camelCase dict).

        Raises:
            InvalidInputError: As for `from_json`.
        """
        from ambient_runs._wire import parse_input

        return parse_input(data)


# --------------------------------------------------------------------------- outcomes


@attrs.frozen(kw_only=True)
class Interrupt:
    """
    Why a run paused: the client must answer it in the next run's ``resume``.

    `ambient_runs.interrupt` makes one with a fresh id for the ambient scope; an
    interrupt raised (`Interrupted`) inside a subagent scope without a
    *subagent_run_id* gets the invocation's id.

    .. versionadded:: 0.1.0
    """

    subagent_run_id: str | None = attrs.field(default=None, validator=_opt_str)
    id: str = attrs.field(validator=_str)
    reason: str = attrs.field(validator=_str)
    message: str | None = attrs.field(default=None, validator=_opt_str)
    tool_call_id: str | None = attrs.field(default=None, validator=_opt_str)
    response_schema: dict[str, JSON] | None = attrs.field(default=None, validator=_opt_metadata)
    expires_at: str | None = attrs.field(default=None, validator=_opt_str)
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)


@attrs.frozen(kw_only=True)
class RunFinishedSuccessOutcome:
    """A completed run; *pending_tool_call_ids* names unanswered frontend calls. .. versionadded:: 0.1.0"""  # noqa: E501

    type: Literal["success"] = attrs.field(default="success", init=False, repr=False)
    pending_tool_call_ids: tuple[str, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(str)
    )


def _interrupts(inst: object, attribute: Attribute[Any], value: object) -> None:
    _tuple_of(Interrupt)(inst, attribute, value)
    if not value:
        _fail(inst, attribute, "at least one Interrupt", value)


@attrs.frozen(kw_only=True)
class RunFinishedInterruptOutcome:
    """A run paused on at least one interrupt. .. versionadded:: 0.1.0"""

    type: Literal["interrupt"] = attrs.field(default="interrupt", init=False, repr=False)
    interrupts: tuple[Interrupt, ...] = attrs.field(converter=_to_tuple, validator=_interrupts)


@attrs.frozen(kw_only=True)
class RunFinishedCancelledOutcome:
    """A run the producer stopped on purpose. .. versionadded:: 0.1.0"""

    type: Literal["cancelled"] = attrs.field(default="cancelled", init=False, repr=False)


RunFinishedOutcome: TypeAlias = (
    RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
)
_RUN_OUTCOMES: tuple[type[Any], ...] = get_args(RunFinishedOutcome)


@attrs.frozen(kw_only=True)
class SubagentFinishedSuccessOutcome:
    """A subagent invocation that completed. .. versionadded:: 0.1.0"""

    type: Literal["success"] = attrs.field(default="success", init=False, repr=False)


@attrs.frozen(kw_only=True)
class SubagentFinishedSuspendedOutcome:
    """A subagent waiting on interrupts; it may continue in a later run. .. versionadded:: 0.1.0"""

    type: Literal["suspended"] = attrs.field(default="suspended", init=False, repr=False)
    interrupt_ids: tuple[str, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(str)
    )


SubagentFinishedOutcome: TypeAlias = (
    SubagentFinishedSuccessOutcome | SubagentFinishedSuspendedOutcome
)
_SUBAGENT_OUTCOMES: tuple[type[Any], ...] = get_args(SubagentFinishedOutcome)


@attrs.frozen(kw_only=True)
class TokenUsage:
    """Token counts for one provider and model; absent means not reported. .. versionadded:: 0.1.0"""  # noqa: E501

    provider: str | None = attrs.field(default=None, validator=_opt_str)
    model: str | None = attrs.field(default=None, validator=_opt_str)
    input_tokens: int | None = attrs.field(default=None, validator=_count)
    output_tokens: int | None = attrs.field(default=None, validator=_count)
    total_tokens: int | None = attrs.field(default=None, validator=_count)
    reasoning_tokens: int | None = attrs.field(default=None, validator=_count)
    cached_input_tokens: int | None = attrs.field(default=None, validator=_count)
    cache_write_input_tokens: int | None = attrs.field(default=None, validator=_count)


# --------------------------------------------------------------------------- JSON Patch


@attrs.frozen(kw_only=True)
class AddOperation:
    """RFC 6902 ``add``. .. versionadded:: 0.1.0"""

    op: Literal["add"] = attrs.field(default="add", init=False, repr=False)
    path: str = attrs.field(validator=_pointer)
    value: JSON


@attrs.frozen(kw_only=True)
class RemoveOperation:
    """RFC 6902 ``remove``. .. versionadded:: 0.1.0"""

    op: Literal["remove"] = attrs.field(default="remove", init=False, repr=False)
    path: str = attrs.field(validator=_pointer)


@attrs.frozen(kw_only=True)
class ReplaceOperation:
    """RFC 6902 ``replace``. .. versionadded:: 0.1.0"""

    op: Literal["replace"] = attrs.field(default="replace", init=False, repr=False)
    path: str = attrs.field(validator=_pointer)
    value: JSON


@attrs.frozen(kw_only=True)
class MoveOperation:
    """RFC 6902 ``move``; *from_* is ``from`` on the wire. .. versionadded:: 0.1.0"""

    op: Literal["move"] = attrs.field(default="move", init=False, repr=False)
    from_: str = attrs.field(validator=_pointer)
    path: str = attrs.field(validator=_pointer)


@attrs.frozen(kw_only=True)
class CopyOperation:
    """RFC 6902 ``copy``; *from_* is ``from`` on the wire. .. versionadded:: 0.1.0"""

    op: Literal["copy"] = attrs.field(default="copy", init=False, repr=False)
    from_: str = attrs.field(validator=_pointer)
    path: str = attrs.field(validator=_pointer)


@attrs.frozen(kw_only=True)
class TestOperation:
    """RFC 6902 ``test``. .. versionadded:: 0.1.0"""

    __test__: ClassVar[bool] = False  # not a pytest test class

    op: Literal["test"] = attrs.field(default="test", init=False, repr=False)
    path: str = attrs.field(validator=_pointer)
    value: JSON


JsonPatchOperation: TypeAlias = (
    AddOperation
    | RemoveOperation
    | ReplaceOperation
    | MoveOperation
    | CopyOperation
    | TestOperation
)
_OPERATIONS: tuple[type[Any], ...] = get_args(JsonPatchOperation)


# --------------------------------------------------------------------------- events


@attrs.frozen(kw_only=True)
class BaseEvent:
    """
    Fields every event has.

    Args:
        timestamp: An int (conventionally ms since epoch); floats are rejected.
        raw_event: The upstream event this one was derived from, if any.
        metadata: A JSON object; the key ``ag-ui`` is reserved for the protocol.

    .. versionadded:: 0.1.0
    """

    TYPE: ClassVar[EventType]

    timestamp: int | None = attrs.field(default=None, validator=_timestamp)
    raw_event: JSON = None
    metadata: Metadata | None = attrs.field(default=None, validator=_opt_metadata)

    if TYPE_CHECKING:  # every concrete event has the field (set, not passed); for type checkers

        @property
        def type(self) -> EventType:
            """The event's type, e.g. ``EventType.RUN_STARTED`` (a `str` enum)."""


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class _Attributable(BaseEvent):
    subagent_run_id: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class TextMessageStartEvent(_Attributable):
    """Opens a text message; an absent *role* means assistant. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_START
    type: EventType = attrs.field(default=EventType.TEXT_MESSAGE_START, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)
    role: TextMessageRole | None = attrs.field(
        default=None, validator=_opt_one_of("developer", "system", "assistant", "user")
    )
    name: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class TextMessageContentEvent(_Attributable):
    """A piece of an open text message. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_CONTENT
    type: EventType = attrs.field(default=EventType.TEXT_MESSAGE_CONTENT, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)
    delta: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class TextMessageEndEvent(_Attributable):
    """Closes a text message. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_END
    type: EventType = attrs.field(default=EventType.TEXT_MESSAGE_END, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class TextMessageChunkEvent(_Attributable):
    """Shorthand the client expands into start/content/end. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TEXT_MESSAGE_CHUNK
    type: EventType = attrs.field(default=EventType.TEXT_MESSAGE_CHUNK, init=False, repr=False)
    message_id: str | None = attrs.field(default=None, validator=_opt_str)
    role: TextMessageRole | None = attrs.field(
        default=None, validator=_opt_one_of("developer", "system", "assistant", "user")
    )
    delta: str | None = attrs.field(default=None, validator=_opt_str)
    name: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ToolCallStartEvent(_Attributable):
    """Opens a tool call, optionally inside message *parent_message_id*. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_START
    type: EventType = attrs.field(default=EventType.TOOL_CALL_START, init=False, repr=False)
    tool_call_id: str = attrs.field(validator=_str)
    tool_call_name: str = attrs.field(validator=_str)
    parent_message_id: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ToolCallArgsEvent(_Attributable):
    """A piece of a tool call's argument text. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_ARGS
    type: EventType = attrs.field(default=EventType.TOOL_CALL_ARGS, init=False, repr=False)
    tool_call_id: str = attrs.field(validator=_str)
    delta: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ToolCallEndEvent(_Attributable):
    """The tool call's arguments are complete. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_END
    type: EventType = attrs.field(default=EventType.TOOL_CALL_END, init=False, repr=False)
    tool_call_id: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ToolCallChunkEvent(_Attributable):
    """Shorthand the client expands into start/args/end. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_CHUNK
    type: EventType = attrs.field(default=EventType.TOOL_CALL_CHUNK, init=False, repr=False)
    tool_call_id: str | None = attrs.field(default=None, validator=_opt_str)
    tool_call_name: str | None = attrs.field(default=None, validator=_opt_str)
    parent_message_id: str | None = attrs.field(default=None, validator=_opt_str)
    delta: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ToolCallResultEvent(_Attributable):
    """
    The result of a tool call, as a new tool message *message_id*.

    .. versionadded:: 0.1.0
    """

    TYPE: ClassVar[EventType] = EventType.TOOL_CALL_RESULT
    type: EventType = attrs.field(default=EventType.TOOL_CALL_RESULT, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)
    tool_call_id: str = attrs.field(validator=_str)
    content: str | tuple[ContentPart, ...] = attrs.field(
        converter=_to_tuple_unless_str, validator=_content
    )
    role: Literal["tool"] | None = attrs.field(default=None, validator=_opt_one_of("tool"))


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class StateSnapshotEvent(_Attributable):
    """Replaces the run's state wholesale; *snapshot* may be null. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.STATE_SNAPSHOT
    type: EventType = attrs.field(default=EventType.STATE_SNAPSHOT, init=False, repr=False)
    snapshot: JSON


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class StateDeltaEvent(_Attributable):
    """An RFC 6902 patch against the current state. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.STATE_DELTA
    type: EventType = attrs.field(default=EventType.STATE_DELTA, init=False, repr=False)
    delta: tuple[JsonPatchOperation, ...] = attrs.field(
        converter=_to_tuple, validator=_tuple_of(*_OPERATIONS)
    )


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class MessagesSnapshotEvent(BaseEvent):
    """The whole conversation; authoritative. Not attributable. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.MESSAGES_SNAPSHOT
    type: EventType = attrs.field(default=EventType.MESSAGES_SNAPSHOT, init=False, repr=False)
    messages: tuple[Message, ...] = attrs.field(
        converter=_to_tuple, validator=_tuple_of(*_MESSAGES)
    )


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ActivitySnapshotEvent(_Attributable):
    """Creates or replaces an activity message. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.ACTIVITY_SNAPSHOT
    type: EventType = attrs.field(default=EventType.ACTIVITY_SNAPSHOT, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)
    activity_type: str = attrs.field(validator=_str)
    content: dict[str, JSON] = attrs.field(validator=_dict)
    replace: bool | None = attrs.field(default=None, validator=_opt_bool)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ActivityDeltaEvent(_Attributable):
    """Patches an activity message's content. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.ACTIVITY_DELTA
    type: EventType = attrs.field(default=EventType.ACTIVITY_DELTA, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)
    activity_type: str = attrs.field(validator=_str)
    patch: tuple[JsonPatchOperation, ...] = attrs.field(
        converter=_to_tuple, validator=_tuple_of(*_OPERATIONS)
    )


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class RawEvent(_Attributable):
    """An upstream event passed through as-is. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.RAW
    type: EventType = attrs.field(default=EventType.RAW, init=False, repr=False)
    event: JSON
    source: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class CustomEvent(_Attributable):
    """An application-defined event; *value* may be null. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.CUSTOM
    type: EventType = attrs.field(default=EventType.CUSTOM, init=False, repr=False)
    name: str = attrs.field(validator=_str)
    value: JSON


def _run_input(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, RunAgentInput):
        _fail(inst, attribute, "a RunAgentInput or absent (None)", value)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class RunStartedEvent(BaseEvent):
    """The first event of a run. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.RUN_STARTED
    type: EventType = attrs.field(default=EventType.RUN_STARTED, init=False, repr=False)
    thread_id: str = attrs.field(validator=_str)
    run_id: str = attrs.field(validator=_str)
    protocol_version: str | None = attrs.field(default=None, validator=_opt_str)
    parent_run_id: str | None = attrs.field(default=None, validator=_opt_str)
    input: RunAgentInput | None = attrs.field(
        default=None,
        validator=_run_input,
    )


def _run_outcome(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, _RUN_OUTCOMES):
        _fail(inst, attribute, "a RunFinished*Outcome or absent (None)", value)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class RunFinishedEvent(BaseEvent):
    """The run ended: success, interrupt or cancelled. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.RUN_FINISHED
    type: EventType = attrs.field(default=EventType.RUN_FINISHED, init=False, repr=False)
    thread_id: str = attrs.field(validator=_str)
    run_id: str = attrs.field(validator=_str)
    result: JSON = None
    outcome: RunFinishedOutcome | None = attrs.field(default=None, validator=_run_outcome)
    usage: tuple[TokenUsage, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(TokenUsage)
    )


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class RunErrorEvent(BaseEvent):
    """The run failed; may come first, before any RUN_STARTED. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.RUN_ERROR
    type: EventType = attrs.field(default=EventType.RUN_ERROR, init=False, repr=False)
    message: str = attrs.field(validator=_str)
    code: str | None = attrs.field(default=None, validator=_opt_str)
    usage: tuple[TokenUsage, ...] | None = attrs.field(
        default=None, converter=_opt_to_tuple, validator=_opt_tuple_of(TokenUsage)
    )


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class StepStartedEvent(_Attributable):
    """Opens a named step; steps are per owner. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.STEP_STARTED
    type: EventType = attrs.field(default=EventType.STEP_STARTED, init=False, repr=False)
    step_name: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class StepFinishedEvent(_Attributable):
    """Closes a named step. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.STEP_FINISHED
    type: EventType = attrs.field(default=EventType.STEP_FINISHED, init=False, repr=False)
    step_name: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningStartEvent(_Attributable):
    """Opens a reasoning span. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_START
    type: EventType = attrs.field(default=EventType.REASONING_START, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningMessageStartEvent(_Attributable):
    """Opens a reasoning message; ``role`` is always ``reasoning``. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_START
    type: EventType = attrs.field(
        default=EventType.REASONING_MESSAGE_START, init=False, repr=False
    )
    message_id: str = attrs.field(validator=_str)
    role: Literal["reasoning"] = attrs.field(default="reasoning", init=False, repr=False)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningMessageContentEvent(_Attributable):
    """A piece of an open reasoning message. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_CONTENT
    type: EventType = attrs.field(
        default=EventType.REASONING_MESSAGE_CONTENT, init=False, repr=False
    )
    message_id: str = attrs.field(validator=_str)
    delta: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningMessageEndEvent(_Attributable):
    """Closes a reasoning message. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_END
    type: EventType = attrs.field(default=EventType.REASONING_MESSAGE_END, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningMessageChunkEvent(_Attributable):
    """Shorthand the client expands into a reasoning message. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_MESSAGE_CHUNK
    type: EventType = attrs.field(
        default=EventType.REASONING_MESSAGE_CHUNK, init=False, repr=False
    )
    message_id: str | None = attrs.field(default=None, validator=_opt_str)
    delta: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningEndEvent(_Attributable):
    """Closes a reasoning span. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_END
    type: EventType = attrs.field(default=EventType.REASONING_END, init=False, repr=False)
    message_id: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class ReasoningEncryptedValueEvent(_Attributable):
    """Attaches an opaque encrypted value to a message or tool call. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.REASONING_ENCRYPTED_VALUE
    type: EventType = attrs.field(
        default=EventType.REASONING_ENCRYPTED_VALUE, init=False, repr=False
    )
    subtype: Literal["tool-call", "message"] = attrs.field(
        validator=_one_of("tool-call", "message")
    )
    entity_id: str = attrs.field(validator=_str)
    encrypted_value: str = attrs.field(validator=_str)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class SubagentStartedEvent(BaseEvent):
    """
    Announces subagent invocation *subagent_run_id* (required: it identifies the invocation).

    .. versionadded:: 0.1.0
    """

    TYPE: ClassVar[EventType] = EventType.SUBAGENT_STARTED
    type: EventType = attrs.field(default=EventType.SUBAGENT_STARTED, init=False, repr=False)
    subagent_run_id: str = attrs.field(validator=_str)
    name: str = attrs.field(validator=_str)
    description: str | None = attrs.field(default=None, validator=_opt_str)
    parent_subagent_run_id: str | None = attrs.field(default=None, validator=_opt_str)
    parent_tool_call_id: str | None = attrs.field(default=None, validator=_opt_str)
    parent_message_id: str | None = attrs.field(default=None, validator=_opt_str)


def _subagent_outcome(inst: object, attribute: Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, _SUBAGENT_OUTCOMES):
        _fail(inst, attribute, "a SubagentFinished*Outcome or absent (None)", value)


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class SubagentFinishedEvent(BaseEvent):
    """Ends an invocation: success (absent outcome) or suspended. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.SUBAGENT_FINISHED
    type: EventType = attrs.field(default=EventType.SUBAGENT_FINISHED, init=False, repr=False)
    subagent_run_id: str = attrs.field(validator=_str)
    result: JSON = None
    outcome: SubagentFinishedOutcome | None = attrs.field(
        default=None, validator=_subagent_outcome
    )


@attrs.frozen(kw_only=True, field_transformer=_type_first)
class SubagentErrorEvent(BaseEvent):
    """Ends an invocation with an error; the run goes on. .. versionadded:: 0.1.0"""

    TYPE: ClassVar[EventType] = EventType.SUBAGENT_ERROR
    type: EventType = attrs.field(default=EventType.SUBAGENT_ERROR, init=False, repr=False)
    subagent_run_id: str = attrs.field(validator=_str)
    message: str = attrs.field(validator=_str)
    code: str | None = attrs.field(default=None, validator=_opt_str)


Event: TypeAlias = (
    TextMessageStartEvent
    | TextMessageContentEvent
    | TextMessageEndEvent
    | TextMessageChunkEvent
    | ToolCallStartEvent
    | ToolCallArgsEvent
    | ToolCallEndEvent
    | ToolCallChunkEvent
    | ToolCallResultEvent
    | StateSnapshotEvent
    | StateDeltaEvent
    | MessagesSnapshotEvent
    | ActivitySnapshotEvent
    | ActivityDeltaEvent
    | RawEvent
    | CustomEvent
    | RunStartedEvent
    | RunFinishedEvent
    | RunErrorEvent
    | StepStartedEvent
    | StepFinishedEvent
    | ReasoningStartEvent
    | ReasoningMessageStartEvent
    | ReasoningMessageContentEvent
    | ReasoningMessageEndEvent
    | ReasoningMessageChunkEvent
    | ReasoningEndEvent
    | ReasoningEncryptedValueEvent
    | SubagentStartedEvent
    | SubagentFinishedEvent
    | SubagentErrorEvent
)
"""Any of the 31 AG-UI 1.0 events."""

#: Every event class, keyed by its wire type: derived from `Event`, the one list of them.
EVENT_CLASSES: dict[EventType, type[BaseEvent]] = {cls.TYPE: cls for cls in get_args(Event)}

#: Event classes that carry an attributing ``subagent_run_id``.
ATTRIBUTABLE: frozenset[type[BaseEvent]] = frozenset(
    cls for cls in EVENT_CLASSES.values() if issubclass(cls, _Attributable)
)


def unchecked(cls: type[T], *names: str) -> Callable[..., T]:
    """
    Return ``make(*values)``: an instance of *cls* built without ``__init__``.

    For the library's own hot paths, which pass only values already known to be
    valid (ids it minted, owners checked when a handle opened, user strings
    checked once when a subagent was declared): *names* are set positionally,
    every other field to its default, giving an object equal to the
    constructor's. Keyword parsing and one validator per field are most of an
    event's construction cost.

    Raises:
        TypeError: A field outside *names* has no plain default.
    """
    # Each field is stored through its slot's own setter, bound once here: a
    # member descriptor's ``__set__`` skips the attribute lookup of
    # ``object.__setattr__`` (a third of the cost on a seven-field event).
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = [f"def make_{cls.__name__}({', '.join(names)}):", "    o = new(cls)"]
    for a in attrs.fields(cast(Any, cls)):
        if a.name in names:
            value = a.name
        elif a.default is attrs.NOTHING or isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
            msg = f"{cls.__name__}.{a.name} has no plain default; pass it to unchecked()"
            raise TypeError(msg)
        else:
            namespace[f"default_{a.name}"] = a.default
            value = f"default_{a.name}"
        namespace[f"set_{a.name}"] = _slot_setter(cls, a.name)
        lines.append(f"    set_{a.name}(o, {value})")
    lines.append("    return o")
    make = compile_function(f"make_{cls.__name__}", lines, namespace, module=__name__)
    return cast("Callable[..., T]", make)


def _slot_setter(cls: type[Any], name: str) -> Callable[[Any, Any], None]:
    """The ``__set__`` of the slot storing *name* (``object.__setattr__`` without one)."""
    for klass in cls.__mro__:
        slot = klass.__dict__.get(name)
        if isinstance(slot, types.MemberDescriptorType):
            return slot.__set__
    return lambda obj, value: object.__setattr__(obj, name, value)


def _by_tag(classes: Sequence[type[Any]], tag: str) -> dict[str, type[Any]]:
    return {getattr(attrs.fields(cls), tag).default: cls for cls in classes}


MESSAGE_CLASSES: dict[str, type[Any]] = _by_tag(_MESSAGES, "role")
PART_CLASSES: dict[str, type[Any]] = _by_tag(_PARTS, "type")
SOURCE_CLASSES: dict[str, type[Any]] = _by_tag(_SOURCES, "type")
OPERATION_CLASSES: dict[str, type[Any]] = _by_tag(_OPERATIONS, "op")
RUN_OUTCOME_CLASSES: dict[str, type[Any]] = _by_tag(_RUN_OUTCOMES, "type")
SUBAGENT_OUTCOME_CLASSES: dict[str, type[Any]] = _by_tag(_SUBAGENT_OUTCOMES, "type")


def _exports(namespace: dict[str, Any]) -> tuple[str, ...]:
    """
    Return this module's public names: every class defined here and every alias.

    An alias is a union of the classes (`Event`, `Message`, …) or a ``Literal``
    (`TextMessageRole`); `JSON` and `Metadata` describe free-form payloads and
    are not exported. Deriving the list means a new event, message or part
    class cannot be left out of it (``VideoPart`` once was).
    """

    def public(name: str, obj: object) -> bool:
        if name.startswith("_"):
            return False
        if isinstance(obj, type):
            return obj.__module__ == __name__
        return isinstance(obj, types.UnionType) or get_origin(obj) is Literal

    return tuple(sorted(name for name, obj in namespace.items() if public(name, obj)))


__all__ = _exports(globals())
