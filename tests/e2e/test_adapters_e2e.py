"""
End to end: framework adapters served by `AgentApp` under uvicorn, driven by the real client.

The client aborts mid-run; the framework's run must stop at once and the stream the
server produced must still be whole (cancelled outcome, every invocation closed).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from support.node import aclient_run
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import assert_valid

pytestmark = E2E


async def abort_mid_run(call: Callable[[], Awaitable[Any]]) -> list[ar.Event]:
    """Serve an agent that awaits *call*; the client aborts after a few events."""
    seen: list[ar.Event] = []
    ended = asyncio.Event()

    def watch(event: ar.Event) -> None:
        seen.append(event)
        if event.TYPE.value in ("RUN_FINISHED", "RUN_ERROR"):
            ended.set()

    async def agent(run: ar.Run) -> None:
        # RUN_STARTED went out before the tap: restate it, so the stream checks whole.
        seen.append(ar.events.RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
        run.add_tap(watch)
        await call()

    async with serving(AgentApp(agent)) as url:
        async with asyncio.timeout(60):
            result = await aclient_run(
                url,
                [
                    {
                        "input": {"threadId": "t", "runId": "r1", "messages": []},
                        "abortAfterEvents": 6,
                    }
                ],
            )
        async with asyncio.timeout(10):
            await ended.wait()
    [run] = result["runs"]
    assert run["aborted"]
    return seen


async def test_pydantic_ai_agent_stops_when_the_client_aborts() -> None:
    """The model's stream is cancelled; the subagent errors 'cancelled'; the run ends cancelled."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from ambient_runs.adapters.pydantic_ai import run_agent

    produced: list[int] = []

    async def model(messages: list[Any], info: AgentInfo) -> AsyncIterator[str]:
        for i in range(2000):  # twenty seconds at most
            produced.append(i)
            yield f"{i} "
            await asyncio.sleep(0.01)

    agent = Agent(FunctionModel(stream_function=model))
    seen = await abort_mid_run(lambda: run_agent(agent, "count", name="counter"))
    so_far = len(produced)
    await asyncio.sleep(0.2)  # twenty chunks' time: the model no longer advances

    assert so_far == len(produced)

    assert_valid(seen)
    assert "SUBAGENT_ERROR" == seen[-2].TYPE.value
    assert "cancelled" == seen[-2].code
    assert "cancelled" == seen[-1].outcome.type
    assert sum(e.TYPE.value == "TEXT_MESSAGE_CONTENT" for e in seen) < 1000


async def test_openai_agent_stops_when_the_client_aborts() -> None:
    """A tool is running when the client aborts: it is cancelled; the run ends cancelled."""
    import os

    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from ambient_runs.adapters.openai_agents import run_agent

    stopped = asyncio.Event()

    @function_tool
    async def slow() -> str:
        """Takes twenty seconds at most."""
        try:
            for i in range(2000):
                ar.say(f"step {i}")
                await asyncio.sleep(0.01)
        finally:
            stopped.set()
        return "late"

    agent = Agent(
        name="slow",
        model=ScriptedModel(
            [[function_call("slow", {}, call_id="call_1")], [assistant_message("never")]]
        ),
        tools=[slow],
    )
    seen = await abort_mid_run(lambda: run_agent(agent, "go", name="slow"))

    assert stopped.is_set()  # the tool was cancelled before the run ended

    assert_valid(seen)
    assert "SUBAGENT_ERROR" == seen[-2].TYPE.value
    assert "cancelled" == seen[-2].code
    assert "cancelled" == seen[-1].outcome.type
    assert sum(e.TYPE.value == "TEXT_MESSAGE_START" for e in seen) < 1000
