"""
`RedisStore`: a `RunStore` on Redis Streams, shared by every worker process.

Needs the ``redis`` extra (``pip install ambient-runs[redis]``, redis-py's
asyncio client) and Redis ≥ 6.2. Per run, under *prefix*:

- ``…:events``, a stream with one entry per **batch** of events (one
  `RunStore.append`: what a detached run emitted in one loop tick). The entry's
  id is ``0-<last>``, the sequence number of the batch's last event; its fields
  are ``f``, the sequence number of its first event, ``d``, the batch's
  events (compact JSON) joined by newlines, and ``e`` (``1``) on the batch
  holding the terminal event. Reading after a cursor is one ``XRANGE`` from
  ``0-<cursor + 1>``: the first entry it returns is the batch holding the event
  right after the cursor, sliced in this process. Followers wait on it with
  ``XREAD BLOCK``, one per store for all runs (`RedisStore` says how). The
  size bound trims whole batches with
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
interleave, and a read sees the log and its end as of one instant. An append
with *first* checks inside its script whether its batch is logged already, so a
try that timed out here but ran in Redis all the same is never logged twice.
Every number a script writes goes through ``string.format('%d')``, since Lua's
own conversion writes 10^14 as ``1e+14``. While a run
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
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeAlias, TypeVar, cast

from ambient_runs.errors import needs_extra
from ambient_runs.stores import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_RETENTION,
    Entry,
    Page,
    RunInfo,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
    _check_bounds,
    _check_final,
    _check_lines,
    _ended,
    _exists,
    _expired,
    _gap,
    _not_found,
)

with needs_extra(
    "ambient_runs.stores.redis", extra="redis", needs="the redis client", name="redis"
):
    import redis.asyncio as aioredis
    import redis.exceptions as redis_errors
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

__all__ = ("RedisStore",)

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

DEFAULT_MAX_CONNECTIONS = 20
DEFAULT_OWNER_CONNECTIONS = 8
DEFAULT_POOL_TIMEOUT = 5.0
DEFAULT_SOCKET_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 2.0

_LIVE_SLACK = 60.0  # seconds a live run's keys outlast its last append, besides retention
_SCAN = 64  # stream entries (batches) per XRANGE inside the read script, and per shared XREAD
_BLOCK = 1.0  # seconds the shared XREAD blocks at most (a new stream interrupts it sooner)
_PING_EVERY = 10.0  # idle seconds after which the cancel subscription checks its link
_MAX_ID = 2**64 - 1  # the largest sequence part of a stream id
_CLOSING = 1.0  # seconds aclose waits for a cancelled background task before cutting its link
_AGAIN = object()  # what the shared reader hands a waiter it cannot serve: read again

_S = "local function s(n) return string.format('%d', n) end\n"

# KEYS: meta, events, lease, cancel. ARGV: input, owner, lease ms, live ttl.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'input', ARGV[1], 'owner', ARGV[2], 'lease', ARGV[3], 'last', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[2], KEYS[4])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
return 1
"""

# Add events first..last as one stream entry `0-<last>` (fields f: first, d: data, and e: 1 on
# the terminal batch), trimming whole entries so that at least the last max_events events stay
# (MINID, in the same XADD). Numbers go through s(): Lua's own `..` writes 1e14 as "1e+14".
_ADD_BATCH = (
    _S
    + """
local function add_batch(events, first, last, max_events, data, final)
  local args = {'XADD', events}
  local keep = last - max_events + 1
  if keep > 1 then
    args[#args + 1] = 'MINID'
    args[#args + 1] = '0-' .. s(keep)
  end
  args[#args + 1] = '0-' .. s(last)
  args[#args + 1] = 'f'
  args[#args + 1] = s(first)
  args[#args + 1] = 'd'
  args[#args + 1] = data
  if final then
    args[#args + 1] = 'e'
    args[#args + 1] = '1'
  end
  redis.call(unpack(args))
end
"""
)

