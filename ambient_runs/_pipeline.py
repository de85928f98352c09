"""
`Pipeline`: where every event of one run goes, and the run's shared bookkeeping.

One pipeline per `Run`. It owns, under one re-entrant lock:

- the **path of an event**: `send` applies the run's transformers, then the
  encodability check (``_wire.check_encodable``: a value JSON cannot carry is
  refused with `InvalidEventError` before anything else sees it), then the
  verifier, then the sink, then the taps. A transformer's output is verified
  like anything else; a violation raises `ProtocolError` and the event never
  reaches the sink. The run's lifecycle events (`RUN_LIFECYCLE`) are the
  run's own: a transformer may rewrite them, but may not make one out of
  another event (`ProtocolError`, rule ``run-lifecycle``, as for ``emit()``).
  The lock makes the stream totally ordered when several threads emit at once;
- the **ids** the run hands out (messages, tool calls, subagents, interrupts);
- the **finished flag**: once the terminal event is out, `send` refuses; the
  terminal event goes out through `finish` (transformers and verifier, like
  any other), or, when that fails, through `last_resort`;
- the run's **error policy** (``_outcomes.ErrorPolicy``): what a client learns
  of an exception, read by every scope that ends with one;
- the **open handles** of each scope (a `Registry`, the frame's): the handles
  opened in it and not yet ended, in opening order. A scope that ends closes
  what is left in its registry (`close_left_open`). A tool call joins the
  registry of the message it belongs to (`message_owners`), found by owner in
  `scopes`: the run's own (owner None) and each open subagent invocation's
  that owns a message (owner: its id);
- the **drain hook** a streaming transport installs for backpressure, and the
  run's typed state (published by ``_state``);
- the **byte path** (`frames`): when a stream is consumed as SSE
  (`set_frame_sink`) and no transformer or tap asks for event objects, the
  library's own hot events (a message's deltas) go into the sink as finished
  SSE frames (bytes), built from per-handle templates, verified by
  construction against the verifier's state (`content_view`), under the same
  lock and in the same order as every object event.

Handles bind `send` once, when they open, and call it for every event; nothing
outside this module touches the lock-protected fields except under `lock`.
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections.abc import Awaitable, Callable, Sequence, Sized
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from ambient_runs import events as ev
from ambient_runs._outcomes import DEFAULT_POLICY, ErrorPolicy
from ambient_runs._reads import Reads
from ambient_runs._usage import UsageTotals
from ambient_runs._wire import ENCODABLE, check_encodable, json_verbatim
from ambient_runs.errors import LeftOpenWarning, ProtocolError, warn_at_user

if TYPE_CHECKING:
    from ambient_runs._history import History, Text
    from ambient_runs._run import Run
    from ambient_runs._state import RunState

__all__ = (
    "RUN_LIFECYCLE",
    "DrainHook",
    "OpenHandle",
    "Pipeline",
    "Registry",
    "Sink",
    "Transformer",
    "UNCHECKED",
    "lifecycle_refused",
)

Sink = Callable[[ev.BaseEvent], object]
"""Where a run's events go: any callable taking one event. Called under the run's lock."""

Transformer = Callable[[ev.BaseEvent], "ev.BaseEvent | Sequence[ev.BaseEvent] | None"]
"""Rewrites one event: return it (changed or not), None to drop it, or several."""


#: The run's own events: `Run` sends RUN_STARTED and the one terminal event, nobody else.
RUN_LIFECYCLE: frozenset[type[ev.BaseEvent]] = frozenset(
    {ev.RunStartedEvent, ev.RunFinishedEvent, ev.RunErrorEvent}
)


def lifecycle_refused(kind: type[ev.BaseEvent], by: str) -> ProtocolError:
    """The error for a run lifecycle event that *by* (``emit()``, a transformer) tried to send."""
    msg = (
        f"{by} cannot send {kind.TYPE.value}: RUN_STARTED, RUN_FINISHED and RUN_ERROR belong to "
        "the run, which sends them itself, exactly once. End the agent normally (return, or "
        "run.finish_with(result)) to finish, raise to fail, or raise Interrupted to pause."
    )
    return ProtocolError(msg, rule="run-lifecycle")


_T = TypeVar("_T")


def _without(items: tuple[_T, ...], item: _T, what: str) -> tuple[_T, ...]:
    """*items* less the first that equals *item*; `ValueError` naming the fix when none does."""
    try:
        at = items.index(item)
    except ValueError:
        msg = (
            f"{item!r} is not in this run's {what}: remove only one that was added to the "
            "run (or given to it), and only once"
        )
        raise ValueError(msg) from None
    return (*items[:at], *items[at + 1 :])


class OpenHandle(Protocol):
    """What the pipeline needs of a handle it keeps in a registry."""

    @property
    def ended(self) -> bool: ...

    def _abandon(self) -> None:
        """Close the handle for its scope, which ended with it open (the caller warns)."""

    def _left_open(self) -> str:
        """The `LeftOpenWarning`'s text for this handle: ``"<what> was still open …"``."""

    def _orphan(self) -> None:
        """The run is over: mark the handle ended without sending anything."""

    def _open_children(self) -> Registry | None:
        """The registry of handles opened *inside* this one (a subagent's), or None."""


