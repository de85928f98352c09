"""
`Run`: one AG-UI run, its request, its lifecycle and its cancellation.

The events themselves go through the run's `Pipeline` (``_pipeline``): one
lock, the ids, transformers, verifier, sink and taps, and the handles still
open in each scope. `Run` makes the pipeline, sends ``RUN_STARTED`` on entry,
and on exit closes what is left open and sends the one terminal event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._accessors import RunAccessors
from ambient_runs._cancel import Cancellation
from ambient_runs._history import History, catch_up
from ambient_runs._outcomes import (
    GENERIC_MESSAGE,
    ErrorDescriber,
    ErrorPolicy,
    frontend_calls_of,
    interrupts_of,
    is_cancellation,
    result_json,
    safely,
)
from ambient_runs._pipeline import Pipeline, Sink, Transformer
from ambient_runs._scopes import Frame, PlainFrame
from ambient_runs._state import initial_state
from ambient_runs._subagent import Emitters
from ambient_runs.continuations import ContinuationStore, default_store
from ambient_runs.errors import ProtocolError, RunCancelledError

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._outcomes import ExcInfo
    from ambient_runs.asgi import Request

__all__ = ("EventLog", "Run", "Sink", "Transformer", "current_run")

T = TypeVar("T")

_log = logging.getLogger("ambient_runs")

PROTOCOL_VERSION = "1.0"


class EventLog:
    """
    The in-memory sink a run uses when given none: a list you can `drain`.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: list[ev.BaseEvent] = []

    def __call__(self, event: ev.BaseEvent) -> None:
        self._events.append(event)

    def drain(self) -> list[ev.BaseEvent]:
        """Return every event logged so far and forget them."""
        drained, self._events = self._events, []
        return drained

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[ev.BaseEvent]:
        return iter(self._events)

    def __getitem__(self, index: int) -> ev.BaseEvent:
        return self._events[index]

    def __repr__(self) -> str:
        return f"<EventLog {len(self._events)} events>"


def current_run() -> Run:
    """
    Return the ambient run.

    Raises:
        NoActiveRunError: No run is ambient here.

    .. versionadded:: 0.1.0
    """
    return _scopes.require("current_run").run


