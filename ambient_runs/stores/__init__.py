"""
Run stores: where a detached run's events live, so that clients can resume,
join and follow it from any worker process.

A store keeps, per run (a thread id and a run id):

- the run's **log**: its events as encoded JSON, each under a dense sequence
  number starting at 1 (the SSE ``id:`` of its frame), bounded by *max_events*
  (older entries are trimmed);
- the request that started it (its `RunAgentInput` JSON), which a joining
  client's prelude starts from;
- the **end**: the sequence number of the terminal event, once appended; the
  log then expires *retention* seconds later;
- the owner's **lease**, renewed by the worker that runs the agent; a run whose
  lease lapsed before its end is *lost*, and the first follower to notice ends
  it with ``RUN_ERROR`` code ``worker_lost`` (`follow` does this);
- a **cancel request**, which any worker may make and the owner waits for.

`MemoryStore` is the embedded default (one process); `ambient_runs.stores.redis.RedisStore`
puts the same on Redis Streams for several workers (``pip install ambient-runs[redis]``).
Both implement `RunStore`, the protocol `ambient_runs.asgi.AgentApp` (``store=``) uses.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from ambient_runs import events as ev
from ambient_runs._wire import encode_json
from ambient_runs.errors import AmbientRunsError
from ambient_runs.stores._fold import RunView, prelude

__all__ = (
    "Entry",
    "EventsExpiredError",
    "EventsLostError",
    "MemoryStore",
    "Page",
    "RunEndedError",
    "RunExistsError",
    "RunInfo",
    "RunNotFoundError",
    "RunStore",
    "RunView",
    "SequenceGapError",
    "StoreError",
    "StoreFullError",
    "StoreUnavailableError",
    "follow",
    "prelude",
    "worker_lost_event",
)

# The fold lives in its own module; it shows, pickles and documents as ours.
RunView.__module__ = prelude.__module__ = __name__

Entry: TypeAlias = tuple[int, bytes]
"""One logged event: its sequence number (1, 2, …) and its JSON."""

DEFAULT_RETENTION = 3600.0
DEFAULT_MAX_EVENTS = 1_000_000
"""The events a run's log keeps by default: the documented maximum size of a run kept whole,
so that a reader however slow gets every event of such a run while its log is retained."""
DEFAULT_LEASE = 10.0
DEFAULT_MAX_RUNS = 10_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_ENTRY_OVERHEAD = 48
"""Bytes a `MemoryStore` event costs beyond its JSON: a list slot and a bytes object's header
(41 on CPython 3.11)."""


class StoreError(AmbientRunsError):
    """
    Base class of the errors a run store raises.

    .. versionadded:: 0.1.0
    """


class RunNotFoundError(StoreError, LookupError):
    """
    No run with this thread id and run id is in the store: it never existed here,
    or it ended more than the store's retention time ago and was deleted.

    A transport answers it with 404.

    .. versionadded:: 0.1.0
    """


class EventsExpiredError(StoreError, LookupError):
    """
    A resume asked for events the store no longer holds: the run's log went past
    its *max_events* bound and its oldest entries were trimmed.

    *first* is the oldest sequence number still held. A transport answers 410;
    the client can join instead (no cursor), which needs no old events.

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str, *, first: int) -> None:
        super().__init__(message)
        self.first = first


class EventsLostError(StoreError, LookupError):
    """
    Events the store should still hold are gone for a reason other than trimming:
    the store restarted empty, was flushed, or evicted the run's keys under
    memory pressure. Unlike `EventsExpiredError`, nothing the client did (or
    could do) explains it, so a transport names it ``events_lost``.

    .. versionadded:: 0.1.0
    """


class StoreUnavailableError(StoreError, ConnectionError):
    """
    The store did not answer: a connection failed, timed out, or every pooled
    connection stayed busy past the wait. The operation may be retried later.

    A transport answers it with 503 and ``Retry-After`` before a stream starts,
    and with ``RUN_ERROR`` code ``store_unavailable`` once it has.

    .. versionadded:: 0.1.0
    """


class StoreFullError(StoreUnavailableError):
    """
    The store refused a run or a write for want of room. A `MemoryStore` whose
    *max_runs* or *max_bytes* is taken by runs still going refuses a new run or
    an append (ended runs are evicted first, oldest first); a Redis at its
    ``maxmemory`` with a policy that evicts nothing (``noeviction``) answers
    writes with an ``OOM`` error (reads still work).

    It is a `StoreUnavailableError`: the condition passes as runs end or memory
    is freed, so a transport answers 503 with ``Retry-After`` (or ``RUN_ERROR``
    code ``store_unavailable`` once a stream has started). The fix: raise the
    bound (*max_bytes*, Redis's ``maxmemory``), shorten *retention*, or lower
    *max_events*.

    .. versionadded:: 0.1.0
    """


