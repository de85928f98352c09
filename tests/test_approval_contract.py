"""
One approval contract for every adapter (issue 33): the same question, the same answer.

Parametrised over the approval adapters (pydantic-ai, the Agents SDK) and each
of them behind ``http.relay``: an approval is ``reason: "tool_call"`` with the
streamed ``toolCallId``, a readable ``message`` and one ``responseSchema``;
the payload ``{"approved": bool, "message"?: str, "overrideArgs"?: object}``
means the same everywhere, and anything else is refused (deny by default)
with ``RUN_ERROR interrupt_payload`` while the interrupt stays answerable.
LangGraph's own ``interrupt(value)`` is ``reason: "input_required"`` with the
value at ``metadata.ambient_runs.value``. Every stream is judged by the
official client.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.resume_contract import APPROVALS, KINDS, Kind, accepted, post

from ambient_runs.adapters._resume import approval_schema
from ambient_runs.asgi import AgentApp
from ambient_runs.continuations import MemoryContinuations

JsonDict = dict[str, Any]

NAMES = list(APPROVALS)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


class Turns:
    """One app and one paused first turn: answer it as a client would, turn after turn."""

    def __init__(self, kind: Kind) -> None:
        self.app = AgentApp(kind.make_agent(), continuations=MemoryContinuations())
        self.turn = 1
        self.first: list[JsonDict] = []
        self.messages: list[JsonDict] = []

    async def pause(self) -> list[JsonDict]:
        self.first = await post(self.app, "r1")
        [verdict] = accepted(self.first)
        self.messages = verdict["messages"] or []
        interrupts: list[JsonDict] = self.first[-1]["outcome"]["interrupts"]
        return interrupts

    async def answer(self, entries: list[JsonDict]) -> list[JsonDict]:
        self.turn += 1
        events = await post(self.app, f"r{self.turn}", messages=self.messages, resume=entries)
        accepted(events, messages=self.messages)
        return events


def entries(interrupts: list[JsonDict], **answer: Any) -> list[JsonDict]:
    """buildResumeArray's entries: every interrupt answered alike."""
    return [{"interruptId": i["id"], **answer} for i in interrupts]


def results_for(interrupts: list[JsonDict], events: list[JsonDict]) -> list[str]:
    asked = {i["toolCallId"] for i in interrupts}
    return [
        e["content"]
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in asked
    ]


