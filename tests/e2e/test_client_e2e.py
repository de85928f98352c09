"""
End to end: agents served by `AgentApp` under a real uvicorn, driven by the real client.

Each test starts uvicorn on 127.0.0.1 (ephemeral port) in the test's event loop and runs
``HttpAgent.runAgent`` from ``@ag-ui/client@1.0.0`` against it under Node, then asserts on
what the client ends up with: its messages, state, pending interrupts, the events its
subscribers saw, and its errors.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from support.events import types_of
from support.node import ClientRunResult, aclient_run, assert_clean
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs._stream import Agent
from ambient_runs.asgi import AgentApp

pytestmark = E2E

THREAD = "thread-e2e"

JsonDict = dict[str, Any]


def user(text: str, id: str = "u1") -> JsonDict:
    """Return a user message in wire form."""
    return {"id": id, "role": "user", "content": text}


def client_input(run_id: str, *messages: JsonDict, **extra: Any) -> JsonDict:
    """Return one run for the client harness: a partial RunAgentInput."""
    return {"input": {"threadId": THREAD, "runId": run_id, "messages": list(messages), **extra}}


async def drive(
    agent: Agent, runs: Sequence[Mapping[str, Any]], **app_options: Any
) -> ClientRunResult:
    """Serve *agent* with uvicorn and perform *runs* with the official client."""
    async with serving(AgentApp(agent, **app_options)) as url:
        async with asyncio.timeout(60):
            return await aclient_run(url, runs)


async def chunks(parts: Sequence[str], pause: float = 0.002) -> AsyncIterator[str]:
    """Yield *parts* with a pause before each: a model's token stream."""
    for part in parts:
        await asyncio.sleep(pause)
        yield part


class TestStreamedText:
    async def test_client_assembles_the_streamed_message(self) -> None:
        """Deltas streamed over SSE arrive as separate events and add up to one message."""

        async def agent(run: ar.Run) -> None:
            with ar.message(id="answer") as m:
                await m.astream(chunks(["Hello", ", ", "streaming", " world."]))

        result = await drive(agent, [client_input("r1", user("hi"))])

        [run] = result["runs"]
        assert_clean(run)
        assert 4 == types_of(run["events"]).count("TEXT_MESSAGE_CONTENT")
        assert [
            user("hi"),
            {"id": "answer", "role": "assistant", "content": "Hello, streaming world."},
        ] == result["messages"]


class TestToolCalls:
    async def test_client_attaches_calls_and_results_to_the_conversation(self) -> None:
        """A tool call joins its assistant message; its result becomes a tool message."""

        async def agent(run: ar.Run) -> None:
            mid = ar.say("Let me check the weather.", id="m1")
            with ar.tool_call("get_weather", id="call-1", parent_message_id=mid) as call:
                call.args({"city": "Paris"})
            await asyncio.sleep(0.01)
            call.result({"temp_c": 21})
            ar.say("It is 21 °C in Paris.", id="m2")

        result = await drive(agent, [client_input("r1", user("weather?"))])

        [run] = result["runs"]
        assert_clean(run)
        _, assistant, tool, final = result["messages"]
        [call] = assistant["toolCalls"]
        assert ("call-1", "get_weather", {"city": "Paris"}) == (
            call["id"],
            call["function"]["name"],
            json.loads(call["function"]["arguments"]),
        )
        assert ("tool", "call-1", {"temp_c": 21}) == (
            tool["role"],
            tool["toolCallId"],
            json.loads(tool["content"]),
        )
        assert ("m2", "It is 21 °C in Paris.") == (final["id"], final["content"])


class TestReasoning:
    async def test_client_keeps_the_reasoning_message(self) -> None:
        """A streamed reasoning block becomes a reasoning message before the answer."""

        async def agent(run: ar.Run) -> None:
            with ar.reasoning(id="thought") as r:
                r.write("The user wants ")
                await asyncio.sleep(0.005)
                r.write("a haiku.")
            ar.say("Autumn moonlight...", id="answer")

        result = await drive(agent, [client_input("r1", user("a haiku"))])

        [run] = result["runs"]
        assert_clean(run)
        assert [
            {"id": "thought", "role": "reasoning", "content": "The user wants a haiku."},
            {"id": "answer", "role": "assistant", "content": "Autumn moonlight..."},
        ] == result["messages"][1:]


