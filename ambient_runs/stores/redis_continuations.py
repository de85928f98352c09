"""
`RedisContinuations`: a `ContinuationStore` on Redis, so that any worker can continue an interrupt.

Needs the ``redis`` extra (``pip install ambient-runs[redis]``, redis-py's
asyncio client) and Redis ≥ 6.2. One hash per interrupt, ``<prefix><id>``:
``d`` the continuation (JSON), ``e`` when it expires (Redis's own clock, ms),
``s`` ``live`` or ``answered``. `take` is one Lua script, so of two workers
taking one interrupt at once exactly one continues it. The key outlives the
expiry by *grace*, so a late or repeated answer is told apart from an
unknown one; then Redis forgets it.

`ambient_runs.asgi.AgentApp` uses one by default when its ``store=`` is a
``RedisStore``: the same Redis connection, keys under the store's prefix plus
``continuations:``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ambient_runs.continuations import DEFAULT_GRACE, DEFAULT_TTL
from ambient_runs.errors import (
    InterruptAnsweredError,
    InterruptExpiredError,
    InterruptUnknownError,
    needs_extra,
)

with needs_extra(
    "ambient_runs.stores.redis_continuations",
    extra="redis",
    needs="the redis client",
    name="redis",
):
    import redis.asyncio as aioredis

from ambient_runs import continuations as _c
from ambient_runs.stores.redis import RedisStore

__all__ = ("RedisContinuations",)

# KEYS: the interrupt's key. ARGV: data, ttl ms, grace ms. Expiry on Redis's clock.
_PUT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'live', 'e', ms + tonumber(ARGV[2]), 'd', ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1
"""

# KEYS: the interrupt's key. ARGV: grace ms, '1' when an expired one may be taken.
# Returns {'unknown'} | {'answered'} | {'expired'} | {'live', data}.
_TAKE = """
local got = redis.call('HMGET', KEYS[1], 's', 'e', 'd')
if not got[1] then return {'unknown'} end
if got[1] ~= 'live' then return {'answered'} end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if ms >= tonumber(got[2]) and ARGV[2] ~= '1' then return {'expired'} end
redis.call('HSET', KEYS[1], 's', 'answered')
redis.call('HDEL', KEYS[1], 'd')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {'live', got[3]}
"""


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisContinuations:
    """
    A `ContinuationStore` on Redis, shared by every worker.

    Args:
        url: A Redis URL, passed to ``redis.asyncio.Redis.from_url``.
        prefix: The prefix of every key.
        ttl: Seconds an interrupt can be answered (its ``expiresAt``).
        grace: Seconds an answered or expired interrupt is still told apart
            from an unknown one.
        client: An existing ``redis.asyncio.Redis`` instead of *url*; `aclose`
            leaves it open.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        prefix: str = "ambient_runs:continuations:",
        ttl: float = DEFAULT_TTL,
        grace: float = DEFAULT_GRACE,
        client: aioredis.Redis | None = None,
    ) -> None:
        if (url is None) == (client is None):
            msg = "pass either a Redis url or client="
            raise TypeError(msg)
        _c._check_ttl(ttl)
        _c._check_ttl(grace, "grace")
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        self.grace = grace
        self._owns_client = client is None
        self._redis: aioredis.Redis = (
            client if client is not None else aioredis.Redis.from_url(url)  # type: ignore[arg-type]
        )
        self._put = self._redis.register_script(_PUT)
        self._take = self._redis.register_script(_TAKE)

    @classmethod
    def of_store(cls, store: RedisStore, **options: Any) -> RedisContinuations:
        """
        The continuations beside *store*: its Redis connection, keys under its prefix.

        *options* are the constructor's (*ttl*, *grace*, *prefix*).
        """
        options.setdefault("prefix", f"{store.prefix}continuations:")
        # The store's own client (and so its pool): no second set of connections.
        return cls(client=store._redis, **options)

    def __repr__(self) -> str:
        return f"<RedisContinuations {self.url or self._redis!r} prefix={self.prefix!r}>"

    async def put(
        self, interrupt_id: str, data: Mapping[str, Any], *, ttl: float | None = None
    ) -> None:
        """See `ContinuationStore.put`."""
        ttl = self.ttl if ttl is None else ttl
        _c._check_ttl(ttl)
        blob = _c._encode(data)
        await self._put(keys=[self.prefix + interrupt_id], args=[blob, _ms(ttl), _ms(self.grace)])

    async def take(self, interrupt_id: str, *, expired_ok: bool = False) -> dict[str, Any]:
        """See `ContinuationStore.take`."""
        got = await self._take(
            keys=[self.prefix + interrupt_id], args=[_ms(self.grace), "1" if expired_ok else "0"]
        )
        state = got[0].decode() if isinstance(got[0], bytes) else str(got[0])
        if state == "unknown":
            raise InterruptUnknownError(interrupt_id, _c._UNKNOWN)
        if state == "answered":
            raise InterruptAnsweredError(interrupt_id, _c._ANSWERED)
        if state == "expired":
            raise InterruptExpiredError(interrupt_id, _c._EXPIRED)
        loaded: dict[str, Any] = json.loads(got[1])
        return loaded

    async def drop(self, interrupt_id: str) -> None:
        """See `ContinuationStore.drop`."""
        await self._redis.delete(self.prefix + interrupt_id)

    async def aclose(self) -> None:
        """Close the connection, unless it was given (*client*)."""
        if self._owns_client:
            await self._redis.aclose()
