"""
`stream`: run an agent in its own task and iterate over its events as they happen.

The run's sink appends to a buffer; the consumer pops from it. Emitters are
synchronous and never block, so the buffer is bounded the way
`asyncio.StreamWriter` bounds its own: the agent awaits `ambient_runs.drain`
(`Run.drain`, which `MessageHandle.astream` awaits after every chunk), and that
waits while the buffer holds more than the high-water mark. Closing the stream
early cancels the agent. The stream's driver drains once right after the run
opens, so `RUN_STARTED` reaches the consumer before the agent's body runs.

Below the mark, `drain` also lets a consumer that was woken run before the
agent goes on, once the buffer holds as many events as the consumer last took
(times two, up to `_MAX_BATCH`): the first frame goes out after the first
event, not after a thousand, and an agent writing in a burst still hands the
transport batches that double until they are large (`EventStream._take`, what
`AgentApp` sends as one ASGI message each).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import threading
import types
from collections.abc import Awaitable, Callable, Generator, Mapping
from itertools import repeat
from operator import call
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from ambient_runs import events as ev
from ambient_runs._futures import resolve as _resolve
from ambient_runs._outcomes import GENERIC_MESSAGE
from ambient_runs._run import Run
from ambient_runs.errors import InterruptError
from ambient_runs.threads import run_in_executor

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs.asgi import Request

__all__ = ("Agent", "EventStream", "StreamStatistics", "call_agent", "checked_stream", "stream")

_log = logging.getLogger("ambient_runs")

Agent: TypeAlias = Callable[[Run], Awaitable[Any]] | Callable[[Run], Any]
"""
An agent: a callable taking the `Run`; what it returns is the run's result.

