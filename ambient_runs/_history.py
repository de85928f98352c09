"""
`History`: the conversation of one run, folded from the events the run delivers.

It starts from the messages before the run (the client's ``input.messages``, or
those a thread store merged in) and applies every event the run delivers,
after its transformers and its verifier, the way the official client's reducer
(``@ag-ui/client`` 1.0.0, ``defaultApplyEvents``) builds its ``messages``:

- ``TEXT_MESSAGE_*`` (and ``TEXT_MESSAGE_CHUNK``) make or extend a message of
  the event's role, ``REASONING_MESSAGE_*`` a reasoning message;
- ``TOOL_CALL_START`` puts a call on the assistant message named by
  ``parentMessageId`` (made if missing), or on a new assistant message whose id
  is the call's; ``TOOL_CALL_ARGS`` extend its arguments;
- ``TOOL_CALL_RESULT`` inserts a tool message right after the assistant message
  that holds the call (after earlier results);
- ``ACTIVITY_SNAPSHOT`` / ``ACTIVITY_DELTA`` make and patch activity messages;
- ``REASONING_ENCRYPTED_VALUE`` sets a call's or a message's ``encryptedValue``;
- ``MESSAGES_SNAPSHOT`` replaces messages by id and drops those it omits
  (activity and reasoning messages survive a snapshot without that role);
- event metadata merges into the message (or call), key by key.

Each message the run makes carries the ``subagentRunId`` of the event that
made it: its attribution, as the client holds it.

Cost. The deltas of an open message are appended to a list that is joined
into one chunk every `COMPACT_EVERY` deltas, so a streamed message keeps at
most that many delta objects, and otherwise its text; on ``*_END`` the last
deltas are joined, and the chunks become one string when the history is first
read (so a run that never reads it never holds the text twice).
(``io.StringIO`` is no better: on CPython 3.11 its accumulator keeps up to
100,000 written strings before it joins them.)
The message-write hot path (`MessageHandle.write`, through
``Pipeline.send``) appends to the open message's `Text` inline
(`text_of`); every other event goes through `record` (one dict lookup by
event class). The tuple `messages` returns is cached while no message is
open.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ambient_runs import events as ev
from ambient_runs._diff import patched
from ambient_runs._wire import to_wire

__all__ = (
    "COMPACT_EVERY",
    "History",
    "Text",
    "authoritative_activity_types",
    "catch_up",
    "keeps_activity",
)

#: A streamed text's pending deltas are joined into one chunk when they reach this many.
COMPACT_EVERY = 256

_ROLES: dict[str | None, type[ev.Message]] = {
    None: ev.AssistantMessage,
    "assistant": ev.AssistantMessage,
    "user": ev.UserMessage,
    "system": ev.SystemMessage,
    "developer": ev.DeveloperMessage,
}


class Text:
    """
    The text of an open message or call: what it had (*prefix*), and what is written since.

    Written deltas wait in `parts` until `COMPACT_EVERY` of them are joined
    into one of `chunks` (`compact`); ``Pipeline.send`` does that
    append and check inline, `write` is the same for everyone else.
    """

    __slots__ = ("chunks", "parts", "prefix")

    def __init__(self, prefix: str | None) -> None:
        self.prefix = prefix
        self.parts: list[str] = []
        self.chunks: list[str] = []

    def write(self, delta: str) -> None:
        parts = self.parts
        parts.append(delta)
        if len(parts) >= COMPACT_EVERY:
            self.compact()

    def compact(self) -> None:
        """Join the pending deltas into one chunk."""
        self.chunks.append("".join(self.parts))
        self.parts.clear()

    def clear(self, prefix: str | None) -> None:
        """Start again from *prefix* (a snapshot replaced the message, still streaming)."""
        self.prefix = prefix
        self.parts.clear()
        self.chunks.clear()

    def value(self) -> str | None:
        """The text so far; the chunks become one, so reading again costs no new join."""
        if self.parts:
            self.compact()
        chunks = self.chunks
        if len(chunks) > 1:
            chunks[:] = ["".join(chunks)]
        written = chunks[0] if chunks else ""
        if self.prefix is None:
            return written or None
        return self.prefix + written


class _Call:
    """A tool call being built: its fields, and its arguments' text while they stream."""

    __slots__ = ("arguments", "id", "name", "rest", "text")

    def __init__(self, call_id: str, name: str, arguments: str = "", **rest: Any) -> None:
        self.id = call_id
        self.name = name
        self.arguments = arguments
        self.rest = rest  # encrypted_value, metadata
        self.text: Text | None = None

    @classmethod
    def of(cls, call: ev.ToolCall) -> _Call:
        return cls(
            call.id,
            call.function.name,
            call.function.arguments,
            encrypted_value=call.encrypted_value,
            metadata=call.metadata,
        )

    def build(self) -> ev.ToolCall:
        arguments = self.arguments
        if self.text is not None:
            arguments = self.text.value() or ""
        return ev.ToolCall(
            id=self.id, function=ev.FunctionCall(name=self.name, arguments=arguments), **self.rest
        )


