"""
The fold of a run's event log into what a client joining it mid-run needs.

`RunView` applies wire-form events (camelCase dicts) the way the official
client's reducer (``@ag-ui/client`` 1.0.0, ``defaultApplyEvents``) does, and
keeps track of what is still open. `RunView.prelude` then says it all in a few
events:

1. the run's ``RUN_STARTED``, as sent;
2. a ``MESSAGES_SNAPSHOT`` of the conversation as the client would hold it
   now, in-flight messages and tool calls included with what they have so far
   (their text, their arguments);
3. a ``STATE_SNAPSHOT`` of the state;
4. ``SUBAGENT_STARTED`` for every invocation still open, in the order they
   started (a finished ancestor of an open one is announced and finished
   again, so the parent link stays valid);
5. a re-opening start for everything still open, in the order it opened:
   steps (``STEP_STARTED``), reasoning spans (``REASONING_START``), text
   messages, reasoning messages and tool calls (their ``*_START``, without
   metadata, which the snapshot already carries). The client's reducer reuses
   the snapshot's message and tool call for each, so what streams next
   appends to what the snapshot holds;
6. the terminal event, if the run has ended.

Followed by the log after the fold's last event, the prelude passes the
client's verification and leaves it with the same messages and state as a
client that watched from the start.

Streams using the ``*_CHUNK`` shorthand (whose open lanes a prelude cannot
re-open faithfully), or not starting with ``RUN_STARTED``, get the whole log
replayed as the prelude instead: longer, equally valid.

The fold is pure: no I/O, no clock.

It is not `ambient_runs._history.History`, which folds a live run's event
objects on its hot path: this one folds a stored log's wire dicts as they
were appended (keeping what the snapshot repeats as sent), also tracks what
is open and which subagents started, and leaves chunk streams to replay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import jsonpatch

from ambient_runs._history import authoritative_activity_types, keeps_activity

__all__ = ("RunView", "prelude")

_CHUNKS = frozenset({"TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"})

Json = dict[str, Any]


def prelude(
    events: Iterable[Mapping[str, Any]], input: Mapping[str, Any] | None = None
) -> list[Json]:
    """
    Fold *events* (wire form) and return the prelude a joining client needs.

    *input* is the run's `RunAgentInput` in wire form: its messages and state
    are where the conversation and the state start from.

    .. versionadded:: 0.1.0
    """
    view = RunView(input)
    view.apply_all(events)
    return view.prelude()


class RunView:
    """
    A run's messages, state and open constructs, folded from its events.

    Feed it events with `apply` (or `apply_all`), then ask for the `prelude`.

    .. versionadded:: 0.1.0
    """

    def __init__(self, input: Mapping[str, Any] | None = None) -> None:
        input = input or {}
        self._messages: list[Json] = _copy(list(input.get("messages") or ()))
        # Deltas not yet joined into their message's content, by the message dict's id():
        # appending each delta to the text so far copied the whole text per delta, which
        # made folding a long message quadratic (10,000 deltas: ~300 MB copied).
        self._parts: dict[int, tuple[Json, list[str]]] = {}
        #: The run's state.
        self.state: Any = _copy(input.get("state", {}))
        self.started: Json | None = None
        self.terminal: Json | None = None
        self.count = 0
        self._log: list[Mapping[str, Any]] = []
        self._replay = False
        self._subagents: dict[str, Json] = {}
        self._subagent_ends: dict[str, Json] = {}
        self._open: dict[tuple[Any, ...], Json] = {}
        self._reindex()

    @property
    def messages(self) -> list[Json]:
        """The conversation, as the client's reducer would hold it."""
        if self._parts:
            self._join()
        return self._messages

    @messages.setter
    def messages(self, value: list[Json]) -> None:
        self._join()
        self._messages = value

    def _join(self) -> None:
        """Put the deltas gathered since the last join into their messages' content."""
        for target, parts in self._parts.values():
            target["content"] = "".join(parts)
        self._parts.clear()

    # ------------------------------------------------------------ lookups

    def _reindex(self) -> None:
        self._by_id: dict[str, Json] = {}
        self._calls: dict[str, tuple[Json, Json]] = {}
        for message in self.messages:
            self._by_id.setdefault(message["id"], message)
            for call in message.get("toolCalls") or ():
                self._calls.setdefault(call["id"], (message, call))

    def _push(self, message: Json) -> None:
        self.messages.append(message)
        self._by_id.setdefault(message["id"], message)

    # ------------------------------------------------------------ folding

    def apply_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Apply each of *events*, in order."""
        for event in events:
            self.apply(event)

    def apply(self, event: Mapping[str, Any]) -> None:
        """Apply one event (wire form)."""
        self.count += 1
        self._log.append(event)
        if self._replay:
            return
        kind = event.get("type")
        if kind in _CHUNKS or (self.started is None and kind != "RUN_STARTED"):
            self._replay = True
            return
        handler = getattr(self, f"_on_{str(kind).lower()}", None)
        if handler is not None:
            if self._parts and handler.__func__ is not RunView._content:
                self._join()  # every other handler sees the messages whole
            handler(event)

    def prelude(self) -> list[Json]:
        """
        Return the events that bring a new client to where the run is now.

        See the module's description for what they are.
        """
        if self._replay or self.started is None:
            return [dict(e) for e in self._log]
        out: list[Json] = [dict(self.started)]
        out.append({"type": "MESSAGES_SNAPSHOT", "messages": _copy(self.messages)})
        out.append({"type": "STATE_SNAPSHOT", "snapshot": _copy(self.state)})
        out.extend(self._announcements())
        for opener in self._open.values():
            out.append({k: v for k, v in opener.items() if k != "metadata"})
        if self.terminal is not None:
            out.append(dict(self.terminal))
        return out

    def _announcements(self) -> list[Json]:
        """SUBAGENT_STARTED for the open invocations and their finished ancestors."""
        subagents, ends = self._subagents, self._subagent_ends
        needed: set[str] = set()
        for sid in subagents:
            if sid in ends:
                continue
            current: str | None = sid
            while current is not None and current in subagents and current not in needed:
                needed.add(current)
                current = subagents[current].get("parentSubagentRunId")
        out: list[Json] = []
        for sid, started in subagents.items():
            if sid in needed:
                out.append(dict(started))
                if sid in ends:
                    out.append(dict(ends[sid]))
        return out

    # ------------------------------------------------------------ lifecycle

    def _on_run_started(self, event: Mapping[str, Any]) -> None:
        if self.started is not None:  # a second run in one log: replay it all
            self._replay = True
            return
        self.started = dict(event)
        for message in (event.get("input") or {}).get("messages") or ():
            if message["id"] not in self._by_id:
                self._push(_copy(message))

    def _on_run_finished(self, event: Mapping[str, Any]) -> None:
        self.terminal = dict(event)

    _on_run_error = _on_run_finished

    def _on_subagent_started(self, event: Mapping[str, Any]) -> None:
        self._subagents[event["subagentRunId"]] = dict(event)

    def _on_subagent_finished(self, event: Mapping[str, Any]) -> None:
        self._subagent_ends[event["subagentRunId"]] = dict(event)

    _on_subagent_error = _on_subagent_finished

    def _on_step_started(self, event: Mapping[str, Any]) -> None:
        self._open[("step", event.get("subagentRunId"), event["stepName"])] = dict(event)

    def _on_step_finished(self, event: Mapping[str, Any]) -> None:
        self._open.pop(("step", event.get("subagentRunId"), event["stepName"]), None)

    def _on_reasoning_start(self, event: Mapping[str, Any]) -> None:
        self._open[("span", event["messageId"])] = dict(event)

    def _on_reasoning_end(self, event: Mapping[str, Any]) -> None:
        self._open.pop(("span", event["messageId"]), None)

    # ------------------------------------------------------------ text and reasoning

    def _start_message(self, event: Mapping[str, Any], kind: str, role: str) -> None:
        message_id = event["messageId"]
        existing = self._by_id.get(message_id)
        if existing is not None and existing.get("role") == "activity":
            return
        if existing is None:
            existing = {"id": message_id, "role": role, "content": ""}
            if kind == "text" and event.get("name") is not None:
                existing["name"] = event["name"]
            if event.get("subagentRunId") is not None:
                existing["subagentRunId"] = event["subagentRunId"]
            self._push(existing)
        _merge_metadata(existing, event)
        self._open[(kind, message_id)] = dict(event)

    def _content(self, event: Mapping[str, Any]) -> None:
        target = self._by_id.get(event["messageId"])
        if target is None or target.get("role") == "activity":
            return
        gathered = self._parts.get(id(target))
        if gathered is None:
            content = target.get("content")
            self._parts[id(target)] = (
                target,
                [content if isinstance(content, str) else "", event["delta"]],
            )
        else:
            gathered[1].append(event["delta"])
        _merge_metadata(target, event)

    def _end_message(self, event: Mapping[str, Any], kind: str) -> None:
        self._open.pop((kind, event["messageId"]), None)
        target = self._by_id.get(event["messageId"])
        if target is not None and target.get("role") != "activity":
            _merge_metadata(target, event)

    def _on_text_message_start(self, event: Mapping[str, Any]) -> None:
        self._start_message(event, "text", event.get("role") or "assistant")

    def _on_reasoning_message_start(self, event: Mapping[str, Any]) -> None:
        self._start_message(event, "reasoning", "reasoning")

    _on_text_message_content = _content
    _on_reasoning_message_content = _content

    def _on_text_message_end(self, event: Mapping[str, Any]) -> None:
        self._end_message(event, "text")

    def _on_reasoning_message_end(self, event: Mapping[str, Any]) -> None:
        self._end_message(event, "reasoning")

    def _on_reasoning_encrypted_value(self, event: Mapping[str, Any]) -> None:
        entity = event["entityId"]
        if event.get("subtype") == "tool-call":
            found = self._calls.get(entity)
            if found is not None:
                found[1]["encryptedValue"] = event["encryptedValue"]
        else:
            message = self._by_id.get(entity)
            if message is not None and message.get("role") != "activity":
                message["encryptedValue"] = event["encryptedValue"]

    # ------------------------------------------------------------ tool calls

    def _on_tool_call_start(self, event: Mapping[str, Any]) -> None:
        call_id, name = event["toolCallId"], event["toolCallName"]
        self._open[("tool", call_id)] = dict(event)
        found = self._calls.get(call_id)
        if found is not None:
            found[1]["function"]["name"] = name
            _merge_metadata(found[1], event)
            return
        parent = event.get("parentMessageId")
        owner: Json | None = None
        if parent:
            existing = self._by_id.get(parent)
            if existing is not None and existing.get("role") == "assistant":
                owner = existing
            else:
                new_id = call_id if existing is not None else parent
                owner = {"id": new_id, "role": "assistant", "toolCalls": []}
                self._push(owner)
                if event.get("subagentRunId") is not None:
                    owner["subagentRunId"] = event["subagentRunId"]
        else:
            owner = {"id": call_id, "role": "assistant", "toolCalls": []}
            self._push(owner)
            if event.get("subagentRunId") is not None:
                owner["subagentRunId"] = event["subagentRunId"]
        call: Json = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        owner.setdefault("toolCalls", []).append(call)
        _merge_metadata(call, event)
        self._calls[call_id] = (owner, call)

    def _on_tool_call_args(self, event: Mapping[str, Any]) -> None:
        found = self._calls.get(event["toolCallId"])
        if found is not None:
            found[1]["function"]["arguments"] += event["delta"]
            _merge_metadata(found[1], event)

    def _on_tool_call_end(self, event: Mapping[str, Any]) -> None:
        self._open.pop(("tool", event["toolCallId"]), None)
        found = self._calls.get(event["toolCallId"])
        if found is not None:
            _merge_metadata(found[1], event)

    def _on_tool_call_result(self, event: Mapping[str, Any]) -> None:
        message: Json = {
            "id": event["messageId"],
            "toolCallId": event["toolCallId"],
            "role": event.get("role") or "tool",
            "content": _copy(event["content"]),
        }
        if event.get("subagentRunId") is not None:
            message["subagentRunId"] = event["subagentRunId"]
        _merge_metadata(message, event)
        messages = self.messages
        found = self._calls.get(event["toolCallId"])
        owner = found[0] if found is not None and found[0].get("role") == "assistant" else None
        if owner is None:
            self._push(message)
            return
        at = next(i for i, m in enumerate(messages) if m is owner) + 1
        while at < len(messages) and messages[at].get("role") == "tool":
            at += 1
        messages.insert(at, message)
        self._by_id.setdefault(message["id"], message)

    # ------------------------------------------------------------ state, activity, snapshots

    def _on_state_snapshot(self, event: Mapping[str, Any]) -> None:
        self.state = _copy(event["snapshot"])

    def _on_state_delta(self, event: Mapping[str, Any]) -> None:
        self.state = _patched(self.state, event["delta"], self.state)

    def _on_messages_snapshot(self, event: Mapping[str, Any]) -> None:
        incoming = [_copy(m) for m in event["messages"]]
        by_id = {m["id"]: m for m in incoming}
        has_activity = any(m.get("role") == "activity" for m in incoming)
        has_reasoning = any(m.get("role") == "reasoning" for m in incoming)
        authoritative = authoritative_activity_types(event.get("metadata"))

        def kept(m: Json) -> bool:
            if m["id"] in by_id:
                return True
            role = m.get("role")
            if role == "reasoning":
                return not has_reasoning
            if role != "activity":
                return False
            return keeps_activity(
                authoritative, m.get("activityType"), snapshot_has_activity=has_activity
            )

        messages = [by_id.get(m["id"], m) for m in self.messages if kept(m)]
        present = {m["id"] for m in messages}
        messages.extend(m for m in incoming if m["id"] not in present)
        self.messages = messages
        self._reindex()

    def _on_activity_snapshot(self, event: Mapping[str, Any]) -> None:
        message_id = event["messageId"]
        index = next((i for i, m in enumerate(self.messages) if m["id"] == message_id), -1)
        fresh: Json = {
            "id": message_id,
            "role": "activity",
            "activityType": event["activityType"],
            "content": _copy(event["content"]),
        }
        if event.get("subagentRunId") is not None:
            fresh["subagentRunId"] = event["subagentRunId"]
        replace = event.get("replace", True) is not False
        target: Json | None = None
        if index == -1:
            self._push(fresh)
            target = fresh
        else:
            existing = self.messages[index]
            if existing.get("role") == "activity":
                if replace:
                    updated = {**existing, "activityType": fresh["activityType"]}
                    updated["content"] = fresh["content"]
                    updated.pop("subagentRunId", None)
                    if "subagentRunId" in fresh:
                        updated["subagentRunId"] = fresh["subagentRunId"]
                    self.messages[index] = updated
                target = self.messages[index]
            elif replace:
                self.messages[index] = fresh
                target = fresh
            self._reindex()
        if target is not None:
            _merge_metadata(target, event)

    def _on_activity_delta(self, event: Mapping[str, Any]) -> None:
        message_id = event["messageId"]
        index = next((i for i, m in enumerate(self.messages) if m["id"] == message_id), -1)
        if index == -1 or self.messages[index].get("role") != "activity":
            return
        existing = self.messages[index]
        _merge_metadata(existing, event)
        failed = object()
        content = _patched(existing.get("content") or {}, event["patch"], failed)
        if content is failed:
            return
        self.messages[index] = {
            **existing,
            "content": content,
            "activityType": event["activityType"],
        }
        self._reindex()


def _copy(value: Any) -> Any:
    """
    A deep copy of the JSON *value* (dicts, lists, scalars), without recursion.

    ``copy.deepcopy`` recurses a few frames per level, so a state nested some
    300 deep made every join of its run fail with ``RecursionError``; this copy
    takes any depth the JSON parser let in, with an explicit stack.
    """
    if not isinstance(value, (dict, list)):
        return value
    top: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, top)]
    while stack:
        source, target = stack.pop()
        if isinstance(source, dict):
            for key, item in source.items():
                if isinstance(item, (dict, list)):
                    fresh: Any = {} if isinstance(item, dict) else []
                    target[key] = fresh
                    stack.append((item, fresh))
                else:
                    target[key] = item
        else:
            for item in source:
                if isinstance(item, (dict, list)):
                    fresh = {} if isinstance(item, dict) else []
                    target.append(fresh)
                    stack.append((item, fresh))
                else:
                    target.append(item)
    return top


def _patched(document: Any, patch: list[Any], failed: Any) -> Any:
    """
    *document* with the RFC 6902 *patch* applied (a copy), or *failed* if it does not apply.

    What the client's reducer does with a patch it cannot apply: it warns and
    keeps what it had. As `ambient_runs._diff.patched`, copying with `_copy`:
    any depth.
    """
    try:
        ops = [_Copied.wrap(op) for op in patch]
        return jsonpatch.apply_patch(_copy(document), ops, in_place=True)
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        TypeError,
        KeyError,
        IndexError,
        ValueError,
        RecursionError,  # a "test" comparing values nested past the interpreter's limit
    ):
        return failed


class _Copied:
    """
    An operation's value, already copied by `_copy`: jsonpatch's own deep copy of it is free.

    jsonpatch inserts ``copy.deepcopy(value)``, which recurses per level; handing
    it this instead, whose ``__deepcopy__`` is the copy made without recursion,
    keeps a deep value from failing the fold.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self.value

    @classmethod
    def wrap(cls, op: Any) -> Any:
        if not isinstance(op, Mapping) or op.get("op") not in {"add", "replace"}:
            return op  # a "test" compares its value: it stays as it is
        return {**op, "value": cls(_copy(op["value"]))}


def _merge_metadata(target: Json, event: Mapping[str, Any]) -> None:
    metadata = event.get("metadata")
    if metadata is None:
        return
    target["metadata"] = {**(target.get("metadata") or {}), **_copy(metadata)}
