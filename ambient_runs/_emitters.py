"""
The content emitters: one implementation of each, as ``*_in(frame, ...)`` functions.

`ContentEmitters` puts them on `Run` and `Subagent` as methods (each object
supplies the frame to emit in), and ``_emit`` as module-level functions of
whatever is ambient. The emitters that open scopes (`step`, `subagent`) live
with `Subagent` (``_subagent.Emitters``), which they need.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Unpack, cast

import attrs

from ambient_runs import events as ev
from ambient_runs._content import ActivityHandle, MessageHandle, ReasoningHandle, ToolCallHandle
from ambient_runs._foreign import coerce_event
from ambient_runs._frontend import call_frontend_tool_in, frontend_call_in
from ambient_runs._pipeline import RUN_LIFECYCLE, lifecycle_refused
from ambient_runs._state import publish_state_in, set_state_in, update_state_in
from ambient_runs._usage import TokenCounts, usage_in
from ambient_runs._wire import check_encodable, refuse_reserved_metadata
from ambient_runs.errors import InvalidEventError, MessagesNotRecordedError

if TYPE_CHECKING:
    from ambient_runs._scopes import Frame

__all__ = (
    "ContentEmitters",
    "activity_in",
    "emit_in",
    "message_in",
    "publish_messages_in",
    "reasoning_in",
    "say_in",
    "think_in",
    "tool_call_in",
)


class ContentEmitters:
    """
    The content emitter methods, shared by `Run` and `Subagent` (through `Emitters`).

    Each method attributes what it emits to the frame `_emit_frame` returns: the
    parent agent for a run, the invocation for a subagent handle. The
    module-level functions of ``_emit`` call the same ``*_in`` functions.
    """

    __slots__ = ()

    def _emit_frame(self) -> Frame:
        raise NotImplementedError

    def say(self, text: str, *, id: str | None = None) -> str:
        """Emit a whole assistant message (start, content, end); return its id."""
        return say_in(self._emit_frame(), text, id)

    def think(self, text: str, *, id: str | None = None) -> str:
        """Emit a whole reasoning block in one call; return its id."""
        return think_in(self._emit_frame(), text, id)

    def message(
        self,
        role: ev.TextMessageRole = "assistant",
        *,
        id: str | None = None,
        name: str | None = None,
    ) -> MessageHandle:
        """Open a text message (``TEXT_MESSAGE_START``) under a fresh or given id."""
        return message_in(self._emit_frame(), role, id, name)

    def reasoning(self, *, id: str | None = None) -> ReasoningHandle:
        """Open a reasoning block (``REASONING_START``) under a fresh or given id."""
        return reasoning_in(self._emit_frame(), id)

    def tool_call(
        self,
        name: str,
        *,
        id: str | None = None,
        parent_message_id: str | None = None,
        frontend: bool = False,
    ) -> ToolCallHandle:
        """
        Open a call to tool *name* (``TOOL_CALL_START``) under a fresh or given id.

        With *frontend*, a call to the client's tool *name*, left for the client
        to answer (see `ambient_runs.tool_call`).
        """
        return tool_call_in(self._emit_frame(), name, id, parent_message_id, frontend)

    def call_frontend_tool(
        self,
        name: str,
        args: Any = None,
        *,
        id: str | None = None,
        parent_message_id: str | None = None,
    ) -> NoReturn:
        """Call the client's tool *name* and stop here (see `ambient_runs.call_frontend_tool`)."""
        call_frontend_tool_in(self._emit_frame(), name, args, id, parent_message_id)

    def activity(
        self,
        activity_type: str,
        content: Any,
        *,
        id: str | None = None,
    ) -> ActivityHandle:
        """Publish an activity message: a snapshot now, deltas on each `ActivityHandle.update`."""
        return activity_in(self._emit_frame(), activity_type, content, id)

    def usage(
        self,
        *,
        provider: str | None = None,
        model: str | None = None,
        **counts: Unpack[TokenCounts],
    ) -> ev.TokenUsage:
        """Record one model call's token usage in this scope (see `ambient_runs.usage`)."""
        return usage_in(self._emit_frame(), provider, model, counts)

    def set_state(self, state: Any) -> None:
        """Replace the run's state and publish the change, attributed to this scope."""
        set_state_in(self._emit_frame(), state)

    def update_state(self, update: Callable[[Any], Any]) -> None:
        """
        Change the run's state with *update* and publish the change, attributed to this scope.

        *update* receives the state and either mutates it in place (returning
        None) or returns the new state.
        """
        update_state_in(self._emit_frame(), update)

    def publish_state(self) -> None:
        """
        Publish whatever changed in the run's state since the last publish.

        The first publish is a ``STATE_DELTA`` against the state the client sent
        (a ``STATE_SNAPSHOT`` when it sent none, or when the patch's JSON is no
        smaller than the snapshot's), later ones likewise against the last
        publish. Nothing changed, nothing sent; a state that is None and was
        never set publishes nothing. State is compared in its wire form. The
        events are attributed to this scope (a subagent handle's invocation).
        """
        publish_state_in(self._emit_frame())

    def publish_messages(self) -> None:
        """Send the run's conversation as ``MESSAGES_SNAPSHOT`` (`ar.publish_messages`)."""
        publish_messages_in(self._emit_frame())

    def current_subagent_id(self) -> str | None:
        """
        Return the ``subagentRunId`` this emitter's events carry.

        None for a run (its methods emit the parent agent's own events); the
        invocation's id for a subagent handle.
        """
        return self._emit_frame().owner

    def emit(self, event: object) -> None:
        """
        Emit *event* as is: transformed and verified like any other.

        *event* is an `ambient_runs` event, an official ``ag_ui.core`` event or a
        wire dict (see `ambient_runs._foreign.coerce_event`).

        An attributable event without a ``subagent_run_id`` is attributed to this
        scope; one that carries its own keeps it. See `ambient_runs.emit` for what
        is refused.
        """
        emit_in(self._emit_frame(), event)


