"""
Handles: open messages, reasoning blocks, tool calls, activities, steps and subagents.

A handle captures its *owner* (the ``subagentRunId`` of the scope that opened
it) when it is opened, and every continuation it emits carries that owner,
wherever it is called from: another task, a thread, a callback. Each handle is
a context manager and also works by explicit calls; ending one twice is
harmless and warns.

`Emitters` is the one implementation of the emitter methods, shared by `Run`
(the parent agent's own events), `Subagent` (that invocation's events) and the
module-level functions of ``_emit`` (whatever is ambient).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast, overload

import attrs

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._wire import check_json, json_form, wire_form
from ambient_runs.errors import (
    HandleClosedError,
    HandleWarning,
    InvalidEventError,
    LeftOpenWarning,
    ResultWarning,
)

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._run import Run
    from ambient_runs._scopes import Frame

__all__ = (
    "ActivityHandle",
    "Emitters",
    "MessageHandle",
    "ReasoningHandle",
    "Step",
    "Subagent",
    "ToolCallHandle",
)

P = ParamSpec("P")
R = TypeVar("R")


class _Handle:
    """Base of every handle: its run, owner, and the scope it is registered in."""

    __slots__ = ("_ended", "_owner", "_parent", "_run")

    _what: str = "handle"

    def __init__(self, frame: Frame) -> None:
        self._run = frame.run
        self._owner = frame.owner
        self._parent: Any = frame.subagent if frame.subagent is not None else frame.run
        self._ended = False

    @property
    def owner(self) -> str | None:
        """The ``subagentRunId`` every event of this handle carries (None: the parent agent)."""
        return self._owner

    @property
    def ended(self) -> bool:
        """Whether the handle has been ended."""
        return self._ended

    def _open(self, *opening: ev.BaseEvent) -> None:
        run = self._run
        with run._lock:
            for event in opening:
                run._send(event)
            self._parent._children[id(self)] = self

    def _closing(self) -> bool:
        """Mark the handle ended; False (after a warning) when it already was."""
        if self._ended:
            warnings.warn(
                f"{self._what} already ended; this end() did nothing", HandleWarning, stacklevel=3
            )
            return False
        self._ended = True
        self._parent._children.pop(id(self), None)
        return True

    def _check_open(self) -> None:
        if self._ended:
            msg = f"{self._what} has ended; open a new one to send more"
            raise HandleClosedError(msg)

    def end(self) -> None:
        """End the handle, emitting its closing event(s)."""
        raise NotImplementedError

    def _abandon(self, *, quietly: bool) -> None:
        """Close the handle on behalf of a scope that ended with it still open."""
        if not quietly:
            warnings.warn(
                f"{self._what} was still open when its scope ended; ambient_runs closed it",
                LeftOpenWarning,
                stacklevel=4,
            )
        self.end()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._ended:
            self.end()


#: Trusted constructors for the hot paths (see `events.unchecked`).
_content_event = ev.unchecked(ev.TextMessageContentEvent, "message_id", "delta", "subagent_run_id")
_subagent_started = ev.unchecked(
    ev.SubagentStartedEvent,
    "subagent_run_id",
    "name",
    "description",
    "parent_subagent_run_id",
    "parent_tool_call_id",
    "parent_message_id",
)
_subagent_finished = ev.unchecked(ev.SubagentFinishedEvent, "subagent_run_id", "result")


class MessageHandle(_Handle):
    """
    An open text message: ``TEXT_MESSAGE_START`` has been sent.

    Write deltas with `write`, consume an iterable with `stream` (or an async one
    with `astream`), and `end` it (or leave the ``with`` block).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("id", "role")
    _what = "message"

    def __init__(
        self, frame: Frame, message_id: str, role: ev.TextMessageRole, name: str | None
    ) -> None:
        super().__init__(frame)
        self.id = message_id
        self.role = role
        self._open(
            ev.TextMessageStartEvent(
                message_id=message_id,
                role=role,
                name=name,
                subagent_run_id=self._owner,
            )
        )

    def write(self, delta: str) -> None:
        """
        Send *delta*, the next piece of the message's text.

        Raises:
            HandleClosedError: The message has ended.
        """
        if self._ended:
            self._check_open()
        message_id = self.id
        if type(delta) is str and type(message_id) is str:  # the hot path: _content_event
            self._run._send(_content_event(message_id, delta, self._owner))
        else:  # the constructor validates (a str subclass passes, anything else raises)
            self._run._send(
                ev.TextMessageContentEvent(
                    message_id=message_id, delta=delta, subagent_run_id=self._owner
                )
            )

    def stream(self, chunks: Iterable[str]) -> str:
        """Write every chunk of *chunks*; return the whole text."""
        parts = []
        for chunk in chunks:
            self.write(chunk)
            parts.append(chunk)
        return "".join(parts)

    async def astream(self, chunks: AsyncIterable[str]) -> str:
        """
        Write every chunk of the async iterable *chunks*; return the whole text.

        Waits for the consumer (`Run.drain`) after each chunk, so a slow client
        applies backpressure to the model stream.
        """
        parts = []
        async for chunk in chunks:
            self.write(chunk)
            parts.append(chunk)
            await self._run.drain()
        return "".join(parts)

    def end(self) -> None:
        """Send ``TEXT_MESSAGE_END``. A second call warns and does nothing."""
        if self._closing():
            self._run._send(
                ev.TextMessageEndEvent(message_id=self.id, subagent_run_id=self._owner)
            )