class Run(Emitters, RunAccessors):
    """
    One AG-UI run: ``RUN_STARTED`` on entry, exactly one terminal event on exit.

    Use it as ``async with Run(input) as run:`` or ``with Run(input) as run:``.
    Entering makes it the ambient run, so module-level emitters (`say`, …) and
    decorated agent functions inside attribute to it. Leaving emits:

    - ``RUN_FINISHED`` (with the `finish_with` result) when the block ends normally,
      or when `FrontendToolCalled` leaves it (swallowed); after calls to the
      client's tools (`call_frontend_tool`, ``tool_call(name, frontend=True)``)
      its success outcome names them in ``pendingToolCallIds``, in order. An
      interrupt outcome wins over them: it has no such field, and the calls stay
      unanswered in the history;
    - ``RUN_FINISHED`` with an ``interrupt`` outcome when `Interrupted` (or a group
      of only those) leaves it; the exception stops here. An `Interrupted` that
      suspended a subagent and was then caught by user code still ends the run
      with an ``interrupt`` outcome carrying its interrupts (with the result, when
      set): the invocation is suspended on the wire and waits for the answers;
    - ``RUN_FINISHED`` with a ``cancelled`` outcome on cancellation (asyncio's,
      re-raised; or `check_cancelled`'s, which stops here);
    - ``RUN_ERROR`` on any other exception, which is re-raised. Its code is the
      exception's ``code`` attribute or class name; its message is generic unless
      the exception is an `AgentError` (raised to tell the client something),
      *expose_errors* is on, or *describe_error* says otherwise (see below).

    Anything still open at a finish (messages, tool calls, steps, subagents) is
    closed first, in reverse order of opening, with a `LeftOpenWarning`.

    **Error exposure.** Exception text can hold anything (a password in a
    connection string, a path), so by default a client reads
    ``"The agent failed; the server's log has the details."`` and a code. Every
    exception-made ``RUN_ERROR`` and ``SUBAGENT_ERROR`` of the run is decided the
    same way (``_outcomes.ErrorPolicy``): *describe_error* first, then an
    `AgentError`'s own message, then the exception's text with *expose_errors*,
    else the generic message. The terminal event goes through the transformers
    and the verifier like any other; if they fail on it, a ``RUN_ERROR`` with the
    generic message and the same code goes out past the transformers, so the
    stream still ends with one, and no exception text ever skips them.

    **Transformers and the terminal event.** A transformer may rewrite the
    terminal event (a message, metadata, ``RUN_FINISHED`` into ``RUN_ERROR``) and
    add events before it. One that drops it, replaces it with something else
    (``CUSTOM``), or puts events after it breaks the promise of exactly one
    terminal event, last: the run then ends with a generic ``RUN_ERROR`` (code
    ``protocol_error``, past the transformers if they drop that too) and leaving
    the block raises `ProtocolError` (rule ``terminal-event``), the transformer's
    bug made loud rather than a stream that just stops.

    The run starts from the client's state (``input.state``), converted into
    *state_type*; since the client holds it already, the first publish is a
    ``STATE_DELTA`` against it when that is smaller than a snapshot.

    **Message history.** With *record_messages* (or under
    ``AgentApp(threads=...)``), the run knows the conversation (`messages`):
    the messages before it (the client's ``input.messages``, or *history*) and
    every message it delivers, built from its events the way the official
    client builds its own ``messages`` (text, tool calls with their arguments,
    tool results, reasoning, activity), each carrying the ``subagentRunId`` of
    the scope that made it. `publish_messages` sends it as
    ``MESSAGES_SNAPSHOT``. A streamed message costs its text (its deltas are
    joined every 256, so none outlives its join) and about 50 ns a delta on
    the message-write path, which is why it is off by default.

    Args:
        input: The request, a `RunAgentInput` or its wire form (a dict).
        sink: Where events go; by default the in-memory `events` log.
        transformers: Applied in order to every event before verification.
        verify: Check every event against the AG-UI 1.0 rules (`ProtocolError`).
        state: The state to start from when the client sent none (``input.state``
            absent or ``{}``): an attrs instance, a dataclass, a pydantic model or
            a JSON dict. The client's own state, when it sent one, wins.
        state_type: What the client's state is converted into: an attrs class, a
            dataclass, a TypedDict, a pydantic model (duck-typed: ``model_validate``)
            or ``dict``. Default: the class of *state* when that is not a dict,
            else the client's JSON as it is.
        echo_input: Put *input* into ``RUN_STARTED.input``.
        request: The HTTP request being served (`Run.request`); a transport
            passes it, before any run hook sees the run.
        expose_errors: Show an unexpected exception's text to the client (for
            development); off by default.
        describe_error: ``describe_error(exc)`` returns the ``(message, code)``
            the client sees for *exc*, or None for the default; asked first, for
            every exception that ends the run or one of its subagents. One that
            raises is logged and the default applies.
        history: The conversation before this run, in place of
            ``input.messages``: a thread loaded from your store, merged with
            what the client sent (`ambient_runs.merge_history` does what
            ``AgentApp(threads=...)`` does). When it is not exactly the client's
            messages (activity messages aside, which clients never send back),
            the run sends it as ``MESSAGES_SNAPSHOT`` (two, when the client
            holds some of it: a snapshot keeps the client's messages where they
            are and appends new ones, so the first holds only what comes before
            the client's first message), so the client holds the same
            conversation, in the same order. They go out just before the
            agent's first event (or its ``RUN_FINISHED``, success or interrupt,
            when it emits none), right after ``RUN_STARTED`` on the wire, but
            never for a run that fails or is cancelled before that: an agent
            that refuses its caller (reading `request`, raising) shows them
            nothing of the stored conversation.
        record_messages: Keep the run's history (`messages`, `publish_messages`).
            Off (the default), `messages` is only the conversation before the
            run, and `publish_messages` raises `MessagesNotRecordedError`.
        continuations: Where framework adapters keep what they need to continue
            an interrupt, keyed by its id (`continuations`, an
            `ambient_runs.continuations.ContinuationStore`); by default the
            process-wide `ambient_runs.continuations.default_store`. Share one
            (``RedisContinuations``) so any worker can continue any interrupt.

    Raises:
        InvalidInputError: The client's state does not convert into *state_type*;
            each bad field is named by its path under ``$.state``.
        TypeError: *state_type* is not a state type.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        input: ev.RunAgentInput | Mapping[str, Any],
        *,
        sink: Sink | None = None,
        transformers: Sequence[Transformer] = (),
        verify: bool = True,
        state: Any = None,
        state_type: Any = None,
        echo_input: bool = False,
        request: Request | None = None,
        expose_errors: bool = False,
        describe_error: ErrorDescriber | None = None,
        history: Sequence[ev.Message] | None = None,
        record_messages: bool = False,
        continuations: ContinuationStore | None = None,
    ) -> None:
        if not isinstance(input, ev.RunAgentInput):
            input = ev.RunAgentInput.from_wire(input)
        self.input = input
        if continuations is not None and not isinstance(continuations, ContinuationStore):
            msg = (
                "continuations must be a ContinuationStore (put, take and drop coroutines, "
                f"a ttl), not {continuations!r}"
            )
            raise TypeError(msg)
        #: Where framework adapters keep their continuations (*continuations*).
        self.continuations: ContinuationStore = (
            continuations if continuations is not None else default_store()
        )
        before = input.messages if history is None else tuple(history)
        for message in before:
            if not isinstance(message, ev._MESSAGES):
                msg = f"history holds {message!r}, which is not an ambient_runs.events message"
                raise TypeError(msg)
        self._before = before
        #: Holds back what the run opens with when *history* is not what the client holds,
        #: until the agent's first event (`_HistoryGate`); None without a *history*.
        self._gate = None if history is None else _HistoryGate(catch_up(before, input.messages))
        if self._gate is not None:
            transformers = (self._gate, *transformers)
        self._log = EventLog() if sink is None else None
        verifier: Any = None
        if verify:
            from ambient_runs.verify import Verifier

            # A resumed run may answer calls of earlier runs (TOOL_CALL_RESULT
            # against the original toolCallId): tell the verifier they exist, and
            # what the client holds (a tool call may not belong to its user's message).
            verifier = Verifier(known_tool_call_ids=_tool_call_ids(before), history=before)
        self._verifier = verifier
        self._state = initial_state(input.state, state, state_type)
        #: The run's event pipeline (``ambient_runs._pipeline.Pipeline``): ids, lock,
        #: transform, verify, sink, taps and open handles. Package-internal: its
        #: interface may change; use the run's own methods.
        self.pipeline = Pipeline(
            self,
            input.run_id,
            self._log if self._log is not None else sink,  # type: ignore[arg-type]
            transformers,
            None if verifier is None else verifier.check,
            _scopes.taps(),
            self._state,
        )
        if self._gate is not None:
            self._gate.pipeline = self.pipeline
        if record_messages:
            self.pipeline.history = History(before)
        if verifier is not None:
            self.pipeline.content_view = verifier.content_view()
            self.pipeline.subagent_view = verifier.subagent_view()
        #: What clients learn of exceptions (*expose_errors*, *describe_error*).
        self.error_policy = ErrorPolicy(expose_errors, describe_error)
        self.pipeline.error_policy = self.error_policy
        self._echo_input = echo_input
        self._result: Any = None
        self._cancellation = Cancellation(self.pipeline.lock)
        self._started = False
        self._root: Frame | None = None
        self._token: Any = None
        #: The HTTP request this run serves (`ambient_runs.asgi.Request`: headers,
        #: client, path, the raw ASGI scope); None outside a server.
        self.request: Request | None = request
        for hook in _scopes.run_hooks():
            hook(self)

    # ------------------------------------------------------------------ accessors

    def _accessed_run(self) -> Run:
        return self

    def _conversation(self) -> tuple[ev.Message, ...]:
        """`messages`: the history as recorded, or the conversation before the run."""
        history = self.pipeline.history
        if history is None:
            return self._before
        with self.pipeline.lock:
            return history.messages()

    @property
    def events(self) -> EventLog:
        """
        The in-memory event log (only when the run was made without a *sink*).

        Raises:
            AttributeError: The run has a sink of its own.
        """
        if self._log is None:
            msg = "run.events exists only for a run made without a sink"
            raise AttributeError(msg)
        return self._log

    def _proved(self) -> bool:
        """Whether the agent has emitted an event (or finished): its *history* went out."""
        return self._gate is None or self._gate.opened

    @property
    def finished(self) -> bool:
        """Whether the run's terminal event has gone out."""
        return self.pipeline.finished

    # ------------------------------------------------------------------ ids

    def new_message_id(self) -> str:
        """Return a fresh message id, unique within the run: ``<run id>-msg-<n>``."""
        return self.pipeline.new_message_id()

    def new_tool_call_id(self) -> str:
        """Return a fresh tool call id, unique within the run: ``<run id>-tool-<n>``."""
        return self.pipeline.new_tool_call_id()

    def new_subagent_run_id(self) -> str:
        """
        Return a fresh subagent invocation id, unique within the run: ``<run id>-sub-<n>``.

        A resuming run that continues a suspended invocation reuses its id instead.
        """
        return self.pipeline.new_subagent_run_id()

    def new_interrupt_id(self) -> str:
        """Return a fresh interrupt id, unique within the run: ``<run id>-int-<n>``."""
        return self.pipeline.new_interrupt_id()

    # ------------------------------------------------------------------ emit pipeline

    def _emit_frame(self) -> Frame:
        if self._root is None:
            msg = "the run has not started: enter it with `async with run:` first"
            raise ProtocolError(msg, rule="run-not-started")
        return self._root

    def add_transformer(self, transformer: Transformer) -> None:
        """
        Also apply *transformer* to every later event, after the run's own transformers.

        What it returns is verified like anything else (`ProtocolError`).
        """
        self.pipeline.add_transformer(transformer)

    def remove_transformer(self, transformer: Transformer) -> None:
        """
        Stop applying *transformer* (added with `add_transformer` or given to the run).

        Safe from inside a transformer: the event in flight finishes its pass first.

        Raises:
            ValueError: *transformer* is not one of the run's.
        """
        self.pipeline.remove_transformer(transformer)

    def add_tap(self, tap: Sink) -> None:
        """
        Also deliver every later event to *tap* (after the sink).

        Safe from inside a tap: the event in flight reaches the taps it started
        with, so one added then sees the next event first.
        """
        self.pipeline.add_tap(tap)

    def remove_tap(self, tap: Sink) -> None:
        """
        Stop delivering events to *tap*.

        Safe from inside a tap (a tap may remove itself): the event in flight
        still reaches every tap it started with.

        Raises:
            ValueError: *tap* is not one of the run's.
        """
        self.pipeline.remove_tap(tap)

    # ------------------------------------------------------------------ lifecycle

    def _enter(self) -> Self:
        if self._started:
            msg = "a Run is entered once; make a new Run for a new run"
            raise RuntimeError(msg)
        self._started = True
        self._root = PlainFrame(self)
        self._token = _scopes.enter(self._root)
        try:
            self.pipeline.send(
                ev.RunStartedEvent(
                    thread_id=self.input.thread_id,
                    run_id=self.input.run_id,
                    protocol_version=PROTOCOL_VERSION,
                    parent_run_id=self.input.parent_run_id,
                    input=self.input if self._echo_input else None,
                )
            )
        except BaseException:
            _scopes.leave(self._token, self._root, "run")
            raise
        return self

    def _exit(self, exc: BaseException | None) -> bool:
        """Send the terminal event for how the block ended; True to swallow *exc*."""
        try:
            return self._finish(exc)
        finally:
            _scopes.leave(self._token, self._root, "run")
            self.pipeline.close()

    def _finish(self, exc: BaseException | None) -> bool:
        pending = self.pipeline.pending_interrupts
        if exc is None:
            outcome: ev.RunFinishedOutcome | None = None
            if pending:  # an Interrupted was caught, but its invocations are suspended
                outcome = ev.RunFinishedInterruptOutcome(interrupts=tuple(pending.values()))
            else:
                outcome = self._success_outcome()
            self._close_and_send(self._finished_event(outcome, self._result), quietly=False)
            return False
        interrupts = interrupts_of(exc)
        if interrupts is not None:
            every = {**pending, **{i.id: i for i in interrupts}}
            outcome = ev.RunFinishedInterruptOutcome(interrupts=tuple(every.values()))
            self._close_and_send(self._finished_event(outcome), quietly=True)
            return True
        if frontend_calls_of(exc) is not None:  # call_frontend_tool: the client answers next
            if pending:
                outcome = ev.RunFinishedInterruptOutcome(interrupts=tuple(pending.values()))
            else:
                outcome = self._success_outcome()
            self._close_and_send(self._finished_event(outcome, self._result), quietly=True)
            return True
        if is_cancellation(exc) or isinstance(exc, KeyboardInterrupt | SystemExit):
            outcome = ev.RunFinishedCancelledOutcome()
            self._close_and_send(self._finished_event(outcome), quietly=True)
            return isinstance(exc, RunCancelledError)
        safely(self._send_error, *self.error_policy.report(exc))
        return False

    def _success_outcome(self) -> ev.RunFinishedSuccessOutcome | None:
        """Success: with ``pendingToolCallIds`` when frontend calls were made, else absent."""
        calls = self.pipeline.frontend_calls
        return ev.RunFinishedSuccessOutcome(pending_tool_call_ids=calls) if calls else None

    def _finished_event(
        self, outcome: ev.RunFinishedOutcome | None, result: Any = None
    ) -> ev.RunFinishedEvent:
        return ev.RunFinishedEvent(
            thread_id=self.input.thread_id,
            run_id=self.input.run_id,
            result=result,
            outcome=outcome,
            usage=self.pipeline.usage.totals(),
        )

    def _close_and_send(self, finished: ev.RunFinishedEvent, *, quietly: bool) -> None:
        pipeline = self.pipeline
        with pipeline.lock:
            try:
                pipeline.close_left_open(pipeline.root, quietly=quietly)
                pipeline.finish(finished)
            except Exception as error:
                # It could not finish cleanly: RUN_ERROR keeps the stream valid.
                message, _ = self.error_policy.report(error)
                safely(self._send_error, message, "protocol_error")
                raise

    def _send_error(self, message: str, code: str | None, *, late: bool = False) -> None:
        """
        End the run with ``RUN_ERROR`` (*message*, *code*), unless it has its terminal event.

        Through the transformers and the verifier; when they fail on it, a
        ``RUN_ERROR`` with the generic message and *code* goes out past the
        transformers (`Pipeline.last_resort`). *late*: the run is over already
        and a transport supplies its missing terminal event.
        """
        pipeline = self.pipeline
        with pipeline.lock:
            if pipeline.terminal is not None or (pipeline.finished and not late):
                return
            try:
                usage = pipeline.usage.totals()
                pipeline.finish(
                    ev.RunErrorEvent(message=message, code=code, usage=usage), late=late
                )
            except Exception:
                _log.error(
                    "run %r: its RUN_ERROR failed in the transformers or the verifier; "
                    "a generic RUN_ERROR went out past the transformers instead",
                    self.run_id,
                    exc_info=True,
                )
                pipeline.last_resort(ev.RunErrorEvent(message=GENERIC_MESSAGE, code=code))

    def finish_with(self, result: Any) -> None:
        """
        Set the run's result: ``RUN_FINISHED.result`` when the run ends normally.

        A pydantic value (a framework's models) has pydantic's JSON form.

        Raises:
            InvalidEventError: *result* has no JSON form.
        """
        self._result = result_json(result)

    def __enter__(self) -> Self:
        return self._enter()

    def __exit__(self, *exc_info: *ExcInfo) -> bool:
        return self._exit(exc_info[1])

    # The protocol's async twin of ``with``: starting and ending a run never wait.
    async def __aenter__(self) -> Self:
        return self._enter()

    async def __aexit__(self, *exc_info: *ExcInfo) -> bool:
        return self._exit(exc_info[1])

    # ------------------------------------------------------------------ cancellation

    def cancel(self) -> None:
        """
        Cancel the run cooperatively; safe to call from any thread or callback.

        Code inside notices through `check_cancelled`, `cancelled` or
        `until_cancelled`. A transport trips it when the client disconnects.
        A waiter whose event loop has closed meanwhile is skipped: nothing is
        left to wake there, and the call never raises for it.
        """
        self._cancellation.cancel()


