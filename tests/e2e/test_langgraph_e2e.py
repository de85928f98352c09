"""
LangGraph served by `AgentApp` under a real uvicorn, driven by the official client.

An interrupt answered by the client's own ``resume`` in a new client and a new server (only the
graph's checkpointer is shared), and a client that goes away mid-run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from support.node import aclient_run, assert_clean
from support.servers import E2E, serving
from test_adapter_langgraph import approval_graph, question

import ambient_runs as ar
from ambient_runs.adapters.langgraph import run_graph
from ambient_runs.asgi import AgentApp

pytestmark = E2E


async def drive(agent: Any, runs: Sequence[Mapping[str, Any]], **kw: Any) -> Any:
    async with serving(AgentApp(agent)) as url, asyncio.timeout(60):
        return await aclient_run(url, runs, **kw)


def client_input(run_id: str, **extra: Any) -> dict[str, Any]:
    return {"input": {"threadId": "lg-thread", "runId": run_id, "messages": [], **extra}}


async def test_the_clients_resume_continues_the_graph() -> None:
    """Run 1 pauses on interrupt(); a new client and server answer it with resume."""
    saver = InMemorySaver()
    seen: list[Any] = []

    async def agent(run: ar.Run) -> Any:
        final = await run_graph(approval_graph(saver, seen), question(), name="payments")
        return final["messages"][-1].content

    first = await drive(agent, [client_input("r1")])
    assert_clean(first["runs"][0])
    [pending] = first["pendingInterrupts"]
    assert pending["id"].startswith("langgraph:r1-sub-1:")
    second = await drive(
        agent,
        [
            client_input(
                "r2",
                resume=[
                    {
                        "interruptId": pending["id"],
                        "status": "resolved",
                        "payload": {"approved": True},
                    }
                ],
            )
        ],
        initial_messages=first["messages"],
    )
    [run2] = second["runs"]
    assert_clean(run2)
    assert [{"approved": True}] == seen
    assert "answer: {'approved': True}" == run2["runFinished"][0]["result"]
    assert [] == second["pendingInterrupts"]
    contents = [m.get("content") for m in second["messages"]]
    assert "May I pay?" in contents
    assert "answer: {'approved': True}" in contents


async def test_a_client_abort_cancels_the_graph() -> None:
    """The client goes away mid-stream: the running node is cancelled."""
    stopped = asyncio.Event()

    async def ticking(state: MessagesState) -> dict[str, Any]:
        try:
            while True:
                ar.say("tick")
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return {"messages": [AIMessage(content="never")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ticking", ticking)
    builder.add_edge(START, "ticking")
    graph = builder.compile()

    async def agent(run: ar.Run) -> Any:
        return await run_graph(graph, question(), name="ticker")

    result = await drive(agent, [{**client_input("r1"), "abortAfterEvents": 12}])
    assert result["runs"][0]["aborted"]
    async with asyncio.timeout(10):
        await stopped.wait()
