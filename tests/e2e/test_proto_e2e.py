"""
The binary transport under a real uvicorn: ``Accept: application/vnd.ag-ui.event+proto``.

The response body is read by the official client's ``parseProtoStream``
(``@ag-ui/client`` 1.0.4) and must hold the very events the same run sends as
SSE; without the header, SSE stays the answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from support.node_proto import proto_decode
from support.servers import E2E, serving

from ambient_runs import proto, sse
from ambient_runs._demo import research_agent
from ambient_runs.adapters.starlette import serve
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore

pytestmark = E2E

QUESTION = {"id": "u1", "role": "user", "content": "Heat pump or boiler?"}


def _input(run_id: str) -> dict[str, Any]:
    return {"threadId": "demo", "runId": run_id, "messages": [QUESTION]}


async def _post(url: str, run_id: str, accept: str | None) -> httpx.Response:
    headers = {} if accept is None else {"accept": accept}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(url, json=_input(run_id), headers=headers)


def _sse_events(body: bytes) -> list[Any]:
    return [json.loads(frame[6:]) for frame in body.split(b"\n\n") if frame.startswith(b"data: ")]


def _app(kind: str) -> Any:
    agent = research_agent(pace=0)
    if kind == "agentapp":
        return AgentApp(agent)

    async def route(request: Request) -> Any:
        return serve(agent, request)

    return Starlette(routes=[Route("/agent", route, methods=["POST"])])


@pytest.mark.parametrize("kind", ["agentapp", "starlette"])
async def test_the_demo_run_decodes_to_what_sse_carries(kind: str) -> None:
    async with serving(_app(kind)) as url, asyncio.timeout(60):
        binary = await _post(url, "demo-1", proto.CONTENT_TYPE)
        text = await _post(url, "demo-1", "text/event-stream")
        default = await _post(url, "demo-1", None)

    assert binary.status_code == 200
    assert binary.headers["content-type"] == proto.CONTENT_TYPE
    assert text.headers["content-type"] == sse.CONTENT_TYPE
    assert default.headers["content-type"] == sse.CONTENT_TYPE
    [decoded] = proto_decode([binary.content], piece=5)
    assert "error" not in decoded, decoded.get("error")
    expected = _sse_events(text.content)
    assert len(expected) > 20
    assert decoded["events"] == expected
    assert len(binary.content) <= 0.5 * len(text.content)


@pytest.mark.parametrize("store", [False, True])
async def test_http_binary_is_declared_where_it_is_served(store: bool) -> None:
    app = AgentApp(research_agent(pace=0), store=MemoryStore() if store else None)
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        answer = await client.get(url + "/capabilities")

    assert answer.json()["transport"]["httpBinary"] is (not store)
