"""
Decorators for the four kinds of callable: `subagent` and `step` wrap them all.

- **Functions** run inside the scope (``with``).
- **Coroutine functions** run inside the scope from their first ``await``: the
  scope's parent is what is ambient where the coroutine is *awaited* (or turned
  into a task), as with ``asyncio.create_task``.
- **Generators and async generators** capture the ambient frame when *called*,
  open the scope when first resumed, and set it around each resumption only: the
  body always sees its scope, the consumer never does between items. They stay
  real generators (``send``/``throw``/``close``, ``asend``/``athrow``/``aclose``,
  return values, `inspect.isgenerator`). Closing one early (``break`` plus
  ``close``/``aclose``, or garbage collection) ends the scope; a generator never
  started opens nothing. A sync generator's close path runs in a private copy
  of the Context (`_scopes.isolated`): the collector may run it in the middle
  of any ``ContextVar.set``, and it must not write that Context (CPython 3.11
  crashes). Its ``finally`` still runs with its scope ambient; what it sets in
  contextvars stays in the copy. Async generators are finalized by the event
  loop in a task of their own, never inside the collector.
- **Context manager factories** (``@contextmanager``/``@asynccontextmanager``
  functions, decorated *above* that decorator) open the scope on ``__enter__``
  and close it on ``__exit__``, so the ``with`` block itself runs inside it, as
  with ``with subagent(...)``. Decorated *below* it, the scope covers the
  generator's own code only (the generator rule above).

With no run ambient at call time a decorated callable just runs: decoration at
import costs nothing, and a call outside a run costs one contextvar read.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ambient_runs import _scopes
from ambient_runs._outcomes import safely
from ambient_runs.errors import ProtocolError

if TYPE_CHECKING:
    from ambient_runs._outcomes import ExcInfo

__all__ = ("decorate",)

_log = logging.getLogger("ambient_runs")

# The var's own methods, read once: a decorated call's hot path.
_current, _enter, _reset = _scopes.current, _scopes.enter, _scopes.reset


class _Invocation(Protocol):
    """What a decorated call needs of its invocation, its frame's ``handle``: an ending."""

    def _finish(self, exc: BaseException | None, result: Any = None) -> None: ...


Start = Callable[[_scopes.Frame], _scopes.Frame]
"""
Start a fresh invocation in a parent frame, for one call: its frame (``handle``: the invocation).

What a spec hands `decorate` (``SpecFaces._start``). The call ends through the
frame (``_conclude`` with the body's result, ``_finish`` with its exception),
which a subagent's frame, the invocation itself, answers without a hop.
"""


def _factory_code(factory: Callable[[Any], Any], probe: Any) -> Any:
    return factory(probe).__code__


def _probe() -> Iterator[None]:
    yield  # pragma: no cover


async def _aprobe() -> AsyncIterator[None]:
    yield  # pragma: no cover


# Every function contextlib's decorators return shares one code object: that is
# how a context manager factory is told from any other function.
_CONTEXTMANAGER_CODE = _factory_code(contextlib.contextmanager, _probe)
_ASYNCCONTEXTMANAGER_CODE = _factory_code(contextlib.asynccontextmanager, _aprobe)


def decorate(fn: Any, start: Start) -> Any:
    """Wrap *fn* so that each call runs inside a fresh invocation, started by *start*."""
    code = getattr(fn, "__code__", None)
    if code is _CONTEXTMANAGER_CODE or code is _ASYNCCONTEXTMANAGER_CODE:
        return _decorate_context_manager(fn, start)
    if inspect.isasyncgenfunction(fn):
        return _decorate_async_generator(fn, start)
    if inspect.isgeneratorfunction(fn):
        return _decorate_generator(fn, start)
    if inspect.iscoroutinefunction(fn):
        return _decorate_coroutine(fn, start)
    return _decorate_function(fn, start)


def _failed(token: Any, frame: _scopes.Frame, exc: BaseException) -> None:
    """The body of a call raised *exc*: leave its scope, and end it the way it ended."""
    _scopes.leave(token, frame, "scope")
    safely(frame._finish, exc)


def _decorate_function(fn: Callable[..., Any], start: Start) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _current()
        if parent is None:
            return fn(*args, **kwargs)
        frame = start(parent)
        token = _enter(frame)
        try:
            # `fn(*args)` without keywords: the `**` spelling builds a dict every call.
            result = fn(*args, **kwargs) if kwargs else fn(*args)
        except BaseException as exc:
            _failed(token, frame, exc)
            raise
        # `_scopes.leave`'s common case inline (its frame current, the one it restores
        # live, in its own Context); `leave` decides every other.
        if _current() is frame and not parent.orphaned:
            try:
                _reset(token)
            except ValueError:
                _scopes.leave(token, frame, "scope")
        else:
            _scopes.leave(token, frame, "scope")
        frame._conclude(result)  # a subagent's frame is its invocation: one call
        return result

    return wrapper


def _decorate_coroutine(fn: Callable[..., Any], start: Start) -> Any:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _current()
        if parent is None:
            return await fn(*args, **kwargs)
        frame = start(parent)
        token = _enter(frame)
        try:
            # `fn(*args)` without keywords: the `**` spelling builds a dict every call.
            result = await (fn(*args, **kwargs) if kwargs else fn(*args))
        except BaseException as exc:
            _failed(token, frame, exc)
            raise
        # `_scopes.leave`'s common case inline (its frame current, the one it restores
        # live, in its own Context); `leave` decides every other.
        if _current() is frame and not parent.orphaned:
            try:
                _reset(token)
            except ValueError:
                _scopes.leave(token, frame, "scope")
        else:
            _scopes.leave(token, frame, "scope")
        frame._conclude(result)  # a subagent's frame is its invocation: one call
        return result

    return wrapper


