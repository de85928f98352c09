"""
Detached runs: an agent that keeps running when its client goes, logged to a `RunStore`.

`AgentApp(agent, store=...)` hands its requests here:

- ``POST`` (a `RunAgentInput`) opens the run's log in the store and starts the
  agent in a task of its own, owned by this worker. Every event is appended to
  the store, batched per loop tick (one append per batch, while the previous
  one is in flight the next batch gathers), *before* any client sees it. The
  owner keeps the frames of what the store has acknowledged in memory (the
  last `_KEEP` events) and serves its own followers from there, the response
  included: they never read back from the store what this process just wrote.
  A client that disconnects stops following; the run goes on.
- ``GET …/threads/{threadId}/runs/{runId}`` with ``Last-Event-ID`` (or
  ``?after=<id>``) sends the frames after that id and follows the run live to
  its terminal event; without a cursor it *joins*: a prelude folded from the
  log (`ambient_runs.stores.RunView`), then the live tail. Any worker serves it:
  the owner from memory, the others from the store.
- ``POST …/threads/{threadId}/runs/{runId}/cancel`` asks the owner (on any
  worker) to cancel: it ends with the ``cancelled`` outcome.

Every frame carries an ``id:``: the event's sequence number in the log; every
frame of a join's prelude carries the number of the last event folded into it,
so resuming from any of them continues right after the prelude.

The owner renews a lease in the store every third of *lease*; if it dies,
followers end the run with ``RUN_ERROR`` code ``worker_lost`` once the lease
has lapsed (`ambient_runs.stores.follow`).

Store failures are named, never hidden. Any exception of a store call that is
not a `StoreError` counts as the store being unavailable, like
`StoreUnavailableError` itself. Before a stream starts (a POST's create, a
join's or resume's reads, a cancel) that is a JSON 503 with ``Retry-After``.
Once streaming, store calls are retried for up to *lease* seconds (the time
after which the run counts as lost anyway), then the stream ends with
``RUN_ERROR`` code ``store_unavailable``; the owner then stops the agent. A
run whose log vanished while it was going (the store restarted empty, was
flushed, or evicted it) ends with code ``events_lost``; only events trimmed by
the log's size bound are ``events_expired``. A POST whose create failed leaves
nothing behind: the run is discarded once the store answers again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from typing import Any, ParamSpec, TypeAlias, TypeVar

from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._stream import EventStream
from ambient_runs._wire import encode_json, from_wire
from ambient_runs.stores import (
    EventsExpiredError,
    EventsLostError,
    RunEndedError,
    RunExistsError,
    RunNotFoundError,
    RunStore,
    RunView,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
    worker_lost_event,
)

__all__ = ("Detached",)

_log = logging.getLogger("ambient_runs")

_Message: TypeAlias = MutableMapping[str, Any]
_Receive: TypeAlias = Callable[[], Awaitable[_Message]]
_Send: TypeAlias = Callable[[_Message], Awaitable[None]]
Reject: TypeAlias = Callable[..., Awaitable[None]]

_ROUTE = re.compile(r"(?:^|/)threads/([^/]+)/runs/([^/]+?)(/cancel)?/?$")
_TERMINAL = (ev.RunFinishedEvent, ev.RunErrorEvent)
_HIGH_WATER = 4096  # events waiting for the store before the agent's drain() waits
_CATCH_UP = 5000  # entries per read while replaying
_KEEP = 65_536  # acknowledged frames the owner keeps for its own followers
_RETRY_AFTER = [(b"retry-after", b"1")]  # seconds a client waits before retrying after a 503
_SETTLE = 300.0  # seconds a failed run keeps trying to log its end once the store is back

_P = ParamSpec("_P")
_T = TypeVar("_T")

_STREAM_HEADERS = [
    (b"content-type", sse.CONTENT_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def route(scope: MutableMapping[str, Any]) -> tuple[str, str, bool] | None:
    """``(thread_id, run_id, is_cancel)`` if the request's path names a run, else None."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
    path = path.partition("?")[0]
    match = _ROUTE.search(path)
    if match is None:
        return None
    thread_id = urllib.parse.unquote(match.group(1))
    run_id = urllib.parse.unquote(match.group(2))
    return thread_id, run_id, match.group(3) is not None


