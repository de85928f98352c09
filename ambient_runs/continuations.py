"""
Continuations: what an adapter needs to continue a paused framework run, kept on the server.

When a framework adapter pauses (a pydantic-ai approval or deferred call, an
Agents SDK approval, a LangGraph ``interrupt()``, a relayed remote's
interrupt), it keeps what it needs to continue (the framework's history or
serialised run state, which call waits, which invocation paused) in the run's
`ContinuationStore`, under the interrupt's id, and sends the client only what
a UI needs to render the question. The client answers with the entry the
official client's ``buildResumeArray`` builds, ``{interruptId, status,
payload}``: nothing else is needed, and ``metadata`` a client sends is never
read for control flow.

A resumed run *takes* every answered interrupt from the store the first time
an adapter asks (`answers`): atomically, so an interrupt is continued once,
on whichever worker the answer reaches. An entry the store cannot continue
ends the run with ``RUN_ERROR``:

======================  ============================  =================================
code                    error                         when
======================  ============================  =================================
``interrupt_unknown``   `InterruptUnknownError`       never issued by this store, or
                                                      forgotten (past *ttl* + *grace*,
                                                      or evicted by a full memory store)
``interrupt_expired``   `InterruptExpiredError`       answered after its *ttl* (its
                                                      ``expiresAt``); ``cancelled`` is
                                                      still taken, as the protocol says
``interrupt_answered``  `InterruptAnsweredError`      answered already (for *grace*
                                                      after the first answer)
``interrupt_mismatch``  `InterruptMismatchError`      the adapter call that would
                                                      continue it now asks with another
                                                      prompt or name
======================  ============================  =================================

Stores: `MemoryContinuations` (one process; the default of every `Run` is a
process-wide one, `default_store`) and
`ambient_runs.stores.redis_continuations.RedisContinuations` (any worker;
what `ambient_runs.asgi.AgentApp` uses by default when its ``store=`` is a
``RedisStore``). A run's store is its ``continuations=`` option.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ambient_runs import events as ev
from ambient_runs.errors import (
    InterruptAnsweredError,
    InterruptExpiredError,
    InterruptUnknownError,
)

if TYPE_CHECKING:
    from ambient_runs._run import Run

__all__ = (
    "Answer",
    "ContinuationStore",
    "DEFAULT_GRACE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_TTL",
    "MemoryContinuations",
    "answers",
    "claim",
    "default_store",
    "expires_at",
    "keep",
)

DEFAULT_TTL = 24 * 60 * 60.0
"""
Seconds an interrupt can be answered: a day, since a person answers an approval.

The interrupt's ``expiresAt`` says when, so the official client refuses a late
answer itself (only ``cancelled`` is still allowed).

.. versionadded:: 0.1.0
"""

DEFAULT_GRACE = 24 * 60 * 60.0
"""
Seconds an answered or expired interrupt is still recognised as such (not as unknown).

.. versionadded:: 0.1.0
"""

DEFAULT_MAX_ENTRIES = 10_000
"""
The most interrupts a `MemoryContinuations` keeps; the oldest are forgotten first.

.. versionadded:: 0.1.0
"""

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""
The most bytes of continuations a `MemoryContinuations` keeps (their JSON text).

.. versionadded:: 0.1.0
"""


@runtime_checkable
class ContinuationStore(Protocol):
    """
    Where paused runs' continuations live, keyed by interrupt id.

    *data* is a JSON object (what the adapter needs to continue). Implement
    the three coroutines to keep them elsewhere; `take` must be atomic: of two
    concurrent takes of one id, one gets the data and the other
    `InterruptAnsweredError`.

    .. versionadded:: 0.1.0
    """

    #: Seconds an interrupt can be answered when `put` is given no *ttl*.
    ttl: float

    async def put(
        self, interrupt_id: str, data: Mapping[str, Any], *, ttl: float | None = None
    ) -> None:
        """Keep *data* under *interrupt_id* for *ttl* seconds (the store's *ttl* by default)."""
        ...

    async def take(self, interrupt_id: str, *, expired_ok: bool = False) -> dict[str, Any]:
        """
        Return the data of *interrupt_id* and mark it answered, atomically.

        Raises:
            InterruptUnknownError: Never put, or forgotten.
            InterruptExpiredError: Its *ttl* has passed (unless *expired_ok*: a
                cancellation of an expired interrupt is still taken).
            InterruptAnsweredError: Taken already.
        """
        ...

    async def drop(self, interrupt_id: str) -> None:
        """Forget *interrupt_id* entirely (it then reads as unknown)."""
        ...


