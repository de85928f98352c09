"""
The AG-UI binary transport: protobuf events, length-prefixed. Pure encoders, no I/O.

What the official TypeScript client (``@ag-ui/client`` 1.0.4, ``parseProtoStream``)
reads when a response says ``Content-Type: application/vnd.ag-ui.event+proto``:
each event is one ``ag_ui.Event`` message (the envelope whose one field names the
event type) preceded by its length as four big-endian bytes. The schema is
``@ag-ui/proto`` 1.0.4's (``events.proto``, ``types.proto``, ``patch.proto``).

The encoder is written by hand, so the transport needs no ``protobuf`` package:
an event is turned into its wire form (`ambient_runs.to_wire`'s camelCase
dict) and each field written with its number. JSON values (state, results,
metadata, ...) ride as ``google.protobuf.Value`` / ``Struct``, whose numbers are
doubles: an integer beyond 2**53 does not survive the trip, as in JavaScript.
On an `ambient_runs.stream`, `frames` has a message's deltas made as binary
frames directly by `MessageHandle.write` (the byte path, as for SSE), and
converts the byte path's other frames, which stay SSE.

`AgentApp` and `ambient_runs.adapters.starlette.serve` answer with it when the
request's ``Accept`` names `CONTENT_TYPE`; SSE stays the default.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Mapping, Sequence
from typing import Any

from ambient_runs import events as ev
from ambient_runs._outcomes import DEFAULT_POLICY, GENERIC_MESSAGE, ErrorPolicy
from ambient_runs._wire import to_wire

__all__ = ("CONTENT_TYPE", "accepts", "encode", "encode_wire", "frames")

_log = logging.getLogger("ambient_runs")

CONTENT_TYPE = "application/vnd.ag-ui.event+proto"
"""
The response media type of the binary transport (``@ag-ui/proto``'s ``AGUI_MEDIA_TYPE``).

.. versionadded:: 0.1.0
"""

# ---------------------------------------------------------------------------- the wire


def _varint(n: int) -> bytes:
    """*n* as a protobuf varint (a negative int64 as its ten-byte two's complement)."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((n,)) for n in range(0x80)]


def _len(field: int, payload: bytes) -> bytes:
    """A length-delimited field: a string's bytes or an embedded message."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _str(field: int, text: str) -> bytes:
    return _len(field, text.encode("utf-8", "surrogatepass"))


_pack_double = struct.Struct("<d").pack


def _value(value: Any) -> bytes:
    """A JSON value as a ``google.protobuf.Value`` message (its body)."""
    if value is None:
        return b"\x08\x00"  # null_value = NULL_VALUE
    if value is True:
        return b"\x20\x01"  # bool_value
    if value is False:
        return b"\x20\x00"
    if isinstance(value, str):
        return _str(3, value)
    if isinstance(value, int | float):
        return b"\x11" + _pack_double(float(value))  # number_value, a double
    if isinstance(value, Mapping):
        return _len(5, _struct(value))
    if isinstance(value, list | tuple):
        return _len(6, b"".join([_len(1, _value(item)) for item in value]))  # ListValue
    msg = f"{type(value).__name__} is not JSON and has no protobuf Value"
    raise TypeError(msg)


def _struct(mapping: Mapping[str, Any]) -> bytes:
    """A JSON object as a ``google.protobuf.Struct`` (its body): map entries, field 1."""
    return b"".join(
        [_len(1, _str(1, key) + _len(2, _value(value))) for key, value in mapping.items()]
    )


# ---------------------------------------------------------------------------- the schema
#
# A message is a table: (wire key, field number, kind). Kinds: "s" a string sent
# when not empty (proto3 implicit presence), "o" an optional string sent when
# present, "v" a JSON Value, "m" a JSON object as a Struct, "b" an optional bool,
# "i" an optional int64, "S" a repeated string, or a table / callable for an
# embedded message (a list of them when the wire value is a list).

_Kind = Any
_Table = tuple[tuple[str, int, _Kind], ...]


def _message(table: _Table, wire: Mapping[str, Any]) -> bytes:
    parts: list[bytes] = []
    for key, field, kind in table:
        value = wire.get(key)
        if value is None:
            if kind == "v" and key in wire:  # a JSON null said out loud (CUSTOM's value)
                parts.append(_len(field, b"\x08\x00"))
            continue
        if kind == "s":
            if value:
                parts.append(_str(field, value))
        elif kind == "o":
            parts.append(_str(field, value))
        elif kind == "v":
            parts.append(_len(field, _value(value)))
        elif kind == "m":
            parts.append(_len(field, _struct(value)))
        elif kind == "b":
            parts.append(_varint(field << 3) + (b"\x01" if value else b"\x00"))
        elif kind == "i":
            parts.append(_varint(field << 3) + _varint(value))
        elif kind == "S":
            parts.extend([_str(field, item) for item in value])
        else:
            encode = kind if callable(kind) else _bound(kind)
            items = value if isinstance(value, list | tuple) else (value,)
            parts.extend([_len(field, encode(item)) for item in items])
    return b"".join(parts)


def _bound(table: _Table) -> Callable[[Mapping[str, Any]], bytes]:
    def encode(wire: Mapping[str, Any]) -> bytes:
        return _message(table, wire)

    return encode


_USAGE: _Table = (
    ("provider", 1, "o"),
    ("model", 2, "o"),
    ("inputTokens", 3, "i"),
    ("outputTokens", 4, "i"),
    ("totalTokens", 5, "i"),
    ("reasoningTokens", 6, "i"),
    ("cachedInputTokens", 7, "i"),
    ("cacheWriteInputTokens", 8, "i"),
)
_INTERRUPT: _Table = (
    ("id", 1, "s"),
    ("reason", 2, "s"),
    ("message", 3, "o"),
    ("toolCallId", 4, "o"),
    ("responseSchema", 5, "v"),
    ("expiresAt", 6, "o"),
    ("metadata", 7, "v"),
    ("subagentRunId", 8, "o"),
)
_OPS = {"add": 0, "remove": 1, "replace": 2, "move": 3, "copy": 4, "test": 5}


def _patch_operation(wire: Mapping[str, Any]) -> bytes:
    """A JSON Patch operation: ``op`` is an enum (``add`` is 0, so it goes unsent)."""
    op = _OPS[wire["op"]]
    head = b"\x08" + _varint(op) if op else b""
    return head + _message((("path", 2, "s"), ("from", 3, "o"), ("value", 4, "v")), wire)


_SOURCES = {
    "data": (1, (("value", 1, "s"), ("mimeType", 2, "s"))),
    "url": (2, (("value", 1, "s"), ("mimeType", 2, "o"))),
    "file": (3, (("value", 1, "s"), ("provider", 2, "o"), ("mimeType", 3, "o"))),
}
_PARTS = {"text": 1, "image": 2, "audio": 3, "video": 4, "document": 5}


def _content_part(wire: Mapping[str, Any]) -> bytes:
    """An input content part: the ``InputContent`` oneof, by the part's ``type``."""
    kind = wire["type"]
    if kind == "text":
        body = _message((("text", 1, "s"), ("id", 2, "o"), ("metadata", 3, "v")), wire)
    else:
        source = wire.get("source")
        head = b""
        if source is not None:
            number, table = _SOURCES[source["type"]]
            head = _len(1, _len(number, _message(table, source)))
        body = head + _message((("metadata", 2, "v"), ("id", 3, "o")), wire)
    return _len(_PARTS[kind], body)


_TOOL_CALL: _Table = (
    ("id", 1, "s"),
    ("type", 2, "s"),
    ("function", 3, (("name", 1, "s"), ("arguments", 2, "s"))),
    ("metadata", 4, "m"),
    ("encryptedValue", 5, "o"),
)
_MESSAGE: _Table = (
    ("id", 1, "s"),
    ("role", 2, "s"),
    ("name", 4, "o"),
    ("toolCalls", 5, _TOOL_CALL),
    ("toolCallId", 6, "o"),
    ("error", 7, "o"),
    ("metadata", 9, "m"),
    ("subagentRunId", 10, "o"),
    ("encryptedValue", 11, "o"),
    ("activityType", 12, "o"),
)


def _chat_message(wire: Mapping[str, Any]) -> bytes:
    """A message: its ``content`` is a string (3), content parts (8) or an activity object (13)."""
    content = wire.get("content")
    if content is None:
        tail = b""
    elif wire.get("role") == "activity":
        tail = _len(13, _struct(content))
    elif isinstance(content, str):
        tail = _str(3, content)
    else:
        tail = b"".join([_len(8, _content_part(part)) for part in content])
    return _message(_MESSAGE, wire) + tail


_INPUT: _Table = (
    ("threadId", 1, "s"),
    ("runId", 2, "s"),
    ("parentRunId", 3, "o"),
    ("state", 4, "v"),
    ("messages", 5, _chat_message),
    (
        "tools",
        6,
        (("name", 1, "s"), ("description", 2, "s"), ("parameters", 3, "v"), ("metadata", 4, "m")),
    ),
    ("context", 7, (("description", 1, "s"), ("value", 2, "s"))),
    ("forwardedProps", 8, "v"),
    (
        "resume",
        9,
        (("interruptId", 1, "s"), ("status", 2, "s"), ("payload", 3, "v"), ("metadata", 4, "m")),
    ),
    ("protocolVersion", 10, "o"),
)


def _run_finished(wire: Mapping[str, Any]) -> bytes:
    """``outcome`` is an object on the JSON wire, its type and lists flattened here."""
    outcome = wire.get("outcome") or {}
    flat = {
        **wire,
        "outcome": outcome.get("type"),
        "interrupts": outcome.get("interrupts"),
        "pendingToolCallIds": outcome.get("pendingToolCallIds"),
    }
    return _message(
        (
            ("threadId", 2, "s"),
            ("runId", 3, "s"),
            ("result", 4, "v"),
            ("outcome", 5, "s"),
            ("interrupts", 6, _INTERRUPT),
            ("usage", 7, _USAGE),
            ("pendingToolCallIds", 8, "S"),
        ),
        flat,
    )


def _subagent_finished(wire: Mapping[str, Any]) -> bytes:
    outcome = wire.get("outcome") or {}
    flat = {**wire, "outcome": outcome.get("type"), "interruptIds": outcome.get("interruptIds")}
    return _message(
        (
            ("subagentRunId", 2, "s"),
            ("result", 3, "v"),
            ("outcome", 4, "s"),
            ("interruptIds", 5, "S"),
        ),
        flat,
    )


def _tool_call_result(wire: Mapping[str, Any]) -> bytes:
    content = wire.get("content")
    body = _message(
        (
            ("subagentRunId", 2, "o"),
            ("messageId", 3, "s"),
            ("toolCallId", 4, "s"),
            ("role", 6, "o"),
        ),
        wire,
    )
    if isinstance(content, str):
        return body + _str(5, content)
    if content is not None:
        return body + b"".join([_len(7, _content_part(part)) for part in content])
    return body


_SUB = ("subagentRunId",)

#: event type -> (envelope field, EventType number, body: a table or a function)
_EVENTS: dict[str, tuple[int, int, Any]] = {
    "TEXT_MESSAGE_START": (
        1,
        0,
        (("messageId", 2, "s"), ("role", 3, "o"), ("name", 4, "o"), ("subagentRunId", 5, "o")),
    ),
    "TEXT_MESSAGE_CONTENT": (
        2,
        1,
        (("messageId", 2, "s"), ("delta", 3, "s"), ("subagentRunId", 4, "o")),
    ),
    "TEXT_MESSAGE_END": (3, 2, (("messageId", 2, "s"), ("subagentRunId", 3, "o"))),
    "TOOL_CALL_START": (
        4,
        3,
        (
            ("toolCallId", 2, "s"),
            ("toolCallName", 3, "s"),
            ("parentMessageId", 4, "o"),
            ("subagentRunId", 5, "o"),
        ),
    ),
    "TOOL_CALL_ARGS": (
        5,
        4,
        (("toolCallId", 2, "s"), ("delta", 3, "s"), ("subagentRunId", 4, "o")),
    ),
    "TOOL_CALL_END": (6, 5, (("toolCallId", 2, "s"), ("subagentRunId", 3, "o"))),
    "STATE_SNAPSHOT": (7, 6, (("snapshot", 2, "v"), ("subagentRunId", 3, "o"))),
    "STATE_DELTA": (8, 7, (("delta", 2, _patch_operation), ("subagentRunId", 3, "o"))),
    "MESSAGES_SNAPSHOT": (9, 8, (("messages", 2, _chat_message),)),
    "RAW": (10, 9, (("event", 2, "v"), ("source", 3, "o"), ("subagentRunId", 4, "o"))),
    "CUSTOM": (11, 10, (("name", 2, "s"), ("value", 3, "v"), ("subagentRunId", 4, "o"))),
    "RUN_STARTED": (
        12,
        11,
        (
            ("threadId", 2, "s"),
            ("runId", 3, "s"),
            ("parentRunId", 4, "o"),
            ("input", 5, _INPUT),
            ("protocolVersion", 6, "o"),
        ),
    ),
    "RUN_FINISHED": (13, 12, _run_finished),
    "RUN_ERROR": (14, 13, (("code", 2, "o"), ("message", 3, "s"), ("usage", 4, _USAGE))),
    "STEP_STARTED": (15, 14, (("stepName", 2, "s"), ("subagentRunId", 3, "o"))),
    "STEP_FINISHED": (16, 15, (("stepName", 2, "s"), ("subagentRunId", 3, "o"))),
    "TEXT_MESSAGE_CHUNK": (
        17,
        19,
        (
            ("messageId", 2, "o"),
            ("role", 3, "o"),
            ("delta", 4, "o"),
            ("name", 5, "o"),
            ("subagentRunId", 6, "o"),
        ),
    ),
    "TOOL_CALL_CHUNK": (
        18,
        20,
        (
            ("toolCallId", 2, "o"),
            ("toolCallName", 3, "o"),
            ("parentMessageId", 4, "o"),
            ("delta", 5, "o"),
            ("subagentRunId", 6, "o"),
        ),
    ),
    "SUBAGENT_STARTED": (
        19,
        16,
        (
            ("subagentRunId", 2, "s"),
            ("name", 3, "s"),
            ("description", 4, "o"),
            ("parentSubagentRunId", 5, "o"),
            ("parentToolCallId", 6, "o"),
            ("parentMessageId", 7, "o"),
        ),
    ),
    "SUBAGENT_FINISHED": (20, 17, _subagent_finished),
    "SUBAGENT_ERROR": (21, 18, (("subagentRunId", 2, "s"), ("message", 3, "s"), ("code", 4, "o"))),
    "TOOL_CALL_RESULT": (22, 21, _tool_call_result),
    "ACTIVITY_SNAPSHOT": (
        23,
        22,
        (
            ("subagentRunId", 2, "o"),
            ("messageId", 3, "s"),
            ("activityType", 4, "s"),
            ("content", 5, "m"),
            ("replace", 6, "b"),
        ),
    ),
    "ACTIVITY_DELTA": (
        24,
        23,
        (
            ("subagentRunId", 2, "o"),
            ("messageId", 3, "s"),
            ("activityType", 4, "s"),
            ("patch", 5, _patch_operation),
        ),
    ),
    "REASONING_START": (25, 24, (("subagentRunId", 2, "o"), ("messageId", 3, "s"))),
    "REASONING_MESSAGE_START": (
        26,
        25,
        (("subagentRunId", 2, "o"), ("messageId", 3, "s"), ("role", 4, "s")),
    ),
    "REASONING_MESSAGE_CONTENT": (
        27,
        26,
        (("subagentRunId", 2, "o"), ("messageId", 3, "s"), ("delta", 4, "s")),
    ),
    "REASONING_MESSAGE_END": (28, 27, (("subagentRunId", 2, "o"), ("messageId", 3, "s"))),
    "REASONING_MESSAGE_CHUNK": (
        29,
        28,
        (("subagentRunId", 2, "o"), ("messageId", 3, "o"), ("delta", 4, "o")),
    ),
    "REASONING_END": (30, 29, (("subagentRunId", 2, "o"), ("messageId", 3, "s"))),
    "REASONING_ENCRYPTED_VALUE": (
        31,
        30,
        (
            ("subagentRunId", 2, "o"),
            ("subtype", 3, "s"),
            ("entityId", 4, "s"),
            ("encryptedValue", 5, "s"),
        ),
    ),
}
del _SUB


def _base(number: int, wire: Mapping[str, Any]) -> bytes:
    """The ``BaseEvent`` every event carries as field 1 (sent even when empty)."""
    body = b"\x08" + _varint(number) if number else b""
    timestamp = wire.get("timestamp")
    if timestamp is not None:
        body += b"\x10" + _varint(timestamp)
    raw = wire.get("rawEvent")
    if raw is not None:
        body += _len(3, _value(raw))
    metadata = wire.get("metadata")
    if metadata is not None:
        body += _len(4, _struct(metadata))
    return _len(1, body)


_PREFIX = struct.Struct(">I").pack

# The byte path's pieces (`MessageHandle.write` on a stream `frames` consumes).

#: The start of a frame whose ``TextMessageContentEvent`` body is *n* < 0x7E bytes long,
#: as text: its length prefix, the envelope's tag and the body's length, all ASCII.
_ENVELOPE_BYTES = [_PREFIX(n + 2) + b"\x12" + bytes((n,)) for n in range(0x7E)]
#: The same, as text (all ASCII).
_ENVELOPES = [envelope.decode() for envelope in _ENVELOPE_BYTES]
#: A one-byte varint, as text.
_LENGTHS = [chr(n) for n in range(0x80)]


def _delta_template(event: ev.TextMessageContentEvent) -> bytes:
    """
    The fixed part of a delta's frame: *event*'s ``TextMessageContentEvent`` body
    (no metadata, no timestamp, no raw event) without its delta, ending with the
    delta's tag.

    The delta's length (a varint) and UTF-8 follow, and that body goes in the
    envelope (field 2: ``0x12``, its length) after the frame's length. The delta
    comes last, after the owner: protobuf fields may come in any order.
    """
    head = _base(1, {}) + _str(2, event.message_id)
    if event.subagent_run_id is not None:
        head += _str(4, event.subagent_run_id)
    return head + b"\x1a"


def encode_wire(wire: Mapping[str, Any]) -> bytes:
    """
    Return the frame of an event in its wire form (a camelCase dict, as JSON has it).

    Raises:
        ValueError: The event type has no protobuf form in ``@ag-ui/proto`` 1.0.4.

    .. versionadded:: 0.1.0
    """
    kind = wire["type"]
    spec = _EVENTS.get(kind)
    if spec is None:
        msg = f"{kind} has no protobuf form in @ag-ui/proto 1.0.4: serve this run as SSE"
        raise ValueError(msg)
    field, number, body = spec
    inner = _base(number, wire) + (body(wire) if callable(body) else _message(body, wire))
    event = _len(field, inner)
    return _PREFIX(len(event)) + event


def encode(event: ev.BaseEvent) -> bytes:
    """
    Return *event* as one binary frame: its length (four bytes, big-endian), then the
    ``ag_ui.Event`` message, what ``parseProtoStream`` reads.

    Raises:
        ValueError: The event type has no protobuf form.

    .. versionadded:: 0.1.0
    """
    flat = _FLAT.get(type(event))
    if (
        flat is not None
        and event.metadata is None
        and event.timestamp is None
        and event.raw_event is None
    ):
        return flat(event)
    return encode_wire(to_wire(event))


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _flat_encoder(field: int, number: int, table: _Table) -> Callable[[Any], bytes]:
    """
    The encoder of an event type whose fields are all strings, read off the object.

    Those are the hot events (deltas, starts and ends): no wire dict, no table
    walk per kind; an event with metadata, a timestamp or a raw event takes the
    general path. What it writes is what `encode_wire` writes, byte for byte.
    """
    base = _len(1, b"\x08" + _varint(number) if number else b"")
    head = _varint(field << 3 | 2)
    fields = tuple(
        (_snake(key), _varint(number << 3 | 2), kind == "o") for key, number, kind in table
    )
    small, varint, prefix = _SMALL, _varint, _PREFIX

    def encode(event: Any) -> bytes:
        parts = [base]
        for attr, tag, optional in fields:
            value = getattr(event, attr)
            if value is None or not (value or optional):
                continue
            data = value.encode("utf-8", "surrogatepass")
            size = len(data)
            parts.append(tag + (small[size] if size < 0x80 else varint(size)) + data)
        inner = b"".join(parts)
        size = len(inner)
        body = head + (small[size] if size < 0x80 else varint(size)) + inner
        return prefix(len(body)) + body

    return encode


#: event class -> its `_flat_encoder`, for the types whose fields are all strings.
_FLAT: dict[type[ev.BaseEvent], Callable[[Any], bytes]] = {
    cls: _flat_encoder(*_EVENTS[kind])
    for kind, cls in ev.EVENT_CLASSES.items()
    if kind in _EVENTS
    and not callable(_EVENTS[kind][2])
    and all(k in ("s", "o") for _, _, k in _EVENTS[kind][2])
}


def accepts(accept: str | None) -> bool:
    """
    Whether an ``Accept`` header value names the binary transport (`CONTENT_TYPE`).

    Only an explicit mention counts: ``*/*`` or no header gets SSE, the default.

    .. versionadded:: 0.1.0
    """
    if not accept or "proto" not in accept:
        return False
    for item in accept.split(","):
        media, _, params = item.partition(";")
        if media.strip().lower() == CONTENT_TYPE:
            return not any(
                p.strip().replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000")
                for p in params.split(";")
            )
    return False


def _error_frame(error: BaseException, policy: ErrorPolicy) -> bytes:
    """The ``RUN_ERROR`` frame that ends a stream which failed (see `frames`)."""
    message, code = policy.report(error)
    try:
        return encode(ev.RunErrorEvent(message=message, code=code))
    except Exception:
        return encode(ev.RunErrorEvent(message=GENERIC_MESSAGE, code=code))


_TERMINAL = (ev.RunFinishedEvent, ev.RunErrorEvent)


def frames(events: AsyncIterable[ev.BaseEvent]) -> AsyncGenerator[bytes, None]:
    """
    Encode *events* (an `ambient_runs.stream`, say) as binary frames, a batch at a time.

    Each item is every frame ready at once, joined: an `ambient_runs.stream` hands
    over what it buffered, as `AgentApp` takes it for SSE. A stream that fails
    before its terminal event ends with a ``RUN_ERROR`` frame, as `sse.frames`
    does; closing the generator closes *events*.

    .. versionadded:: 0.1.0
    """
    return _encoding(events)


async def _encoding(events: AsyncIterable[ev.BaseEvent]) -> AsyncGenerator[bytes, None]:
    policy = getattr(getattr(events, "run", None), "error_policy", None)
    if not isinstance(policy, ErrorPolicy):
        policy = DEFAULT_POLICY
    as_frames = getattr(events, "_as_frames", None)
    if as_frames is not None:  # an ambient_runs.stream: its deltas come as binary frames
        as_frames(binary=True)
    source = aiter(events)
    take = getattr(source, "_take", None)
    ended = False
    try:
        while True:
            if take is not None:
                batch: Sequence[Any] = await take()
                if not batch:
                    return
            else:
                try:
                    batch = (await anext(source),)
                except StopAsyncIteration:
                    return
            done: list[bytes] = []
            failure: Exception | None = None
            for item in batch:
                if type(item) is bytes and item[0] != 0x64:  # a binary frame (a delta), not b"d"
                    done.append(item)
                    continue
                try:
                    if type(item) is bytes:  # an SSE frame of the byte path: b"data: {...}\n\n"
                        done.append(encode_wire(json.loads(item[6:-2])))
                    else:
                        done.append(encode(item))
                except Exception as error:
                    failure = error
                    break
                ended = isinstance(item, _TERMINAL)  # never a frame: terminals are objects
            if done:  # the frames before one that failed go out first
                yield b"".join(done)
            if failure is not None:
                raise failure
    except Exception as error:
        if ended:
            raise
        _log.error("the event stream failed; ending it with RUN_ERROR", exc_info=error)
        yield _error_frame(error, policy)
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
