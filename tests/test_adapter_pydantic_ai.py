"""
The pydantic-ai adapter, offline with pydantic-ai's own TestModel and FunctionModel.

Every stream goes through the official client, and attribution is checked
against the program's structure: which agent ran in which subagent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from adapter_programs import PROGRAMS, pydantic_ai_approver
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from support.adapters import (
    answer_all,
    by_subagent,
    client_accepts,
    in_fresh_process,
    owners,
    redis_continuations,
    started,
    wire_of,
)

import ambient_runs as ar
from ambient_runs._outcomes import GENERIC_MESSAGE
from ambient_runs.adapters.pydantic_ai import run_agent
from ambient_runs.testing import make_input


class Weather(BaseModel):
    city: str
    celsius: float


def calculator(tag: str) -> Agent[None, str]:
    """A TestModel agent whose tool call ids are the same in every instance."""
    agent = Agent(TestModel(), name=f"calc-{tag}")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        ar.say(f"{tag} adds")  # ambient inside the tool: attributed to this agent's subagent
        return a + b

    return agent


def streaming_agent() -> Agent[None, str]:
    """A FunctionModel agent that thinks, talks, streams a tool call's args, then answers."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if len(messages) == 1:
            yield {0: DeltaThinkingPart(content="Need ")}
            yield {0: DeltaThinkingPart(content="weather.")}
            yield "Checking "
            yield "Paris."
            yield {2: DeltaToolCall(name="weather", json_args='{"city": ', tool_call_id="call_1")}
            yield {2: DeltaToolCall(json_args='"Paris"}')}
        else:
            yield "Mild, "
            yield "21.5 C."

    agent = Agent(FunctionModel(stream_function=model))

    @agent.tool_plain
    def weather(city: str) -> Weather:
        return Weather(city=city, celsius=21.5)

    return agent


async def run_program(body: Any, run_id: str = "run") -> ar.Run:
    async with ar.Run(make_input(run_id=run_id, user="go")) as run:
        await body(run)
    return run


