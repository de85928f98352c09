"""
`RedisStore`: a `RunStore` on Redis Streams, shared by every worker process.

Needs the ``redis`` extra (``pip install ambient-runs[redis]``, redis-py's
asyncio client) and Redis ≥ 6.2. Per run, under *prefix*:

- ``…:events``, a stream with one entry per **batch** of events (one
  `RunStore.append`: what a detached run emitted in one loop tick). The entry's
  id is ``0-<last>``, the sequence number of the batch's last event; its fields
  are ``f``, the sequence number of its first event, and ``d``, the batch's
  events (compact JSON) joined by newlines. Reading after a cursor is one
  ``XRANGE`` from ``0-<cursor + 1>``: the first entry it returns is the batch
  holding the event right after the cursor, sliced in this process. Followers
  wait on it with ``XREAD BLOCK``. The size bound trims whole batches with
  ``XADD … MINID 0-<last - max_events + 1>``, so at least the last
  *max_events* events are always kept;
- ``…:meta``, a hash: the input, the owner, the lease, the last and the end
  sequence numbers;
- ``…:lease``, the owner's lease (``SET … PX``), renewed by the owner; its
  absence before the end means the owner is gone;
- ``…:cancel``, set by a cancel request, which is also published on the
  ``<prefix>cancel`` channel so the owner hears it at once.

Appends, reads, ends and cancels are Lua scripts of one round trip each, so an
append after the end, or two followers ending a lost run at once, cannot
interleave, and a read sees the log and its end as of one instant. While a run
is live its keys expire *retention* + its lease after the last append or
renewal (an abandoned run cleans itself up); once ended, *retention* after the
end.

Keys of one run share no hash tag: this store targets a single Redis (or a
primary with replicas), not Redis Cluster.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from ambient_runs.errors import needs_extra
from ambient_runs.stores import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_RETENTION,
    Entry,
    Page,
    RunInfo,
    _check_bounds,
    _check_final,
    _check_lines,
    _ended,
    _exists,
    _expired,
    _not_found,
)

with needs_extra(
    "ambient_runs.stores.redis", extra="redis", needs="the redis client", name="redis"
):
    import redis.asyncio as aioredis

__all__ = ("RedisStore",)

_log = logging.getLogger("ambient_runs")

_LIVE_SLACK = 60.0  # seconds a live run's keys outlast its last append, besides retention
_SCAN = 64  # stream entries (batches) per XRANGE inside the read script

# KEYS: meta, events, lease, cancel. ARGV: input, owner, lease ms, live ttl.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'input', ARGV[1], 'owner', ARGV[2], 'lease', ARGV[3], 'last', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[2], KEYS[4])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
return 1
"""

# Add events first..last as one stream entry `0-<last>` (fields f: first, d: data), trimming
# whole entries so that at least the last max_events events stay (MINID, in the same XADD).
_ADD_BATCH = """
local function add_batch(events, first, last, max_events, data)
  local keep = last - max_events + 1
  if keep > 1 then
    redis.call('XADD', events, 'MINID', '0-' .. keep, '0-' .. last, 'f', first, 'd', data)
  else
    redis.call('XADD', events, '0-' .. last, 'f', first, 'd', data)
  end
end
"""

# One batch, as one stream entry. KEYS: meta, events, lease, cancel.
# ARGV: max_events, live ttl, final, retention, count, the events joined by newlines.
_APPEND = (
    _ADD_BATCH
    + """
local meta = KEYS[1]
local state = redis.call('HMGET', meta, 'last', 'end')
if not state[1] then return -1 end
if state[2] then return -2 end
local first = tonumber(state[1]) + 1
local last = first + tonumber(ARGV[5]) - 1
add_batch(KEYS[2], first, last, tonumber(ARGV[1]), ARGV[6])
local ttl = ARGV[2]
if ARGV[3] == '1' then
  redis.call('HSET', meta, 'last', last, 'end', last)
  redis.call('DEL', KEYS[3], KEYS[4])
  ttl = ARGV[4]
else
  redis.call('HSET', meta, 'last', last)
end
redis.call('PEXPIRE', meta, ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return last
"""
)