class _Draft:
    """A message the run has touched: its class and fields, its open text, its calls."""

    __slots__ = ("calls", "cls", "fields", "text")

    def __init__(self, cls: type[ev.Message], **fields: Any) -> None:
        self.cls = cls
        self.fields = fields
        self.text: Text | None = None
        calls = fields.pop("tool_calls", None)
        self.calls: list[_Call] | None = None if calls is None else [_Call.of(c) for c in calls]

    @classmethod
    def of(cls, message: ev.Message) -> _Draft:
        fields = {a.name: getattr(message, a.name) for a in attrs.fields(type(message)) if a.init}
        return cls(type(message), **fields)

    @property
    def id(self) -> str:
        return str(self.fields["id"])

    @property
    def role(self) -> str:
        return _ROLE_OF[self.cls]

    def build(self) -> ev.Message:
        fields = self.fields
        if self.text is not None:
            fields = {**fields, "content": self.text.value()}
            if fields["content"] is None and self.cls is not ev.AssistantMessage:
                fields["content"] = ""
        if self.calls is not None:
            fields = {**fields, "tool_calls": tuple(c.build() for c in self.calls)}
        return self.cls(**fields)


_Entry = ev.Message | _Draft

_ROLE_OF: dict[type[Any], str] = {cls: role for role, cls in ev.MESSAGE_CLASSES.items()}


def _role(entry: _Entry) -> str:
    return entry.role


_ABSENT: Any = object()


def authoritative_activity_types(metadata: Any) -> Any:
    """
    A snapshot's ``@ag-ui/client`` ``authoritativeActivityTypes``, read as the client reads it.

    `_ABSENT` without one (activity messages survive a snapshot holding none);
    None: every activity type is authoritative (those omitted are dropped); a
    list: those types are (a malformed value reads as the empty list). What
    `keeps_activity` takes; *metadata* is the snapshot's, wire form or not.
    """
    if not isinstance(metadata, dict) or "@ag-ui/client" not in metadata:
        return _ABSENT
    ours = metadata["@ag-ui/client"]
    if not isinstance(ours, dict):
        return []
    if "authoritativeActivityTypes" not in ours:
        return _ABSENT
    kinds = ours["authoritativeActivityTypes"]
    if kinds is None:
        return None
    if isinstance(kinds, list) and all(isinstance(k, str) for k in kinds):
        return kinds
    return []


def keeps_activity(authoritative: Any, activity_type: Any, *, snapshot_has_activity: bool) -> bool:
    """
    Whether a ``MESSAGES_SNAPSHOT`` that omits an activity message keeps it, as the client does.

    *authoritative* is `authoritative_activity_types` of the snapshot's metadata.
    Without the extension, an omitted activity message survives a snapshot that
    holds no activity message; with it, it survives unless its type is one the
    snapshot is authoritative for (None: all of them). The one rule both folds
    of a conversation use: `History` and ``stores.RunView``.
    """
    if authoritative is _ABSENT:
        return not snapshot_has_activity
    if authoritative is None:
        return False
    return activity_type not in authoritative


def _merge_metadata(fields: dict[str, Any], event: ev.BaseEvent) -> None:
    if event.metadata is not None:
        fields["metadata"] = {**(fields.get("metadata") or {}), **copy.deepcopy(event.metadata)}


