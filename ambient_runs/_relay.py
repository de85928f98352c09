"""
`relay`: replay another agent's AG-UI stream as a subagent of the current scope.

The foreign stream (official ``ag_ui.core`` event objects, wire dicts, SSE lines
or bytes, or `ambient_runs` events; sync or async) is checked event by event
with a `Verifier` of its own, exactly as the official client would check it,
and each accepted event is rewritten into the current run:

===============================  ==================================================
foreign                          relayed as
===============================  ==================================================
``RUN_STARTED``                  nothing: the subagent was announced when
                                 ``relay()`` began (its input's messages are
                                 remembered as history)
``RUN_FINISHED``                 ``SUBAGENT_FINISHED`` with its ``result``, which
                                 ``relay()`` returns; its ``pendingToolCallIds``
                                 (frontend calls, ids namespaced) become this
                                 run's, for the client to answer
``RUN_FINISHED`` interrupt       ``SUBAGENT_FINISHED`` suspended, and `Interrupted`
                                 raised with the interrupts (ids namespaced, see
                                 below), so the run ends with an interrupt outcome
``RUN_FINISHED`` cancelled       ``SUBAGENT_ERROR`` code ``cancelled``, and
                                 `RelayError`
``RUN_ERROR``                    ``SUBAGENT_ERROR`` (message, code), and `RelayError`
no terminal event                ``SUBAGENT_ERROR`` code ``truncated``, `RelayError`
an invalid event                 ``SUBAGENT_ERROR`` code ``invalid_stream``,
                                 `RelayError`; nothing invalid is sent
untagged events                  tagged with the new subagent's id
``SUBAGENT_*`` (nested)          nested under the new subagent, parents remapped
``STATE_SNAPSHOT``/``_DELTA``    applied to the run's state (``state_key``: to one
                                 key of it) and published by the run's own
                                 differ, so the client's state stays consistent
``MESSAGES_SNAPSHOT``            never forwarded (it would replace the client's
                                 whole conversation): the assistant, tool,
                                 reasoning and activity messages it holds that the
                                 stream did not carry are replayed as events
``RAW``, ``CUSTOM``              passed through, attributed (their payloads are
                                 opaque and keep any ids they hold)
an unknown event type            dropped with a warning on the ``ambient_runs``
                                 logger, as the official client drops it
===============================  ==================================================

**Namespacing.** Every foreign id (messages, tool calls, reasoning, activities,
nested subagents, encrypted-value entities) becomes ``<subagent id>/<foreign
id>``: the subagent id is unique in the run, so two relays of agents that both
say ``call_1`` never collide, with each other or with the run's own ids.
Interrupt ids also encode the relay's name, ``relay:<name>:<subagent id>:<foreign
id>`` (name and subagent id percent-encoded), so that a later run, given the
client's ``resume``, can continue the same invocation and hand the relayed agent
its own interrupt ids back (`relay_resume`), with nothing kept in memory between
runs.

**Cancellation.** If the caller is cancelled (or anything else escapes), what the
foreign stream left open is closed, the subagent ends the usual way (code
``cancelled``), and the foreign iterator is closed (``aclose``/``close``): for a
network stream, that drops the connection and so cancels the remote agent.
"""

from __future__ import annotations

import codecs
import copy
import json
import logging
import threading
import weakref
from collections.abc import AsyncIterable, Awaitable, Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, Unpack, overload
from urllib.parse import quote, unquote

import attrs
import jsonpatch

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._foreign import coerce_event
from ambient_runs._outcomes import Interrupted, is_cancellation
from ambient_runs._state import set_state_in, update_state_in
from ambient_runs._subagent import Subagent
from ambient_runs._wire import to_wire, wire_form
from ambient_runs.errors import InvalidEventError, InvalidInputError, ProtocolError, RelayError

if TYPE_CHECKING:
    from ambient_runs._run import Run
    from ambient_runs._scopes import Frame

__all__ = ("RelayOptions", "relay", "relay_messages", "relay_resume")

_log = logging.getLogger("ambient_runs")

#: The official client refuses an SSE frame whose unterminated text exceeds this.
MAX_FRAME = 10 * 1024 * 1024

_KNOWN_TYPES = frozenset(t.value for t in ev.EventType)


# --------------------------------------------------------------------------- input forms


