"""
Carry the ambient run and subagent into threads, with one call.

What propagates by default (the stdlib's rules, unchanged):

=====================================  ==========================================
path                                   ambient scope in the worker
=====================================  ==========================================
``asyncio.to_thread``                  yes (it copies the Context)
``asyncio.create_task``/``gather``     yes
``loop.run_in_executor``               no: use `run_in_executor` or `wrap`
``ThreadPoolExecutor.submit``          no: use `ContextThreadPoolExecutor` or `wrap`
``threading.Thread``                   no: use `Thread` or `wrap`
=====================================  ==========================================

Each helper captures the Context when the work is *handed over* (``submit``,
``Thread(...)``, `wrap`), not when it starts, so work that starts after its
scope ended is still attributed to that scope, and a pool thread reused for
another job carries nothing of the previous one.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from ambient_runs._scopes import bind

__all__ = ("ContextThreadPoolExecutor", "Thread", "run_in_executor", "wrap")

P = ParamSpec("P")
R = TypeVar("R")


def wrap(fn: Callable[P, R]) -> Callable[P, R]:
    """
    Return *fn* bound to the ambient run and subagent of this moment.

    Call the result from any thread, executor or callback; each call runs in a
    fresh copy of the captured Context.

    .. versionadded:: 0.1.0
    """
    return bind(fn)


class Thread(threading.Thread):
    """
    A `threading.Thread` whose target runs in the Context of its creation.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        group: None = None,
        target: Callable[..., object] | None = None,
        name: str | None = None,
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        daemon: bool | None = None,
    ) -> None:
        super().__init__(
            group,
            bind(target) if target is not None else None,
            name,
            args,
            kwargs,
            daemon=daemon,
        )


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """
    A `ThreadPoolExecutor` whose jobs run in the Context of their ``submit`` call.

    .. versionadded:: 0.1.0
    """

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Schedule ``fn(*args, **kwargs)`` in a copy of the submitter's Context."""
        return super().submit(bind(fn), *args, **kwargs)


def run_in_executor(
    executor: Executor | None, fn: Callable[..., R], /, *args: Any
) -> asyncio.Future[R]:
    """
    Like ``loop.run_in_executor``, but *fn* runs with the ambient run and subagent.

    .. versionadded:: 0.1.0
    """
    return asyncio.get_running_loop().run_in_executor(executor, bind(fn), *args)
