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
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, TypeAlias

from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._stream import EventStream
from ambient_runs._wire import encode_json, from_wire
from ambient_runs.stores import (
    EventsExpiredError,
    RunEndedError,
    RunExistsError,
    RunNotFoundError,
    RunStore,
    RunView,
    _tail,
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
        lease: Seconds the owner's lease lasts; renewed every third of it.
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

    def __repr__(self) -> str:
        return f"<Detached {len(self._runs)} runs owned by {self.owner} on {self.store!r}>"

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
        input_json = encode_json(run.input)
        try:
            await self.store.create(*key, input=input_json, owner=self.owner, lease=self.lease)
        except RunExistsError as error:
            await events.aclose()
            await reject(send, 409, "run exists", [str(error)], cors=cors)
            return
        owned = _Owned(self, events)
        self._runs[key] = owned
        owned.start()
        await self._serve(key, 0, b"", False, receive, send, cors)

    async def aclose(self) -> None:
        """Cancel every run this worker owns and wait until each is logged to its end."""
        owned = list(self._runs.values())
        for run in owned:
            run.cancel()
        await asyncio.gather(*(run.done for run in owned), return_exceptions=True)

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
            asked = await self.store.request_cancel(thread_id, run_id)
        except RunNotFoundError as error:
            await reject(send, 404, "run not found", [str(error)], cors=cors)
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
            page = await self.store.read(*key, after, limit=_CATCH_UP)
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
        info = await self.store.info(*key)
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
        """Send the log after *after* to its end: from memory while this worker owns the run."""
        owned = self._runs.get(key)
        try:
            if owned is not None:
                at = await self._pump_owned(owned, after, send)
                if at is None:
                    return
                after = at  # the store refused the owner: what it holds now decides
            await self._pump_store(key, after, send)
        except (RunNotFoundError, EventsExpiredError) as error:
            # The log went away under us (retention, trimming): say so in the stream.
            failed = ev.RunErrorEvent(message=str(error), code="events_expired")
            await _body(send, sse.frame(encode_json(failed)))
        finally:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump_owned(self, owned: _Owned, after: int, send: _Send) -> int | None:
        """
        Follow a run this worker owns, from the frames it keeps; None once its end is sent.

        A follower further behind than the frames kept catches up from the store
        first. If the store refused the owner's append (another worker declared
        it lost), return the position reached: the rest is in the store.
        """
        keep_alive = self.keep_alive
        while True:
            news = owned.news
            if after < owned.acked:
                if after < owned.base:
                    page = await self.store.read(*owned.key, after, limit=_CATCH_UP)
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
            if owned.broken:
                return after
            done, _ = await asyncio.wait((news,), timeout=keep_alive)
            if not done:
                await _body(send, sse.KEEP_ALIVE)

    async def _pump_store(self, key: tuple[str, str], after: int, send: _Send) -> None:
        """Follow a run in the store (another worker's, or ended), to its terminal event."""
        keep_alive = self.keep_alive
        poll = min(1.0, self.lease / 3, keep_alive or 1.0)
        quiet_since = time.monotonic()
        async for entries in _tail(self.store, *key, after, poll=poll):
            if entries:
                await _body(send, sse._numbered(entries))
                quiet_since = time.monotonic()
            elif keep_alive is not None and time.monotonic() - quiet_since >= keep_alive:
                await _body(send, sse.KEEP_ALIVE)
                quiet_since = time.monotonic()


class _Owned:
    """
    One run this worker owns: the agent, its log writer, its lease and its cancel watch.

    What the store has acknowledged is kept here as SSE frames, for this worker's
    own followers: ``frames[i]`` is the frame of event ``base + i + 1``, up to
    *acked*; at most about `_KEEP` of them (older ones are dropped, a follower
    that far behind reads the store). *news* resolves at each acknowledgement.
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
        self.news: asyncio.Future[None] = self.loop.create_future()
        # The log takes the stream's items as they come, finished frames included
        # (the byte path: a tap would turn it off and make every delta an object).
        sse._as_frames(events)

    def start(self) -> None:
        name = f"ambient_runs detached {self.key[1]}"
        self.driver = self.loop.create_task(self._drive(), name=name)
        self.tasks = [
            self.driver,
            self.loop.create_task(self._write(), name=f"{name} log"),
            self.loop.create_task(self._renew(), name=f"{name} lease"),
            self.loop.create_task(self._watch_cancel(), name=f"{name} cancel"),
        ]

    def cancel(self) -> None:
        driver = self.driver
        if driver is not None and not driver.done():
            driver.cancel()

    # -------------------------------------------------------- the agent's side

    def _queue(self, items: list[ev.BaseEvent | bytes]) -> None:
        """
        Queue the stream's *items* for the store, as JSON; nothing after the terminal event.

        A frame of the byte path is ``data: <json>\n\n`` (`sse.encode`'s bytes),
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
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                batch, self.pending = self.pending, []  # both sides on the loop's thread
                final = self.final
                if not batch:
                    continue
                last = await self._append(batch, final)
                self._acknowledged(batch, last, final)
                if len(self.pending) <= _HIGH_WATER // 2:
                    self.room.set()
                if final:
                    return
        except (RunEndedError, RunNotFoundError) as error:
            # A follower declared this worker lost (its lease lapsed), or the log was
            # deleted: the run is over for everyone else, so stop it here too.
            _log.warning("detached run %r stopped: %s", key[1], error)
            self.broken = True
            self.room.set()
            self.cancel()
        finally:
            self._finished()

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

    async def _append(self, batch: list[bytes], final: bool) -> int:
        delay = 0.05
        while True:
            try:
                return await self.store.append(*self.key, batch, final=final)
            except (RunEndedError, RunNotFoundError):
                raise
            except Exception as error:  # the store is unreachable: retry, the lease decides
                _log.warning("appending to run %r failed, retrying: %r", self.key[1], error)
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
        lease = self.detached.lease
        while True:
            await asyncio.sleep(lease / 3)
            try:
                held = await self.store.renew(*self.key, owner=self.detached.owner, lease=lease)
            except Exception as error:  # unreachable for now: the next renewal may make it
                _log.warning("renewing the lease of run %r failed: %r", self.key[1], error)
                continue
            if not held:
                return

    async def _watch_cancel(self) -> None:
        while True:
            try:
                await self.store.wait_cancel(*self.key)
            except (RunNotFoundError, asyncio.CancelledError):
                raise
            except Exception as error:
                _log.warning("watching run %r for cancels failed: %r", self.key[1], error)
                await asyncio.sleep(min(1.0, self.detached.lease / 3))
                continue
            _log.info("run %r cancelled on request", self.key[1])
            self.cancel()
            return


def _encode(event: dict[str, Any]) -> bytes:
    """The JSON of a prelude event, through the typed encoder (which checks it)."""
    return encode_json(from_wire(event))


async def _body(send: _Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _until_disconnect(receive: _Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