# One batch, as one stream entry. KEYS: meta, events, lease, cancel.
# ARGV: max_events, live ttl, final, retention, count, the events joined by newlines,
# first ('' for none), the id '0-<first + count - 1>' ('' for none).
# Returns {0, last} once logged (now, or by an earlier try of this very batch), {-1} for no run,
# {-2} for an ended run, {-3, last} for a batch that does not fit the log.
_APPEND = (
    _ADD_BATCH
    + """
local meta = KEYS[1]
local state = redis.call('HMGET', meta, 'last', 'end')
if not state[1] then return {-1} end
local last = tonumber(state[1])
local count = tonumber(ARGV[5])
if ARGV[7] ~= '' then
  local first = tonumber(ARGV[7])
  if last ~= first - 1 then
    local top = first + count - 1
    if last >= top then
      -- Logged already? The entry ending at top holds this very batch, or was trimmed.
      local held = redis.call('XRANGE', KEYS[2], ARGV[8], ARGV[8])
      if #held == 1 then
        if held[1][2][2] == ARGV[7] and held[1][2][4] == ARGV[6] then return {0, top} end
      else
        local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
        if #oldest == 0 or tonumber(oldest[1][2][2]) > top then return {0, top} end
      end
    end
    if state[2] then return {-2} end
    return {-3, last}
  end
end
if state[2] then return {-2} end
local top = last + count
add_batch(KEYS[2], last + 1, top, tonumber(ARGV[1]), ARGV[6], ARGV[3] == '1')
local ttl = ARGV[2]
if ARGV[3] == '1' then
  redis.call('HSET', meta, 'last', s(top), 'end', s(top))
  redis.call('DEL', KEYS[3], KEYS[4])
  ttl = ARGV[4]
else
  redis.call('HSET', meta, 'last', s(top))
end
redis.call('PEXPIRE', meta, ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return {0, top}
"""
)