class SequenceGapError(StoreError, ValueError):
    """
    An append with *first* does not line up with the run's log: the log's last
    sequence number is neither ``first - 1`` (the batch comes next) nor at or
    past the batch's last number with this very batch logged there (a retry
    of a batch that already landed).

    The caller's view of the log is wrong (a batch it never appended, or one
    it skipped); appending anyway would leave a gap or a duplicate.

    Attributes:
        first: The sequence number the batch's first event was to get.
        last: The log's last sequence number.

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str, *, first: int, last: int) -> None:
        super().__init__(message)
        self.first = first
        self.last = last


class RunEndedError(StoreError, RuntimeError):
    """
    Events were appended to a run that has already ended (its terminal event is
    logged, or a follower declared its owner lost).

    .. versionadded:: 0.1.0
    """


class RunExistsError(StoreError, ValueError):
    """
    A run was created under a thread id and run id the store already holds.
    Every run needs a fresh run id.

    .. versionadded:: 0.1.0
    """


@attrs.frozen(kw_only=True)
class RunInfo:
    """
    What a store knows about one run.

    Attributes:
        thread_id: The run's thread.
        run_id: The run.
        input: The `RunAgentInput` that started it, as JSON.
        owner: The token of the worker that runs it.
        lease: The owner's lease, in seconds.
        last: The sequence number of the last event appended (0 for none).
        end: The sequence number of the terminal event, or None while running.
        lease_alive: Whether the owner's lease is current (always False once ended).
        cancel_requested: Whether someone asked for the run to be cancelled.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    run_id: str
    input: bytes
    owner: str
    lease: float
    last: int
    end: int | None
    lease_alive: bool
    cancel_requested: bool


@attrs.frozen
class Page:
    """
    The result of `RunStore.read`: entries, and where the log ends if it has.

    .. versionadded:: 0.1.0
    """

    entries: list[Entry]
    end: int | None


@runtime_checkable
class RunStore(Protocol):
    """
    The storage a detached run needs; `MemoryStore` and `RedisStore` implement it.

    Every method is a coroutine; thread ids and run ids are any strings.

    .. versionadded:: 0.1.0
    """

    retention: float
    """Seconds a run's log is kept after its terminal event."""

    async def create(
        self, thread_id: str, run_id: str, *, input: bytes, owner: str, lease: float
    ) -> None:
        """Open a run's log, owned by *owner* under a lease; `RunExistsError` if it exists."""

    async def append(
        self,
        thread_id: str,
        run_id: str,
        events: Sequence[bytes],
        *,
        final: bool = False,
        first: int | None = None,
    ) -> int:
        """
        Append *events* in order; with *final*, the last one is the terminal event.

        *first* is the sequence number the batch's first event gets (None: the
        next one). With it an append is idempotent: events of the batch already
        in the log (a retried append whose first try landed) are not written
        again, and a *first* past the log's next number is a ``ValueError``.

        Each event is compact JSON on one line (as `ambient_runs.encode_json`
        writes it, and as an SSE ``data:`` line needs). The events of one call
        are one batch: `RedisStore` keeps each batch as one stream entry, so
        callers append what they have gathered at once (a detached run
        appends once per loop tick).

        With *first*, the append is idempotent: the batch's first event is to
        get sequence number *first*. If the log already holds this batch at
        ``first`` … ``first + len(events) - 1`` (a retry of a batch that
        landed although its caller saw a timeout), nothing is written and
        ``first + len(events) - 1`` is returned; if the log's last number is
        ``first - 1``, the batch is written; anything else raises
        `SequenceGapError`. A caller that always passes *first* can retry an
        append that failed with `StoreUnavailableError` as often as it likes:
        each batch is logged exactly once. Without *first*, a retried append
        whose first attempt did land is logged twice.

        Returns the sequence number of the last one. Raises `RunEndedError` once
        the run has ended, `RunNotFoundError` if it is not in the store,
        `SequenceGapError` (above), `StoreUnavailableError` when the store does
        not answer (the batch may or may not have landed: retry with *first*),
        and ``ValueError`` for an event holding a line break, a *final* append
        with no events, or a *first* below 1.
        """

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        """
        Return up to *limit* entries after sequence number *after*, in order.

        With *wait*, and nothing after *after* yet, wait up to *wait* seconds
        for more. Raises `RunNotFoundError`, `EventsExpiredError` when the
        entry right after *after* was trimmed by *max_events*, `EventsLostError`
        when it is gone for another reason the store can tell, and
        `StoreUnavailableError` when the store does not answer.
        """

    async def info(self, thread_id: str, run_id: str) -> RunInfo:
        """Return what the store knows of the run; `RunNotFoundError` if nothing."""

    async def renew(self, thread_id: str, run_id: str, *, owner: str, lease: float) -> bool:
        """Extend *owner*'s lease; False if the run ended or is no longer its."""

    async def end_lost(self, thread_id: str, run_id: str, event: bytes) -> bool:
        """
        End a run whose owner's lease lapsed, with *event* as its terminal event.

        Does nothing (and returns False) if the run has ended or its lease is
        current; atomic, so several followers noticing at once end it once.
        """

    async def request_cancel(self, thread_id: str, run_id: str) -> bool:
        """Ask the owner to cancel the run; False if it has already ended."""

    async def discard(self, thread_id: str, run_id: str, *, owner: str) -> bool:
        """
        Delete a run that *owner* created but never appended to; False if there is none.

        A worker whose `create` failed without knowing whether it landed (a
        timeout) discards the run, so that nothing is left of a request that
        answered an error. A run with events, or another owner's, is left alone.
        """

    async def wait_cancel(self, thread_id: str, run_id: str) -> None:
        """Return once a cancel of the run has been requested (the owner waits on it)."""

    async def aclose(self) -> None:
        """Release the store's connections."""