class ReasoningHandle(_Handle):
    """
    An open reasoning block: ``REASONING_START`` has been sent.

    The first `write` opens a reasoning message under the same id; `end` closes
    the message (if open) and the block.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_message_open", "id")
    _what = "reasoning block"

    def __init__(self, frame: Frame, message_id: str) -> None:
        super().__init__(frame)
        self.id = message_id
        self._message_open = False
        self._open(ev.ReasoningStartEvent(message_id=message_id, subagent_run_id=self._owner))

    def write(self, delta: str) -> None:
        """
        Send *delta*, the next piece of reasoning text.

        Raises:
            HandleClosedError: The block has ended.
        """
        self._check_open()
        run, owner = self._run, self._owner
        if not self._message_open:
            run._send(ev.ReasoningMessageStartEvent(message_id=self.id, subagent_run_id=owner))
            self._message_open = True
        run._send(
            ev.ReasoningMessageContentEvent(message_id=self.id, delta=delta, subagent_run_id=owner)
        )

    def encrypted(self, value: str) -> None:
        """Attach an opaque encrypted value to this reasoning message."""
        self._run._send(
            ev.ReasoningEncryptedValueEvent(
                subtype="message",
                entity_id=self.id,
                encrypted_value=value,
                subagent_run_id=self._owner,
            )
        )

    def end(self) -> None:
        """Close the reasoning message (if one is open) and the block."""
        if self._closing():
            run, owner = self._run, self._owner
            with run._lock:
                if self._message_open:
                    run._send(
                        ev.ReasoningMessageEndEvent(message_id=self.id, subagent_run_id=owner)
                    )
                run._send(ev.ReasoningEndEvent(message_id=self.id, subagent_run_id=owner))


class ToolCallHandle(_Handle):
    """
    An open tool call: ``TOOL_CALL_START`` has been sent.

    Send the arguments with `args`, close them with `end`, and report the
    outcome with `result` (``TOOL_CALL_RESULT``, as a new tool message whose id
    `result_message_id` is fixed when the call opens).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("id", "name", "parent_message_id", "result_message_id")
    _what = "tool call"

    def __init__(
        self, frame: Frame, call_id: str, name: str, parent_message_id: str | None
    ) -> None:
        super().__init__(frame)
        # A tool call belongs to the message that carries it: take that message's
        # owner, and let that owner's scope close it if it is left open.
        if parent_message_id is not None:
            owner = frame.run._message_owners.get(parent_message_id, self._owner)
            if owner != self._owner:
                self._owner = owner
                self._parent = _open_scope_of(frame.run, owner) or self._parent
        self.id = call_id
        self.name = name
        self.parent_message_id = parent_message_id
        self.result_message_id = frame.run.new_message_id()
        self._open(
            ev.ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=name,
                parent_message_id=parent_message_id,
                subagent_run_id=self._owner,
            )
        )

    def args(self, delta: Any) -> None:
        """
        Send a piece of the arguments: text as is, any other JSON value as JSON text.

        Raises:
            HandleClosedError: The arguments were already closed with `end`.
        """
        self._check_open()
        text = (
            delta if isinstance(delta, str) else json.dumps(json_form(delta), ensure_ascii=False)
        )
        self._run._send(
            ev.ToolCallArgsEvent(tool_call_id=self.id, delta=text, subagent_run_id=self._owner)
        )

    def end(self) -> None:
        """Send ``TOOL_CALL_END``: the arguments are complete."""
        if self._closing():
            self._run._send(ev.ToolCallEndEvent(tool_call_id=self.id, subagent_run_id=self._owner))

    def result(self, content: Any) -> str:
        """
        Send the call's result as ``TOOL_CALL_RESULT``; end the call first if needed.

        Args:
            content: A string, a sequence of content parts, or any JSON value
                (sent as JSON text).

        Returns:
            The id of the tool message the result creates.
        """
        if not self._ended:
            self.end()
        if not isinstance(content, str) and not (
            isinstance(content, Sequence) and all(isinstance(p, ev._PARTS) for p in content)
        ):
            content = json.dumps(json_form(content), ensure_ascii=False)
        self._run._send(
            ev.ToolCallResultEvent(
                message_id=self.result_message_id,
                tool_call_id=self.id,
                content=content,
                subagent_run_id=self._owner,
            )
        )
        return self.result_message_id


