"""
The verifier's chunk stage: ``*_CHUNK`` events expanded as the client's ``transformChunks``.

The official client turns chunks into explicit events before it verifies
anything: a chunk opens a stream (a synthesized ``*_START``) or continues the
open one (a ``*_CONTENT``/``*_ARGS``), and the stream is closed (a synthesized
``*_END``) by the next chunk that starts another, or by the first explicit
event that ends it. Streams are kept per *lane*: one per owner (the chunk's
``subagentRunId``), so concurrent subagents can each stream chunks.

`Lanes` is that stage. It resolves the lane a chunk belongs to, checks the
chunk against the stream it continues, and has the events it expands into
checked and applied by the entity groups (`ambient_runs._verify_entities`),
all or nothing: a refused event rolls back what the ones before it applied.
Every explicit event passes this stage first: `Lanes.in_own_lane` and
`Lanes.after_all` check and apply it after the ``*_END`` events that close the
lanes it ends (its own, or all at a run boundary and at a messages snapshot),
so the verifier proper never sees a chunk.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any, Final

import attrs

from ambient_runs import events as ev
from ambient_runs._verify_entities import MISSING, Entities
from ambient_runs._verify_rules import OK, Found, Owner, Rule, Violation, who

__all__ = ("STREAMS", "Apply", "Check", "Lane", "Lanes", "Stream")

Undo = Callable[[], None]
Check = Callable[[Any], Found]
Apply = Callable[[Any], None]
Chunk = ev.TextMessageChunkEvent | ev.ToolCallChunkEvent | ev.ReasoningMessageChunkEvent


class Stream(enum.Enum):
    """What each chunk type assembles, as the client's messages name it."""

    chunk: str  #: the chunk's wire type
    entity: str  #: what it assembles ("text message")
    id_field: str  #: the wire name of the id field that opens a stream
    id_of: Callable[[Any], str | None]  #: reads that id from a chunk
    index: int  #: where its entity group is in `Lanes.groups`

    def __init__(self, chunk: str, entity: str, id_field: str, attribute: str, index: int) -> None:
        self.chunk = chunk
        self.entity = entity
        self.id_field = id_field
        self.id_of = operator.attrgetter(attribute)
        self.index = index

    # Members are singletons (copies and unpickled verifiers share them): hash by identity,
    # in C, rather than by name in Python as Enum does.
    __hash__ = object.__hash__

    TEXT = ("TEXT_MESSAGE_CHUNK", "text message", "messageId", "message_id", 0)
    TOOL = ("TOOL_CALL_CHUNK", "tool call", "toolCallId", "tool_call_id", 1)
    REASONING = ("REASONING_MESSAGE_CHUNK", "reasoning message", "messageId", "message_id", 2)


_NO_LANES: Final[dict[Owner, None]] = {}  # never written

#: Each chunk type and the stream it assembles.
STREAMS: Final[dict[type[Any], Stream]] = {
    ev.TextMessageChunkEvent: Stream.TEXT,
    ev.ToolCallChunkEvent: Stream.TOOL,
    ev.ReasoningMessageChunkEvent: Stream.REASONING,
}


class Lane:
    """A stream the client is assembling from chunks, in one owner's lane."""

    __slots__ = ("entity_id", "name", "owner", "parent_message_id", "role", "stream")

    def __init__(
        self,
        stream: Stream,
        entity_id: str,
        owner: Owner,
        *,
        role: str | None = None,
        name: str | None = None,
        parent_message_id: str | None = None,
    ) -> None:
        self.stream = stream
        self.entity_id = entity_id
        self.owner = owner  # the lane's key: the opening chunk's tag
        self.role = role  # text: the established role (absent reads as "assistant")
        self.name = name  # text: name; tool: toolCallName
        self.parent_message_id = parent_message_id


class _Rejected(Exception):
    def __init__(self, found: Violation) -> None:
        self.found: Found = (found,)


