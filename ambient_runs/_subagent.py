"""
`Subagent`: one subagent invocation; `SubagentSpec`: the template invocations are made from.

A `SubagentSpec` is frozen: a name, a description, an optional fixed id and the
agents-as-tools links, checked once. It is what a decorated function keeps,
and each call makes a fresh, single-use `Subagent` invocation from it. A
`Subagent` (what `ambient_runs.subagent` returns, not started yet) carries its
spec and its own lifecycle: started, ended and its open handles. Once started,
it is its own frame (a `_scopes.Frame`, what is ambient inside it): one object
per invocation, so a decorated call allocates one.

`Emitters`, the emitter methods of `Run` and `Subagent`, lives here too: its
`subagent` and `step` methods make invocations, and `Subagent` is itself an
`Emitters`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypedDict, TypeVar, Unpack

import attrs

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._accessors import RunAccessors
from ambient_runs._emitters import ContentEmitters
from ambient_runs._faces import Faces, SpecFaces
from ambient_runs._outcomes import (
    DEFAULT_POLICY,
    interrupts_of,
    result_form,
    result_json,
    subagent_ending,
)
from ambient_runs._reads import Reads
from ambient_runs._step import Step
from ambient_runs._wire import frame_pieces
from ambient_runs.errors import (
    HandleClosedError,
    HandleWarning,
    InvalidEventError,
)

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._pipeline import Registry
    from ambient_runs._run import Run
    from ambient_runs._scopes import Frame

__all__ = ("Emitters", "Subagent", "SubagentOptions", "SubagentSpec")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

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

#: The stdlib's C string encoder, the one the framed encoders use for every string.
_encode_str = json.encoder.encode_basestring


def _pieces(event: ev.BaseEvent, *fields: str) -> tuple[str, ...]:
    """The byte path's frame of *event* around the JSON of *fields* (see `frame_pieces`)."""
    pieces = frame_pieces(event, fields, "data: ", "\n\n")
    if pieces is None:  # pragma: no cover - the event classes' writers are fixed
        msg = f"{type(event).__name__} has no frame template around {fields}"
        raise TypeError(msg)
    return pieces


def _quoted(pieces: tuple[str, ...]) -> tuple[str, ...]:
    """
    *pieces* with the quotes of the JSON strings between them moved in.

    What goes between two pieces is then a string's escaped text (`_inner`):
    for an id the run minted, the id itself (`Pipeline.subagent_plain`), with no
    allocation to escape it.
    """
    if len(pieces) == 2:
        return (f'{pieces[0]}"', f'"{pieces[1]}')
    return (f'{pieces[0]}"', f'"{pieces[1]}"', f'"{pieces[2]}')


#: A plain SUBAGENT_FINISHED's frame around its id's text, the same for every invocation.
_FINISHED_HEAD, _FINISHED_TAIL = _quoted(_pieces(_subagent_finished("-", None), "subagent_run_id"))


def _inner(text: str) -> str:
    """The escaped text of *text* in JSON: its string's JSON without the quotes."""
    return _encode_str(text)[1:-1]


_OPTIONAL_TEXT = (
    "description",
    "id",
    "parent_tool_call_id",
    "parent_message_id",
    "parent_subagent_run_id",
)


class SubagentOptions(TypedDict, total=False):
    """
    The keywords ``subagent(name, **options)`` takes, besides the name.

    `ambient_runs.subagent` and the ``subagent`` method of `Run` and `Subagent`
    take them (PEP 692); `Subagent` and `SubagentSpec` document each.

    .. versionadded:: 0.1.0
    """

    #: What the subagent does, for display.
    description: str | None
    #: An explicit invocation id (continuing a suspended one); minted otherwise.
    id: str | None
    #: The tool call that spawned it (agents as tools).
    parent_tool_call_id: str | None
    #: The message holding that tool call.
    parent_message_id: str | None


