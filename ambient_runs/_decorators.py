"""
Decorators for the four kinds of callable: `subagent` and `step` wrap them all.

- **Functions** run inside the scope (``with``).
- **Coroutine functions** run inside the scope from their first ``await``: the
  scope's parent is what is ambient where the coroutine is *awaited* (or turned
  into a task), as with ``asyncio.create_task``.
- **Generators and async generators** capture the ambient frame when *called*,
  open the scope at their first step, and set it around each step only: the
  body always sees its scope, the consumer never does between items. They stay
  real generators (``send``/``throw``/``close``, ``asend``/``athrow``/``aclose``,
  return values, `inspect.isgenerator`). Closing one early (``break`` plus
  ``close``/``aclose``, or garbage collection) ends the scope; a generator never
  started opens nothing.

With no run ambient at call time a decorated callable just runs: decoration at
import costs nothing, and a call outside a run costs one contextvar read.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, Protocol

from ambient_runs import _scopes
from ambient_runs._handles import _safely

__all__ = ("decorate",)


class _Scope(Protocol):
    """What `decorate` needs of a scope: open in a frame, close the way the body ended."""

    def _begin(self, parent: _scopes.Frame) -> _scopes.Frame: ...
    def _finish(self, exc: BaseException | None, result: Any = None) -> None: ...


def decorate(fn: Any, make: Callable[[], Any]) -> Any:
    """Wrap *fn* so that each call runs inside a fresh scope from *make*."""
    if inspect.isasyncgenfunction(fn):
        return _decorate_async_generator(fn, make)
    if inspect.isgeneratorfunction(fn):
        return _decorate_generator(fn, make)
    if inspect.iscoroutinefunction(fn):
        return _decorate_coroutine(fn, make)
    return _decorate_function(fn, make)


def _decorate_function(fn: Callable[..., Any], make: Callable[[], _Scope]) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _scopes.current()
        if parent is None:
            return fn(*args, **kwargs)
        scope = make()
        frame = scope._begin(parent)
        token = _scopes.enter(frame)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            _scopes.leave(token, frame, "scope")
            _safely(scope._finish, exc)
            raise
        _scopes.leave(token, frame, "scope")
        scope._finish(None, result)
        return result

    return wrapper


def _decorate_coroutine(fn: Callable[..., Any], make: Callable[[], _Scope]) -> Any:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _scopes.current()
        if parent is None:
            return await fn(*args, **kwargs)
        scope = make()
        frame = scope._begin(parent)
        token = _scopes.enter(frame)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            _scopes.leave(token, frame, "scope")
            _safely(scope._finish, exc)
            raise
        _scopes.leave(token, frame, "scope")
        scope._finish(None, result)
        return result

    return wrapper


def _decorate_generator(fn: Callable[..., Any], make: Callable[[], _Scope]) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _scopes.current()
        inner = fn(*args, **kwargs)
        if parent is None:
            return inner
        return _scoped_generator(make, parent, inner)

    return wrapper


def _scoped_generator(
    make: Callable[[], _Scope], parent: _scopes.Frame, inner: Generator[Any, Any, Any]
) -> Generator[Any, Any, Any]:
    scope = make()
    frame = scope._begin(parent)
    step: Callable[[Any], Any] = inner.send
    value: Any = None
    try:
        while True:
            try:
                item = _scopes.stepping(frame, step, value)
            except StopIteration as stop:
                result = stop.value
                break
            try:
                value = yield item
                step = inner.send
            except GeneratorExit:
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                step, value = inner.throw, exc
    except GeneratorExit as exc:
        _scopes.stepping(frame, inner.close)
        _safely(scope._finish, exc)
        raise
    except BaseException as exc:
        _safely(scope._finish, exc)
        raise
    scope._finish(None, result)
    return result


def _decorate_async_generator(fn: Callable[..., Any], make: Callable[[], _Scope]) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _scopes.current()
        inner = fn(*args, **kwargs)
        if parent is None:
            return inner
        return _scoped_async_generator(make, parent, inner)

    return wrapper


async def _step_async(frame: _scopes.Frame, awaitable: Any) -> Any:
    token = _scopes.enter(frame)
    try:
        return await awaitable
    finally:
        _scopes.leave(token, frame, "generator step")


async def _scoped_async_generator(
    make: Callable[[], _Scope], parent: _scopes.Frame, inner: AsyncGenerator[Any, Any]
) -> AsyncGenerator[Any, Any]:
    scope = make()
    frame = scope._begin(parent)
    throw: BaseException | None = None
    value: Any = None
    try:
        while True:
            try:
                if throw is not None:
                    pending, throw = throw, None
                    item = await _step_async(frame, inner.athrow(pending))
                else:
                    item = await _step_async(frame, inner.asend(value))
            except StopAsyncIteration:
                break
            try:
                value = yield item
            except GeneratorExit:
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                throw = exc
    except GeneratorExit as exc:
        await _step_async(frame, inner.aclose())
        _safely(scope._finish, exc)
        raise
    except BaseException as exc:
        _safely(scope._finish, exc)
        raise
    scope._finish(None)