class _Broken(Exception):
    """The foreign stream cannot be relayed any further (why: *reason*)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _reject_constant(name: str) -> NoReturn:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


class _SSEParser:
    """
    An incremental parser of ``text/event-stream``: bytes in any chunking, or lines.

    Yields the ``data`` payload of each event (its ``data:`` lines joined with
    LF), ignores comments and the other fields, accepts LF, CRLF or CR-LF
    mixtures, and refuses a frame over `MAX_FRAME` characters, as the official
    client does, so a stream that never ends a line cannot grow without bound.
    """

    __slots__ = ("_data", "_decoder", "_partial", "_size")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._partial: list[str] = []  # the text of an unfinished line
        self._data: list[str] = []  # the data lines of the event being read
        self._size = 0  # characters held in both

    def feed_bytes(self, chunk: bytes) -> list[str]:
        """Take the next *chunk* of the byte stream; return the payloads it completes."""
        try:
            text = self._decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            msg = f"the stream is not UTF-8: {exc}"
            raise _Broken(msg) from None
        out: list[str] = []
        lines = text.split("\n")
        if len(lines) > 1:
            if self._partial:
                lines[0] = "".join(self._partial) + lines[0]
                self._partial = []
            self._size = sum(len(d) + 1 for d in self._data)
            for line in lines[:-1]:
                self._line(line, out)
        if lines[-1]:
            self._partial.append(lines[-1])
            self._size += len(lines[-1])
        self._check_size()
        return out

    def feed_lines(self, text: str) -> list[str]:
        """Take one or more whole lines (a final LF optional); return the payloads completed."""
        out: list[str] = []
        if self._partial:  # bytes left a line unfinished: a string item ends it
            line, self._partial = "".join(self._partial), []
            self._line(line, out)
        if text.endswith("\n"):
            text = text[:-1]
        for line in text.split("\n"):
            self._line(line, out)
        self._check_size()
        return out

    def close(self) -> list[str]:
        """End the stream: a last event without its blank line still counts (as in the client)."""
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            msg = f"the stream ends inside a UTF-8 sequence: {exc}"
            raise _Broken(msg) from None
        out: list[str] = []
        if tail:
            self._partial.append(tail)
        if self._partial:
            line, self._partial = "".join(self._partial), []
            self._line(line, out)
        self._line("", out)
        return out

    def _line(self, line: str, out: list[str]) -> None:
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
                self._size = 0
            return
        if line[0] == ":":
            return
        field, _, value = line.partition(":")
        if field == "data":
            if value.startswith(" "):
                value = value[1:]
            self._data.append(value)
            self._size += len(value) + 1
            self._check_size()

    def _check_size(self) -> None:
        if self._size > MAX_FRAME:
            msg = f"an SSE event over {MAX_FRAME // (1024 * 1024)} MiB"
            raise _Broken(msg)


# --------------------------------------------------------------------------- resume bookkeeping

_PREFIX = "relay:"
_claims: weakref.WeakKeyDictionary[Run, set[str]] = weakref.WeakKeyDictionary()
_claims_lock = threading.Lock()


def _interrupt_id(name: str, subagent_run_id: str, foreign_id: str) -> str:
    return f"{_PREFIX}{quote(name, safe='')}:{quote(subagent_run_id, safe='')}:{foreign_id}"


def _decode_interrupt_id(interrupt_id: str) -> tuple[str, str, str] | None:
    """(name, subagent id, foreign id) of a relayed interrupt's id; None for any other id."""
    if not interrupt_id.startswith(_PREFIX):
        return None
    parts = interrupt_id.split(":", 3)
    if len(parts) != 4:
        return None
    return unquote(parts[1]), unquote(parts[2]), parts[3]


def _pending(run: Run, name: str, id: str | None) -> tuple[str | None, tuple[ev.ResumeEntry, ...]]:
    """The first invocation called *name* that the run resumes and no relay has taken yet."""
    taken = _claims.get(run, set())
    found: dict[str, list[ev.ResumeEntry]] = {}
    for entry in run.resume:
        decoded = _decode_interrupt_id(entry.interrupt_id)
        if decoded is None or decoded[0] != name or decoded[1] in taken:
            continue
        if id is not None and decoded[1] != id:
            continue
        found.setdefault(decoded[1], []).append(attrs.evolve(entry, interrupt_id=decoded[2]))
    for sid, entries in found.items():
        return sid, tuple(entries)
    return None, ()


def _claim(run: Run, name: str, id: str | None) -> str | None:
    with _claims_lock:
        sid, _ = _pending(run, name, id)
        sid = id if id is not None else sid
        if sid is not None:
            _claims.setdefault(run, set()).add(sid)
        return sid


def relay_resume(name: str, *, id: str | None = None) -> tuple[ev.ResumeEntry, ...]:
    """
    Return the relayed agent's own answers in the ambient run's ``resume``, its ids restored.

    When a run resumes interrupts that a relay called *name* raised in an earlier
    run, the client's ``resume`` names them by their namespaced ids; this maps
    them back to the ids the relayed agent minted, ready for its next input. The
    next ``relay(..., name=name)`` continues that invocation (same subagent id).
    Several suspended relays with one name are taken in order; pass *id* (the
    subagent id) to pick one.

    Returns:
        The entries, empty when the run resumes nothing of that relay.

    Raises:
        NoActiveRunError: No run is ambient.

    .. versionadded:: 0.1.0
    """
    run = _scopes.require("relay_resume").run
    with _claims_lock:
        return _pending(run, name, id)[1]


def relay_messages(name: str, *, id: str | None = None) -> tuple[ev.Message, ...]:
    """
    Return the messages a suspended relay called *name* added to the conversation, as it made them.

    The companion of `relay_resume`: the relayed agent's own part of the history
    the client sent back (its text, tool calls and results), with every id and
    attribution restored to the relayed agent's (``<subagent id>/m1`` is ``m1``
    again; the subagent's own messages are untagged). An agent that resumes from
    client-held history (pydantic-ai's AG-UI adapter, another ambient_runs app
    answering a tool call) needs them in its next input.

    Returns:
        The messages, oldest first; empty when the run resumes nothing of that relay.

    .. versionadded:: 0.1.0
    """
    run = _scopes.require("relay_messages").run
    with _claims_lock:
        sid, _ = _pending(run, name, id)
    if sid is None:
        return ()
    return tuple(_restored(m, sid) for m in run.messages if m.id.startswith(sid + "/"))