#: One dict lookup for the hot path: the encodability check of an event's exact class.
_ENCODABLE_GET = ENCODABLE.get


class DrainHook(Protocol):
    """
    What a streaming transport installs as `Pipeline.drain_hook` (a stream's buffer).

    `Pipeline.drain` calls `gate` only once ``len(buffer) >= due``: below that
    an agent that drains after every token pays a length and a comparison, no
    call and no coroutine. The transport keeps `due` at the smallest size at
    which `gate` might have something to wait for.
    """

    @property
    def buffer(self) -> Sized: ...

    @property
    def due(self) -> int: ...

    def gate(self) -> Awaitable[None] | None:
        """What to await now (the consumer's turn, or backpressure), or None."""


class _Unchecked(enum.Enum):
    UNCHECKED = "UNCHECKED"


UNCHECKED: Final = _Unchecked.UNCHECKED
"""`Pipeline.send`'s default *text*: the event gets the encodability check."""

Registry = dict[OpenHandle, OpenHandle]
"""
The open handles of one scope, in opening order: each is its own key.

Handles hash by identity, in C: no ``id()`` and no int made per open and close.
"""


class Pipeline:
    """
    The emit path and bookkeeping of one run (see the module docstring).

    Args:
        run_id: The run's id, the prefix of every id it hands out.
        sink: Where verified events go.
        transformers: Applied in order to every event before verification.
        check: The verifier's ``check`` (raises `ProtocolError`), or None.
        taps: Extra sinks, called after *sink*.
        state: The run's typed state.
    """

    __slots__ = (
        "_check",
        "_frame_sink",
        "_interrupt_ids",
        "_message_ids",
        "_sink",
        "_taps",
        "_tool_call_ids",
        "_transformers",
        "binary_frames",
        "content_view",
        "drain_hook",
        "error_policy",
        "finished",
        "frames",
        "frontend_calls",
        "history",
        "lock",
        "message_owners",
        "pending_interrupts",
        "root",
        "run",
        "run_id",
        "scopes",
        "state",
        "subagent_numbers",
        "subagent_plain",
        "subagent_view",
        "terminal",
        "usage",
    )

    def __init__(
        self,
        run: Run,
        run_id: str,
        sink: Sink,
        transformers: Sequence[Transformer],
        check: Callable[[ev.BaseEvent], None] | None,
        taps: Sequence[Sink],
        state: RunState,
    ) -> None:
        self.run_id = run_id
        self._sink = sink
        self._transformers = tuple(transformers)
        #: The run this pipeline serves (what a frame's ``run`` reads).
        self.run = run
        self._check = check
        # A tuple, like `_transformers`, replaced whole under the lock (`add_tap`,
        # `remove_tap`): a delivery in flight goes on over the taps it started with,
        # whatever a tap adds or removes meanwhile; a run without taps holds the shared ().
        self._taps: tuple[Sink, ...] = tuple(taps)
        self.lock = threading.RLock()
        self._message_ids = itertools.count(1)
        self._tool_call_ids = itertools.count(1)
        #: The numbers of the subagent ids the run mints (``<run id>-sub-<n>``): by
        #: `new_subagent_run_id`, and by the byte path of a decorated call (``_subagent``).
        self.subagent_numbers = itertools.count(1)
        self._interrupt_ids = itertools.count(1)
        #: Whether the terminal event has gone out (or the run is over): `send` refuses.
        self.finished = False
        #: The terminal event delivered (`finish`, `last_resort`), None before.
        self.terminal: ev.BaseEvent | None = None
        #: What clients learn of exceptions (`Run`'s *expose_errors*, *describe_error*).
        self.error_policy: ErrorPolicy = DEFAULT_POLICY
        #: The run's own registry: handles opened by the parent agent.
        self.root: Registry = {}
        #: The registry of open scopes by owner (None: the run's, `root`): the run's and
        #: each open subagent's that owns a message (``_emitters._owns_messages``).
        self.scopes: dict[str | None, Registry] = {None: self.root}
        #: The owner of every message opened in the run, by message id.
        self.message_owners: dict[str, str | None] = {}
        #: The interrupts suspended invocations are waiting on, by id: the run must
        #: end with them even when user code caught the `Interrupted`.
        self.pending_interrupts: dict[str, ev.Interrupt] = {}
        #: The calls to the client's tools made in the run, in order (``_frontend``):
        #: the success outcome's ``pendingToolCallIds``. A tuple: no allocation per run.
        self.frontend_calls: tuple[str, ...] = ()
        #: Looked at by `drain`: installed by a streaming transport for backpressure.
        self.drain_hook: DrainHook | None = None
        #: The run's typed state and its publisher (``_state.RunState``).
        self.state = state
        #: The token usage recorded in the run, summed per provider and model.
        self.usage = UsageTotals(self.lock)
        #: The run's conversation (``_history.History``), fed every delivered event;
        #: None when the run does not record its messages.
        self.history: History | None = None
        self._frame_sink: Callable[[bytes], object] | None = None
        #: Whether the frame sink's consumer is the binary transport (``proto.frames``):
        #: a message's deltas are then made as its frames, the rest stay SSE frames.
        self.binary_frames = False
        #: The byte path's sink (`set_frame_sink`) while no transformer or tap wants
        #: objects, else None: what `MessageHandle.write` hands finished frames to.
        self.frames: Callable[[bytes], object] | None = None
        #: The verifier's text messages (``_verify_entities.Messages``), which the byte
        #: path reads to verify a delta by construction; None when nothing verifies.
        self.content_view: Any = None
        # The byte path of subagents (``_subagent``): a decorated call's two frames.
        #: Whether the subagent ids the run mints are their own escaped text in JSON: the
        #: byte path writes them as they are.
        self.subagent_plain = json_verbatim(f"{run_id}-sub-")
        #: The verifier's subagents (``_verify_entities.Subagents``), kept by construction
        #: on the byte path; None when nothing verifies.
        self.subagent_view: Any = None

    # ------------------------------------------------------------------ the path of an event

    def send(self, event: ev.BaseEvent, text: Text | _Unchecked | None = UNCHECKED) -> None:
        """
        Transform, verify and deliver one event. Every emit ends here.

        Args:
            event: The event.
            text: `UNCHECKED` (the default): *event* gets the encodability check.
                Otherwise the caller has found *event*'s strings encodable
                already. Either *event* is a ``TEXT_MESSAGE_CONTENT`` whose message
                the history records as *text* (``History.text_of``; None: not
                recorded): the delta is appended to it here, inline, instead of
                through `History.record` (`MessageHandle.write`'s object path,
                whose message id and owner were checked when the message opened).
                Or *text* is None for an event the history has nothing to record
                of: a ``STATE_DELTA`` of plain operations (``_state.send_tracked``).
                With transformers, their output is checked as for any event.
        """
        # The lock by hand, not `with`: about half the cost on this, the hottest path.
        lock = self.lock
        lock.acquire()
        try:
            if self.finished:
                msg = (
                    f"Cannot send {event.TYPE.value!r}: run {self.run_id!r} has already "
                    "finished. Start a new Run to send more."
                )
                raise ProtocolError(msg, rule="run-finished")
            if self._transformers:
                batch = self._transform(event)
                if type(event) not in RUN_LIFECYCLE:
                    for out in batch:
                        if type(out) in RUN_LIFECYCLE:
                            raise lifecycle_refused(type(out), "A transformer")
                for out in batch:
                    self._deliver(out)
                return
            # The hot path, inlined: encodable, verified, then the sink.
            if text is UNCHECKED:
                _ENCODABLE_GET(type(event), check_encodable)(event)
            check = self._check
            if check is not None:
                check(event)
            self._sink(event)
            if self._taps:
                for tap in self._taps:
                    tap(event)
            if text is UNCHECKED:
                history = self.history
                if history is not None:
                    history.record(event)
            elif text is not None:  # Text.write's two lines, without its call
                parts = text.parts
                parts.append(event.delta)  # type: ignore[attr-defined]
                if len(parts) >= 256:  # COMPACT_EVERY, a constant here: no global lookup
                    text.compact()
        finally:
            lock.release()

    def finish(self, event: ev.BaseEvent, *, late: bool = False) -> None:
        """
        Send the run's terminal *event* (transformers, verifier, sink) and finish the run.

        Args:
            late: The run is already over (closed) without its terminal event: a
                transport supplies it (`stream`'s fallback). Refused all the same
                once a terminal event has gone out.

        The transformers may rewrite the terminal event and add events before it,
        but what they return must hold exactly one ``RUN_FINISHED`` or
        ``RUN_ERROR``, last; otherwise nothing of it is delivered and
        `ProtocolError` (rule ``terminal-event``) is raised.

        Raises:
            ProtocolError: The run has finished, the transformers lost (or
                moved, or doubled) the terminal event, or the verifier refused.
            Exception: Whatever a transformer or the sink raised; the run is
                not finished then (`last_resort` can still end it).
        """
        with self.lock:
            if self.terminal is not None or (self.finished and not late):
                msg = (
                    f"Cannot send {event.TYPE.value!r}: run {self.run_id!r} has already "
                    "finished. Start a new Run to send more."
                )
                raise ProtocolError(msg, rule="run-finished")
            batch = self._transform(event) if self._transformers else [event]
            lifecycle = [out for out in batch if type(out) in RUN_LIFECYCLE]
            if (
                len(lifecycle) != 1
                or batch[-1] is not lifecycle[0]
                or type(lifecycle[0]) is ev.RunStartedEvent
            ):
                shown = ", ".join(out.TYPE.value for out in batch) or "nothing"
                msg = (
                    f"the run's transformers turned its {event.TYPE.value} into [{shown}]: a "
                    "transformer may rewrite the terminal event, or add events before it, but "
                    "the run must end with exactly one RUN_FINISHED or RUN_ERROR, last. Return "
                    "the terminal event (changed or not) from every transformer."
                )
                raise ProtocolError(msg, rule="terminal-event")
            # From the first terminal attempt on, only the object path: should delivery
            # fail, the verifier has still seen the run end, and it decides what follows.
            self.frames = self._frame_sink = None
            for out in batch:
                self._deliver(out)
            self.terminal = batch[-1]
            self.finished = True

    def last_resort(self, event: ev.RunErrorEvent) -> None:
        """
        Deliver *event* past the transformers (verifier, sink, taps) and finish the run.

        For the one case a terminal event could not go through `finish` (a
        transformer raised, or dropped it): the stream must still end with one.
        *event* carries a fixed message (``_outcomes.GENERIC_MESSAGE``) and a
        code, never exception text, so skipping the transformers cannot leak
        what they were there to hide. Nothing happens once a terminal event is out.
        """
        with self.lock:
            if self.terminal is not None:
                return
            self.frames = self._frame_sink = None
            self._deliver(event)
            self.terminal = event
            self.finished = True

    def _deliver(self, event: ev.BaseEvent) -> None:
        _ENCODABLE_GET(type(event), check_encodable)(event)
        if self._check is not None:
            self._check(event)
        self._sink(event)
        for tap in self._taps:
            tap(event)
        if self.history is not None:
            self.history.record(event)

    def _transform(self, event: ev.BaseEvent) -> list[ev.BaseEvent]:
        batch = [event]
        for transformer in self._transformers:
            nxt: list[ev.BaseEvent] = []
            for item in batch:
                out = transformer(item)
                if out is None:
                    continue
                if isinstance(out, ev.BaseEvent):
                    nxt.append(out)
                else:
                    nxt.extend(out)
            batch = nxt
        return batch

    transformers: Reads[tuple[Transformer, ...]] = Reads(
        "_transformers", "The transformers every event goes through, in order."
    )

    def set_frame_sink(self, sink: Callable[[bytes], object]) -> None:
        """
        Let the library's hot events reach the sink as SSE frames: *sink* takes bytes.

        The same sink as the run's (a stream's buffer): frames and events share
        one order. In effect only while no transformer or tap is installed.
        """
        with self.lock:
            self._frame_sink = sink
            self._byte_path()

    def _byte_path(self) -> None:
        self.frames = None if self._transformers or self._taps else self._frame_sink

    def frames_direct(self, direct: Callable[[bytes], object]) -> None:
        """
        The frame sink has just woken its consumer: send frames to *direct* until it waits.

        Called by the frame sink (a stream's ``_Channel.push``), under the lock,
        right after it woke the consumer: while the consumer is awake nobody
        needs waking, and *direct* (the buffer's own ``append``) is what `push`
        would do then, without its Python frame. Nothing changes off the byte
        path. `frames_waking` switches back.
        """
        if self.frames is not None:
            self.frames = direct

    def frames_waking(self) -> None:
        """
        The consumer is about to wait: frames go through the frame sink again, which wakes it.

        Called after the consumer made the future it will wait on, before it
        looks at the buffer a last time. Always under the lock: a frame sink
        call in flight on another thread may have buffered an item (which the
        consumer may already have taken) and not yet redirected, having woken
        an older future; waiting for it here means no redirect lands after
        this, and every later frame wakes the consumer. Off the byte path
        (`frames` None: a transformer or tap) nothing goes direct, and the
        consumer never waits for the lock, which user code may hold.
        """
        if self.frames is None:
            return
        lock = self.lock
        lock.acquire()
        try:
            self._byte_path()
        finally:
            lock.release()

    def add_transformer(self, transformer: Transformer) -> None:
        """Also apply *transformer* to every later event, after the others."""
        with self.lock:
            self._transformers = (*self._transformers, transformer)
            self._byte_path()

    def remove_transformer(self, transformer: Transformer) -> None:
        """Stop applying *transformer*; `ValueError` when it is not one of the run's."""
        with self.lock:
            self._transformers = _without(self._transformers, transformer, "transformers")
            self._byte_path()

    def add_tap(self, tap: Sink) -> None:
        """Also deliver every later event to *tap* (after the sink)."""
        with self.lock:
            self._taps = (*self._taps, tap)
            self._byte_path()

    def remove_tap(self, tap: Sink) -> None:
        """Stop delivering events to *tap*; `ValueError` when it is not one of the run's."""
        with self.lock:
            self._taps = _without(self._taps, tap, "taps")
            self._byte_path()

    async def drain(self) -> None:
        """Wait for the transport's consumer (the drain hook), when there is one."""
        hook = self.drain_hook
        if hook is not None and len(hook.buffer) >= hook.due:
            wait = hook.gate()
            if wait is not None:
                await wait

    # ------------------------------------------------------------------ ids

    def new_message_id(self) -> str:
        """Return a fresh message id: ``<run id>-msg-<n>``."""
        return f"{self.run_id}-msg-{next(self._message_ids)}"

    def new_tool_call_id(self) -> str:
        """Return a fresh tool call id: ``<run id>-tool-<n>``."""
        return f"{self.run_id}-tool-{next(self._tool_call_ids)}"

    def new_subagent_run_id(self) -> str:
        """Return a fresh subagent invocation id: ``<run id>-sub-<n>``."""
        return f"{self.run_id}-sub-{next(self.subagent_numbers)}"

    def new_interrupt_id(self) -> str:
        """Return a fresh interrupt id: ``<run id>-int-<n>``."""
        return f"{self.run_id}-int-{next(self._interrupt_ids)}"

    # ------------------------------------------------------------------ open handles

    def close_left_open(self, registry: Registry, *, quietly: bool) -> None:
        """
        Close what is still open in *registry*, newest first; warn unless *quietly*.

        Depth first and without recursion: what a subagent left open inside it
        closes before the subagent does, at any nesting depth (thousands of
        nested open subagents close as one loop, not a recursion per level).

        Up to `_WARN_EACH` handles left open get a `LeftOpenWarning` each; more
        get one in all, with their count and the first few names: 100,000
        forgotten subagents are one mistake, not 100,000 lines of log (and
        building each warning cost more than closing the handle). The warning
        comes once everything is closed, so one made an error still leaves
        the scope closed.
        """
        left: list[OpenHandle] = []
        with self.lock:
            # (handle, whether what it holds open is already on the stack above it)
            stack: list[tuple[OpenHandle, bool]] = [(h, False) for h in registry.values()]
            while stack:
                handle, expanded = stack.pop()
                if handle.ended:
                    continue
                if not expanded:
                    children = handle._open_children()
                    if children:
                        stack.append((handle, True))
                        stack.extend((child, False) for child in children.values())
                        continue
                handle._abandon()
                if not quietly:
                    left.append(handle)
            if left:
                _warn_left_open(left)

    def close(self) -> None:
        """The run is over: refuse further events and mark every open handle ended."""
        with self.lock:
            self.finished = True
            self.frames = self._frame_sink = None
            stack = list(self.root.values())
            while stack:  # no recursion, whatever the nesting depth
                handle = stack.pop()
                children = handle._open_children()
                if children:
                    stack.extend(children.values())
                handle._orphan()
            self.root.clear()
            self.scopes = {None: self.root}


_WARN_EACH = 3
"""The most handles left open in one scope that get a `LeftOpenWarning` each."""


def _warn_left_open(left: Sequence[OpenHandle]) -> None:
    """Warn of the handles left open in one scope (see `Pipeline.close_left_open`)."""
    if len(left) <= _WARN_EACH:
        for handle in left:
            warn_at_user(handle._left_open(), LeftOpenWarning)
        return
    # Each text starts with what was left open: "subagent 's' (r-sub-1) was still open …".
    names = [handle._left_open().partition(" was still open")[0] for handle in left[:_WARN_EACH]]
    more = len(left) - len(names)
    warn_at_user(
        f"{len(left)} handles were still open when their scope ended; ambient_runs closed "
        f"them: {', '.join(names)} and {more} more. End each before its scope ends: open it "
        "in a `with` block (or use the decorator), or call its end() (a subagent's finish())",
        LeftOpenWarning,
    )