class Lanes:
    """The open chunk lanes of a run, and the expansion of chunks into explicit events."""

    __slots__ = ("by_entity", "by_owner", "by_stream", "groups")

    def __init__(self) -> None:
        self.by_owner: dict[Owner, Lane] = {}
        self.by_entity: dict[tuple[Stream, str], Owner] = {}  # who holds a stream's id
        self.by_stream: dict[Stream, dict[Owner, None]] = {}  # each made on first use
        self.groups: tuple[Entities, ...] = ()  # by `Stream.index`

    def route(self, *, text: Entities, tools: Entities, reasoning: Entities) -> None:
        """Say which entity groups check the events each stream expands into."""
        self.groups = (text, tools, reasoning)

    # ------------------------------------------------------------------ explicit events

    def in_own_lane(self, event: Any, check: Check, apply: Apply) -> Found:
        """Check and apply an explicit event, after the END closing its owner's lane."""
        tag = event.subagent_run_id
        if self.by_owner and tag in self.by_owner:
            return self.after_closing(event, (tag,), check, apply)
        found = check(event)
        if found:
            return found
        apply(event)
        return OK

    def after_all(self, event: Any, check: Check, apply: Apply) -> Found:
        """Check and apply an explicit event, after the ENDs closing every lane."""
        if self.by_owner:
            return self.after_closing(event, tuple(self.by_owner), check, apply)
        found = check(event)
        if found:
            return found
        apply(event)
        return OK

    def after_closing(
        self,
        event: Any,
        owners: Iterable[Owner],
        check: Check,
        apply: Apply,
    ) -> Found:
        """Check and apply *event* after the ENDs that close the lanes of *owners*."""
        owners = tuple(o for o in owners if o in self.by_owner)
        found, undos = self._close(owners, event.TYPE.value)
        if found:
            return found
        found = check(event)
        if found:
            for undo in reversed(undos):
                undo()
            return found
        for owner in owners:
            self._drop(owner)
        apply(event)
        return OK

    def _close(self, owners: Iterable[Owner], before: str) -> tuple[Found, list[Undo]]:
        """Check and apply the ENDs closing the lanes of *owners*, in order."""
        undos: list[Undo] = []
        for owner in owners:
            lane = self.by_owner.get(owner)
            if lane is None:
                continue
            found, undo = self._end(lane, before)
            if found is not None:
                for done in reversed(undos):
                    done()
                return (found,), []
            assert undo is not None
            undos.append(undo)
        return OK, undos

    def _end(self, lane: Lane, before: str) -> tuple[Violation | None, Undo | None]:
        """Check and apply the ``*_END`` the client synthesizes to close *lane*."""
        group = self.groups[lane.stream.index]
        shown = group.kind.end
        eid = lane.entity_id
        found = group.continue_problem(eid, lane.owner, before, shown)
        if found is not None:
            note = (
                f" (the client synthesizes this '{shown}' to close the "
                f"{lane.stream.chunk} stream before '{before}')"
            )
            return attrs.evolve(found, message=found.message + note), None
        owner = group.close(eid)
        return None, lambda: group.reopen(eid, owner)

    # ------------------------------------------------------------------ chunks

    def chunk(self, event: Chunk) -> Found:
        """Expand a chunk in an active run as the client does, then verify the result."""
        stream = STREAMS[type(event)]
        eid = stream.id_of(event)
        try:
            key = self._resolve(stream, eid, event.subagent_run_id)
            current = self.by_owner.get(key)
            if (
                current is not None
                and current.stream is stream
                and (eid is None or eid == current.entity_id)
            ):
                self._agree(event, current)
                if event.delta is None and event.raw_event is None and event.metadata is None:
                    return OK  # expands to nothing
                return self._expand(event, current, None, None)
            lane = self._first(event, stream, eid)
        except _Rejected as rejected:
            return rejected.found
        return self._expand(event, lane, current, lane)

    def outside_run(self, event: Chunk) -> Found:
        """What a chunk's own rules refuse outside an active run (no lane is open there)."""
        stream = STREAMS[type(event)]
        try:
            self._first(event, stream, stream.id_of(event))
        except _Rejected as rejected:
            return rejected.found
        return OK

    def _resolve(self, stream: Stream, eid: str | None, tag: Owner) -> Owner:
        """Pick the lane a chunk belongs to, as the client does."""
        if eid is not None:
            holder = self.by_entity.get((stream, eid), MISSING)
            if holder is MISSING:
                return tag  # an id nobody holds opens a new stream in its tag's lane
            if tag is not None and tag != holder:
                raise _Rejected(
                    Rule.CHUNK_LANE_MISMATCH(
                        stream.chunk,
                        (eid, tag) if holder is None else (eid, tag, holder),
                        entity=stream.entity,
                        eid=eid,
                        tag=tag,
                        holder=who(holder),
                    )
                )
            return holder
        if tag is not None:
            return tag
        parent = self.by_owner.get(None)
        if parent is not None and parent.stream is stream:
            return None
        candidates = self.by_stream.get(stream, _NO_LANES)
        if len(candidates) == 1:
            return next(iter(candidates))
        if len(candidates) > 1:
            raise _Rejected(
                Rule.CHUNK_AMBIGUOUS(
                    stream.chunk,
                    # Two of the lanes show the ambiguity; listing all is O(lanes).
                    tuple(o for o in islice(candidates, 2) if o is not None),
                    chunk=stream.chunk,
                    field=stream.id_field,
                    count=len(candidates),
                    entity=stream.entity,
                )
            )
        return None

    @staticmethod
    def _first(event: Chunk, stream: Stream, eid: str | None) -> Lane:
        """The lane a chunk opens, if it may open one."""
        if eid is None:
            raise _Rejected(
                Rule.CHUNK_MISSING_ID(stream.chunk, chunk=stream.chunk, field=stream.id_field)
            )
        tag = event.subagent_run_id
        if isinstance(event, ev.TextMessageChunkEvent):
            return Lane(stream, eid, tag, role=event.role or "assistant", name=event.name)
        if isinstance(event, ev.ToolCallChunkEvent):
            if event.tool_call_name is None:
                raise _Rejected(Rule.CHUNK_MISSING_NAME("TOOL_CALL_CHUNK", (eid,)))
            return Lane(
                stream,
                eid,
                tag,
                name=event.tool_call_name,
                parent_message_id=event.parent_message_id,
            )
        return Lane(stream, eid, tag)

    @classmethod
    def _agree(cls, event: Chunk, lane: Lane) -> None:
        """Refuse a continuation chunk that repeats a field of its stream differently."""
        if isinstance(event, ev.TextMessageChunkEvent):
            cls._same(lane, "role", event.role, lane.role)
            cls._same(lane, "name", event.name, lane.name)
        elif isinstance(event, ev.ToolCallChunkEvent):
            cls._same(lane, "toolCallName", event.tool_call_name, lane.name)
            cls._same(lane, "parentMessageId", event.parent_message_id, lane.parent_message_id)

    @staticmethod
    def _same(lane: Lane, field: str, incoming: str | None, known: str | None) -> None:
        if incoming is not None and incoming != known:
            raise _Rejected(
                Rule.CHUNK_FIELD_MISMATCH(
                    lane.stream.chunk,
                    (lane.entity_id,),
                    entity=lane.stream.entity,
                    eid=lane.entity_id,
                    field=field,
                    incoming=incoming,
                    known="(absent)" if known is None else f"'{known}'",
                )
            )

    def _expand(
        self, event: Chunk, lane: Lane, closing: Lane | None, new_lane: Lane | None
    ) -> Found:
        """Verify the END/START/CONTENT events a chunk expands into, all or nothing."""
        etype = event.TYPE.value
        group = self.groups[lane.stream.index]
        kind = group.kind
        undos: list[Undo] = []

        def fail(found: Violation) -> Found:
            for undo in reversed(undos):
                undo()
            return (found,)

        if closing is not None:
            found, undo = self._end(closing, etype)
            if found is not None:
                return fail(found)
            assert undo is not None
            undos.append(undo)
        eid, tag = lane.entity_id, event.subagent_run_id
        if new_lane is not None:
            parent = lane.parent_message_id
            started = group.open_problem(eid, tag, parent, etype)
            if started is not None:
                return fail(_synthesized(started, kind.start, etype))
            created = group.open(eid, tag, parent)
            undos.append(lambda: group.unopen(eid, created))
        # A CONTENT/ARGS for the delta, the raw event, or (on a continuation) metadata.
        if (
            event.delta is not None
            or event.raw_event is not None
            or (new_lane is None and event.metadata is not None)
        ):
            shown = kind.content
            owner = tag if tag is not None else lane.owner
            found = group.continue_problem(eid, owner, etype, shown)
            if found is not None:
                return fail(_synthesized(found, shown, etype))
        if closing is not None:
            self._drop(closing.owner)
        if new_lane is not None:
            self._add(new_lane)
        return OK

    def _add(self, lane: Lane) -> None:
        self.by_owner[lane.owner] = lane
        self.by_entity[lane.stream, lane.entity_id] = lane.owner
        owners = self.by_stream.get(lane.stream)
        if owners is None:
            owners = self.by_stream[lane.stream] = {}
        owners[lane.owner] = None

    def _drop(self, owner: Owner) -> None:
        lane = self.by_owner.pop(owner)
        del self.by_entity[lane.stream, lane.entity_id]
        del self.by_stream[lane.stream][owner]


def _synthesized(found: Violation, shown: str, chunk_type: str) -> Violation:
    note = f" (the client expands this {chunk_type} into '{shown}')"
    return attrs.evolve(found, message=found.message + note)