class TestState:
    async def test_client_applies_the_snapshot_then_the_deltas(self) -> None:
        """One STATE_SNAPSHOT, then JSON Patch deltas; the client ends with the agent's state."""

        async def agent(run: ar.Run) -> None:
            run.set_state({"brief": "Compare three energy sources. " * 4, "found": []})
            for source in ("solar", "wind", "hydro"):
                await asyncio.sleep(0.005)
                run.update_state(lambda s, source=source: s["found"].append(source))

        result = await drive(agent, [client_input("r1", user("compare"))])

        [run] = result["runs"]
        assert_clean(run)
        state_events = [t for t in types_of(run["events"]) if t.startswith("STATE_")]
        assert ["STATE_SNAPSHOT", "STATE_DELTA", "STATE_DELTA", "STATE_DELTA"] == state_events
        assert {
            "brief": "Compare three energy sources. " * 4,
            "found": ["solar", "wind", "hydro"],
        } == result["state"]


@ar.subagent("researcher", description="Looks one topic up")
async def researcher(topic: str, pause: float) -> JsonDict:
    """Stream a few words on *topic*, pausing between them, and return a result."""
    with ar.message() as m:
        for word in f"Findings on {topic} are in.".split():
            m.write(word + " ")
            await asyncio.sleep(pause)
    return {"topic": topic}


class TestConcurrentSubagents:
    async def test_client_sees_three_interleaved_attributed_subagents(self) -> None:
        """Three concurrent researchers: announced, interleaved, attributed and finished."""

        async def agent(run: ar.Run) -> None:
            ar.say("Starting three researchers.")
            async with asyncio.TaskGroup() as tg:
                for topic, pause in (("solar", 0.003), ("wind", 0.005), ("hydro", 0.004)):
                    tg.create_task(researcher(topic, pause))
            ar.say("All three reported.")

        result = await drive(agent, [client_input("r1", user("research"))])

        [run] = result["runs"]
        assert_clean(run)
        applied = run["appliedEvents"]
        started = [e for e in applied if e["type"] == "SUBAGENT_STARTED"]
        finished = {e["subagentRunId"]: e for e in applied if e["type"] == "SUBAGENT_FINISHED"}
        ids = [e["subagentRunId"] for e in started]
        assert (["researcher"] * 3, 3) == ([e["name"] for e in started], len(set(ids)))
        assert set(ids) == set(finished)
        by_owner = {
            m["subagentRunId"]: m["content"] for m in result["messages"] if "subagentRunId" in m
        }
        topics = {finished[i]["result"]["topic"]: by_owner[i] for i in ids}
        assert {t: f"Findings on {t} are in. " for t in ("solar", "wind", "hydro")} == topics
        owners = [e.get("subagentRunId") for e in applied if e["type"] == "TEXT_MESSAGE_CONTENT"]
        switches = sum(a != b for a, b in itertools.pairwise(owners))
        assert switches > 3, owners  # interleaved, not one researcher after another
        parent = [m["content"] for m in result["messages"][1:] if "subagentRunId" not in m]
        assert ["Starting three researchers.", "All three reported."] == parent


