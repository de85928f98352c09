"""
`Cancellation`: the plumbing of a run's cooperative cancellation.

`Run` keeps the public face (``cancel``, ``is_cancelled``, ``check_cancelled``,
``cancelled``, ``until_cancelled``) and its documentation; this object keeps
the flag and the waiters, as trio's private ``CancelStatus`` does for the
public ``CancelScope``. It shares the run's lock, so a cancellation and a
waiter registering never miss each other.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

from ambient_runs._futures import resolve

__all__ = ("Cancellation",)

T = TypeVar("T")


class Cancellation:
    """One run's cancelled flag and the futures waiting for it, each with its loop."""

    __slots__ = ("_lock", "_waiters", "cancelled")

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        #: Whether `cancel` has been called.
        self.cancelled = False
        #: Each waiting `wait` call's future and its loop; a waiter removes itself.
        #: Made at the first wait: most runs never wait, and an idle run stays small.
        self._waiters: dict[asyncio.Future[None], asyncio.AbstractEventLoop] | None = None

    def cancel(self) -> None:
        """Set the flag once and wake every waiter, from any thread; skip closed loops."""
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            waiters, self._waiters = self._waiters, None
        for future, loop in (waiters or {}).items():
            if loop.is_closed():
                continue
            try:
                loop.call_soon_threadsafe(resolve, future)
            except RuntimeError:  # it closed between the check and the call
                continue

    async def wait(self) -> None:
        """Return once cancelled; the waiter is kept only while it waits."""
        lock = self._lock
        with lock:
            if self.cancelled:
                return
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            if self._waiters is None:
                self._waiters = {}
            self._waiters[future] = loop
        try:
            await future
        finally:
            with lock:
                if self._waiters is not None:
                    self._waiters.pop(future, None)

    async def race(self, awaitable: Awaitable[T]) -> T | None:
        """*awaitable*'s result, or None if cancellation came first; the loser is cancelled."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if work.done():
            return work.result()
        work.cancel()
        return None
