"""
Approvals resumed through the official client, on another server: continuations stay server-side.

Two real uvicorn servers each serve their own `AgentApp` of the same agent,
sharing nothing but the continuation store (one `MemoryContinuations` object,
or a real redis-server the tests start). One ``@ag-ui/client`` ``HttpAgent``
runs the first turn against server 1, then answers every pending interrupt
with its own ``buildResumeArray`` and sends that turn to server 2: the
resume it sends is exactly ``{interruptId, status, payload}``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support.node import aclient_run, assert_clean
from support.resume_contract import KINDS
from support.servers import E2E, serving

from ambient_runs.asgi import AgentApp
from ambient_runs.continuations import ContinuationStore, MemoryContinuations
from ambient_runs.stores.redis_continuations import RedisContinuations

pytestmark = E2E


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


@pytest.fixture(params=["memory", "redis"])
async def shared(request: pytest.FixtureRequest) -> AsyncIterator[tuple[ContinuationStore, ...]]:
    """The two servers' continuation stores: one object, or two clients of one Redis."""
    if request.param == "memory":
        store = MemoryContinuations()
        yield store, store
        return
    url = request.getfixturevalue("redis_url")
    prefix = f"t-{uuid.uuid4().hex}:"
    both = RedisContinuations(url, prefix=prefix), RedisContinuations(url, prefix=prefix)
    yield both
    for one in both:
        await one.aclose()


@pytest.mark.parametrize("kind_name", sorted(KINDS))
async def test_build_resume_array_alone_resumes_on_another_server(
    kind_name: str, shared: tuple[ContinuationStore, ContinuationStore]
) -> None:
    """Turn 1 on server 1 pauses; buildResumeArray's answer on server 2 continues it."""
    kind = KINDS[kind_name]
    agent = kind.make_agent()
    runs: list[dict[str, Any]] = [
        {"input": {"threadId": "t", "runId": "r1", "messages": [user("r1")]}},
        {
            "input": {"runId": "r2"},
            "answerInterrupts": {"status": "resolved", "payload": kind.approve},
        },
    ]
    async with (
        serving(AgentApp(agent, continuations=shared[0])) as first_url,
        serving(AgentApp(agent, continuations=shared[1])) as second_url,
        asyncio.timeout(90),
    ):
        runs[1]["url"] = second_url
        result = await aclient_run(first_url, runs)

    first, second = result["runs"]
    assert_clean(first)
    assert_clean(second)
    interrupts = first["pendingInterrupts"]
    assert interrupts
    # Exactly what the official client builds: no metadata travels back.
    assert [
        {"interruptId": i["id"], "status": "resolved", "payload": kind.approve} for i in interrupts
    ] == second["request"]["body"]["resume"]
    assert second["request"]["url"] == runs[1]["url"]
    assert [] == second["pendingInterrupts"]
    [finished] = second["runFinished"]
    assert ("success", kind.result) == (finished["outcome"], finished["result"])
    asked = {i["toolCallId"] for i in interrupts}
    results = [
        e["content"]
        for e in second["events"]
        if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in asked
    ]
    assert [kind.approved] == results


def user(run_id: str) -> dict[str, str]:
    return {"id": f"{run_id}-u", "role": "user", "content": "go"}