class History:
    """
    A run's conversation: the messages before it and every message made in it, in order.

    Fed by the run's pipeline under its lock: `record` for each delivered
    event, and the open message's `writer` on the text hot path.

    Args:
        before: The conversation before the run.
    """

    __slots__ = ("_by_id", "_cache", "_calls", "_entries", "_lanes", "_open")

    def __init__(self, before: Sequence[ev.Message]) -> None:
        self._entries: list[_Entry] = list(before)
        self._by_id: dict[str, _Entry] = {}
        for message in self._entries:
            self._by_id.setdefault(message.id, message)
        self._calls: dict[str, tuple[_Draft, _Call]] = {}
        #: Open texts by (kind, id): "text" and "reasoning" messages, "args" of calls.
        self._open: dict[tuple[str, str], Text] = {}
        #: The id each chunk lane (kind, owner) streams, for chunks that omit it.
        self._lanes: dict[tuple[str, str | None], str] = {}
        self._cache: tuple[ev.Message, ...] | None = tuple(before)

    # ------------------------------------------------------------------ reading

    def messages(self) -> tuple[ev.Message, ...]:
        """The conversation as it stands, open messages with their text so far."""
        cache = self._cache
        if cache is not None:
            return cache
        built = tuple(e.build() if isinstance(e, _Draft) else e for e in self._entries)
        if not self._open:
            self._cache = built
        return built

    def text_of(self, message_id: str) -> Text | None:
        """The `Text` of open text message *message_id* (for the hot path), or None."""
        return self._open.get(("text", message_id))

    # ------------------------------------------------------------------ entries

    def _draft(self, message_id: str) -> _Draft | None:
        """The entry *message_id* as a draft (a message from before the run becomes one)."""
        entry = self._by_id.get(message_id)
        if entry is None or isinstance(entry, _Draft):
            return entry
        draft = _Draft.of(entry)
        self._replace(entry, draft)
        return draft

    def _replace(self, old: _Entry, new: _Entry) -> None:
        entries = self._entries
        entries[entries.index(old)] = new
        if self._by_id.get(new.id) is old:
            self._by_id[new.id] = new
        if isinstance(old, _Draft) and old.calls:
            for call in old.calls:
                if self._calls.get(call.id, (None,))[0] is old:
                    del self._calls[call.id]
        if isinstance(new, _Draft) and new.calls:
            for call in new.calls:
                self._calls.setdefault(call.id, (new, call))

    def _push(self, entry: _Entry) -> None:
        self._entries.append(entry)
        self._by_id.setdefault(entry.id, entry)

    def _call(self, call_id: str) -> tuple[_Draft, _Call] | None:
        found = self._calls.get(call_id)
        if found is not None:
            return found
        for entry in self._entries:  # a call on a message from before the run
            if isinstance(entry, ev.AssistantMessage) and any(
                c.id == call_id for c in entry.tool_calls or ()
            ):
                draft = _Draft.of(entry)
                self._replace(entry, draft)
                return self._calls.get(call_id)
        return None

    # ------------------------------------------------------------------ folding

    def record(self, event: ev.BaseEvent) -> None:
        """Apply one delivered *event* (see the module docstring)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            self._cache = None
            handler(self, event)

    def _open_text(self, kind: str, draft: _Draft) -> None:
        key = (kind, draft.id)
        if key in self._open:
            return
        if draft.text is not None:  # ended before, its text not yet joined: reopened
            content: Any = draft.text.value()
        else:
            content = draft.fields.pop("content", None)
        draft.text = text = Text(content if isinstance(content, str) else None)
        self._open[key] = text

    def _close_text(self, kind: str, message_id: str) -> None:
        """
        The message ended: its pending deltas are joined, the chunks stay.

        Joining the chunks into the message's one string waits until the
        history is read (`messages`): a run that never reads it never holds
        the text twice.
        """
        text = self._open.pop((kind, message_id), None)
        if text is not None and text.parts:
            text.compact()

    def _write(self, kind: str, message_id: str, delta: str) -> None:
        text = self._open.get((kind, message_id))
        if text is not None:
            text.write(delta)

    def _lane(self, kind: str, key: str | None, owner: str | None) -> tuple[str | None, bool]:
        """
        Where a chunk of *kind* from *owner* streams: *key*, else what its lane streams.

        None when it names nothing and its lane streams nothing. True with the
        key when the lane moves to it (what the lane streamed before is closed):
        the chunk opens it.
        """
        lane = (kind, owner)
        previous = self._lanes.get(lane)
        key = key or previous
        if key is None or key == previous:
            return key, False
        if previous is not None:
            if kind == "args":
                self._close_args(previous)
            else:
                self._close_text(kind, previous)
        self._lanes[lane] = key
        return key, True

    def _on_text_start(self, event: ev.TextMessageStartEvent) -> None:
        self._start_message("text", event.message_id, event.role, event.name, event)

    def _start_message(
        self,
        kind: str,
        message_id: str,
        role: str | None,
        name: str | None,
        event: ev.BaseEvent,
    ) -> None:
        draft = self._draft(message_id)
        if draft is None:
            owner: str | None = getattr(event, "subagent_run_id", None)
            if kind == "reasoning":
                draft = _Draft(
                    ev.ReasoningMessage, id=message_id, content="", subagent_run_id=owner
                )
            else:
                fields: dict[str, Any] = {"id": message_id, "content": ""}
                if name is not None:
                    fields["name"] = name
                draft = _Draft(_ROLES[role], subagent_run_id=owner, **fields)
            self._push(draft)
        elif draft.cls is ev.ActivityMessage:
            return  # the client refuses text on an activity id
        self._open_text(kind, draft)
        _merge_metadata(draft.fields, event)

    def _on_text_content(self, event: ev.TextMessageContentEvent) -> None:
        self._write("text", event.message_id, event.delta)
        self._meta("text", event.message_id, event)

    def _meta(self, kind: str, key: str, event: ev.BaseEvent) -> None:
        """Merge *event*'s metadata into message *key*, or into call *key* (kind ``args``)."""
        if event.metadata is None:
            return
        fields: dict[str, Any] | None
        if kind == "args":
            found = self._call(key)
            fields = None if found is None else found[1].rest
        else:
            draft = self._draft(key)
            fields = None if draft is None else draft.fields
        if fields is not None:
            _merge_metadata(fields, event)

    def _on_text_end(self, event: ev.TextMessageEndEvent) -> None:
        self._meta("text", event.message_id, event)
        self._close_text("text", event.message_id)

    def _on_text_chunk(self, event: ev.TextMessageChunkEvent) -> None:
        self._on_chunk("text", event, event.role, event.name)

    def _on_chunk(
        self,
        kind: str,
        event: ev.TextMessageChunkEvent | ev.ReasoningMessageChunkEvent,
        role: str | None,
        name: str | None,
    ) -> None:
        """A text or reasoning chunk: the lane of its owner opens, continues or moves on."""
        message_id, moved = self._lane(kind, event.message_id, event.subagent_run_id)
        if message_id is None:
            return
        if moved:
            self._start_message(kind, message_id, role, name, event)
        if event.delta is not None:
            self._write(kind, message_id, event.delta)

    def _on_reasoning_start(self, event: ev.ReasoningMessageStartEvent) -> None:
        self._start_message("reasoning", event.message_id, None, None, event)

    def _on_reasoning_content(self, event: ev.ReasoningMessageContentEvent) -> None:
        self._write("reasoning", event.message_id, event.delta)
        self._meta("reasoning", event.message_id, event)

    def _on_reasoning_end(self, event: ev.ReasoningMessageEndEvent) -> None:
        self._meta("reasoning", event.message_id, event)
        self._close_text("reasoning", event.message_id)

    def _on_reasoning_chunk(self, event: ev.ReasoningMessageChunkEvent) -> None:
        self._on_chunk("reasoning", event, None, None)

    def _start_call(
        self, call_id: str, name: str, parent_id: str | None, event: ev.BaseEvent
    ) -> None:
        found = self._call(call_id)
        if found is not None:
            found[1].name = name
            _merge_metadata(found[1].rest, event)
            return
        owner: str | None = getattr(event, "subagent_run_id", None)
        holder = self._draft(parent_id) if parent_id is not None else None
        if holder is None or holder.cls is not ev.AssistantMessage:
            holder_id = call_id if holder is not None or parent_id is None else parent_id
            holder = _Draft(ev.AssistantMessage, id=holder_id, subagent_run_id=owner)
            holder.calls = []
            self._push(holder)
        if holder.calls is None:
            holder.calls = []
        call = _Call(call_id, name)
        call.text = text = Text("")
        _merge_metadata(call.rest, event)
        holder.calls.append(call)
        self._calls[call_id] = (holder, call)
        self._open[("args", call_id)] = text

    def _on_call_start(self, event: ev.ToolCallStartEvent) -> None:
        self._start_call(event.tool_call_id, event.tool_call_name, event.parent_message_id, event)

    def _on_call_args(self, event: ev.ToolCallArgsEvent) -> None:
        self._write("args", event.tool_call_id, event.delta)
        self._meta("args", event.tool_call_id, event)

    def _close_args(self, call_id: str) -> None:
        text = self._open.pop(("args", call_id), None)
        found = self._calls.get(call_id)
        if text is not None and found is not None and found[1].text is text:
            found[1].arguments = text.value() or ""
            found[1].text = None

    def _on_call_end(self, event: ev.ToolCallEndEvent) -> None:
        self._meta("args", event.tool_call_id, event)
        self._close_args(event.tool_call_id)

    def _on_call_chunk(self, event: ev.ToolCallChunkEvent) -> None:
        call_id, moved = self._lane("args", event.tool_call_id, event.subagent_run_id)
        if call_id is None:
            return
        if moved and event.tool_call_name is not None:
            self._start_call(call_id, event.tool_call_name, event.parent_message_id, event)
        if event.delta is not None:
            self._write("args", call_id, event.delta)

    def _on_call_result(self, event: ev.ToolCallResultEvent) -> None:
        fields: dict[str, Any] = {
            "id": event.message_id,
            "tool_call_id": event.tool_call_id,
            "content": event.content,
            "subagent_run_id": event.subagent_run_id,
        }
        _merge_metadata(fields, event)
        draft = _Draft(ev.ToolMessage, **fields)
        found = self._call(event.tool_call_id)
        entries = self._entries
        if found is None:
            entries.append(draft)
        else:
            at = entries.index(found[0]) + 1
            while at < len(entries) and _role(entries[at]) == "tool":
                at += 1
            entries.insert(at, draft)
        self._by_id.setdefault(draft.id, draft)

    def _on_activity_snapshot(self, event: ev.ActivitySnapshotEvent) -> None:
        fields: dict[str, Any] = {
            "id": event.message_id,
            "activity_type": event.activity_type,
            "content": copy.deepcopy(event.content),
            "subagent_run_id": event.subagent_run_id,
        }
        existing = self._by_id.get(event.message_id)
        if existing is None:
            draft = _Draft(ev.ActivityMessage, **fields)
            _merge_metadata(draft.fields, event)
            self._push(draft)
            return
        replace = event.replace is None or event.replace
        if _role(existing) == "activity":
            activity = self._draft(event.message_id)
            assert activity is not None
            if replace:
                activity.fields.update(fields)
            _merge_metadata(activity.fields, event)
        elif replace:
            draft = _Draft(ev.ActivityMessage, **fields)
            _merge_metadata(draft.fields, event)
            self._replace(existing, draft)
            self._by_id[draft.id] = draft

    def _on_activity_delta(self, event: ev.ActivityDeltaEvent) -> None:
        existing = self._by_id.get(event.message_id)
        if existing is None or _role(existing) != "activity":
            return
        draft = self._draft(event.message_id)
        assert draft is not None
        _merge_metadata(draft.fields, event)
        content = patched(draft.fields["content"], [to_wire(op) for op in event.patch], None)
        if isinstance(content, dict):  # else the client warns and keeps the content
            draft.fields["content"] = content
            draft.fields["activity_type"] = event.activity_type

    def _on_encrypted(self, event: ev.ReasoningEncryptedValueEvent) -> None:
        if event.subtype == "tool-call":
            found = self._call(event.entity_id)
            if found is not None:
                found[1].rest["encrypted_value"] = event.encrypted_value
            return
        draft = self._draft(event.entity_id)
        if draft is not None and draft.cls is not ev.ActivityMessage:
            draft.fields["encrypted_value"] = event.encrypted_value

    def _on_snapshot(self, event: ev.MessagesSnapshotEvent) -> None:
        incoming = {m.id: m for m in event.messages}
        roles = {m.role for m in event.messages}
        authoritative = authoritative_activity_types(event.metadata)

        def kept(entry: _Entry) -> bool:
            if entry.id in incoming:
                return True
            role = _role(entry)
            if role == "reasoning":
                return "reasoning" not in roles
            if role != "activity":
                return False
            if isinstance(entry, _Draft):
                kind = entry.fields["activity_type"]
            else:
                kind = getattr(entry, "activity_type", None)
            return keeps_activity(authoritative, kind, snapshot_has_activity="activity" in roles)

        merged: list[_Entry] = []
        for entry in self._entries:
            if not kept(entry):
                continue
            replacement = incoming.get(entry.id)
            if replacement is None:
                merged.append(entry)
                continue
            merged.append(self._carry_open(entry, replacement))
        present = {e.id for e in merged}
        merged.extend(m for m in event.messages if m.id not in present)
        self._entries = merged
        self._by_id = {}
        self._calls = {}
        for entry in merged:
            self._by_id.setdefault(entry.id, entry)
            if isinstance(entry, _Draft) and entry.calls:
                for call in entry.calls:
                    self._calls.setdefault(call.id, (entry, call))
        live = {("text", e.id) for e in merged} | {("reasoning", e.id) for e in merged}
        live |= {("args", c) for c in self._calls}
        for key in [k for k in self._open if k not in live]:
            del self._open[key]

    def _carry_open(self, entry: _Entry, replacement: ev.Message) -> _Entry:
        """*replacement*, still streaming what *entry* had open (the same `Text` objects)."""
        if not isinstance(entry, _Draft):
            return replacement
        open_ = self._open
        texts = [open_[(k, entry.id)] for k in ("text", "reasoning") if (k, entry.id) in open_]
        calls = [c for c in entry.calls or () if c.text is not None]
        if not texts and not calls:
            return replacement
        draft = _Draft.of(replacement)
        for text in texts:
            content = draft.fields.pop("content", None)
            text.clear(content if isinstance(content, str) else None)
            draft.text = text
        for call in calls:
            new = next((c for c in draft.calls or () if c.id == call.id), None)
            if new is not None and call.text is not None:
                call.text.clear(new.arguments)
                new.text = call.text
        return draft