class ActivityHandle(_Handle):
    """
    An activity message: ``ACTIVITY_SNAPSHOT`` first, then ``ACTIVITY_DELTA`` patches.

    `update` replaces the content and publishes the change with the same differ
    as run state. An activity stays until the conversation drops it, so ending
    the handle sends nothing.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("activity_type", "id", "tracker")
    _what = "activity"

    def __init__(self, frame: Frame, message_id: str, activity_type: str, content: Any) -> None:
        from ambient_runs._diff import StateTracker

        super().__init__(frame)
        self.id = message_id
        self.activity_type = activity_type
        self.tracker = StateTracker()
        self.update(content)

    def update(self, content: Any) -> None:
        """Publish *content* (a JSON object, attrs instance or dataclass) as the new content."""
        self._check_open()
        run, owner = self._run, self._owner
        with run._lock:
            change = tracked_change(self.tracker, content)
            if change is None:
                return
            kind, payload = change
            if kind == "snapshot":
                run._send(
                    ev.ActivitySnapshotEvent(
                        message_id=self.id,
                        activity_type=self.activity_type,
                        content=payload,
                        subagent_run_id=owner,
                    )
                )
            else:
                run._send(
                    ev.ActivityDeltaEvent(
                        message_id=self.id,
                        activity_type=self.activity_type,
                        patch=_operations(payload),
                        subagent_run_id=owner,
                    )
                )

    def end(self) -> None:
        """Stop updating the activity (nothing is sent)."""
        self._closing()


def _open_scope_of(run: Run, owner: str | None) -> Any:
    """Return the open scope (the run, or a subagent) whose ``subagentRunId`` is *owner*."""
    if owner is None:
        return run
    with run._lock:
        pending = list(run._children.values())
        while pending:
            handle = pending.pop()
            if isinstance(handle, Subagent):
                if handle.id == owner and not handle.ended:
                    return handle
                pending.extend(handle._children.values())
    return None


def tracked_change(tracker: Any, value: Any) -> tuple[str, Any] | None:
    """
    Publish *value* through a `StateTracker`: what to send, or None when nothing changed.

    Only what goes out is checked for a JSON form: the whole value for a snapshot,
    the operations for a delta, so an unchanged megabyte costs no encoding. When
    that check fails, the tracker is reset (the next publish is a snapshot) and
    `InvalidEventError` is raised.
    """
    try:
        change = tracker.publish(wire_form(value))
        if change is not None:
            check_json(change[1], value)
    except (TypeError, ValueError, RecursionError) as exc:
        tracker.reset()
        if isinstance(exc, InvalidEventError):
            raise
        msg = f"{type(value).__name__} has no JSON form: {exc}"
        raise InvalidEventError(msg) from None
    return cast("tuple[str, Any] | None", change)


def _operations(patch: Sequence[dict[str, Any]]) -> tuple[ev.JsonPatchOperation, ...]:
    ops: list[ev.JsonPatchOperation] = []
    for op in patch:
        cls = ev.OPERATION_CLASSES[op["op"]]
        kwargs = {("from_" if k == "from" else k): v for k, v in op.items() if k != "op"}
        ops.append(cls(**kwargs))
    return tuple(ops)


class _ScopeFaces:
    """
    The context-manager and decorator faces that `Step` and `Subagent` share.

    A scope provides `_begin` (announce it in a parent frame, return the frame
    to make ambient; warn and return the same frame when already started),
    `_finish` (end it the way the body ended), `_fresh` (a new scope with the
    same configuration, for each decorated call), and the two frame hooks below.
    """

    _what: str
    name: str
    _depth: int
    _token: Any

    if TYPE_CHECKING:

        @property
        def ended(self) -> bool: ...  # each scope class has its own

    def _parent_frame(self) -> Frame:
        """The frame a new scope starts in: a bound one, or the ambient one."""
        raise NotImplementedError

    def _started_frame(self) -> Frame | None:
        """The frame `_begin` made, or None before the scope starts."""
        raise NotImplementedError

    def _begin(self, parent: Frame) -> Frame:
        raise NotImplementedError

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        raise NotImplementedError

    def _fresh(self) -> Any:
        raise NotImplementedError

    def _release(self) -> None:
        """Drop references the ended scope no longer needs (a hook; nothing by default)."""

    def __enter__(self) -> Self:
        started = self._started_frame()
        if started is not None:  # re-entered (or entered after start()): warn, no re-announce
            self._begin(started)
            self._depth += 1
            return self
        self._token = _scopes.enter(self._begin(self._parent_frame()))
        self._depth = 1
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        if self._token is not None:
            _scopes.leave(self._token, self._started_frame(), f"{self._what} {self.name!r}")
            self._token = None
        if exc is not None:
            _safely(self._finish, exc)
        else:
            self._finish(None)
        if self.ended:
            self._release()

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...
    @overload
    def __call__(self, fn: Any) -> Any: ...
    def __call__(self, fn: Any) -> Any:
        """Decorate *fn*: each call runs inside a fresh scope like this one."""
        from ambient_runs._decorators import decorate

        return decorate(fn, self._fresh)


class Step(_ScopeFaces, _Handle):
    """
    A named step: ``STEP_STARTED`` on entry, ``STEP_FINISHED`` on exit.

    One object is a decorator (for sync, async, generator and async generator
    functions), a context manager (``with`` and ``async with``) and an explicit
    handle (`start`, `end`). Steps are per owner: the step belongs to the scope
    that was ambient when it started.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_depth", "_entered", "_frame_override", "_token", "name")
    _what = "step"

    def __init__(self, name: str, *, frame: Frame | None = None) -> None:
        # Not opened yet: a Step is also a decorator, created at import time.
        self.name = name
        self._frame_override = frame
        self._ended = False
        self._token: Any = None
        self._entered: Frame | None = None
        self._depth = 0

    def start(self) -> Self:
        """Send ``STEP_STARTED`` for the ambient (or bound) owner and return the step."""
        self._begin(self._frame_override or _require_frame("step"))
        return self

    def _begin(self, parent: Frame) -> Frame:
        if self._ended:
            msg = f"step {self.name!r} has ended and cannot be started again; use a new step()"
            raise HandleClosedError(msg)
        if self._entered is not None:
            warnings.warn(
                f"step {self.name!r} was already started; it was not started again",
                HandleWarning,
                stacklevel=3,
            )
            return self._entered
        _Handle.__init__(self, parent)
        self._open(ev.StepStartedEvent(step_name=self.name, subagent_run_id=self._owner))
        self._entered = parent.with_step(self.name, self)
        return self._entered

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        if not self._ended:
            self.end()

    def end(self) -> None:
        """Send ``STEP_FINISHED``. A second call warns and does nothing."""
        if self._closing():
            self._run._send(ev.StepFinishedEvent(step_name=self.name, subagent_run_id=self._owner))
            if not self._depth:  # no `with` block still needs the frame to leave it
                self._release()

    def _release(self) -> None:
        """Drop the ended step's frame: the two point at each other (see `Subagent._release`)."""
        self._entered = None

    def _fresh(self) -> Step:
        return Step(self.name, frame=self._frame_override)

    def _parent_frame(self) -> Frame:
        return self._frame_override or _require_frame("step")

    def _started_frame(self) -> Frame | None:
        return self._entered


