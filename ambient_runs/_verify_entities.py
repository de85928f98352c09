"""
What a run opens and closes, for the verifier: entities of each kind, steps, subagents.

Tables first: `Kind` describes each entity kind with an open/continue/close
lifecycle (text messages, tool calls, reasoning spans and reasoning
messages): its wire event names and the rules that refuse a bad opener or
continuation. One generic group, `Entities`, serves every kind; `ToolCalls`
adds the special cases of tool calls (a parent message's owner, results)
beside it. `Steps` and `Subagents` keep steps and subagents.

Every group is a `Group`, with two faces:

- per event, for the verifier's dispatch: the generic handlers
  ``on_open``/``on_close`` (the event passes the chunk stage, then is checked,
  then applied only if accepted) over the group's ``check_open``/``apply_open``
  and ``check_close``/``apply_close``, and, for entity kinds, ``on_continue``,
  the hot path of CONTENT and ARGS events;
- per id, for the chunk stage (`ambient_runs._verify_lanes`), which checks the
  events a chunk expands into and rolls them back when one is refused:
  ``open_problem``/``open``/``unopen`` and ``continue_problem``/``close``/
  ``reopen``.

An entity belongs to the owner recorded when it was first opened in the run
(the first writer wins); the record outlives the entity, so a tagged
continuation or re-opener must agree with it. In strict mode each subagent's
open entities, steps and children are kept in an `Owned` ledger, which
SUBAGENT_FINISHED requires to be empty.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from ambient_runs import events as ev
from ambient_runs._verify_rules import OK, Found, Owner, Rule, Violation, no_apply, who

if TYPE_CHECKING:
    from ambient_runs._verify_lanes import Lanes

__all__ = (
    "MISSING",
    "NOT_ASSISTANT",
    "REASONING_MESSAGE",
    "REASONING_SPAN",
    "TEXT",
    "TOOL_CALL",
    "Entities",
    "Group",
    "Kind",
    "Messages",
    "Missing",
    "Owned",
    "Steps",
    "Subagents",
    "ToolCalls",
    "mismatch",
)


class Missing(enum.Enum):
    """The type of `MISSING`."""

    MISSING = enum.auto()


#: An owner record that does not exist (None is the parent agent, a real owner).
MISSING: Final = Missing.MISSING


@attrs.frozen(kw_only=True)
class Kind:
    """An entity kind with an open/continue/close lifecycle, as the client names it."""

    #: What messages and the strict ledger call one ("text message").
    label: str
    #: What the client's owner-mismatch sentence calls one ("message").
    owner_label: str
    #: The wire types of its opener, continuation ("" when it has none) and closer.
    start: str
    content: str
    end: str
    #: What RUN_FINISHED calls several that are still open ("text messages").
    plural: str
    #: Reads its id from one of its events.
    id_of: Callable[[Any], str]
    #: The rules refusing an opener of an open entity and a continuation of none.
    already: Rule
    not_open: Rule
    #: How a not-open refusal ends after a closer: the client's shorter hint, or not.
    end_hint: bool = True

    def hint(self, shown: str) -> str:
        """The last sentence of a not-open refusal of the event *shown*."""
        if shown == self.end and self.end_hint:
            return f"A '{self.start}' event must be sent first."
        return f"Start a {self.label} with '{self.start}' first."


def _kind(
    label: str,
    wire: str,
    content: str,
    id_field: str,
    *,
    owner: str | None = None,
    rules: str | None = None,
    end_hint: bool = True,
) -> Kind:
    """
    The `Kind` whose events are ``<wire>_START``, ``<wire>_<content>`` and ``<wire>_END``.

    *content* "" means it has no continuation; its ids are read from *id_field*;
    *owner* is its owner label (default: *label*); its rules are
    ``Rule.<rules>_ALREADY_OPEN`` and ``Rule.<rules>_NOT_OPEN`` (default: *label*
    in capitals, "TOOL_CALL").
    """
    rules = label.upper().replace(" ", "_") if rules is None else rules
    return Kind(
        label=label,
        owner_label=label if owner is None else owner,
        start=f"{wire}_START",
        content=content and f"{wire}_{content}",
        end=f"{wire}_END",
        plural=f"{label}s",
        id_of=operator.attrgetter(id_field),
        already=Rule[f"{rules}_ALREADY_OPEN"],
        not_open=Rule[f"{rules}_NOT_OPEN"],
        end_hint=end_hint,
    )


TEXT: Final = _kind(
    "text message", "TEXT_MESSAGE", "CONTENT", "message_id", owner="message", rules="TEXT"
)
TOOL_CALL: Final = _kind("tool call", "TOOL_CALL", "ARGS", "tool_call_id")
#: A reasoning span's continuations are its messages (`REASONING_MESSAGE`).
REASONING_SPAN: Final = _kind(
    "reasoning span", "REASONING", "", "message_id", owner="reasoning message"
)
#: The client's REASONING_MESSAGE_END refusal keeps the long hint.
REASONING_MESSAGE: Final = _kind(
    "reasoning message", "REASONING_MESSAGE", "CONTENT", "message_id", end_hint=False
)


def mismatch(etype: str, shown: str, tag: str, owner: Owner, label: str, eid: str) -> Violation:
    """An owner-mismatch: *tag* disagrees with the *owner* on record for *eid*."""
    return Rule.OWNER_MISMATCH(
        etype,
        (eid, tag) if owner is None else (eid, tag, owner),
        shown=shown,
        tag=tag,
        label=label,
        eid=eid,
        owner=who(owner),
    )


class Owned(dict[str, dict[tuple[str, str], None]]):
    """Strict mode's ledger: per subagent, the ``(label, id)`` of everything it has open."""

    __slots__ = ()

    def own(self, owner: str, label: str, eid: str) -> None:
        owned = self.get(owner)
        if owned is None:
            owned = self[owner] = {}
        owned[label, eid] = None

    def disown(self, owner: str, label: str, eid: str) -> None:
        owned = self.get(owner)
        if owned is not None:
            owned.pop((label, eid), None)