_HANDLERS: dict[type[ev.BaseEvent], Callable[[History, Any], None]] = {
    ev.TextMessageStartEvent: History._on_text_start,
    ev.TextMessageContentEvent: History._on_text_content,
    ev.TextMessageEndEvent: History._on_text_end,
    ev.TextMessageChunkEvent: History._on_text_chunk,
    ev.ReasoningMessageStartEvent: History._on_reasoning_start,
    ev.ReasoningMessageContentEvent: History._on_reasoning_content,
    ev.ReasoningMessageEndEvent: History._on_reasoning_end,
    ev.ReasoningMessageChunkEvent: History._on_reasoning_chunk,
    ev.ToolCallStartEvent: History._on_call_start,
    ev.ToolCallArgsEvent: History._on_call_args,
    ev.ToolCallEndEvent: History._on_call_end,
    ev.ToolCallChunkEvent: History._on_call_chunk,
    ev.ToolCallResultEvent: History._on_call_result,
    ev.ActivitySnapshotEvent: History._on_activity_snapshot,
    ev.ActivityDeltaEvent: History._on_activity_delta,
    ev.ReasoningEncryptedValueEvent: History._on_encrypted,
    ev.MessagesSnapshotEvent: History._on_snapshot,
}


#: The official client's extension (``@ag-ui/client`` ``authoritativeActivityTypes``:
#: null): a snapshot carrying it drops every activity message it omits.
_ACTIVITIES_TOO = {"@ag-ui/client": {"authoritativeActivityTypes": None}}