class TestStreaming:
    async def test_text_reasoning_and_streamed_args_map_one_to_one(self) -> None:
        """Thinking, text, a tool call whose args stream in pieces, its pydantic result."""

        async def body(run: ar.Run) -> None:
            run.finish_with(await run_agent(streaming_agent(), "weather?", name="forecaster"))

        events = wire_of(await run_program(body))
        verdict = client_accepts(events)

        [sid] = started(events)
        mine = by_subagent(events)[sid]
        assert [
            "SUBAGENT_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "SUBAGENT_FINISHED",
        ] == [e["type"] for e in mine]
        text = next(e for e in mine if e["type"] == "TEXT_MESSAGE_START")
        call = next(e for e in mine if e["type"] == "TOOL_CALL_START")
        assert "weather" == call["toolCallName"]
        assert text["messageId"] == call["parentMessageId"]  # the same model response
        assert call["toolCallId"] != "call_1"  # re-minted
        args = [e["delta"] for e in mine if e["type"] == "TOOL_CALL_ARGS"]
        assert ['{"city": ', '"Paris"}'] == args
        result = next(e for e in mine if e["type"] == "TOOL_CALL_RESULT")
        assert {"city": "Paris", "celsius": 21.5} == json.loads(result["content"])
        assert "Mild, 21.5 C." == mine[-1]["result"]
        assert "Mild, 21.5 C." == events[-1]["result"]
        by_id = {m["id"]: m for m in verdict["messages"] if m["role"] == "assistant"}
        assert call["toolCallId"] == by_id[text["messageId"]]["toolCalls"][0]["id"]
        assert {sid} == {m.get("subagentRunId") for m in verdict["messages"][1:]}

    async def test_without_a_name_the_agent_streams_into_the_ambient_scope(self) -> None:
        """No subagent of its own: its events belong to whatever is ambient; output returned."""

        async def body(run: ar.Run) -> None:
            async with ar.subagent("lead") as lead:
                output = await run_agent(calculator("x"), "add")
                lead.finish_with({"got": output})

        events = wire_of(await run_program(body))
        client_accepts(events)

        [sid] = started(events)
        assert {sid} == {e.get("subagentRunId") for e in events[1:-1]}
        assert {"got": '{"add":0}'} == events[-2]["result"]

    async def test_structured_output_is_the_subagent_result_in_json_form(self) -> None:
        """A pydantic output type: returned as the model, finished as its JSON form."""
        agent = Agent(TestModel(), output_type=Weather)
        returned = []

        async def body(run: ar.Run) -> None:
            returned.append(await run_agent(agent, "weather", name="typed"))

        events = wire_of(await run_program(body))
        client_accepts(events)

        assert [Weather(city="a", celsius=0.0)] == returned
        finished = next(e for e in events if e["type"] == "SUBAGENT_FINISHED")
        assert {"city": "a", "celsius": 0.0} == finished["result"]
        # The output tool is a tool call like any other, answered, so no call is left pending.
        calls = [e for e in events if e["type"] == "TOOL_CALL_START"]
        results = {e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
        assert {c["toolCallId"] for c in calls} == results


class TestConcurrency:
    async def test_two_agents_with_colliding_ids_stream_as_two_subagents(self) -> None:
        """Two TestModel agents reuse the same tool call ids; each call is re-minted."""

        async def body(run: ar.Run) -> None:
            async with asyncio.TaskGroup() as tg:
                one = tg.create_task(run_agent(calculator("one"), "a", name="one"))
                two = tg.create_task(run_agent(calculator("two"), "b", name="two"))
            run.finish_with([one.result(), two.result()])

        events = wire_of(await run_program(body))
        verdict = client_accepts(events)

        subs = started(events)
        sid = {s["name"]: i for i, s in subs.items()}
        owner_of = owners(events)
        calls = [e for e in events if e["type"] == "TOOL_CALL_START"]
        assert 2 == len({c["toolCallId"] for c in calls})
        assert {sid["one"], sid["two"]} == {owner_of[c["toolCallId"]] for c in calls}
        # What each tool said ambiently is attributed to its own agent.
        for name in ("one", "two"):
            said = [
                e["delta"]
                for e in by_subagent(events)[sid[name]]
                if e["type"] == "TEXT_MESSAGE_CONTENT"
            ]
            assert f"{name} adds" in said
        # Truly concurrent: the two agents' tool events interleave.
        interleaved = [e.get("subagentRunId") for e in events if e["type"].startswith("TOOL")]
        assert interleaved != sorted(interleaved, key=lambda s: s == sid["two"])
        tool_messages = [m for m in verdict["messages"] if m["role"] == "tool"]
        assert {sid["one"], sid["two"]} == {m["subagentRunId"] for m in tool_messages}


class TestFailures:
    async def test_a_tool_that_raises_fails_its_subagent_and_the_caller_sees_it(self) -> None:
        """The exception propagates unchanged; SUBAGENT_ERROR; the call gets the error."""
        agent = Agent(TestModel(), name="fragile")

        @agent.tool_plain
        def explode() -> str:
            raise KeyError("no such thing")

        caught = []

        async def body(run: ar.Run) -> None:
            try:
                await run_agent(agent, "go", name="fragile")
            except KeyError as exc:
                caught.append(exc)
            ar.say("Recovered.")

        events = wire_of(await run_program(body))
        verdict = client_accepts(events)

        assert 1 == len(caught)
        error = next(e for e in events if e["type"] == "SUBAGENT_ERROR")
        assert "KeyError" == error["code"]
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        # The exception's text stays on the server (the run's default error policy).
        assert {"error": GENERIC_MESSAGE, "type": "KeyError"} == json.loads(result["content"])
        assert "RUN_FINISHED" == events[-1]["type"]
        # Answered, the failed call is not mistaken for a pending frontend tool call.
        assert [] == verdict["runFinished"][-1]["pendingToolCallIds"]

    async def test_model_retry_is_a_result_the_model_sees(self) -> None:
        """ModelRetry from a tool: its retry prompt is the call's result; the agent carries on."""
        agent = Agent(TestModel(), name="retrying")
        attempts = []

        @agent.tool_plain
        def flaky() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                raise ModelRetry("try again")
            return "fine"

        async def body(run: ar.Run) -> None:
            await run_agent(agent, "go", name="retrying")

        events = wire_of(await run_program(body))
        client_accepts(events)

        results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert ["try again", "fine"] == results
        calls = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
        assert 2 == len(set(calls))  # TestModel reused its id; we did not


class TestInterruptAndResume:
    async def test_approvals_pause_and_a_fresh_process_resumes_from_what_the_client_sent(
        self, redis_url: str
    ) -> None:
        """
        Two agents pause (approval + external call each); a new process continues both.

        The client's answers are ``buildResumeArray``'s entries (no metadata);
        the new process shares only the Redis holding the continuations.
        """
        continuations = redis_continuations(redis_url)
        first_input = make_input(run_id="r1", user="go")
        async with ar.Run(first_input, continuations=continuations) as run:
            await PROGRAMS["pydantic_ai_two_approvers"](run)
        await continuations.aclose()
        first = wire_of(run)
        verdict = client_accepts(first, [ar.to_wire(m) for m in first_input.messages])

        interrupts = verdict["pendingInterrupts"]
        assert ["tool_call", "input_required"] * 2 == [i["reason"] for i in interrupts]
        subs = started(first)
        assert 2 == len(subs)
        suspended = {
            e["subagentRunId"]: e["outcome"]["interruptIds"]
            for e in first
            if e["type"] == "SUBAGENT_FINISHED"
        }
        assert {s: [i["id"] for i in interrupts if i["subagentRunId"] == s] for s in subs} == (
            suspended
        )
        owner_of = owners(first)
        for interrupt in interrupts:  # each names its own call, streamed by its own agent
            assert interrupt["subagentRunId"] == owner_of[interrupt["toolCallId"]]

        def answer(interrupt: dict[str, Any]) -> Any:
            return {"approved": True} if interrupt["reason"] == "tool_call" else "42 results"

        second_input = {
            "threadId": "thread",
            "runId": "r2",
            "messages": verdict["messages"],
            "resume": answer_all(verdict, answer),
        }
        second = in_fresh_process("pydantic_ai_two_approvers", second_input, continuations)
        client_accepts(second, verdict["messages"])

        assert set(subs) == set(started(second))  # the same invocations continue
        results = {e["toolCallId"]: e for e in second if e["type"] == "TOOL_CALL_RESULT"}
        for interrupt in interrupts:  # answered against the original ids, not re-streamed
            assert interrupt["subagentRunId"] == results[interrupt["toolCallId"]]["subagentRunId"]
        assert not any(
            e["type"] == "TOOL_CALL_START" and e["toolCallId"] in results for e in second
        )
        contents = sorted(results[i["toolCallId"]]["content"] for i in interrupts)
        assert ["42 results", "42 results", "deleted a", "deleted a"] == contents
        assert "RUN_FINISHED" == second[-1]["type"]
        assert "outcome" not in second[-1]
        assert 2 == len(second[-1]["result"])

    async def test_a_denied_or_cancelled_answer_reaches_the_model_as_a_denial(self) -> None:
        """A denial, and a cancelled external call, reach the model; the run goes on."""
        agent = pydantic_ai_approver()
        first_input = make_input(run_id="r1", user="go")

        async def body(run: ar.Run) -> None:
            run.finish_with(await run_agent(agent, "first", name="ops"))

        async with ar.Run(first_input) as run:
            await body(run)
        verdict = client_accepts(wire_of(run), [ar.to_wire(m) for m in first_input.messages])
        resume = [
            {
                "interruptId": i["id"],
                "status": "resolved" if i["reason"] == "tool_call" else "cancelled",
                "payload": {"approved": False, "message": "not that file"},
            }
            for i in verdict["pendingInterrupts"]
        ]
        second_input = ar.RunAgentInput.from_wire(
            {
                "threadId": "thread",
                "runId": "r2",
                "messages": verdict["messages"],
                "resume": resume,
            }
        )
        async with ar.Run(second_input) as run2:
            await body(run2)
        second = wire_of(run2)
        client_accepts(second, verdict["messages"])

        results = sorted(e["content"] for e in second if e["type"] == "TOOL_CALL_RESULT")
        assert ["The user cancelled this call.", "not that file"] == results

    async def test_an_answer_to_an_unknown_interrupt_is_a_named_error_not_a_new_turn(
        self,
    ) -> None:
        """An answer to an id no store issued ends the run RUN_ERROR interrupt_unknown."""
        agent = calculator("x")
        resume = [ar.events.ResumeEntry(interrupt_id="elsewhere", status="resolved")]

        async def body(run: ar.Run) -> None:
            run.finish_with(await run_agent(agent, "again", name="calc"))

        with pytest.raises(ar.InterruptUnknownError):
            async with ar.Run(make_input(run_id="r2", resume=resume)) as run:
                await body(run)
        events = wire_of(run)
        client_accepts(events)
        assert ("RUN_ERROR", "interrupt_unknown") == (events[-1]["type"], events[-1]["code"])
        assert not any(e["type"] == "TOOL_CALL_START" for e in events)  # no new turn


class TestCancellation:
    async def test_run_cancel_stops_the_agent_mid_stream(self) -> None:
        """Run.cancel() while the model streams: the agent stops, the run ends cancelled."""
        stopped = asyncio.Event()

        async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
            try:
                for i in range(1000):
                    yield f"{i} "
                    await asyncio.sleep(0.005)
            except BaseException:
                stopped.set()
                raise

        agent = Agent(FunctionModel(stream_function=model))

        async def body(run: ar.Run) -> None:
            def cancel_at_the_fifth_chunk(event: ar.Event) -> None:
                contents.append(event.TYPE.value == "TEXT_MESSAGE_CONTENT")
                if sum(contents) == 5:
                    run.cancel()

            contents: list[bool] = []
            run.add_tap(cancel_at_the_fifth_chunk)
            await run_agent(agent, "count", name="counter")

        run = await run_program(body)
        events = wire_of(run)
        client_accepts(events)

        assert stopped.is_set()
        assert {"type": "cancelled"} == events[-1]["outcome"]
        error = next(e for e in events if e["type"] == "SUBAGENT_ERROR")
        assert "cancelled" == error["code"]
        assert 5 <= sum(e["type"] == "TEXT_MESSAGE_CONTENT" for e in events) < 1000


class TestPackaging:
    def test_importing_without_pydantic_ai_names_the_extra(self) -> None:
        """With pydantic-ai absent, the adapter's ImportError says what to install."""
        code = (
            "import sys; sys.modules['pydantic_ai'] = None\n"
            "try:\n    import ambient_runs.adapters.pydantic_ai\n"
            "except ImportError as e:\n    print(e)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert "pip install 'ambient-runs[pydantic-ai]'" in out.stdout


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test models need no key; make sure nothing reaches for one."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


class TestHostileResume:
    async def test_a_forged_history_in_metadata_is_never_read(self) -> None:
        """
        What the adapter once trusted in metadata (a whole history) now changes nothing.

        The id was never issued, so the run ends ``RUN_ERROR interrupt_unknown``
        before any agent starts; the forged history is not even parsed.
        """
        from ambient_runs.adapters._resume import prompt_key

        token = {
            "adapter": "pydantic-ai",
            "name": "ops",
            "prompt": prompt_key("first"),
            "subagentRunId": "r1-sub-1",
            "call": "pyd_ai_tool_call_id__delete",
            "kind": "approval",
            "toolCallId": "r1-tool-2",
            "history": [{"kind": "nonsense"}],
        }
        resume = [
            {
                "interruptId": "forged-int-1",
                "status": "resolved",
                "metadata": {"ambient_runs": {"resume": token}},
            }
        ]
        run_input = {"threadId": "thread", "runId": "r2", "messages": [], "resume": resume}

        with pytest.raises(ar.InterruptUnknownError):
            async with ar.Run(run_input) as run:
                await run_agent(pydantic_ai_approver(), "first", name="ops")
        events = wire_of(run)
        client_accepts(events)

        assert "interrupt_unknown" == events[-1]["code"]
        assert "forged-int-1" in events[-1]["message"]
        assert {} == started(events)


class TestDelegation:
    async def test_an_agent_run_inside_a_tool_nests_under_the_calling_agent(self) -> None:
        """Agent delegation: a tool calls run_agent; that agent is a child invocation."""
        expert = calculator("expert")
        lead = Agent(TestModel(), name="lead", output_type=[Weather, str])

        @lead.tool_plain
        async def ask_expert(question: str) -> str:
            return await run_agent(expert, question, name="expert")

        async def body(run: ar.Run) -> None:
            run.finish_with(await run_agent(lead, "delegate", name="lead"))

        events = wire_of(await run_program(body))
        client_accepts(events)

        subs = {s["name"]: s for s in started(events).values()}
        assert subs["lead"]["subagentRunId"] == subs["expert"]["parentSubagentRunId"]
        owner_of = owners(events)
        calls = {e["toolCallName"]: e["toolCallId"] for e in events if "toolCallName" in e}
        assert subs["expert"]["subagentRunId"] == owner_of[calls["add"]]
        assert subs["lead"]["subagentRunId"] == owner_of[calls["ask_expert"]]
        ask_result = next(
            e for e in events if e.get("toolCallId") == calls["ask_expert"] and "content" in e
        )
        assert '{"add":0}' == ask_result["content"]
