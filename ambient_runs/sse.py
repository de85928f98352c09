"""
Server-sent events framing for AG-UI: pure encoders, no I/O.

Each event becomes one ``data:`` line holding its compact JSON and a blank line
(LF only): the same bytes as the official Python ``EventEncoder``. A transport
writes them to its response; `ambient_runs.asgi` is one such transport::

    async for frame in sse.frames(ambient_runs.stream(agent, input), keep_alive=15):
        await response.write(frame)

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
)
from typing import Any, TypeAlias

from ambient_runs import events as ev
from ambient_runs._outcomes import DEFAULT_POLICY, GENERIC_MESSAGE, ErrorPolicy
from ambient_runs._wire import encode_json, framed

__all__ = ("CONTENT_TYPE", "KEEP_ALIVE", "check_keep_alive", "encode", "frames")

_log = logging.getLogger("ambient_runs")

CONTENT_TYPE = "text/event-stream"
"""
The response media type of an AG-UI SSE stream.

.. versionadded:: 0.1.0
"""

KEEP_ALIVE = b": keep-alive\n\n"
"""
An SSE comment: clients ignore it, proxies see traffic.

.. versionadded:: 0.1.0
"""


@framed("data: ", "\n\n")
def encode(obj: ev.BaseEvent) -> bytes:
    """
    Return the event *obj* as one SSE frame: ``b"data: " + JSON + b"\\n\\n"``.

    The JSON is compact, single-line UTF-8, with absent optional fields left out:
    byte for byte what the official ``EventEncoder`` writes.

    What runs is the same framing specialised by `ambient_runs._wire.framed`
    (one string, encoded once); the body below is its reference definition.

    Args:
        obj: Any AG-UI event.

    Returns:
        The frame.

    Raises:
        InvalidEventError: *obj* holds something JSON cannot carry.

    .. versionadded:: 0.1.0
    """
    return b"data: " + encode_json(obj) + b"\n\n"


#: `encode` as defined here: the byte path writes its bytes, so it is off when replaced.
_ENCODE = encode


def frame(data: bytes, *, id: int | str | None = None) -> bytes:
    """
    Return an SSE frame for event JSON already encoded (`ambient_runs.encode_json`'s).

    With *id*, the frame starts with an ``id:`` line, which a browser's
    ``EventSource`` (and a resuming client) sends back as ``Last-Event-ID``;
    clients that do not resume ignore it.

    Raises:
        ValueError: *id* holds a line break or NUL, which SSE cannot carry.

    .. versionadded:: 0.1.0
    """
    if id is None:
        return b"data: " + data + b"\n\n"
    text = str(id)
    if "\n" in text or "\r" in text or "\0" in text:
        msg = f"an SSE id cannot hold a line break or NUL: {text!r}"
        raise ValueError(msg)
    return b"id: " + text.encode() + b"\ndata: " + data + b"\n\n"


def _payload(frame: bytes) -> bytes:
    """The event JSON of a *frame* that `encode` (or `frame` without an id) wrote."""
    return frame[6:-2]  # b"data: " + JSON + b"\n\n"


def _numbered(entries: Iterable[tuple[int, bytes]]) -> bytes:
    """The frames of ``(id, json)`` pairs with integer ids, joined: `frame` for each, faster."""
    return b"".join([b"id: %d\ndata: %s\n\n" % entry for entry in entries])


def frames(
    events: AsyncIterable[ev.BaseEvent], *, keep_alive: float | None = None
) -> AsyncGenerator[bytes, None]:
    """
    Encode each event of *events* as an SSE frame, as it arrives.

    With *keep_alive*, a `KEEP_ALIVE` comment goes out after every *keep_alive*
    seconds without an event, so proxies and load balancers keep an idle stream
    open while the agent thinks. Waiting for an event is never interrupted: the
    pending ``__anext__`` runs in a task of its own and is only cancelled when
    the frames are closed.

    Closing the returned iterator (``aclose``) closes *events* too, when it has
    an ``aclose``: for an `ambient_runs.stream`, that cancels the agent.

    A stream that fails before its terminal event (an event that will not
    encode, *events* raising) ends with a ``RUN_ERROR`` frame, logged on the
    ``ambient_runs`` logger, and *events* is closed; the exception is not raised
    to the caller, so a response always ends well formed. The frame says what
    the run's error policy says (*events* an `ambient_runs.stream`: its run's
    *expose_errors* and *describe_error*), and otherwise the default: a generic
    message, and the exception's ``code`` or class name.

    Args:
        events: The events, e.g. `ambient_runs.stream`'s.
        keep_alive: Seconds of silence before a keep-alive comment; None for none.

    Returns:
        An async generator of frames (bytes).

    Raises:
        ValueError: *keep_alive* is not positive.

    .. versionadded:: 0.1.0
    """
    return _encoded(events, check_keep_alive(keep_alive), coalesce=False)


def _as_frames(events: object) -> None:
    """
    Tell an `ambient_runs.stream` that its consumer is this SSE encoder.

    It may then hand over the library's hot events as finished frames (bytes,
    the same bytes `encode` writes), which are passed through.
    """
    as_frames = getattr(events, "_as_frames", None)
    if as_frames is not None and encode is _ENCODE:  # its frames are this encoder's bytes
        as_frames()


def _policy_of(events: object) -> ErrorPolicy:
    """The error policy of *events*' run (an `ambient_runs.stream`), else the default."""
    policy = getattr(getattr(events, "run", None), "error_policy", None)
    return policy if isinstance(policy, ErrorPolicy) else DEFAULT_POLICY