# The batches holding the events after a cursor, with the log's last and end, at once.
# KEYS: meta, events. ARGV: after, limit (events), scan, the id '0-<after + 1>' (written in
# Python: a cursor of 15 digits must not become '0-1e+14').
# Returns false for no run, else {last, end or '', first_1, data_1, first_2, data_2, ...}.
_READ = """
local state = redis.call('HMGET', KEYS[1], 'last', 'end')
if not state[1] then return false end
local out = {state[1], state[2] or ''}
local after = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local start = ARGV[4]
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
add_batch(KEYS[2], last, last, tonumber(ARGV[1]), ARGV[3], true)
redis.call('HSET', meta, 'last', s(last), 'end', s(last))
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

    Connections come from two bounded pools that wait for a free connection
    (redis-py's ``BlockingConnectionPool``), so that followers can never take
    what the runs this worker owns need: the **owner** pool serves `create`,
    `append`, `renew` and `wait_cancel`; the **read** pool serves `read`,
    `info`, `end_lost` and `request_cancel`. Besides them, one connection
    carries the one blocking ``XREAD`` that every waiting `read` of this store
    shares, whatever the run (N followers cost one connection, not N), and one
    carries the subscription to cancel requests. So a worker holds at most
    ``max_connections + owner_connections + 2`` connections to Redis.

    Every failure to reach Redis (refused, reset, timed out, or no pooled
    connection free within *pool_timeout*) raises `StoreUnavailableError`, and
    a write Redis refuses for want of memory raises `StoreFullError`, each
    with redis-py's error as its cause. redis-py never retries a command here
    (a retried append whose first try did land would be logged twice); pass
    *first* to `append` to make retrying it safe.

    Args:
        url: A Redis URL (``redis://host:port/db``).
        prefix: The prefix of every key and of the cancel channel.
        retention: Seconds a run's log is kept after its terminal event.
        max_events: The bound of a run's log: whole batches are trimmed once
            the last *max_events* events do not need them (``XADD MINID``); a
            resume asking for trimmed events gets `EventsExpiredError`.
        client: An existing ``redis.asyncio.Redis`` (not decoding responses)
            to serve the reads instead of a pool of our own; the other
            connections are made with its connection settings. `aclose`
            leaves it open.
        max_connections: The size of the read pool.
        owner_connections: The size of the owner pool.
        pool_timeout: Seconds a command waits for a free pooled connection
            before `StoreUnavailableError`.
        socket_timeout: Seconds Redis may take to answer a command before
            `StoreUnavailableError` (a stalled or unreachable Redis).
        connect_timeout: Seconds to open a connection.

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
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        owner_connections: int = DEFAULT_OWNER_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        if (url is None) == (client is None):
            msg = "pass either a Redis url or client="
            raise TypeError(msg)
        _check_bounds(retention, max_events)
        for name, count in (
            ("max_connections", max_connections),
            ("owner_connections", owner_connections),
        ):
            if count < 1:
                msg = f"{name} must be at least 1, not {count!r}"
                raise ValueError(msg)
        for name, seconds in (
            ("pool_timeout", pool_timeout),
            ("socket_timeout", socket_timeout),
            ("connect_timeout", connect_timeout),
        ):
            if not seconds > 0:
                msg = f"{name} must be a positive number of seconds, not {seconds!r}"
                raise ValueError(msg)
        self.url = url
        self.prefix = prefix
        self.retention = retention
        self.max_events = max_events
        self.max_connections = max_connections
        self.owner_connections = owner_connections
        self.pool_timeout = pool_timeout
        self.socket_timeout = socket_timeout
        self._owns_client = client is None
        if client is None:
            assert url is not None
            reads: aioredis.ConnectionPool = aioredis.BlockingConnectionPool.from_url(
                url,
                max_connections=max_connections,
                timeout=pool_timeout,
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
            )
            client = aioredis.Redis(connection_pool=reads)
        pool = client.connection_pool
        # Ours never retry inside redis-py: a timed-out append may still run in Redis.
        self._settings: dict[str, Any] = {
            **pool.connection_kwargs,
            "retry": Retry(NoBackoff(), 0),
        }
        self._connection_class = pool.connection_class
        self._redis: aioredis.Redis = client
        self._owner = aioredis.Redis(
            connection_pool=aioredis.BlockingConnectionPool(
                connection_class=pool.connection_class,
                max_connections=owner_connections,
                timeout=pool_timeout,
                **self._settings,
            )
        )
        self._listening = aioredis.Redis(
            connection_pool=aioredis.ConnectionPool(
                connection_class=pool.connection_class, max_connections=2, **self._settings
            )
        )
        self._channel = f"{prefix}cancel"
        self._create = self._owner.register_script(_CREATE)
        self._append = self._owner.register_script(_APPEND)
        self._renew = self._owner.register_script(_RENEW)
        self._read = self._redis.register_script(_READ)
        self._end_lost = self._redis.register_script(_END_LOST)
        self._cancel = self._redis.register_script(_CANCEL)
        self._discard = self._owner.register_script(_DISCARD)
        self._reader = _Reader(self)
        self._shared: dict[tuple[str, ...], asyncio.Future[Any]] = {}
        self._cancels = _Cancels(self)

    def __repr__(self) -> str:
        return f"<RedisStore {self._where()} prefix={self.prefix!r}>"

    def _where(self) -> str:
        settings = self._settings
        if "path" in settings:
            return str(settings["path"])
        return f"{settings.get('host', 'localhost')}:{settings.get('port', 6379)}"

    # ------------------------------------------------------------- keys

    def _base(self, thread_id: str, run_id: str) -> str:
        # The thread id's length keeps ("a:b", "c") and ("a", "b:c") apart.
        return f"{self.prefix}{len(thread_id)}:{thread_id}:{run_id}"

    def _keys(self, thread_id: str, run_id: str) -> list[str]:
        base = self._base(thread_id, run_id)
        return [f"{base}:meta", f"{base}:events", f"{base}:lease", f"{base}:cancel"]

    def _live_ttl(self, lease: float) -> int:
        return _ms(self.retention + lease)

    # ------------------------------------------------------------- failures

    def _failure(self, error: BaseException, doing: str) -> StoreError | None:
        """The named error for redis-py's *error* while *doing*; None when it is none of ours."""
        if isinstance(error, StoreError):
            return error
        if isinstance(error, redis_errors.OutOfMemoryError) or (
            isinstance(error, redis_errors.ResponseError) and str(error).startswith("OOM")
        ):
            return StoreFullError(
                # No address: a transport shows this text to clients (the log has the rest).
                "Redis is out of memory (its maxmemory is reached and it "
                f"evicts nothing) and refused to {doing}; raise Redis's maxmemory, or lower the "
                "store's retention or max_events"
            )
        if isinstance(error, redis_errors.ConnectionError) and str(error).startswith(
            "No connection available"
        ):
            return StoreUnavailableError(
                f"no pooled connection to Redis at {self._where()} came free within "
                f"{self.pool_timeout:g} s to {doing}: Redis is slow or stalled, or this worker "
                "needs more connections (raise max_connections or owner_connections)"
            )
        if isinstance(
            error,
            redis_errors.ConnectionError
            | redis_errors.TimeoutError
            | redis_errors.ReadOnlyError
            | OSError,
        ):
            return StoreUnavailableError(
                f"Redis at {self._where()} did not answer to {doing} ({error}); retry once it "
                "is reachable again"
            )
        return None

    @contextlib.contextmanager
    def _named(self, doing: str) -> Iterator[None]:
        """Around redis-py calls: its connection and memory errors become named store errors."""
        try:
            yield
        except Exception as error:
            failure = self._failure(error, doing)
            if failure is None or failure is error:
                raise
            raise failure from error

    async def _once(self, key: tuple[str, ...], make: Callable[[], Awaitable[_T]]) -> _T:
        """
        Await *make()*, shared with the equal calls made in the same turn of the loop.

        Callers join a call only until it is sent, never one already on its way:
        so each caller still sees every write that completed before it called.
        """
        future = self._shared.get(key)
        if future is None:
            future = asyncio.ensure_future(self._send(key, make))
            self._shared[key] = future
            future.add_done_callback(functools.partial(self._settled, key))
        return cast("_T", await asyncio.shield(future))

    async def _send(self, key: tuple[str, ...], make: Callable[[], Awaitable[_T]]) -> _T:
        await asyncio.sleep(0)  # the callers woken with the first one join it meanwhile
        if self._shared.get(key) is asyncio.current_task():
            del self._shared[key]  # from here on, a new caller makes a new call
        return await make()

    def _settled(self, key: tuple[str, ...], future: asyncio.Future[Any]) -> None:
        if self._shared.get(key) is future:
            del self._shared[key]
        if not future.cancelled():
            future.exception()  # seen here, so one all its callers left is not "never retrieved"

    # ------------------------------------------------------------- protocol

    async def create(
        self, thread_id: str, run_id: str, *, input: bytes, owner: str, lease: float
    ) -> None:
        """See `RunStore.create`."""
        keys = self._keys(thread_id, run_id)
        with self._named(f"create run {run_id!r}"):
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

        With *first*, the check that makes a retry safe runs inside the same Lua
        script as the write: a try that timed out on this side but still runs
        inside Redis later finds its batch logged and writes nothing.
        """
        _check_final(events, final, first)
        if not events:
            last = (await self.info(thread_id, run_id)).last
            if first is not None and last < first - 1:
                raise _gap(thread_id, run_id, first, last)
            return last if first is None else first - 1
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
            "" if first is None else str(first),
            "" if first is None else f"0-{first + len(events) - 1}",
        ]
        with self._named(f"append to run {run_id!r}"):
            answer = await self._append(keys=keys, args=args)
        code = int(answer[0])
        if code == -1:
            raise _not_found(thread_id, run_id)
        if code == -2:
            raise _ended(thread_id, run_id)
        if code == -3:
            assert first is not None
            raise _gap(thread_id, run_id, first, int(answer[1]))
        return int(answer[1])

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        """
        See `RunStore.read`: one script call; a wait shares this store's one ``XREAD``.

        Concurrent reads of the same run, cursor and limit share one script call.
        """
        after = max(after, 0)
        limit = max(limit, 1)
        keys = self._keys(thread_id, run_id)[:2]
        last, page = await self._read_page(thread_id, run_id, keys, after, limit)
        if page.entries or page.end is not None or wait <= 0:
            return page
        got = await self._reader.wait(keys[1], after, min(after, last), limit, wait)
        if got is None:
            return page
        if got is _AGAIN:
            return (await self._read_page(thread_id, run_id, keys, after, limit))[1]
        assert isinstance(got, Page)
        return got

    async def _read_page(
        self, thread_id: str, run_id: str, keys: list[str], after: int, limit: int
    ) -> tuple[int, Page]:
        """The log's last number and the page after *after* (shared by equal concurrent reads)."""
        last, page = await self._once(
            ("read", keys[1], str(after), str(limit)),
            lambda: self._read_script(thread_id, run_id, keys, after, limit),
        )
        return last, Page(list(page.entries), page.end)

    async def _read_script(
        self, thread_id: str, run_id: str, keys: list[str], after: int, limit: int
    ) -> tuple[int, Page]:
        start = min(after + 1, _MAX_ID)  # past any log: Redis refuses larger ids
        args: list[Any] = [min(after, _MAX_ID), limit, _SCAN, f"0-{start}"]
        with self._named(f"read run {run_id!r}"):
            answer: Any = await self._read(keys=keys, args=args)
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
        return last, Page(entries, end)

    async def info(self, thread_id: str, run_id: str) -> RunInfo:
        """See `RunStore.info`: concurrent calls for the same run share one round trip."""
        return await self._once(
            ("info", self._base(thread_id, run_id)), lambda: self._info(thread_id, run_id)
        )

    async def _info(self, thread_id: str, run_id: str) -> RunInfo:
        meta, _, lease_key, cancel_key = self._keys(thread_id, run_id)
        with self._named(f"look up run {run_id!r}"):
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
        with self._named(f"renew the lease of run {run_id!r}"):
            done = await self._renew(keys=keys, args=[owner, _ms(lease), self._live_ttl(lease)])
        return bool(done)

    async def end_lost(self, thread_id: str, run_id: str, event: bytes) -> bool:
        """See `RunStore.end_lost`."""
        keys = self._keys(thread_id, run_id)
        with self._named(f"end the lost run {run_id!r}"):
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
        with self._named(f"cancel run {run_id!r}"):
            done = int(await self._cancel(keys=[meta, cancel_key], args=args))
        if done == -1:
            raise _not_found(thread_id, run_id)
        return done == 1

    async def discard(self, thread_id: str, run_id: str, *, owner: str) -> bool:
        """See `RunStore.discard`."""
        keys = self._keys(thread_id, run_id)
        return bool(await self._discard(keys=keys, args=[owner]))

    async def wait_cancel(self, thread_id: str, run_id: str) -> None:
        """
        See `RunStore.wait_cancel`.

        While Redis is unreachable this keeps waiting: the one subscription to
        cancel requests reconnects by itself, and then looks again at the cancel
        keys of every run waited on, so a request made meanwhile is not missed.
        """
        base = self._base(thread_id, run_id)

        async def requested() -> bool:
            with self._named(f"look for a cancel of run {run_id!r}"):
                return bool(await self._owner.exists(f"{base}:cancel"))

        await self._cancels.wait(base.encode(), requested)

    async def aclose(self) -> None:
        """Stop listening and reading, and close the connections (not a *client* passed in)."""
        await self._cancels.aclose()
        await self._reader.aclose()
        # Clients made on a pool of ours leave it open when closed: close the pools too.
        await self._owner.aclose(close_connection_pool=True)
        await self._listening.aclose(close_connection_pool=True)
        if self._owns_client:
            await self._redis.aclose(close_connection_pool=True)