def _restored(message: ev.Message, sid: str) -> ev.Message:
    prefix = sid + "/"

    def back(value: str) -> str:
        return value[len(prefix) :] if value.startswith(prefix) else value

    tag = message.subagent_run_id
    changes: dict[str, Any] = {
        "id": back(message.id),
        "subagent_run_id": None if tag is None or tag == sid else back(tag),
    }
    if isinstance(message, ev.AssistantMessage) and message.tool_calls:
        changes["tool_calls"] = tuple(
            attrs.evolve(call, id=back(call.id)) for call in message.tool_calls
        )
    elif isinstance(message, ev.ToolMessage):
        changes["tool_call_id"] = back(message.tool_call_id)
    return attrs.evolve(message, **changes)


# --------------------------------------------------------------------------- the relay


_ID_FIELDS: dict[type[ev.BaseEvent], tuple[str, ...]] = {
    cls: tuple(
        f
        for f in ("message_id", "tool_call_id", "parent_message_id", "entity_id")
        if f in attrs.fields_dict(cls)
    )
    for cls in ev.ATTRIBUTABLE
}

# Events that claim an entity: a start, a one-event entity, a chunk that may open one.
_CLAIMERS: tuple[type[ev.BaseEvent], ...] = (
    ev.TextMessageStartEvent,
    ev.TextMessageChunkEvent,
    ev.ToolCallStartEvent,
    ev.ToolCallChunkEvent,
    ev.ToolCallResultEvent,
    ev.ReasoningStartEvent,
    ev.ReasoningMessageStartEvent,
    ev.ReasoningMessageChunkEvent,
    ev.ActivitySnapshotEvent,
)
# Events that continue an entity: an untagged one inherits the owner on record.
_CONTINUES: dict[type[ev.BaseEvent], tuple[str, str]] = {
    ev.TextMessageStartEvent: ("message", "message_id"),
    ev.TextMessageContentEvent: ("message", "message_id"),
    ev.TextMessageEndEvent: ("message", "message_id"),
    ev.TextMessageChunkEvent: ("message", "message_id"),
    ev.ToolCallStartEvent: ("tool", "tool_call_id"),
    ev.ToolCallArgsEvent: ("tool", "tool_call_id"),
    ev.ToolCallEndEvent: ("tool", "tool_call_id"),
    ev.ToolCallChunkEvent: ("tool", "tool_call_id"),
    ev.ReasoningStartEvent: ("reasoning", "message_id"),
    ev.ReasoningMessageStartEvent: ("reasoning", "message_id"),
    ev.ReasoningMessageContentEvent: ("reasoning", "message_id"),
    ev.ReasoningMessageEndEvent: ("reasoning", "message_id"),
    ev.ReasoningMessageChunkEvent: ("reasoning", "message_id"),
    ev.ReasoningEndEvent: ("reasoning", "message_id"),
    ev.ActivitySnapshotEvent: ("activity", "message_id"),
    ev.ActivityDeltaEvent: ("activity", "message_id"),
}
# What each claims, (owner table, id field): as _CONTINUES says, and a tool result
# (which continues nothing) its message id.
_CLAIMS_ENTITY: dict[type[ev.BaseEvent], tuple[str, str]] = {
    cls: _CONTINUES.get(cls, ("message", "message_id")) for cls in _CLAIMERS
}
_CHUNK_LANE: dict[type[ev.BaseEvent], str] = {
    ev.TextMessageChunkEvent: "message",
    ev.ToolCallChunkEvent: "tool",
    ev.ReasoningMessageChunkEvent: "reasoning",
}
# Explicitly opened entities, which the relay closes if the stream stops with them open.
_OPENS: dict[type[ev.BaseEvent], tuple[str, str]] = {
    ev.TextMessageStartEvent: ("text", "message_id"),
    ev.ToolCallStartEvent: ("tool", "tool_call_id"),
    ev.ReasoningStartEvent: ("span", "message_id"),
    ev.ReasoningMessageStartEvent: ("rmsg", "message_id"),
}
_CLOSES: dict[type[ev.BaseEvent], tuple[str, str]] = {
    ev.TextMessageEndEvent: ("text", "message_id"),
    ev.ToolCallEndEvent: ("tool", "tool_call_id"),
    ev.ReasoningEndEvent: ("span", "message_id"),
    ev.ReasoningMessageEndEvent: ("rmsg", "message_id"),
}
_UNSET: Any = object()

