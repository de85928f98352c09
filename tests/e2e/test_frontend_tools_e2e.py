"""
End to end, frontend tools: `AgentApp` under a real uvicorn calls a tool the official
``@ag-ui/client@1.0.0`` offers, the client runs it, and the next run continues from its result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from support.events import types_of
from support.node import ClientRunResult, aclient_run, assert_clean
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs.asgi import AgentApp

pytestmark = E2E

THREAD = "thread-tools"
CONFIRM = {
    "name": "confirm",
    "description": "Ask the user to confirm something",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
}


async def drive(app: AgentApp, runs: Sequence[Mapping[str, Any]]) -> ClientRunResult:
    """Serve *app* with uvicorn and perform *runs* with the official client."""
    async with serving(app) as url:
        async with asyncio.timeout(60):
            return await aclient_run(url, runs)


async def booking_agent(run: ar.Run) -> str:
    """Ask the client to confirm (in a subagent); once it has answered, act on the answer."""
    for answer in run.tool_results("confirm"):
        with ar.subagent("booker"):
            if answer.value()["approved"]:
                ar.say(f"Booked: {answer.arguments()['question']}")
            else:
                ar.say("Not booked.")
        return "done"
    ar.say("Let me check with you first.")

    @ar.subagent("booker")
    async def ask() -> None:
        ar.say("Shall I book the 9:40?")
        ar.call_frontend_tool("confirm", {"question": "Book the 9:40?"})
        ar.say("never said")  # pragma: no cover - the call ends the agent

    await ask()
    return "unreachable"  # pragma: no cover


class TestTheWholeLoop:
    async def test_call_client_executes_next_run_continues_with_the_result(self) -> None:
        """Run 1 calls the client's tool; the client answers it; run 2 continues from it."""
        runs = [
            {
                "input": {"threadId": THREAD, "runId": "f1", "tools": [CONFIRM]},
                "answerTools": {"confirm": {"approved": True}},
            },
            {"input": {"runId": "f2", "tools": [CONFIRM]}},
        ]
        runs[0]["input"]["messages"] = [{"id": "u1", "role": "user", "content": "Book me a train"}]

        result = await drive(AgentApp(booking_agent), runs)

        asked, continued = result["runs"]
        assert_clean(asked)
        assert_clean(continued)
        # Run 1: the call went out attributed to the subagent, with no result, pending.
        assert "TOOL_CALL_RESULT" not in types_of(asked["events"])
        calls = [e for e in asked["events"] if e["type"].startswith("TOOL_CALL")]
        assert [
            ("TOOL_CALL_START", "f1-sub-1"),
            ("TOOL_CALL_ARGS", "f1-sub-1"),
            ("TOOL_CALL_END", "f1-sub-1"),
        ] == [(e["type"], e.get("subagentRunId")) for e in calls]
        assert (
            [{"outcome": "success", "pendingToolCallIds": ["f1-tool-1"]}]
            == asked["runFinished"]
            == asked["runFinished"]
        )
        end = asked["events"][-1]
        assert {"type": "success", "pendingToolCallIds": ["f1-tool-1"]} == end["outcome"]
        # The client ran it.
        assert [
            {
                "toolCallId": "f1-tool-1",
                "name": "confirm",
                "arguments": {"question": "Book the 9:40?"},
                "content": '{"approved":true}',
            }
        ] == asked["executedTools"]
        # Run 2 was sent the tool message and continued from it.
        sent = continued["request"]["body"]["messages"]
        assert {
            "id": "f1-tool-1-result",
            "role": "tool",
            "toolCallId": "f1-tool-1",
            "content": '{"approved":true}',
        } in sent
        assert [{"outcome": "success", "result": "done", "pendingToolCallIds": []}] == continued[
            "runFinished"
        ]
        booker = [
            m["content"]
            for m in result["messages"]
            if m["role"] == "assistant" and m.get("content")
        ]
        assert [
            "Let me check with you first.",
            "Shall I book the 9:40?",
            "Booked: Book the 9:40?",
        ] == booker
        # The client's history: the call sits in an assistant message owned by the subagent.
        [holder] = [m for m in result["messages"] if m.get("toolCalls")]
        assert ("f1-sub-1", "confirm") == (
            holder.get("subagentRunId"),
            holder["toolCalls"][0]["function"]["name"],
        )
        assert {"question": "Book the 9:40?"} == json.loads(
            holder["toolCalls"][0]["function"]["arguments"]
        )

    async def test_an_unanswered_call_leaves_the_agent_to_ask_again(self) -> None:
        """A client that does not answer: tool_results() is empty and the agent asks again."""
        runs = [
            {
                "input": {
                    "threadId": THREAD,
                    "runId": "n1",
                    "tools": [CONFIRM],
                    "messages": [{"id": "u1", "role": "user", "content": "Book"}],
                }
            },
            {"input": {"runId": "n2", "tools": [CONFIRM]}},
        ]

        result = await drive(AgentApp(booking_agent), runs)

        for run in result["runs"]:
            assert_clean(run)
            assert [] == run["executedTools"]
        assert [["n1-tool-1"], ["n2-tool-1"]] == [
            r["runFinished"][0]["pendingToolCallIds"] for r in result["runs"]
        ]

    async def test_a_tool_the_client_did_not_offer_fails_the_run(self) -> None:
        """Calling a tool the client did not send: RUN_ERROR with code UnknownToolError."""
        runs = [{"input": {"threadId": THREAD, "runId": "u1"}}]

        result = await drive(AgentApp(booking_agent), runs)

        [run] = result["runs"]
        assert (None, None) == (run["error"], run["runFailed"])
        [error] = run["runErrors"]
        assert "UnknownToolError" == error["code"]
        assert "TOOL_CALL_START" not in types_of(run["events"])

    async def test_a_streamed_frontend_call_beside_a_backend_one(self) -> None:
        """tool_call(name, frontend=True) streams its args; only it is pending, the run goes on."""

        async def agent(run: ar.Run) -> None:
            with ar.message() as text:
                text.write("Searching, then showing.")
            with ar.tool_call("search", parent_message_id=text.id) as search:
                search.args({"q": "trains"})
            search.result("3 trains")
            with ar.tool_call("confirm", frontend=True, parent_message_id=text.id) as call:
                call.args('{"question": ')
                call.args('"Book one?"}')
            ar.say("Over to you.")

        runs = [
            {
                "input": {"threadId": THREAD, "runId": "s1", "tools": [CONFIRM]},
                "answerTools": {"confirm": "yes"},
            }
        ]

        result = await drive(AgentApp(agent), runs)

        [run] = result["runs"]
        assert_clean(run)
        assert ["s1-tool-2"] == run["runFinished"][0]["pendingToolCallIds"]
        assert [("s1-tool-2", "confirm", {"question": "Book one?"})] == [
            (t["toolCallId"], t["name"], t["arguments"]) for t in run["executedTools"]
        ]
        [holder] = [m for m in result["messages"] if m.get("toolCalls")]
        assert ["search", "confirm"] == [c["function"]["name"] for c in holder["toolCalls"]]
