"""
`ambient_runs.relay` against the streams pydantic-ai's own AG-UI adapter produces.

The agents run offline on pydantic-ai's `TestModel`; the adapter emits official ``ag_ui.core``
event objects, which the relay takes as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from ag_ui.core import ResumeEntry as AguiResumeEntry
from ag_ui.core import RunAgentInput as AguiInput
from ag_ui.core import UserMessage as AguiUserMessage
from pydantic import TypeAdapter
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.models.test import TestModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from support.node import client_verify

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input, wire


def verified(*runs: Sequence[ev.BaseEvent], resume_between: bool = False) -> None:
    """Valid for our strict verifier and for the official client (several runs: one agent)."""
    for events in runs:
        if not resume_between:
            assert_valid(list(events))
    if resume_between:
        streams: list[Any] = [{"events": [e for r in runs for e in wire(list(r))]}]
    else:
        streams = [wire(list(r)) for r in runs]
    verdicts = client_verify(streams)
    assert [(True, None)] * len(streams) == [(v["ok"], v["error"]) for v in verdicts]


def foreign_input(run_id: str, **fields: Any) -> AguiInput:
    return AguiInput(
        thread_id="pyd-thread",
        run_id=run_id,
        messages=[AguiUserMessage(id="u1", content="go")],
        state={},
        tools=[],
        context=[],
        forwarded_props={},
        **fields,
    )


def lookup_agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(TestModel(call_tools=["lookup"]))

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"found {q}"

    return agent


def stream_of(agent: Agent[Any, Any], run_input: AguiInput) -> Any:
    return AGUIAdapter(agent=agent, run_input=run_input).run_stream()


def under(sid: str, events: Sequence[ev.BaseEvent]) -> list[ev.BaseEvent]:
    return [
        e
        for e in events
        if (o := getattr(e, "subagent_run_id", None)) is not None
        and (o == sid or o.startswith(sid + "/"))
    ]


class TestPydanticAiAdapterStreams:
    async def test_two_concurrent_agents_with_colliding_tool_call_ids(self) -> None:
        """TestModel names both agents' calls pyd_ai_tool_call_id__lookup; relayed, they differ."""
        async with ar.Run(make_input(run_id="o")) as run, asyncio.TaskGroup() as tg:
            for n in (1, 2):
                tg.create_task(
                    ar.relay(stream_of(lookup_agent(), foreign_input(f"f{n}")), name=f"a{n}")
                )
        events = list(run.events)
        calls = [e.tool_call_id for e in events if isinstance(e, ev.ToolCallStartEvent)]
        assert ["o-sub-1/pyd_ai_tool_call_id__lookup", "o-sub-2/pyd_ai_tool_call_id__lookup"] == (
            sorted(calls)
        )
        body = events[1:-1]
        assert len(body) == len(under("o-sub-1", body)) + len(under("o-sub-2", body))
        texts = {
            e.subagent_run_id: e.delta
            for e in events
            if isinstance(e, ev.TextMessageContentEvent) and e.delta.startswith('{"lookup"')
        }
        assert {"o-sub-1", "o-sub-2"} == set(texts)
        verified(events)

    async def test_a_tool_that_raises_fails_the_subagent_not_the_run(self) -> None:
        """The adapter's RUN_ERROR becomes SUBAGENT_ERROR and RelayError; the run goes on."""
        agent: Agent[None, str] = Agent(TestModel())

        @agent.tool_plain
        def explode() -> str:
            raise RuntimeError("the tool broke")

        async with ar.Run(make_input(run_id="o")) as run:
            with pytest.raises(ar.RelayError, match="the tool broke") as caught:
                await ar.relay(stream_of(agent, foreign_input("f")), name="exploder")
            ar.say(f"The exploder failed: {caught.value.reason}")
        out = wire(list(run.events))
        error = next(e for e in out if e["type"] == "SUBAGENT_ERROR")
        assert ("o-sub-1", "the tool broke") == (error["subagentRunId"], error["message"])
        assert "RUN_FINISHED" == out[-1]["type"]
        verified(list(run.events))

    async def test_an_approval_interrupts_and_resumes_in_a_fresh_run(self) -> None:
        """A tool needing approval: suspended subagent, interrupt; the client's resume runs it."""
        calls: list[int] = []

        def payer() -> Agent[None, str | DeferredToolRequests]:
            agent: Agent[None, str | DeferredToolRequests] = Agent(
                TestModel(call_tools=["pay"]), output_type=[str, DeferredToolRequests]
            )

            @agent.tool_plain(requires_approval=True)
            def pay(amount: int) -> str:
                calls.append(amount)
                return "paid"

            return agent

        async def agent(run: ar.Run) -> Any:
            # The same code serves both runs: the relay finds its own answers in run.resume.
            resume = [
                AguiResumeEntry.model_validate(ar.to_wire(e)) for e in ar.relay_resume("payer")
            ]
            history = [ar.to_wire(m) for m in ar.relay_messages("payer")]
            fields: dict[str, Any] = {"resume": resume} if resume else {}
            run_input = foreign_input(f"f-{run.run_id}", **fields)
            if history:
                run_input = run_input.model_copy(
                    update={"messages": [*run_input.messages, *_agui_messages(history)]}
                )
            return await ar.relay(stream_of(payer(), run_input), name="payer")

        first = [e async for e in ar.stream(agent, make_input(run_id="r1"))]
        outcome = wire(first)[-1]["outcome"]
        assert "interrupt" == outcome["type"]
        [interrupt] = outcome["interrupts"]
        assert interrupt["id"].startswith("relay:payer:r1-sub-1:")
        assert interrupt["subagentRunId"] == "r1-sub-1"
        assert interrupt["toolCallId"] == "r1-sub-1/pyd_ai_tool_call_id__pay"
        assert {"type": "suspended", "interruptIds": [interrupt["id"]]} == wire(first)[-2][
            "outcome"
        ]
        assert [] == calls
        verified(first)

        # The client's view after run 1, sent back with its resume: nothing else survives.
        verdict = client_verify([wire(first)])[0]
        history = tuple(
            ev.RunAgentInput.from_wire(
                {"threadId": "t", "runId": "x", "messages": verdict["messages"] or []}
            ).messages
        )
        resume = (
            ev.ResumeEntry(
                interrupt_id=interrupt["id"], status="resolved", payload={"approved": True}
            ),
        )
        second = [
            e
            async for e in ar.stream(
                agent, make_input(run_id="r2", messages=history, resume=resume)
            )
        ]
        out = wire(second)
        assert [0] == calls
        assert {"type": "SUBAGENT_STARTED", "subagentRunId": "r1-sub-1", "name": "payer"} == out[1]
        results = [e for e in out if e["type"] == "TOOL_CALL_RESULT"]
        assert ["r1-sub-1/pyd_ai_tool_call_id__pay"] == [r["toolCallId"] for r in results]
        assert "RUN_FINISHED" == out[-1]["type"]
        assert "outcome" not in out[-1] or out[-1]["outcome"]["type"] == "success"
        verified(first, second, resume_between=True)


def _agui_messages(history: list[Any]) -> list[Any]:
    from ag_ui.core import Message

    adapter: TypeAdapter[Any] = TypeAdapter(Message)
    return [adapter.validate_python(m) for m in history]