def say_in(frame: Frame, text: str, message_id: str | None) -> str:
    """Emit a whole assistant message in *frame*; return its id."""
    pipeline, owner = frame.pipeline, frame.owner
    mid = message_id or pipeline.new_message_id()
    send = pipeline.send
    content = ev.TextMessageContentEvent(message_id=mid, delta=text, subagent_run_id=owner)
    check_encodable(content)  # refused before its START goes out: nothing of it enters
    with pipeline.lock:
        send(ev.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=owner))
        send(content)
        send(ev.TextMessageEndEvent(message_id=mid, subagent_run_id=owner))
        if owner is not None:
            _owns_messages(frame, owner)
    pipeline.message_owners[mid] = owner
    return mid


def think_in(frame: Frame, text: str, message_id: str | None) -> str:
    """Emit a whole reasoning block in *frame*; return its id."""
    pipeline, owner = frame.pipeline, frame.owner
    mid = message_id or pipeline.new_message_id()
    send = pipeline.send
    content = ev.ReasoningMessageContentEvent(message_id=mid, delta=text, subagent_run_id=owner)
    check_encodable(content)  # refused before anything of the block goes out
    with pipeline.lock:
        send(ev.ReasoningStartEvent(message_id=mid, subagent_run_id=owner))
        send(ev.ReasoningMessageStartEvent(message_id=mid, subagent_run_id=owner))
        send(content)
        send(ev.ReasoningMessageEndEvent(message_id=mid, subagent_run_id=owner))
        send(ev.ReasoningEndEvent(message_id=mid, subagent_run_id=owner))
    return mid


def reasoning_in(frame: Frame, message_id: str | None) -> ReasoningHandle:
    """Open a reasoning block in *frame*."""
    return ReasoningHandle(frame, message_id or frame.pipeline.new_message_id())


