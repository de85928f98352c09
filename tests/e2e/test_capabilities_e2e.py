"""GET <app path>/capabilities under a real uvicorn: the protocol's AgentCapabilities."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from ag_ui.core import AgentCapabilities
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore
from ambient_runs.stores.redis import RedisStore

pytestmark = E2E


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


async def hello(run: ar.Run) -> None:
    ar.say("hello")


async def capabilities(app: AgentApp, path: str = "/capabilities") -> tuple[int, Any]:
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        answer = await client.get(url + path)
        assert answer.headers["content-type"] == "application/json"
        return answer.status_code, answer.json()


@pytest.mark.parametrize("kind", ["none", "memory", "redis"])
async def test_resumable_is_declared_exactly_with_a_store(kind: str, redis_url: str) -> None:
    store = {"none": None, "memory": MemoryStore(), "redis": RedisStore(redis_url)}[kind]
    app = AgentApp(hello, store=store)
    try:
        status, body = await capabilities(app)
    finally:
        if store is not None:
            await store.aclose()

    assert status == 200
    declared = AgentCapabilities.model_validate(body)  # the official shape, nothing extra
    assert declared.model_extra == {}
    for group in body:
        assert getattr(declared, _snake(group)).model_extra == {}, group
    assert declared.transport is not None
    assert declared.transport.resumable is (store is not None)
    assert declared.transport.streaming is True
    assert body["transport"]["websocket"] is False
    assert body["humanInTheLoop"] == {"supported": True, "interrupts": True}


async def test_declarations_merge_over_what_the_app_knows() -> None:
    app = AgentApp(
        hello,
        allow_origins=["https://app.example"],
        capabilities={
            "identity": {"name": "greeter", "version": "1.2"},
            "multiAgent": {"subagents": [{"name": "search", "description": "finds"}]},
            "tools": {"clientProvided": None},  # withdrawn: this agent ignores the client's
            "custom": {"team": "docs"},
        },
    )
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        answer = await client.get(
            f"{url}/capabilities/", headers={"origin": "https://app.example"}
        )
        run = await client.post(url, json={"threadId": "t", "runId": "r", "messages": []})

    body = answer.json()
    declared = AgentCapabilities.model_validate(body)
    assert declared.identity is not None
    assert (declared.identity.name, declared.identity.version) == ("greeter", "1.2")
    assert body["multiAgent"] == {
        "supported": True,
        "subagents": [{"name": "search", "description": "finds"}],
    }
    assert body["tools"] == {"supported": True}
    assert body["custom"] == {"team": "docs"}
    assert answer.headers["access-control-allow-origin"] == "https://app.example"
    assert run.status_code == 200  # the agent's own endpoint is unchanged
    assert '"RUN_FINISHED"' in run.text


def test_a_declaration_outside_the_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no field 'sub_agents'.*subagents"):
        AgentApp(hello, capabilities={"multiAgent": {"sub_agents": []}})
    with pytest.raises(ValueError, match="no group 'streaming'"):
        AgentApp(hello, capabilities={"streaming": True})
    with pytest.raises(ValueError, match="must be JSON"):
        AgentApp(hello, capabilities={"custom": {"when": object()}})