class Group:
    """
    The generic handlers of the events that open and close what a group keeps.

    An opener or closer passes the chunk stage first (which closes the lane of
    its own ``subagentRunId``), then is checked, then applied if accepted. A
    group supplies the check and the apply of each.
    """

    __slots__ = ("lanes", "owned", "strict")

    # Each group sets them in its own __init__ (a verifier makes six groups per run).
    owned: Owned
    lanes: Lanes  # the chunk stage
    strict: bool

    def on_open(self, event: Any) -> Found:
        return self.lanes.in_own_lane(event, self.check_open, self.apply_open)

    def on_close(self, event: Any) -> Found:
        return self.lanes.in_own_lane(event, self.check_close, self.apply_close)

    def check_open(self, event: Any) -> Found:
        raise NotImplementedError

    def apply_open(self, event: Any) -> None:
        raise NotImplementedError

    def check_close(self, event: Any) -> Found:
        raise NotImplementedError

    def apply_close(self, event: Any) -> None:
        raise NotImplementedError


class Entities(Group):
    """The open entities of one kind, with the owners on record for the kind."""

    __slots__ = ("id_of", "kind", "lane_owners", "opened", "owners")

    def __init__(
        self, kind: Kind, owners: dict[str, Owner], owned: Owned, lanes: Lanes, *, strict: bool
    ) -> None:
        self.owned, self.lanes, self.strict = owned, lanes, strict
        self.kind = kind
        self.id_of = kind.id_of
        self.opened: dict[str, Owner] = {}  # id -> owner, while open
        self.owners = owners  # id -> owner on record for the run (shared by kinds)
        self.lane_owners = lanes.by_owner  # the owners with an open chunk lane

    # ------------------------------------------------------------------ per event

    def on_continue(self, event: Any) -> Found:
        """Check a CONTENT event: the hot path, a handful of dict lookups."""
        tag, eid = event.subagent_run_id, event.message_id  # directly: see ToolCalls.on_continue
        if self.lane_owners and tag in self.lane_owners:
            return self.lanes.after_closing(event, (tag,), self.check_continue, no_apply)
        if eid in self.opened and (tag is None or self.owners.get(eid) == tag):
            return OK
        return self.check_continue(event)

    def check_continue(self, event: Any) -> Found:
        """Check a CONTENT or ARGS event (the caller closes its chunk lane first)."""
        shown = self.kind.content
        found = self.continue_problem(self.id_of(event), event.subagent_run_id, shown, shown)
        return OK if found is None else (found,)

    def check_open(self, event: Any) -> Found:
        found = self.open_problem(self.id_of(event), event.subagent_run_id, None, self.kind.start)
        return OK if found is None else (found,)

    def apply_open(self, event: Any) -> None:
        self.open(self.id_of(event), event.subagent_run_id, None)

    def check_close(self, event: Any) -> Found:
        shown = self.kind.end
        found = self.continue_problem(self.id_of(event), event.subagent_run_id, shown, shown)
        return OK if found is None else (found,)

    def apply_close(self, event: Any) -> None:
        self.close(self.id_of(event))

    # ------------------------------------------------------------------ per id

    def open_problem(
        self, eid: str, tag: Owner, parent: str | None, etype: str
    ) -> Violation | None:
        """Why opening *eid* under *tag* is refused, or None (*parent*: tool calls only)."""
        kind = self.kind
        if eid in self.opened:
            return kind.already(etype, (eid,), eid=eid)
        if tag is not None:
            owner = self.owners.get(eid, MISSING)
            if owner is not MISSING and owner != tag:
                return mismatch(etype, kind.start, tag, owner, kind.owner_label, eid)
        return None

    def open(self, eid: str, tag: Owner, parent: str | None) -> bool:
        """Open *eid*; return whether its owner record was created."""
        owners = self.owners
        owner = owners.get(eid, MISSING)
        created = owner is MISSING
        if owner is MISSING:  # first writer wins; an untagged reopen keeps the owner
            owners[eid] = owner = tag
        self.opened[eid] = owner
        if owner is not None and self.strict:
            self.owned.own(owner, self.kind.label, eid)
        return created

    def unopen(self, eid: str, created: bool) -> None:
        """Undo `open`."""
        owner = self.opened.pop(eid)
        if created:
            del self.owners[eid]
        if owner is not None and self.strict:
            self.owned.disown(owner, self.kind.label, eid)

    def continue_problem(self, eid: str, tag: Owner, etype: str, shown: str) -> Violation | None:
        """Why a continuation or closer *shown* of *eid* under *tag* is refused, or None."""
        kind = self.kind
        if eid not in self.opened:
            return kind.not_open(etype, (eid,), shown=shown, eid=eid, hint=kind.hint(shown))
        if tag is not None:
            owner = self.owners.get(eid, MISSING)
            if owner is not MISSING and owner != tag:
                return mismatch(etype, shown, tag, owner, kind.owner_label, eid)
        return None

    def close(self, eid: str) -> Owner:
        """Close *eid*; return its owner."""
        owner = self.opened.pop(eid)
        if owner is not None and self.strict:
            self.owned.disown(owner, self.kind.label, eid)
        return owner

    def reopen(self, eid: str, owner: Owner) -> None:
        """Undo `close`."""
        self.opened[eid] = owner
        if owner is not None and self.strict:
            self.owned.own(owner, self.kind.label, eid)


