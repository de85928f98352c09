"""Tests for `ambient_runs.asgi`: the bare ASGI app, called in-process."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.routing import Mount
from support.sse import events_of

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._outcomes import GENERIC_MESSAGE
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import assert_valid

BODY = json.dumps({"threadId": "t", "runId": "r", "messages": []}).encode()
JSON = [(b"content-type", b"application/json")]


async def hello(run: ar.Run) -> dict[str, str]:
    """Say hello and return a result."""
    ar.say("Hello!", id="m1")
    return {"greeted": "yes"}


class Exchange:
    """One in-process ASGI request: a fake ``receive`` and a recording ``send``."""

    def __init__(self, body: bytes = BODY, *, chunk: int | None = None) -> None:
        size = chunk or max(len(body), 1)
        self.chunks = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
        self.received = 0
        self.disconnect = asyncio.Event()
        self.sent: list[dict[str, Any]] = []
        self.first_body = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        """Hand out the body in chunks, then wait for the disconnect."""
        if self.received < len(self.chunks):
            self.received += 1
            more = self.received < len(self.chunks)
            return {
                "type": "http.request",
                "body": self.chunks[self.received - 1],
                "more_body": more,
            }
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        """Record *message*."""
        self.sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            self.first_body.set()

    @property
    def status(self) -> int:
        """The response status."""
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        """The response headers."""
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        """The whole response body."""
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    @property
    def closed(self) -> bool:
        """Whether the body ended (a last message without more_body)."""
        return not self.sent[-1].get("more_body", False)


async def call(
    app: AgentApp,
    body: bytes = BODY,
    *,
    method: str = "POST",
    headers: Iterable[tuple[bytes, bytes]] = JSON,
    chunk: int | None = None,
) -> Exchange:
    """Send one request to *app* and return the exchange once the app returns."""
    exchange = Exchange(body, chunk=chunk)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": "/",
        "headers": list(headers),
    }
    async with asyncio.timeout(10):
        await app(scope, exchange.receive, exchange.send)
    return exchange


def problem(exchange: Exchange) -> tuple[int, bytes, dict[str, Any]]:
    """Return the status, content type and JSON body of an error response."""
    return exchange.status, exchange.headers[b"content-type"], json.loads(exchange.body)


class TestAgentAppRejects:
    @pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD", "OPTIONS"])
    async def test_other_methods_get_405(self, method: str) -> None:
        """Anything but POST is 405, with ``allow: POST`` and a JSON body naming the method."""
        exchange = await call(AgentApp(hello), method=method)

        assert (
            405,
            b"application/json",
            {
                "error": "method not allowed",
                "detail": [f"{method} is not allowed; POST a JSON RunAgentInput"],
            },
        ) == problem(exchange)
        assert b"POST" == exchange.headers[b"allow"]

    @pytest.mark.parametrize(
        ("content_type", "detail"),
        [
            (b"text/plain", "content-type 'text/plain' is not JSON; send application/json"),
            (
                b"application/x-www-form-urlencoded",
                "content-type 'application/x-www-form-urlencoded' is not JSON; "
                "send application/json",
            ),
            (
                b"application/json; charset=latin-1",
                "charset 'latin-1' is not supported; JSON is UTF-8",
            ),
            (None, "no content-type; send application/json"),
        ],
    )
    async def test_non_json_gets_415(self, content_type: bytes | None, detail: str) -> None:
        """A body that is not declared UTF-8 JSON is 415, before it is read."""
        headers = [] if content_type is None else [(b"content-type", content_type)]
        exchange = await call(AgentApp(hello), headers=headers)

        assert (
            415,
            b"application/json",
            {"error": "unsupported media type", "detail": [detail]},
        ) == problem(exchange)
        assert 0 == exchange.received

    @pytest.mark.parametrize(
        "content_type",
        [b"application/json", b"Application/JSON; charset=UTF-8", b"application/vnd.run+json"],
    )
    async def test_json_content_types_are_accepted(self, content_type: bytes) -> None:
        """application/json (any case, UTF-8) and application/*+json are JSON."""
        exchange = await call(AgentApp(hello), headers=[(b"content-type", content_type)])

        assert 200 == exchange.status

    async def test_declared_length_over_the_limit_gets_413_unread(self) -> None:
        """A content-length past max_body is refused without reading the body."""
        headers = [*JSON, (b"content-length", str(len(BODY)).encode())]
        exchange = await call(AgentApp(hello, max_body=10), headers=headers)

        assert (
            413,
            b"application/json",
            {
                "error": "request body too large",
                "detail": ["the body exceeds the limit of 10 bytes"],
            },
        ) == problem(exchange)
        assert 0 == exchange.received

    async def test_streamed_body_over_the_limit_gets_413_and_reading_stops(self) -> None:
        """A chunked body is read only until it passes max_body."""
        exchange = await call(AgentApp(hello, max_body=25), BODY, chunk=10)

        assert 413 == exchange.status
        assert (3, 5) == (exchange.received, len(exchange.chunks))

    async def test_malformed_json_gets_400(self) -> None:
        """A body that is not JSON is 400, naming the syntax error."""
        exchange = await call(AgentApp(hello), b'{"threadId": ')

        assert (
            400,
            b"application/json",
            {
                "error": "malformed JSON",
                "detail": ["$: Expecting value: line 1 column 14 (char 13)"],
            },
        ) == problem(exchange)

    async def test_body_that_is_not_utf8_gets_400(self) -> None:
        """JSON must be UTF-8."""
        exchange = await call(AgentApp(hello), '{"threadId": "é"}'.encode("latin-1"))

        assert (400, "malformed JSON") == (exchange.status, json.loads(exchange.body)["error"])

    async def test_invalid_input_gets_422_listing_every_problem(self) -> None:
        """JSON that is not a RunAgentInput is 422, with every bad field by path."""
        body = json.dumps({"threadId": 7, "messages": [{"role": "user"}]}).encode()
        exchange = await call(AgentApp(hello), body)

        assert (
            422,
            b"application/json",
            {
                "error": "invalid RunAgentInput",
                "detail": [
                    "$.threadId: expected a string, got int",
                    "$.runId: required, missing",
                    "$.messages[0].id: required, missing",
                    "$.messages[0].content: required, missing",
                ],
            },
        ) == problem(exchange)

    async def test_client_leaving_while_sending_gets_nothing(self) -> None:
        """A disconnect before the body is complete ends the request without a response."""
        exchange = Exchange(BODY, chunk=10)
        exchange.chunks = exchange.chunks[:1]  # the first chunk says more is coming
        exchange.chunks[0] = BODY[:10]
        exchange.disconnect.set()

        async def receive() -> dict[str, Any]:
            message = await exchange.receive()
            if message["type"] == "http.request":
                message["more_body"] = True
            return message

        scope = {"type": "http", "method": "POST", "path": "/", "headers": JSON}
        await AgentApp(hello)(scope, receive, exchange.send)

        assert [] == exchange.sent


class TestAgentAppStreams:
    async def test_streams_the_run_as_sse(self) -> None:
        """A valid POST answers 200 text/event-stream and the run's events, then closes."""
        exchange = await call(AgentApp(hello))

        assert 200 == exchange.status
        assert {
            b"content-type": b"text/event-stream",
            b"cache-control": b"no-cache",
            b"x-accel-buffering": b"no",
        } == exchange.headers
        events = events_of(exchange.body)
        assert [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": "1.0"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello!"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": {"greeted": "yes"}},
        ] == events
        assert exchange.closed
        assert b"".join(sse.encode(ar.from_wire(e)) for e in events) == exchange.body

    async def test_agent_exception_becomes_run_error_and_a_clean_close(self) -> None:
        """After the stream starts, an exception is RUN_ERROR and the body still closes."""

        async def agent(run: ar.Run) -> None:
            ar.say("working")
            msg = "tool crashed"
            raise KeyError(msg)

        exchange = await call(AgentApp(agent, expose_errors=True))

        events = events_of(exchange.body)
        assert {"type": "RUN_ERROR", "message": "'tool crashed'", "code": "KeyError"} == events[-1]
        assert_valid(events)
        assert (200, True) == (exchange.status, exchange.closed)

    async def test_transport_failure_becomes_run_error(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An event that cannot be encoded ends the stream with RUN_ERROR and cancels the run."""
        real_encode = sse.encode
        agent_cancelled = asyncio.Event()

        def encode(event: ev.BaseEvent) -> bytes:
            if isinstance(event, ev.TextMessageContentEvent) and event.delta == "poison":
                msg = "cannot encode"
                raise ar.InvalidEventError(msg)
            return real_encode(event)

        async def agent(run: ar.Run) -> None:
            try:
                ar.say("poison")
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                agent_cancelled.set()
                raise

        monkeypatch.setattr(sse, "encode", encode)
        exchange = await call(AgentApp(agent))

        events = events_of(exchange.body)
        assert [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "RUN_ERROR",
        ] == [e["type"] for e in events]
        assert {
            "type": "RUN_ERROR",
            "message": GENERIC_MESSAGE,  # the run's default error policy
            "code": "InvalidEventError",
        } == events[-1]
        assert (True, True) == (exchange.closed, agent_cancelled.is_set())

    async def test_keep_alive_comments_during_silence(self) -> None:
        """With keep_alive, a silent agent's stream carries SSE comments."""

        async def agent(run: ar.Run) -> None:
            await asyncio.sleep(0.08)
            ar.say("done")

        exchange = await call(AgentApp(agent, keep_alive=0.02))

        assert exchange.body.count(sse.KEEP_ALIVE) >= 1
        assert_valid(events_of(exchange.body))

    async def test_run_options_reach_the_run(self) -> None:
        """Run options pass through; a state is copied for each run, never shared."""
        shared = {"count": 0}

        async def agent(run: ar.Run) -> None:
            run.update_state(lambda s: s.update(count=s["count"] + 1))

        app = AgentApp(agent, state=shared, echo_input=True, buffer=8)
        first, second = await call(app), await call(app)

        assert [{"count": 1}, {"count": 1}] == [
            next(e["snapshot"] for e in events_of(x.body) if e["type"] == "STATE_SNAPSHOT")
            for x in (first, second)
        ]
        assert {"count": 0} == shared
        assert "input" in events_of(first.body)[0]


class TestAgentAppCoalesces:
    async def test_a_burst_goes_out_in_few_messages_with_the_same_bytes(self) -> None:
        """Every frame ready at once is one ASGI message; the body is every frame, in order."""

        async def agent(run: ar.Run) -> None:
            with ar.message(id="m") as m:
                for i in range(1000):
                    m.write(f"{i} ")
                    await ar.drain()

        exchange = await call(AgentApp(agent))

        events = events_of(exchange.body)
        bodies = [m for m in exchange.sent[1:] if m.get("body")]
        assert 1004 == len(events)
        assert_valid(events)
        assert [f"{i} " for i in range(1000)] == [
            e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"
        ]
        assert exchange.body == b"".join(sse.encode(ar.from_wire(e)) for e in events)
        # Batches double from the first few events up to 256: a dozen messages, not 1,004.
        assert len(bodies) <= 16, [m["body"].count(b"data: ") for m in bodies]
        assert all(m["more_body"] for m in bodies)
        assert exchange.closed

    async def test_the_first_frames_go_out_before_the_burst_is_written(self) -> None:
        """The first message leaves after a few events, not at the high-water mark."""
        written = 0
        written_at_first_body: list[int] = []

        async def agent(run: ar.Run) -> None:
            nonlocal written
            with ar.message(id="m") as m:
                for i in range(1000):
                    m.write(f"{i} ")
                    written += 1
                    await ar.drain()

        exchange = Exchange()

        async def send(message: dict[str, Any]) -> None:
            if message.get("body") and not written_at_first_body:
                written_at_first_body.append(written)
            await exchange.send(message)

        scope = {"type": "http", "method": "POST", "path": "/", "headers": JSON}
        async with asyncio.timeout(10):
            await AgentApp(agent)(scope, exchange.receive, send)

        [first] = written_at_first_body
        assert first <= 2, first  # RUN_STARTED, TEXT_MESSAGE_START and the first delta
        assert events_of(exchange.sent[1]["body"])[0]["type"] == "RUN_STARTED"

    async def test_an_agent_that_yields_still_gets_every_frame_once(self) -> None:
        """Batches never lose, repeat or reorder a frame, whoever yields when."""

        async def agent(run: ar.Run) -> None:
            with ar.message(id="m") as m:
                for i in range(300):
                    m.write(f"{i} ")
                    if i % 7 == 0:
                        await asyncio.sleep(0)
                    elif i % 3 == 0:
                        await ar.drain()

        exchange = await call(AgentApp(agent, buffer=16))

        deltas = [
            e["delta"] for e in events_of(exchange.body) if e["type"] == "TEXT_MESSAGE_CONTENT"
        ]
        assert [f"{i} " for i in range(300)] == deltas

    async def test_a_frame_that_will_not_encode_mid_batch_sends_those_before_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The frames of a batch before the one that fails go out, then RUN_ERROR."""
        real_encode = sse.encode

        def encode(event: ev.BaseEvent) -> bytes:
            if isinstance(event, ev.TextMessageContentEvent) and event.delta == "poison":
                msg = "cannot encode"
                raise ar.InvalidEventError(msg)
            return real_encode(event)

        async def agent(run: ar.Run) -> None:
            with ar.message(id="m") as m:
                for delta in ("a", "b", "c", "poison", "d"):
                    m.write(delta)  # no drain: one batch
            await asyncio.sleep(5)

        monkeypatch.setattr(sse, "encode", encode)
        exchange = await call(AgentApp(agent))

        events = events_of(exchange.body)
        assert ["RUN_STARTED", "TEXT_MESSAGE_START", "a", "b", "c", "RUN_ERROR"] == [
            e.get("delta", e["type"]) for e in events
        ]
        assert (True, "InvalidEventError") == (exchange.closed, events[-1]["code"])


class TestAgentAppDisconnect:
    async def test_disconnect_cancels_the_agent_within_100_ms(self) -> None:
        """A client disconnect cancels the agent task at once; no task is left behind."""
        loop = asyncio.get_running_loop()
        cancelled_at: list[float] = []
        before = asyncio.all_tasks()

        async def agent(run: ar.Run) -> None:
            try:
                with ar.message() as m:
                    for i in range(1000):  # ten seconds at most
                        m.write(f"{i} ")
                        await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancelled_at.append(loop.time())
                raise

        exchange = Exchange()
        scope = {"type": "http", "method": "POST", "path": "/", "headers": JSON}
        served = asyncio.create_task(AgentApp(agent)(scope, exchange.receive, exchange.send))
        async with asyncio.timeout(5):
            await exchange.first_body.wait()
            await asyncio.sleep(0.05)
            disconnected_at = loop.time()
            exchange.disconnect.set()
            await served

        [cancelled] = cancelled_at
        latency = cancelled - disconnected_at
        assert latency < 0.1, f"{latency * 1000:.1f} ms"
        assert before == asyncio.all_tasks()
        assert len(events_of(exchange.body)) > 1


class TestAgentAppProtocol:
    async def test_lifespan_completes_startup_and_shutdown(self) -> None:
        """The lifespan protocol is answered: startup and shutdown complete."""
        incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return incoming.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await AgentApp(hello)({"type": "lifespan"}, receive, send)

        assert [
            {"type": "lifespan.startup.complete"},
            {"type": "lifespan.shutdown.complete"},
        ] == sent

    async def test_websocket_is_refused(self) -> None:
        """A websocket connection is closed (HTTP 403 before accept)."""
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "websocket.connect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await AgentApp(hello)({"type": "websocket"}, receive, send)

        assert [{"type": "websocket.close", "code": 1003}] == sent

    async def test_unknown_scope_type_raises(self) -> None:
        """A scope type ASGI 3 does not define is an error, as the spec asks."""

        async def receive() -> dict[str, Any]:
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            raise AssertionError

        with pytest.raises(ValueError, match="telepathy"):
            await AgentApp(hello)({"type": "telepathy"}, receive, send)

    @pytest.mark.parametrize(
        ("options", "error"),
        [
            ({"sink": print}, TypeError),
            ({"verfy": False}, TypeError),
            ({"max_body": -1}, ValueError),
            ({"keep_alive": 0}, ValueError),
        ],
    )
    def test_bad_options_fail_at_construction(
        self, options: dict[str, Any], error: type[Exception]
    ) -> None:
        """A misspelt or invalid option fails when the app is made, not per request."""
        with pytest.raises(error):
            AgentApp(hello, **options)

    def test_state_is_deep_copied(self) -> None:
        """The configured state object stays as given."""
        state = {"nested": {"n": 1}}
        app = AgentApp(hello, state=state)

        assert copy.deepcopy(state) == app.run_options["state"]
        assert "<AgentApp hello>" == repr(app)


async def post(app: Any, url: str) -> httpx.Response:
    """POST the test input to *url* on *app* through httpx's ASGI transport."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post(url, content=BODY, headers={"content-type": "application/json"})


class TestAgentAppMounted:
    async def test_mounts_under_starlette(self) -> None:
        """Under a Starlette Mount the app streams the run; other paths are Starlette's."""
        app = Starlette(routes=[Mount("/agent", app=AgentApp(hello))])

        response = await post(app, "/agent/")
        missing = await post(app, "/elsewhere")

        assert (200, "text/event-stream") == (
            response.status_code,
            response.headers["content-type"],
        )
        assert "RUN_FINISHED" == events_of(response.content)[-1]["type"]
        assert 404 == missing.status_code

    async def test_mounts_under_fastapi(self) -> None:
        """FastAPI's app.mount serves the agent beside ordinary routes, rejections included."""
        api = FastAPI()
        api.mount("/agent", AgentApp(hello))

        @api.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        response = await post(api, "/agent/")
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            refused = await client.get("/agent/")
            healthy = await client.get("/health")

        assert_valid(events_of(response.content))
        assert (405, "POST") == (refused.status_code, refused.headers["allow"])
        assert {"status": "ok"} == healthy.json()