def _check_lines(data: bytes, events: Sequence[bytes]) -> None:
    """Raise ValueError unless *data*, *events* joined by newlines, has no other line break."""
    if data.count(b"\n") == len(events) - 1 and b"\r" not in data:
        return
    for index, event in enumerate(events):
        if b"\n" in event or b"\r" in event:
            msg = (
                f"event {index} of the batch holds a line break: a run store keeps compact "
                "JSON on one line; encode events with ambient_runs.encode_json"
            )
            raise ValueError(msg)


def _check_bounds(retention: float, max_events: int) -> None:
    """Refuse a retention or a size bound that would keep nothing (any store's options)."""
    if not retention > 0:
        msg = f"retention must be a positive number of seconds, not {retention!r}"
        raise ValueError(msg)
    if max_events < 1:
        msg = f"max_events must be at least 1, not {max_events!r}"
        raise ValueError(msg)


def _check_final(events: Sequence[bytes], final: bool, first: int | None = None) -> None:
    if final and not events:
        msg = "a final append needs the terminal event: pass it in events"
        raise ValueError(msg)
    if first is not None and (not isinstance(first, int) or first < 1):
        msg = f"first is the sequence number of the batch's first event (1 or more), not {first!r}"
        raise ValueError(msg)


def worker_lost_event(lease: float) -> bytes:
    """
    The JSON of the ``RUN_ERROR`` (code ``worker_lost``) that ends a lost run.

    .. versionadded:: 0.1.0
    """
    message = (
        f"the worker running this run stopped renewing its lease for {lease:g} s; "
        "the run is lost (start it again)"
    )
    return encode_json(ev.RunErrorEvent(message=message, code="worker_lost"))


async def follow(
    store: RunStore, thread_id: str, run_id: str, after: int = 0, *, poll: float | None = None
) -> AsyncIterator[Entry]:
    """
    Yield every entry of a run after *after*, live, up to and including its terminal event.

    While nothing arrives, the owner's lease is checked every *poll* seconds
    (default: a third of the lease, at most 1 s); if it lapsed before the run
    ended, the run is ended with ``RUN_ERROR`` code ``worker_lost``
    (`worker_lost_event`), which this follower and every other receives.

    Raises:
        RunNotFoundError: The run is not (or no longer) in the store.
        EventsExpiredError: The entries right after *after* were trimmed.

    .. versionadded:: 0.1.0
    """
    async for entries in _tail(store, thread_id, run_id, after, poll=poll):
        for entry in entries:
            yield entry


