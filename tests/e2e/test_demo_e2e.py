"""End to end: the demo's research agent, served by uvicorn, run by the real client."""

from __future__ import annotations

import asyncio

from support.node import aclient_run
from support.servers import E2E, serving

from ambient_runs import to_wire
from ambient_runs._demo import CONFIRM_TOOL, research_agent
from ambient_runs.asgi import AgentApp

pytestmark = E2E


class TestDemoServed:
    async def test_client_accepts_the_demo_run(self) -> None:
        """The real client runs the demo cleanly: three researchers, full state, the answer."""
        question = {"id": "u1", "role": "user", "content": "Heat pump or boiler?"}
        run_input = {"threadId": "demo", "runId": "demo-1", "messages": [question]}

        async with serving(AgentApp(research_agent(pace=0.2), keep_alive=15)) as url:
            async with asyncio.timeout(60):
                result = await aclient_run(url, [{"input": run_input}])

        [run] = result["runs"]
        assert (None, None, [], []) == (
            run["error"],
            run["runFailed"],
            run["warnings"],
            run["consoleErrors"],
        )
        started = [e for e in run["appliedEvents"] if e["type"] == "SUBAGENT_STARTED"]
        assert ["researcher"] * 3 == [e["name"] for e in started]
        state = result["state"]
        assert ("Heat pump or boiler?", "answered", 6) == (
            state["question"],
            state["status"],
            state["sources"],
        )
        assert {"efficiency", "cost", "emissions"} == set(state["findings"])
        researched = {m.get("subagentRunId") for m in result["messages"] if m["role"] == "tool"}
        assert {e["subagentRunId"] for e in started} == researched
        [finished] = run["runFinished"]
        answer = result["messages"][-1]
        assert (finished["result"]["answer"], "assistant") == (answer["content"], answer["role"])
        assert "subagentRunId" not in answer

    async def test_a_second_run_starts_from_the_clients_state_and_reports_usage(self) -> None:
        """The demo keeps what the client holds (``asked``) and bills each run's tokens."""
        first = {"id": "u1", "role": "user", "content": "Heat pump or boiler?"}
        second = {"id": "u2", "role": "user", "content": "And in a flat?"}
        runs = [
            {"input": {"threadId": "demo", "runId": "d1", "messages": [first]}},
            {"input": {"threadId": "demo", "runId": "d2", "messages": [first, second]}},
        ]
        async with serving(AgentApp(research_agent(pace=0), keep_alive=15)) as url:
            async with asyncio.timeout(60):
                result = await aclient_run(url, runs, initial_state={"asked": ["Earlier?"]})

        for run in result["runs"]:
            assert (None, None, [], []) == (
                run["error"],
                run["runFailed"],
                run["warnings"],
                run["consoleErrors"],
            )
            [usage] = run["events"][-1]["usage"]
            assert ("scripted", 240) == (usage["provider"], usage["inputTokens"])
        assert ["Earlier?", "Heat pump or boiler?", "And in a flat?"] == result["state"]["asked"]

    async def test_offered_confirm_the_demo_asks_and_the_next_run_records_the_answer(
        self,
    ) -> None:
        """A client offering `confirm`: run 1 asks to save, the client says yes, run 2 saves."""
        confirm = to_wire(CONFIRM_TOOL)
        question = {"id": "u1", "role": "user", "content": "Heat pump or boiler?"}
        runs = [
            {
                "input": {
                    "threadId": "demo",
                    "runId": "c1",
                    "messages": [question],
                    "tools": [confirm],
                },
                "answerTools": {"confirm": {"confirmed": True}},
            },
            {"input": {"runId": "c2", "tools": [confirm]}},
        ]
        async with serving(AgentApp(research_agent(pace=0), keep_alive=15)) as url:
            async with asyncio.timeout(60):
                result = await aclient_run(url, runs)

        asked, saved = result["runs"]
        for run in (asked, saved):
            assert (None, None, [], []) == (
                run["error"],
                run["runFailed"],
                run["warnings"],
                run["consoleErrors"],
            )
        [finished] = asked["runFinished"]
        [executed] = asked["executedTools"]
        assert ([executed["toolCallId"]], {"question": "Save this answer to your notes?"}) == (
            finished["pendingToolCallIds"],
            executed["arguments"],
        )
        assert "SUBAGENT_STARTED" not in [e["type"] for e in saved["events"]]
        assert ("done", True) == (result["state"]["status"], result["state"]["saved"])
        assert "Saved to your notes." == result["messages"][-1]["content"]