#: The roles a tool call's parent message may not have (the client then makes a new one).
NOT_ASSISTANT: Final = frozenset({"developer", "system", "tool", "user"})


class Messages(Entities):
    """
    Text or reasoning messages, which strict mode keeps apart from activities.

    An id an activity holds cannot open one (the client would drop the message's
    events); the roles of text messages that are not the assistant's are kept,
    so a tool call cannot name one as its parent (`ToolCalls`).
    """

    __slots__ = ("activities", "roles")

    def __init__(
        self,
        kind: Kind,
        owners: dict[str, Owner],
        owned: Owned,
        lanes: Lanes,
        *,
        strict: bool,
        activities: dict[str, Owner],
        roles: dict[str, str],
    ) -> None:
        super().__init__(kind, owners, owned, lanes, strict=strict)
        self.activities = activities  # the activity owners on record
        self.roles = roles  # id -> role, for the messages that are not the assistant's

    def open_problem(
        self, eid: str, tag: Owner, parent: str | None, etype: str
    ) -> Violation | None:
        found = super().open_problem(eid, tag, parent, etype)
        if found is None and self.strict and eid in self.activities:
            return Rule.MESSAGE_ID_KIND_CLASH(
                etype, (eid,), etype=etype, mid=eid, other="an activity", what=self.kind.label
            )
        return found

    def apply_open(self, event: Any) -> None:
        super().apply_open(event)
        role = getattr(event, "role", None)
        if role in NOT_ASSISTANT and self.strict:
            self.roles[event.message_id] = role