@attrs.frozen
class SubagentSpec(SpecFaces["Subagent"]):
    """
    What a subagent is, apart from any invocation of it: the decorator's template.

    Frozen, and checked once when made, so that each invocation's announcement
    skips the checks. `invocation` makes a fresh `Subagent` from it; calling
    the spec on a function decorates it (each call of the function runs in a
    fresh invocation). ``parent`` binds invocations to a frame (the scope of a
    `Run` or `Subagent` whose ``subagent()`` method made the spec); None means
    whatever is ambient when an invocation starts.

    .. versionadded:: 0.1.0
    """

    name: str
    description: str | None = None
    id: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None
    parent_subagent_run_id: str | None = None
    parent: Frame | None = attrs.field(default=None, repr=False, eq=False)
    #: The byte path's pieces of SUBAGENT_STARTED (`_frames_of`): None until a decorated
    #: call first needs them, () when this spec has none (a fixed id or parent).
    _frames: tuple[str, ...] | None = attrs.field(default=None, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str):
            msg = f"subagent name must be a string, got {self.name!r}"
            raise InvalidEventError(msg)
        for field in _OPTIONAL_TEXT:
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                msg = f"subagent {field} must be a string, got {value!r}"
                raise InvalidEventError(msg)

    @classmethod
    def from_started(
        cls, started: ev.SubagentStartedEvent, *, parent: Frame | None = None
    ) -> SubagentSpec:
        """
        The spec of an announcement you built (``subagent_with``).

        An absent ``parent_subagent_run_id`` is filled from the enclosing scope
        (*parent*, or whatever is ambient when an invocation starts).
        """
        return cls(
            started.name,
            started.description,
            started.subagent_run_id,
            started.parent_tool_call_id,
            started.parent_message_id,
            started.parent_subagent_run_id,
            parent,
        )

    def invocation(self) -> Subagent:
        """A fresh invocation of this spec, not started yet."""
        return Subagent._of(self)

    def _start(self, parent: Frame, invocation: Subagent | None = None) -> Frame:
        """
        Start an invocation of this spec in *parent*: send SUBAGENT_STARTED, open its scope.

        Returns the invocation, now its own frame (``handle`` and ``host``: itself). A fresh
        invocation (one decorated call) unless *invocation*, not started yet,
        is given (`Subagent._begin`).

        A decorated call takes the byte path: on a stream consumed as SSE
        (`Pipeline.frames`), the announcement is one string, the spec's pieces
        (`_frames_of`) around the new id's JSON (and its parent's), which are
        the run's escaped prefix and the number, encoded once. Verified by
        construction, under the lock: the run is active (`frames` is cleared
        when it finishes), and the verifier's subagents accept and record it
        (`Subagents.open_minted`: the id is the next one minted, the parent
        active); otherwise the event goes the object path, which says why.
        """
        if invocation is None:
            invocation = _new(Subagent)
            invocation._spec = self  # the rest is set here: no `_setup`
            pieces = self._frames
            if pieces is None:
                pieces = self._frames_of()
        else:
            pieces = ()
        # The invocation is its own frame: entered from *parent*, no step yet.
        pipeline = invocation.pipeline = parent.pipeline
        invocation.parent = parent
        invocation.step_name = None
        invocation.orphaned = False
        invocation._started = True
        invocation._ended = False
        invocation._depth = 0
        invocation._token = None
        owner = parent.owner
        host = parent.host
        sid: str | None = None
        children: Registry = {}
        invocation.registry = children
        # An orphan (started in a subagent that has ended) joins the nearest open scope.
        home = invocation._home = (
            parent.registry if host is None or not host._ended else parent.open_registry()
        )
        lock = pipeline.lock
        lock.acquire()
        try:
            frames = pipeline.frames
            if pieces and frames is not None:  # pieces: the spec fixes no id (`_frames_of`)
                n = next(pipeline.subagent_numbers)
                run_id = pipeline.run_id
                sid = f"{run_id}-sub-{n}"
                plain = pipeline.subagent_plain
                mine = sid if plain else _inner(sid)
                if host is None:
                    data = f"{pieces[0]}{mine}{pieces[1]}".encode()
                else:  # a host minted here has its id's escaped text at hand
                    theirs = host._text or _inner(owner or "")
                    data = f"{pieces[2]}{mine}{pieces[3]}{theirs}{pieces[4]}".encode()
                view = pipeline.subagent_view
                if view is None or view.open_minted(sid, n, owner, run_id):
                    frames(data)
                    invocation._text = mine
                    invocation.owner = sid
                    home[invocation] = invocation
                    return invocation  # (the lock is released on the way out)
            # The object path: its checks say why the byte path could not take it.
            invocation._text = None
            if sid is None:  # (not minted above for the byte path): the spec's, else a new one
                sid = self.id
                if sid is None:
                    sid = pipeline.new_subagent_run_id()
            invocation.owner = sid
            pipeline.send(
                _subagent_started(
                    sid,
                    self.name,
                    self.description,
                    self.parent_subagent_run_id or owner,
                    self.parent_tool_call_id,
                    self.parent_message_id,
                )
            )
            home[invocation] = invocation
        finally:
            lock.release()
        return invocation

    def _frames_of(self) -> tuple[str, ...]:
        """
        Make the byte path's pieces of this spec's SUBAGENT_STARTED, once per spec.

        From the event class's one text writer (`frame_pieces`), so the name
        and the rest are escaped here, once: ``(head, tail)`` around the new
        id's JSON at the top level, then ``(head, middle, tail)`` around it and
        the parent's. () when invocations cannot take the byte path: a fixed
        id or parent (the generic checks decide), or text UTF-8 cannot carry.
        """
        pieces: tuple[str, ...] = ()
        if self.id is None and self.parent_subagent_run_id is None:
            fixed = (self.name, self.description)
            links = (self.parent_tool_call_id, self.parent_message_id)
            top = _pieces(_subagent_started("-", *fixed, None, *links), "subagent_run_id")
            nested = _subagent_started("-", *fixed, "-", *links)
            found = (
                *_quoted(top),
                *_quoted(_pieces(nested, "subagent_run_id", "parent_subagent_run_id")),
            )
            try:
                "".join(found).encode()
            except UnicodeEncodeError:  # a lone surrogate: the object path refuses it
                found = ()
            pieces = found
        object.__setattr__(self, "_frames", pieces)
        return pieces


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

    def subagent(self, name: str, **options: Unpack[SubagentOptions]) -> Subagent:
        """A subagent invocation nested in this emitter's scope (see `ambient_runs.subagent`)."""
        return Subagent(name, parent=self._emit_frame(), **options)

    def subagent_with(self, started: ev.SubagentStartedEvent) -> Subagent:
        """
        A subagent nested in this emitter's scope, from an announcement you built.

        For a description, an explicit id (continuing a suspended invocation) or
        the agents-as-tools links; an absent ``parent_subagent_run_id`` is filled
        from this scope.
        """
        return SubagentSpec.from_started(started, parent=self._emit_frame()).invocation()