# --------------------------------------------------------------------------- emitters


class Emitters:
    """
    The emitter methods, shared by `Run`, `Subagent` and the module-level functions.

    Each method attributes what it emits to the frame `_emit_frame` returns: the
    parent agent for a run, the invocation for a subagent handle.
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
    ) -> ToolCallHandle:
        """Open a call to tool *name* (``TOOL_CALL_START``) under a fresh or given id."""
        return tool_call_in(self._emit_frame(), name, id, parent_message_id)

    def activity(
        self,
        activity_type: str,
        content: Any,
        *,
        id: str | None = None,
    ) -> ActivityHandle:
        """Publish an activity message: a snapshot now, deltas on each `ActivityHandle.update`."""
        return activity_in(self._emit_frame(), activity_type, content, id)

    def step(self, name: str) -> Step:
        """A step owned by this emitter's scope: use it with ``with`` or `Step.start`."""
        return Step(name, frame=self._emit_frame())

    def subagent(
        self,
        name: str,
        *,
        description: str | None = None,
        id: str | None = None,
        parent_tool_call_id: str | None = None,
        parent_message_id: str | None = None,
    ) -> Subagent:
        """A subagent invocation nested in this emitter's scope."""
        return Subagent(
            name,
            description=description,
            id=id,
            parent_tool_call_id=parent_tool_call_id,
            parent_message_id=parent_message_id,
            parent=self._emit_frame(),
        )

    def subagent_with(self, started: ev.SubagentStartedEvent) -> Subagent:
        """
        A subagent nested in this emitter's scope, from an announcement you built.

        For a description, an explicit id (continuing a suspended invocation) or
        the agents-as-tools links; an absent ``parent_subagent_run_id`` is filled
        from this scope.
        """
        return Subagent.from_started(started, parent=self._emit_frame())

    def current_subagent_id(self) -> str | None:
        """
        Return the ``subagentRunId`` this emitter's events carry.

        None for a run (its methods emit the parent agent's own events); the
        invocation's id for a subagent handle.
        """
        return self._emit_frame().owner

    def emit(self, event: ev.BaseEvent) -> None:
        """
        Emit *event* as is: transformed and verified like any other.

        An attributable event without a ``subagent_run_id`` is attributed to this
        scope; one that carries its own keeps it.
        """
        emit_in(self._emit_frame(), event)