def catch_up(
    history: Sequence[ev.Message], sent: Sequence[ev.Message]
) -> list[ev.MessagesSnapshotEvent]:
    """
    The ``MESSAGES_SNAPSHOT`` events that leave a client holding *sent* with *history*, in order.

    None when *history* is what the client sent (activity messages aside:
    clients never send them back, and keep their own). A snapshot replaces
    the client's messages by id **in place** and appends the new ones, so one
    snapshot cannot put an earlier message the client lacks before one it
    holds (a thin client that sent only its new message would see it first).
    When the client holds any of *history*, a first snapshot therefore holds
    only the messages before the first one it holds (all of them new to it,
    dropping the rest, activity messages too), and the second the whole
    *history*, whose remaining messages it then appends in order.

    A reasoning message the client holds survives a first snapshot holding
    none (the reducer keeps that role when a snapshot has none of it): were it
    to come after a message the client lacks, it would stay ahead of it.
    """
    if [m for m in history if not isinstance(m, ev.ActivityMessage)] == list(sent):
        return []
    whole = ev.MessagesSnapshotEvent(messages=tuple(history))
    held = {m.id for m in sent}
    first = next((i for i, m in enumerate(history) if m.id in held), None)
    if first is None:
        return [whole]
    head = ev.MessagesSnapshotEvent(messages=tuple(history[:first]), metadata=_ACTIVITIES_TOO)
    return [head, whole]