def _check_ttl(ttl: float, name: str = "ttl") -> None:
    if not ttl > 0:
        msg = f"{name} must be positive seconds, not {ttl!r}"
        raise ValueError(msg)


def _encode(data: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as error:
        msg = f"a continuation must be a JSON object: {error}"
        raise TypeError(msg) from None


_UNKNOWN = "was never issued here, or is forgotten; start a new turn without resume"
_EXPIRED = "has expired; only a cancelled answer is still taken: start a new turn"
_ANSWERED = "was answered already; each interrupt is answered once"


@attrs.define
class _Record:
    data: bytes | None  # None once answered
    expires: float
    forget: float


class MemoryContinuations:
    """
    A `ContinuationStore` in this process's memory: bounded, expiring.

    Args:
        ttl: Seconds an interrupt can be answered (its ``expiresAt``).
        grace: Seconds an answered or expired interrupt is still told apart
            from an unknown one; then it is forgotten.
        max_entries: The most interrupts kept; past it the oldest is forgotten
            (it then reads as unknown).
        max_bytes: The most bytes of continuation data kept (JSON text); past
            it the oldest are forgotten.
        clock: Seconds, monotonic (tests pass their own).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        grace: float = DEFAULT_GRACE,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_ttl(ttl)
        _check_ttl(grace, "grace")
        if max_entries < 1 or max_bytes < 1:
            msg = f"max_entries and max_bytes must be >= 1, not {max_entries}, {max_bytes}"
            raise ValueError(msg)
        self.ttl = ttl
        self.grace = grace
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock = clock
        self._records: collections.OrderedDict[str, _Record] = collections.OrderedDict()
        self._bytes = 0
        # Plain methods under a thread lock: no await inside, so any loop (or none) may use it.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<MemoryContinuations {len(self._records)} interrupts, {self._bytes} bytes>"

    def __len__(self) -> int:
        return len(self._records)

    async def put(
        self, interrupt_id: str, data: Mapping[str, Any], *, ttl: float | None = None
    ) -> None:
        """See `ContinuationStore.put`."""
        ttl = self.ttl if ttl is None else ttl
        _check_ttl(ttl)
        blob = _encode(data)
        now = self._clock()
        with self._lock:
            self._forget(interrupt_id)
            self._records[interrupt_id] = _Record(blob, now + ttl, now + ttl + self.grace)
            self._bytes += len(blob)
            self._trim(now)

    async def take(self, interrupt_id: str, *, expired_ok: bool = False) -> dict[str, Any]:
        """See `ContinuationStore.take`."""
        now = self._clock()
        with self._lock:
            record = self._records.get(interrupt_id)
            if record is None or record.forget <= now:
                self._forget(interrupt_id)
                raise InterruptUnknownError(interrupt_id, _UNKNOWN)
            if record.data is None:
                raise InterruptAnsweredError(interrupt_id, _ANSWERED)
            if record.expires <= now and not expired_ok:
                raise InterruptExpiredError(interrupt_id, _EXPIRED)
            blob = record.data
            self._bytes -= len(blob)
            record.data = None
            record.forget = now + self.grace
        loaded: dict[str, Any] = json.loads(blob)
        return loaded

    async def drop(self, interrupt_id: str) -> None:
        """See `ContinuationStore.drop`."""
        with self._lock:
            self._forget(interrupt_id)

    def _forget(self, interrupt_id: str) -> None:
        record = self._records.pop(interrupt_id, None)
        if record is not None and record.data is not None:
            self._bytes -= len(record.data)

    def _trim(self, now: float) -> None:
        """Forget what is past its grace, then the oldest while over a bound."""
        records = self._records
        for key in [k for k, r in records.items() if r.forget <= now][:64]:
            self._forget(key)
        while len(records) > self.max_entries or self._bytes > self.max_bytes:
            self._forget(next(iter(records)))


_default: MemoryContinuations | None = None
_default_lock = threading.Lock()


def default_store() -> MemoryContinuations:
    """
    The process-wide `MemoryContinuations` a `Run` uses without ``continuations=``.

    .. versionadded:: 0.1.0
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = MemoryContinuations()
        return _default


def expires_at(ttl: float) -> str:
    """
    ``Interrupt.expiresAt`` for an interrupt answerable for *ttl* seconds from now (ISO-8601, UTC).

    .. versionadded:: 0.1.0
    """
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=ttl)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def keep(run: Run, interrupt: ev.Interrupt, data: Mapping[str, Any]) -> ev.Interrupt:
    """
    Keep *data* as *interrupt*'s continuation in *run*'s store; *interrupt* with its ``expiresAt``.

    .. versionadded:: 0.1.0
    """
    store = run.continuations
    await store.put(interrupt.id, data)
    if interrupt.expires_at is not None:
        return interrupt
    return attrs.evolve(interrupt, expires_at=expires_at(store.ttl))