def tool_call_in(
    frame: Frame,
    name: str,
    call_id: str | None,
    parent_message_id: str | None,
    frontend: bool = False,
) -> ToolCallHandle:
    """Open a tool call in *frame* (*frontend*: to the client's tool, `_frontend`)."""
    if frontend:
        return frontend_call_in(frame, name, call_id, parent_message_id)
    return ToolCallHandle(
        frame, call_id or frame.pipeline.new_tool_call_id(), name, parent_message_id
    )


def activity_in(
    frame: Frame, activity_type: str, content: Any, message_id: str | None
) -> ActivityHandle:
    """Publish an activity in *frame*."""
    return ActivityHandle(
        frame, message_id or frame.pipeline.new_message_id(), activity_type, content
    )


def message_in(
    frame: Frame, role: ev.TextMessageRole, message_id: str | None, name: str | None
) -> MessageHandle:
    """Open a text message in *frame*."""
    pipeline = frame.pipeline
    handle = MessageHandle(frame, message_id or pipeline.new_message_id(), role, name)
    owner = pipeline.message_owners[handle.id] = handle.owner
    if owner is not None:
        with pipeline.lock:
            _owns_messages(frame, owner)
    return handle


def _owns_messages(frame: Frame, owner: str) -> None:
    """
    Let a tool call of a message that *frame*'s subagent *owner* opened find its scope.

    `Pipeline.scopes` holds an open subagent's registry only once it owns a
    message (a tool call of that message joins it, ``ToolCallHandle``): the
    subagents that never open one, most decorated calls, cost no entry. Called
    under the run's lock, under which the subagent's end removes the entry again.
    """
    host = frame.host
    if host is not None and not host.ended:
        frame.pipeline.scopes.setdefault(owner, host.registry)


def publish_messages_in(frame: Frame) -> None:
    """Send the conversation of *frame*'s run as ``MESSAGES_SNAPSHOT``."""
    pipeline = frame.pipeline
    history = pipeline.history
    if history is None:
        msg = (
            "publish_messages() needs the run's history, and this run records none: make it "
            "with record_messages=True (Run, stream, AgentApp; AgentApp(threads=...) does), "
            "or send your own ambient_runs.events.MessagesSnapshotEvent with emit()"
        )
        raise MessagesNotRecordedError(msg)
    with pipeline.lock:
        pipeline.send(ev.MessagesSnapshotEvent(messages=history.messages()))


def emit_in(frame: Frame, raw: object) -> None:
    """Emit a raw event in *frame*, attributing it when it is untagged."""
    event = coerce_event(raw)  # ours as is; an official ag_ui.core event or a wire dict, read
    if type(event) in RUN_LIFECYCLE:
        raise lifecycle_refused(type(event), "emit()")
    if event is raw:  # built by the caller, who may have altered it: build it again, checked
        event = revalidated(event)
    refuse_reserved_metadata(getattr(event, "metadata", None), type(event).__name__)
    owner = frame.owner
    if owner is not None and type(event) in ev.ATTRIBUTABLE and event.subagent_run_id is None:  # type: ignore[attr-defined]
        event = attrs.evolve(cast(Any, event), subagent_run_id=owner)
    frame.pipeline.send(event)


def revalidated(event: ev.BaseEvent) -> ev.BaseEvent:
    """
    *event* rebuilt through its constructor, so every field is checked again.

    Events are frozen, but ``object.__setattr__`` and ``object.__new__`` get past
    that: a user-built event reaching the raw `emit` path is trusted no further
    than its constructor would trust its fields (the library's own emitters
    build theirs checked, or from values known to be valid).

    Raises:
        InvalidEventError: A field is invalid, or missing (made without the constructor).
    """
    cls = type(event)
    try:
        fields = {a.alias: getattr(event, a.name) for a in attrs.fields(cls) if a.init}
    except AttributeError as missing:
        msg = (
            f"{cls.__name__} was not made by its constructor ({missing}); "
            f"build events with {cls.__name__}(...)"
        )
        raise InvalidEventError(msg) from None
    rebuilt: ev.BaseEvent = cls(**fields)
    return rebuilt