class ToolCalls(Entities):
    """Tool calls: their owner may come from their parent message, and results answer them."""

    __slots__ = ("_history_roles", "answered", "history", "known", "messages", "roles", "started")

    def __init__(
        self,
        owners: dict[str, Owner],
        messages: dict[str, Owner],
        owned: Owned,
        lanes: Lanes,
        *,
        strict: bool,
        known: frozenset[str],
        roles: dict[str, str],
        history: Sequence[ev.Message] = (),
    ) -> None:
        self.owned, self.lanes, self.strict = owned, lanes, strict
        self.kind = kind = TOOL_CALL
        self.id_of = kind.id_of
        self.opened = {}
        self.owners = owners
        self.lane_owners = lanes.by_owner
        self.messages = messages  # the message owners on record, for parent messages
        self.known = known  # tool calls made before the stream
        self.roles = roles  # strict: the roles of messages that are not the assistant's
        self.history = history  # strict: the messages the client held before the stream
        self._history_roles: dict[str, str] | None = None  # built from it when first needed
        # Strict, per run: the calls started and the calls answered, for pendingToolCallIds;
        # made on first use, so an idle run's verifier holds no empty sets.
        self.started: set[str] | None = None
        self.answered: set[str] | None = None

    def on_continue(self, event: Any) -> Found:
        """
        Check a TOOL_CALL_ARGS: `Entities.on_continue` with the tool call's id.

        Spelled out on purpose, like the base's: both read their id attribute
        directly. One shared method reading it through ``kind.id_of`` made the
        object path's message write about 5% slower (measured interleaved).
        """
        tag, eid = event.subagent_run_id, event.tool_call_id
        if self.lane_owners and tag in self.lane_owners:
            return self.lanes.after_closing(event, (tag,), self.check_continue, no_apply)
        if eid in self.opened and (tag is None or self.owners.get(eid) == tag):
            return OK
        return self.check_continue(event)

    def check_open(self, event: Any) -> Found:
        found = self.open_problem(
            event.tool_call_id, event.subagent_run_id, event.parent_message_id, "TOOL_CALL_START"
        )
        return OK if found is None else (found,)

    def apply_open(self, event: Any) -> None:
        self.open(event.tool_call_id, event.subagent_run_id, event.parent_message_id)

    def open_problem(
        self, eid: str, tag: Owner, parent: str | None, etype: str
    ) -> Violation | None:
        if eid in self.opened:
            return Rule.TOOL_CALL_ALREADY_OPEN(etype, (eid,), eid=eid)
        inherited: Owner | Missing = MISSING
        if parent is not None:
            role = self.parent_role(parent)
            if role is not None:
                ids = (eid, parent)
                return Rule.TOOL_CALL_PARENT_ROLE(etype, ids, tid=eid, parent=parent, role=role)
            inherited = self.messages.get(parent, MISSING)
            if inherited is not MISSING and tag is not None and tag != inherited:
                conflict = (
                    f"subagentRunId '{tag}' does not match its parent message '{parent}' owner "
                    f"'{who(inherited)}'"
                )
                return Rule.TOOL_CALL_PARENT_OWNER(etype, (eid, parent, tag), conflict=conflict)
        existing = self.owners.get(eid, MISSING)
        if existing is not MISSING:
            if tag is not None and tag != existing:
                return mismatch(etype, "TOOL_CALL_START", tag, existing, "tool call", eid)
            if tag is None and inherited is not MISSING and inherited != existing:
                conflict = (
                    f"tool call '{eid}' is owned by '{who(existing)}' but its parent message "
                    f"'{parent}' is owned by '{who(inherited)}'"
                )
                return Rule.TOOL_CALL_PARENT_OWNER(etype, (eid, str(parent)), conflict=conflict)
        return None

    def parent_role(self, parent: str) -> str | None:
        """Strict: the role of message *parent* when it is not the assistant's, else None."""
        role = self.roles.get(parent)
        if role is None and self.history and parent not in self.messages:
            # A message the client held before the stream (the input's, not echoed):
            # indexed on the first tool call that names one, never per run.
            if self._history_roles is None:
                self._history_roles = {
                    m.id: m.role for m in self.history if m.role in NOT_ASSISTANT
                }
            role = self._history_roles.get(parent)
        return role

    def open(self, eid: str, tag: Owner, parent: str | None) -> bool:
        owner = self.owners.get(eid, MISSING)
        created = owner is MISSING
        if owner is MISSING:
            if tag is None and parent is not None:
                inherited = self.messages.get(parent, MISSING)
                tag = None if inherited is MISSING else inherited
            self.owners[eid] = owner = tag
        self.opened[eid] = owner
        if self.strict:
            started = self.started
            if started is None:
                started = self.started = set()
            started.add(eid)
            if owner is not None:
                self.owned.own(owner, "tool call", eid)
        return created

    # ------------------------------------------------------------------ results

    def check_result(self, event: ev.ToolCallResultEvent) -> Found:
        """Strict: a result answers a closed call of this run or one known from history."""
        tid = event.tool_call_id
        if tid in self.opened:
            return (
                Rule.TOOL_RESULT_OPEN_CALL("TOOL_CALL_RESULT", (tid, event.message_id), tid=tid),
            )
        if tid not in self.owners and tid not in self.known:
            return (
                Rule.TOOL_RESULT_UNKNOWN_CALL(
                    "TOOL_CALL_RESULT", (tid, event.message_id), tid=tid
                ),
            )
        return OK

    def apply_result(self, event: ev.ToolCallResultEvent) -> None:
        # The result mints a tool message under its own tag; the newest mint wins.
        self.messages[event.message_id] = event.subagent_run_id
        if self.strict:
            self.roles[event.message_id] = "tool"
            answered = self.answered
            if answered is None:
                answered = self.answered = set()
            answered.add(event.tool_call_id)

    def forget_run(self) -> None:
        """A new run starts: no call of it is started or answered yet."""
        self.started = self.answered = None

    def check_pending(self, pending: tuple[str, ...]) -> list[Violation]:
        """Strict: ``pendingToolCallIds`` names calls this run started, left unanswered, once."""
        found: list[Violation] = []
        seen: set[str] = set()
        started, answered = self.started or (), self.answered or ()
        for tid in pending:
            if tid in seen:
                rule = Rule.PENDING_TOOL_CALL_DUPLICATE
            elif tid not in started:
                rule = Rule.PENDING_TOOL_CALL_UNKNOWN
            elif tid in answered:
                rule = Rule.PENDING_TOOL_CALL_ANSWERED
            else:
                seen.add(tid)
                continue
            seen.add(tid)
            found.append(rule("RUN_FINISHED", (tid,), tid=tid))
        return found


