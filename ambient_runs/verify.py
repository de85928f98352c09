"""
Check AG-UI 1.0 event sequences before they reach the wire.

`Verifier` is a pure, streaming state machine: `Verifier.feed` takes one event
and returns the `Violation`\\ s it would cause, and only an accepted event
advances the state, so a producer can refuse an event and carry on.

With ``strict=False`` it enforces exactly what the official TypeScript client
(``@ag-ui/client`` 1.0.0) enforces on the events it receives: the chunk
expansion stage (``transformChunks``, including its per-subagent lanes and the
``*_END`` events it synthesizes) followed by ``verifyEvents``. A differential
test runs thousands of streams through both and requires the same verdict.

``strict=True`` (the default) adds the MUSTs of the 1.0 specification that the
client leaves unchecked; those violations have ``client_checked=False``:

- ``run-id-mismatch``: RUN_FINISHED must repeat RUN_STARTED's ``threadId`` and
  ``runId``.
- ``tool-result-unknown-call`` / ``tool-result-open-call``: TOOL_CALL_RESULT
  must answer a tool call that was started and ended in this run, or one known
  from history (``RUN_STARTED.input.messages``, a MESSAGES_SNAPSHOT, or
  *known_tool_call_ids*).
- ``subagent-open-at-finish``: SUBAGENT_FINISHED (either outcome) requires that
  everything the invocation owns is closed: its text messages, reasoning spans
  and messages, tool calls, steps and child subagents. SUBAGENT_ERROR is
  lenient, like RUN_ERROR: it may abandon open work (which still has to be
  closed before RUN_FINISHED, as the client requires). An entity belongs to the
  owner recorded when it was opened (for a tool call, possibly inherited from
  its parent message); a child subagent belongs to its
  ``parentSubagentRunId``.
- ``interrupt-id-duplicate``: interrupt ids are unique within a RUN_FINISHED
  interrupt outcome.
- ``suspended-without-interrupt``, ``suspended-interrupt-unknown`` and
  ``suspended-interrupt-owner``: checked at RUN_FINISHED, when the interrupts
  are known. A subagent that finished ``suspended`` in this run requires the
  run to end with an ``interrupt`` outcome, and each of its ``interruptIds``
  must name an interrupt of that outcome which the subagent raised itself
  (``Interrupt.subagentRunId`` equal to its id). A run ending in RUN_ERROR is
  not checked.

Chunk events (``*_CHUNK``) are checked as the client expands them, in both
modes: the library never emits them, but users can emit raw ones. One
consequence is mirrored on purpose: an event that closes a chunk lane (see
`RULES` ``chunk-*``) is rejected when the synthesized ``*_END`` is, which
happens only if the chunk-opened entity was already closed explicitly from
another lane; RUN_ERROR is then refused too.

Every event costs O(1), whatever the length of the stream and the number of
open entities and subagents, with three exceptions: RUN_STARTED, RUN_FINISHED,
RUN_ERROR and MESSAGES_SNAPSHOT close every open chunk lane (one per owner that
streams chunks); RUN_FINISHED lists what is still open when it refuses; and
seeding from messages is linear in their number.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from types import MappingProxyType
from typing import Any, Final, TypeAlias, cast

import attrs

from ambient_runs import events as ev
from ambient_runs.errors import InvalidInputError, ProtocolError

__all__ = (
    "RULES",
    "SPEC_ONLY_RULES",
    "Verifier",
    "Violation",
    "assert_valid",
)


@attrs.frozen
class Violation:
    """
    One way an event breaks the AG-UI 1.0 sequence rules.

    Args:
        rule: The short kebab-case id of the rule, one of `RULES`.
        message: What is wrong, naming the event type and the ids involved, worded
            like the official client's error where the client has one.
        event_type: The wire type of the offending event (for an error found in an
            event the client synthesizes from a chunk, the chunk's type).
        ids: The message, tool call, step, subagent or interrupt ids involved.
        client_checked: Whether ``@ag-ui/client`` 1.0.0 rejects the event too;
            False for the specification's rules it leaves unchecked.

    .. versionadded:: 0.1.0
    """

    rule: str
    message: str
    event_type: str
    ids: tuple[str, ...] = ()
    client_checked: bool = True


#: Every rule id `Verifier` reports, and what it checks.
RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        # run lifecycle
        "first-event": "The first event is RUN_STARTED or RUN_ERROR.",
        "after-run-finished": "After RUN_FINISHED only RUN_STARTED or RUN_ERROR may follow.",
        "after-run-error": "After RUN_ERROR only RUN_STARTED may follow.",
        "run-already-active": "RUN_STARTED needs the previous run to be finished.",
        "open-at-run-finished": "RUN_FINISHED needs every step, text message, reasoning "
        "message and span, tool call and subagent closed.",
        # open/close pairing
        "text-already-open": "TEXT_MESSAGE_START names a text message that is open.",
        "text-not-open": "TEXT_MESSAGE_CONTENT/END names no open text message.",
        "tool-call-already-open": "TOOL_CALL_START names a tool call that is open.",
        "tool-call-not-open": "TOOL_CALL_ARGS/END names no open tool call.",
        "reasoning-span-already-open": "REASONING_START names a reasoning span that is open.",
        "reasoning-span-not-open": "REASONING_END names no open reasoning span.",
        "reasoning-message-already-open": "REASONING_MESSAGE_START names a reasoning "
        "message that is open.",
        "reasoning-message-not-open": "REASONING_MESSAGE_CONTENT/END names no open "
        "reasoning message.",
        "step-already-active": "STEP_STARTED names a step its owner has open.",
        "step-not-started": "STEP_FINISHED names a step nobody has open.",
        "step-owner-mismatch": "STEP_FINISHED names a step open under another owner.",
        # attribution
        "owner-mismatch": "A tagged continuation or re-opener disagrees with the owner on "
        "record for the entity (text, tool call, reasoning, activity, encrypted value).",
        "tool-call-parent-owner": "A tool call's owner disagrees with the owner of its "
        "parent message.",
        # subagents
        "subagent-active": "SUBAGENT_STARTED names a subagent that is active.",
        "subagent-reused": "SUBAGENT_STARTED names a subagent that already finished in this run.",
        "subagent-parent-unknown": "SUBAGENT_STARTED names a parent subagent not started "
        "in this run.",
        "subagent-not-active": "SUBAGENT_FINISHED/ERROR names no active subagent.",
        # chunk expansion (the client's transformChunks)
        "chunk-missing-id": "The first chunk of a stream lacks its messageId or toolCallId.",
        "chunk-missing-name": "The first TOOL_CALL_CHUNK of a stream lacks toolCallName.",
        "chunk-field-mismatch": "A continuation chunk repeats role, name, toolCallName or "
        "parentMessageId with a different value.",
        "chunk-lane-mismatch": "A chunk's subagentRunId disagrees with the lane that holds "
        "its id.",
        "chunk-ambiguous": "An untagged chunk without id could continue several lanes.",
        # the specification's MUSTs the client does not check
        "run-id-mismatch": "RUN_FINISHED repeats RUN_STARTED's threadId and runId.",
        "tool-result-unknown-call": "TOOL_CALL_RESULT answers a tool call never seen.",
        "tool-result-open-call": "TOOL_CALL_RESULT answers a tool call still open.",
        "subagent-open-at-finish": "SUBAGENT_FINISHED while the subagent still owns open "
        "messages, reasoning, tool calls, steps or child subagents.",
        "interrupt-id-duplicate": "An interrupt outcome repeats an interrupt id.",
        "suspended-without-interrupt": "A subagent finished suspended but the run did not "
        "finish with an interrupt outcome.",
        "suspended-interrupt-unknown": "A suspended subagent's interruptIds name an "
        "interrupt the run's interrupt outcome lacks.",
        "suspended-interrupt-owner": "A suspended subagent's interruptIds name an interrupt "
        "attributed to someone else.",
    }
)

#: The rules ``@ag-ui/client`` 1.0.0 does not check; only ``strict=True`` reports them.
SPEC_ONLY_RULES: Final[frozenset[str]] = frozenset(
    {
        "run-id-mismatch",
        "tool-result-unknown-call",
        "tool-result-open-call",
        "subagent-open-at-finish",
        "interrupt-id-duplicate",
        "suspended-without-interrupt",
        "suspended-interrupt-unknown",
        "suspended-interrupt-owner",
    }
)


class _Missing(enum.Enum):
    MISSING = enum.auto()


_MISSING: Final = _Missing.MISSING
_OK: Final[tuple[Violation, ...]] = ()

Owner: TypeAlias = str | None  # None is the parent agent
Found: TypeAlias = tuple[Violation, ...]
Undo: TypeAlias = Callable[[], None]

# Entity kinds with an open/close lifecycle, as indices into the per-kind tables.
_TEXT: Final = 0
_TOOL: Final = 1
_SPAN: Final = 2
_RMSG: Final = 3

_LABEL: Final = ("text message", "tool call", "reasoning span", "reasoning message")
# How the client names the entity in its owner-mismatch sentence.
_OWNER_LABEL: Final = ("message", "tool call", "reasoning message", "reasoning message")
_START: Final = (
    "TEXT_MESSAGE_START",
    "TOOL_CALL_START",
    "REASONING_START",
    "REASONING_MESSAGE_START",
)
_END: Final = ("TEXT_MESSAGE_END", "TOOL_CALL_END", "REASONING_END", "REASONING_MESSAGE_END")
_CONTENT: Final = ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "", "REASONING_MESSAGE_CONTENT")
_ALREADY_RULE: Final = (
    "text-already-open",
    "tool-call-already-open",
    "reasoning-span-already-open",
    "reasoning-message-already-open",
)
_NOT_OPEN_RULE: Final = (
    "text-not-open",
    "tool-call-not-open",
    "reasoning-span-not-open",
    "reasoning-message-not-open",
)
# What RUN_FINISHED calls each kind, in the order the client checks them.
_RUN_FINISHED_ORDER: Final = (
    (_TEXT, "text messages"),
    (_RMSG, "reasoning messages"),
    (_SPAN, "reasoning spans"),
    (_TOOL, "tool calls"),
)

# Chunk lanes: what kind of stream a lane is assembling.
_LANE_TEXT: Final = "text"
_LANE_TOOL: Final = "tool"
_LANE_REASONING: Final = "reasoning"
_LANE_KIND: Final = {_LANE_TEXT: _TEXT, _LANE_TOOL: _TOOL, _LANE_REASONING: _RMSG}
_CHUNK_TYPE: Final = {
    _LANE_TEXT: "TEXT_MESSAGE_CHUNK",
    _LANE_TOOL: "TOOL_CALL_CHUNK",
    _LANE_REASONING: "REASONING_MESSAGE_CHUNK",
}
_CHUNK_ENTITY: Final = {
    _LANE_TEXT: "text message",
    _LANE_TOOL: "tool call",
    _LANE_REASONING: "reasoning message",
}
_CHUNK_ID_FIELD: Final = {
    _LANE_TEXT: "messageId",
    _LANE_TOOL: "toolCallId",
    _LANE_REASONING: "messageId",
}


def _not_an_event(obj: object) -> TypeError:
    return TypeError(f"expected an AG-UI event object, got {type(obj).__name__}")


def _who(owner: Owner) -> str:
    return "(the parent agent)" if owner is None else owner


def _type(event: ev.BaseEvent) -> str:
    return event.TYPE.value


class _Lane:
    """A stream the client is assembling from chunks, in one owner's lane."""

    __slots__ = ("entity_id", "kind", "name", "owner", "parent_message_id", "role")

    def __init__(
        self,
        kind: str,
        entity_id: str,
        owner: Owner,
        *,
        role: str | None = None,
        name: str | None = None,
        parent_message_id: str | None = None,
    ) -> None:
        self.kind = kind
        self.entity_id = entity_id
        self.owner = owner  # the lane's key: the opening chunk's tag
        self.role = role  # text: the established role (absent reads as "assistant")
        self.name = name  # text: name; tool: toolCallName
        self.parent_message_id = parent_message_id


class _Rejected(Exception):
    def __init__(self, found: Found) -> None:
        self.found = found


class Verifier:
    """
    Check a stream of AG-UI 1.0 events, one event at a time.

    The owner of an event is its ``subagent_run_id`` (None is the parent agent).
    Ownership follows the official client: an untagged continuation always
    passes; a tagged one must match the owner on record, which is kept for the
    whole run; snapshots and the RUN_STARTED input echo seed it. Several runs may
    share one stream: the state resets on each RUN_STARTED after a closed run.

    Args:
        strict: Also check the specification's MUSTs the client does not
            (`SPEC_ONLY_RULES`). With False, the verdicts are exactly those of
            ``@ag-ui/client`` 1.0.0 for schema-valid events.
        known_tool_call_ids: Tool calls made before this stream (for example in
            the input's messages), which TOOL_CALL_RESULT may answer in any run
            without restreaming them. Only used by *strict*.

    .. versionadded:: 0.1.0
    """

    def __init__(self, *, strict: bool = True, known_tool_call_ids: Iterable[str] = ()) -> None:
        self._strict = strict
        self._known_tool_calls = frozenset(known_tool_call_ids)

        # Run lifecycle, across runs.
        self._first = False  # an event has been accepted
        self._started = False
        self._finished = False
        self._errored = False
        self._active = False  # started and neither finished nor errored

        # Per run: open entities (id -> owner when opened), per kind.
        self._text: dict[str, Owner] = {}
        self._tools: dict[str, Owner] = {}
        self._spans: dict[str, Owner] = {}
        self._rmsgs: dict[str, Owner] = {}
        self._open = (self._text, self._tools, self._spans, self._rmsgs)
        # Per run: owners on record, per entity kind (spans and reasoning messages share).
        self._message_owner: dict[str, Owner] = {}
        self._tool_owner: dict[str, Owner] = {}
        self._reasoning_owner: dict[str, Owner] = {}
        self._activity_owner: dict[str, Owner] = {}
        self._owners = (
            self._message_owner,
            self._tool_owner,
            self._reasoning_owner,
            self._reasoning_owner,
        )
        # Per run: open steps by owner, and who holds each step name.
        self._steps: dict[Owner, dict[str, None]] = {}
        self._step_holders: dict[str, dict[Owner, None]] = {}
        self._step_count = 0
        # Per run: active subagents (id -> parent subagent) and finished ones.
        self._subagents: dict[str, Owner] = {}
        self._closed_subagents: set[str] = set()
        # Per run, strict: ids, open entities per owning subagent, suspensions.
        self._thread_id = ""
        self._run_id = ""
        self._owned: dict[str, dict[tuple[str, str], None]] = {}
        self._suspended: list[tuple[str, tuple[str, ...]]] = []

        # Chunk lanes (the client's transform stage; closed at every run boundary).
        self._lanes: dict[Owner, _Lane] = {}
        self._lane_of_entity: dict[tuple[str, str], Owner] = {}
        self._lanes_by_kind: dict[str, dict[Owner, None]] = {
            _LANE_TEXT: {},
            _LANE_TOOL: {},
            _LANE_REASONING: {},
        }

        self._dispatch: dict[type[Any], Callable[[Any], Found]] = {
            ev.TextMessageStartEvent: self._on_text_start,
            ev.TextMessageContentEvent: self._on_text_content,
            ev.TextMessageEndEvent: self._on_text_end,
            ev.TextMessageChunkEvent: self._on_text_chunk,
            ev.ToolCallStartEvent: self._on_tool_start,
            ev.ToolCallArgsEvent: self._on_tool_args,
            ev.ToolCallEndEvent: self._on_tool_end,
            ev.ToolCallChunkEvent: self._on_tool_chunk,
            ev.ToolCallResultEvent: self._on_tool_result,
            ev.StateSnapshotEvent: self._on_passthrough_own_lane,
            ev.StateDeltaEvent: self._on_passthrough_own_lane,
            ev.MessagesSnapshotEvent: self._on_messages_snapshot,
            ev.ActivitySnapshotEvent: self._on_activity_snapshot,
            ev.ActivityDeltaEvent: self._on_activity_delta,
            ev.RawEvent: self._on_passthrough,
            ev.CustomEvent: self._on_passthrough_own_lane,
            ev.RunStartedEvent: self._on_run_started,
            ev.RunFinishedEvent: self._on_run_finished,
            ev.RunErrorEvent: self._on_run_error,
            ev.StepStartedEvent: self._on_step_started,
            ev.StepFinishedEvent: self._on_step_finished,
            ev.ReasoningStartEvent: self._on_span_start,
            ev.ReasoningMessageStartEvent: self._on_rmsg_start,
            ev.ReasoningMessageContentEvent: self._on_rmsg_content,
            ev.ReasoningMessageEndEvent: self._on_rmsg_end,
            ev.ReasoningMessageChunkEvent: self._on_reasoning_chunk,
            ev.ReasoningEndEvent: self._on_span_end,
            ev.ReasoningEncryptedValueEvent: self._on_encrypted_value,
            ev.SubagentStartedEvent: self._on_subagent_started,
            ev.SubagentFinishedEvent: self._on_subagent_end,
            ev.SubagentErrorEvent: self._on_subagent_end,
        }

    # ------------------------------------------------------------------ public API

    def feed(self, event: ev.Event) -> tuple[Violation, ...]:
        """
        Check *event* against the stream so far, and accept it if it is valid.

        The state advances only when the event is accepted: after a rejected
        event the verifier is exactly as before, so the producer can carry on.

        Args:
            event: Any AG-UI event object (`ambient_runs.events`).

        Returns:
            The violations *event* causes; empty when it is accepted.

        Raises:
            TypeError: *event* is not an AG-UI event object.

        .. versionadded:: 0.1.0
        """
        try:
            handler = self._dispatch[type(event)]
        except KeyError:
            raise _not_an_event(event) from None
        return handler(event)

    def check(self, event: ev.Event) -> None:
        """
        Accept *event*, or raise if it breaks a rule (leaving the state unchanged).

        Raises:
            ProtocolError: *event* was refused; the message and *rule* are the
                first violation's, *violations* holds them all.
            TypeError: *event* is not an AG-UI event object.

        .. versionadded:: 0.1.0
        """
        try:  # `feed`, inlined: this is every verified emit's hot path
            handler = self._dispatch[type(event)]
        except KeyError:
            raise _not_an_event(event) from None
        found = handler(event)
        if found:
            first = found[0]
            raise ProtocolError(first.message, rule=first.rule, violations=found)

    def verify(self, events: Iterable[ev.Event]) -> tuple[Violation, ...]:
        """
        Feed every event of *events*, and collect all violations.

        A refused event is skipped, as `feed` does, and checking goes on with the
        next one.

        Returns:
            Every violation, in stream order; empty when the whole stream is valid.

        .. versionadded:: 0.1.0
        """
        found: list[Violation] = []
        feed = self.feed
        for event in events:
            found.extend(feed(event))
        return tuple(found)

    @property
    def strict(self) -> bool:
        """
        Whether the specification's extra rules are checked.

        .. versionadded:: 0.1.0
        """
        return self._strict

    # ------------------------------------------------------------------ gate

    def _gate(self, event: ev.BaseEvent) -> Found:
        """Refuse a non-run event outside an active run, as the client words it."""
        etype = _type(event)
        if self._errored:
            return (
                Violation(
                    "after-run-error",
                    f"Cannot send event type '{etype}': The run has already errored with "
                    "'RUN_ERROR'. No further events can be sent.",
                    etype,
                ),
            )
        if self._finished:
            return (
                Violation(
                    "after-run-finished",
                    f"Cannot send event type '{etype}': The run has already finished with "
                    "'RUN_FINISHED'. Start a new run with 'RUN_STARTED'.",
                    etype,
                ),
            )
        return (
            Violation("first-event", f"First event must be 'RUN_STARTED' (got '{etype}')", etype),
        )

    # ------------------------------------------------------------------ primitives

    def _already(self, kind: int, eid: str, etype: str) -> Violation:
        return Violation(
            _ALREADY_RULE[kind],
            f"Cannot send '{_START[kind]}' event: A {_LABEL[kind]} with ID '{eid}' is already "
            f"in progress. Complete it with '{_END[kind]}' first.",
            etype,
            (eid,),
        )

    def _not_open(self, kind: int, eid: str, etype: str, shown: str) -> Violation:
        if shown == _END[kind] and kind != _RMSG:
            hint = f"A '{_START[kind]}' event must be sent first."
        else:
            hint = f"Start a {_LABEL[kind]} with '{_START[kind]}' first."
        return Violation(
            _NOT_OPEN_RULE[kind],
            f"Cannot send '{shown}' event: No active {_LABEL[kind]} found with ID '{eid}'. "
            + hint,
            etype,
            (eid,),
        )

    @staticmethod
    def _mismatch(
        etype: str, shown: str, tag: str, owner: Owner, label: str, eid: str
    ) -> Violation:
        return Violation(
            "owner-mismatch",
            f"Cannot send '{shown}': subagentRunId '{tag}' does not match the {label} "
            f"'{eid}' opener's subagent '{_who(owner)}'.",
            etype,
            (eid, tag) if owner is None else (eid, tag, owner),
        )

    def _check_open(self, kind: int, eid: str, tag: Owner, etype: str) -> Violation | None:
        """Check an opener of a text message, reasoning span or reasoning message."""
        if eid in self._open[kind]:
            return self._already(kind, eid, etype)
        if tag is not None:
            owner = self._owners[kind].get(eid, _MISSING)
            if owner is not _MISSING and owner != tag:
                return self._mismatch(etype, _START[kind], tag, owner, _OWNER_LABEL[kind], eid)
        return None

    def _apply_open(self, kind: int, eid: str, tag: Owner) -> None:
        owners = self._owners[kind]
        owner = owners.get(eid, _MISSING)
        if owner is _MISSING:  # first writer wins; an untagged reopen keeps the owner
            owners[eid] = owner = tag
        self._open[kind][eid] = owner
        if owner is not None and self._strict:
            self._own(owner, _LABEL[kind], eid)

    def _undo_open(self, kind: int, eid: str, created: bool) -> None:
        owner = self._open[kind].pop(eid)
        if created:
            del self._owners[kind][eid]
        if owner is not None and self._strict:
            self._disown(owner, _LABEL[kind], eid)

    def _check_continue(
        self, kind: int, eid: str, tag: Owner, etype: str, shown: str
    ) -> Violation | None:
        """Check a CONTENT, ARGS or END of an open entity."""
        if eid not in self._open[kind]:
            return self._not_open(kind, eid, etype, shown)
        if tag is not None:
            owner = self._owners[kind].get(eid, _MISSING)
            if owner is not _MISSING and owner != tag:
                return self._mismatch(etype, shown, tag, owner, _OWNER_LABEL[kind], eid)
        return None

    def _apply_close(self, kind: int, eid: str) -> Owner:
        owner = self._open[kind].pop(eid)
        if owner is not None and self._strict:
            self._disown(owner, _LABEL[kind], eid)
        return owner

    def _undo_close(self, kind: int, eid: str, owner: Owner) -> None:
        self._open[kind][eid] = owner
        if owner is not None and self._strict:
            self._own(owner, _LABEL[kind], eid)

    def _own(self, owner: str, label: str, eid: str) -> None:
        owned = self._owned.get(owner)
        if owned is None:
            owned = self._owned[owner] = {}
        owned[label, eid] = None

    def _disown(self, owner: str, label: str, eid: str) -> None:
        owned = self._owned.get(owner)
        if owned is not None:
            owned.pop((label, eid), None)

    # ------------------------------------------------------------------ lanes

    def _lane_end(self, lane: _Lane, before: str) -> tuple[Violation | None, Undo | None]:
        """Check and apply the ``*_END`` the client synthesizes to close *lane*."""
        kind = _LANE_KIND[lane.kind]
        shown = _END[kind]
        found = self._check_continue(kind, lane.entity_id, lane.owner, before, shown)
        if found is not None:
            note = (
                f" (the client synthesizes this '{shown}' to close the "
                f"{_CHUNK_TYPE[lane.kind]} stream before '{before}')"
            )
            return attrs.evolve(found, message=found.message + note), None
        eid = lane.entity_id
        owner = self._apply_close(kind, eid)
        return None, lambda: self._undo_close(kind, eid, owner)

    def _drop_lane(self, owner: Owner) -> None:
        lane = self._lanes.pop(owner)
        del self._lane_of_entity[lane.kind, lane.entity_id]
        del self._lanes_by_kind[lane.kind][owner]

    def _add_lane(self, lane: _Lane) -> None:
        self._lanes[lane.owner] = lane
        self._lane_of_entity[lane.kind, lane.entity_id] = lane.owner
        self._lanes_by_kind[lane.kind][lane.owner] = None

    def _close_lanes(self, owners: Iterable[Owner], before: str) -> tuple[Found, list[Undo]]:
        """Check and apply the ENDs closing the lanes of *owners*, in order."""
        undos: list[Undo] = []
        for owner in owners:
            lane = self._lanes.get(owner)
            if lane is None:
                continue
            found, undo = self._lane_end(lane, before)
            if found is not None:
                for done in reversed(undos):
                    done()
                return (found,), []
            assert undo is not None
            undos.append(undo)
        return _OK, undos

    def _with_lanes(
        self,
        event: Any,
        owners: Iterable[Owner],
        check: Callable[[Any], Found],
        apply: Callable[[Any], None] | None,
    ) -> Found:
        """Run *event* after the ENDs that close the chunk lanes of *owners*."""
        owners = tuple(o for o in owners if o in self._lanes)
        found, undos = self._close_lanes(owners, _type(event))
        if found:
            return found
        found = check(event)
        if found:
            for undo in reversed(undos):
                undo()
            return found
        for owner in owners:
            self._drop_lane(owner)
        if apply is not None:
            apply(event)
        return _OK

    def _step(
        self,
        event: Any,
        check: Callable[[Any], Found],
        apply: Callable[[Any], None] | None,
    ) -> Found:
        """Check and apply an explicit event that closes its own chunk lane first."""
        if not self._active:
            return self._gate(event)
        if self._lanes and event.subagent_run_id in self._lanes:
            return self._with_lanes(event, (event.subagent_run_id,), check, apply)
        found = check(event)
        if found:
            return found
        if apply is not None:
            apply(event)
        return _OK

    # ------------------------------------------------------------------ text messages

    def _on_text_start(self, event: ev.TextMessageStartEvent) -> Found:
        return self._step(event, self._check_text_start, self._apply_text_start)

    def _check_text_start(self, event: ev.TextMessageStartEvent) -> Found:
        found = self._check_open(
            _TEXT, event.message_id, event.subagent_run_id, "TEXT_MESSAGE_START"
        )
        return _OK if found is None else (found,)

    def _apply_text_start(self, event: ev.TextMessageStartEvent) -> None:
        self._apply_open(_TEXT, event.message_id, event.subagent_run_id)

    def _on_text_content(self, event: ev.TextMessageContentEvent) -> Found:
        # The hot path: a handful of dict lookups.
        if not self._active:
            return self._gate(event)
        tag = event.subagent_run_id
        if self._lanes and tag in self._lanes:
            return self._with_lanes(event, (tag,), self._check_text_content, None)
        mid = event.message_id
        if mid in self._text and (tag is None or self._message_owner.get(mid) == tag):
            return _OK
        return self._check_text_content(event)

    def _check_text_content(self, event: ev.TextMessageContentEvent) -> Found:
        found = self._check_continue(
            _TEXT,
            event.message_id,
            event.subagent_run_id,
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
        )
        return _OK if found is None else (found,)

    def _on_text_end(self, event: ev.TextMessageEndEvent) -> Found:
        return self._step(event, self._check_text_end, self._apply_text_end)

    def _check_text_end(self, event: ev.TextMessageEndEvent) -> Found:
        found = self._check_continue(
            _TEXT, event.message_id, event.subagent_run_id, "TEXT_MESSAGE_END", "TEXT_MESSAGE_END"
        )
        return _OK if found is None else (found,)

    def _apply_text_end(self, event: ev.TextMessageEndEvent) -> None:
        self._apply_close(_TEXT, event.message_id)

    # ------------------------------------------------------------------ tool calls

    def _on_tool_start(self, event: ev.ToolCallStartEvent) -> Found:
        return self._step(event, self._check_tool_start, self._apply_tool_start)

    def _check_tool_start(self, event: ev.ToolCallStartEvent) -> Found:
        found = self._check_tool_open(
            event.tool_call_id, event.subagent_run_id, event.parent_message_id, "TOOL_CALL_START"
        )
        return _OK if found is None else (found,)

    def _apply_tool_start(self, event: ev.ToolCallStartEvent) -> None:
        self._apply_tool_open(event.tool_call_id, event.subagent_run_id, event.parent_message_id)

    def _check_tool_open(
        self, tid: str, tag: Owner, parent: str | None, etype: str
    ) -> Violation | None:
        if tid in self._tools:
            return self._already(_TOOL, tid, etype)
        inherited: Owner | _Missing = _MISSING
        if parent is not None:
            inherited = self._message_owner.get(parent, _MISSING)
            if inherited is not _MISSING and tag is not None and tag != inherited:
                return Violation(
                    "tool-call-parent-owner",
                    f"Cannot send 'TOOL_CALL_START': subagentRunId '{tag}' does not match its "
                    f"parent message '{parent}' owner '{_who(inherited)}'. A tool call "
                    "belongs to the message that carries it.",
                    etype,
                    (tid, parent, tag),
                )
        existing = self._tool_owner.get(tid, _MISSING)
        if existing is not _MISSING:
            if tag is not None and tag != existing:
                return self._mismatch(etype, "TOOL_CALL_START", tag, existing, "tool call", tid)
            if tag is None and inherited is not _MISSING and inherited != existing:
                return Violation(
                    "tool-call-parent-owner",
                    f"Cannot send 'TOOL_CALL_START': tool call '{tid}' is owned by "
                    f"'{_who(existing)}' but its parent message '{parent}' is owned by "
                    f"'{_who(inherited)}'. A tool call belongs to the message that carries it.",
                    etype,
                    (tid, str(parent)),
                )
        return None

    def _apply_tool_open(self, tid: str, tag: Owner, parent: str | None) -> bool:
        """Open tool call *tid*; return whether its owner record was created."""
        owner = self._tool_owner.get(tid, _MISSING)
        created = owner is _MISSING
        if owner is _MISSING:
            if tag is None and parent is not None:
                inherited = self._message_owner.get(parent, _MISSING)
                tag = None if inherited is _MISSING else inherited
            self._tool_owner[tid] = owner = tag
        self._tools[tid] = owner
        if owner is not None and self._strict:
            self._own(owner, "tool call", tid)
        return created

    def _on_tool_args(self, event: ev.ToolCallArgsEvent) -> Found:
        if not self._active:
            return self._gate(event)
        tag = event.subagent_run_id
        if self._lanes and tag in self._lanes:
            return self._with_lanes(event, (tag,), self._check_tool_args, None)
        tid = event.tool_call_id
        if tid in self._tools and (tag is None or self._tool_owner.get(tid) == tag):
            return _OK
        return self._check_tool_args(event)

    def _check_tool_args(self, event: ev.ToolCallArgsEvent) -> Found:
        found = self._check_continue(
            _TOOL, event.tool_call_id, event.subagent_run_id, "TOOL_CALL_ARGS", "TOOL_CALL_ARGS"
        )
        return _OK if found is None else (found,)

    def _on_tool_end(self, event: ev.ToolCallEndEvent) -> Found:
        return self._step(event, self._check_tool_end, self._apply_tool_end)

    def _check_tool_end(self, event: ev.ToolCallEndEvent) -> Found:
        found = self._check_continue(
            _TOOL, event.tool_call_id, event.subagent_run_id, "TOOL_CALL_END", "TOOL_CALL_END"
        )
        return _OK if found is None else (found,)

    def _apply_tool_end(self, event: ev.ToolCallEndEvent) -> None:
        self._apply_close(_TOOL, event.tool_call_id)

    def _on_tool_result(self, event: ev.ToolCallResultEvent) -> Found:
        return self._step(event, self._check_tool_result, self._apply_tool_result)

    def _check_tool_result(self, event: ev.ToolCallResultEvent) -> Found:
        if not self._strict:
            return _OK
        tid = event.tool_call_id
        if tid in self._tools:
            return (
                Violation(
                    "tool-result-open-call",
                    f"Cannot send 'TOOL_CALL_RESULT' for tool call '{tid}': the call is still "
                    "open. Send 'TOOL_CALL_END' first.",
                    "TOOL_CALL_RESULT",
                    (tid, event.message_id),
                    client_checked=False,
                ),
            )
        if tid not in self._tool_owner and tid not in self._known_tool_calls:
            return (
                Violation(
                    "tool-result-unknown-call",
                    f"Cannot send 'TOOL_CALL_RESULT' for tool call '{tid}': no such tool call "
                    "was started in this run or is known from the input's messages.",
                    "TOOL_CALL_RESULT",
                    (tid, event.message_id),
                    client_checked=False,
                ),
            )
        return _OK

    def _apply_tool_result(self, event: ev.ToolCallResultEvent) -> None:
        # The result mints a tool message under its own tag; the newest mint wins.
        self._message_owner[event.message_id] = event.subagent_run_id

    # ------------------------------------------------------------------ reasoning

    def _on_span_start(self, event: ev.ReasoningStartEvent) -> Found:
        return self._step(event, self._check_span_start, self._apply_span_start)

    def _check_span_start(self, event: ev.ReasoningStartEvent) -> Found:
        found = self._check_open(_SPAN, event.message_id, event.subagent_run_id, "REASONING_START")
        return _OK if found is None else (found,)

    def _apply_span_start(self, event: ev.ReasoningStartEvent) -> None:
        self._apply_open(_SPAN, event.message_id, event.subagent_run_id)

    def _on_span_end(self, event: ev.ReasoningEndEvent) -> Found:
        return self._step(event, self._check_span_end, self._apply_span_end)

    def _check_span_end(self, event: ev.ReasoningEndEvent) -> Found:
        found = self._check_continue(
            _SPAN, event.message_id, event.subagent_run_id, "REASONING_END", "REASONING_END"
        )
        return _OK if found is None else (found,)

    def _apply_span_end(self, event: ev.ReasoningEndEvent) -> None:
        self._apply_close(_SPAN, event.message_id)

    def _on_rmsg_start(self, event: ev.ReasoningMessageStartEvent) -> Found:
        return self._step(event, self._check_rmsg_start, self._apply_rmsg_start)

    def _check_rmsg_start(self, event: ev.ReasoningMessageStartEvent) -> Found:
        found = self._check_open(
            _RMSG, event.message_id, event.subagent_run_id, "REASONING_MESSAGE_START"
        )
        return _OK if found is None else (found,)

    def _apply_rmsg_start(self, event: ev.ReasoningMessageStartEvent) -> None:
        self._apply_open(_RMSG, event.message_id, event.subagent_run_id)

    def _on_rmsg_content(self, event: ev.ReasoningMessageContentEvent) -> Found:
        if not self._active:
            return self._gate(event)
        tag = event.subagent_run_id
        if self._lanes and tag in self._lanes:
            return self._with_lanes(event, (tag,), self._check_rmsg_content, None)
        mid = event.message_id
        if mid in self._rmsgs and (tag is None or self._reasoning_owner.get(mid) == tag):
            return _OK
        return self._check_rmsg_content(event)

    def _check_rmsg_content(self, event: ev.ReasoningMessageContentEvent) -> Found:
        found = self._check_continue(
            _RMSG,
            event.message_id,
            event.subagent_run_id,
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
        )
        return _OK if found is None else (found,)

    def _on_rmsg_end(self, event: ev.ReasoningMessageEndEvent) -> Found:
        return self._step(event, self._check_rmsg_end, self._apply_rmsg_end)

    def _check_rmsg_end(self, event: ev.ReasoningMessageEndEvent) -> Found:
        found = self._check_continue(
            _RMSG,
            event.message_id,
            event.subagent_run_id,
            "REASONING_MESSAGE_END",
            "REASONING_MESSAGE_END",
        )
        return _OK if found is None else (found,)

    def _apply_rmsg_end(self, event: ev.ReasoningMessageEndEvent) -> None:
        self._apply_close(_RMSG, event.message_id)

    def _on_encrypted_value(self, event: ev.ReasoningEncryptedValueEvent) -> Found:
        if not self._active:
            return self._gate(event)
        tag = event.subagent_run_id
        if tag is None:
            return _OK
        eid = event.entity_id
        if event.subtype == "tool-call":
            owner = self._tool_owner.get(eid, _MISSING)
            label = "tool call"
        else:  # "message": a text message or, failing that, a reasoning message
            owner = self._message_owner.get(eid, _MISSING)
            if owner is _MISSING:
                owner = self._reasoning_owner.get(eid, _MISSING)
            label = "message"
        if owner is _MISSING or owner == tag:
            return _OK
        return (
            self._mismatch(
                "REASONING_ENCRYPTED_VALUE", "REASONING_ENCRYPTED_VALUE", tag, owner, label, eid
            ),
        )

    # ------------------------------------------------------------------ steps

    def _on_step_started(self, event: ev.StepStartedEvent) -> Found:
        return self._step(event, self._check_step_started, self._apply_step_started)

    def _check_step_started(self, event: ev.StepStartedEvent) -> Found:
        owner = event.subagent_run_id
        names = self._steps.get(owner)
        if names is None or event.step_name not in names:
            return _OK
        where = "" if owner is None else f" in subagent '{owner}'"
        return (
            Violation(
                "step-already-active",
                f"Step \"{event.step_name}\" is already active for 'STEP_STARTED'{where}",
                "STEP_STARTED",
                (event.step_name,) if owner is None else (event.step_name, owner),
            ),
        )

    def _apply_step_started(self, event: ev.StepStartedEvent) -> None:
        owner, name = event.subagent_run_id, event.step_name
        names = self._steps.get(owner)
        if names is None:
            names = self._steps[owner] = {}
        names[name] = None
        holders = self._step_holders.get(name)
        if holders is None:
            holders = self._step_holders[name] = {}
        holders[owner] = None
        self._step_count += 1
        if owner is not None and self._strict:
            self._own(owner, "step", name)

    def _check_step_finished(self, event: ev.StepFinishedEvent) -> Found:
        owner, name = event.subagent_run_id, event.step_name
        names = self._steps.get(owner)
        if names is not None and name in names:
            return _OK
        for other in self._step_holders.get(name, ()):
            if other != owner:
                mine = "the parent agent" if owner is None else f"subagent '{owner}'"
                theirs = "the parent agent" if other is None else f"subagent '{other}'"
                ids = tuple(x for x in (name, owner, other) if x is not None)
                return (
                    Violation(
                        "step-owner-mismatch",
                        f"Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to "
                        f"{mine}: that step is open under {theirs}. A step must be finished "
                        "by whoever started it.",
                        "STEP_FINISHED",
                        ids,
                    ),
                )
        return (
            Violation(
                "step-not-started",
                f"Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started",
                "STEP_FINISHED",
                (name,) if owner is None else (name, owner),
            ),
        )

    def _on_step_finished(self, event: ev.StepFinishedEvent) -> Found:
        return self._step(event, self._check_step_finished, self._apply_step_finished)

    def _apply_step_finished(self, event: ev.StepFinishedEvent) -> None:
        owner, name = event.subagent_run_id, event.step_name
        del self._steps[owner][name]
        holders = self._step_holders[name]
        del holders[owner]
        if not holders:
            del self._step_holders[name]
        self._step_count -= 1
        if owner is not None and self._strict:
            self._disown(owner, "step", name)

    # ------------------------------------------------------------------ subagents

    def _on_subagent_started(self, event: ev.SubagentStartedEvent) -> Found:
        if not self._active:
            return self._gate(event)
        sid, parent = event.subagent_run_id, event.parent_subagent_run_id
        if sid in self._subagents:
            return (
                Violation(
                    "subagent-active",
                    f"Cannot send 'SUBAGENT_STARTED': subagent '{sid}' is already active. "
                    "Finish it with 'SUBAGENT_FINISHED' first.",
                    "SUBAGENT_STARTED",
                    (sid,),
                ),
            )
        if sid in self._closed_subagents:
            return (
                Violation(
                    "subagent-reused",
                    f"Cannot send 'SUBAGENT_STARTED': subagent '{sid}' has already finished in "
                    "this run. Subagent IDs are per-invocation and cannot be reused.",
                    "SUBAGENT_STARTED",
                    (sid,),
                ),
            )
        if (
            parent is not None
            and parent not in self._subagents
            and parent not in self._closed_subagents
        ):
            return (
                Violation(
                    "subagent-parent-unknown",
                    f"Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not "
                    "been started in this run.",
                    "SUBAGENT_STARTED",
                    (sid, parent),
                ),
            )
        self._subagents[sid] = parent
        if parent is not None and self._strict:
            self._own(parent, "subagent", sid)
        return _OK

    def _on_subagent_end(self, event: ev.SubagentFinishedEvent | ev.SubagentErrorEvent) -> Found:
        if not self._active:
            return self._gate(event)
        sid = event.subagent_run_id
        if self._lanes and sid in self._lanes:
            return self._with_lanes(
                event, (sid,), self._check_subagent_end, self._apply_subagent_end
            )
        found = self._check_subagent_end(event)
        if found:
            return found
        self._apply_subagent_end(event)
        return _OK

    def _check_subagent_end(
        self, event: ev.SubagentFinishedEvent | ev.SubagentErrorEvent
    ) -> Found:
        sid = event.subagent_run_id
        if sid not in self._subagents:
            etype = _type(event)
            return (
                Violation(
                    "subagent-not-active",
                    f"Cannot send '{etype}': no active subagent found with ID '{sid}'. "
                    "A 'SUBAGENT_STARTED' event must be sent first.",
                    etype,
                    (sid,),
                ),
            )
        if self._strict and isinstance(event, ev.SubagentFinishedEvent):
            owned = self._owned.get(sid)
            if owned:
                listing = ", ".join(f"{label} '{eid}'" for label, eid in owned)
                return (
                    Violation(
                        "subagent-open-at-finish",
                        f"Cannot send 'SUBAGENT_FINISHED' for subagent '{sid}' while it still "
                        f"has open: {listing}. Close them first, or end it with "
                        "'SUBAGENT_ERROR'.",
                        "SUBAGENT_FINISHED",
                        (sid, *(eid for _, eid in owned)),
                        client_checked=False,
                    ),
                )
        return _OK

    def _apply_subagent_end(self, event: ev.SubagentFinishedEvent | ev.SubagentErrorEvent) -> None:
        sid = event.subagent_run_id
        parent = self._subagents.pop(sid)
        self._closed_subagents.add(sid)
        if self._strict:
            if parent is not None:
                self._disown(parent, "subagent", sid)
            if isinstance(event, ev.SubagentFinishedEvent) and isinstance(
                event.outcome, ev.SubagentFinishedSuspendedOutcome
            ):
                self._suspended.append((sid, event.outcome.interrupt_ids or ()))

    # ------------------------------------------------------------------ state, activity, misc

    def _on_passthrough(self, event: ev.BaseEvent) -> Found:
        return self._gate(event) if not self._active else _OK

    def _on_passthrough_own_lane(
        self, event: ev.StateSnapshotEvent | ev.StateDeltaEvent | ev.CustomEvent
    ) -> Found:
        return self._step(event, _no_check, None)

    def _on_activity_snapshot(self, event: ev.ActivitySnapshotEvent) -> Found:
        if not self._active:
            return self._gate(event)
        mid = event.message_id
        if event.replace is not False or mid not in self._activity_owner:
            self._activity_owner[mid] = event.subagent_run_id
        return _OK

    def _on_activity_delta(self, event: ev.ActivityDeltaEvent) -> Found:
        if not self._active:
            return self._gate(event)
        tag = event.subagent_run_id
        if tag is None:
            return _OK
        mid = event.message_id
        owner = self._activity_owner.get(mid, _MISSING)
        if owner is _MISSING or owner == tag:
            return _OK
        return (self._mismatch("ACTIVITY_DELTA", "ACTIVITY_DELTA", tag, owner, "activity", mid),)

    def _on_messages_snapshot(self, event: ev.MessagesSnapshotEvent) -> Found:
        if not self._active:
            return self._gate(event)
        if self._lanes:
            return self._with_lanes(event, tuple(self._lanes), _no_check, self._apply_snapshot)
        self._apply_snapshot(event)
        return _OK

    def _apply_snapshot(self, event: ev.MessagesSnapshotEvent) -> None:
        self._seed(event.messages, authoritative=True)

    def _seed(self, messages: Iterable[ev.Message], *, authoritative: bool) -> None:
        """Record the owners of replayed messages and of their tool calls."""
        for message in messages:
            if isinstance(message, ev.ReasoningMessage):
                bucket = self._reasoning_owner
            elif isinstance(message, ev.ActivityMessage):
                bucket = self._activity_owner
            else:
                bucket = self._message_owner
            owner = message.subagent_run_id
            if authoritative or message.id not in bucket:
                bucket[message.id] = owner
            if isinstance(message, ev.AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    if authoritative or call.id not in self._tool_owner:
                        self._tool_owner[call.id] = owner

    # ------------------------------------------------------------------ runs

    def _on_run_started(self, event: ev.RunStartedEvent) -> Found:
        if self._active:
            return (
                Violation(
                    "run-already-active",
                    "Cannot send 'RUN_STARTED' while a run is still active. The previous run "
                    "must be finished with 'RUN_FINISHED' before starting a new run.",
                    "RUN_STARTED",
                    (event.run_id,),
                ),
            )
        if self._finished or self._errored:
            self._reset()
        self._first = self._started = self._active = True
        self._finished = self._errored = False
        self._thread_id, self._run_id = event.thread_id, event.run_id
        if event.input is not None:
            self._seed(event.input.messages, authoritative=False)
        return _OK

    def _reset(self) -> None:
        for opened in self._open:
            opened.clear()
        for owners in (
            self._message_owner,
            self._tool_owner,
            self._reasoning_owner,
            self._activity_owner,
        ):
            owners.clear()
        self._steps = {}
        self._step_holders = {}
        self._step_count = 0
        self._subagents = {}
        self._closed_subagents = set()
        self._owned = {}
        self._suspended = []

    def _on_run_error(self, event: ev.RunErrorEvent) -> Found:
        if self._errored:
            return self._gate(event)
        if self._lanes:
            return self._with_lanes(event, tuple(self._lanes), _no_check, self._apply_run_error)
        self._apply_run_error(event)
        return _OK

    def _apply_run_error(self, _: ev.RunErrorEvent) -> None:
        self._first = self._errored = True
        self._active = False

    def _on_run_finished(self, event: ev.RunFinishedEvent) -> Found:
        if not self._active:
            return self._gate(event)
        if self._lanes:
            return self._with_lanes(
                event, tuple(self._lanes), self._check_run_finished, self._apply_run_finished
            )
        found = self._check_run_finished(event)
        if found:
            return found
        self._apply_run_finished(event)
        return _OK

    def _apply_run_finished(self, _: ev.RunFinishedEvent) -> None:
        self._finished = True
        self._active = False

    def _check_run_finished(self, event: ev.RunFinishedEvent) -> Found:
        found: list[Violation] = []
        still_open = self._still_open()
        if still_open is not None:
            found.append(still_open)
        if self._strict:
            found.extend(self._check_run_finished_strict(event))
        return tuple(found)

    def _still_open(self) -> Violation | None:
        """The client's check that nothing is open at RUN_FINISHED, in its order."""
        if self._step_count:
            parts = [
                name if owner is None else f"{name} (subagent '{owner}')"
                for owner, names in self._steps.items()
                for name in names
            ]
            return _open_at_finish(
                "steps", parts, [n for names in self._steps.values() for n in names]
            )
        for kind, what in _RUN_FINISHED_ORDER:
            if self._open[kind]:
                ids = list(self._open[kind])
                return _open_at_finish(what, ids, ids)
        if self._subagents:
            ids = list(self._subagents)
            return _open_at_finish("subagents", ids, ids)
        return None

    def _check_run_finished_strict(self, event: ev.RunFinishedEvent) -> list[Violation]:
        found: list[Violation] = []
        if event.thread_id != self._thread_id or event.run_id != self._run_id:
            found.append(
                Violation(
                    "run-id-mismatch",
                    f"Cannot send 'RUN_FINISHED' with threadId '{event.thread_id}' and runId "
                    f"'{event.run_id}': the run started with threadId '{self._thread_id}' and "
                    f"runId '{self._run_id}'.",
                    "RUN_FINISHED",
                    (event.thread_id, event.run_id, self._thread_id, self._run_id),
                    client_checked=False,
                )
            )
        outcome = event.outcome
        raised: dict[str, Owner] = {}
        if isinstance(outcome, ev.RunFinishedInterruptOutcome):
            for interrupt in outcome.interrupts:
                if interrupt.id in raised:
                    found.append(
                        Violation(
                            "interrupt-id-duplicate",
                            f"Cannot send 'RUN_FINISHED': interrupt id '{interrupt.id}' appears "
                            "more than once. Interrupt ids are unique within a run.",
                            "RUN_FINISHED",
                            (interrupt.id,),
                            client_checked=False,
                        )
                    )
                else:
                    raised[interrupt.id] = interrupt.subagent_run_id
        if self._suspended and not isinstance(outcome, ev.RunFinishedInterruptOutcome):
            sids = tuple(sid for sid, _ in self._suspended)
            listing = ", ".join(f"'{sid}'" for sid in sids)
            kind = "success" if outcome is None else outcome.type
            found.append(
                Violation(
                    "suspended-without-interrupt",
                    f"Cannot send 'RUN_FINISHED' with a '{kind}' outcome: subagent(s) {listing} "
                    "finished suspended, so the run must finish with an 'interrupt' outcome.",
                    "RUN_FINISHED",
                    sids,
                    client_checked=False,
                )
            )
        elif self._suspended:
            for sid, interrupt_ids in self._suspended:
                for iid in interrupt_ids:
                    owner = raised.get(iid, _MISSING)
                    if owner is _MISSING:
                        found.append(
                            Violation(
                                "suspended-interrupt-unknown",
                                f"Cannot send 'RUN_FINISHED': subagent '{sid}' finished "
                                f"suspended on interrupt '{iid}', which the interrupt outcome "
                                "does not contain.",
                                "RUN_FINISHED",
                                (sid, iid),
                                client_checked=False,
                            )
                        )
                    elif owner != sid:
                        found.append(
                            Violation(
                                "suspended-interrupt-owner",
                                f"Cannot send 'RUN_FINISHED': subagent '{sid}' finished "
                                f"suspended on interrupt '{iid}', but that interrupt is "
                                f"attributed to '{_who(owner)}'. A subagent lists only the "
                                "interrupts it raised itself.",
                                "RUN_FINISHED",
                                (sid, iid),
                                client_checked=False,
                            )
                        )
        return found

    # ------------------------------------------------------------------ chunks

    def _resolve_lane(self, kind: str, eid: str | None, tag: Owner) -> Owner:
        """Pick the lane a chunk belongs to, as the client does."""
        if eid is not None:
            holder = self._lane_of_entity.get((kind, eid), _MISSING)
            if holder is _MISSING:
                return tag  # an id nobody holds opens a new stream in its tag's lane
            if tag is not None and tag != holder:
                raise _Rejected(
                    (
                        Violation(
                            "chunk-lane-mismatch",
                            f"Cannot continue {_CHUNK_ENTITY[kind]} '{eid}': chunk "
                            f"subagentRunId '{tag}' does not match the open stream's subagent "
                            f"'{_who(holder)}'.",
                            _CHUNK_TYPE[kind],
                            (eid, tag) if holder is None else (eid, tag, holder),
                        ),
                    )
                )
            return holder
        if tag is not None:
            return tag
        parent = self._lanes.get(None)
        if parent is not None and parent.kind == kind:
            return None
        candidates = self._lanes_by_kind[kind]
        if len(candidates) == 1:
            return next(iter(candidates))
        if len(candidates) > 1:
            raise _Rejected(
                (
                    Violation(
                        "chunk-ambiguous",
                        f"Ambiguous {_CHUNK_TYPE[kind]}: it carries neither a "
                        f"{_CHUNK_ID_FIELD[kind]} nor a subagentRunId, but {len(candidates)} "
                        f"lanes have an open {_CHUNK_ENTITY[kind]}. Attribute the chunk to "
                        "the subagent it belongs to.",
                        _CHUNK_TYPE[kind],
                        # Two of the lanes show the ambiguity; listing all is O(lanes).
                        tuple(o for o in islice(candidates, 2) if o is not None),
                    ),
                )
            )
        return None

    @staticmethod
    def _agree(kind: str, eid: str, field: str, incoming: str | None, known: str | None) -> None:
        if incoming is not None and incoming != known:
            shown = "(absent)" if known is None else f"'{known}'"
            raise _Rejected(
                (
                    Violation(
                        "chunk-field-mismatch",
                        f"Cannot continue {_CHUNK_ENTITY[kind]} '{eid}': chunk {field} "
                        f"'{incoming}' does not match the open stream's {field} {shown}.",
                        _CHUNK_TYPE[kind],
                        (eid,),
                    ),
                )
            )

    def _on_text_chunk(self, event: ev.TextMessageChunkEvent) -> Found:
        return self._chunk(event, _LANE_TEXT, event.message_id)

    def _on_tool_chunk(self, event: ev.ToolCallChunkEvent) -> Found:
        return self._chunk(event, _LANE_TOOL, event.tool_call_id)

    def _on_reasoning_chunk(self, event: ev.ReasoningMessageChunkEvent) -> Found:
        return self._chunk(event, _LANE_REASONING, event.message_id)

    def _chunk(
        self,
        event: ev.TextMessageChunkEvent | ev.ToolCallChunkEvent | ev.ReasoningMessageChunkEvent,
        kind: str,
        eid: str | None,
    ) -> Found:
        """Expand a chunk as the client's transformChunks does, then verify the result."""
        tag = event.subagent_run_id
        try:
            lane_key = self._resolve_lane(kind, eid, tag)
            current = self._lanes.get(lane_key)
            continues = (
                current is not None
                and current.kind == kind
                and (eid is None or eid == current.entity_id)
            )
            if continues:
                assert current is not None
                self._check_chunk_agreement(event, current)
                lane, new_lane = current, None
            else:
                if eid is None:
                    field = _CHUNK_ID_FIELD[kind]
                    raise _Rejected(
                        (
                            Violation(
                                "chunk-missing-id",
                                f"First {_CHUNK_TYPE[kind]} must have a {field}",
                                _CHUNK_TYPE[kind],
                            ),
                        )
                    )
                lane = new_lane = self._new_lane(event, kind, eid)
        except _Rejected as rejected:
            return rejected.found
        content = event.delta is not None or event.raw_event is not None
        if continues and not content and event.metadata is None:
            return _OK  # expands to nothing
        if not self._active:
            return self._gate(event)
        return self._expand(event, lane, current if new_lane else None, new_lane)

    def _check_chunk_agreement(
        self,
        event: ev.TextMessageChunkEvent | ev.ToolCallChunkEvent | ev.ReasoningMessageChunkEvent,
        lane: _Lane,
    ) -> None:
        if isinstance(event, ev.TextMessageChunkEvent):
            self._agree(lane.kind, lane.entity_id, "role", event.role, lane.role)
            self._agree(lane.kind, lane.entity_id, "name", event.name, lane.name)
        elif isinstance(event, ev.ToolCallChunkEvent):
            self._agree(lane.kind, lane.entity_id, "toolCallName", event.tool_call_name, lane.name)
            self._agree(
                lane.kind,
                lane.entity_id,
                "parentMessageId",
                event.parent_message_id,
                lane.parent_message_id,
            )

    @staticmethod
    def _new_lane(
        event: ev.TextMessageChunkEvent | ev.ToolCallChunkEvent | ev.ReasoningMessageChunkEvent,
        kind: str,
        eid: str,
    ) -> _Lane:
        tag = event.subagent_run_id
        if isinstance(event, ev.TextMessageChunkEvent):
            return _Lane(kind, eid, tag, role=event.role or "assistant", name=event.name)
        if isinstance(event, ev.ToolCallChunkEvent):
            if event.tool_call_name is None:
                raise _Rejected(
                    (
                        Violation(
                            "chunk-missing-name",
                            "First TOOL_CALL_CHUNK must have a toolCallName",
                            "TOOL_CALL_CHUNK",
                            (eid,),
                        ),
                    )
                )
            return _Lane(
                kind,
                eid,
                tag,
                name=event.tool_call_name,
                parent_message_id=event.parent_message_id,
            )
        return _Lane(kind, eid, tag)

    def _expand(
        self,
        event: ev.TextMessageChunkEvent | ev.ToolCallChunkEvent | ev.ReasoningMessageChunkEvent,
        lane: _Lane,
        closing: _Lane | None,
        new_lane: _Lane | None,
    ) -> Found:
        """Verify the END/START/CONTENT events a chunk expands into, all or nothing."""
        etype = _type(event)
        kind = _LANE_KIND[lane.kind]
        undos: list[Undo] = []

        def fail(found: Violation) -> Found:
            for undo in reversed(undos):
                undo()
            return (found,)

        if closing is not None:
            found, undo = self._lane_end(closing, etype)
            if found is not None:
                return fail(found)
            assert undo is not None
            undos.append(undo)
        eid, tag = lane.entity_id, event.subagent_run_id
        if new_lane is not None:
            if kind == _TOOL:
                started = self._check_tool_open(eid, tag, lane.parent_message_id, etype)
            else:
                started = self._check_open(kind, eid, tag, etype)
            if started is not None:
                return fail(_synthesized(started, _START[kind], etype))
            if kind == _TOOL:
                created = self._apply_tool_open(eid, tag, lane.parent_message_id)
            else:
                created = self._owners[kind].get(eid, _MISSING) is _MISSING
                self._apply_open(kind, eid, tag)
            undos.append(lambda: self._undo_open(kind, eid, created))
        # A CONTENT/ARGS for the delta, the raw event, or (on a continuation) metadata.
        if (
            getattr(event, "delta", None) is not None
            or event.raw_event is not None
            or (new_lane is None and event.metadata is not None)
        ):
            shown = _CONTENT[kind]
            owner = tag if tag is not None else lane.owner
            found = self._check_continue(kind, eid, owner, etype, shown)
            if found is not None:
                return fail(_synthesized(found, shown, etype))
        if closing is not None:
            self._drop_lane(closing.owner)
        if new_lane is not None:
            self._add_lane(new_lane)
        return _OK


def _no_check(_: object) -> Found:
    return _OK


def _open_at_finish(what: str, parts: list[str], ids: list[str]) -> Violation:
    return Violation(
        "open-at-run-finished",
        f"Cannot send 'RUN_FINISHED' while {what} are still active: {', '.join(parts)}",
        "RUN_FINISHED",
        tuple(ids),
    )


def _synthesized(found: Violation, shown: str, chunk_type: str) -> Violation:
    note = f" (the client expands this {chunk_type} into '{shown}')"
    return attrs.evolve(found, message=found.message + note)


def assert_valid(
    events: Iterable[ev.BaseEvent | Mapping[str, Any]], *, strict: bool = True
) -> None:
    """
    Assert that *events* form a valid AG-UI 1.0 stream.

    Meant for tests: ``assert_valid(captured)``. Wire-form dicts (camelCase, as
    sent) are parsed first; one that does not parse is reported as a problem at
    its index.

    Args:
        events: Event objects or their wire-form dicts, in stream order.
        strict: Also check the specification's rules the official client does not
            (see `Verifier`).

    Raises:
        AssertionError: Lists every violation, each with the index of its event.

    .. versionadded:: 0.1.0
    """
    from ambient_runs._wire import from_wire

    verifier = Verifier(strict=strict)
    problems: list[str] = []
    count = 0
    for index, item in enumerate(events):
        count += 1
        if isinstance(item, Mapping):
            try:
                item = from_wire(dict(item))
            except InvalidInputError as exc:
                problems.append(f"  [{index}] invalid-event: {exc}")
                continue
        for violation in verifier.feed(cast(ev.Event, item)):
            problems.append(
                f"  [{index}] {violation.event_type} {violation.rule}: {violation.message}"
            )
    if problems:
        header = f"{len(problems)} AG-UI violation(s) in {count} events:"
        raise AssertionError("\n".join((header, *problems)))
