"""The four kinds of callable that @subagent and @step wrap, and how to run each."""

from __future__ import annotations

from typing import Any

__all__ = ["KINDS", "consume"]

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