class Steps(Group):
    """The open steps of a run, by owner: a step name is open at most once per owner."""

    __slots__ = ("count", "holders", "names")

    def __init__(self, owned: Owned, lanes: Lanes, *, strict: bool) -> None:
        self.owned, self.lanes, self.strict = owned, lanes, strict
        self.names: dict[Owner, dict[str, None]] = {}  # owner -> its open step names
        self.holders: dict[str, dict[Owner, None]] = {}  # step name -> who has it open
        self.count = 0

    def clear(self) -> None:
        self.names.clear()
        self.holders.clear()
        self.count = 0

    def check_open(self, event: ev.StepStartedEvent) -> Found:
        owner = event.subagent_run_id
        names = self.names.get(owner)
        if names is None or event.step_name not in names:
            return OK
        where = "" if owner is None else f" in subagent '{owner}'"
        ids = (event.step_name,) if owner is None else (event.step_name, owner)
        return (Rule.STEP_ALREADY_ACTIVE("STEP_STARTED", ids, name=event.step_name, where=where),)

    def apply_open(self, event: ev.StepStartedEvent) -> None:
        owner, name = event.subagent_run_id, event.step_name
        names = self.names.get(owner)
        if names is None:
            names = self.names[owner] = {}
        names[name] = None
        holders = self.holders.get(name)
        if holders is None:
            holders = self.holders[name] = {}
        holders[owner] = None
        self.count += 1
        if owner is not None and self.strict:
            self.owned.own(owner, "step", name)

    def check_close(self, event: ev.StepFinishedEvent) -> Found:
        owner, name = event.subagent_run_id, event.step_name
        names = self.names.get(owner)
        if names is not None and name in names:
            return OK
        for other in self.holders.get(name, ()):
            if other != owner:
                mine = "the parent agent" if owner is None else f"subagent '{owner}'"
                theirs = "the parent agent" if other is None else f"subagent '{other}'"
                ids = tuple(x for x in (name, owner, other) if x is not None)
                return (
                    Rule.STEP_OWNER_MISMATCH(
                        "STEP_FINISHED", ids, name=name, mine=mine, theirs=theirs
                    ),
                )
        ids = (name,) if owner is None else (name, owner)
        return (Rule.STEP_NOT_STARTED("STEP_FINISHED", ids, name=name),)

    def apply_close(self, event: ev.StepFinishedEvent) -> None:
        owner, name = event.subagent_run_id, event.step_name
        del self.names[owner][name]
        holders = self.holders[name]
        del holders[owner]
        if not holders:
            del self.holders[name]
        self.count -= 1
        if owner is not None and self.strict:
            self.owned.disown(owner, "step", name)

    def still_open(self) -> tuple[list[str], list[str]]:
        """What RUN_FINISHED lists of the open steps, and their names."""
        parts = [
            name if owner is None else f"{name} (subagent '{owner}')"
            for owner, names in self.names.items()
            for name in names
        ]
        return parts, [name for names in self.names.values() for name in names]