def say_in(frame: Frame, text: str, message_id: str | None) -> str:
    """Emit a whole assistant message in *frame*; return its id."""
    run, owner = frame.run, frame.owner
    mid = message_id or run.new_message_id()
    with run._lock:
        run._send(
            ev.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=owner)
        )
        run._send(ev.TextMessageContentEvent(message_id=mid, delta=text, subagent_run_id=owner))
        run._send(ev.TextMessageEndEvent(message_id=mid, subagent_run_id=owner))
    run._message_owners[mid] = owner
    return mid


def think_in(frame: Frame, text: str, message_id: str | None) -> str:
    """Emit a whole reasoning block in *frame*; return its id."""
    run, owner = frame.run, frame.owner
    mid = message_id or run.new_message_id()
    with run._lock:
        run._send(ev.ReasoningStartEvent(message_id=mid, subagent_run_id=owner))
        run._send(ev.ReasoningMessageStartEvent(message_id=mid, subagent_run_id=owner))
        run._send(
            ev.ReasoningMessageContentEvent(message_id=mid, delta=text, subagent_run_id=owner)
        )
        run._send(ev.ReasoningMessageEndEvent(message_id=mid, subagent_run_id=owner))
        run._send(ev.ReasoningEndEvent(message_id=mid, subagent_run_id=owner))
    return mid


def reasoning_in(frame: Frame, message_id: str | None) -> ReasoningHandle:
    """Open a reasoning block in *frame*."""
    return ReasoningHandle(frame, message_id or frame.run.new_message_id())


def tool_call_in(
    frame: Frame, name: str, call_id: str | None, parent_message_id: str | None
) -> ToolCallHandle:
    """Open a tool call in *frame*."""
    return ToolCallHandle(frame, call_id or frame.run.new_tool_call_id(), name, parent_message_id)


def activity_in(
    frame: Frame, activity_type: str, content: Any, message_id: str | None
) -> ActivityHandle:
    """Publish an activity in *frame*."""
    return ActivityHandle(frame, message_id or frame.run.new_message_id(), activity_type, content)


def message_in(
    frame: Frame, role: ev.TextMessageRole, message_id: str | None, name: str | None
) -> MessageHandle:
    """Open a text message in *frame*."""
    run = frame.run
    handle = MessageHandle(frame, message_id or run.new_message_id(), role, name)
    run._message_owners[handle.id] = handle.owner
    return handle


def emit_in(frame: Frame, event: ev.BaseEvent) -> None:
    """Emit a raw event in *frame*, attributing it when it is untagged."""
    owner = frame.owner
    if owner is not None and type(event) in ev.ATTRIBUTABLE and event.subagent_run_id is None:  # type: ignore[attr-defined]
        event = attrs.evolve(cast(Any, event), subagent_run_id=owner)
    frame.run._send(event)


