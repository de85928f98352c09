"""
A bare ASGI 3 application that serves an agent as an AG-UI endpoint.

No framework is imported: `AgentApp` is an ``async def __call__(scope, receive,
send)`` like Starlette's middleware, so it runs under any ASGI server (uvicorn,
hypercorn, …) and mounts under Starlette (``Mount("/agent", app=AgentApp(...))``)
or FastAPI (``api.mount("/agent", AgentApp(...))``).

The protocol, per request:

- ``POST`` with a JSON `RunAgentInput` body answers ``200 text/event-stream``
  and streams the run as SSE frames (`ambient_runs.sse`);
- a request rejected before the run starts answers an HTTP error with a JSON
  body ``{"error": …, "detail": […]}``: 405 (other methods, with
  ``allow: POST``), 415 (not JSON), 413 (body over *max_body*), 400 (malformed
  JSON), 422 (JSON that is not a RunAgentInput);
- once the stream has started, a failure is a ``RUN_ERROR`` event and the body
  closes cleanly;
- a client that disconnects cancels the run at once.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, TypeAlias

import attrs

from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._outcomes import code_of as _code_of
from ambient_runs._run import Run
from ambient_runs._stream import Agent, EventStream, _running_loop, stream
from ambient_runs.errors import InvalidInputError, InvalidJSONError

__all__ = ("AgentApp", "Headers", "Request")

_log = logging.getLogger("ambient_runs")

# The ASGI 3 types, as Starlette's ``types.py`` spells them.
_Scope: TypeAlias = MutableMapping[str, Any]
_Message: TypeAlias = MutableMapping[str, Any]
_Receive: TypeAlias = Callable[[], Awaitable[_Message]]
_Send: TypeAlias = Callable[[_Message], Awaitable[None]]

_STREAM_HEADERS = [
    (b"content-type", sse.CONTENT_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Headers(Mapping[str, str]):
    """
    A request's headers: a read-only, case-insensitive ``str -> str`` mapping.

    Names are looked up case-insensitively (``headers["traceparent"]``,
    ``headers["TraceParent"]``) and iterate lower-cased. A header sent several
    times reads as its values joined by ``", "`` (``"; "`` for ``cookie``), as
    RFC 9110 combines them; `get_all` returns them apart. Bytes are decoded as
    Latin-1, as ASGI servers hand them over.

    Args:
        raw: ``(name, value)`` pairs, bytes or str, as in an ASGI scope.

    .. versionadded:: 0.2.0
    """

    __slots__ = ("_values",)

    def __init__(self, raw: Iterable[tuple[bytes | str, bytes | str]] = ()) -> None:
        values: dict[str, list[str]] = {}
        for name, value in raw:
            key = (name.decode("latin-1") if isinstance(name, bytes) else name).lower()
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            values.setdefault(key, []).append(text)
        self._values = values

    def __getitem__(self, name: str) -> str:
        values = self._values[name.lower()]
        return ("; " if name.lower() == "cookie" else ", ").join(values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get_all(self, name: str) -> list[str]:
        """
        Return every value sent for *name*, in order (empty when absent).

        .. versionadded:: 0.2.0
        """
        return list(self._values.get(name.lower(), ()))

    def __repr__(self) -> str:
        return f"Headers({ {k: self[k] for k in self}!r})"


@attrs.frozen(kw_only=True)
class Request:
    """
    The HTTP request a run serves: what `Run.request` holds under a server.

    Built from the ASGI scope by `AgentApp` (and `serve`), before the agent
    starts, so an agent can read who is asking::

        async def agent(run: ar.Run) -> None:
            user = run.request.scope.get("user") if run.request else None
            parent = run.request.headers.get("traceparent") if run.request else None

    Attributes:
        method: The HTTP method, e.g. ``"POST"``.
        path: The request path, as the server decoded it (``scope["path"]``).
        query: The raw query string, decoded as Latin-1 (no ``?``).
        headers: The request headers (`Headers`: case-insensitive).
        client: The client's ``(host, port)``, or None when the server does not say.
        scope: The raw ASGI scope, with whatever middleware put there
            (``scope["user"]``, ``scope["state"]``, …). Read it, do not change it.

    .. versionadded:: 0.2.0
    """

    method: str
    path: str
    query: str = ""
    headers: Headers = attrs.field(factory=Headers)
    client: tuple[str, int] | None = None
    scope: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any]) -> Request:
        """
        Build the request of an ASGI ``http`` scope.

        .. versionadded:: 0.2.0
        """
        client = scope.get("client")
        return cls(
            method=str(scope.get("method", "")),
            path=str(scope.get("path", "")),
            query=bytes(scope.get("query_string", b"")).decode("latin-1"),
            headers=Headers(scope.get("headers") or ()),
            client=(str(client[0]), int(client[1])) if client else None,
            scope=scope,
        )


class _TooLarge(Exception):
    """The body went past *max_body*."""


class AgentApp:
    """
    Serve *agent* over HTTP as an AG-UI endpoint: a bare ASGI 3 application.

    Every ``POST`` runs the agent once under a new `Run` (through
    `ambient_runs.stream`) and streams its events as server-sent events. The
    path is not looked at: mount the app where the agent should live.

    Content types: ``application/json`` and ``application/*+json`` (UTF-8) are
    accepted. A request without a content type is refused (415) on purpose:
    requiring one keeps browsers from posting runs cross-site without a CORS
    preflight.

    Args:
        agent: An async callable taking the `Run`; what it returns is the run's
            result.
        max_body: The largest request body accepted, in bytes; reading stops
            there (413).
        keep_alive: Seconds of silence after which a keep-alive SSE comment is
            sent; None for none.
        run_options: Passed to `ambient_runs.stream` for every run (*buffer*,
            *transformers*, *verify*, *state*, *echo_input*). A *state* is
            deep-copied for each run, so runs never share one object.

    Raises:
        TypeError: *run_options* holds an option `Run` does not take, or *sink*.
        ValueError: *max_body* is negative or *keep_alive* not positive.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        agent: Agent,
        *,
        max_body: int = 1_000_000,
        keep_alive: float | None = None,
        **run_options: Any,
    ) -> None:
        if max_body < 0:
            msg = f"max_body must be >= 0, not {max_body}"
            raise ValueError(msg)
        sse.check_keep_alive(keep_alive)
        for owned in ("sink", "request"):
            if owned in run_options:
                msg = f"AgentApp owns the run's {owned} (the HTTP exchange); do not pass {owned}="
                raise TypeError(msg)
        options = {k: v for k, v in run_options.items() if k != "buffer"}
        inspect.signature(Run).bind(None, **options)  # a typo fails now, not per request
        self.agent = agent
        self.max_body = max_body
        self.keep_alive = keep_alive
        self.run_options = run_options

    def __repr__(self) -> str:
        name = getattr(self.agent, "__qualname__", None) or repr(self.agent)
        return f"<AgentApp {name}>"

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """
        Handle one ASGI connection: ``http``, ``lifespan`` or (refused) ``websocket``.

        Raises:
            ValueError: *scope* is of a type ASGI 3 does not define.

        .. versionadded:: 0.1.0
        """
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await _lifespan(receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1003})  # unsupported: HTTP 403
        else:
            msg = f"AgentApp does not handle ASGI scope type {kind!r}"
            raise ValueError(msg)

    # ------------------------------------------------------------------ http

    async def _http(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        _running_loop("ambient_runs.asgi.AgentApp")
        method = scope["method"]
        if method != "POST":
            detail = f"{method} is not allowed; POST a JSON RunAgentInput"
            await _reject(send, 405, "method not allowed", [detail], [(b"allow", b"POST")])
            return
        headers = dict(scope.get("headers") or ())
        problem = _content_type_problem(headers.get(b"content-type"))
        if problem is not None:
            await _reject(send, 415, "unsupported media type", [problem])
            return
        try:
            body = await self._read_body(headers.get(b"content-length"), receive)
        except _TooLarge:
            detail = f"the body exceeds the limit of {self.max_body} bytes"
            await _reject(send, 413, "request body too large", [detail])
            return
        if body is None:  # the client left while sending
            return
        try:
            input = ev.RunAgentInput.from_json(body)
        except InvalidInputError as error:
            if _is_malformed(error):
                await _reject(send, 400, "malformed JSON", error.problems)
            else:
                await _reject(send, 422, "invalid RunAgentInput", error.problems)
            return
        options = self.run_options
        if options.get("state") is not None:
            options = {**options, "state": copy.deepcopy(options["state"])}
        events = stream(self.agent, input, request=Request.from_scope(scope), **options)
        await _respond(events, receive, send, self.keep_alive)

    async def _read_body(self, length: bytes | None, receive: _Receive) -> bytes | None:
        """Read the whole body, or None if the client disconnected; stop past *max_body*."""
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _TooLarge
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)


def _content_type_problem(value: bytes | None) -> str | None:
    """Say what is wrong with a request's content type, or None for UTF-8 JSON."""
    if value is None:
        return "no content-type; send application/json"
    media, *params = value.decode("latin-1").split(";")
    media = media.strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        return f"content-type {media!r} is not JSON; send application/json"
    for param in params:
        key, _, charset = param.partition("=")
        charset = charset.strip().strip('"').lower()
        if key.strip().lower() == "charset" and charset not in {"utf-8", "utf8"}:
            return f"charset {charset!r} is not supported; JSON is UTF-8"
    return None


def _is_malformed(error: InvalidInputError) -> bool:
    """Whether `RunAgentInput.from_json` failed on the JSON itself, not on the schema."""
    return isinstance(error, InvalidJSONError)


async def _reject(
    send: _Send,
    status: int,
    error: str,
    detail: Iterable[str],
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    body = json.dumps(
        {"error": error, "detail": list(detail)}, ensure_ascii=False, separators=(",", ":")
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _respond(
    events: EventStream, receive: _Receive, send: _Send, keep_alive: float | None
) -> None:
    """Stream *events*; a disconnect, watched meanwhile, cancels the run at once."""
    await send({"type": "http.response.start", "status": 200, "headers": _STREAM_HEADERS})
    pump = asyncio.create_task(_pump(events, send, keep_alive))
    watch = asyncio.create_task(_until_disconnect(receive))
    try:
        await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        pump.cancel()  # on a disconnect: closes the frames, which cancels the agent
        await asyncio.wait((pump, watch))
    for task in (pump, watch):
        if not task.cancelled():
            task.result()  # a send or receive that failed: the server's to report


async def _pump(events: EventStream, send: _Send, keep_alive: float | None) -> None:
    body = sse.frames(events, keep_alive=keep_alive)
    try:
        async with contextlib.aclosing(body):
            async for frame in body:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
    except Exception as error:
        # The stream has started: the failure is reported in it (the agent's own
        # failures are RUN_ERROR already; this is the transport's, e.g. an event
        # that would not encode). Closing the frames cancelled the agent.
        _log.error("streaming run %r failed", events.run.run_id, exc_info=error)
        failed = ev.RunErrorEvent(message=str(error) or type(error).__name__, code=_code_of(error))
        await send({"type": "http.response.body", "body": sse.encode(failed), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_disconnect(receive: _Receive) -> None:
    """Return when the client disconnects (the body has been read: nothing else comes)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _lifespan(receive: _Receive, send: _Send) -> None:
    """Answer the lifespan protocol: there is nothing to start or stop."""
    message = await receive()
    if message["type"] == "lifespan.startup":
        try:
            _running_loop("ambient_runs.asgi.AgentApp")
        except RuntimeError as error:  # a trio server: refuse to start, saying why
            await send({"type": "lifespan.startup.failed", "message": str(error)})
            return
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
    if message["type"] == "lifespan.shutdown":
        await send({"type": "lifespan.shutdown.complete"})