@attrs.frozen
class Answer:
    """
    One answered interrupt: the client's entry and the continuation the server kept.

    Attributes:
        entry: The ``ResumeEntry`` (its ``status`` and ``payload`` are the answer;
            its ``metadata`` is never read).
        data: What the adapter kept when it paused.
        index: Where the entry is in the run's ``resume``.

    .. versionadded:: 0.1.0
    """

    entry: ev.ResumeEntry
    data: dict[str, Any]
    index: int = 0

    @property
    def interrupt_id(self) -> str:
        """The interrupt answered."""
        return self.entry.interrupt_id


class _Taken:
    """A run's answers, taken from its store once, and which of them were claimed."""

    __slots__ = ("claimed", "done", "lock")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.done: dict[str, Answer] | None = None
        self.claimed: set[str] = set()


_taken: weakref.WeakKeyDictionary[Run, _Taken] = weakref.WeakKeyDictionary()
_taken_lock = threading.Lock()


async def answers(run: Run) -> dict[str, Answer]:
    """
    Every interrupt *run*'s ``resume`` answers, taken from its store (once per run).

    The first call takes each entry's continuation (`ContinuationStore.take`,
    a ``cancelled`` entry even when expired); later calls return the same.
    When one entry cannot be taken, those taken before it are put back (with
    a fresh *ttl*): none is continued, and the others stay answerable.

    Raises:
        InterruptError: An entry the store cannot continue (unknown, expired,
            answered): the run should end with it. Each later call raises it too.

    .. versionadded:: 0.1.0
    """
    with _taken_lock:
        taken = _taken.setdefault(run, _Taken())
    async with taken.lock:
        if taken.done is None:
            found: dict[str, Answer] = {}
            store = run.continuations
            try:
                for index, entry in enumerate(run.resume):
                    if entry.interrupt_id in found:
                        continue
                    cancelled = entry.status == "cancelled"
                    data = await store.take(entry.interrupt_id, expired_ok=cancelled)
                    found[entry.interrupt_id] = Answer(entry, data, index)
            except BaseException:
                # One answer cannot be continued, so none is: the others stay answerable.
                for answer in found.values():
                    await store.put(answer.interrupt_id, answer.data)
                raise
            taken.done = found
        return taken.done


async def claim(run: Run, select: Callable[[list[Answer]], Iterable[Answer]]) -> list[Answer]:
    """
    Claim the answers of *run* that *select* picks among those no earlier claim took.

    *select* gets the unclaimed answers in ``resume`` order and returns the
    ones this caller continues; each answer is claimed once per run. Raises
    what `answers` raises.

    .. versionadded:: 0.1.0
    """
    found = await answers(run)
    taken = _taken[run]
    free = [a for a in found.values() if a.interrupt_id not in taken.claimed]
    mine = list(select(free))
    taken.claimed.update(a.interrupt_id for a in mine)
    return mine