# The wire form of the streaming deltas, read without the converter when plain.
_WIRE_DELTAS: dict[str, tuple[Any, str]] = {
    "TEXT_MESSAGE_CONTENT": (
        ev.unchecked(
            ev.TextMessageContentEvent, "timestamp", "subagent_run_id", "message_id", "delta"
        ),
        "messageId",
    ),
    "TOOL_CALL_ARGS": (
        ev.unchecked(
            ev.ToolCallArgsEvent, "timestamp", "subagent_run_id", "tool_call_id", "delta"
        ),
        "toolCallId",
    ),
    "REASONING_MESSAGE_CONTENT": (
        ev.unchecked(
            ev.ReasoningMessageContentEvent, "timestamp", "subagent_run_id", "message_id", "delta"
        ),
        "messageId",
    ),
}


def _quick_delta(data: dict[str, Any], make: Any, id_key: str) -> ev.BaseEvent | None:
    """*data* as a delta event if it holds only plain, well-typed fields; None: the slow path."""
    eid, delta = data.get(id_key), data.get("delta")
    if type(eid) is not str or type(delta) is not str:
        return None
    size = 3
    tag = data.get("subagentRunId")
    if tag is not None:
        if type(tag) is not str:
            return None
        size += 1
    stamp = data.get("timestamp")
    if stamp is not None:
        if type(stamp) is not int or not -ev.MAX_SAFE_INTEGER <= stamp <= ev.MAX_SAFE_INTEGER:
            return None
        size += 1
    if len(data) != size:  # a null, metadata, rawEvent or an unknown key: the converter decides
        return None
    event: ev.BaseEvent = make(stamp, tag, eid, delta)
    return event


def _delta(cls: type[ev.BaseEvent], field: str) -> Any:
    # Every field given: the foreign event was validated when built, and the
    # namespaced id and owner are strings.
    return ev.unchecked(
        cls, "timestamp", "raw_event", "metadata", "subagent_run_id", field, "delta"
    )


# Continuations that only carry an id and a delta: (constructor, id field, owner table).
_DELTAS: dict[type[ev.BaseEvent], tuple[Any, str, str]] = {
    ev.TextMessageContentEvent: (
        _delta(ev.TextMessageContentEvent, "message_id"),
        "message_id",
        "message",
    ),
    ev.ToolCallArgsEvent: (_delta(ev.ToolCallArgsEvent, "tool_call_id"), "tool_call_id", "tool"),
    ev.ReasoningMessageContentEvent: (
        _delta(ev.ReasoningMessageContentEvent, "message_id"),
        "message_id",
        "reasoning",
    ),
}


