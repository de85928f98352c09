"""The four kinds of callable that @subagent and @step wrap, and how to run each."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from typing import Any

__all__ = ["KINDS", "consume", "raising"]

KINDS = ["function", "coroutine", "generator", "async_generator"]


async def consume(kind: str, fn: Any, *args: Any) -> Any:
    """Call *fn* as its *kind* wants and run it to the end; return what it produced."""
    if kind == "function":
        return fn(*args)
    if kind == "coroutine":
        return await fn(*args)
    if kind == "generator":
        return list(fn(*args))
    return [item async for item in fn(*args)]


def raising(kind: str, exc: BaseException) -> Any:
    """Return an undecorated callable of *kind* that raises *exc* (generators after one item)."""

    def function() -> None:
        raise exc

    async def coroutine() -> None:
        raise exc

    def generator() -> Generator[int, None, None]:
        yield 1
        raise exc

    async def async_generator() -> AsyncGenerator[int, None]:
        yield 1
        raise exc

    return {
        "function": function,
        "coroutine": coroutine,
        "generator": generator,
        "async_generator": async_generator,
    }[kind]