# The batches holding the events after a cursor, with the log's last and end, at once.
# KEYS: meta, events. ARGV: after, limit (events), scan.
# Returns false for no run, else {last, end or '', first_1, data_1, first_2, data_2, ...}.
_READ = """
local state = redis.call('HMGET', KEYS[1], 'last', 'end')
if not state[1] then return false end
local out = {state[1], state[2] or ''}
local after = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local start = '0-' .. (after + 1)
local got = 0
while got < want do
  local batches = redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', ARGV[3])
  for _, batch in ipairs(batches) do
    local last = tonumber(string.sub(batch[1], 3))
    local first = tonumber(batch[2][2])
    out[#out + 1] = batch[2][2]
    out[#out + 1] = batch[2][4]
    got = got + last - math.max(first, after + 1) + 1
    start = '(' .. batch[1]
    if got >= want then break end
  end
  if #batches < tonumber(ARGV[3]) then break end
end
return out
"""

# KEYS: meta, events, lease, cancel. ARGV: max_events, retention, event.
_END_LOST = (
    _ADD_BATCH
    + """
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then return -1 end
if redis.call('HEXISTS', meta, 'end') == 1 then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local last = tonumber(redis.call('HGET', meta, 'last')) + 1
add_batch(KEYS[2], last, last, tonumber(ARGV[1]), ARGV[3])
redis.call('HSET', meta, 'last', last, 'end', last)
redis.call('DEL', KEYS[4])
redis.call('PEXPIRE', meta, ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
)

# KEYS: meta, events, lease. ARGV: owner, lease ms, live ttl.
_RENEW = """
if redis.call('HEXISTS', KEYS[1], 'end') == 1 then return 0 end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
local held = redis.call('GET', KEYS[3])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"""

# KEYS: meta, events, lease, cancel. ARGV: owner.
_DISCARD = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'last') ~= '0' then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
"""

# KEYS: meta, cancel. ARGV: channel, run key, ttl.
_CANCEL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[1], 'end') == 1 then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""