class _Cancels:
    """
    The one subscription of a `RedisStore` to its cancel channel, for every run it waits on.

    On a dropped connection it logs once (WARNING, with the cause), subscribes
    again with backoff, says so (INFO), and then looks at the cancel key of every
    run waited on: a request made while it was away is not missed.
    """

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._listening = store._listening
        self._channel = store._channel
        self._waiters: dict[bytes, list[asyncio.Future[None]]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._closed = False

    async def wait(self, base: bytes, requested: Callable[[], Awaitable[bool]]) -> None:
        """Return once the run under *base* is cancelled (*requested* looks at its key)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(base, []).append(waiter)
        try:
            self._listen()
            await self._subscribed.wait()
            # Subscribed first, then checked: a request between the two is not missed.
            if await requested():
                return
            await waiter
        finally:
            waiters = self._waiters.get(base, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(base, None)

    def _listen(self) -> None:
        """Start the one subscription to the cancel channel, once."""
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(
                self._listen_loop(), name=f"ambient_runs RedisStore {self._store._where()} cancels"
            )

    async def _listen_loop(self) -> None:
        """Hear cancel requests; on a dropped connection say so once, and subscribe again."""
        failures = 0
        while not self._closed:
            pubsub = self._listening.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                await self._recheck()
                self._subscribed.set()
                if failures:
                    _log.info(
                        "the cancel subscription of %r is back after %d failed tries",
                        self._store,
                        failures,
                    )
                    failures = 0
                await self._hear(pubsub)
            except Exception as error:
                self._subscribed.clear()
                if self._closed:
                    return
                failures += 1
                # Once per outage at WARNING (with the cause); each retry after it at DEBUG.
                _log.log(
                    logging.WARNING if failures == 1 else logging.DEBUG,
                    "the cancel subscription of %r to %r dropped (%s: %s); reconnecting",
                    self._store,
                    self._channel,
                    type(error).__name__,
                    error,
                )
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _hear(self, pubsub: Any) -> None:
        """Wake the waiters of each cancel published; ping when idle, to notice a dead link."""
        pinged = False
        while not self._closed:
            message = await pubsub.get_message(timeout=_PING_EVERY)
            if message is None:
                if pinged:
                    msg = f"no answer to a ping within {_PING_EVERY:g} s"
                    raise redis_errors.TimeoutError(msg)
                await pubsub.ping()
                pinged = True
                continue
            pinged = False
            if message.get("type") == "message":
                self._wake(message["data"])

    def _wake(self, base: bytes) -> None:
        for waiter in self._waiters.pop(base, []):
            if not waiter.done():
                waiter.set_result(None)

    async def _recheck(self) -> None:
        """Wake the waiters of runs cancelled while the subscription was down."""
        bases = list(self._waiters)
        if not bases:
            return
        async with self._listening.pipeline(transaction=False) as pipe:
            for base in bases:
                pipe.exists(base + b":cancel")
            found = await pipe.execute()
        for base, cancelled in zip(bases, found, strict=True):
            if cancelled:
                self._wake(base)

    async def aclose(self) -> None:
        self._closed = True
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            # redis-py can turn a cancel landing in its read into a plain "no message" (seen
            # as a hang here): the loop then sees _closed and ends; a read still under way
            # ends when its connection is cut.
            done, _ = await asyncio.wait((listener,), timeout=_CLOSING)
            if not done:
                await self._listening.connection_pool.disconnect()
                await asyncio.wait((listener,))


class _Waiter:
    """A `RedisStore.read` waiting for the events after *after* (``XREAD`` from *cursor*)."""

    __slots__ = ("after", "cursor", "future", "limit")

    def __init__(self, after: int, cursor: int, limit: int) -> None:
        self.after = after
        self.cursor = cursor
        self.limit = limit
        self.future: asyncio.Future[Page | object] = asyncio.get_running_loop().create_future()


class _Reader:
    """
    The one blocking ``XREAD`` of a `RedisStore`, shared by every waiting read.

    It watches the stream of every run some read waits on, each from the lowest
    cursor waited with, on a connection of its own; what it reads is handed to
    each waiter as its page, so N followers of a run cost one ``XREAD`` and no
    further round trip. A wait on a stream the ``XREAD`` under way does not
    watch interrupts it (``CLIENT UNBLOCK``) so that it starts again with it.
    """

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        # Per stream, its waiters as an insertion-ordered set: thousands come and go per batch.
        self._waiting: dict[str, dict[_Waiter, None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._connection: Any = None
        self._client_id: int | None = None
        self._watched: dict[str, int] | None = None  # the XREAD under way: stream -> cursor
        self._round = 0
        self._poke: asyncio.Task[None] | None = None
        self._closed = False

    async def wait(
        self, key: str, after: int, cursor: int, limit: int, seconds: float
    ) -> Page | object | None:
        """Wait for events after *after* in stream *key*: a page, `_AGAIN`, or None (timeout)."""
        waiter = _Waiter(after, cursor, limit)
        self._waiting.setdefault(key, {})[waiter] = None
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"ambient_runs RedisStore {self._store._where()} reader"
            )
        elif self._watched is not None and self._watched.get(key, cursor + 1) > cursor:
            self._interrupt()
        try:
            async with asyncio.timeout(seconds):
                got = await waiter.future
        except TimeoutError:
            if waiter.future.done() and not waiter.future.cancelled():
                got = waiter.future.result()  # landed as the wait ran out
            else:
                return None
        finally:
            self._forget(key, waiter)
        if isinstance(got, StoreError):
            raise type(got)(str(got)) from got.__cause__
        return got

    def _forget(self, key: str, waiter: _Waiter) -> None:
        waiters = self._waiting.get(key)
        if waiters is not None and waiters.pop(waiter, False) is None and not waiters:
            del self._waiting[key]

    def _interrupt(self) -> None:
        """Have the XREAD under way return now, so that the next one watches the new stream."""
        if self._poke is None or self._poke.done():
            self._poke = asyncio.get_running_loop().create_task(self._unblock(self._round))

    async def _unblock(self, round: int) -> None:
        for _ in range(5):  # CLIENT UNBLOCK misses an XREAD still on its way to Redis
            if self._round != round or self._client_id is None or self._watched is None:
                return
            try:
                if await self._store._redis.client_unblock(self._client_id):
                    return
            except Exception as error:  # at worst the XREAD runs its BLOCK time out
                _log.debug("could not interrupt the reader of %r: %r", self._store, error)
                return
            await asyncio.sleep(0.005)

    async def _run(self) -> None:
        store = self._store
        while self._waiting and not self._closed:
            try:
                reply = await self._xread()
            except Exception as error:
                failure = store._failure(error, "wait for new events")
                if failure is None:
                    _log.exception("the reader of %r failed", store)
                    failure = StoreUnavailableError(f"the reader of {store!r} failed: {error!r}")
                failure.__cause__ = error
                await self._disconnect()
                for waiters in self._waiting.values():
                    for waiter in waiters:
                        if not waiter.future.done():
                            waiter.future.set_result(failure)
                self._waiting.clear()
                return
            if reply:
                self._deliver(reply)

    async def _xread(self) -> Any:
        connection: Any = self._connection
        if connection is None or not connection.is_connected:
            await self._disconnect()
            connection = self._store._connection_class(**self._store._settings)
            self._connection = connection
            await connection.connect()
            await connection.send_command("CLIENT", "ID")
            self._client_id = int(await connection.read_response())
        # Watched from here on, with no await in between: a wait that comes later interrupts it.
        streams = {key: min(w.cursor for w in ws) for key, ws in self._waiting.items()}
        if not streams:
            return None
        keys = list(streams)
        ids = [f"0-{streams[key]}" for key in keys]
        self._round += 1
        self._watched = streams
        try:
            await connection.send_command(
                "XREAD", "COUNT", _SCAN, "BLOCK", _ms(_BLOCK), "STREAMS", *keys, *ids
            )
            return await connection.read_response(timeout=_BLOCK + self._store.socket_timeout)
        finally:
            self._watched = None

    def _deliver(self, reply: Any) -> None:
        streams = reply.items() if isinstance(reply, dict) else reply
        for name, items in streams:
            key = name.decode() if isinstance(name, bytes) else name
            waiters = self._waiting.get(key)
            if not waiters:
                continue
            batches = [_batch(item) for item in items]
            top = batches[-1][1] if batches else 0
            for waiter in list(waiters):
                got = _page(batches, waiter.after, waiter.limit)
                if got is None:  # all at or before its cursor: the next XREAD starts past them
                    waiter.cursor = max(waiter.cursor, min(waiter.after, top))
                    continue
                del waiters[waiter]
                if not waiter.future.done():
                    waiter.future.set_result(got)
            if not waiters:
                del self._waiting[key]

    async def _disconnect(self) -> None:
        connection, self._connection, self._client_id = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.disconnect()

    async def aclose(self) -> None:
        self._closed = True
        for task in (self._task, self._poke):
            if task is not None and not task.done():
                task.cancel()
                done, _ = await asyncio.wait((task,), timeout=_CLOSING)
                if not done:  # its cancel was lost in redis-py's read: cut the link under it
                    await self._disconnect()
                    await asyncio.wait((task,))
        await self._disconnect()


_Batch: TypeAlias = tuple[int, int, list[Entry], bool]  # first, last, its entries, final


def _batch(item: Any) -> _Batch:
    """A stream entry as the XREAD answers it: its id ``0-<last>`` and its fields."""
    id, fields = item
    if isinstance(fields, dict):
        values = {bytes(k): v for k, v in fields.items()}
    else:
        values = dict(zip(fields[::2], fields[1::2], strict=True))
    first, last = int(values[b"f"]), int(id.split(b"-", 1)[1])
    entries = list(zip(range(first, last + 1), values[b"d"].split(b"\n"), strict=True))
    return first, last, entries, values.get(b"e") == b"1"


def _page(batches: list[_Batch], after: int, limit: int) -> Page | object | None:
    """The page after *after* from consecutive *batches*: None if empty, `_AGAIN` on a gap."""
    entries: list[Entry] = []
    end = None
    for first, last, held, final in batches:
        if last <= after:
            continue
        if not entries and first > after + 1:
            return _AGAIN  # trimmed under our feet: the read script says how
        entries.extend(held[after + 1 - first :] if first <= after else held)
        if final:
            end = last
        if len(entries) >= limit:
            del entries[limit:]
            break
    return Page(entries, end) if entries else None


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