class Detached:
    """
    The detached runs of one `AgentApp`: the runs this worker owns, and its followers.

    Args:
        store: Where the runs' logs live.
        lease: Seconds the owner's lease lasts; renewed every third of it. Also
            how long a stream retries a store that does not answer.
        keep_alive: Seconds of silence before a follower gets a keep-alive comment.
    """

    def __init__(self, store: RunStore, *, lease: float, keep_alive: float | None) -> None:
        if not lease > 0:
            msg = f"lease must be a positive number of seconds, not {lease!r}"
            raise ValueError(msg)
        self.store = store
        self.lease = lease
        self.keep_alive = keep_alive
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._runs: dict[tuple[str, str], _Owned] = {}
        # Runs whose create failed without saying whether it landed: discarded in the
        # background once the store answers (a retry of the POST discards it at once).
        self._uncertain: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"<Detached {len(self._runs)} runs owned by {self.owner} on {self.store!r}>"

    def spawn(self, coro: Coroutine[Any, Any, Any], key: tuple[str, str], what: str) -> None:
        """Run *coro* in the background; a failure is logged once, naming the run."""
        task = asyncio.get_running_loop().create_task(
            coro, name=f"ambient_runs detached {key[1]} {what}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda done: _report(done, key, what))

    async def patiently(
        self, call: Callable[_P, Awaitable[_T]], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """
        Call the store, retrying while it does not answer, for up to *lease* seconds.

        Raises:
            StoreUnavailableError: It still did not answer (any exception that
                is not a `StoreError` counts as not answering).
        """
        deadline = time.monotonic() + self.lease
        delay = 0.05
        while True:
            try:
                return await call(*args, **kwargs)
            except Exception as error:
                if not _unavailable(error):
                    raise
                if time.monotonic() + delay > deadline:
                    msg = f"the run store did not answer for {self.lease:g} s ({error!r})"
                    raise StoreUnavailableError(msg) from error
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def once(
        self, call: Callable[_P, Awaitable[_T]], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """
        Call the store once; anything but a `StoreError` raises `StoreUnavailableError`.

        So a client library's own error (a refused connection, a timeout) is
        answered as the store being unavailable, while the fold's or the
        transport's own errors outside store calls are not mistaken for it.
        """
        try:
            return await call(*args, **kwargs)
        except StoreError:
            raise
        except Exception as error:
            msg = f"the run store failed: {error!r}"
            raise StoreUnavailableError(msg) from error

    # ------------------------------------------------------------ starting

    async def start(
        self,
        events: EventStream,
        receive: _Receive,
        send: _Send,
        cors: Sequence[tuple[bytes, bytes]],
        reject: Reject,
    ) -> None:
        """Open the run's log, start the agent detached, and follow it for this client."""
        run = events.run
        key = (run.thread_id, run.run_id)
        try:
            await self._create(key, encode_json(run.input))
        except RunExistsError as error:
            await events.aclose()
            await reject(send, 409, "run exists", [str(error)], cors=cors)
            return
        except _StartingError as error:
            await events.aclose()
            await reject(send, 503, "run starting", [str(error)], _RETRY_AFTER, cors)
            return
        except StoreUnavailableError as error:
            await events.aclose()
            _log.warning(
                "run %r of thread %r: the run store failed to create it: %r", key[1], key[0], error
            )
            self._discard_later(key)
            await _unavailable_answer(send, cors, reject, error)
            return
        owned = _Owned(self, events)
        self._runs[key] = owned
        owned.start()
        await self._serve(key, 0, b"", False, receive, send, cors)

    async def _create(self, key: tuple[str, str], input_json: bytes) -> None:
        """
        Create the run's log, once.

        What this worker's own failed create may have left is discarded first
        (the background discard stopped, so that it cannot discard the new run).
        A run that exists without a single event is either being started by
        another request this very moment or left by another worker's failed
        create, which that worker discards: the caller may retry soon
        (`_StartingError`).
        """
        store, once = self.store, self.once

        async def create() -> None:
            await store.create(*key, input=input_json, owner=self.owner, lease=self.lease)

        pending = self._uncertain.pop(key, None)
        if pending is not None:
            pending.cancel()
            await asyncio.wait((pending,))
            try:
                await once(store.discard, *key, owner=self.owner)
            except StoreUnavailableError:
                self._discard_later(key)
                raise
        try:
            await once(create)
        except RunExistsError:
            if key in self._runs:
                raise
            try:
                info = await once(store.info, *key)
            except RunNotFoundError:  # it went away meanwhile: it was a leftover
                await once(create)
                return
            if info.last == 0 and info.end is None:
                msg = (
                    f"run {key[1]!r} of thread {key[0]!r} exists but has not started: another "
                    "request is starting it, or it is left from a failed request and about "
                    "to be discarded; retry shortly"
                )
                raise _StartingError(msg) from None
            raise

    def _discard_later(self, key: tuple[str, str]) -> None:
        """Discard what a failed create may have left, once the store answers again."""
        if key in self._uncertain:
            return
        task = asyncio.get_running_loop().create_task(
            self._discard(key), name=f"ambient_runs detached {key[1]} discard"
        )
        self._uncertain[key] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda done: _report(done, key, "discard"))

    async def _discard(self, key: tuple[str, str]) -> None:
        deadline = time.monotonic() + self.store.retention + self.lease
        delay = 0.1
        try:
            while time.monotonic() < deadline:
                try:
                    if await self.store.discard(*key, owner=self.owner):
                        _log.info(
                            "run %r of thread %r: discarded after its failed create", *key[::-1]
                        )
                    return
                except Exception as error:
                    if not _unavailable(error):
                        raise
                # Often enough that the store, once back, sees the discard before the
                # run's lease lapses and a follower would end it as worker_lost.
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.lease / 3, 1.0)
        finally:
            if self._uncertain.get(key) is asyncio.current_task():
                del self._uncertain[key]

    async def aclose(self) -> None:
        """Cancel every run this worker owns and wait until each is logged to its end."""
        owned = list(self._runs.values())
        for run in owned:
            run.cancel()
        await asyncio.gather(*(run.done for run in owned), return_exceptions=True)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------ routes

    async def handle(
        self,
        method: str,
        where: tuple[str, str, bool],
        headers: Any,
        query: str,
        receive: _Receive,
        send: _Send,
        cors: Sequence[tuple[bytes, bytes]],
        reject: Reject,
    ) -> None:
        """Answer a resume or join (``GET``) or a cancel (``POST …/cancel``)."""
        thread_id, run_id, is_cancel = where
        if is_cancel:
            if method != "POST":
                detail = f"{method} is not allowed; POST to cancel the run"
                allow = [(b"allow", b"POST")]
                await reject(send, 405, "method not allowed", [detail], allow, cors)
                return
            await self._cancel(thread_id, run_id, send, cors, reject)
            return
        if method != "GET":
            detail = f"{method} is not allowed; GET follows the run (Last-Event-ID resumes)"
            await reject(send, 405, "method not allowed", [detail], [(b"allow", b"GET")], cors)
            return
        cursor = headers.get("last-event-id")
        for name, value in urllib.parse.parse_qsl(query):
            if name == "after":
                cursor = value
        after: int | None = None
        if cursor is not None and cursor.strip() != "":
            text = cursor.strip()
            # ASCII digits only: str.isdigit() also takes "²", which int() refuses (a 500).
            if not (text.isascii() and text.isdigit()) or len(text) > 18:
                detail = f"the cursor {text[:40]!r} is not an event id (a number from an id: line)"
                await reject(send, 400, "bad cursor", [detail], cors=cors)
                return
            after = int(text)
        key = (thread_id, run_id)
        owned = self._runs.get(key)
        try:
            if after is None:
                head, cursor_at, ended = await self._prelude(key)
            elif owned is not None and after >= owned.base:
                head, cursor_at, ended = b"", after, False  # all in this process's memory
            else:
                head, cursor_at, ended = await self._replay(key, after)
        except RunNotFoundError as error:
            await reject(send, 404, "run not found", [str(error)], cors=cors)
            return
        except EventsExpiredError as error:
            await reject(send, 410, "events expired", [str(error)], cors=cors)
            return
        except EventsLostError as error:
            await reject(send, 410, "events lost", [str(error)], cors=cors)
            return
        except StoreUnavailableError as error:
            _log.warning(
                "run %r of thread %r: the run store failed a read: %r", run_id, thread_id, error
            )
            await _unavailable_answer(send, cors, reject, error)
            return
        await self._serve(key, cursor_at, head, ended, receive, send, cors)

    async def _cancel(
        self,
        thread_id: str,
        run_id: str,
        send: _Send,
        cors: Sequence[tuple[bytes, bytes]],
        reject: Reject,
    ) -> None:
        try:
            asked = await self.once(self.store.request_cancel, thread_id, run_id)
        except RunNotFoundError as error:
            await reject(send, 404, "run not found", [str(error)], cors=cors)
            return
        except StoreUnavailableError as error:
            _log.warning(
                "run %r of thread %r: the run store failed a cancel: %r", run_id, thread_id, error
            )
            await _unavailable_answer(send, cors, reject, error)
            return
        if not asked:
            detail = f"run {run_id!r} has already ended; there is nothing to cancel"
            await reject(send, 409, "run ended", [detail], cors=cors)
            return
        body = b'{"cancelling":true}'
        await send(
            {
                "type": "http.response.start",
                "status": 202,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *cors,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _read_all(self, key: tuple[str, str], after: int) -> tuple[list[Any], int | None]:
        """Every entry after *after* as it stands now, and the log's end if it has one."""
        entries: list[Any] = []
        while True:
            page = await self.once(self.store.read, *key, after, limit=_CATCH_UP)
            entries.extend(page.entries)
            if not page.entries or (page.end is not None and page.entries[-1][0] >= page.end):
                return entries, page.end
            after = page.entries[-1][0]

    async def _replay(self, key: tuple[str, str], after: int) -> tuple[bytes, int, bool]:
        entries, end = await self._read_all(key, after)
        head = sse._numbered(entries)
        at = entries[-1][0] if entries else after
        return head, at, end is not None and at >= end

    async def _prelude(self, key: tuple[str, str]) -> tuple[bytes, int, bool]:
        info = await self.once(self.store.info, *key)
        entries, end = await self._read_all(key, 0)
        view = RunView(json.loads(info.input))
        for _, data in entries:
            view.apply(json.loads(data))
        at = entries[-1][0] if entries else 0
        head = b"".join([sse.frame(_encode(event), id=at) for event in view.prelude()])
        return head, at, end is not None and at >= end

    # ------------------------------------------------------------ following

    async def _serve(
        self,
        key: tuple[str, str],
        after: int,
        head: bytes,
        ended: bool,
        receive: _Receive,
        send: _Send,
        cors: Sequence[tuple[bytes, bytes]],
    ) -> None:
        """Answer 200, send *head*, then the log after *after* live; a disconnect stops it."""
        await send(
            {"type": "http.response.start", "status": 200, "headers": [*_STREAM_HEADERS, *cors]}
        )
        if head:
            await send({"type": "http.response.body", "body": head, "more_body": True})
        if ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        pump = asyncio.create_task(self._pump(key, after, send))
        watch = asyncio.create_task(_until_disconnect(receive))
        try:
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            pump.cancel()  # the follower stops; the run does not
            await asyncio.wait((pump, watch))
        for task in (pump, watch):
            if not task.cancelled():
                task.result()

    async def _pump(self, key: tuple[str, str], after: int, send: _Send) -> None:
        """
        Send the log after *after* to its end: from memory while this worker owns the run.

        However it ends, short of the client leaving, the stream's last event
        is a terminal one: the run's own, or a ``RUN_ERROR`` naming the failure.
        """
        failed: ev.RunErrorEvent | None = None
        try:
            owned = self._runs.get(key)
            if owned is not None:
                at = await self._pump_owned(owned, after, send)
                if at is None:
                    return
                if owned.failure is not None:
                    failed = owned.failure
                    return
                after = at  # the store refused the owner: what it holds now decides
            await self._pump_store(key, after, send)
        except EventsExpiredError as error:
            # Trimmed by the log's size bound while this client read slowly.
            failed = ev.RunErrorEvent(message=str(error), code="events_expired")
        except (EventsLostError, RunNotFoundError) as error:
            # The log went away while the run was followed: the store lost it.
            _log.warning("run %r of thread %r: its log is gone: %s", key[1], key[0], error)
            message = f"the run's events were lost by the run store ({error})"
            failed = ev.RunErrorEvent(message=message, code="events_lost")
        except StoreUnavailableError as error:
            _log.warning("run %r of thread %r: a follower stopped: %s", key[1], key[0], error)
            failed = _store_unavailable(error)
        except Exception as error:  # a bug: the client still gets a terminal event
            _log.error("run %r of thread %r: following it failed", key[1], key[0], exc_info=error)
            message = "following the run failed; the server's log has the details"
            failed = ev.RunErrorEvent(message=message, code="internal_error")
        finally:
            if failed is not None:
                await _body(send, sse.frame(encode_json(failed)))
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump_owned(self, owned: _Owned, after: int, send: _Send) -> int | None:
        """
        Follow a run this worker owns, from the frames it keeps; None once its end is sent.

        A follower further behind than the frames kept catches up from the store
        first. If the store refused the owner's append (another worker declared
        it lost), or failed it (see `_Owned.failure`), return the position
        reached.
        """
        keep_alive = self.keep_alive
        while True:
            news = owned.news
            if after < owned.acked:
                if after < owned.base:
                    page = await self.patiently(
                        self.store.read, *owned.key, after, limit=_CATCH_UP
                    )
                    if page.entries:
                        await _body(send, sse._numbered(page.entries))
                        after = page.entries[-1][0]
                        continue
                    return after
                base = owned.base
                chunk = b"".join(owned.frames[after - base : owned.acked - base])
                after = owned.acked
                await _body(send, chunk)
                continue
            if owned.end is not None and after >= owned.end:
                return None
            if owned.broken or owned.failure is not None:
                return after
            done, _ = await asyncio.wait((news,), timeout=keep_alive)
            if not done:
                await _body(send, sse.KEEP_ALIVE)

    async def _pump_store(self, key: tuple[str, str], after: int, send: _Send) -> None:
        """
        Follow a run in the store (another worker's, or ended), to its terminal event.

        While nothing arrives, the owner's lease is checked every poll; a run
        whose owner's lease lapsed is ended ``worker_lost`` (as
        `ambient_runs.stores.follow` does).
        """
        store = self.store
        keep_alive = self.keep_alive
        poll = min(1.0, self.lease / 3, keep_alive or 1.0)
        quiet_since = time.monotonic()
        while True:
            page = await self.patiently(store.read, *key, after, limit=_CATCH_UP, wait=poll)
            if page.entries:
                await _body(send, sse._numbered(page.entries))
                after = page.entries[-1][0]
                quiet_since = time.monotonic()
            elif keep_alive is not None and time.monotonic() - quiet_since >= keep_alive:
                await _body(send, sse.KEEP_ALIVE)
                quiet_since = time.monotonic()
            if page.end is not None and after >= page.end:
                return
            if not page.entries:
                info = await self.patiently(store.info, *key)
                if info.end is None and not info.lease_alive:
                    await self.patiently(store.end_lost, *key, worker_lost_event(info.lease))


class _Owned:
    """
    One run this worker owns: the agent, its log writer, its lease and its cancel watch.

    What the store has acknowledged is kept here as SSE frames, for this worker's
    own followers: ``frames[i]`` is the frame of event ``base + i + 1``, up to
    *acked*; at most about `_KEEP` of them (older ones are dropped, a follower
    that far behind reads the store). *news* resolves at each acknowledgement.

    If the store fails the run (it does not answer for a whole lease, or lost the
    run's log), *failure* is the ``RUN_ERROR`` its followers end with; the agent
    is stopped, and the end is logged once the store answers again.
    """

    def __init__(self, detached: Detached, events: EventStream) -> None:
        self.detached = detached
        self.store = detached.store
        self.events = events
        run = events.run
        self.key = (run.thread_id, run.run_id)
        self.loop = asyncio.get_running_loop()
        self.pending: list[bytes] = []
        self.final = False  # the terminal event has been tapped
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.tasks: list[asyncio.Task[Any]] = []
        self.driver: asyncio.Task[None] | None = None
        self.frames: list[bytes] = []
        self.base = 0
        self.acked = 0
        self.end: int | None = None  # the terminal event's number, once acknowledged
        self.broken = False  # the store refused an append: followers read the store
        self.failure: ev.RunErrorEvent | None = None
        self.news: asyncio.Future[None] = self.loop.create_future()
        # The log takes the stream's items as they come, finished frames included
        # (the byte path: a tap would turn it off and make every delta an object).
        sse._as_frames(events)

    def start(self) -> None:
        self.driver = self._spawn(self._drive(), "agent")
        self.tasks = [
            self.driver,
            self._spawn(self._write(), "log"),
            self._spawn(self._renew(), "lease"),
            self._spawn(self._watch_cancel(), "cancel"),
        ]

    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        key = self.key
        task = self.loop.create_task(coro, name=f"ambient_runs detached {key[1]} {what}")
        task.add_done_callback(lambda done: _report(done, key, what))
        return task

    def cancel(self) -> None:
        driver = self.driver
        if driver is not None and not driver.done():
            driver.cancel()

    def fail(self, code: str, message: str) -> None:
        """End the run for its followers with ``RUN_ERROR`` *code*, and stop the agent."""
        if self.failure is not None or self.end is not None:
            return
        _log.error("run %r of thread %r: %s (%s)", self.key[1], self.key[0], message, code)
        self.failure = ev.RunErrorEvent(message=message, code=code)
        self.room.set()
        self.wake.set()  # the writer stops
        self.cancel()
        self._announce()

    # -------------------------------------------------------- the agent's side

    def _queue(self, items: list[ev.BaseEvent | bytes]) -> None:
        """
        Queue the stream's *items* for the store, as JSON; nothing after the terminal event.

        A frame of the byte path is ``data: <json>\\n\\n`` (`sse.encode`'s bytes),
        so its JSON is the frame without its framing; an event is encoded. On the
        loop's thread, where the writer takes the queue too.
        """
        if self.final or not items:
            return
        pending = self.pending
        for item in items:
            if type(item) is bytes:
                pending.append(sse._payload(item))
                continue
            pending.append(encode_json(item))
            if isinstance(item, _TERMINAL):
                self.final = True
                break
        self._wake(len(pending))

    def _wake(self, backlog: int) -> None:
        self.wake.set()
        if backlog > _HIGH_WATER:
            self.room.clear()

    async def _drive(self) -> None:
        """
        Consume the stream (which runs the agent) into the log's queue.

        What the store has not taken yet holds it (`room`). Stopped early (a
        cancel), the stream is closed, which cancels the agent; what the agent
        emitted up to its end is queued too.
        """
        cancelled = False
        events = self.events
        left = events._keep_on_close()
        try:
            while True:
                items = await events._now()
                if not items:
                    break
                self._queue(items)
                if not self.room.is_set():
                    await self.room.wait()
        except asyncio.CancelledError:
            cancelled = True
        finally:
            await asyncio.shield(events.aclose())
            self._queue(left)
        if not self.final:
            # The run never sent its terminal event (it was cancelled before it began):
            # the stream's own RUN_ERROR came with the rest; without one, ours.
            why = "cancelled before it started" if cancelled else "ended without finishing"
            self._queue([ev.RunErrorEvent(message=f"the run {why}", code="cancelled")])

    async def _write(self) -> None:
        """Append what the run emitted, one batch per round trip, until the terminal event."""
        key = self.key
        batch: list[bytes] = []
        final = False
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                if self.failure is not None:
                    break
                batch, self.pending = self.pending, []  # both sides on the loop's thread
                final = self.final
                if not batch:
                    continue
                last = await self._append(batch, final, self.acked + 1)
                self._acknowledged(batch, last, final)
                batch = []
                if len(self.pending) <= _HIGH_WATER // 2:
                    self.room.set()
                if final:
                    return
        except RunEndedError as error:
            # A follower declared this worker lost (its lease lapsed): the run is over
            # for everyone else, so stop it here too; followers read its end from the store.
            _log.warning("run %r of thread %r: stopped: %s", key[1], key[0], error)
            self.broken = True
            self.room.set()
            self.cancel()
        except (RunNotFoundError, EventsLostError) as error:
            self.fail("events_lost", f"the run store lost the run's log ({error})")
        except StoreUnavailableError as error:
            self.fail("store_unavailable", _unavailable_message(error))
        finally:
            failure = self.failure
            if failure is not None and failure.code == "store_unavailable":
                settle = self._settle(self.acked + 1, batch, final)
                self.detached.spawn(settle, key, "settle")
            self._finished()

    async def _settle(self, first: int, batch: list[bytes], final: bool) -> None:
        """
        Log the end of a run the store failed, once it answers again (for up to `_SETTLE` s).

        The batch that failed goes first, at the same place (a landed one is not
        written twice), without its terminal event if it held one; then the
        ``RUN_ERROR`` the followers got. If the whole batch had landed, the run
        ended there and the ``RUN_ERROR`` is refused: the log keeps that end.
        """
        assert self.failure is not None
        if final:  # its clients were told the run failed: the log says so too
            batch, final = batch[:-1], False
        deadline = time.monotonic() + _SETTLE
        store = self.store
        delay = 0.1
        while True:
            try:
                if batch:
                    first = await store.append(*self.key, batch, final=final, first=first) + 1
                    batch = []
                error = encode_json(self.failure)
                await store.append(*self.key, [error], final=True, first=first)
            except Exception as error:
                if not _unavailable(error) or time.monotonic() + delay > deadline:
                    return  # ended elsewhere, lost, or still down: the lease tells the rest
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            return

    def _acknowledged(self, batch: list[bytes], last: int, final: bool) -> None:
        """The store holds *batch*, ending at *last*: keep its frames, wake the followers."""
        frames = self.frames
        first = last - len(batch) + 1
        if first != self.acked + 1:  # someone else wrote to the log: keep nothing before
            frames.clear()
            self.base = first - 1
        numbered = zip(range(first, last + 1), batch, strict=True)
        frames += [b"id: %d\ndata: %s\n\n" % entry for entry in numbered]
        self.acked = last
        if final:
            self.end = last
        if len(frames) > 2 * _KEEP:
            cut = len(frames) - _KEEP
            del frames[:cut]
            self.base += cut
        self._announce()

    def _announce(self) -> None:
        news, self.news = self.news, self.loop.create_future()
        news.set_result(None)

    async def _append(self, batch: list[bytes], final: bool, first: int) -> int:
        """
        Append *batch* at *first*, retrying while the store does not answer, for a lease.

        Every retry passes the same *first*: a batch that landed although its
        append failed is not written again.
        """
        deadline = time.monotonic() + self.detached.lease
        delay = 0.05
        warned = False
        while True:
            try:
                return await self.store.append(*self.key, batch, final=final, first=first)
            except Exception as error:
                if not _unavailable(error):
                    raise
                if time.monotonic() + delay > deadline:
                    lease = self.detached.lease
                    msg = f"the run store did not answer for {lease:g} s ({error!r})"
                    raise StoreUnavailableError(msg) from error
                if not warned:
                    warned = True
                    _log.warning(
                        "run %r of thread %r: appending failed, retrying for %g s: %r",
                        self.key[1],
                        self.key[0],
                        self.detached.lease,
                        error,
                    )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _finished(self) -> None:
        self.detached._runs.pop(self.key, None)
        if self.end is None:
            self.broken = True  # stopped before its end was logged: the store has the rest
        self._announce()
        for task in self.tasks:
            if task is not asyncio.current_task() and task is not self.driver:
                task.cancel()
        if not self.done.done():
            self.done.set_result(None)

    async def _renew(self) -> None:
        """Renew the lease; a store that does not answer for a whole lease fails the run."""
        lease = self.detached.lease
        failing_since: float | None = None
        while True:
            await asyncio.sleep(lease / 3)
            try:
                held = await self.store.renew(*self.key, owner=self.detached.owner, lease=lease)
            except Exception as error:
                if not _unavailable(error):
                    return  # gone from the store: the writer finds out and says so
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                    _log.warning(
                        "run %r of thread %r: renewing its lease failed: %r",
                        self.key[1],
                        self.key[0],
                        error,
                    )
                elif now - failing_since >= lease:
                    self.fail("store_unavailable", _unavailable_message(error))
                    return
                continue
            failing_since = None
            if not held:
                return

    async def _watch_cancel(self) -> None:
        failing = False
        while True:
            try:
                await self.store.wait_cancel(*self.key)
            except (RunNotFoundError, EventsLostError):
                return  # gone from the store: the writer finds out and says so
            except Exception as error:
                if not _unavailable(error):
                    raise
                if not failing:
                    failing = True
                    _log.warning(
                        "run %r of thread %r: watching for cancels failed: %r",
                        self.key[1],
                        self.key[0],
                        error,
                    )
                await asyncio.sleep(min(1.0, self.detached.lease / 3))
                continue
            _log.info("run %r of thread %r: cancelled on request", self.key[1], self.key[0])
            self.cancel()
            return


class _StartingError(Exception):
    """A POST found its run id taken by a run that has not started (see `Detached._create`)."""


def _unavailable(error: BaseException) -> bool:
    """
    Whether a store call's *error* means the store did not answer.

    `StoreUnavailableError` does; so does anything that is not a `StoreError`
    (a client library's own connection or timeout error, a bug): a store that
    answers says what is wrong with a `StoreError`.
    """
    return isinstance(error, Exception) and (
        isinstance(error, StoreUnavailableError) or not isinstance(error, StoreError)
    )


def _unavailable_message(error: BaseException) -> str:
    kind = type(error).__name__  # not its text, which may name hosts
    return f"the run store is unavailable ({kind}); the run was stopped, start it again"


def _store_unavailable(error: BaseException) -> ev.RunErrorEvent:
    # The type alone: a client library's message may name hosts (the log has it all).
    kind = type(error).__name__
    message = f"the run store is unavailable ({kind}); resume or join the run again later"
    return ev.RunErrorEvent(message=message, code="store_unavailable")


async def _unavailable_answer(
    send: _Send, cors: Sequence[tuple[bytes, bytes]], reject: Reject, error: BaseException
) -> None:
    if isinstance(error, StoreFullError):
        detail = str(error)  # our own words: what fills it, and the fix
    else:  # a client library's message may name hosts: the log has it, the client does not
        detail = f"the run store is unavailable ({type(error).__name__}); retry shortly"
    await reject(send, 503, "store unavailable", [detail], _RETRY_AFTER, cors)


def _report(task: asyncio.Task[Any], key: tuple[str, str], what: str) -> None:
    """Log a background task's failure once, naming its run (it is retrieved here)."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        _log.error("run %r of thread %r: its %s task failed", key[1], key[0], what, exc_info=error)


def _encode(event: dict[str, Any]) -> bytes:
    """The JSON of a prelude event, through the typed encoder (which checks it)."""
    return encode_json(from_wire(event))


async def _body(send: _Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _until_disconnect(receive: _Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