async def _tail(
    store: RunStore, thread_id: str, run_id: str, after: int = 0, *, poll: float | None = None
) -> AsyncIterator[list[Entry]]:
    """`follow`, a page at a time; an empty page each time *poll* seconds pass with nothing."""
    info = await store.info(thread_id, run_id)
    wait = poll if poll is not None else min(1.0, info.lease / 3)
    while True:
        page = await store.read(thread_id, run_id, after, limit=5000, wait=wait)
        yield page.entries
        if page.entries:
            after = page.entries[-1][0]
        if page.end is not None and after >= page.end:
            return
        if not page.entries:
            info = await store.info(thread_id, run_id)
            if info.end is None and not info.lease_alive:
                await store.end_lost(thread_id, run_id, worker_lost_event(info.lease))


# ---------------------------------------------------------------------- memory


class _MemoryRun:
    """
    One run of a `MemoryStore`.

    The log is dense, so only the events are kept: ``data[i]`` is event
    ``base + 1 + i``; the ones before *start* are trimmed (released at once,
    their list slots dropped in one go once they are half of it, so that
    trimming costs O(1) per event and a read of *k* events O(k)).
    """

    __slots__ = (
        "base",
        "cancel",
        "cancel_waiters",
        "data",
        "deadline",
        "end",
        "expires",
        "input",
        "last",
        "lease",
        "lost",
        "owner",
        "size",
        "start",
        "waiters",
    )

    def __init__(self, input: bytes, owner: str, lease: float) -> None:
        self.input = input
        self.owner = owner
        self.lease = lease
        self.deadline = time.monotonic() + lease
        self.data: list[bytes] = []
        self.base = 0
        self.start = 0
        self.last = 0
        self.end: int | None = None
        self.lost = False  # ended by end_lost: its last event is not the owner's
        self.expires: float | None = None
        self.cancel = False
        self.cancel_waiters: list[asyncio.Future[None]] = []
        self.waiters: list[asyncio.Future[None]] = []
        self.size = len(input) + _RUN_OVERHEAD

    @property
    def first(self) -> int:
        """The sequence number of the oldest event kept (``last + 1`` when none is)."""
        return self.base + 1 + self.start

    def trim(self, keep: int) -> int:
        """Drop the oldest events past the last *keep*; return the bytes they held."""
        data = self.data
        drop = len(data) - self.start - keep
        if drop <= 0:
            return 0
        stop = self.start + drop
        freed = sum(map(len, data[self.start : stop])) + drop * _ENTRY_OVERHEAD
        data[self.start : stop] = [b""] * drop  # let the bytes go now; the slots go below
        self.start = stop
        if stop > 4096 and stop * 2 > len(data):
            del data[:stop]
            self.base += stop
            self.start = 0
        return freed

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def wake_cancel(self) -> None:
        waiters, self.cancel_waiters = self.cancel_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


_RUN_OVERHEAD = 1024
"""Bytes a `MemoryStore` run costs beyond its input and events (its record, ids, futures)."""