class Subagent(_ScopeFaces, Emitters):
    """
    One subagent invocation, and the scope that attributes events to it.

    One object has three faces:

    - a **decorator**: ``@subagent("researcher")`` on a sync, async, generator or
      async generator function; every call is a new invocation with a fresh id;
    - a **context manager**: ``with subagent("researcher") as researcher:`` (or
      ``async with``); everything emitted inside, module-level ``say()`` included,
      carries ``researcher.id``;
    - an explicit **handle**: `start`, then `finish`, `finish_with`, `suspend`
      or `fail`, and the emitter methods (``researcher.say(…)``) that attribute
      to it from anywhere (callbacks, threads, foreign libraries).

    ``SUBAGENT_STARTED`` goes out on entry with ``parentSubagentRunId`` taken from
    the enclosing scope. How the scope ends decides the closing event:

    ===========================  ===================================================
    the body…                    emits
    ===========================  ===================================================
    returns                      ``SUBAGENT_FINISHED``, the return value as
                                 ``result`` when it has a JSON form (a
                                 `ResultWarning` and no result otherwise)
    raises `Interrupted`         ``SUBAGENT_FINISHED`` ``suspended``, naming the
                                 interrupts raised in this invocation
    is cancelled                 ``SUBAGENT_ERROR`` with code ``cancelled``
    is a generator closed early  ``SUBAGENT_FINISHED`` (the consumer had enough)
    raises ``SystemExit`` or     ``SUBAGENT_FINISHED``: not an error (metadata
    ``KeyboardInterrupt``        ``ambient_runs.exit`` names it)
    raises anything else         ``SUBAGENT_ERROR`` with the message, and the
                                 exception's ``code`` attribute (a string) or
                                 its class name as code
    ===========================  ===================================================

    The exception always propagates unchanged. Handles the invocation opened
    and left open are closed first (quietly after an exception, with a
    `LeftOpenWarning` after a normal exit).

    .. versionadded:: 0.1.0
    """

    _what = "subagent"

    # Set by `_setup` (in one update from *_initial*), then by the lifecycle.
    description: str | None
    parent_tool_call_id: str | None
    parent_message_id: str | None
    _id: str | None
    _parent_subagent_run_id: str | None
    _bound_parent: Frame | None
    _run: Run | None
    _frame: Frame | None
    _scope_parent: Any
    _started: bool
    _ended: bool
    _initial: dict[str, Any]

    def __init__(
        self,
        name: str,
        *,
        description: str | None = None,
        id: str | None = None,
        parent_tool_call_id: str | None = None,
        parent_message_id: str | None = None,
        parent_subagent_run_id: str | None = None,
        parent: Frame | None = None,
    ) -> None:
        # Checked once here, so each invocation's announcement can skip the checks.
        for field, value in (
            ("name", name),
            ("description", description),
            ("id", id),
            ("parent_tool_call_id", parent_tool_call_id),
            ("parent_message_id", parent_message_id),
            ("parent_subagent_run_id", parent_subagent_run_id),
        ):
            if not isinstance(value, str) and (value is not None or field == "name"):
                msg = f"subagent {field} must be a string, got {value!r}"
                raise InvalidEventError(msg)
        self._setup(
            name,
            description,
            id,
            parent_tool_call_id,
            parent_message_id,
            parent_subagent_run_id,
            parent,
        )

    @classmethod
    def from_started(
        cls, started: ev.SubagentStartedEvent, *, parent: Frame | None = None
    ) -> Subagent:
        """
        Return a subagent from an announcement you built (the seed's ``subagent_with``).

        An absent ``parent_subagent_run_id`` is filled from the enclosing scope
        (*parent*, or whatever is ambient when it starts).

        .. versionadded:: 0.1.0
        """
        return cls(
            started.name,
            description=started.description,
            id=started.subagent_run_id,
            parent_tool_call_id=started.parent_tool_call_id,
            parent_message_id=started.parent_message_id,
            parent_subagent_run_id=started.parent_subagent_run_id,
            parent=parent,
        )

    def _setup(
        self,
        name: str,
        description: str | None,
        id: str | None,
        parent_tool_call_id: str | None,
        parent_message_id: str | None,
        parent_subagent_run_id: str | None,
        parent: Frame | None,
    ) -> None:
        # Everything a new invocation starts with, kept as one dict: `_fresh`
        # (each decorated call) copies it in a single update.
        initial: dict[str, Any] = {
            "name": name,
            "description": description,
            "_id": id,
            "parent_tool_call_id": parent_tool_call_id,
            "parent_message_id": parent_message_id,
            "_parent_subagent_run_id": parent_subagent_run_id,
            "_bound_parent": parent,
            "_run": None,
            "_frame": None,
            "_scope_parent": None,
            "_started": False,
            "_ended": False,
            "_depth": 0,
            "_token": None,
        }
        self.__dict__.update(initial)
        self._initial = initial
        self._children: dict[int, Any] = {}

    # ------------------------------------------------------------------ identity

    @property
    def id(self) -> str | None:
        """The ``subagentRunId`` of this invocation: fixed when it starts (or given)."""
        return self._id

    @property
    def started(self) -> bool:
        """Whether ``SUBAGENT_STARTED`` has gone out."""
        return self._started

    @property
    def ended(self) -> bool:
        """Whether the invocation has been finished, suspended or failed."""
        return self._ended

    def __repr__(self) -> str:
        state = "ended" if self._ended else "open" if self._started else "not started"
        return f"<Subagent {self.name!r} id={self._id!r} {state}>"

    def _fresh(self) -> Subagent:
        """A new invocation with this one's configuration (what a decorator call makes)."""
        fresh = Subagent.__new__(Subagent)  # checked when this one was made: skip __init__
        fresh.__dict__.update(self._initial)
        fresh._initial = self._initial
        fresh._children = {}
        return fresh

    # ------------------------------------------------------------------ lifecycle

    def _begin(self, parent: Frame) -> Frame:
        if self._started:
            if self._frame is None:  # ended, and its frame released (see `_release`)
                msg = (
                    f"subagent {self.name!r} ({self._id}) has ended and cannot be entered again; "
                    f"use a new subagent({self.name!r}) (or subagent(..., id=...) to resume it)"
                )
                raise HandleClosedError(msg)
            warnings.warn(
                f"subagent {self.name!r} ({self._id}) was already started; it was not announced again",  # noqa: E501
                HandleWarning,
                stacklevel=3,
            )
            return self._frame
        run = parent.run
        sid = self._id
        if sid is None:
            sid = self._id = run.new_subagent_run_id()
        self._run = run
        self._started = True
        frame = self._frame = parent.with_subagent(self)
        scope_parent = self._scope_parent = run if parent.subagent is None else parent.subagent
        announce = _subagent_started(
            sid,
            self.name,
            self.description,
            self._parent_subagent_run_id or parent.owner,
            self.parent_tool_call_id,
            self.parent_message_id,
        )
        with run._lock:
            run._send(announce)
            scope_parent._children[id(self)] = self
        return frame

    def start(self) -> Self:
        """
        Announce the invocation (``SUBAGENT_STARTED``) without making it ambient.

        Use the handle's own emitter methods, or `ambient_runs.use(handle)`, to
        attribute events to it.

        Raises:
            NoActiveRunError: No run is ambient and the handle is not bound to one.
        """
        self._begin(self._bound_parent or _require_frame("subagent"))
        return self

    def _closing(self, *, warn: bool = True) -> Run | None:
        if not self._started:
            msg = f"subagent {self.name!r} was never started; enter it or call start() first"
            raise HandleClosedError(msg)
        if self._ended:
            if warn:
                warnings.warn(
                    f"subagent {self.name!r} ({self._id}) already ended; this call did nothing",
                    HandleWarning,
                    stacklevel=3,
                )
            return None
        self._ended = True
        return self._run

    def _close_children(self, *, quietly: bool) -> None:
        for child in reversed(list(self._children.values())):
            if not child.ended:
                child._abandon(quietly=quietly)

    def _end(self, event: ev.BaseEvent, *, quietly: bool = False, warn: bool = True) -> None:
        run = self._closing(warn=warn)
        if run is None:
            return
        with run._lock:
            if self._children:
                self._close_children(quietly=quietly)
            run._send(event)
            if self._scope_parent is not None:
                self._scope_parent._children.pop(id(self), None)
        if not self._depth:  # no `with` block still needs the frame to leave it
            self._release()

    def _release(self) -> None:
        """
        Drop the ended invocation's frame, so the two free each other at once.

        The frame points at its subagent and the subagent at its frame: a
        cycle, which without this would wait for the garbage collector on
        every decorated call. Frames still ambient somewhere (a task that
        outlived the scope) keep working: they only point one way.
        """
        self._frame = None

    def finish(self) -> None:
        """Send ``SUBAGENT_FINISHED`` with a success outcome. A second end warns."""
        self._end(ev.SubagentFinishedEvent(subagent_run_id=self._id or ""))

    def finish_with(self, result: Any) -> None:
        """
        Send ``SUBAGENT_FINISHED`` carrying *result*, the invocation's completion payload.

        Raises:
            InvalidEventError: *result* has no JSON form.
        """
        self._end(
            ev.SubagentFinishedEvent(subagent_run_id=self._id or "", result=json_form(result))
        )

    def suspend(self, interrupt_ids: str | Sequence[str] = ()) -> None:
        """
        Send ``SUBAGENT_FINISHED`` with a ``suspended`` outcome waiting on *interrupt_ids*.

        The run should then finish with an interrupt outcome carrying those
        interrupts; a later run continues the invocation with
        ``subagent(name, id=<this id>)``.
        """
        ids = (interrupt_ids,) if isinstance(interrupt_ids, str) else tuple(interrupt_ids)
        outcome = ev.SubagentFinishedSuspendedOutcome(interrupt_ids=ids or None)
        self._end(ev.SubagentFinishedEvent(subagent_run_id=self._id or "", outcome=outcome))

    def fail(self, message: str, *, code: str | None = None) -> None:
        """Send ``SUBAGENT_ERROR``: this invocation failed; the run goes on."""
        self._end(
            ev.SubagentErrorEvent(subagent_run_id=self._id or "", message=message, code=code)
        )

    def _abandon(self, *, quietly: bool) -> None:
        if not quietly:
            warnings.warn(
                f"subagent {self.name!r} ({self._id}) was still open when its scope ended; "
                "ambient_runs finished it",
                LeftOpenWarning,
                stacklevel=4,
            )
        self._end(ev.SubagentFinishedEvent(subagent_run_id=self._id or ""), quietly=quietly)

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        """End the invocation the way its body ended (see the class docstring)."""
        if self._ended:
            return
        sid = self._id or ""
        if exc is None:
            payload = _result_form(result, self.name)
            self._end(_subagent_finished(sid, payload), warn=False)
            return
        event: ev.BaseEvent
        interrupts = _interrupts_of(exc)
        if interrupts is not None:
            mine = tuple(i.id for i in interrupts if i.subagent_run_id == sid)
            outcome = ev.SubagentFinishedSuspendedOutcome(interrupt_ids=mine or None)
            event = ev.SubagentFinishedEvent(subagent_run_id=sid, outcome=outcome)
        elif isinstance(exc, GeneratorExit):
            event = ev.SubagentFinishedEvent(subagent_run_id=sid)
        elif isinstance(exc, SystemExit | KeyboardInterrupt):
            meta = {"ambient_runs": {"exit": type(exc).__name__}}
            event = ev.SubagentFinishedEvent(subagent_run_id=sid, metadata=meta)
        elif _is_cancellation(exc):
            event = ev.SubagentErrorEvent(
                subagent_run_id=sid, message="cancelled", code="cancelled"
            )
        else:
            event = ev.SubagentErrorEvent(
                subagent_run_id=sid, message=str(exc) or type(exc).__name__, code=_code_of(exc)
            )
        self._end(event, quietly=True, warn=False)

    def _parent_frame(self) -> Frame:
        return self._bound_parent or _require_frame("subagent")

    def _started_frame(self) -> Frame | None:
        return self._frame

    # ------------------------------------------------------------------ explicit emitters

    def _emit_frame(self) -> Frame:
        if self._frame is None:
            if self._ended:
                msg = f"subagent {self.name!r} ({self._id}) has ended; open a new one to send more"
            else:
                msg = f"subagent {self.name!r} has not started; enter it or call start() first"
            raise HandleClosedError(msg)
        return self._frame