_new = object.__new__


class Subagent(_scopes.Frame, Faces, Emitters, RunAccessors):
    """
    One subagent invocation, and the scope that attributes events to it.

    `subagent` returns one, not started yet. Single use: it starts once, ends
    once, and is never entered again after it ended. It has three faces:

    - a **decorator**: ``@subagent("researcher")`` on a sync, async, generator or
      async generator function decorates with the invocation's frozen
      `SubagentSpec` (`spec`); every call is a new invocation with a fresh id;
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
    raises anything else         ``SUBAGENT_ERROR`` with the run's error policy's
                                 message (generic unless an `AgentError`, or
                                 the run exposes errors), and the exception's
                                 ``code`` attribute (a string) or its class
                                 name as code
    ===========================  ===================================================

    The exception always propagates unchanged. Handles the invocation opened
    and left open are closed first (quietly after an exception, with a
    `LeftOpenWarning` after a normal exit).

    Once started, an invocation is its own frame (what is ambient inside it),
    so it also carries a frame's fields (``owner``, ``parent``, ``pipeline``,
    ``registry``, ``step_name``, ``orphaned``): package-internal, like
    `Run.pipeline`; read `id`, `run` and the emitter methods instead.

    .. versionadded:: 0.1.0
    """

    __slots__ = (
        "__weakref__",
        "_depth",
        "_ended",
        "_home",
        "_spec",
        "_started",
        "_text",
        "_token",
    )
    _what = "subagent"

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
        self._setup(
            SubagentSpec(
                name,
                description,
                id,
                parent_tool_call_id,
                parent_message_id,
                parent_subagent_run_id,
                parent,
            )
        )

    def _setup(self, spec: SubagentSpec) -> None:
        self._spec = spec
        self.owner = spec.id
        #: `owner`'s text as its frames hold it (JSON-escaped) when the byte path minted it
        #: (``<run id>-sub-<n>``), else None.
        self._text: str | None = None
        #: Its own frame's registry: the handles opened inside it.
        self.registry = {}
        #: The registry it is open in (its parent scope's), once started.
        self._home: Registry | None = None
        self._started = False
        self._ended = False
        self._depth = 0
        self._token: Any = None

    # ------------------------------------------------------------------ identity

    spec: Reads[SubagentSpec] = Reads(
        "_spec", "The frozen template this invocation was made from (what decorating keeps)."
    )
    name: Reads[str] = Reads("_spec.name", "The subagent's reusable name.")
    description: Reads[str | None] = Reads(
        "_spec.description", "What the subagent does, for display."
    )
    parent_tool_call_id: Reads[str | None] = Reads(
        "_spec.parent_tool_call_id",
        "The tool call that spawned it (agents as tools).",
    )
    parent_message_id: Reads[str | None] = Reads(
        "_spec.parent_message_id", "The message holding that tool call."
    )
    id: Reads[str | None] = Reads(
        "owner", "The ``subagentRunId`` of this invocation: fixed when it starts (or given)."
    )
    started: Reads[bool] = Reads("_started", "Whether ``SUBAGENT_STARTED`` has gone out.")
    ended: Reads[bool] = Reads(
        "_ended", "Whether the invocation has been finished, suspended or failed."
    )

    def __repr__(self) -> str:
        state = "ended" if self._ended else "open" if self._started else "not started"
        return f"<Subagent {self._spec.name!r} id={self.owner!r} {state}>"

    # ------------------------------------------------------------------ lifecycle

    def _begin(self, parent: Frame) -> Frame:
        spec = self._spec
        if self._started:
            if self._started_frame() is None:  # ended, and no `with` block is inside it
                msg = (
                    f"subagent {spec.name!r} ({self.owner}) has ended and cannot be entered "
                    f"again; use a new subagent({spec.name!r}) (or subagent(..., id=...) to "
                    "resume it)"
                )
                raise HandleClosedError(msg)
            warnings.warn(
                f"subagent {spec.name!r} ({self.owner}) was already started; it was not announced again",  # noqa: E501
                HandleWarning,
                stacklevel=3,
            )
            return self
        return self._spec._start(parent, self)

    def start(self) -> Self:
        """
        Announce the invocation (``SUBAGENT_STARTED``) without making it ambient.

        Use the handle's own emitter methods, or `ambient_runs.use(handle)`, to
        attribute events to it.

        Raises:
            NoActiveRunError: No run is ambient and the handle is not bound to one.
        """
        self._begin(self._spec.parent or _scopes.require("subagent"))
        return self

    def _closing(self, *, warn: bool = True) -> bool:
        """Whether the invocation can end now: started (or raise), not ended (or warn)."""
        if not self._started:
            msg = f"subagent {self.name!r} was never started; enter it or call start() first"
            raise HandleClosedError(msg)
        if self._ended:
            if warn:
                warnings.warn(
                    f"subagent {self.name!r} ({self.owner}) already ended; this call did nothing",
                    HandleWarning,
                    stacklevel=3,
                )
            return False
        return True

    def _end(
        self, event: ev.BaseEvent | None, *, quietly: bool = False, warn: bool = True
    ) -> None:
        """End the invocation with *event* (None: a plain ``SUBAGENT_FINISHED``), checked."""
        if self._closing(warn=warn):
            self._conclude(None, event, quietly)

    def _conclude(
        self, result: Any = None, event: ev.BaseEvent | None = None, quietly: bool = False
    ) -> None:
        """
        End the invocation: close what it left open, send its end, close its scope.

        *event* None is ``SUBAGENT_FINISHED`` carrying *result*'s JSON form (a
        `ResultWarning` and none when it has none), or, *result* None, a plain
        one: on the byte path (see `SubagentSpec._start`) one string, its id's
        text between two fixed pieces, once the verifier's subagents accept and
        record it (`Subagents.close_plain`), else the event, through the object
        path. What a decorated call's return comes to, in one call (`Frame`'s
        ``_conclude``); ended already, nothing; never started, `HandleClosedError`.
        """
        if self._ended:
            return
        if not self._started:
            self._closing()  # raises
        sid: str = self.owner  # type: ignore[assignment]  # started: it has an id
        if result is not None and event is None:
            payload = result_form(result, self._spec.name)  # may warn: before it ends
            if payload is not None:
                event = _subagent_finished(sid, payload)
        self._ended = True
        pipeline = self.pipeline
        lock = pipeline.lock
        lock.acquire()
        try:
            children = self.registry
            if children:
                pipeline.close_left_open(children, quietly=quietly)
            if event is None:
                frames = pipeline.frames
                if frames is not None:
                    mine = self._text or _inner(sid)  # (minted here: its text at hand)
                    try:
                        data = f"{_FINISHED_HEAD}{mine}{_FINISHED_TAIL}".encode()
                    except UnicodeEncodeError:  # an id a transformer hid from the checks
                        frames = None
                view = pipeline.subagent_view
                if frames is not None and (view is None or view.close_plain(sid)):
                    frames(data)
                else:
                    pipeline.send(_subagent_finished(sid, None))
            else:
                pipeline.send(event)
            self._home.pop(self, None)  # type: ignore[union-attr]  # started: it has a home
            scopes = pipeline.scopes
            if scopes.get(sid) is children:
                del scopes[sid]
        finally:
            lock.release()
        token = self._token
        # An explicit terminator inside the invocation's own `with` block: what
        # follows in the block belongs to the enclosing scope again.
        if (
            token is not None
            and _scopes.current() is self
            and _scopes.leave(token, self, f"subagent {self.name!r}")
        ):
            self._token = None

    def _orphan(self) -> None:
        """The run is over: mark the invocation ended, sending nothing (`Pipeline.close`
        marks what it left open, without recursing)."""
        self._ended = True
        self.registry.clear()

    def _open_children(self) -> Registry | None:
        return self.registry

    def finish(self) -> None:
        """Send ``SUBAGENT_FINISHED`` with a success outcome. A second end warns."""
        self._end(None)

    def finish_with(self, result: Any) -> None:
        """
        Send ``SUBAGENT_FINISHED`` carrying *result*, the invocation's completion payload.

        Raises:
            InvalidEventError: *result* has no JSON form.
        """
        self._end(
            ev.SubagentFinishedEvent(subagent_run_id=self.owner or "", result=result_json(result))
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
        self._end(ev.SubagentFinishedEvent(subagent_run_id=self.owner or "", outcome=outcome))

    def fail(self, message: str, *, code: str | None = None) -> None:
        """Send ``SUBAGENT_ERROR``: this invocation failed; the run goes on."""
        self._end(
            ev.SubagentErrorEvent(subagent_run_id=self.owner or "", message=message, code=code)
        )

    def _abandon(self) -> None:
        # The pipeline closed what it held open first (depth first): nothing warns here.
        self._end(None, quietly=True)

    def _left_open(self) -> str:
        return (
            f"subagent {self.name!r} ({self.owner}) was still open when its scope ended; "
            "ambient_runs finished it. Finish it before its parent ends: use `with "
            "ambient_runs.subagent(...)` or the decorator, or call its finish() "
            "(finish_with(), fail())"
        )

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        """End the invocation the way its body ended (see the class docstring)."""
        if self._ended:
            return
        if exc is None:
            self._conclude(result)
            return
        sid = self.owner or ""
        interrupts = interrupts_of(exc)
        started = self.pipeline if self._started else None
        if interrupts and started is not None:
            pending = started.pending_interrupts
            with started.lock:
                for interrupt in interrupts:
                    pending.setdefault(interrupt.id, interrupt)
        policy = started.error_policy if started is not None else DEFAULT_POLICY
        self._end(subagent_ending(sid, exc, policy), quietly=True, warn=False)

    def _parent_frame(self) -> Frame:
        return self._spec.parent or _scopes.require("subagent")

    def _started_frame(self) -> Frame | None:
        """Itself once started, until it has ended and no `with` block is left to leave it."""
        if not self._started or (self._ended and not self._depth and self._token is None):
            return None
        return self

    @property
    def host(self) -> Subagent:  # type: ignore[override]  # a slot of PlainFrame
        """As a frame: the invocation its events are attributed to, itself."""
        return self

    @property
    def handle(self) -> Subagent:
        """As a frame: the invocation whose end ends it, itself."""
        return self

    # ------------------------------------------------------------------ the run, via the handle

    @property
    def run(self) -> Run:
        """
        The run this invocation belongs to: its input, state and cancellation.

        Raises:
            HandleClosedError: The invocation has not started (it has no run yet).
        """
        if not self._started:
            msg = f"subagent {self.name!r} has not started; enter it or call start() first"
            raise HandleClosedError(msg)
        return self.pipeline.run

    @property
    def input(self) -> ev.RunAgentInput:
        """The run's request (`Run.input`)."""
        return self.run.input

    def _accessed_run(self) -> Run:
        return self.run

    # ------------------------------------------------------------------ explicit emitters

    def _emit_frame(self) -> Frame:
        if self._started_frame() is None:
            if self._ended:
                msg = (
                    f"subagent {self.name!r} ({self.owner}) has ended; open a new one to send more"
                )
            else:
                msg = f"subagent {self.name!r} has not started; enter it or call start() first"
            raise HandleClosedError(msg)
        return self