class _Relay:
    """The state of one relay: the foreign stream's verifier, id maps and what is open."""

    def __init__(
        self,
        frame: Frame,
        name: str,
        description: str | None,
        id: str | None,
        state_key: str | None,
    ) -> None:
        from ambient_runs.verify import Verifier

        self.run = frame.run
        self.name = name
        self.state_key = state_key
        self.sub = Subagent(
            name, description=description, id=_claim(frame.run, name, id), parent=frame
        )
        self.sid = ""
        self.frame: Frame = frame
        self.verifier = Verifier(strict=False)
        self.parser: _SSEParser | None = None
        self.terminal: ev.BaseEvent | None = None
        self.owners: dict[tuple[str, str], str] = {}  # (table, relayed id) -> relayed owner
        self.lanes: dict[str, str] = {}  # chunk kind -> the owner that streamed it last
        self.open: dict[tuple[str, ...], str] = {}  # what to close, in opening order
        self.seen: set[str] = set()  # relayed message ids the client already has
        self.calls: set[str] = set()  # relayed tool call ids
        self.foreign_state: Any = _UNSET
        self._handlers: dict[type[ev.BaseEvent], Any] = {
            ev.SubagentStartedEvent: self._on_subagent_started,
            ev.SubagentFinishedEvent: self._on_subagent_finished,
            ev.SubagentErrorEvent: self._on_subagent_error,
            ev.StateSnapshotEvent: self._on_state,
            ev.StateDeltaEvent: self._on_state,
            ev.MessagesSnapshotEvent: self._on_messages_snapshot,
        }

    @classmethod
    def ambient(
        cls, name: str, description: str | None, id: str | None, state_key: str | None
    ) -> _Relay:
        """A relay into the ambient scope (`NoActiveRunError` outside any run)."""
        frame = _scopes.require("relay")
        _check_state(frame, state_key)
        return cls(frame, name, description, id, state_key)

    def started(self) -> None:
        """The subagent has been announced: learn its id and frame."""
        self.sid = self.sub.id or ""
        self.frame = self.sub._emit_frame()

    # ------------------------------------------------------------------ ids

    def ns(self, foreign: str) -> str:
        return f"{self.sid}/{foreign}"

    def ns_opt(self, foreign: str | None) -> str | None:
        return None if foreign is None else f"{self.sid}/{foreign}"

    def owner(self, foreign: str | None) -> str:
        return self.sid if foreign is None else f"{self.sid}/{foreign}"

    def interrupt(self, foreign: ev.Interrupt) -> ev.Interrupt:
        return attrs.evolve(
            foreign,
            id=_interrupt_id(self.name, self.sid, foreign.id),
            subagent_run_id=self.owner(foreign.subagent_run_id),
            tool_call_id=self.ns_opt(foreign.tool_call_id),
        )

    # ------------------------------------------------------------------ intake

    def take(self, item: object) -> bool:
        """Relay one item of the foreign stream; True once its terminal event has come."""
        if isinstance(item, ev.BaseEvent):
            return self.handle(item)
        if isinstance(item, str):
            if item[:1] == "{":  # one event's JSON text (no SSE line starts with a brace)
                return self._payloads([item])
            return self._payloads(self._sse().feed_lines(item))
        if isinstance(item, bytes | bytearray | memoryview):
            return self._payloads(self._sse().feed_bytes(bytes(item)))
        if isinstance(item, Mapping):
            data: Any = item
        elif callable(getattr(item, "model_dump", None)):
            data = item.model_dump(mode="json", by_alias=True)  # type: ignore[attr-defined]
        else:
            msg = f"an item that is not an AG-UI event: {type(item).__name__}"
            raise _Broken(msg)
        event = self._event(data)
        return event is not None and self.handle(event)

    def take_end(self) -> bool:
        """The foreign iterable is exhausted: flush what the SSE parser still holds."""
        return self.parser is not None and self._payloads(self.parser.close())

    def _sse(self) -> _SSEParser:
        if self.parser is None:
            self.parser = _SSEParser()
        return self.parser

    def _payloads(self, payloads: list[str]) -> bool:
        for payload in payloads:
            try:
                data = json.loads(payload, parse_constant=_reject_constant)
            except ValueError as exc:
                msg = f"an SSE event that is not JSON: {exc}"
                raise _Broken(msg) from None
            event = self._event(data)
            if event is not None and self.handle(event):
                return True
        return False

    def _event(self, data: Any) -> ev.BaseEvent | None:
        if type(data) is dict:
            fast = _WIRE_DELTAS.get(data.get("type"))  # type: ignore[arg-type]
            if fast is not None:
                event = _quick_delta(data, *fast)
                if event is not None:
                    return event
        if isinstance(data, Mapping):
            kind = data.get("type")
            if isinstance(kind, str) and kind and kind not in _KNOWN_TYPES:
                _log.warning("relay %r: dropped an event of unknown type %r", self.name, kind)
                return None
        try:
            return coerce_event(data)
        except (InvalidInputError, TypeError) as exc:
            raise _Broken(str(exc)) from None

    def handle(self, event: ev.BaseEvent) -> bool:
        """Check *event* as part of the foreign stream, then relay it; True if terminal."""
        found = self.verifier.feed(event)  # type: ignore[arg-type]
        if found:
            msg = f"{found[0].message} [{found[0].rule}]"
            raise _Broken(msg)
        cls = type(event)
        if cls is ev.RunStartedEvent:
            run_input = event.input  # type: ignore[attr-defined]
            if run_input is not None:
                self.seen.update(self.ns(m.id) for m in run_input.messages)
            return False
        if cls is ev.RunFinishedEvent or cls is ev.RunErrorEvent:
            self.terminal = event
            return True
        self.map(event)
        return False

    def map(self, event: ev.BaseEvent) -> None:
        """Relay one accepted foreign event (or one replayed from a messages snapshot)."""
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)
        else:
            self._attributable(event)

    # ------------------------------------------------------------------ mapping

    def _send(self, event: ev.BaseEvent) -> None:
        try:
            self.run.pipeline.send(event)
        except (ProtocolError, InvalidEventError) as exc:
            msg = f"relaying its {event.TYPE.value} would break this run's stream: {exc}"
            raise _Broken(msg) from None

    def _attributable(self, event: ev.BaseEvent) -> None:
        cls = type(event)
        fast = _DELTAS.get(cls)
        if fast is not None:  # the streaming deltas, most of any stream: no evolve()
            make, field, table = fast
            eid = f"{self.sid}/{getattr(event, field)}"
            tag: str | None = event.subagent_run_id  # type: ignore[attr-defined]
            if tag is not None:
                owner = f"{self.sid}/{tag}"
            else:
                owner = self.owners.get((table, eid), self.sid)
            self._send(
                make(event.timestamp, event.raw_event, event.metadata, owner, eid, event.delta)  # type: ignore[attr-defined]
            )
            return
        changes: dict[str, Any] = {}
        for field in _ID_FIELDS[cls]:
            value = getattr(event, field)
            if value is not None:
                changes[field] = f"{self.sid}/{value}"
        owner = self._owner_of(event, changes)
        changes["subagent_run_id"] = owner
        mapped = attrs.evolve(event, **changes)
        self._send(mapped)
        self._track(mapped, owner)

    def _owner_of(self, event: ev.BaseEvent, ids: dict[str, Any]) -> str:
        tag: str | None = event.subagent_run_id  # type: ignore[attr-defined]
        if tag is not None:
            return f"{self.sid}/{tag}"
        # Untagged: as the client reads it, a continuation of whoever owns the entity.
        cls = type(event)
        if cls is ev.ToolCallStartEvent or cls is ev.ToolCallChunkEvent:
            parent = ids.get("parent_message_id")
            if parent is not None and ("message", parent) in self.owners:
                return self.owners["message", parent]
        entity = _CONTINUES.get(cls)
        if entity is not None:
            table, field = entity
            eid = ids.get(field)
            if eid is not None:
                known = self.owners.get((table, eid))
                if known is not None:
                    return known
            elif cls in _CHUNK_LANE:
                return self.lanes.get(_CHUNK_LANE[cls], self.sid)
        elif cls is ev.ReasoningEncryptedValueEvent:
            eid = ids["entity_id"]
            for table in ("tool",) if event.subtype == "tool-call" else ("message", "reasoning"):  # type: ignore[attr-defined]
                known = self.owners.get((table, eid))
                if known is not None:
                    return known
        return self.sid

    def _track(self, event: ev.BaseEvent, owner: str) -> None:
        cls = type(event)
        claim = _CLAIMS_ENTITY.get(cls)
        if claim is not None:
            table, field = claim
            eid = getattr(event, field)
            if eid is not None:
                self.owners[table, eid] = owner
                if table == "tool":
                    self.calls.add(eid)
                self.seen.add(eid)  # a tool call without a parent makes a message of that id
            parent = getattr(event, "parent_message_id", None)
            if parent is not None:
                self.seen.add(parent)
        lane = _CHUNK_LANE.get(cls)
        if lane is not None:
            self.lanes[lane] = owner
        opens = _OPENS.get(cls)
        if opens is not None:
            self.open[opens[0], getattr(event, opens[1])] = owner
            return
        closes = _CLOSES.get(cls)
        if closes is not None:
            self.open.pop((closes[0], getattr(event, closes[1])), None)
        elif cls is ev.StepStartedEvent:
            self.open["step", owner, event.step_name] = owner  # type: ignore[attr-defined]
        elif cls is ev.StepFinishedEvent:
            self.open.pop(("step", owner, event.step_name), None)  # type: ignore[attr-defined]

    def _on_subagent_started(self, event: ev.SubagentStartedEvent) -> None:
        sid = self.ns(event.subagent_run_id)
        self._send(
            attrs.evolve(
                event,
                subagent_run_id=sid,
                parent_subagent_run_id=self.owner(event.parent_subagent_run_id),
                parent_tool_call_id=self.ns_opt(event.parent_tool_call_id),
                parent_message_id=self.ns_opt(event.parent_message_id),
            )
        )
        self.open["sub", sid] = sid

    def _on_subagent_finished(self, event: ev.SubagentFinishedEvent) -> None:
        sid = self.ns(event.subagent_run_id)
        outcome = event.outcome
        if isinstance(outcome, ev.SubagentFinishedSuspendedOutcome) and outcome.interrupt_ids:
            outcome = ev.SubagentFinishedSuspendedOutcome(
                interrupt_ids=[
                    _interrupt_id(self.name, self.sid, i) for i in outcome.interrupt_ids
                ]
            )
        self._send(attrs.evolve(event, subagent_run_id=sid, outcome=outcome))
        self.open.pop(("sub", sid), None)

    def _on_subagent_error(self, event: ev.SubagentErrorEvent) -> None:
        sid = self.ns(event.subagent_run_id)
        self._send(attrs.evolve(event, subagent_run_id=sid))
        self.open.pop(("sub", sid), None)

    def _on_state(self, event: ev.StateSnapshotEvent | ev.StateDeltaEvent) -> None:
        if isinstance(event, ev.StateSnapshotEvent):
            new = copy.deepcopy(event.snapshot)
        else:
            base = self.foreign_state if self.foreign_state is not _UNSET else self._baseline()
            try:
                new = jsonpatch.apply_patch(base, [to_wire(op) for op in event.delta])
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                # What the client does with a patch that does not apply: skip it, go on.
                _log.warning(
                    "relay %r: a STATE_DELTA that does not apply was skipped: %s", self.name, exc
                )
                return
        self.foreign_state = new
        key = self.state_key
        try:
            if key is None:
                set_state_in(self.frame, copy.deepcopy(new))
            else:
                update_state_in(self.frame, lambda state: _put(state, key, copy.deepcopy(new)))
        except (ProtocolError, InvalidEventError) as exc:
            msg = f"publishing its state would break this run's stream: {exc}"
            raise _Broken(msg) from None

    def _baseline(self) -> Any:
        """What a foreign delta before any foreign snapshot patches: the state it was given."""
        state = wire_form(self.run.state())
        if self.state_key is not None:
            state = state.get(self.state_key) if isinstance(state, Mapping) else None
        return {} if state is None else copy.deepcopy(state)

    def _on_messages_snapshot(self, event: ev.MessagesSnapshotEvent) -> None:
        for message in event.messages:
            for replayed in self._replay(message):
                self.map(replayed)

    def _replay(self, message: ev.Message) -> Iterator[ev.BaseEvent]:
        """The events that stream *message*, unless the client has it already."""
        seen = self.ns(message.id) in self.seen
        tag = message.subagent_run_id
        mid = message.id
        if isinstance(message, ev.AssistantMessage):
            if not seen and message.content:
                yield ev.TextMessageStartEvent(message_id=mid, subagent_run_id=tag)
                yield ev.TextMessageContentEvent(
                    message_id=mid, delta=message.content, subagent_run_id=tag
                )
                yield ev.TextMessageEndEvent(message_id=mid, subagent_run_id=tag)
            for call in message.tool_calls or ():
                if self.ns(call.id) in self.calls:
                    continue
                yield ev.ToolCallStartEvent(
                    tool_call_id=call.id,
                    tool_call_name=call.function.name,
                    parent_message_id=mid,
                    subagent_run_id=tag,
                )
                if call.function.arguments:
                    yield ev.ToolCallArgsEvent(
                        tool_call_id=call.id, delta=call.function.arguments, subagent_run_id=tag
                    )
                yield ev.ToolCallEndEvent(tool_call_id=call.id, subagent_run_id=tag)
        elif seen:
            return
        elif isinstance(message, ev.ToolMessage):
            if self.ns(message.tool_call_id) in self.calls:  # only answers to calls relayed here
                yield ev.ToolCallResultEvent(
                    message_id=mid,
                    tool_call_id=message.tool_call_id,
                    content=message.content,
                    subagent_run_id=tag,
                )
        elif isinstance(message, ev.ReasoningMessage):
            yield ev.ReasoningStartEvent(message_id=mid, subagent_run_id=tag)
            if message.content:
                yield ev.ReasoningMessageStartEvent(message_id=mid, subagent_run_id=tag)
                yield ev.ReasoningMessageContentEvent(
                    message_id=mid, delta=message.content, subagent_run_id=tag
                )
                yield ev.ReasoningMessageEndEvent(message_id=mid, subagent_run_id=tag)
            yield ev.ReasoningEndEvent(message_id=mid, subagent_run_id=tag)
        elif isinstance(message, ev.ActivityMessage):
            yield ev.ActivitySnapshotEvent(
                message_id=mid,
                activity_type=message.activity_type,
                content=message.content,
                subagent_run_id=tag,
            )
        # user, system and developer messages are the relayed agent's input, not its output

    # ------------------------------------------------------------------ endings

    def close_open(self, reason: str, code: str | None) -> None:
        """Close what the foreign stream left open, newest first (nested subagents fail)."""
        pipeline = self.run.pipeline
        with pipeline.lock:
            for key in reversed(list(self.open)):
                kind, owner = key[0], self.open[key]
                closing: ev.BaseEvent
                if kind == "text":
                    closing = ev.TextMessageEndEvent(message_id=key[1], subagent_run_id=owner)
                elif kind == "tool":
                    closing = ev.ToolCallEndEvent(tool_call_id=key[1], subagent_run_id=owner)
                elif kind == "span":
                    closing = ev.ReasoningEndEvent(message_id=key[1], subagent_run_id=owner)
                elif kind == "rmsg":
                    closing = ev.ReasoningMessageEndEvent(message_id=key[1], subagent_run_id=owner)
                elif kind == "step":
                    closing = ev.StepFinishedEvent(step_name=key[2], subagent_run_id=owner)
                else:
                    closing = ev.SubagentErrorEvent(
                        subagent_run_id=owner, message=reason, code=code
                    )
                pipeline.send(closing)
            self.open.clear()

    def abandon(self, exc: BaseException) -> None:
        """Something escaped the relay (cancellation, the caller's error): close quietly."""
        reason: str
        code: str | None
        if is_cancellation(exc):
            reason, code = "cancelled", "cancelled"
        else:  # what the run's error policy lets a client read of it
            reason, code = self.run.pipeline.error_policy.report(exc)
        try:
            self.close_open(reason, code)
        except Exception:
            _log.debug("closing a relayed stream after an exception failed", exc_info=True)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """
        Read the foreign stream in the block, ending the relay as its failure asks.

        A stream that breaks the protocol fails the subagent (`RelayError`);
        anything else escaping the block (cancellation, the caller's error)
        closes what the stream left open, quietly, and propagates.
        """
        try:
            yield
        except _Broken as exc:
            self.fail(exc.reason, "invalid_stream")
        except BaseException as exc:
            self.abandon(exc)
            raise

    def fail(self, reason: str, code: str | None) -> NoReturn:
        """End the subagent with SUBAGENT_ERROR and raise `RelayError`."""
        self.close_open(reason, code)
        self.sub.fail(reason, code=code)
        raise RelayError(reason, name=self.name, subagent_run_id=self.sid, code=code)

    def conclude(self) -> Any:
        """End the subagent the way the foreign run ended; return its result."""
        terminal = self.terminal
        if terminal is None:
            self.fail("the stream ended without RUN_FINISHED or RUN_ERROR", "truncated")
        if isinstance(terminal, ev.RunErrorEvent):
            self.fail(terminal.message, terminal.code)
        assert isinstance(terminal, ev.RunFinishedEvent)
        outcome = terminal.outcome
        if isinstance(outcome, ev.RunFinishedInterruptOutcome):
            raise Interrupted(*(self.interrupt(i) for i in outcome.interrupts))
        if isinstance(outcome, ev.RunFinishedCancelledOutcome):
            self.fail("the relayed run was cancelled", "cancelled")
        if isinstance(outcome, ev.RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            # Its frontend calls are this run's too: the client answers them (namespaced ids).
            pipeline = self.run.pipeline
            with pipeline.lock:
                calls = (self.ns(i) for i in outcome.pending_tool_call_ids)
                pipeline.frontend_calls = (*pipeline.frontend_calls, *calls)
        self.sub.finish_with(terminal.result)
        return terminal.result


def _put(state: Any, key: str, value: Any) -> Any:
    if state is None:
        state = {}
    state[key] = value
    return state


def _check_state(frame: Frame, state_key: str | None) -> None:
    state = frame.run.state()
    if state_key is not None and not (state is None or isinstance(state, MutableMapping)):
        msg = (
            f"relay(state_key={state_key!r}) needs the run's state to be a dict (or unset), "
            f"not {type(state).__name__}; leave state_key out to let the relayed agent's state "
            "replace it"
        )
        raise TypeError(msg)


def _close(iterator: object) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            _log.debug("closing a relayed iterator failed", exc_info=True)


async def _aclose(iterator: object) -> None:
    close = getattr(iterator, "aclose", None)
    if callable(close):
        try:
            await close()
        except Exception:
            _log.debug("closing a relayed iterator failed", exc_info=True)


def _relay_sync(
    events: Iterable[Any], name: str, description: str | None, id: str | None, key: str | None
) -> Any:
    relay = _Relay.ambient(name, description, id, key)
    with relay.sub:
        relay.started()
        with relay.reading():
            iterator = iter(events)
            try:
                for item in iterator:
                    if relay.take(item):
                        break
                else:
                    relay.take_end()
            finally:
                _close(iterator)
        return relay.conclude()


async def _relay_async(
    events: AsyncIterable[Any],
    name: str,
    description: str | None,
    id: str | None,
    key: str | None,
) -> Any:
    # The twin of `_relay_sync`: ``async for`` and an awaited close are all that differ.
    relay = _Relay.ambient(name, description, id, key)
    with relay.sub:
        relay.started()
        with relay.reading():
            iterator = aiter(events)
            try:
                async for item in iterator:
                    if relay.take(item):
                        break
                else:
                    relay.take_end()
            finally:
                await _aclose(iterator)
        return relay.conclude()


class RelayOptions(TypedDict, total=False):
    """
    The keywords `relay` takes besides *name* (its docstring says what each does).

    .. versionadded:: 0.1.0
    """

    description: str | None
    id: str | None
    state_key: str | None


# One overload per face: an async iterable returns an awaitable, a sync one relays now.
@overload
def relay(
    events: AsyncIterable[Any], *, name: str, **options: Unpack[RelayOptions]
) -> Awaitable[Any]: ...
@overload
def relay(events: Iterable[Any], *, name: str, **options: Unpack[RelayOptions]) -> Any: ...
def relay(
    events: AsyncIterable[Any] | Iterable[Any],
    *,
    name: str,
    description: str | None = None,
    id: str | None = None,
    state_key: str | None = None,
) -> Any:
    """
    Replay another agent's AG-UI stream as a subagent of the ambient scope.

    *events* is the foreign run's stream, from ``RUN_STARTED`` to its terminal
    event, in any of these forms (mixed, even): official ``ag_ui.core`` event
    objects, wire dicts, `ambient_runs` events, JSON text (a string starting
    with ``{``: one event), SSE text (other strings are whole lines, as
    ``aiter_lines`` yields them, or whole frames) or SSE bytes (any chunking, as
    ``aiter_bytes`` yields them). How each foreign event maps is in
    the module docstring (`ambient_runs._relay`); in short, the foreign run
    becomes one subagent called *name*, every foreign id is namespaced under it,
    and reading stops at the foreign terminal event.

    Args:
        events: A sync iterable (the relay runs now and returns the result) or an
            async iterable (the call returns an awaitable: ``await relay(...)``).
        name: The subagent's name.
        description: The subagent's description, for display.
        id: Continue this suspended invocation (its subagent id). By default, a
            run that resumes interrupts of a relay called *name* continues that
            invocation by itself; otherwise the id is fresh.
        state_key: Mount the relayed agent's state at this key of the run's state
            (a dict) instead of letting it replace the run's state.

    Returns:
        The foreign ``RUN_FINISHED.result`` (None without one), or an awaitable of it.

    Raises:
        RelayError: The foreign run failed (``RUN_ERROR``), was cancelled, or its
            stream ended early or broke the protocol; the subagent has ended with
            ``SUBAGENT_ERROR`` and the run goes on.
        Interrupted: The foreign run paused on interrupts (the subagent is
            suspended); let it propagate to end the run with an interrupt outcome.
        NoActiveRunError: No run is ambient.
        TypeError: *events* is not iterable, or *state_key* is given while the
            run's state is not a dict.

    .. versionadded:: 0.1.0
    """
    if not isinstance(name, str):
        msg = f"relay() name must be a string, got {name!r}"
        raise InvalidEventError(msg)
    if hasattr(events, "__aiter__"):
        return _relay_async(events, name, description, id, state_key)  # type: ignore[arg-type]
    if isinstance(events, str | bytes) or not hasattr(events, "__iter__"):
        msg = (
            "relay() takes an iterable or async iterable of events, SSE lines or SSE byte "
            f"chunks, not {type(events).__name__}"
        )
        raise TypeError(msg)
    return _relay_sync(events, name, description, id, state_key)
