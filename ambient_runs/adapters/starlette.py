"""
Serve a run from your own Starlette or FastAPI route: ``return serve(agent, request)``.

Install with ``pip install 'ambient-runs[starlette]'`` (Starlette; FastAPI
brings it too).

Mounting `ambient_runs.asgi.AgentApp` is the simplest way to serve an agent.
When the endpoint must be a route of your own (behind your dependencies, your
auth, a path parameter), `serve` gives that route the same behaviour, because
the response it returns *is* an `AgentApp` answering the request::

    from ambient_runs.adapters.starlette import serve
    from fastapi import FastAPI, Request
    from fastapi.responses import Response

    api = FastAPI()

    @api.post("/agent")
    async def run_agent(request: Request) -> Response:
        return serve(agent, request, keep_alive=15)

What the client gets, as from a mounted `AgentApp`:

- a bad request is answered before the run starts, with the same small JSON
  body ``{"error": …, "detail": […]}``: 415 (not JSON), 413 (over *max_body*),
  408 (the body took longer than *body_timeout*), 400 (malformed JSON), 422
  (not a ``RunAgentInput``; at most *max_problems* problems listed);
- otherwise ``200 text/event-stream`` with ``cache-control: no-cache`` and
  ``x-accel-buffering: no``, the run's events as SSE frames, and exactly one
  terminal event: an agent that raises ends the stream with ``RUN_ERROR``, as
  does an event that cannot be encoded;
- a client that disconnects cancels the run at once;
- the agent reads the request as `Run.request` (headers, client, path, and the
  route's ASGI scope, with what middleware put there: ``scope["user"]``, …).

The body is read by the response, under the limits. A route may read it first
(``await request.body()``, to log it, say): the response then uses the body
Starlette cached. Iterating ``request.stream()`` yourself consumes it for good,
so do not.

The route decides the methods: a route registered for ``POST`` only never
reaches `serve` with another method (Starlette answers 405 itself). With
*allow_origins*, register the route for ``OPTIONS`` too, so that `serve` can
answer browsers' preflights.

Detached runs (``store=``) need routes of their own for resuming and
cancelling: mount ``AgentApp(agent, store=...)`` for them instead.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from ambient_runs.errors import needs_extra

with needs_extra(
    "ambient_runs.adapters.starlette", extra="starlette", needs="Starlette", name="starlette"
):
    from starlette.background import BackgroundTask
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.types import Message, Receive, Scope, Send

from ambient_runs import sse
from ambient_runs._stream import Agent
from ambient_runs.asgi import AgentApp

__all__ = ("AgentResponse", "serve")


def serve(agent: Agent, request: Request, **options: Any) -> AgentResponse:
    """
    Return the response that serves *agent* for *request*: an AG-UI event stream.

    Args:
        agent: A callable taking the `Run`, async or plain, as `AgentApp` takes.
        request: The Starlette (or FastAPI) request the route received.
        options: `AgentApp`'s keyword options: *max_body*, *body_timeout*,
            *max_problems*, *keep_alive*, *allow_origins*, *allow_credentials*,
            *threads*, *authorize* (asked with the action ``"run"``, after the
            body is parsed, before anything is loaded or sent), and the run's
            (*transformers*, *verify*, *state*, *buffer*, …).

    Returns:
        A `starlette.responses.Response`; return it from the route.

    Raises:
        TypeError: *agent* cannot be called with the `Run`, an option is not
            one `AgentApp` takes, or *store* or *lease* is given (detached
            runs need `AgentApp` mounted).
        ValueError: An option has a value `AgentApp` refuses.

    .. versionadded:: 0.1.0
    """
    for detached in ("store", "lease"):
        if detached in options:
            msg = (
                f"serve() does not run detached ({detached}=): resuming and cancelling need "
                "routes of their own; mount AgentApp(agent, store=...) instead"
            )
            raise TypeError(msg)
    return AgentResponse(AgentApp(agent, **options), request)


_OWN_HEADERS = (
    (b"content-type", sse.CONTENT_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)
"""The stream's headers, which `AgentApp` sends itself."""


class AgentResponse(Response):
    """
    The response `serve` returns: an `AgentApp` answering one request.

    Its status and headers are decided when it is sent (200 and an event
    stream, or a 4xx with a JSON body); *status_code* and *headers* here
    describe the stream. Headers the route adds (``response.headers["x-request-id"]
    = …``, ``response.set_cookie(...)``) are sent with whichever answer it is. A
    *background* task (FastAPI sets its ``BackgroundTasks`` here) runs after the
    response has been sent.

    .. versionadded:: 0.1.0
    """

    media_type = sse.CONTENT_TYPE

    def __init__(
        self, app: AgentApp, request: Request, *, background: BackgroundTask | None = None
    ) -> None:
        self.app = app
        self.request = request
        self.status_code = 200
        self.background = background
        self.body = b""
        self.raw_headers = list(_OWN_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the request as `AgentApp` would, reading the body through the request."""
        added = [header for header in self.raw_headers if header not in _OWN_HEADERS]

        async def send_with_added(message: Message) -> None:
            if added and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *added]}
            await send(message)

        body = self.request.stream()
        try:
            await self.app(scope, _BodyFirst(body, receive), send_with_added)
        finally:
            await body.aclose()
        if self.background is not None:
            await self.background()


class _BodyFirst:
    """An ASGI ``receive`` that gives the body as the request reads it, then the live channel."""

    __slots__ = ("_body", "_done", "_receive")

    def __init__(self, body: AsyncGenerator[bytes, None], receive: Receive) -> None:
        self._body = body
        self._receive = receive
        self._done = False

    async def __call__(self) -> Message:
        if self._done:
            return await self._receive()
        try:
            chunk = await anext(self._body)
        except StopAsyncIteration:
            self._done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        except ClientDisconnect:
            self._done = True
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunk, "more_body": True}