An async callable runs in the stream's task; a plain one runs in a worker
thread (the default executor) with the run's context, so its emitters
attribute as usual.
"""

_TERMINAL = (ev.RunFinishedEvent, ev.RunErrorEvent)

_MAX_BATCH = 256
"""The most events `drain` lets pile up for a woken consumer before it yields to it."""


def stream(
    agent: Agent,
    input: ev.RunAgentInput | Mapping[str, Any],
    *,
    buffer: int = 1024,
    request: Request | None = None,
    **run_options: Any,
) -> EventStream:
    """
    Run *agent* under a new `Run` in its own task and iterate over its events.

    Events arrive in emit order, from ``RUN_STARTED`` to exactly one terminal
    event. What *agent* returns, when not None, becomes ``RUN_FINISHED.result``
    (through `Run.finish_with`). The agent task starts on the first iteration.

    - **Errors.** An exception in *agent* ends the stream with ``RUN_ERROR``
      (the run's error policy: a generic message unless it is an `AgentError`
      or *expose_errors* is on, and the exception's ``code`` or class name); it
      is logged on the ``ambient_runs`` logger and *not* raised to the consumer:
      the stream is the report. If the run could not even send its terminal
      event, the stream supplies the ``RUN_ERROR``, through the same policy,
      transformers and verifier (a generic one past the transformers if they
      fail on it).
    - **Backpressure.** Emitting never blocks; `ambient_runs.drain` (and
      `MessageHandle.astream`, after each chunk) waits while more than *buffer*
      events are waiting for the consumer, until it has taken half of them.
      Between two drains the buffer grows by whatever the agent emits.
    - **Closing early.** `EventStream.aclose`, a consumer task cancelled while it
      waits for an event, or dropping the stream cancels the agent task (the
      run ends with a ``cancelled`` outcome, which nobody reads) and, except for
      dropping, waits for it to end.

    - **Sync agents.** A plain (not async) callable runs in a worker thread of
      the loop's default executor, in a copy of the run's context. It cannot
      await `ambient_runs.drain`, and closing the stream cannot stop a thread:
      it should look at `Run.is_cancelled` (or call `Run.check_cancelled`) in
      long loops. What it emits after the run ended raises in its thread.
    - **SystemExit and KeyboardInterrupt** raised by the agent (argparse inside a
      tool, say) end the run with ``RUN_ERROR`` (code ``"SystemExit"`` or
      ``"KeyboardInterrupt"``) instead of leaving the event loop and stopping
      the server. A plain `Run` without a stream still treats them as the
      process ending (a ``cancelled`` outcome, re-raised).

    Args:
        agent: A callable taking the `Run`, async or not.
        input: The request, a `RunAgentInput` or its wire form (a dict).
        buffer: The high-water mark: how many undelivered events make
            `Run.drain` wait.
        request: The HTTP request being served, which the agent reads as
            `Run.request` (`ambient_runs.asgi.Request`); a transport passes it.
        run_options: Passed to `Run` (*transformers*, *verify*, *state*,
            *echo_input*, *expose_errors*, *describe_error*); not *sink*, which
            the stream owns.

    Returns:
        An async iterator of the run's events.

    Raises:
        InvalidInputError: *input* is a dict that is not a valid RunAgentInput.
        TypeError: *agent* is not a callable that takes the `Run` as its one
            positional argument, or *run_options* holds *sink*.
        ValueError: *buffer* is negative.

    .. versionadded:: 0.1.0
    """
    _check_agent(agent)
    if "sink" in run_options:
        msg = "stream() owns the run's sink; consume the stream instead of passing sink="
        raise TypeError(msg)
    return checked_stream(agent, input, {"buffer": buffer, "request": request, **run_options})


def checked_stream(
    agent: Agent, input: ev.RunAgentInput | Mapping[str, Any], options: Mapping[str, Any]
) -> EventStream:
    """
    `stream`, for a caller that checked *agent* and *options* once already.

    *options* are `stream`'s keywords: ``buffer``, ``request`` and the `Run`
    options. `AgentApp` checks them when it is built; reading the agent's
    signature again for every request would cost about a tenth of a millisecond.
    """
    run_options = dict(options)
    buffer = run_options.pop("buffer", 1024)
    if buffer < 0:
        msg = f"buffer must be >= 0, not {buffer}"
        raise ValueError(msg)
    channel = _Channel(buffer)
    run = Run(input, sink=channel.push, **run_options)
    run.pipeline.drain_hook = channel
    return EventStream(agent, run, channel)


@attrs.frozen(kw_only=True)
class StreamStatistics:
    """
    How full an `EventStream`'s buffer is, and has been.

    Attributes:
        buffered: Events waiting for the consumer now.
        max_buffered: The most that ever waited at once.
        high_water: The mark above which `Run.drain` waits.

    .. versionadded:: 0.1.0
    """

    buffered: int
    max_buffered: int
    high_water: int


def _popped(buffer: collections.deque[Any]) -> list[Any]:
    """
    What *buffer* holds now, popped from the left, in order.

    Only what is there now: another thread may be appending meanwhile. One
    C-speed pass (``map`` calling ``popleft``), not a bytecode loop per item.
    """
    return list(map(call, repeat(buffer.popleft, len(buffer))))


class _Channel:
    """
    The buffer between the run's sink and the consumer, and the two waiters on it.

    Kept apart from `EventStream` so the agent task (which holds the sink) does
    not keep the stream alive: a dropped stream is collected, and cancels it.
    """

    __slots__ = (
        "batch",
        "buffer",
        "closed",
        "due",
        "high_water",
        "loop",
        "low_water",
        "max_buffered",
        "reader",
        "redirect",
        "thread",
        "woken",
        "writer",
    )

    def __init__(self, high_water: int) -> None:
        #: Events, and on the byte path (`EventStream._as_frames`) finished SSE frames.
        self.buffer: collections.deque[Any] = collections.deque()
        self.high_water = high_water
        self.low_water = high_water // 2
        self.max_buffered = 0
        #: Buffered events at which `drain` yields to a woken consumer: twice what it
        #: found when it last woke (`EventStream._wait`), at most `_MAX_BATCH`.
        self.batch = 1
        #: The consumer was woken (or lingers, `EventStream._take`) and has not taken yet.
        #: Set through `set_woken`, which keeps `due` in step.
        self.woken = False
        #: The buffer size from which `gate` may have something to wait for: `batch`
        #: while the consumer is woken, else past the high-water mark. `Run.drain` looks
        #: at it inline and calls `gate` only from there (`Pipeline.drain`).
        self.due = high_water + 1
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: int | None = None
        self.reader: asyncio.Future[None] | None = None
        self.writer: asyncio.Future[None] | None = None
        #: On the byte path (`EventStream._as_frames`): called once `push` has woken the
        #: consumer, to send the frames that follow straight into `buffer` (its C
        #: ``append``, not `push`) until the consumer waits again.
        self.redirect: Callable[[], None] | None = None

    def push(self, event: ev.BaseEvent | bytes) -> None:
        """
        The run's sink: buffer *event* (or a frame) and wake the consumer. Any thread.

        Called under the run's lock. Frames may also reach `buffer` without it
        (`redirect`), so `max_buffered` is brought up to date where the consumer
        takes (`note_size`) too.
        """
        buffer = self.buffer
        buffer.append(event)
        size = len(buffer)
        if size > self.max_buffered:
            self.max_buffered = size
        reader = self.reader
        if reader is not None and not reader.done():
            self.wake_reader_from_any_thread(reader)
            redirect = self.redirect
            if redirect is not None:
                redirect()

    def note_size(self) -> None:
        """Count what is buffered now in `max_buffered` (before the consumer takes)."""
        size = len(self.buffer)
        if size > self.max_buffered:
            self.max_buffered = size

    def wake_reader_from_any_thread(self, reader: asyncio.Future[None]) -> None:
        if threading.get_ident() == self.thread:
            reader.set_result(None)
            self.set_woken(True)
        elif self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(_resolve, reader)

    def set_woken(self, woken: bool) -> None:
        """Note whether the consumer is woken and has not taken yet; keep `due` in step."""
        self.woken = woken
        self.due = min(self.batch, self.high_water + 1) if woken else self.high_water + 1

    def wake_reader(self, _: object = None) -> None:
        """Wake the consumer (the agent task ended). On the loop thread."""
        reader = self.reader
        if reader is not None:
            _resolve(reader)

    def wake_writer(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            _resolve(writer)

    def gate(self) -> Awaitable[None] | None:
        """
        The run's drain gate: what `Run.drain` must await now, or None.

        Called only once the buffer holds `due` items (`Pipeline.drain`).

        Above the high-water mark: wait until the consumer took half (`_backpressure`).
        Below it, yield once to a consumer that was woken and has not run yet, when
        the buffer holds `batch` events: it takes them before the agent goes on (the
        first frame goes out after the first event), in batches that double while
        the agent keeps emitting, up to `_MAX_BATCH`. Every other call, the common
        one, does not even call it (`due`): an agent that drains after every token
        pays a length and a comparison, not a round trip of the loop.
        """
        size = len(self.buffer)
        if size <= self.high_water or self.closed:
            if (
                not self.woken
                or size < self.batch
                or self.closed
                or self.thread != threading.get_ident()
            ):
                return None
            return _yield_once()  # the woken consumer was scheduled first: it runs now
        return self._backpressure()

    async def _backpressure(self) -> None:
        """Wait while more than the high-water mark is buffered (on the stream's loop)."""
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # an agent driving its own loop in a thread: no backpressure
            return
        while len(self.buffer) > self.high_water and not self.closed:
            writer = self.writer
            if writer is None or writer.done():
                writer = self.writer = loop.create_future()
            await writer


@types.coroutine
def _yield_once() -> Generator[None, None, None]:
    """Let the loop run one turn: ``asyncio.sleep(0)``'s bare yield, without its checks."""
    yield


def _running_loop(what: str) -> asyncio.AbstractEventLoop:
    """Return the running asyncio loop, or say plainly that *what* needs one (trio, …)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        msg = (
            f"{what} runs on asyncio only, and no asyncio event loop is running here "
            "(trio?). Under trio, drive an ambient_runs.Run yourself (`async with "
            "ambient_runs.Run(input, sink=...)`), or serve under asyncio"
        )
        raise RuntimeError(msg) from None


def _check_agent(agent: object) -> None:
    """
    Refuse, with a `TypeError` naming the fix, what cannot serve as an agent.

    An agent is a callable that takes the `Run` as its one positional argument.
    A callable whose signature Python cannot read (some builtins) is accepted.
    """
    if not callable(agent):
        msg = (
            f"an agent must be a callable taking the Run, not {type(agent).__name__} "
            f"{agent!r}: write `async def agent(run): ...`"
        )
        raise TypeError(msg)
    if inspect.isgeneratorfunction(agent) or inspect.isasyncgenfunction(agent):
        name = getattr(agent, "__qualname__", None) or repr(agent)
        msg = (
            f"agent {name} is a generator function: an agent emits events (ar.say, "
            "ar.message, …) and returns its result; drop the `yield`"
        )
        raise TypeError(msg)
    try:
        signature = inspect.signature(agent)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None)
    except TypeError:
        name = getattr(agent, "__qualname__", None) or repr(agent)
        msg = (
            f"agent {name}{signature} cannot be called with the Run: an agent takes the "
            "Run as its one positional argument, e.g. `async def agent(run): ...`"
        )
        raise TypeError(msg) from None


def _is_async(agent: object) -> bool:
    """Whether calling *agent* gives an awaitable to await in the task (not a thread's work)."""
    return inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(
        getattr(agent, "__call__", None)  # noqa: B004 - an instance with an async __call__
    )


class _AgentExit(RuntimeError):
    """
    The agent raised `SystemExit` or `KeyboardInterrupt` under a stream.

    Raised in its place inside the run, so the run ends with ``RUN_ERROR`` and
    the exception never leaves the agent's task: asyncio would re-raise it out of
    the event loop and stop the whole server. ``code`` names the original.
    """

    def __init__(self, exit: BaseException) -> None:
        self.code = type(exit).__name__
        super().__init__(
            f"the agent raised {exit!r}; under a stream that ends the run, not the process"
        )


async def call_agent(agent: Agent, run: Run) -> Any:
    """Call *agent* with *run* in the run's task (a plain one in a worker thread); its result."""
    try:
        if _is_async(agent):
            return await agent(run)
        result = await run_in_executor(None, agent, run)  # in the run's context
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            result = await result
        return result
    except (SystemExit, KeyboardInterrupt) as exit:
        raise _AgentExit(exit) from exit


async def _drive(agent: Agent, run: Run) -> None:
    async with run:
        # RUN_STARTED has woken the consumer: let it send that frame before the agent's
        # first steps (time to first byte), as `drain` does for any woken consumer.
        await run.pipeline.drain()
        result = await call_agent(agent, run)
        if result is not None:
            run.finish_with(result)


class EventStream:
    """
    The events of one run, as an async iterator; what `stream` returns.

    Iterate with ``async for``; close early with `aclose` (or
    ``contextlib.aclosing``), which cancels the agent task and waits for it.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_agent", "_channel", "_done", "_keep", "_last", "_reported", "_task", "run")

    def __init__(self, agent: Agent, run: Run, channel: _Channel) -> None:
        self._agent = agent
        #: The `Run` the agent runs under.
        self.run = run
        self._channel = channel
        self._task: asyncio.Task[None] | None = None
        self._last: ev.BaseEvent | None = None
        self._done = False
        self._reported = False
        #: Where `aclose` leaves what was still buffered (`_keep_on_close`); None: dropped.
        self._keep: list[ev.BaseEvent | bytes] | None = None

    def __repr__(self) -> str:
        state = "closed" if self._done else "running" if self._task is not None else "not started"
        return f"<EventStream run={self.run.run_id!r} {state}>"

    def statistics(self) -> StreamStatistics:
        """
        Return how full the buffer is and has been.

        .. versionadded:: 0.1.0
        """
        channel = self._channel
        channel.note_size()
        return StreamStatistics(
            buffered=len(channel.buffer),
            max_buffered=channel.max_buffered,
            high_water=channel.high_water,
        )

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ev.BaseEvent:
        channel = self._channel
        buffer = channel.buffer
        if not buffer:
            await self._wait()
        channel.note_size()
        event: ev.BaseEvent = buffer.popleft()
        if channel.writer is not None and len(buffer) <= channel.low_water:
            channel.wake_writer()
        self._last = event
        return event

    def _ready_all(self) -> list[ev.BaseEvent | bytes]:
        """
        Every item buffered now, in order, without a coroutine; [] when none is.

        `_now`'s first step, also what `sse.frames` takes between two waits, and
        `_take`'s last: one pass over the buffer per batch, not a call per item.
        """
        channel = self._channel
        buffer = channel.buffer
        if not buffer:
            return []
        channel.note_size()
        items: list[ev.BaseEvent | bytes] = _popped(buffer)
        if channel.writer is not None and len(buffer) <= channel.low_water:
            channel.wake_writer()
        self._last = items[-1]  # type: ignore[assignment]
        return items

    async def _now(self) -> list[ev.BaseEvent | bytes]:
        """
        Every item buffered now (at least one), or [] at the end: what `sse.frames` takes.

        Waits only when nothing is buffered, and then takes what woke it at
        once: unlike `_take`, no lingering for more (each item is a frame of
        its own there, nothing gains from a larger batch).
        """
        if not self._channel.buffer:
            try:
                await self._wait()
            except StopAsyncIteration:
                return []
        return self._ready_all()

    async def _take(self) -> list[ev.BaseEvent | bytes]:
        """
        Return every event buffered now (at least one, in order), or [] at the end.

        For a transport that writes them in one go (`AgentApp` sends each
        batch as one ASGI message); `__anext__` is the one-at-a-time face.
        A consumer cancelled while it waits closes the stream, as there.
        """
        channel = self._channel
        buffer = channel.buffer
        if not buffer:
            try:
                await self._wait()
            except StopAsyncIteration:
                return []
            if self._last is not None and not self._done:
                # Woken by the first event: let the agent (and everyone else) have this
                # turn of the loop, so what it emits meanwhile goes in the same batch;
                # its drain() yields back once the batch is full. Not before the
                # first batch: that one goes out at once (time to first byte).
                channel.set_woken(True)
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    await self.aclose()
                    raise
        channel.set_woken(False)
        return self._ready_all()

    async def _wait(self) -> None:
        """Wait until an event is buffered; raise StopAsyncIteration at the end."""
        if self._done:
            raise StopAsyncIteration
        task = self._task or self._start()
        channel = self._channel
        loop = task.get_loop()
        while not channel.buffer:
            if task.done():
                self._end(task)
                if channel.buffer:  # the RUN_ERROR the run could not send
                    return
                raise StopAsyncIteration
            reader = channel.reader = loop.create_future()
            if channel.redirect is not None:  # frames went straight to the buffer: wake me
                self.run.pipeline.frames_waking()
            if channel.buffer or task.done():  # it came between the check and the future
                continue
            try:
                await reader
            except asyncio.CancelledError:
                await self.aclose()
                raise
            finally:
                channel.reader = None
        # Woken: what is buffered now is what this consumer takes before it waits again
        # (unless it lets the loop run meanwhile); next time, let twice as much pile up.
        size = len(channel.buffer)
        channel.batch = size * 2 if size < _MAX_BATCH // 2 else _MAX_BATCH
        channel.set_woken(False)

    def _as_frames(self, *, binary: bool = False) -> None:
        """
        The consumer wants SSE frames (`sse.frames`): let the library's hot events
        arrive as finished frames (bytes) among the events (`Pipeline.set_frame_sink`).

        Only before the first iteration: whoever iterates the stream from then on
        is the SSE encoder, which passes bytes through and encodes the rest.
        *binary*: the consumer is `ambient_runs.proto.frames`, and a message's
        deltas arrive as binary frames (`Pipeline.binary_frames`); other frames
        stay SSE, which it converts.
        """
        if self._task is None and self._last is None:
            channel, pipeline = self._channel, self.run.pipeline
            pipeline.binary_frames = binary
            pipeline.set_frame_sink(channel.push)
            channel.redirect = functools.partial(pipeline.frames_direct, channel.buffer.append)

    def _start(self) -> asyncio.Task[None]:
        loop = _running_loop("ambient_runs.stream")
        channel = self._channel
        channel.loop = loop
        channel.thread = threading.get_ident()
        task = self._task = loop.create_task(
            _drive(self._agent, self.run), name=f"ambient_runs.stream {self.run.run_id}"
        )
        task.add_done_callback(channel.wake_reader)
        return task

    def _end(self, task: asyncio.Task[None]) -> None:
        """The agent task ended and everything was read: report how, once."""
        self._done = True
        self._channel.closed = True
        error = self._report(task)
        if not isinstance(self._last, _TERMINAL):
            # The run ended without its terminal event (it failed to start, or to send
            # it, or was cancelled before it began): the stream still ends well formed.
            # It goes through the run's error policy, transformers and verifier like
            # any terminal event (`Run._send_error`).
            if error is not None:
                message, code = self.run.error_policy.report(error)
            elif task.cancelled():
                message, code = "the agent was cancelled before the run finished", "cancelled"
            else:
                message, code = "the agent ended without finishing the run", "incomplete"
            buffer = self._channel.buffer
            try:
                self.run._send_error(message, code, late=True)
            except Exception:
                _log.error("run %r: its fallback RUN_ERROR failed", self.run.run_id, exc_info=True)
            if not buffer or not isinstance(buffer[-1], _TERMINAL):  # the sink itself failed
                buffer.append(ev.RunErrorEvent(message=GENERIC_MESSAGE, code=code))

    def _report(self, task: asyncio.Task[None]) -> BaseException | None:
        """Retrieve the agent task's exception and log it (once)."""
        error = None if task.cancelled() else task.exception()
        if error is not None and not self._reported:
            self._reported = True
            name = getattr(self._agent, "__qualname__", None) or repr(self._agent)
            if isinstance(error, InterruptError):
                # The client's answer, not the agent, is at fault (an unknown, expired or
                # repeated interrupt id): a line, not a traceback anyone can make us write.
                _log.warning("run %r refused a resume: %s", self.run.run_id, error)
            else:
                _log.error("agent %s of run %r failed", name, self.run.run_id, exc_info=error)
        return error

    async def aclose(self) -> None:
        """
        Stop early: cancel the agent task, wait for it to end, drop what is buffered.

        Closing a finished or closed stream does nothing.

        .. versionadded:: 0.1.0
        """
        self._done = True
        channel = self._channel
        channel.closed = True
        channel.wake_writer()
        task = self._task
        if task is not None and not task.done():
            self.run.cancel()
            task.cancel()
            await asyncio.wait((task,))
        if task is not None:
            self._report(task)
        channel.note_size()
        keep = self._keep
        if keep is not None:  # what the agent emitted up to its end, for `_keep_on_close`'s caller
            keep.extend(channel.buffer)
        channel.buffer.clear()

    def _keep_on_close(self) -> list[ev.BaseEvent | bytes]:
        """
        Have `aclose` keep what is still buffered instead of dropping it: the list it fills.

        For a consumer that must see every event even when it stops early (a
        detached run logs the run's end, which the agent emits while it is
        cancelled).
        """
        if self._keep is None:
            self._keep = []
        return self._keep

    def __del__(self) -> None:
        # Dropped without aclose (a `break` out of `async for`): cancel the agent.
        task = self._task
        if task is not None and not task.done():
            loop = task.get_loop()
            if not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)