class _HistoryGate:
    """
    The transformer that holds a run's *history* back until the agent proves itself.

    A run given a *history* (a thread a server loaded) owes the client the
    ``MESSAGES_SNAPSHOT`` events that make it hold the same conversation. Sent
    right after ``RUN_STARTED``, they would reach a caller that the agent then
    refuses (it reads `Run.request` and raises): the stored conversation would
    leak to whoever asked. So they go out just before the agent's first event,
    or before its ``RUN_FINISHED`` (success, or an interrupt) when it emits
    none; a run that fails or is cancelled first never sends them. First among
    the run's transformers, so the others see the snapshots as before; it
    removes itself at its first decision, which puts the byte path back.
    """

    __slots__ = ("opened", "pipeline", "snapshots")

    def __init__(self, snapshots: Sequence[ev.MessagesSnapshotEvent]) -> None:
        self.snapshots = tuple(snapshots)
        #: Whether the snapshots went out (the agent emitted, or finished).
        self.opened = False
        self.pipeline: Pipeline | None = None

    def __call__(self, event: ev.BaseEvent) -> ev.BaseEvent | list[ev.BaseEvent]:
        kind = type(event)
        if kind is ev.RunStartedEvent:
            return event
        if self.pipeline is not None:
            self.pipeline.remove_transformer(self)  # under the run's lock, as every send
        if kind is ev.RunErrorEvent or (
            kind is ev.RunFinishedEvent
            and isinstance(event.outcome, ev.RunFinishedCancelledOutcome)  # type: ignore[attr-defined]
        ):
            return event  # failed or cancelled before its first event: nothing of the history
        self.opened = True
        return [*self.snapshots, event]


def _tool_call_ids(messages: Sequence[ev.Message]) -> list[str]:
    ids: list[str] = []
    for message in messages:
        if isinstance(message, ev.AssistantMessage):
            ids.extend(call.id for call in message.tool_calls or ())
        elif isinstance(message, ev.ToolMessage):
            ids.append(message.tool_call_id)
    return ids
