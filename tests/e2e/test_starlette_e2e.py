"""
End to end: `ambient_runs.adapters.starlette.serve` in a FastAPI and a Starlette route.

The routes are served by a real uvicorn and driven by the official client
(``@ag-ui/client`` under Node) and by httpx for the malformed requests the client
never sends.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Request, Response
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request as StarletteRequest
from starlette.routing import Route
from support.node import aclient_run
from support.servers import E2E, serving
from support.sse import events_of

import ambient_runs as ar
from ambient_runs.adapters.starlette import AgentResponse, serve

pytestmark = E2E

BODY = {"threadId": "t", "runId": "r", "messages": []}


def user(text: str) -> dict[str, Any]:
    """Return a user message in wire form."""
    return {"id": "u1", "role": "user", "content": text}


async def echo(run: ar.Run) -> dict[str, Any]:
    """Say what the user said, and who asked (a header the route's dependency checked)."""
    assert run.request is not None
    ar.say(f"You said: {run.last_user_text()}", id="m1")
    return {"user": run.request.headers.get("x-user"), "path": run.request.path}


def fastapi_app(agent: Any = echo, **options: Any) -> FastAPI:
    """A FastAPI app whose route, behind a dependency, serves *agent* with `serve`."""
    api = FastAPI()

    def who(request: Request) -> str:
        return request.headers.get("x-user", "anonymous")

    @api.post("/agent/{tenant}")
    async def run_agent(request: Request, tenant: str, user: str = Depends(who)) -> Response:
        return serve(agent, request, **options)

    return api


class TestFastAPIRoute:
    async def test_official_client_gets_the_run(self) -> None:
        """The client's run goes through the route: messages, result, the request seen."""
        async with serving(fastapi_app(), path="/agent/acme") as url:
            async with asyncio.timeout(60):
                result = await aclient_run(
                    url,
                    [{"input": {"threadId": "t", "runId": "r1", "messages": [user("hi")]}}],
                    headers={"x-user": "ada"},
                )

        [run] = result["runs"]
        assert (None, [], []) == (run["error"], run["warnings"], run["consoleErrors"])
        assert {"id": "m1", "role": "assistant", "content": "You said: hi"} == result["messages"][
            -1
        ]
        assert {"user": "ada", "path": "/agent/acme"} == run["events"][-1]["result"]

    async def test_stream_headers(self) -> None:
        """The 200 is an SSE stream that proxies must not buffer nor caches keep."""
        app = fastapi_app()
        async with (
            serving(app, path="/agent/acme") as url,
            httpx.AsyncClient(timeout=20) as client,
        ):
            response = await client.post(url, json=BODY)

        assert 200 == response.status_code
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "no-cache" == response.headers["cache-control"]
        assert "no" == response.headers["x-accel-buffering"]
        assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"] == [
            e["type"] for e in events_of(response.content)
        ][:3]

    async def test_bad_requests_get_the_same_4xx_as_agent_app(self) -> None:
        """Malformed JSON, a wrong schema, a wrong content type, too big: small JSON 4xx."""
        app = fastapi_app(max_body=2000, max_problems=3)
        async with serving(app, path="/agent/x") as url, httpx.AsyncClient(timeout=20) as client:
            malformed = await client.post(
                url, content=b"{nope", headers={"content-type": "application/json"}
            )
            invalid = await client.post(
                url, json={"threadId": 1, "runId": 2, "messages": [{}] * 50}
            )
            text = await client.post(url, content=b"{}", headers={"content-type": "text/plain"})
            big = await client.post(url, json={**BODY, "state": "x" * 5000})

        assert (400, "malformed JSON") == (malformed.status_code, malformed.json()["error"])
        assert (422, "invalid RunAgentInput") == (invalid.status_code, invalid.json()["error"])
        assert 3 == len(invalid.json()["detail"])
        assert invalid.json()["omitted"] > 0
        assert (415, "unsupported media type") == (text.status_code, text.json()["error"])
        assert (413, "request body too large") == (big.status_code, big.json()["error"])

    async def test_agent_failure_ends_with_run_error(self) -> None:
        """An agent that raises ends the stream with one RUN_ERROR; the client resolves."""

        async def broken(run: ar.Run) -> None:
            ar.say("starting")
            raise ConnectionError("the model is down")

        async with serving(fastapi_app(broken), path="/agent/x") as url:
            async with asyncio.timeout(60):
                result = await aclient_run(url, [{"input": {"threadId": "t", "runId": "r1"}}])

        [run] = result["runs"]
        assert run["error"] is None
        assert "RUN_ERROR" == run["events"][-1]["type"]
        assert 1 == len(run["runErrors"])

    async def test_client_abort_cancels_the_agent(self) -> None:
        """The client aborts mid-stream; the agent behind the route is cancelled at once."""
        cancelled = asyncio.Event()
        loop = asyncio.get_running_loop()

        async def endless(run: ar.Run) -> None:
            try:
                with ar.message() as m:
                    for i in range(1000):
                        m.write(f"{i} ")
                        await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async with serving(fastapi_app(endless), path="/agent/x") as url:
            async with asyncio.timeout(60):
                result = await aclient_run(
                    url,
                    [{"input": {"threadId": "t", "runId": "r1"}, "abortAfterEvents": 5}],
                )
            returned = loop.time()
            async with asyncio.timeout(5):
                await cancelled.wait()
            waited = loop.time() - returned

        [run] = result["runs"]
        assert run["aborted"]
        assert waited < 1.0