class TestInterruptAndResume:
    async def test_second_run_resumes_the_suspended_subagent(self) -> None:
        """Run 1 pauses on an interrupt; run 2 answers it and re-announces the same subagent."""
        checkpoints: dict[str, str] = {}  # the server's store: interrupt id -> invocation id

        async def agent(run: ar.Run) -> None:
            entry = run.resume_for("approve-booking")
            if entry is None:
                with ar.subagent("booker") as booker:
                    assert booker.id is not None
                    checkpoints["approve-booking"] = booker.id
                    ar.say("I found a flight at 9:40.")
                    raise ar.Interrupted(
                        ar.Interrupt(
                            id="approve-booking", reason="confirmation", message="Book it?"
                        )
                    )
            with ar.subagent("booker", id=checkpoints[entry.interrupt_id]):
                approved = entry.status == "resolved" and entry.payload == {"approved": True}
                ar.say("Booked." if approved else "Not booked.", id="booked")

        answer = {"interruptId": "approve-booking", "status": "resolved"}
        result = await drive(
            agent,
            [
                client_input("r1", user("book me a flight")),
                {"input": {"runId": "r2", "resume": [{**answer, "payload": {"approved": True}}]}},
            ],
        )

        first, second = result["runs"]
        assert_clean(first)
        assert_clean(second)
        sid = checkpoints["approve-booking"]
        [finished] = first["runFinished"]
        assert "interrupt" == finished["outcome"]
        [pending] = first["pendingInterrupts"]
        assert ("approve-booking", sid) == (pending["id"], pending["subagentRunId"])
        suspended = [e for e in first["appliedEvents"] if e["type"] == "SUBAGENT_FINISHED"]
        assert [{"type": "suspended", "interruptIds": ["approve-booking"]}] == [
            e["outcome"] for e in suspended
        ]
        assert [{**answer, "payload": {"approved": True}}] == second["request"]["body"]["resume"]
        announced = [
            e["subagentRunId"] for e in second["appliedEvents"] if e["type"] == "SUBAGENT_STARTED"
        ]
        assert [sid] == announced
        assert {
            "id": "booked",
            "role": "assistant",
            "content": "Booked.",
            "subagentRunId": sid,
        } in (result["messages"])
        assert [] == result["pendingInterrupts"]


class TestAgentError:
    async def test_client_gets_run_error_and_run_agent_resolves(self) -> None:
        """An agent that raises ends the stream with RUN_ERROR; runAgent still resolves."""

        async def agent(run: ar.Run) -> None:
            ar.say("Calling the model...", id="m1")
            msg = "the model is down"
            raise ConnectionError(msg)

        result = await drive(agent, [client_input("r1", user("hi"))], expose_errors=True)

        [run] = result["runs"]
        assert_clean(run)
        assert [
            {"type": "RUN_ERROR", "message": "the model is down", "code": "ConnectionError"}
        ] == run["runErrors"]
        assert "RUN_ERROR" == run["events"][-1]["type"]
        assert {"id": "m1", "role": "assistant", "content": "Calling the model..."} == result[
            "messages"
        ][-1]


class TestClientAbort:
    async def test_abort_mid_stream_cancels_the_agent_task(self) -> None:
        """The client aborts after a few events; the server cancels the agent at once."""
        cancelled = asyncio.Event()
        loop = asyncio.get_running_loop()

        async def agent(run: ar.Run) -> None:
            try:
                with ar.message() as m:
                    for i in range(1000):  # ten seconds at most
                        m.write(f"{i} ")
                        await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async with serving(AgentApp(agent)) as url:
            async with asyncio.timeout(60):
                result = await aclient_run(
                    url, [{**client_input("r1", user("go")), "abortAfterEvents": 5}]
                )
            returned = loop.time()
            async with asyncio.timeout(5):
                await cancelled.wait()
            waited = loop.time() - returned
            leftover = [
                t for t in asyncio.all_tasks() if t.get_name().startswith("ambient_runs.stream")
            ]

        [run] = result["runs"]
        assert run["aborted"]
        assert "abort" == run["events"][-1].get("code")
        assert waited < 1.0
        assert [] == leftover


class TestRejectedRequest:
    async def test_client_reports_the_http_error(self) -> None:
        """A request refused before the stream (413) fails runAgent with the JSON payload."""

        async def agent(run: ar.Run) -> None:
            ar.say("never")

        result = await drive(agent, [client_input("r1", user("x" * 100))], max_body=64)

        [run] = result["runs"]
        assert 413 == run["errorStatus"]
        assert "request body too large" == run["errorPayload"]["error"]
        assert [] == run["events"]