@pytest.mark.parametrize("name", NAMES)
class TestOneApprovalContract:
    async def test_the_question(self, name: str) -> None:
        """reason tool_call, the streamed call, a readable message and the shared schema."""
        kind = APPROVALS[name]
        turns = Turns(kind)

        interrupts = await turns.pause()

        streamed = {e["toolCallId"] for e in turns.first if e["type"] == "TOOL_CALL_START"}
        override = "pydantic-ai" in kind.name
        for interrupt in interrupts:
            assert "tool_call" == interrupt["reason"]
            assert interrupt["toolCallId"] in streamed
            assert interrupt["message"].startswith("Approve delete({")
            assert approval_schema(override=override) == interrupt["responseSchema"]
            assert ["approved"] == interrupt["responseSchema"]["required"]

    async def test_approved(self, name: str) -> None:
        """{"approved": true}: the call runs and the agent finishes."""
        kind = APPROVALS[name]
        turns = Turns(kind)
        interrupts = await turns.pause()

        events = await turns.answer(entries(interrupts, status="resolved", payload=kind.approve))

        assert [kind.approved] == results_for(interrupts, events)
        assert kind.result == events[-1]["result"]

    async def test_denied_with_a_message_the_model_reads(self, name: str) -> None:
        """{"approved": false, "message"}: the call does not run; its result is the message."""
        turns = Turns(APPROVALS[name])
        interrupts = await turns.pause()

        events = await turns.answer(
            entries(interrupts, status="resolved", payload={"approved": False, "message": "no"})
        )

        assert ["no"] == results_for(interrupts, events)
        assert "RUN_FINISHED" == events[-1]["type"]

    async def test_cancelled_denies(self, name: str) -> None:
        """status cancelled: the call does not run."""
        kind = APPROVALS[name]
        turns = Turns(kind)
        interrupts = await turns.pause()

        events = await turns.answer(entries(interrupts, status="cancelled"))

        assert "RUN_FINISHED" == events[-1]["type"]
        assert kind.approved not in results_for(interrupts, events)

    @pytest.mark.parametrize(
        "payload",
        [True, {"approved": "yes"}, None, {"approved": True, "message": 5}, ["approved"]],
        ids=["bare-true", "approved-text", "no-payload", "message-number", "a-list"],
    )
    async def test_a_payload_off_the_schema_is_refused_and_stays_answerable(
        self, name: str, payload: Any
    ) -> None:
        """Deny by default: RUN_ERROR interrupt_payload, nothing runs; a right answer works."""
        kind = APPROVALS[name]
        turns = Turns(kind)
        interrupts = await turns.pause()
        bad = {"status": "resolved"} | ({} if payload is None else {"payload": payload})

        refused = await turns.answer(entries(interrupts, **bad))
        then = await turns.answer(entries(interrupts, status="resolved", payload=kind.approve))

        assert ("RUN_ERROR", "interrupt_payload") == (refused[-1]["type"], refused[-1]["code"])
        assert [] == results_for(interrupts, refused)
        assert [kind.approved] == results_for(interrupts, then)

    async def test_override_args_where_the_framework_can(self, name: str) -> None:
        """overrideArgs: pydantic-ai runs the call with them; the Agents SDK cannot (refused)."""
        turns = Turns(APPROVALS[name])
        interrupts = await turns.pause()
        payload = {"approved": True, "overrideArgs": {"path": "/elsewhere"}}

        events = await turns.answer(entries(interrupts, status="resolved", payload=payload))

        if "pydantic-ai" in name:
            assert ["deleted /elsewhere"] == results_for(interrupts, events)
        else:
            assert ("RUN_ERROR", "interrupt_payload") == (events[-1]["type"], events[-1]["code"])


class TestFrameworkQuestions:
    async def test_langgraph_interrupt_is_input_required_with_its_value_in_one_place(
        self,
    ) -> None:
        """interrupt({"approve": 5}) in a tool: input_required, the value at ambient_runs.value."""
        turns = Turns(KINDS["langgraph"])

        [interrupt] = await turns.pause()

        assert "input_required" == interrupt["reason"]
        assert {"ambient_runs": {"value": {"approve": 5}}} == interrupt["metadata"]
        assert "responseSchema" not in interrupt
        events = await turns.answer(entries([interrupt], status="resolved", payload="yes"))
        assert ["paid"] == results_for([interrupt], events)

    async def test_a_langgraph_value_may_say_how_to_ask(self) -> None:
        """interrupt({"message", "responseSchema", ...}): they become the interrupt's own."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.types import interrupt

        from ambient_runs.adapters.langgraph import run_graph

        schema = {"type": "object", "properties": {"amount": {"type": "integer"}}}
        answers: list[Any] = []

        def ask(state: MessagesState) -> dict[str, Any]:
            answers.append(interrupt({"message": "How much?", "responseSchema": schema}))
            return {}

        builder = StateGraph(MessagesState)
        builder.add_node("ask", ask)
        builder.add_edge(START, "ask")
        graph = builder.compile(checkpointer=InMemorySaver())

        async def agent(run: Any) -> Any:
            await run_graph(graph, {"messages": []}, name="asker")
            return answers[-1]

        app = AgentApp(agent, continuations=MemoryContinuations())
        [interrupt_] = (await post(app, "r1"))[-1]["outcome"]["interrupts"]
        events = await post(
            app, "r2", resume=entries([interrupt_], status="resolved", payload={"amount": 5})
        )

        assert ("input_required", "How much?", schema) == (
            interrupt_["reason"],
            interrupt_["message"],
            interrupt_["responseSchema"],
        )
        assert {"message": "How much?", "responseSchema": schema} == (
            interrupt_["metadata"]["ambient_runs"]["value"]
        )
        assert {"amount": 5} == events[-1]["result"]