def _decorate_generator(fn: Callable[..., Any], start: Start) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _scopes.current()
        inner = fn(*args, **kwargs)
        if parent is None:
            return inner
        return _scoped_generator(start, parent, inner)

    return wrapper


def _scoped_generator(
    start: Start, parent: _scopes.Frame, inner: Generator[Any, Any, Any]
) -> Generator[Any, Any, Any]:
    frame = start(parent)
    invocation: _Invocation = frame.handle
    resume: Callable[[Any], Any] = inner.send
    value: Any = None
    try:
        while True:
            try:
                item = _scopes.within(frame, resume, value)
            except StopIteration as stop:
                result = stop.value
                break
            try:
                value = yield item
                resume = inner.send
            except GeneratorExit:
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                resume, value = inner.throw, exc
    except GeneratorExit as exc:
        # Possibly the garbage collector finalizing an abandoned generator, maybe in
        # the middle of user code's own ContextVar.set: the close runs isolated, so
        # nothing here writes the Context it interrupted (see `_scopes.isolated`).
        _scopes.isolated(_close_generator, frame, inner, invocation, exc)
        raise
    except BaseException as exc:
        safely(invocation._finish, exc)
        raise
    invocation._finish(None, result)
    return result


def _close_generator(
    frame: _scopes.Frame,
    inner: Generator[Any, Any, Any],
    invocation: _Invocation,
    exc: GeneratorExit,
) -> None:
    """Close a scoped generator's body with its scope ambient, then end the scope."""
    try:
        _scopes.within(frame, inner.close)
    except ProtocolError:
        if not frame.run.finished:
            raise
        _dropped_cleanup()
    safely(invocation._finish, exc)


def _dropped_cleanup() -> None:
    """
    Note that a generator's cleanup could not emit because its run is over.

    An abandoned generator is often finalized (by the garbage collector or the
    loop's asyncgen hook) after its run finished and closed its invocation. What its
    ``finally`` emits then has nowhere to go; raising would only surface as an
    ERROR log ("Task exception was never retrieved") far from the cause.
    """
    _log.debug(
        "a generator cleaned up after its run had finished; what it emitted was dropped",
        exc_info=True,
    )


def _decorate_async_generator(fn: Callable[..., Any], start: Start) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _scopes.current()
        inner = fn(*args, **kwargs)
        if parent is None:
            return inner
        return _scoped_async_generator(start, parent, inner)

    return wrapper


async def _resume_within(frame: _scopes.Frame, awaitable: Any) -> Any:
    token = _scopes.enter(frame)
    try:
        return await awaitable
    finally:
        _scopes.leave(token, frame, "generator resumption", final=False)


async def _scoped_async_generator(
    start: Start, parent: _scopes.Frame, inner: AsyncGenerator[Any, Any]
) -> AsyncGenerator[Any, Any]:
    frame = start(parent)
    invocation: _Invocation = frame.handle
    throw: BaseException | None = None
    value: Any = None
    try:
        while True:
            try:
                if throw is not None:
                    pending, throw = throw, None
                    item = await _resume_within(frame, inner.athrow(pending))
                else:
                    item = await _resume_within(frame, inner.asend(value))
            except StopAsyncIteration:
                break
            try:
                value = yield item
            except GeneratorExit:
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                throw = exc
    except GeneratorExit as exc:
        try:
            await _resume_within(frame, inner.aclose())
        except ProtocolError:
            if not frame.run.finished:
                raise
            _dropped_cleanup()
        safely(invocation._finish, exc)
        raise
    except BaseException as exc:
        safely(invocation._finish, exc)
        raise
    invocation._finish(None)


def _decorate_context_manager(fn: Callable[..., Any], start: Start) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _ScopedContextManager(start, fn(*args, **kwargs))

    return wrapper


class _ScopedContextManager:
    """A context manager run inside a fresh scope, ``with`` block included."""

    __slots__ = ("_frame", "_inner", "_invocation", "_start", "_token")

    def __init__(self, start: Start, inner: Any) -> None:
        self._start = start
        self._inner = inner
        self._invocation: _Invocation | None = None
        self._frame: _scopes.Frame | None = None
        self._token: Any = None

    def _open(self) -> bool:
        parent = _scopes.current()
        if parent is None:
            return False
        frame = self._frame = self._start(parent)
        self._invocation = frame.handle
        self._token = _scopes.enter(frame)
        return True

    def _close(self, exc: BaseException | None) -> None:
        invocation = self._invocation
        if invocation is None:
            return
        self._invocation = None
        _scopes.leave(self._token, self._frame, "scope")
        if exc is None:
            invocation._finish(None)
        else:
            safely(invocation._finish, exc)

    def __enter__(self) -> Any:
        self._open()
        try:
            return self._inner.__enter__()
        except BaseException as exc:
            self._close(exc)
            raise

    def __exit__(self, *exc_info: *ExcInfo) -> bool:
        try:
            suppressed = bool(self._inner.__exit__(*exc_info))
        except BaseException as error:
            self._close(error)
            raise
        self._close(None if suppressed else exc_info[1])
        return suppressed

    async def __aenter__(self) -> Any:
        self._open()
        try:
            return await self._inner.__aenter__()
        except BaseException as exc:
            self._close(exc)
            raise

    async def __aexit__(self, *exc_info: *ExcInfo) -> bool:
        try:
            suppressed = bool(await self._inner.__aexit__(*exc_info))
        except BaseException as error:
            self._close(error)
            raise
        self._close(None if suppressed else exc_info[1])
        return suppressed