class Subagents(Group):
    """
    The run's subagents: the active ones (with their parents), the started, the suspended.

    A subagent that started in the run is remembered for the rest of it (its id
    cannot be reused, and a child may name it as parent). Ids of the shape the
    library mints, ``<run id>-sub-<n>`` (*n* a canonical decimal), cost no memory
    per call: the numbers started are kept as how many started from 1 up without
    a gap (`upto`), plus the few started out of that order (`above`), and the
    next id in order is kept spelled out (`next_id`), so the common case costs
    one string comparison. Any other id is kept in `started`.
    """

    __slots__ = ("above", "active", "next_id", "run_id", "started", "suspended", "upto")

    def __init__(self, owned: Owned, lanes: Lanes, *, strict: bool) -> None:
        self.owned, self.lanes, self.strict = owned, lanes, strict
        self.active: dict[str, Owner] = {}  # id -> parent subagent
        self.started: set[str] | None = None  # ids not of the minted shape (lazily)
        self.run_id = ""  # minted ids are f"{run_id}-sub-{n}"; set by `begin`
        self.upto = 0  # minted numbers 1..upto have all started in this run
        self.above: set[int] | None = None  # minted numbers > upto + 1 started (lazily)
        # The minted id numbered upto + 1, once upto > 0, unless the byte path opened the last.
        self.next_id: str | None = None
        # Strict: (id, interruptIds) of those that finished suspended (lazily).
        self.suspended: list[tuple[str, tuple[str, ...]]] | None = None

    def begin(self, run_id: str) -> None:
        """Forget the last run's subagents; *run_id*'s mints ``<run_id>-sub-<n>``."""
        self.active.clear()
        self.started = self.above = self.suspended = None
        self.run_id, self.upto, self.next_id = run_id, 0, None

    def clear(self) -> None:
        self.begin(self.run_id)

    def number(self, sid: object) -> int:
        """The *n* of a minted-shape id ``<run id>-sub-<n>``, or 0 for any other id."""
        run_id = self.run_id
        if type(sid) is str and sid.startswith(run_id) and sid.startswith("-sub-", len(run_id)):
            n = sid[len(run_id) + 5 :]
            # Canonical decimal only (no sign, no leading zero, ASCII), so one id, one n.
            if n.isascii() and n.isdigit() and n[0] != "0" and len(n) < 19:
                return int(n)
        return 0

    def known(self, sid: str) -> bool:
        """Whether *sid* has started in this run (it is active, or it ended)."""
        if sid == self.next_id:  # the common case: the next minted id has not started
            return False  # (None after the byte path opened one: then `number` tells)
        n = self.number(sid)
        if n:
            return n <= self.upto or (self.above is not None and n in self.above)
        return self.started is not None and sid in self.started

    # The scope hot path (every subagent invocation starts and ends one): the
    # generic handlers, inlined. SUBAGENT_STARTED is also the one opener that
    # closes no chunk lane: its subagentRunId names the new subagent, not an
    # owner streaming chunks.

    def on_open(self, event: ev.SubagentStartedEvent) -> Found:
        found = self.check_open(event)
        if found:
            return found
        self.apply_open(event)
        return OK

    def on_close(self, event: ev.SubagentFinishedEvent | ev.SubagentErrorEvent) -> Found:
        sid = event.subagent_run_id
        if self.lanes.by_owner and sid in self.lanes.by_owner:
            return self.lanes.after_closing(event, (sid,), self.check_close, self.apply_close)
        found = self.check_close(event)
        if found:
            return found
        self.apply_close(event)
        return OK

    def check_open(self, event: ev.SubagentStartedEvent) -> Found:
        sid, parent = event.subagent_run_id, event.parent_subagent_run_id
        if sid in self.active:
            return (Rule.SUBAGENT_ACTIVE("SUBAGENT_STARTED", (sid,), sid=sid),)
        if sid != self.next_id and self.known(sid):  # not active: it ended
            return (Rule.SUBAGENT_REUSED("SUBAGENT_STARTED", (sid,), sid=sid),)
        if parent is not None and parent not in self.active and not self.known(parent):
            return (
                Rule.SUBAGENT_PARENT_UNKNOWN("SUBAGENT_STARTED", (sid, parent), parent=parent),
            )
        return OK

    def apply_open(self, event: ev.SubagentStartedEvent) -> None:
        sid, parent = event.subagent_run_id, event.parent_subagent_run_id
        self.active[sid] = parent
        n = self.upto + 1 if sid == self.next_id else self.number(sid)  # the hot path first
        if n == self.upto + 1:  # the next minted id
            self.upto = n
            if self.above is not None:
                self._gather()
            self.next_id = f"{self.run_id}-sub-{self.upto + 1}"
        elif n:  # minted-shape, out of order: an explicit id of that shape, or threads racing
            if self.above is None:
                self.above = set()
            self.above.add(n)
        else:
            if self.started is None:
                self.started = set()
            self.started.add(sid)
        if parent is not None and self.strict:
            self.owned.own(parent, "subagent", sid)

    # The byte path's two checks (``_subagent``): a decorated call's SUBAGENT_STARTED and
    # SUBAGENT_FINISHED, accepted and applied by construction where `on_open` and
    # `on_close` certainly would accept them, without the event objects.

    def open_minted(self, sid: str, n: int, parent: Owner, run_id: str) -> bool:
        """
        Accept and apply SUBAGENT_STARTED of *sid*, minted as ``<run_id>-sub-<n>``, under *parent*.

        Exactly when `check_open` would: *sid* is the next id of this run's
        minted shape, so neither active nor ended (an explicit id of that shape
        started before moves `upto` past it, or holds it in `above`), and
        *parent* is active. Returns False, changing nothing, otherwise (the
        caller sends the event for the generic check, which says why).
        """
        if n != self.upto + 1 or run_id != self.run_id:
            return False
        active = self.active
        if parent is not None:
            if parent not in active:
                return False
            if self.strict:
                self.owned.own(parent, "subagent", sid)
        active[sid] = parent
        self.upto = n
        if self.above is not None:
            self._gather()
        self.next_id = None  # spelled out again by the next SUBAGENT_STARTED that needs it
        return True

    def close_plain(self, sid: str) -> bool:
        """
        Accept and apply a plain SUBAGENT_FINISHED of *sid* (success, no result, no outcome).

        Exactly when `on_close` would without a chunk lane to close: *sid* is
        active, streams no chunk lane, and (strict) owns nothing still open.
        Returns False, changing nothing, otherwise.
        """
        active = self.active
        parent = active.get(sid, MISSING)
        if parent is MISSING:
            return False
        lanes = self.lanes.by_owner
        if lanes and sid in lanes:
            return False
        if self.strict:
            owned = self.owned
            if owned:  # (empty while no subagent owns anything: nothing to look up)
                ledger = owned.pop(sid, None)  # nothing reads it once it has ended
                if ledger:  # it still owns something open: put it back, the check says why
                    owned[sid] = ledger
                    return False
                if parent is not None:
                    owned.disown(parent, "subagent", sid)
        del active[sid]
        return True

    def check_close(self, event: ev.SubagentFinishedEvent | ev.SubagentErrorEvent) -> Found:
        sid = event.subagent_run_id
        if sid not in self.active:
            etype = event.TYPE.value
            return (Rule.SUBAGENT_NOT_ACTIVE(etype, (sid,), etype=etype, sid=sid),)
        if self.strict and isinstance(event, ev.SubagentFinishedEvent):
            owned = self.owned.get(sid)
            if owned:
                listing = ", ".join(f"{label} '{eid}'" for label, eid in owned)
                ids = (sid, *(eid for _, eid in owned))
                return (
                    Rule.SUBAGENT_OPEN_AT_FINISH(
                        "SUBAGENT_FINISHED", ids, sid=sid, listing=listing
                    ),
                )
        return OK

    def apply_close(self, event: ev.SubagentFinishedEvent | ev.SubagentErrorEvent) -> None:
        sid = event.subagent_run_id
        parent = self.active.pop(sid)
        if self.strict:
            self.owned.pop(sid, None)  # its ledger: nothing reads it once it has ended
            if parent is not None:
                self.owned.disown(parent, "subagent", sid)
            if isinstance(event, ev.SubagentFinishedEvent) and isinstance(
                event.outcome, ev.SubagentFinishedSuspendedOutcome
            ):
                if self.suspended is None:
                    self.suspended = []
                self.suspended.append((sid, event.outcome.interrupt_ids or ()))

    def _gather(self) -> None:
        """Move the numbers in `above` that follow `upto` without a gap into it."""
        above = self.above
        while above and self.upto + 1 in above:
            self.upto += 1
            above.discard(self.upto)
        if not above:
            self.above = None

    def check_suspensions(self, outcome: ev.RunFinishedOutcome | None) -> Iterable[Violation]:
        """Strict, at RUN_FINISHED: the interrupt outcome and what suspended subagents name."""
        raised: dict[str, Owner] = {}
        interrupting = isinstance(outcome, ev.RunFinishedInterruptOutcome)
        if isinstance(outcome, ev.RunFinishedInterruptOutcome):
            for interrupt in outcome.interrupts:
                if interrupt.id in raised:
                    yield Rule.INTERRUPT_ID_DUPLICATE(
                        "RUN_FINISHED", (interrupt.id,), iid=interrupt.id
                    )
                else:
                    raised[interrupt.id] = interrupt.subagent_run_id
                sid = interrupt.subagent_run_id
                if sid is not None and not self.known(sid):
                    yield Rule.INTERRUPT_SUBAGENT_UNKNOWN(
                        "RUN_FINISHED", (interrupt.id, sid), iid=interrupt.id, sid=sid
                    )
        if not self.suspended:
            return
        if not interrupting:
            sids = tuple(sid for sid, _ in self.suspended)
            yield Rule.SUSPENDED_WITHOUT_INTERRUPT(
                "RUN_FINISHED",
                sids,
                outcome="success" if outcome is None else outcome.type,
                listing=", ".join(f"'{sid}'" for sid in sids),
            )
            return
        for sid, interrupt_ids in self.suspended:
            for iid in interrupt_ids:
                owner = raised.get(iid, MISSING)
                if owner is MISSING:
                    yield Rule.SUSPENDED_INTERRUPT_UNKNOWN(
                        "RUN_FINISHED", (sid, iid), sid=sid, iid=iid
                    )
                elif owner != sid:
                    yield Rule.SUSPENDED_INTERRUPT_OWNER(
                        "RUN_FINISHED", (sid, iid), sid=sid, iid=iid, owner=who(owner)
                    )