class RedisStore:
    """
    A `RunStore` on Redis Streams: any worker can resume, join or cancel any run.

    Args:
        url: A Redis URL (``redis://host:port/db``), passed to
            ``redis.asyncio.Redis.from_url``.
        prefix: The prefix of every key and of the cancel channel.
        retention: Seconds a run's log is kept after its terminal event.
        max_events: The bound of a run's log: whole batches are trimmed once
            the last *max_events* events do not need them (``XADD MINID``); a
            resume asking for trimmed events gets `EventsExpiredError`.
        client: An existing ``redis.asyncio.Redis`` to use instead of *url*
            (it must not decode responses); `aclose` leaves it open.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        prefix: str = "ambient_runs:",
        retention: float = DEFAULT_RETENTION,
        max_events: int = DEFAULT_MAX_EVENTS,
        client: aioredis.Redis | None = None,
    ) -> None:
        if (url is None) == (client is None):
            msg = "pass either a Redis url or client="
            raise TypeError(msg)
        _check_bounds(retention, max_events)
        self.url = url
        self.prefix = prefix
        self.retention = retention
        self.max_events = max_events
        self._owns_client = client is None
        self._redis: aioredis.Redis = (
            client if client is not None else aioredis.Redis.from_url(url)  # type: ignore[arg-type]
        )
        self._channel = f"{prefix}cancel"
        self._create = self._redis.register_script(_CREATE)
        self._append = self._redis.register_script(_APPEND)
        self._read = self._redis.register_script(_READ)
        self._end_lost = self._redis.register_script(_END_LOST)
        self._renew = self._redis.register_script(_RENEW)
        self._cancel = self._redis.register_script(_CANCEL)
        self._discard = self._redis.register_script(_DISCARD)
        self._cancel_waiters: dict[bytes, list[asyncio.Future[None]]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._subscribed: asyncio.Event | None = None

    def __repr__(self) -> str:
        return f"<RedisStore {self.url or self._redis!r} prefix={self.prefix!r}>"

    # ------------------------------------------------------------- keys

    def _base(self, thread_id: str, run_id: str) -> str:
        # The thread id's length keeps ("a:b", "c") and ("a", "b:c") apart.
        return f"{self.prefix}{len(thread_id)}:{thread_id}:{run_id}"

    def _keys(self, thread_id: str, run_id: str) -> list[str]:
        base = self._base(thread_id, run_id)
        return [f"{base}:meta", f"{base}:events", f"{base}:lease", f"{base}:cancel"]

    def _live_ttl(self, lease: float) -> int:
        return _ms(self.retention + lease)

    # ------------------------------------------------------------- protocol

    async def create(
        self, thread_id: str, run_id: str, *, input: bytes, owner: str, lease: float
    ) -> None:
        """See `RunStore.create`."""
        keys = self._keys(thread_id, run_id)
        made = await self._create(
            keys=keys, args=[input, owner, _ms(lease), self._live_ttl(lease)]
        )
        if not made:
            raise _exists(thread_id, run_id)

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
        See `RunStore.append`: the batch is one stream entry.

        *first* is taken for the protocol's sake but not checked yet: a retried
        batch that landed is written again.
        """
        _check_final(events, final)
        if not events:
            return (await self.info(thread_id, run_id)).last
        data = b"\n".join(events)
        _check_lines(data, events)
        keys = self._keys(thread_id, run_id)
        ttl = self._live_ttl(_LIVE_SLACK)  # renew() keeps a longer-lived run alive
        args: list[Any] = [
            self.max_events,
            ttl,
            1 if final else 0,
            _ms(self.retention),
            len(events),
            data,
        ]
        last = int(await self._append(keys=keys, args=args))
        if last == -1:
            raise _not_found(thread_id, run_id)
        if last == -2:
            raise _ended(thread_id, run_id)
        return last

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        """See `RunStore.read`: one script call, plus an ``XREAD BLOCK`` when it waits."""
        after = max(after, 0)
        keys = self._keys(thread_id, run_id)[:2]
        args = [after, max(limit, 1), _SCAN]
        answer: Any = await self._read(keys=keys, args=args)
        if answer is None:
            raise _not_found(thread_id, run_id)
        if len(answer) == 2 and not answer[1] and wait > 0 and int(answer[0]) <= after:
            cursor: dict[Any, Any] = {keys[1]: f"0-{after}"}
            await self._redis.xread(cursor, count=1, block=_ms(wait))
            answer = await self._read(keys=keys, args=args)
            if answer is None:
                raise _not_found(thread_id, run_id)
        last, end = int(answer[0]), int(answer[1]) if answer[1] else None
        entries: list[Entry] = []
        low = after + 1
        for i in range(2, len(answer), 2):
            first = int(answer[i])
            events = answer[i + 1].split(b"\n")
            if i == 2 and first > low:
                raise _expired(thread_id, run_id, after, first)
            if first < low:
                del events[: low - first]
                first = low
            entries.extend(zip(range(first, first + len(events)), events, strict=True))
        if not entries and after < last:
            raise _expired(thread_id, run_id, after, last + 1)
        if len(entries) > limit:
            del entries[limit:]
        return Page(entries, end)

    async def info(self, thread_id: str, run_id: str) -> RunInfo:
        """See `RunStore.info`."""
        meta, _, lease_key, cancel_key = self._keys(thread_id, run_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(meta, ["input", "owner", "lease", "last", "end"])
            pipe.exists(lease_key)
            pipe.exists(cancel_key)
            (input, owner, lease, last, end), alive, cancel = await pipe.execute()
        if last is None:
            raise _not_found(thread_id, run_id)
        return RunInfo(
            thread_id=thread_id,
            run_id=run_id,
            input=input,
            owner=owner.decode(),
            lease=int(lease) / 1000,
            last=int(last),
            end=None if end is None else int(end),
            lease_alive=end is None and bool(alive),
            cancel_requested=bool(cancel),
        )

    async def renew(self, thread_id: str, run_id: str, *, owner: str, lease: float) -> bool:
        """See `RunStore.renew`."""
        keys = self._keys(thread_id, run_id)[:3]
        done = await self._renew(keys=keys, args=[owner, _ms(lease), self._live_ttl(lease)])
        return bool(done)

    async def end_lost(self, thread_id: str, run_id: str, event: bytes) -> bool:
        """See `RunStore.end_lost`."""
        keys = self._keys(thread_id, run_id)
        done = int(
            await self._end_lost(keys=keys, args=[self.max_events, _ms(self.retention), event])
        )
        if done == -1:
            raise _not_found(thread_id, run_id)
        return done == 1

    async def request_cancel(self, thread_id: str, run_id: str) -> bool:
        """See `RunStore.request_cancel`."""
        meta, _, _, cancel_key = self._keys(thread_id, run_id)
        base = self._base(thread_id, run_id)
        args: list[str | int] = [self._channel, base, self._live_ttl(_LIVE_SLACK)]
        done = int(await self._cancel(keys=[meta, cancel_key], args=args))
        if done == -1:
            raise _not_found(thread_id, run_id)
        return done == 1

    async def discard(self, thread_id: str, run_id: str, *, owner: str) -> bool:
        """See `RunStore.discard`."""
        keys = self._keys(thread_id, run_id)
        return bool(await self._discard(keys=keys, args=[owner]))

    async def wait_cancel(self, thread_id: str, run_id: str) -> None:
        """See `RunStore.wait_cancel`."""
        await self._listen()
        base = self._base(thread_id, run_id).encode()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._cancel_waiters.setdefault(base, []).append(waiter)
        try:
            # Subscribed first, then checked: a request between the two is not missed.
            if await self._redis.exists(f"{base.decode()}:cancel"):
                return
            listener = self._listener
            assert listener is not None
            # The subscription dies with its connection: say so, rather than wait forever
            # for a message that cannot come (the next wait subscribes again).
            await asyncio.wait((waiter, listener), return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                listener.result()
                msg = "the cancel subscription ended"
                raise ConnectionError(msg)
        finally:
            waiters = self._cancel_waiters.get(base, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._cancel_waiters.pop(base, None)

    async def _listen(self) -> None:
        """Start the one subscription to the cancel channel, once; wait until it is live."""
        if self._listener is None or self._listener.done():
            self._subscribed = asyncio.Event()
            self._listener = asyncio.create_task(
                self._listen_loop(self._subscribed), name="ambient_runs RedisStore cancels"
            )
            self._listener.add_done_callback(_listener_ended)
        assert self._subscribed is not None
        waiter = asyncio.ensure_future(self._subscribed.wait())
        await asyncio.wait((waiter, self._listener), return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
            self._listener.result()  # it failed: say why

    async def _listen_loop(self, subscribed: asyncio.Event) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._channel)
            subscribed.set()
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None or message.get("type") != "message":
                    continue
                for waiter in self._cancel_waiters.pop(message["data"], []):
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def aclose(self) -> None:
        """Stop listening for cancels and close the connections (unless *client* was given)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.wait((listener,))
        if self._owns_client:
            await self._redis.aclose()


def _listener_ended(task: asyncio.Task[None]) -> None:
    """Log once why the cancel subscription ended (so its error is never left unretrieved)."""
    if not task.cancelled() and task.exception() is not None:
        _log.warning("RedisStore: the cancel subscription failed: %r", task.exception())


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
