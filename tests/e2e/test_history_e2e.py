"""
End to end, the message history: `AgentApp` under a real uvicorn, the official
``@ag-ui/client@1.0.0`` ``HttpAgent`` over several runs of one thread, with and
without a thread store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from support.node import ClientRunResult, aclient_run, assert_clean
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.asgi import AgentApp

pytestmark = E2E

THREAD = "thread-history"

JsonDict = dict[str, Any]


def wire(messages: Sequence[ev.Message]) -> list[JsonDict]:
    return [ar.to_wire(m) for m in messages]


async def turn(url: str, run_id: str, messages: Sequence[JsonDict]) -> ClientRunResult:
    """One run of the thread by a fresh HttpAgent holding *messages* (as an app reloads one)."""
    async with asyncio.timeout(60):
        return await aclient_run(
            url,
            [{"input": {"threadId": THREAD, "runId": run_id}}],
            thread_id=THREAD,
            initial_messages=list(messages),
        )


def user(run_id: str, text: str) -> JsonDict:
    return {"id": f"{run_id}-user", "role": "user", "content": text}


class Recorder:
    """An agent that uses every kind of message, and keeps each run's history at its end."""

    def __init__(self) -> None:
        self.histories: list[tuple[ev.Message, ...]] = []

    async def __call__(self, run: ar.Run) -> None:
        asked = run.last_user_text() or ""
        ar.think(f"The user asked {asked!r}.")
        with ar.message() as lead:
            lead.write("Let me ")
            lead.write("check.")
        async with ar.subagent("researcher"):
            with ar.message() as found:
                for word in ("Found ", "two ", "flights, ", "café ", "東京."):
                    found.write(word)
            call = ar.tool_call("search", parent_message_id=found.id)
            call.args({"q": asked, "turn": len(self.histories)})
            call.result({"hits": 2})
        progress = ar.activity("progress", {"done": 1})
        progress.update({"done": 2})
        ar.say(f"Answer {len(self.histories) + 1}.")
        self.histories.append(run.messages)


class TestHistoryOverAThread:
    async def test_the_clients_messages_end_equal_to_the_runs_history_every_run(self) -> None:
        """Three runs of one thread with a store: client, run and store agree after each."""
        store = ar.MemoryThreadStore()
        agent = Recorder()
        app = AgentApp(agent, threads=store)
        held: list[JsonDict] = []
        async with serving(app) as url:
            for n, text in enumerate(("Flights to Tokyo?", "The cheaper one.", "Book it.")):
                run_id = f"r{n}"
                result = await turn(url, run_id, [*held, user(run_id, text)])
                [run] = result["runs"]
                assert_clean(run)
                history = agent.histories[-1]
                assert wire(history) == result["messages"]
                assert history == await store.load(THREAD)
                # The run started from the thread (activity messages included, which the
                # client never sends back) and the new message; the client held all of it,
                # so no MESSAGES_SNAPSHOT went out.
                assert [*held, user(run_id, text)] == wire(history)[: len(held) + 1]
                assert "MESSAGES_SNAPSHOT" not in [e["type"] for e in run["events"]]
                held = result["messages"]

        kinds = [m["role"] for m in held]
        assert 3 == kinds.count("user")
        assert {"user", "assistant", "tool", "reasoning", "activity"} == set(kinds)
        subagents = {m.get("subagentRunId") for m in held if m["role"] == "tool"}
        assert 3 == len(subagents)  # one researcher invocation a run, each attributed

    async def test_a_client_holding_nothing_gets_the_whole_thread(self) -> None:
        """A new device that sends only its new message ends holding the stored thread."""
        store = ar.MemoryThreadStore()
        agent = Recorder()
        app = AgentApp(agent, threads=store)
        async with serving(app) as url:
            first = await turn(url, "r0", [user("r0", "Flights to Tokyo?")])
            fresh = await turn(url, "r1", [user("r1", "Still there?")])

        [run] = fresh["runs"]
        assert_clean(run)
        history = agent.histories[-1]
        stored = await store.load(THREAD)
        assert (history, wire(history)) == (stored, fresh["messages"])
        assert first["messages"] == fresh["messages"][: len(first["messages"])]
        types = [e["type"] for e in run["events"]]
        assert ["RUN_STARTED", "MESSAGES_SNAPSHOT", "MESSAGES_SNAPSHOT"] == types[:3]


class TestPublishMessages:
    async def test_a_snapshot_mid_message_and_before_an_interrupt(self) -> None:
        """Published mid-message and before pausing: the client ends with the run's history."""
        histories: list[tuple[ev.Message, ...]] = []

        async def agent(run: ar.Run) -> None:
            with ar.subagent("booker"), ar.message() as m:
                m.write("Booking ")
                ar.publish_messages()
                m.write("the flight.")
            ar.publish_messages()
            histories.append(run.messages)
            raise ar.Interrupted(ar.interrupt("approval", message="Book it?"))

        async with serving(AgentApp(agent, record_messages=True)) as url:
            result = await turn(url, "r0", [user("r0", "Book it")])

        [run] = result["runs"]
        assert_clean(run)
        assert wire(histories[0]) == result["messages"]
        assert 1 == len(result["pendingInterrupts"])
        types = [e["type"] for e in run["events"]]
        assert 2 == types.count("MESSAGES_SNAPSHOT")