def _safely(fn: Callable[..., None], *args: Any) -> None:
    """Run a scope's closing step on an exception path: never mask the user's exception."""
    try:
        fn(*args)
    except Exception:
        _scopes._log.debug("closing a scope after an exception failed", exc_info=True)


def _is_cancellation(exc: BaseException) -> bool:
    import asyncio

    from ambient_runs.errors import RunCancelledError

    return isinstance(exc, asyncio.CancelledError | RunCancelledError)


def _code_of(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else type(exc).__name__


def _interrupts_of(exc: BaseException) -> tuple[ev.Interrupt, ...] | None:
    """The interrupts *exc* carries, if it is `Interrupted` or a group of only those."""
    from ambient_runs._run import Interrupted

    if isinstance(exc, Interrupted):
        return exc.interrupts
    if isinstance(exc, BaseExceptionGroup):
        found: list[ev.Interrupt] = []
        for sub in exc.exceptions:
            inner = _interrupts_of(sub)
            if inner is None:
                return None
            found.extend(inner)
        return tuple(found)
    return None


def _result_form(result: Any, name: str) -> Any:
    if result is None:
        return None
    try:
        return json_form(result)
    except ValueError:
        warnings.warn(
            f"subagent {name!r} returned a {type(result).__name__}, which has no JSON form; "
            "SUBAGENT_FINISHED carries no result. Return JSON values, attrs instances or "
            "dataclasses, or call finish_with() yourself.",
            ResultWarning,
            stacklevel=4,
        )
        return None


def _require_frame(what: str) -> Frame:
    frame = _scopes.current()
    if frame is None:
        from ambient_runs.errors import NoActiveRunError

        msg = (
            f"{what}() needs an active run: call it inside `async with ambient_runs.Run(input):` "
            "(or a function that run calls), or use the run's own method, e.g. run.say()"
        )
        raise NoActiveRunError(msg)
    return frame
