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
  JSON), 422 (JSON that is not a RunAgentInput, or a ``state`` that does not
  convert into the app's state type);
- once the stream has started, a failure is a ``RUN_ERROR`` event and the body
  closes cleanly;
- a client that disconnects cancels the run at once;
- ``GET <app path>/capabilities`` answers the protocol's ``AgentCapabilities``
  as JSON: what the app knows of itself, merged with what was declared;
- with ``viewer=True``, a ``GET`` that accepts ``text/html`` (a browser) answers
  the live run viewer (`ambient_runs.viewer`), set to talk to this endpoint.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import inspect
import json
import logging
import threading
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import Any, Literal, TypeAlias

import attrs

from ambient_runs import events as ev
from ambient_runs import proto, sse
from ambient_runs._cors import Cors
from ambient_runs._detached import Detached, route
from ambient_runs._outcomes import frontend_calls_of, interrupts_of
from ambient_runs._reads import Reads
from ambient_runs._run import Run
from ambient_runs._stream import (
    Agent,
    EventStream,
    _check_agent,
    _running_loop,
    call_agent,
    checked_stream,
)
from ambient_runs._wire import problem_count
from ambient_runs.continuations import ContinuationStore, default_store
from ambient_runs.conversations import ThreadStore, merge_history
from ambient_runs.errors import AgentError, InvalidInputError, InvalidJSONError
from ambient_runs.stores import RunStore
from ambient_runs.viewer import _send_page, _wants_html, viewer_page

__all__ = ("AgentApp", "Authorize", "Headers", "Request")

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

Action: TypeAlias = Literal["run", "join", "cancel"]
"""What a request asks of an `AgentApp`: start a run, follow one, or cancel one."""

Authorize: TypeAlias = Callable[["Request", Action, str, "str | None"], "bool | Awaitable[bool]"]
"""
`AgentApp`'s *authorize* hook: ``authorize(request, action, thread_id, run_id)``.

Called before anything of a store is read, anything sent or saved; sync or
async; returns True to allow, False to refuse (403). *run_id* is None where
the action has none. See `AgentApp`.

.. versionadded:: 0.1.0
"""

#: The binary transport's (`ambient_runs.proto`): chosen by the request's ``Accept``.
_BINARY_HEADERS = [
    (b"content-type", proto.CONTENT_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
    (b"vary", b"accept"),
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

    .. versionadded:: 0.1.0
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

        .. versionadded:: 0.1.0
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

    .. versionadded:: 0.1.0
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

        .. versionadded:: 0.1.0
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


class _TooSlow(Exception):
    """The body did not arrive within *body_timeout*."""


_INLINE_PARSE = 8192
"""Bodies up to this many bytes are parsed on the event loop (well under 50 ms even when
every byte is a bad item); larger ones in a worker thread, so the loop keeps serving."""

_PROBLEM_CHARS = 300
"""The longest one reported problem gets (a problem quotes what it found)."""

_PARSERS: concurrent.futures.ThreadPoolExecutor | None = None
_PARSERS_LOCK = threading.Lock()


def _parsers() -> concurrent.futures.ThreadPoolExecutor:
    """The process's two parsing threads: hostile bodies can keep at most two busy."""
    global _PARSERS
    with _PARSERS_LOCK:
        if _PARSERS is None:
            _PARSERS = concurrent.futures.ThreadPoolExecutor(
                max_workers=2, thread_name_prefix="ambient_runs-parse"
            )
        return _PARSERS


class AgentApp:
    """
    Serve *agent* over HTTP as an AG-UI endpoint: a bare ASGI 3 application.

    Every ``POST`` runs the agent once under a new `Run` (through
    `ambient_runs.stream`) and streams its events as server-sent events. The
    path is not looked at: mount the app where the agent should live. The run's
    `Run.request` holds the request (headers, client, path, the ASGI scope).

    Content types: ``application/json`` and ``application/*+json`` (UTF-8) are
    accepted. A request without a content type is refused (415) on purpose:
    requiring one keeps browsers from posting runs cross-site without a CORS
    preflight.

    Limits, so that no request can stall the server: the body is read up to
    *max_body* bytes (413) and for at most *body_timeout* seconds (408); a
    rejection lists at most *max_problems* problems (the rest are counted in
    ``"omitted"``); bodies over 8 KiB are parsed in a worker thread (two per
    process), so the event loop keeps answering other requests meanwhile.

    CORS: with *allow_origins*, a browser preflight (``OPTIONS`` with
    ``Origin`` and ``Access-Control-Request-Method: POST``) from a listed origin
    is answered 204, and every response to that origin carries
    ``Access-Control-Allow-Origin``. Without it, ``OPTIONS`` is 405.

    Args:
        agent: A callable taking the `Run`, async or plain (a plain one runs in a
            worker thread); what it returns is the run's result.
        max_body: The largest request body accepted, in bytes; reading stops
            there (413).
        body_timeout: Seconds the whole body may take to arrive; then 408 and the
            connection is closed. None for no limit.
        max_problems: The most problems a 400 or 422 lists.
        keep_alive: Seconds of silence after which a keep-alive SSE comment is
            sent; None for none.
        allow_origins: Origins (``"https://app.example"``, no path) allowed to
            call from a browser, or ``"*"`` for any.
        allow_credentials: Let browsers send cookies and ``Authorization``
            cross-origin (``Access-Control-Allow-Credentials: true``) from the
            listed origins, each echoed; not with ``"*"`` (a `ValueError`:
            any site could read its visitors' runs), and never to the opaque
            origin ``null``.
        store: A `ambient_runs.stores.RunStore` (`MemoryStore`, `RedisStore`) to
            run *detached*: a run outlives its request, every event is logged
            before it is sent, every frame carries an ``id:``, and
            ``GET …/threads/{threadId}/runs/{runId}`` resumes (``Last-Event-ID``
            or ``?after=``) or joins it, ``POST …/cancel`` (with a JSON content
            type, as a run: else 415) cancels it, from any
            worker sharing the store (see ``ambient_runs._detached``). None (the
            default): a disconnect cancels the run, as before.
        lease: With *store*, the seconds this worker's lease on a run lasts
            (renewed every third of it); when a worker dies, its runs end with
            ``RUN_ERROR`` code ``worker_lost`` this long after. A store that
            does not answer is retried this long too; then a request not yet
            streaming gets a JSON 503 with ``Retry-After``, and a stream ends
            with ``RUN_ERROR`` code ``store_unavailable`` (``events_lost`` when
            the store lost the run's log).
        threads: A `ambient_runs.conversations.ThreadStore` (`MemoryThreadStore`,
            or your own) holding each thread's conversation between runs: the
            thread is loaded before each run and what the client sent merged
            into it (`ambient_runs.merge_history`: stored messages first, the
            client's copy of one replacing it in place, new ones after); the run
            starts from that, with ``MESSAGES_SNAPSHOT`` when the client did
            not already hold all of it (just before the agent's first event,
            never for a run that fails or is cancelled before it); when the
            agent is done, before the terminal event, the run's whole history
            (`Run.messages`; every run records its messages,
            ``record_messages=True``) is saved, unless it failed or was
            cancelled before its first event (an agent refusing its caller
            keeps nothing of the caller's). Who may use which thread is
            *authorize*'s to decide.
            A load that fails is a 503; a save that fails ends a run that would
            have succeeded with ``RUN_ERROR`` code ``thread_store_error`` (see
            ``ambient_runs.conversations``).
        continuations: Where framework adapters keep what they need to
            continue an interrupt (`ambient_runs.continuations`): by default
            beside *store* when that is a ``RedisStore`` (its connection, keys
            under its prefix; `RedisContinuations.of_store`), so any worker
            continues any interrupt, else the process's `MemoryContinuations`.
        capabilities: Declarations added to what ``GET …/capabilities``
            answers, in the protocol's ``AgentCapabilities`` shape and wire
            spelling (``{"identity": {"name": "researcher"}, "multiAgent":
            {"subagents": [{"name": "search"}]}}``); merged field by field over
            what the app declares itself (see `AgentApp.capabilities`), a field
            set to None withdraws it.
        authorize: ``authorize(request, action, thread_id, run_id)``, sync or
            async, asked before every run, join and cancel whether to serve it;
            True allows, False answers ``403`` (``{"error": "forbidden"}``)
            before anything of a store or thread is read, sent or saved.
            *request* is the `Request` the agent would see (`Run.request`),
            *action* ``"run"`` (a ``POST``: the body is read and parsed first,
            to learn the ids), ``"join"`` (``GET …/threads/{threadId}/runs/{runId}``,
            with or without a cursor) or ``"cancel"`` (``POST …/cancel``);
            *run_id* is the run's id for all three (None is reserved for
            actions that have none). A hook that raises, or answers anything
            but True or False, is logged and answered ``500``
            (``{"error": "authorization failed"}``), which says nothing of
            why. ``GET …/capabilities`` is not asked: it describes the app,
            nobody's runs. With *threads*, this is what decides who may use
            a thread: bind the thread id to the caller (see the docs'
            per-user pattern).
        viewer: Serve the live run viewer (`ambient_runs.viewer`): a ``GET``
            of the app's path whose ``Accept`` admits ``text/html`` answers the
            page, which talks to this same path. Off by default: the page shows
            every run's events to whoever opens it.
        run_options: Passed to `ambient_runs.stream` for every run (*buffer*,
            *transformers*, *verify*, *state*, *state_type*, *echo_input*,
            *record_messages*). A
            *state* is deep-copied for each run, so runs never share one object.
            A client's state that does not convert into the state type is
            refused with 422 ``"invalid state"``, each bad field named.

    Raises:
        TypeError: *agent* cannot be called with the `Run`, or *run_options*
            holds an option `Run` does not take, or *sink* or *request*, or
            *authorize* is not a callable taking four arguments, or
            *continuations* is not a `ContinuationStore`.
        ValueError: A limit is negative, *keep_alive* or *body_timeout* not
            positive, an origin is not ``scheme://host[:port]``, ``"*"`` is
            given with *allow_credentials* (list the origins), or
            *capabilities* holds a group or field ``AgentCapabilities`` does not
            have.

    .. versionadded:: 0.1.0
    """

    allow_origins: Reads[frozenset[str]] = Reads(
        "_cors.origins", "The origins browsers may call from (*allow_origins*); empty: no CORS."
    )
    allow_credentials: Reads[bool] = Reads(
        "_cors.credentials", "Whether cross-origin calls may carry credentials."
    )

    def __init__(
        self,
        agent: Agent,
        *,
        max_body: int = 1_000_000,
        body_timeout: float | None = 30.0,
        max_problems: int = 20,
        keep_alive: float | None = None,
        allow_origins: Iterable[str] = (),
        allow_credentials: bool = False,
        store: RunStore | None = None,
        lease: float = 10.0,
        capabilities: Mapping[str, Any] | None = None,
        threads: ThreadStore | None = None,
        authorize: Authorize | None = None,
        continuations: ContinuationStore | None = None,
        viewer: bool = False,
        **run_options: Any,
    ) -> None:
        _check_agent(agent)
        if authorize is not None:
            _check_authorize(authorize)
        if threads is not None:
            if not isinstance(threads, ThreadStore):
                msg = (
                    f"threads must be a ThreadStore (async load(thread_id) and "
                    f"save(thread_id, messages)), not {threads!r}"
                )
                raise TypeError(msg)
            if "history" in run_options or run_options.get("record_messages") is False:
                msg = (
                    "with threads=, AgentApp owns the run's history (the thread's "
                    "conversation, recorded): do not pass history= or record_messages=False"
                )
                raise TypeError(msg)
            run_options = {**run_options, "record_messages": True}
        if max_body < 0:
            msg = f"max_body must be >= 0, not {max_body}"
            raise ValueError(msg)
        sse.check_keep_alive(keep_alive)
        if max_problems < 0:
            msg = f"max_problems must be >= 0, not {max_problems}"
            raise ValueError(msg)
        if body_timeout is not None and not body_timeout > 0:
            msg = f"body_timeout must be positive seconds or None, not {body_timeout!r}"
            raise ValueError(msg)
        for owned in ("sink", "request"):
            if owned in run_options:
                msg = f"AgentApp owns the run's {owned} (the HTTP exchange); do not pass {owned}="
                raise TypeError(msg)
        if continuations is None:
            continuations = _continuations_of(store)
        elif not isinstance(continuations, ContinuationStore):
            msg = f"continuations must be a ContinuationStore, not {continuations!r}"
            raise TypeError(msg)
        if continuations is not None:
            run_options = {**run_options, "continuations": continuations}
        options = {k: v for k, v in run_options.items() if k != "buffer"}
        inspect.signature(Run).bind(None, **options)  # a typo fails now, not per request
        self.agent = agent
        #: Where each thread's conversation is kept between runs (None: nowhere).
        self.threads = threads
        self._agent = agent if threads is None else _saving(agent, threads)
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.max_problems = max_problems
        self.keep_alive = keep_alive
        self._cors = Cors.of(allow_origins, allow_credentials)
        self.run_options = run_options
        #: Where framework adapters keep their continuations (*continuations*).
        self.continuations: ContinuationStore = (
            continuations if continuations is not None else default_store()
        )
        self.store = store
        #: The hook asked before every run, join and cancel (None: everything is allowed).
        self.authorize = authorize
        self._detached = (
            None if store is None else Detached(store, lease=lease, keep_alive=keep_alive)
        )
        self.capabilities = _merge_capabilities(_known_capabilities(store), capabilities or {})
        """
        What ``GET <app path>/capabilities`` answers (``AgentCapabilities``, wire form).

        The app declares of itself: ``transport`` (``streaming``; no
        ``websocket``; ``httpBinary``, the `ambient_runs.proto` frames a request
        whose ``Accept`` names them gets, exactly when it has no *store*;
        ``resumable`` exactly when it has one), ``state`` (``snapshots`` and ``deltas``),
        ``tools`` (``supported``, ``clientProvided``: the client's tools reach
        `Run.tools`), ``multiAgent.supported`` (attributed subagents),
        ``reasoning`` (``supported``, ``streaming``) and ``humanInTheLoop``
        (``supported``, ``interrupts``); *capabilities* is merged over that.
        An omitted field means undeclared, as in the protocol.

        .. versionadded:: 0.1.0
        """
        self._viewer_page = viewer_page() if viewer else None
        self._capabilities_body = json.dumps(
            self.capabilities, ensure_ascii=False, separators=(",", ":")
        ).encode()

    def __repr__(self) -> str:
        name = getattr(self.agent, "__qualname__", None) or repr(self.agent)
        return f"<AgentApp {name}>"

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """
        Handle one ASGI connection: ``http``, ``lifespan`` or (refused) ``websocket``.

        Raises:
            ValueError: *scope* is of a type ASGI 3 does not define.
            RuntimeError: No asyncio event loop is running (a trio server).

        .. versionadded:: 0.1.0
        """
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            detached = self._detached
            await _lifespan(receive, send, None if detached is None else detached.aclose)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1003})  # unsupported: HTTP 403
        else:
            msg = f"AgentApp does not handle ASGI scope type {kind!r}"
            raise ValueError(msg)

    # ------------------------------------------------------------------ http

    async def _http(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        _running_loop("ambient_runs.asgi.AgentApp")
        request = Request.from_scope(scope)
        headers = request.headers
        cors = self._cors.headers(headers.get("origin"))
        method = request.method
        if method == "OPTIONS" and "access-control-request-method" in headers:
            await self._preflight(send, headers, cors)
            return
        # A run's routes first: a run may be named "capabilities" (…/runs/capabilities).
        where = None if self._detached is None else route(scope)
        if method == "GET" and where is None and _is_capabilities(scope):
            await _send_json(send, self._capabilities_body, cors)
            return
        if where is not None:
            assert self._detached is not None
            thread_id, run_id, is_cancel = where
            if is_cancel and method == "POST":
                # Not a simple request (as the run POST): a cross-site form or a no-cors
                # fetch cannot cancel someone's run without passing a CORS preflight.
                problem = _content_type_problem(headers.get("content-type"))
                if problem is not None:
                    await self._reject(send, 415, "unsupported media type", [problem], cors=cors)
                    return
            # Another method is a 405 (which reads nothing): nothing to authorize.
            action: Action | None = None
            if is_cancel and method == "POST":
                action = "cancel"
            elif not is_cancel and method == "GET":
                action = "join"
            if action is not None and not await self._allowed(
                request, action, thread_id, run_id, send, cors
            ):
                return
            await self._detached.handle(
                method, where, headers, request.query, receive, send, cors, self._reject
            )
            return
        if (
            self._viewer_page is not None
            and method in ("GET", "HEAD")
            and _wants_html(headers.get("accept"))
        ):
            await _send_page(self._viewer_page, scope, send)
            return
        if method != "POST":
            detail = f"{method} is not allowed; POST a JSON RunAgentInput"
            allow = b"POST, OPTIONS" if self._cors.origins else b"POST"
            await self._reject(
                send, 405, "method not allowed", [detail], [(b"allow", allow)], cors
            )
            return
        problem = _content_type_problem(headers.get("content-type"))
        if problem is not None:
            await self._reject(send, 415, "unsupported media type", [problem], cors=cors)
            return
        try:
            body = await self._read_body(headers.get("content-length"), receive)
        except _TooLarge:
            detail = f"the body exceeds the limit of {self.max_body} bytes"
            await self._reject(send, 413, "request body too large", [detail], _CLOSE, cors)
            return
        except _TooSlow:
            detail = f"the body did not arrive within {self.body_timeout:g} s"
            await self._reject(send, 408, "request timeout", [detail], _CLOSE, cors)
            return
        if body is None:  # the client left while sending
            return
        try:
            if len(body) <= _INLINE_PARSE:
                input = ev.RunAgentInput.from_json(body)
            else:
                loop = asyncio.get_running_loop()
                input = await loop.run_in_executor(_parsers(), ev.RunAgentInput.from_json, body)
        except InvalidInputError as error:
            if _is_malformed(error):
                await self._reject(send, 400, "malformed JSON", error.problems, cors=cors)
            else:
                await self._reject(send, 422, "invalid RunAgentInput", error.problems, cors=cors)
            return
        if self._detached is not None or self.threads is not None:
            # Kept runs and threads are found by these ids (a route, a store key): an
            # empty one could never be joined, and would pool every such thread in one.
            empty = [
                f"$.{name}: empty; send a non-empty id"
                for name, value in (("threadId", input.thread_id), ("runId", input.run_id))
                if not value
            ]
            if empty:
                await self._reject(send, 422, "invalid RunAgentInput", empty, cors=cors)
                return
        if not await self._allowed(request, "run", input.thread_id, input.run_id, send, cors):
            return
        options = self.run_options
        if options.get("state") is not None:
            options = {**options, "state": copy.deepcopy(options["state"])}
        if self.threads is not None:
            try:
                stored = await self.threads.load(input.thread_id)
            except Exception:
                _log.error(
                    "thread %r: its store failed to load it", input.thread_id, exc_info=True
                )
                detail = "the thread's conversation could not be loaded; try again"
                await self._reject(send, 503, "thread store unavailable", [detail], cors=cors)
                return
            options = {**options, "history": merge_history(stored, input.messages)}
        try:
            events = checked_stream(self._agent, input, {**options, "request": request})
        except InvalidInputError as error:  # the client's state is not the app's state type
            await self._reject(send, 422, "invalid state", error.problems, cors=cors)
            return
        if self._detached is not None:
            await self._detached.start(events, receive, send, cors, self._reject)
            return
        binary = proto.accepts(headers.get("accept"))
        await _respond(events, receive, send, self.keep_alive, cors, binary=binary)

    async def _allowed(
        self,
        request: Request,
        action: Action,
        thread_id: str,
        run_id: str | None,
        send: _Send,
        cors: list[tuple[bytes, bytes]],
    ) -> bool:
        """Ask *authorize* about *action*; on a refusal (403) or a failure (500), answer it."""
        hook = self.authorize
        if hook is None:
            return True
        verdict = await _ask(hook, request, action, thread_id, run_id)
        if verdict is None:
            detail = "the request could not be authorized; the server's log has the details"
            await self._reject(send, 500, "authorization failed", [detail], cors=cors)
            return False
        if not verdict:
            detail = f"this request may not {action} here"
            await self._reject(send, 403, "forbidden", [detail], cors=cors)
        return verdict

    async def _read_body(self, length: str | None, receive: _Receive) -> bytes | None:
        """Read the whole body, or None if the client disconnected; stop past the limits."""
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            async with asyncio.timeout(self.body_timeout):
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
        except TimeoutError:
            raise _TooSlow from None
        return b"".join(chunks)

    # ------------------------------------------------------------------ cors

    async def _preflight(
        self, send: _Send, headers: Headers, cors: list[tuple[bytes, bytes]]
    ) -> None:
        """Answer a CORS preflight: 204 for an allowed origin asking to POST, else 403/405."""
        if not self._cors.origins:
            detail = "OPTIONS is not allowed: this endpoint has no allow_origins (CORS)"
            await self._reject(send, 405, "method not allowed", [detail], [(b"allow", b"POST")])
            return
        asked = headers["access-control-request-method"].strip().upper()
        if not cors or asked != "POST":
            why = (
                f"origin {headers.get('origin')!r} is not allowed"
                if not cors
                else f"method {asked!r} is not allowed; POST"
            )
            await self._reject(send, 403, "CORS preflight refused", [why], cors=cors)
            return
        answer = [
            *cors,
            (b"access-control-allow-methods", b"POST"),
            (b"access-control-max-age", b"600"),
        ]
        asked_headers = headers.get("access-control-request-headers")
        if asked_headers:
            answer.append((b"access-control-allow-headers", asked_headers.encode("latin-1")))
        await send({"type": "http.response.start", "status": 204, "headers": answer})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # ------------------------------------------------------------------ errors

    async def _reject(
        self,
        send: _Send,
        status: int,
        error: str,
        problems: Sequence[str],
        headers: Iterable[tuple[bytes, bytes]] = (),
        cors: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        """Answer *status* with a small JSON body: at most *max_problems* problems, each short."""
        listed = problems[: self.max_problems]
        shown = [p if len(p) <= _PROBLEM_CHARS else p[: _PROBLEM_CHARS - 1] + "…" for p in listed]
        payload: dict[str, Any] = {"error": error, "detail": shown}
        omitted = problem_count(problems) - problem_count(listed)
        if omitted:
            payload["omitted"] = omitted
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "backslashreplace"
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *headers,
                    *cors,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


_CLOSE = [(b"connection", b"close")]

# The groups of the protocol's AgentCapabilities and their fields, in wire spelling
# (ag-ui-protocol 1.0); None: free-form (``custom``).
_CAPABILITY_FIELDS: dict[str, frozenset[str] | None] = {
    "identity": frozenset(
        {"name", "type", "description", "version", "provider", "documentationUrl", "metadata"}
    ),
    "transport": frozenset(
        {"streaming", "websocket", "httpBinary", "pushNotifications", "resumable"}
    ),
    "tools": frozenset({"supported", "items", "parallelCalls", "clientProvided"}),
    "output": frozenset({"structuredOutput", "supportedMimeTypes"}),
    "state": frozenset({"snapshots", "deltas", "memory", "persistentState"}),
    "multiAgent": frozenset({"supported", "delegation", "handoffs", "subagents"}),
    "reasoning": frozenset({"supported", "streaming", "encrypted"}),
    "multimodal": frozenset({"input", "output"}),
    "execution": frozenset({"codeExecution", "sandboxed", "maxIterations", "maxExecutionTime"}),
    "humanInTheLoop": frozenset(
        {"supported", "approvals", "interventions", "feedback", "interrupts", "approveWithEdits"}
    ),
    "custom": None,
}


async def _ask(
    hook: Authorize, request: Request, action: Action, thread_id: str, run_id: str | None
) -> bool | None:
    """*hook*'s verdict on *action*; None when it raised or answered no bool (logged)."""
    try:
        verdict = hook(request, action, thread_id, run_id)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not isinstance(verdict, bool):
            msg = f"authorize returned {verdict!r}; return True to allow, False to refuse"
            raise TypeError(msg)  # logged with the hook's own failures, below
    except Exception:
        _log.error(
            "authorize failed on %s of thread %r, run %r; answered 500",
            action,
            thread_id,
            run_id,
            exc_info=True,
        )
        return None
    return verdict


async def _send_json(send: _Send, body: bytes, cors: list[tuple[bytes, bytes]]) -> None:
    """Answer 200 with *body*, a JSON document (the capabilities)."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *cors,
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _saving(agent: Agent, threads: ThreadStore) -> Agent:
    """
    *agent*, then the run's history saved to *threads*, once the run proved itself.

    Saved when the agent returned, paused (an interrupt, a call to the client's
    tools), or failed or was cancelled after its first event. An agent that
    fails or is cancelled before emitting anything (one that refuses its
    caller, say) saves nothing: the caller's messages never reach the thread,
    just as the thread's history never reached the caller (`Run`'s *history*).
    """

    async def agent_then_save(run: Run) -> Any:
        try:
            result = await call_agent(agent, run)
        except BaseException as error:
            paused = interrupts_of(error) is not None or frontend_calls_of(error) is not None
            if not (paused or run._proved()):
                raise
            try:
                await threads.save(run.thread_id, run.messages)
            except Exception:
                _log.error("thread %r: its store failed to save it", run.thread_id, exc_info=True)
            raise
        try:
            await threads.save(run.thread_id, run.messages)
        except Exception as error:
            _log.error("thread %r: its store failed to save it", run.thread_id, exc_info=True)
            msg = "the conversation could not be saved; the server's log has the details"
            raise AgentError(msg, code="thread_store_error") from error
        return result

    agent_then_save.__qualname__ = getattr(agent, "__qualname__", repr(agent))
    return agent_then_save


def _check_authorize(authorize: object) -> None:
    """Refuse, with a `TypeError` naming the fix, what cannot serve as *authorize*."""
    fix = "write `def authorize(request, action, thread_id, run_id) -> bool: ...`"
    if not callable(authorize):
        msg = f"authorize must be a callable, not {type(authorize).__name__} {authorize!r}: {fix}"
        raise TypeError(msg)
    try:
        signature = inspect.signature(authorize)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, "run", "", None)
    except TypeError:
        name = getattr(authorize, "__qualname__", None) or repr(authorize)
        msg = (
            f"authorize {name}{signature} cannot be called with (request, action, "
            f"thread_id, run_id): {fix}"
        )
        raise TypeError(msg) from None


def _continuations_of(store: RunStore | None) -> ContinuationStore | None:
    """The continuation store beside *store*: a RedisStore's Redis; None for the default."""
    if type(store).__module__ != "ambient_runs.stores.redis":
        return None  # not a RedisStore: never import redis for it
    from ambient_runs.stores.redis import RedisStore
    from ambient_runs.stores.redis_continuations import RedisContinuations

    return RedisContinuations.of_store(store) if isinstance(store, RedisStore) else None


def _known_capabilities(store: RunStore | None) -> dict[str, dict[str, Any]]:
    """What every AgentApp can say of itself (see `AgentApp.capabilities`)."""
    return {
        "transport": {
            "streaming": True,
            "websocket": False,
            "httpBinary": store is None,  # detached runs are served as SSE only
            "resumable": store is not None,
        },
        "tools": {"supported": True, "clientProvided": True},
        "state": {"snapshots": True, "deltas": True},
        "multiAgent": {"supported": True},
        "reasoning": {"supported": True, "streaming": True},
        "humanInTheLoop": {"supported": True, "interrupts": True},
    }


def _merge_capabilities(
    known: dict[str, dict[str, Any]], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """*declared* over *known*, field by field (None withdraws one); checks the names."""
    merged: dict[str, Any] = {group: dict(fields) for group, fields in known.items()}
    for group, fields in declared.items():
        if group not in _CAPABILITY_FIELDS:
            msg = (
                f"capabilities has no group {group!r}; AgentCapabilities groups are "
                f"{', '.join(sorted(_CAPABILITY_FIELDS))} (wire spelling, camelCase)"
            )
            raise ValueError(msg)
        if not isinstance(fields, Mapping):
            msg = f"capabilities[{group!r}] must be a mapping of fields, not {fields!r}"
            raise ValueError(msg)
        allowed = _CAPABILITY_FIELDS[group]
        target = merged.setdefault(group, {})
        for name, value in fields.items():
            if allowed is not None and name not in allowed:
                msg = (
                    f"capabilities[{group!r}] has no field {name!r}; it has "
                    f"{', '.join(sorted(allowed))} (wire spelling, camelCase)"
                )
                raise ValueError(msg)
            if value is None:
                target.pop(name, None)
            else:
                target[name] = copy.deepcopy(value)
        if not target:
            del merged[group]
    try:
        json.dumps(merged)
    except (TypeError, ValueError) as error:
        msg = f"capabilities must be JSON (dicts, lists, strings, numbers, booleans): {error}"
        raise ValueError(msg) from None
    return merged


def _is_capabilities(scope: _Scope) -> bool:
    """Whether the request's path ends with ``/capabilities``."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
    path = path.partition("?")[0].rstrip("/")
    return path == "capabilities" or path.endswith("/capabilities")


def _content_type_problem(value: str | None) -> str | None:
    """Say what is wrong with a request's content type, or None for UTF-8 JSON."""
    if value is None:
        return "no content-type; send application/json"
    media, *params = value.split(";")
    media = media.strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        return f"content-type {media[:100]!r} is not JSON; send application/json"
    for param in params:
        key, _, charset = param.partition("=")
        charset = charset.strip().strip('"').lower()
        if key.strip().lower() == "charset" and charset not in {"utf-8", "utf8"}:
            return f"charset {charset[:100]!r} is not supported; JSON is UTF-8"
    return None


def _is_malformed(error: InvalidInputError) -> bool:
    """Whether `RunAgentInput.from_json` failed on the JSON itself, not on the schema."""
    return isinstance(error, InvalidJSONError)


async def _respond(
    events: EventStream,
    receive: _Receive,
    send: _Send,
    keep_alive: float | None,
    cors: Iterable[tuple[bytes, bytes]] = (),
    *,
    binary: bool = False,
) -> None:
    """
    Stream *events*; a disconnect, watched meanwhile, cancels the run at once.

    *binary*: as `ambient_runs.proto` frames (the client's ``Accept`` asked for
    them), which carry no keep-alive comments; else SSE.
    """
    headers = [*(_BINARY_HEADERS if binary else _STREAM_HEADERS), *cors]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    body = proto.frames(events) if binary else sse._batches(events, keep_alive)
    pump = asyncio.create_task(_pump(body, send))
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


async def _pump(body: AsyncGenerator[bytes, None], send: _Send) -> None:
    # Every frame ready at once goes out in one message (sse._batches, proto.frames: a
    # burst costs one send, not one per event). A stream that fails ends with a RUN_ERROR
    # frame from the encoder itself (the agent's own failures are RUN_ERROR already);
    # closing the frames cancels the agent.
    async with contextlib.aclosing(body):
        async for frames in body:
            await send({"type": "http.response.body", "body": frames, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_disconnect(receive: _Receive) -> None:
    """Return when the client disconnects (the body has been read: nothing else comes)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _lifespan(
    receive: _Receive, send: _Send, shutdown: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Answer the lifespan protocol; on shutdown, await *shutdown* (detached runs end)."""
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
        if shutdown is not None:
            await shutdown()
        await send({"type": "lifespan.shutdown.complete"})
