"""
`Subagent`: one subagent invocation, and `Emitters`, the emitter methods of `Run` and `Subagent`.

`Emitters` adds the two emitters that open scopes (`step`, `subagent`) to the
content emitters; it lives here because `subagent` returns a `Subagent`, which
is itself an `Emitters`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._emitters import ContentEmitters
from ambient_runs._faces import Faces
from ambient_runs._outcomes import code_of, interrupts_of, is_cancellation, result_form
from ambient_runs._step import Step
from ambient_runs._wire import json_form
from ambient_runs.errors import (
    HandleClosedError,
    HandleWarning,
    InvalidEventError,
    LeftOpenWarning,
)

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._pipeline import Pipeline, Registry
    from ambient_runs._scopes import Frame

__all__ = ("Emitters", "Subagent")


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


class Emitters(ContentEmitters):
    """
    The emitter methods, shared by `Run` and `Subagent`: content, steps and subagents.

    Each method attributes what it emits to the frame `_emit_frame` returns: the
    parent agent for a run, the invocation for a subagent handle.
    """

    __slots__ = ()

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


class Subagent(Faces, Emitters):
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
    _pipeline: Pipeline | None
    _frame: Frame | None
    _registry: Registry | None
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
            "_pipeline": None,
            "_frame": None,
            "_registry": None,
            "_started": False,
            "_ended": False,
            "_depth": 0,
            "_token": None,
        }
        self.__dict__.update(initial)
        self._initial = initial
        self._children: Registry = {}

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
        pipeline = self._pipeline = parent.pipeline
        sid = self._id
        if sid is None:
            sid = self._id = pipeline.new_subagent_run_id()
        self._started = True
        frame = self._frame = parent.with_subagent(self)
        registry = pipeline.scopes.get(parent.owner)
        if registry is None:
            registry = pipeline.root
        self._registry = registry
        announce = _subagent_started(
            sid,
            self.name,
            self.description,
            self._parent_subagent_run_id or parent.owner,
            self.parent_tool_call_id,
            self.parent_message_id,
        )
        with pipeline.lock:
            pipeline.send(announce)
            registry[id(self)] = self
            pipeline.scopes.setdefault(sid, self._children)
        return frame

    def start(self) -> Self:
        """
        Announce the invocation (``SUBAGENT_STARTED``) without making it ambient.

        Use the handle's own emitter methods, or `ambient_runs.use(handle)`, to
        attribute events to it.

        Raises:
            NoActiveRunError: No run is ambient and the handle is not bound to one.
        """
        self._begin(self._bound_parent or _scopes.require("subagent"))
        return self

    def _closing(self, *, warn: bool = True) -> Pipeline | None:
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
        return self._pipeline

    def _end(self, event: ev.BaseEvent, *, quietly: bool = False, warn: bool = True) -> None:
        pipeline = self._closing(warn=warn)
        if pipeline is None:
            return
        with pipeline.lock:
            children = self._children
            if children:
                pipeline.close_left_open(children, quietly=quietly)
            pipeline.send(event)
            if self._registry is not None:
                self._registry.pop(id(self), None)
            if pipeline.scopes.get(self._id) is children:
                del pipeline.scopes[self._id]
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

    def _orphan(self) -> None:
        """The run is over: mark the invocation and what it left open ended, sending nothing."""
        self._ended = True
        for child in list(self._children.values()):
            child._orphan()
        self._children.clear()

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
            payload = result_form(result, self.name)
            self._end(_subagent_finished(sid, payload), warn=False)
            return
        event: ev.BaseEvent
        interrupts = interrupts_of(exc)
        if interrupts is not None:
            mine = tuple(i.id for i in interrupts if i.subagent_run_id == sid)
            outcome = ev.SubagentFinishedSuspendedOutcome(interrupt_ids=mine or None)
            event = ev.SubagentFinishedEvent(subagent_run_id=sid, outcome=outcome)
        elif isinstance(exc, GeneratorExit):
            event = ev.SubagentFinishedEvent(subagent_run_id=sid)
        elif isinstance(exc, SystemExit | KeyboardInterrupt):
            meta = {"ambient_runs": {"exit": type(exc).__name__}}
            event = ev.SubagentFinishedEvent(subagent_run_id=sid, metadata=meta)
        elif is_cancellation(exc):
            event = ev.SubagentErrorEvent(
                subagent_run_id=sid, message="cancelled", code="cancelled"
            )
        else:
            event = ev.SubagentErrorEvent(
                subagent_run_id=sid, message=str(exc) or type(exc).__name__, code=code_of(exc)
            )
        self._end(event, quietly=True, warn=False)

    def _parent_frame(self) -> Frame:
        return self._bound_parent or _scopes.require("subagent")

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
