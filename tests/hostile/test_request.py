"""The agent sees the request it serves: `Run.request`, under a real uvicorn."""

from __future__ import annotations

from typing import Any

import httpx
from support.servers import serving
from support.sse import events_of

import ambient_runs as ar
from ambient_runs.asgi import AgentApp, Headers, Request

BODY = {"threadId": "t", "runId": "r", "messages": []}


class TestRunRequest:
    async def test_agent_reads_headers_client_path_and_scope(self) -> None:
        """Headers (any case), the client address, the path and the raw scope reach the run."""
        seen: dict[str, Any] = {}

        async def agent(run: ar.Run) -> None:
            request = run.request
            assert request is not None
            seen.update(
                traceparent=request.headers["traceparent"],
                upper=request.headers["TRACEPARENT"],
                both=request.headers["x-multi"],
                method=request.method,
                path=request.path,
                query=request.query,
                client=request.client,
                user=request.scope.get("user"),
            )

        app = AgentApp(agent)

        async def auth(scope: Any, receive: Any, send: Any) -> None:
            """A middleware that authenticates and puts the user into the scope."""
            await app({**scope, "user": "ada"}, receive, send)

        parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        async with serving(auth) as url, httpx.AsyncClient() as client:
            response = await client.post(
                url + "?x=1",
                json=BODY,
                headers=[("traceparent", parent), ("x-multi", "a"), ("x-multi", "b")],
            )

        assert "RUN_FINISHED" == events_of(response.content)[-1]["type"]
        assert {
            "traceparent": parent,
            "upper": parent,
            "both": "a, b",
            "method": "POST",
            "path": "/agent",
            "query": "x=1",
            "client": ("127.0.0.1", seen["client"][1]),
            "user": "ada",
        } == seen

    async def test_request_is_none_outside_a_server(self) -> None:
        """A plain `Run` and a `stream` without a request have ``request`` None."""
        async with ar.Run(BODY) as run:
            assert run.request is None
        events = ar.stream(_none, BODY)
        assert "RUN_FINISHED" == [e async for e in events][-1].type
        assert events.run.request is None


async def _none(run: ar.Run) -> None:
    return None


class TestHeaders:
    def test_is_a_case_insensitive_str_mapping(self) -> None:
        """Lookups ignore case; repeats join with ', ' (cookies with '; '); get_all splits."""
        headers = Headers(
            [(b"Accept", b"a"), (b"accept", b"b"), (b"cookie", b"x=1"), (b"cookie", b"y=2")]
        )

        assert ("a, b", "x=1; y=2", ["a", "b"], [], ["accept", "cookie"]) == (
            headers["ACCEPT"],
            headers["Cookie"],
            headers.get_all("accept"),
            headers.get_all("missing"),
            list(headers),
        )
        assert "Accept" in headers
        assert None is headers.get("missing")

    def test_request_from_a_scope_without_client(self) -> None:
        """A scope without client or headers gives None and an empty mapping."""
        request = Request.from_scope({"type": "http", "method": "POST", "path": "/"})

        assert (None, 0, "") == (request.client, len(request.headers), request.query)