class TestStarletteRoute:
    async def test_a_body_the_route_already_read_is_used(self) -> None:
        """A route (or middleware) that read the body first still gets the run served."""
        seen: list[bytes] = []

        async def logged(request: Request) -> AgentResponse:
            seen.append(await request.body())
            return serve(echo, request)

        app = Starlette(routes=[Route("/agent", logged, methods=["POST"])])
        async with serving(app) as url, httpx.AsyncClient(timeout=20) as client:
            response = await client.post(url, json={**BODY, "messages": [user("yo")]})

        events = events_of(response.content)
        assert 1 == len(seen)
        assert "You said: yo" == events[2]["delta"]
        assert "RUN_FINISHED" == events[-1]["type"]

    async def test_a_half_sent_body_gets_408(self) -> None:
        """A body that does not arrive in *body_timeout* is answered 408, then closed."""

        async def route(request: Request) -> AgentResponse:
            return serve(echo, request, body_timeout=0.3)

        app = Starlette(routes=[Route("/agent", route, methods=["POST"])])
        async with serving(app) as url:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(
                    b"POST /agent HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    b'content-length: 100\r\n\r\n{"threadId"'
                )
                await writer.drain()
                answer = await asyncio.wait_for(reader.read(), 10)  # to the server's close
            finally:
                writer.close()

        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"error":"request timeout"' in answer

    async def test_middleware_scope_reaches_the_run(self) -> None:
        """What an auth middleware put in the scope is the run's `Run.request.scope`."""

        class Auth(BaseHTTPMiddleware):
            async def dispatch(self, request: Request, call_next: Any) -> Any:
                request.scope["user"] = "grace"
                return await call_next(request)

        async def who(run: ar.Run) -> Any:
            assert run.request is not None
            return {"user": run.request.scope.get("user")}

        async def route(request: Request) -> AgentResponse:
            return serve(who, request)

        app = Starlette(
            routes=[Route("/agent", route, methods=["POST"])], middleware=[Middleware(Auth)]
        )
        async with serving(app) as url, httpx.AsyncClient(timeout=20) as client:
            response = await client.post(url, json=BODY)

        assert {"user": "grace"} == events_of(response.content)[-1]["result"]

    async def test_headers_the_route_adds_are_sent(self) -> None:
        """A header and a cookie set on the response go out with the stream and with a 4xx."""

        async def route(request: Request) -> AgentResponse:
            response = serve(echo, request)
            response.headers["x-request-id"] = "req-1"
            response.set_cookie("session", "s1")
            return response

        app = Starlette(routes=[Route("/agent", route, methods=["POST"])])
        async with serving(app) as url, httpx.AsyncClient(timeout=20) as client:
            ok = await client.post(url, json=BODY)
            bad = await client.post(
                url, content=b"{", headers={"content-type": "application/json"}
            )

        for response in (ok, bad):
            assert "req-1" == response.headers["x-request-id"]
            assert "s1" == response.cookies["session"]
        assert ok.headers["content-type"].startswith("text/event-stream")
        assert 1 == len(ok.headers.get_list("content-type"))
        assert "application/json" == bad.headers["content-type"]
        assert 400 == bad.status_code

    async def test_cors_preflight_through_the_route(self) -> None:
        """With allow_origins and an OPTIONS route, the preflight is answered 204."""

        async def route(request: Request) -> AgentResponse:
            return serve(echo, request, allow_origins=["https://app.example"])

        app = Starlette(routes=[Route("/agent", route, methods=["POST", "OPTIONS"])])
        async with serving(app) as url, httpx.AsyncClient(timeout=20) as client:
            preflight = await client.options(
                url,
                headers={
                    "origin": "https://app.example",
                    "access-control-request-method": "POST",
                },
            )
            post = await client.post(url, json=BODY, headers={"origin": "https://app.example"})

        assert 204 == preflight.status_code
        assert "https://app.example" == preflight.headers["access-control-allow-origin"]
        assert "https://app.example" == post.headers["access-control-allow-origin"]


class TestServe:
    def test_detached_options_are_refused(self) -> None:
        """store= and lease= need AgentApp mounted: serve says so at once."""
        request = StarletteRequest({"type": "http", "method": "POST", "headers": []})
        for option in ("store", "lease"):
            with pytest.raises(TypeError, match="mount AgentApp"):
                serve(echo, request, **{option: None})

    def test_bad_options_fail_at_the_call(self) -> None:
        """An option AgentApp does not take fails with TypeError, before any response."""
        request = StarletteRequest({"type": "http", "method": "POST", "headers": []})

        with pytest.raises(TypeError):
            serve(echo, request, max_bodyy=3)
