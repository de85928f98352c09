"""
End to end, the conversation both ways: `AgentApp` under a real uvicorn, driven by the
official ``@ag-ui/client@1.0.0`` over several runs of one thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pydantic
from support.events import types_of
from support.node import ClientRunResult, aclient_run, assert_clean
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs.asgi import AgentApp

pytestmark = E2E

THREAD = "thread-convo"


async def drive(
    app: AgentApp, runs: Sequence[Mapping[str, Any]], **client: Any
) -> ClientRunResult:
    """Serve *app* with uvicorn and perform *runs* with the official client."""
    async with serving(app) as url:
        async with asyncio.timeout(60):
            return await aclient_run(url, runs, **client)


@attrs.define
class Todo:
    title: str
    done: bool = False


@attrs.define
class TodoList:
    owner: str
    items: list[Todo] = attrs.Factory(list)
    done_count: int = 0


class TestSharedState:
    async def test_client_state_equals_the_agents_after_every_run(self) -> None:
        """Each run starts from the client's state and leaves the client holding the agent's."""
        seen: list[Any] = []
        after: list[Any] = []

        async def agent(run: ar.Run) -> None:
            todos: TodoList = run.state()
            seen.append(json.loads(ar.encode_json(todos)))
            action = run.forwarded_props or {}
            if "add" in action:
                run.update_state(lambda s: s.items.append(Todo(action["add"])))
            if "done" in action:
                todos.items[action["done"]].done = True
                todos.done_count += 1
                run.publish_state()
            run.publish_state()  # nothing new: nothing sent
            after.append(json.loads(ar.encode_json(run.state())))

        app = AgentApp(agent, state_type=TodoList)
        steps = [{"add": "milk"}, {"add": "eggs"}, {"done": 0}, {}]
        runs = [
            {"input": {"threadId": THREAD, "runId": f"r{n}", "forwardedProps": step}}
            for n, step in enumerate(steps)
        ]
        owner = "Ada Lovelace, Countess of Lovelace"  # long enough that deltas are smaller
        result = await drive(app, runs, initial_state={"owner": owner, "items": []})

        for run, state in zip(result["runs"], after, strict=True):
            assert_clean(run)
            assert state == run["state"]
        # Every run began from what the client held, the one before it's end state.
        assert [{"owner": owner, "items": [], "doneCount": 0}, *after[:-1]] == seen
        assert {
            "owner": owner,
            "items": [{"title": "milk", "done": True}, {"title": "eggs", "done": False}],
            "doneCount": 1,
        } == result["state"]
        kinds = [types_of(run["events"]) for run in result["runs"]]
        # Later runs patch what the client holds; a run that changes nothing sends nothing.
        assert [["STATE_DELTA"]] * 2 + [[]] == [
            [t for t in k if t.startswith("STATE")] for k in kinds[1:]
        ]

    async def test_a_state_that_does_not_convert_is_a_422_naming_the_field(self) -> None:
        async def agent(run: ar.Run) -> None:
            ar.say("never")

        app = AgentApp(agent, state_type=TodoList)
        runs = [{"input": {"threadId": THREAD, "runId": "bad"}}]
        result = await drive(app, runs, initial_state={"owner": 7})

        [run] = result["runs"]
        assert 422 == run["errorStatus"]
        assert {
            "error": "invalid state",
            "detail": ["$.state.owner: expected a string, got int"],
        } == run["errorPayload"]


class TestInterruptsResumeAnywhere:
    async def test_a_fresh_server_continues_the_suspended_invocation(self) -> None:
        """Run 1 pauses in a subagent on one server; run 2, on another, continues it by id."""

        async def agent(run: ar.Run) -> str:
            for answer in run.resume:
                found = run.resume_for(answer.interrupt_id)
                assert found is not None
                assert found.subagent_name is not None
                with ar.subagent(found.subagent_name, id=found.subagent_run_id):
                    ar.say(f"Booked: {found.payload['approved']}")
                return "done"

            @ar.subagent("booker")
            def book() -> None:
                ar.say("Shall I book it?")
                raise ar.Interrupted(ar.interrupt("approval", message="Book the flight?"))

            try:
                book()
            except ar.Interrupted:
                ar.say("Waiting for you.")  # a caught interrupt: the run still pauses on it
            return "asked"

        first = await drive(AgentApp(agent), [{"input": {"threadId": THREAD, "runId": "p1"}}])
        [paused] = first["runs"]
        assert_clean(paused)
        [pending] = first["pendingInterrupts"]
        assert "approval" == pending["reason"]
        end = paused["events"][-1]
        assert ("RUN_FINISHED", "interrupt", "asked") == (
            end["type"],
            end["outcome"]["type"],
            end["result"],
        )

        resume = [
            {"interruptId": pending["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        second = await drive(
            AgentApp(agent),  # another app: no memory of the first run
            [{"input": {"threadId": THREAD, "runId": "p2", "resume": resume}}],
            initial_messages=first["messages"],
        )
        [resumed] = second["runs"]
        assert_clean(resumed)
        assert [] == second["pendingInterrupts"]
        booker = [m for m in second["messages"] if m.get("subagentRunId")]
        assert ["Shall I book it?", "Booked: True"] == [m["content"] for m in booker]
        assert {"p1-sub-1"} == {m["subagentRunId"] for m in booker}


class TestTokenUsage:
    async def test_the_client_accepts_usage_reports_and_totals(self) -> None:
        @ar.subagent("researcher")
        async def research() -> None:
            ar.usage(provider="openai", model="gpt-4o", input_tokens=120, output_tokens=30)
            ar.say("found it")

        async def agent(run: ar.Run) -> None:
            await asyncio.gather(research(), research())
            ar.usage(provider="openai", model="gpt-4o", output_tokens=5, total_tokens=5)

        result = await drive(AgentApp(agent), [{"input": {"threadId": THREAD, "runId": "u1"}}])
        [run] = result["runs"]
        assert_clean(run)
        customs = [e for e in run["appliedEvents"] if e["type"] == "CUSTOM"]
        assert 3 == len(customs)
        assert {"ambient_runs.usage"} == {e["name"] for e in customs}
        end = run["events"][-1]
        assert "RUN_FINISHED" == end["type"]
        assert [
            {
                "provider": "openai",
                "model": "gpt-4o",
                "inputTokens": 240,
                "outputTokens": 65,
                "totalTokens": 5,
            }
        ] == end["usage"]


class Priority(enum.Enum):
    HIGH = "high"


@dataclasses.dataclass
class Finding:
    topic: str
    seen: datetime.date
    score: decimal.Decimal
    source: uuid.UUID
    priority: Priority


class Report(pydantic.BaseModel):
    title: str
    at: datetime.datetime
    tags: tuple[str, ...]


FINDING = Finding(
    "ag-ui",
    datetime.date(2026, 12, 3),
    decimal.Decimal("0.95"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    Priority.HIGH,
)
FINDING_JSON = {
    "topic": "ag-ui",
    "seen": "2026-12-03",
    "score": "0.95",
    "source": "12345678-1234-5678-1234-567812345678",
    "priority": "high",
}


class TestPythonValuesAndHandles:
    """Sections 2 and 8: Python values reach the client in their JSON form; a handle's reach."""

    async def test_the_client_reads_the_json_form_of_python_values(self) -> None:
        report = Report(title="done", at=datetime.datetime(2026, 12, 3, 9, 30), tags=("a", "b"))

        @ar.subagent("researcher")
        async def research() -> Finding:
            with ar.tool_call("lookup") as call:
                call.args(FINDING)
                call.result([FINDING])
            return FINDING

        async def agent(run: ar.Run) -> None:
            found = await research()
            run.set_state({"finding": found, "report": report})
            run.finish_with(report)

        result = await drive(AgentApp(agent), [{"input": {"threadId": THREAD, "runId": "v1"}}])
        [run] = result["runs"]
        assert_clean(run)
        report_json = {"title": "done", "at": "2026-12-03T09:30:00", "tags": ["a", "b"]}
        assert {"finding": FINDING_JSON, "report": report_json} == result["state"]
        assert report_json == run["result"]
        [call] = [c for m in result["messages"] for c in m.get("toolCalls", ())]
        assert FINDING_JSON == json.loads(call["function"]["arguments"])
        [tool] = [m for m in result["messages"] if m["role"] == "tool"]
        assert [FINDING_JSON] == json.loads(tool["content"])
        finished = [e for e in run["events"] if e["type"] == "SUBAGENT_FINISHED"]
        assert [FINDING_JSON] == [e["result"] for e in finished]

    async def test_a_handle_reaches_the_run_and_a_terminator_restores_attribution(
        self,
    ) -> None:
        async def agent(run: ar.Run) -> None:
            with ar.subagent("helper") as helper:
                helper.say(f"you said {helper.last_user_text()} in {helper.thread_id}")
                helper.set_state({"by": helper.id, "cancelled": helper.is_cancelled})
                helper.finish_with("ok")
                ar.say("after the finish")  # the enclosing scope's again

        body = {
            "threadId": THREAD,
            "runId": "h1",
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        }
        result = await drive(AgentApp(agent), [{"input": body}])
        [run] = result["runs"]
        assert_clean(run)
        said = {
            m["content"]: m.get("subagentRunId")
            for m in result["messages"]
            if m["role"] == "assistant"
        }
        helper_id = result["state"]["by"]
        assert {f"you said hello in {THREAD}": helper_id, "after the finish": None} == said
        assert {"by": helper_id, "cancelled": False} == result["state"]
