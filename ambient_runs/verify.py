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
- ``pending-tool-call-unknown``, ``pending-tool-call-answered`` and
  ``pending-tool-call-duplicate``: a success outcome's ``pendingToolCallIds``
  "agrees with the stream": each names, once, a tool call this run started
  and did not answer with TOOL_CALL_RESULT (frontend tool calls).
- ``suspended-without-interrupt``, ``suspended-interrupt-unknown`` and
  ``suspended-interrupt-owner``: checked at RUN_FINISHED, when the interrupts
  are known. A subagent that finished ``suspended`` in this run requires the
  run to end with an ``interrupt`` outcome, and each of its ``interruptIds``
  must name an interrupt of that outcome which the subagent raised itself
  (``Interrupt.subagentRunId`` equal to its id). A run ending in RUN_ERROR is
  not checked.
- ``interrupt-subagent-unknown``: an interrupt's ``subagentRunId`` names a
  subagent started in this run (a UI would place it under a lane that never
  existed).
- ``tool-call-parent-role``: TOOL_CALL_START's ``parentMessageId`` must not
  name a user, system, developer or tool message (from the input, a
  MESSAGES_SNAPSHOT, a TEXT_MESSAGE_START's ``role`` or a TOOL_CALL_RESULT):
  the client would warn and put the call in a new assistant message instead.
- ``message-id-kind-clash``: an activity and a text or reasoning message never
  share an id, in either order; the client drops the text's events, or lets an
  activity snapshot overwrite the message.

Chunk events (``*_CHUNK``) are checked as the client expands them, in both
modes: the library never emits them, but users can emit raw ones. One
consequence is mirrored on purpose: an event that closes a chunk lane (see
`RULES` ``chunk-*``) is rejected when the synthesized ``*_END`` is, which
happens only if the chunk-opened entity was already closed explicitly from
another lane; RUN_ERROR is then refused too.

Every event costs O(1), whatever the length of the stream and the number of
open entities and subagents, with three exceptions: RUN_FINISHED, RUN_ERROR and
MESSAGES_SNAPSHOT close every open chunk lane (one per owner that streams
chunks); RUN_FINISHED lists what is still open when it refuses; and seeding
from messages is linear in their number.

How it is built, tables first (as h11's ``_state.py``): the rules, each with
its message template and whether the client checks it, are one table
(``_verify_rules``); the kinds of entity with an open/continue/close
lifecycle and the groups that check them (text messages, tool calls,
reasoning, steps, subagents) are ``_verify_entities``; the chunk expansion is
a stage of its own (``_verify_lanes``), as it is in the client. This module
is the driver: the `_Lifecycle` of the stream's runs, and two dispatch tables,
one for an active run (each event class to the generic handler of its group,
or to its own) and one for the states between runs, where every event but a
run's start or error meets the gate. Which table `Verifier.feed` uses changes
with the lifecycle, so the gate is done once, in dispatch, not in each
handler. The tables are written once (``Verifier._tables``) and read as specs
per class of verifier; each verifier binds an entry on the first event of its
class, so an open run's verifier holds only the handlers its stream has used.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast

from ambient_runs import events as ev
from ambient_runs._verify_entities import (
    MISSING,
    NOT_ASSISTANT,
    REASONING_MESSAGE,
    REASONING_SPAN,
    TEXT,
    Entities,
    Messages,
    Owned,
    Steps,
    Subagents,
    ToolCalls,
    mismatch,
)
from ambient_runs._verify_lanes import STREAMS, Check, Lanes
from ambient_runs._verify_rules import (
    OK,
    RULES,
    SPEC_ONLY_RULES,
    Found,
    Owner,
    Rule,
    Violation,
    no_apply,
    no_check,
)
from ambient_runs.errors import InvalidInputError, ProtocolError

__all__ = (
    "RULES",
    "SPEC_ONLY_RULES",
    "Verifier",
    "Violation",
    "assert_valid",
)


class _Lifecycle(enum.Enum):
    """Where a stream is in the lifecycle of its runs (several runs may share a stream)."""

    #: Nothing accepted yet: only RUN_STARTED or RUN_ERROR may come.
    NEW = enum.auto()
    #: Between RUN_STARTED and its RUN_FINISHED or RUN_ERROR: every event may come.
    ACTIVE = enum.auto()
    #: After RUN_FINISHED: only RUN_STARTED or RUN_ERROR may come.
    FINISHED = enum.auto()
    #: After RUN_ERROR: only RUN_STARTED may come.
    ERRORED = enum.auto()


#: The rule refusing an event that a state between runs does not take (the gate), worded
#: as the client does. In an active run only RUN_STARTED is refused (run-already-active).
_GATE: Final = {
    _Lifecycle.NEW: Rule.FIRST_EVENT,
    _Lifecycle.FINISHED: Rule.AFTER_RUN_FINISHED,
    _Lifecycle.ERRORED: Rule.AFTER_RUN_ERROR,
}


class _Gated(dict[type[Any], Check]):
    """The dispatch table between runs, as written: any event class it lacks meets *gate*."""

    __slots__ = ("gate",)
    gate: Check


_EVENT_CLASSES: Final = frozenset(ev.EVENT_CLASSES.values())
_NO_TOOL_CALLS: Final[frozenset[str]] = frozenset()  # shared by every verifier without any

#: Reads one dispatch entry's handler off a verifier (its own method, or a part's).
_Where = Callable[["Verifier"], Check]


def _where(verifier: Verifier, handler: Check) -> _Where:
    """Where *handler*, an entry of *verifier*'s tables, is found from any verifier."""
    owner = getattr(handler, "__self__", None)
    if owner is None:  # a plain function: the same for every verifier
        return lambda _: handler
    name = getattr(getattr(handler, "__func__", None), "__name__", "")
    path = name if owner is verifier else None
    for attribute, value in vars(verifier).items():
        if path is None and value is owner:  # a method of one of the verifier's parts
            path = f"{attribute}.{name}"
    if path is None or getattr(owner, name, None) != handler:
        msg = f"a dispatch entry is a function or a method of the verifier or a part: {handler!r}"
        raise TypeError(msg)
    return cast(_Where, operator.attrgetter(path))


#: Per *strict*: the dispatch specs of an active run and of the states between runs, and
#: the gate's; read off the first verifier made with that *strict* (`_specs`).
_SPECS: Final[dict[bool, tuple[dict[type[Any], _Where], dict[type[Any], _Where], _Where]]] = {}


def _specs(verifier: Verifier) -> tuple[dict[type[Any], _Where], dict[type[Any], _Where], _Where]:
    """The dispatch specs *verifier*'s tables (`Verifier._tables`) describe."""
    active, idle = verifier._tables()
    return (
        {cls: _where(verifier, handler) for cls, handler in active.items()},
        {cls: _where(verifier, handler) for cls, handler in idle.items()},
        _where(verifier, idle.gate),
    )


def _not_an_event(obj: object) -> TypeError:
    return TypeError(f"expected an AG-UI event object, got {type(obj).__name__}")


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
        history: The messages the client holds before this stream (a run's
            input messages, when RUN_STARTED does not echo them): a tool call
            may not name one of its user, system, developer or tool messages as
            its parent. Only used by *strict*.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        strict: bool = True,
        known_tool_call_ids: Iterable[str] = (),
        history: Sequence[ev.Message] = (),
    ) -> None:
        self._strict = strict
        self._life = _Lifecycle.NEW

        # Per run: the owners on record, per entity kind (spans and reasoning messages share).
        self._message_owner: dict[str, Owner] = {}
        self._tool_owner: dict[str, Owner] = {}
        self._reasoning_owner: dict[str, Owner] = {}
        self._activity_owner: dict[str, Owner] = {}
        # Per run, strict: the roles of the messages that are not the assistant's.
        self._roles: dict[str, str] = {}
        # Per run: what is open, by group; in strict mode, by owning subagent too.
        self._owned = owned = Owned()
        self._lanes = lanes = Lanes()  # the chunk stage; its lanes close at every run boundary
        activities, roles = self._activity_owner, self._roles
        self._text = Messages(
            TEXT,
            self._message_owner,
            owned,
            lanes,
            strict=strict,
            activities=activities,
            roles=roles,
        )
        self._tools = ToolCalls(
            self._tool_owner,
            self._message_owner,
            owned,
            lanes,
            strict=strict,
            known=frozenset(known_tool_call_ids) or _NO_TOOL_CALLS,
            roles=roles,
            history=history,
        )
        self._spans = Entities(REASONING_SPAN, self._reasoning_owner, owned, lanes, strict=strict)
        self._rmsgs = Messages(
            REASONING_MESSAGE,
            self._reasoning_owner,
            owned,
            lanes,
            strict=strict,
            activities=activities,
            roles=roles,
        )
        lanes.route(text=self._text, tools=self._tools, reasoning=self._rmsgs)
        self._steps = Steps(owned, lanes, strict=strict)
        self._subagents = Subagents(owned, lanes, strict=strict)
        # Per run, strict: the ids RUN_FINISHED must repeat.
        self._thread_id = ""
        self._run_id = ""

        if strict not in _SPECS:
            _SPECS[strict] = _specs(self)
        self._dispatch: dict[type[Any], Check]
        self._enter(_Lifecycle.NEW)

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
            handler = self._bind(event)
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
            handler = self._bind(event)
        found = handler(event)
        if found:
            first = found[0]
            raise ProtocolError(first.message, rule=first.rule, violations=found)

    def content_view(self) -> Any:
        """
        The state of the run's text messages, for a check done by construction.

        ``_verify_entities.Messages``: the byte path (``MessageHandle.write``)
        reads its ``opened``, ``owners`` and ``lane_owners`` to accept a delta
        exactly when `check` would (``Entities.on_continue``'s fast case) and
        sends the event as an object, through `check`, otherwise. Package-internal.
        """
        return self._text

    def subagent_view(self) -> Any:
        """
        The state of the run's subagents, kept by construction.

        ``_verify_entities.Subagents``: the byte path of a decorated subagent
        call (``ambient_runs._subagent``) asks its ``open_minted`` and
        ``close_plain`` to accept and apply SUBAGENT_STARTED and
        SUBAGENT_FINISHED exactly when `check` would, and sends the event as an
        object, through `check`, otherwise. Package-internal.
        """
        return self._subagents

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

    # ------------------------------------------------------------------ dispatch

    def _tables(self) -> tuple[dict[type[Any], Check], _Gated]:
        """The dispatch tables of an active run and of the states between runs."""
        text, tools, spans, rmsgs = self._text, self._tools, self._spans, self._rmsgs
        steps, subagents, lanes = self._steps, self._subagents, self._lanes
        active: dict[type[Any], Check] = {
            # What opens, continues and closes an entity, a step or a subagent: the
            # generic handlers of its group (`Group.on_open`, `Group.on_close`).
            ev.TextMessageStartEvent: text.on_open,
            ev.TextMessageContentEvent: text.on_continue,
            ev.TextMessageEndEvent: text.on_close,
            ev.ToolCallStartEvent: tools.on_open,
            ev.ToolCallArgsEvent: tools.on_continue,
            ev.ToolCallEndEvent: tools.on_close,
            ev.ReasoningStartEvent: spans.on_open,
            ev.ReasoningEndEvent: spans.on_close,
            ev.ReasoningMessageStartEvent: rmsgs.on_open,
            ev.ReasoningMessageContentEvent: rmsgs.on_continue,
            ev.ReasoningMessageEndEvent: rmsgs.on_close,
            ev.StepStartedEvent: steps.on_open,
            ev.StepFinishedEvent: steps.on_close,
            ev.SubagentStartedEvent: subagents.on_open,
            ev.SubagentFinishedEvent: subagents.on_close,
            ev.SubagentErrorEvent: subagents.on_close,
            # Chunks: the chunk stage expands them.
            ev.TextMessageChunkEvent: lanes.chunk,
            ev.ToolCallChunkEvent: lanes.chunk,
            ev.ReasoningMessageChunkEvent: lanes.chunk,
            # The rest.
            ev.ToolCallResultEvent: self._on_tool_result,
            ev.StateSnapshotEvent: self._on_own_lane,
            ev.StateDeltaEvent: self._on_own_lane,
            ev.CustomEvent: self._on_own_lane,
            ev.RawEvent: no_check,
            ev.MessagesSnapshotEvent: self._on_messages_snapshot,
            ev.ActivitySnapshotEvent: self._on_activity_snapshot,
            ev.ActivityDeltaEvent: self._check_activity,
            ev.ReasoningEncryptedValueEvent: self._check_encrypted,
            ev.RunStartedEvent: self._refuse_run_started,
            ev.RunFinishedEvent: self._on_run_finished,
            ev.RunErrorEvent: self._on_run_error,
        }
        # Between runs all but a run's start or error meets the gate, here and only here.
        idle = _Gated()
        idle.gate = self._gate
        idle[ev.RunStartedEvent] = self._start_run
        idle[ev.RunErrorEvent] = self._error_outside_run
        idle.update(dict.fromkeys(STREAMS, self._chunk_outside_run))
        return active, idle

    def _enter(self, life: _Lifecycle) -> None:
        self._life = life
        self._dispatch = {}  # the new state's table, bound on first use of each class

    def _bind(self, event: object) -> Check:
        """Bind the current state's handler of *event*'s class into the table, and return it."""
        cls = type(event)
        active, idle, gate = _SPECS[self._strict]
        where = active.get(cls) if self._life is _Lifecycle.ACTIVE else idle.get(cls, gate)
        if where is None or cls not in _EVENT_CLASSES:
            raise _not_an_event(event) from None
        handler = self._dispatch[cls] = where(self)
        return handler

    def _gate(self, event: ev.BaseEvent) -> Found:
        """Refuse an event the current lifecycle state does not take, as the client words it."""
        etype = event.TYPE.value
        return (_GATE[self._life](etype, etype=etype),)

    def _chunk_outside_run(self, event: Any) -> Found:
        # A chunk's own first-chunk rules come before the gate, as in the client's stages.
        return self._lanes.outside_run(event) or self._gate(event)

    # ------------------------------------------------------------------ runs

    def _start_run(self, event: ev.RunStartedEvent) -> Found:
        if self._life is not _Lifecycle.NEW:
            self._reset()
        self._enter(_Lifecycle.ACTIVE)
        self._thread_id, self._run_id = event.thread_id, event.run_id
        self._subagents.begin(event.run_id)  # the ids the run mints start with it
        if event.input is not None:
            self._seed(event.input.messages, authoritative=False)
        return OK

    def _refuse_run_started(self, event: ev.RunStartedEvent) -> Found:
        return (Rule.RUN_ALREADY_ACTIVE("RUN_STARTED", (event.run_id,)),)

    def _reset(self) -> None:
        for records in (
            self._text.opened,
            self._tools.opened,
            self._spans.opened,
            self._rmsgs.opened,
            self._message_owner,
            self._tool_owner,
            self._reasoning_owner,
            self._activity_owner,
            self._roles,
            self._owned,
        ):
            records.clear()
        self._steps.clear()
        self._subagents.clear()
        self._tools.forget_run()

    def _on_run_finished(self, event: ev.RunFinishedEvent) -> Found:
        return self._lanes.after_all(event, self._check_run_finished, self._apply_run_finished)

    def _on_run_error(self, event: ev.RunErrorEvent) -> Found:
        return self._lanes.after_all(event, no_check, self._apply_run_error)

    def _error_outside_run(self, event: ev.RunErrorEvent) -> Found:
        if self._life is _Lifecycle.ERRORED:
            return self._gate(event)
        self._apply_run_error(event)
        return OK

    def _apply_run_error(self, _: ev.RunErrorEvent) -> None:
        self._enter(_Lifecycle.ERRORED)

    def _apply_run_finished(self, _: ev.RunFinishedEvent) -> None:
        self._enter(_Lifecycle.FINISHED)

    def _check_run_finished(self, event: ev.RunFinishedEvent) -> Found:
        found: list[Violation] = []
        still_open = self._still_open()
        if still_open is not None:
            found.append(still_open)
        if self._strict:
            if event.thread_id != self._thread_id or event.run_id != self._run_id:
                found.append(
                    Rule.RUN_ID_MISMATCH(
                        "RUN_FINISHED",
                        (event.thread_id, event.run_id, self._thread_id, self._run_id),
                        thread_id=event.thread_id,
                        run_id=event.run_id,
                        started_thread_id=self._thread_id,
                        started_run_id=self._run_id,
                    )
                )
            outcome = event.outcome
            if outcome is not None or self._subagents.suspended:
                found.extend(self._subagents.check_suspensions(outcome))
            if isinstance(outcome, ev.RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
                found.extend(self._tools.check_pending(outcome.pending_tool_call_ids))
        return tuple(found)

    def _still_open(self) -> Violation | None:
        """The client's check that nothing is open at RUN_FINISHED, in its order."""
        if self._steps.count:
            parts, names = self._steps.still_open()
            return _open_at_finish("steps", parts, names)
        for group in (self._text, self._rmsgs, self._spans, self._tools):  # the client's order
            if group.opened:
                ids = list(group.opened)
                return _open_at_finish(group.kind.plural, ids, ids)
        if self._subagents.active:
            ids = list(self._subagents.active)
            return _open_at_finish("subagents", ids, ids)
        return None

    # ------------------------------------------------------------------ the rest

    def _on_tool_result(self, event: ev.ToolCallResultEvent) -> Found:
        check = self._tools.check_result if self._strict else no_check
        return self._lanes.in_own_lane(event, check, self._tools.apply_result)

    def _on_own_lane(self, event: ev.BaseEvent) -> Found:
        # STATE_SNAPSHOT, STATE_DELTA, CUSTOM: valid in any active run, after their lane closes.
        return self._lanes.in_own_lane(event, no_check, no_apply)

    def _on_messages_snapshot(self, event: ev.MessagesSnapshotEvent) -> Found:
        return self._lanes.after_all(event, no_check, self._apply_snapshot)

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
                if self._strict and bucket is self._message_owner:
                    if message.role in NOT_ASSISTANT:
                        self._roles[message.id] = message.role
                    else:
                        self._roles.pop(message.id, None)
            if isinstance(message, ev.AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    if authoritative or call.id not in self._tool_owner:
                        self._tool_owner[call.id] = owner

    def _on_activity_snapshot(self, event: ev.ActivitySnapshotEvent) -> Found:
        mid = event.message_id
        if self._strict:
            found = self._kind_clash(event)
            if found:
                return found
        if event.replace is not False or mid not in self._activity_owner:
            self._activity_owner[mid] = event.subagent_run_id
        return OK

    def _check_activity(self, event: ev.ActivityDeltaEvent) -> Found:
        if self._strict:
            found = self._kind_clash(event)
            if found:
                return found
        tag = event.subagent_run_id
        if tag is None:
            return OK
        mid = event.message_id
        owner = self._activity_owner.get(mid, MISSING)
        if owner is MISSING or owner == tag:
            return OK
        return (mismatch("ACTIVITY_DELTA", "ACTIVITY_DELTA", tag, owner, "activity", mid),)

    def _kind_clash(self, event: ev.ActivitySnapshotEvent | ev.ActivityDeltaEvent) -> Found:
        """Strict: an activity may not take the id of a text or reasoning message."""
        mid = event.message_id
        if mid in self._message_owner:
            other = "a message"
        elif mid in self._reasoning_owner:
            other = "a reasoning message"
        else:
            return OK
        etype = event.TYPE.value
        return (
            Rule.MESSAGE_ID_KIND_CLASH(
                etype, (mid,), etype=etype, mid=mid, other=other, what="activity"
            ),
        )

    def _check_encrypted(self, event: ev.ReasoningEncryptedValueEvent) -> Found:
        tag = event.subagent_run_id
        if tag is None:
            return OK
        eid = event.entity_id
        if event.subtype == "tool-call":
            owner = self._tool_owner.get(eid, MISSING)
            label = "tool call"
        else:  # "message": a text message or, failing that, a reasoning message
            owner = self._message_owner.get(eid, MISSING)
            if owner is MISSING:
                owner = self._reasoning_owner.get(eid, MISSING)
            label = "message"
        if owner is MISSING or owner == tag:
            return OK
        etype = "REASONING_ENCRYPTED_VALUE"
        return (mismatch(etype, etype, tag, owner, label, eid),)


def _open_at_finish(what: str, parts: list[str], ids: list[str]) -> Violation:
    # str(): an event altered after construction may hold a non-string id.
    return Rule.OPEN_AT_RUN_FINISHED(
        "RUN_FINISHED", tuple(ids), what=what, listing=", ".join(map(str, parts))
    )


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