class MemoryStore:
    """
    A `RunStore` in this process's memory: the embedded default, for one worker.

    Runs started in this process can be resumed, joined and cancelled from any
    request this process serves; nothing is shared with other processes (use
    `ambient_runs.stores.redis.RedisStore` for that). Use it from one event loop.

    Its memory is bounded by *max_runs* and *max_bytes* (a run's input and its
    events' JSON count, each event with its bookkeeping). To make room, runs
    that have ended are evicted before their *retention* is up, the one that
    ended first first; a reader still on an evicted run gets ``RUN_ERROR`` code
    ``events_lost``, a later resume or join 404. Runs still going are never
    evicted: when they alone fill the bound, a new run is refused with
    `StoreFullError` (a transport answers 503 with ``Retry-After``), and so is
    an append that does not fit (the run ends with ``RUN_ERROR`` code
    ``store_unavailable`` unless room is made within its lease). A terminal
    event is always taken.

    Args:
        retention: Seconds a run's log is kept after its terminal event.
        max_events: The most events kept per run; older ones are dropped
            (a resume asking for them gets `EventsExpiredError`). The default,
            1,000,000, keeps a whole run of that many events.
        max_runs: The most runs kept, ended ones included.
        max_bytes: The most bytes kept, all runs together (default 256 MiB:
            a whole run of 1,000,000 text deltas fits).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        retention: float = DEFAULT_RETENTION,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_runs: int = DEFAULT_MAX_RUNS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        _check_bounds(retention, max_events)
        if max_runs < 1:
            msg = f"max_runs must be at least 1, not {max_runs!r}"
            raise ValueError(msg)
        if max_bytes < 1:
            msg = f"max_bytes must be at least 1, not {max_bytes!r}"
            raise ValueError(msg)
        self.retention = retention
        self.max_events = max_events
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self._runs: dict[tuple[str, str], _MemoryRun] = {}
        self._expiry: list[tuple[float, tuple[str, str]]] = []
        self._ended: dict[tuple[str, str], None] = {}  # in the order they ended
        self._bytes = 0

    def __repr__(self) -> str:
        return f"<MemoryStore {len(self._runs)} runs, {self._bytes} bytes>"

    @property
    def size(self) -> int:
        """
        The bytes this store accounts for now (what *max_bytes* bounds).

        .. versionadded:: 0.1.0
        """
        return self._bytes

    def _sweep(self) -> None:
        now = time.monotonic()
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, key = heapq.heappop(expiry)
            run = self._runs.get(key)
            if run is not None and run.expires is not None and run.expires <= now:
                self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        run = self._runs.pop(key)
        self._ended.pop(key, None)
        self._bytes -= run.size
        run.wake()  # its readers find it gone
        run.wake_cancel()

    def _make_room(
        self, cost: int, *, runs: int = 0, spare: tuple[str, str] | None = None
    ) -> bool:
        """Evict ended runs, oldest first, until *cost* more bytes and *runs* more runs fit."""
        ended = self._ended
        while (
            self._bytes + cost > self.max_bytes or len(self._runs) + runs > self.max_runs
        ) and ended:
            oldest = next(iter(ended))
            if oldest == spare:
                break
            self._drop(oldest)
        return self._bytes + cost <= self.max_bytes and len(self._runs) + runs <= self.max_runs

    def _get(self, thread_id: str, run_id: str) -> _MemoryRun:
        self._sweep()
        run = self._runs.get((thread_id, run_id))
        if run is None:
            raise _not_found(thread_id, run_id)
        return run

    def _finish(self, key: tuple[str, str], run: _MemoryRun) -> None:
        run.end = run.last
        run.expires = time.monotonic() + self.retention
        heapq.heappush(self._expiry, (run.expires, key))
        self._ended[key] = None
        run.wake_cancel()  # nobody waits for a cancel of an ended run

    async def create(
        self, thread_id: str, run_id: str, *, input: bytes, owner: str, lease: float
    ) -> None:
        """See `RunStore.create`; `StoreFullError` when live runs fill the bounds."""
        self._sweep()
        key = (thread_id, run_id)
        if key in self._runs:
            raise _exists(thread_id, run_id)
        run = _MemoryRun(input, owner, lease)
        if not self._make_room(run.size, runs=1):
            refused = f"a new run ({len(input)} bytes of input)"
            raise self._full(refused)
        self._runs[key] = run
        self._bytes += run.size

    async def append(
        self,
        thread_id: str,
        run_id: str,
        events: Sequence[bytes],
        *,
        final: bool = False,
        first: int | None = None,
    ) -> int:
        """See `RunStore.append`; `StoreFullError` when live runs fill *max_bytes*."""
        _check_final(events, final, first)
        _check_lines(b"\n".join(events), events)
        key = (thread_id, run_id)
        run = self._get(thread_id, run_id)
        if first is not None and run.last != first - 1:
            top = first + len(events) - 1
            if run.last >= top and _holds(run, first, events):
                return top  # a retry of a batch that landed
            if run.end is not None:
                raise _ended(thread_id, run_id)
            raise _gap(thread_id, run_id, first, run.last)
        if run.end is not None:
            raise _ended(thread_id, run_id)
        cost = sum(map(len, events)) + len(events) * _ENTRY_OVERHEAD
        if not final and not self._make_room(cost, spare=key):
            refused = f"{len(events)} more events of run {run_id!r}"
            raise self._full(refused)
        run.data += events
        run.last += len(events)
        run.size += cost
        self._bytes += cost
        freed = run.trim(self.max_events)
        run.size -= freed
        self._bytes -= freed
        if final:
            self._finish(key, run)
        run.wake()
        return run.last

    def _full(self, what: str) -> StoreFullError:
        return StoreFullError(
            f"the MemoryStore refused {what}: runs still going fill it "
            f"({len(self._runs)} runs of max_runs={self.max_runs}, {self._bytes} bytes of "
            f"max_bytes={self.max_bytes}); retry once some end, or raise the bounds"
        )

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        """See `RunStore.read`."""
        run = self._get(thread_id, run_id)
        if run.last <= after and run.end is None and wait > 0:
            waiter = asyncio.get_running_loop().create_future()
            run.waiters.append(waiter)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, wait)
            run = self._get(thread_id, run_id)
        if run.last <= after:
            return Page([], run.end)
        first = run.first
        if after + 1 < first:
            raise _expired(thread_id, run_id, after, first)
        at = after + 1 - run.base - 1
        stop = min(at + max(limit, 1), len(run.data))
        numbers = range(after + 1, after + 1 + stop - at)
        return Page(list(zip(numbers, run.data[at:stop], strict=True)), run.end)

    async def info(self, thread_id: str, run_id: str) -> RunInfo:
        """See `RunStore.info`."""
        run = self._get(thread_id, run_id)
        return RunInfo(
            thread_id=thread_id,
            run_id=run_id,
            input=run.input,
            owner=run.owner,
            lease=run.lease,
            last=run.last,
            end=run.end,
            lease_alive=run.end is None and time.monotonic() < run.deadline,
            cancel_requested=run.cancel,
        )

    async def renew(self, thread_id: str, run_id: str, *, owner: str, lease: float) -> bool:
        """See `RunStore.renew`."""
        run = self._get(thread_id, run_id)
        if run.end is not None or run.owner != owner:
            return False
        run.lease = lease
        run.deadline = time.monotonic() + lease
        return True

    async def end_lost(self, thread_id: str, run_id: str, event: bytes) -> bool:
        """See `RunStore.end_lost`."""
        run = self._get(thread_id, run_id)
        if run.end is not None or time.monotonic() < run.deadline:
            return False
        await self.append(thread_id, run_id, [event], final=True)
        run.lost = True
        return True

    async def request_cancel(self, thread_id: str, run_id: str) -> bool:
        """See `RunStore.request_cancel`."""
        run = self._get(thread_id, run_id)
        if run.end is not None:
            return False
        run.cancel = True
        run.wake_cancel()
        return True

    async def discard(self, thread_id: str, run_id: str, *, owner: str) -> bool:
        """See `RunStore.discard`."""
        self._sweep()
        key = (thread_id, run_id)
        run = self._runs.get(key)
        if run is None or run.owner != owner or run.last != 0:
            return False
        self._drop(key)
        return True

    async def wait_cancel(self, thread_id: str, run_id: str) -> None:
        """See `RunStore.wait_cancel`."""
        run = self._get(thread_id, run_id)
        while not run.cancel and run.end is None:
            waiter = asyncio.get_running_loop().create_future()
            run.cancel_waiters.append(waiter)
            await waiter
            if self._runs.get((thread_id, run_id)) is not run:
                raise _not_found(thread_id, run_id)
        if not run.cancel:
            await asyncio.Future()  # ended without a cancel: no cancel will ever come

    async def aclose(self) -> None:
        """Forget every run."""
        for run in self._runs.values():
            run.wake()
        self._runs.clear()
        self._expiry.clear()
        self._ended.clear()
        self._bytes = 0


def _holds(run: _MemoryRun, first: int, events: Sequence[bytes]) -> bool:
    """Whether *run* holds *events* from *first* on (assumed so where they were trimmed)."""
    offset = first - run.base - 1  # data[offset] is event number *first*
    kept = run.first
    data = run.data
    return all(first + i < kept or data[offset + i] == event for i, event in enumerate(events))


def _gap(thread_id: str, run_id: str, first: int, last: int) -> SequenceGapError:
    return SequenceGapError(
        f"a batch starting at {first} does not fit run {run_id!r} of thread {thread_id!r}, "
        f"whose log ends at {last}: append from the last number the store returned",
        first=first,
        last=last,
    )


def _not_found(thread_id: str, run_id: str) -> RunNotFoundError:
    return RunNotFoundError(
        f"no run {run_id!r} in thread {thread_id!r}: it never ran on this store, or it ended "
        "longer ago than the store's retention; start a new run"
    )


def _exists(thread_id: str, run_id: str) -> RunExistsError:
    return RunExistsError(
        f"run {run_id!r} of thread {thread_id!r} already exists; give every run a new runId"
    )


def _ended(thread_id: str, run_id: str) -> RunEndedError:
    return RunEndedError(
        f"run {run_id!r} of thread {thread_id!r} has already ended; nothing more can be appended"
    )


def _expired(thread_id: str, run_id: str, after: int, first: int) -> EventsExpiredError:
    return EventsExpiredError(
        f"the events of run {run_id!r} (thread {thread_id!r}) after id {after} are no longer "
        f"stored (the oldest kept is {first}); join the run without a cursor instead",
        first=first,
    )