def check_keep_alive(keep_alive: float | None) -> float | None:
    """
    Return *keep_alive* if it is a valid keep-alive interval for `frames`.

    For transports that take the interval when configured (`ambient_runs.asgi.AgentApp`
    does), so a bad value fails there rather than on the first request.

    Raises:
        ValueError: *keep_alive* is neither None nor a positive number of seconds.

    .. versionadded:: 0.1.0
    """
    if keep_alive is not None and not keep_alive > 0:
        msg = f"keep_alive must be a positive number of seconds or None, not {keep_alive!r}"
        raise ValueError(msg)
    return keep_alive


_Take: TypeAlias = Callable[[], Coroutine[Any, Any, "list[ev.BaseEvent | bytes]"]]
"""Return every item ready now (at least one: an event, or a frame already), or [] at the end."""


def _batches(
    events: AsyncIterable[ev.BaseEvent], keep_alive: float | None
) -> AsyncGenerator[bytes, None]:
    """
    `frames`, coalesced: each item is the frames of every event ready now, joined.

    What `ambient_runs.asgi.AgentApp` sends, one ASGI message per item: an agent
    that writes a burst costs one ``send`` (and one syscall) per batch, not per
    event. The batches come from `EventStream._take` (every buffered event,
    after letting the agent fill a batch); any other iterable gives one event
    per batch. Keep-alive comments, closing *events* on close, and ending a
    failed stream with ``RUN_ERROR`` (after the frames that did encode, worded
    by the run's error policy) behave as in `frames`.
    """
    return _encoded(events, keep_alive, coalesce=True)


def _encoded(
    events: AsyncIterable[ev.BaseEvent], keep_alive: float | None, *, coalesce: bool
) -> AsyncGenerator[bytes, None]:
    """
    `frames` (*coalesce* False: each frame) and `_batches` (True: each batch joined).

    An `ambient_runs.stream` hands over what it has buffered: at once
    (`EventStream._now`), or after letting the agent fill a batch
    (`EventStream._take`); any other iterable gives one event per take.
    """
    policy = _policy_of(events)
    _as_frames(events)
    source = aiter(events)
    take: _Take = getattr(source, "_take" if coalesce else "_now", None) or _singly(source)
    return _encoding(take, source, keep_alive, policy, coalesce=coalesce)


async def _encoding(
    take: _Take,
    events: object,
    keep_alive: float | None,
    policy: ErrorPolicy,
    *,
    coalesce: bool,
) -> AsyncGenerator[bytes, None]:
    """
    The loop of `_encoded`: take what is ready, encode it, yield it.

    Items that are bytes are frames already (the byte path) and pass through.
    """
    pending: asyncio.Task[list[ev.BaseEvent | bytes]] | None = None
    ended = False  # the terminal event has gone out
    try:
        while True:
            if keep_alive is None:
                batch = await take()
            else:
                # Waiting is never interrupted: the take runs in a task of its own,
                # cancelled only when the frames are closed.
                if pending is None:
                    pending = asyncio.create_task(take())
                done, _ = await asyncio.wait((pending,), timeout=keep_alive)
                if not done:
                    yield KEEP_ALIVE
                    continue
                batch, pending = pending.result(), None
            if not batch:
                return
            if not coalesce:
                for item in batch:
                    if type(item) is bytes:  # a frame already (the byte path)
                        yield item
                        continue
                    frame = encode(item)  # type: ignore[arg-type]
                    ended = isinstance(item, _TERMINAL)
                    yield frame
                continue
            try:
                body = b"".join([_frame(item) for item in batch])
            except Exception as error:
                head = []  # the frames before the one that failed go out first
                for item in batch:
                    try:
                        head.append(_frame(item))
                    except Exception:
                        break
                    ended = isinstance(item, _TERMINAL)
                if head:
                    yield b"".join(head)
                raise error from None
            ended = isinstance(batch[-1], _TERMINAL)
            yield body
    except Exception as error:
        # The stream failed (an event that would not encode, an iterator that
        # raised): the client still gets a terminal event, as the protocol needs.
        if ended:
            raise
        _log.error("the event stream failed; ending it with RUN_ERROR", exc_info=error)
        yield _error_frame(error, policy)
    finally:
        await _close(pending, events)


def _frame(event: ev.BaseEvent | bytes) -> bytes:
    """The frame of *event*, which may be one already (the byte path)."""
    return event if isinstance(event, bytes) else encode(event)


def _singly(source: AsyncIterator[ev.BaseEvent | bytes]) -> _Take:
    """A taker for any async iterator: one item per batch, [] at the end."""

    async def take() -> list[ev.BaseEvent | bytes]:
        try:
            item = await anext(source)
        except StopAsyncIteration:
            return []
        return [item]

    return take


_TERMINAL = (ev.RunFinishedEvent, ev.RunErrorEvent)


async def _close(pending: asyncio.Task[Any] | None, events: object) -> None:
    """Cancel the wait for the next event, if one is pending, then close *events*."""
    if pending is not None:
        pending.cancel()
        await asyncio.wait((pending,))
        if not pending.cancelled():
            pending.exception()  # the stream is being closed; nobody wants it now
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def _error_frame(error: Exception, policy: ErrorPolicy) -> bytes:
    """The ``RUN_ERROR`` frame that ends a stream which failed with *error*."""
    message, code = policy.report(error)
    try:
        return encode(ev.RunErrorEvent(message=message, code=code))
    except Exception:  # a code JSON cannot carry (a lone surrogate, say)
        return encode(ev.RunErrorEvent(message=GENERIC_MESSAGE, code=type(error).__name__))
