"""
End to end: a request carrying a W3C ``traceparent`` through `AgentApp` under a real
uvicorn, sent by the official client, produces spans in that trace.

The server runs in the test's own process and event loop (`serving`), so the SDK's
in-memory exporter sees what the server's instrumentor produced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.node import aclient_run
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs.adapters.otel import AmbientRunsInstrumentor
from ambient_runs.asgi import AgentApp

pytestmark = E2E

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    AmbientRunsInstrumentor().instrument(tracer_provider=provider)
    try:
        yield found
    finally:
        AmbientRunsInstrumentor().uninstrument()
        provider.shutdown()


@ar.subagent("researcher")
async def research(topic: str) -> dict[str, str]:
    with ar.tool_call("search") as call:
        call.args({"q": topic})
        call.result("two hits")
    ar.say(f"found {topic}")
    return {"topic": topic}


async def agent(run: ar.Run) -> str:
    await asyncio.gather(research("a"), research("b"))
    with ar.step("write"):
        ar.say("done")
    return "ok"


async def test_a_traceparent_request_produces_spans_in_that_trace(
    exporter: InMemorySpanExporter,
) -> None:
    """Every span joins the caller's trace; the run span's parent is the caller's span."""
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    async with serving(AgentApp(agent)) as url, asyncio.timeout(60):
        result = await aclient_run(
            url,
            [{"input": {"threadId": "t", "runId": "r", "messages": []}}],
            headers={"traceparent": traceparent},
        )

    (run,) = result["runs"]
    assert (None, None, [], []) == (
        run["error"],
        run["runFailed"],
        run["warnings"],
        run["consoleErrors"],
    )
    spans = exporter.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert [
        "execute_tool search",
        "execute_tool search",
        "invoke_agent",
        "invoke_agent researcher",
        "invoke_agent researcher",
        "step write",
    ] == names
    assert {int(TRACE_ID, 16)} == {s.context.trace_id for s in spans if s.context}
    (root,) = [s for s in spans if s.name == "invoke_agent"]
    assert root.parent is not None
    assert root.parent.is_remote
    assert int(PARENT_ID, 16) == root.parent.span_id
    # What the client received names the same run span: a UI can link to the trace.
    started = run["events"][0]
    assert "RUN_STARTED" == started["type"]
    assert root.context is not None
    assert {
        "trace_id": TRACE_ID,
        "span_id": trace.format_span_id(root.context.span_id),
        "traceparent": f"00-{TRACE_ID}-{trace.format_span_id(root.context.span_id)}-01",
    } == started["metadata"]["ambient_runs"]


async def test_a_client_that_disconnects_still_ends_every_span(
    exporter: InMemorySpanExporter,
) -> None:
    """The client aborts mid-stream: the run is cancelled and every open span ends then."""
    ended = asyncio.Event()

    async def slow(run: ar.Run) -> None:
        try:
            with ar.subagent("sleeper"), ar.tool_call("wait"):
                for i in range(1000):
                    ar.say(f"tick {i}")
                    await asyncio.sleep(0.01)
        finally:
            ended.set()

    async with serving(AgentApp(slow)) as url, asyncio.timeout(60):
        result = await aclient_run(
            url,
            [{"input": {"threadId": "t", "runId": "r", "messages": []}, "abortAfterEvents": 8}],
            headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
        )
        await ended.wait()
        for _ in range(100):  # the run's terminal event follows the agent's finally at once
            if len(exporter.get_finished_spans()) == 3:
                break
            await asyncio.sleep(0.01)

    (run,) = result["runs"]
    assert run["aborted"]
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"invoke_agent", "invoke_agent sleeper", "execute_tool wait"} == set(spans)
    assert "cancelled" == (spans["invoke_agent"].attributes or {})["ambient_runs.outcome"]
    assert "cancelled" == (spans["invoke_agent sleeper"].attributes or {})["error.type"]
    assert {int(TRACE_ID, 16)} == {s.context.trace_id for s in spans.values() if s.context}
