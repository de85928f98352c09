"""Frontend tools: calls to the client's tools, left for the client to answer, and the answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from typing import Any

import pytest
from support.events import said, types_of

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input, wire
from ambient_runs.verify import Verifier

CONFIRM = ev.Tool(
    name="confirm",
    description="Ask the user to confirm",
    parameters={"type": "object", "properties": {"question": {"type": "string"}}},
)
SHOW = ev.Tool(name="show", description="Show something")
QUESTION = '{"question": "Book it?"}'


def offering(*tools: ev.Tool, run_id: str = "r", **fields: Any) -> ev.RunAgentInput:
    return make_input(run_id=run_id, user="go", tools=tools or (CONFIRM, SHOW), **fields)


def finished(run: ar.Run) -> ev.RunFinishedEvent:
    last = run.events[-1]
    assert isinstance(last, ev.RunFinishedEvent)
    return last


def pending(run: ar.Run) -> tuple[str, ...] | None:
    outcome = finished(run).outcome
    if outcome is None:
        return None
    assert isinstance(outcome, ev.RunFinishedSuccessOutcome)
    return outcome.pending_tool_call_ids


class TestCallFrontendTool:
    def test_emits_the_call_and_ends_the_run_as_success_with_it_pending(self) -> None:
        """The call goes out whole, no result follows, and RUN_FINISHED names it pending."""
        with ar.Run(offering()) as run:
            ar.say("Asking you.")
            ar.call_frontend_tool("confirm", {"question": "Book it?"})
            ar.say("never said")  # pragma: no cover - the call ends the agent

        assert [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_FINISHED",
        ] == types_of(run)
        assert [
            {"type": "TOOL_CALL_START", "toolCallId": "r-tool-1", "toolCallName": "confirm"},
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": "r-tool-1",
                "delta": '{"question": "Book it?"}',
            },
            {"type": "TOOL_CALL_END", "toolCallId": "r-tool-1"},
        ] == wire(list(run.events))[4:7]
        assert {
            "type": "RUN_FINISHED",
            "threadId": "thread",
            "runId": "r",
            "outcome": {"type": "success", "pendingToolCallIds": ["r-tool-1"]},
        } == wire([finished(run)])[0]
        assert_valid(list(run.events))

    def test_raises_frontend_tool_called_naming_the_call(self) -> None:
        """The exception carries the call's id and tool; the run swallows it."""
        caught: list[ar.FrontendToolCalled] = []
        with ar.Run(offering()) as run:
            try:
                ar.call_frontend_tool("show", id="mine")
            except ar.FrontendToolCalled as called:
                caught.append(called)
            ar.say("after, on purpose")

        [called] = caught
        assert ("mine", "show") == (called.tool_call_id, called.tool_name)
        assert ("mine",) == pending(run)  # caught, still pending
        assert "{}" == next(e.delta for e in run.events if isinstance(e, ev.ToolCallArgsEvent))
        assert_valid(list(run.events))

    def test_inside_a_subagent_is_attributed_to_it_and_finishes_it(self) -> None:
        """The call carries the invocation's id; the invocation finishes as success."""

        @ar.subagent("booker")
        def book() -> None:
            ar.call_frontend_tool("confirm", {"question": "9:40?"})

        with ar.Run(offering()) as run:
            book()

        calls = [
            e for e in run.events if isinstance(e, ev.ToolCallStartEvent | ev.ToolCallEndEvent)
        ]
        assert {"r-sub-1"} == {e.subagent_run_id for e in calls}
        [end] = [e for e in run.events if isinstance(e, ev.SubagentFinishedEvent)]
        assert (None, None) == (end.outcome, end.result)
        assert ("r-tool-1",) == pending(run)
        assert_valid(list(run.events))

    def test_on_a_handle_and_the_run(self) -> None:
        """Run and subagent handles have the method too, attributing to themselves."""
        with ar.Run(offering()) as run:
            handle = run.subagent("helper").start()
            with pytest.raises(ar.FrontendToolCalled):
                handle.call_frontend_tool("show", ["a"])
            handle.finish()
            run.call_frontend_tool("confirm")

        starts = [e for e in run.events if isinstance(e, ev.ToolCallStartEvent)]
        assert [("show", handle.id), ("confirm", None)] == [
            (e.tool_call_name, e.subagent_run_id) for e in starts
        ]
        assert ("r-tool-1", "r-tool-2") == pending(run)
        assert_valid(list(run.events))

    async def test_in_a_task_group_the_siblings_are_cancelled(self) -> None:
        """As any exception does in a TaskGroup: siblings end cancelled, the run as success."""
        started = asyncio.Event()

        @ar.subagent("slow")
        async def slow() -> None:
            started.set()
            await asyncio.sleep(60)

        @ar.subagent("asker")
        async def asker() -> None:
            await started.wait()
            ar.call_frontend_tool("confirm")

        async with ar.Run(offering()) as run, asyncio.TaskGroup() as group:
            group.create_task(slow())
            group.create_task(asker())

        ends = {
            e.subagent_run_id: e.TYPE.value
            for e in run.events
            if isinstance(e, ev.SubagentFinishedEvent | ev.SubagentErrorEvent)
        }
        assert {"r-sub-1": "SUBAGENT_ERROR", "r-sub-2": "SUBAGENT_FINISHED"} == ends
        assert ("r-tool-1",) == pending(run)
        assert_valid(list(run.events))

    async def test_two_concurrent_calls_are_both_pending_in_order(self) -> None:
        """Two tasks that each call a frontend tool at once: a group of two, both pending."""

        async def ask(name: str) -> None:
            with ar.subagent(name):
                ar.call_frontend_tool(name)

        async with ar.Run(offering()) as run, asyncio.TaskGroup() as group:
            group.create_task(ask("confirm"))
            group.create_task(ask("show"))

        assert ("r-tool-1", "r-tool-2") == pending(run)
        ends = [e for e in run.events if isinstance(e, ev.SubagentFinishedEvent)]
        assert 2 == len(ends)
        assert_valid(list(run.events))

    def test_an_interrupt_outcome_wins(self) -> None:
        """A run that pauses on an interrupt too ends with the interrupt outcome."""
        with ar.Run(offering()) as run:
            with contextlib.suppress(ar.FrontendToolCalled):
                ar.call_frontend_tool("confirm")
            raise ar.Interrupted(ar.interrupt("approval"))

        assert isinstance(finished(run).outcome, ev.RunFinishedInterruptOutcome)
        assert_valid(list(run.events))

    def test_the_result_is_kept(self) -> None:
        """finish_with's result still goes on RUN_FINISHED."""
        with ar.Run(offering()) as run:
            run.finish_with({"asked": True})
            ar.call_frontend_tool("confirm")

        assert {"asked": True} == finished(run).result

    def test_a_sync_agent_in_a_thread(self) -> None:
        """From a worker thread carrying the run's context, the call works the same."""
        with ar.Run(offering()) as run:
            worker = ar.Thread(target=lambda: run.tool_call("show", frontend=True).end())
            worker.start()
            worker.join()

        assert ("r-tool-1",) == pending(run)
        assert threading.current_thread() is threading.main_thread()


class TestUnknownTool:
    def test_a_name_the_client_did_not_offer_raises_naming_the_fix(self) -> None:
        """UnknownToolError is a LookupError, lists the offered tools, and nothing is sent."""
        with ar.Run(offering(CONFIRM)) as run:
            with pytest.raises(ar.UnknownToolError) as raised:
                ar.call_frontend_tool("delete_everything")
            with pytest.raises(LookupError):
                ar.tool_call("delete_everything", frontend=True)

        assert (
            "the client did not offer a tool called 'delete_everything' for this run (its "
            "tools: 'confirm'); call one of run.tools, or run the tool on the server with "
            "tool_call(name) and send its result()."
        ) == str(raised.value)
        assert ["RUN_STARTED", "RUN_FINISHED"] == types_of(run)
        assert pending(run) is None

    def test_no_tools_at_all(self) -> None:
        """A client that offers no tools: the message says so."""
        with ar.Run(make_input()) as run, pytest.raises(ar.UnknownToolError, match="tools: none"):
            run.call_frontend_tool("confirm")


class TestFrontendHandle:
    def test_streams_arguments_and_the_agent_goes_on(self) -> None:
        """tool_call(name, frontend=True) streams args, returns, and the call ends pending."""
        with ar.Run(offering()) as run:
            with ar.message() as text:
                text.write("Let me show you.")
            with ar.tool_call("show", frontend=True, parent_message_id=text.id) as call:
                assert isinstance(call, ar.FrontendToolCall)
                call.args('{"chart": ')
                call.args('"bars"}')
            ar.say("Shown on your screen.")

        assert ("r-tool-1",) == pending(run)
        assert not any(isinstance(e, ev.ToolCallResultEvent) for e in run.events)
        assert [("Let me show you.", None), ("Shown on your screen.", None)] == said(run)
        assert_valid(list(run.events))

    def test_result_is_refused(self) -> None:
        """A frontend call cannot be answered by the agent: ProtocolError, nothing sent."""
        with ar.Run(offering()) as run:
            call = ar.tool_call("confirm", frontend=True)
            with pytest.raises(ar.ProtocolError) as raised:
                call.result("yes")
            call.end()

        assert "frontend-tool-result" == raised.value.rule
        assert "run.tool_result('r-tool-1')" in str(raised.value)
        assert not any(isinstance(e, ev.ToolCallResultEvent) for e in run.events)

    def test_backend_and_frontend_calls_mix(self) -> None:
        """Only the frontend call is pending; the backend one has its result."""
        with ar.Run(offering()) as run:
            with ar.tool_call("search") as search:
                search.args({"q": "x"})
            search.result("found")
            ar.tool_call("confirm", frontend=True).end()

        assert ("r-tool-2",) == pending(run)
        assert_valid(list(run.events))

    def test_left_open_it_is_closed_and_still_pending(self) -> None:
        """A frontend call left open is closed at the run's end, with a LeftOpenWarning."""
        with pytest.warns(ar.LeftOpenWarning), ar.Run(offering()) as run:
            ar.tool_call("confirm", frontend=True)

        assert ("r-tool-1",) == pending(run)
        assert_valid(list(run.events))

    def test_a_run_without_frontend_calls_has_no_outcome(self) -> None:
        """No frontend call: RUN_FINISHED carries no outcome, as before."""
        with ar.Run(offering()) as run:
            ar.say("hi")

        assert finished(run).outcome is None


def answered(
    call_id: str = "r1-tool-1",
    content: Any = "yes",
    *,
    name: str = "confirm",
    arguments: str = '{"question": "Book it?"}',
    owner: str | None = "r1-sub-1",
    after: tuple[ev.Message, ...] = (),
) -> ev.RunAgentInput:
    """The next run's input: the user, the assistant's call, the client's tool message."""
    messages: tuple[ev.Message, ...] = (
        ev.UserMessage(id="u1", content="book me a train"),
        ev.AssistantMessage(
            id=call_id,
            subagent_run_id=owner,
            tool_calls=(
                ev.ToolCall(id=call_id, function=ev.FunctionCall(name=name, arguments=arguments)),
            ),
        ),
        ev.ToolMessage(id=f"result-{call_id}", tool_call_id=call_id, content=content),
        *after,
    )
    return make_input(run_id="r2", messages=messages, tools=(CONFIRM, SHOW))


class TestToolResult:
    def test_reads_the_clients_answer_and_the_call(self) -> None:
        """tool_result(call_id) gives the tool message, the call's name, arguments and owner."""
        run = ar.Run(answered(content='{"ok": true}'))

        answer = run.tool_result("r1-tool-1")

        assert answer is not None
        assert ("r1-tool-1", "confirm", "r1-sub-1") == (
            answer.call_id,
            answer.name,
            answer.subagent_run_id,
        )
        assert {"question": "Book it?"} == answer.arguments()
        assert ('{"ok": true}', {"ok": True}, None) == (
            answer.text(),
            answer.value(),
            answer.error,
        )

    def test_missing_is_none(self) -> None:
        """No tool message answers the call: None, nothing raised."""
        run = ar.Run(make_input(run_id="r2", user="hello again"))

        assert run.tool_result("r1-tool-1") is None
        assert () == run.tool_results()

    def test_content_parts_and_errors(self) -> None:
        """Text parts join into text(); the client's error is kept; non-JSON value() raises."""
        parts = (ev.TextPart(text="line 1"), ev.TextPart(text="line 2"))
        run = ar.Run(answered(content=parts))

        answer = run.tool_result("r1-tool-1")

        assert answer is not None
        assert "line 1\nline 2" == answer.text()
        with pytest.raises(ar.InvalidInputError, match=r"read it with \.text\(\) instead"):
            answer.value()

    def test_a_result_whose_call_is_not_in_the_history(self) -> None:
        """Only the tool message: name, call and arguments are None."""
        messages = (ev.ToolMessage(id="t", tool_call_id="lost", content="x", error="denied"),)
        run = ar.Run(make_input(messages=messages))

        answer = run.tool_result("lost")

        assert answer is not None
        assert (None, None, None, "denied") == (
            answer.name,
            answer.call,
            answer.arguments(),
            answer.error,
        )

    def test_tool_results_are_the_current_turns_by_name(self) -> None:
        """tool_results() holds the answers after the user's last message, filtered by name."""
        run = ar.Run(answered())

        assert ["r1-tool-1"] == [a.call_id for a in run.tool_results()]
        assert ["r1-tool-1"] == [a.call_id for a in run.tool_results("confirm")]
        assert () == run.tool_results("show")

    def test_a_new_user_message_starts_a_new_turn(self) -> None:
        """After the user speaks again, the earlier answers are no longer the turn's."""
        run = ar.Run(answered(after=(ev.UserMessage(id="u2", content="thanks"),)))

        assert () == run.tool_results()
        assert run.tool_result("r1-tool-1") is not None  # still readable by id

    def test_the_newest_answer_wins(self) -> None:
        """Two tool messages answer one call: the later one is the answer."""
        again = ev.ToolMessage(id="again", tool_call_id="r1-tool-1", content="no")
        run = ar.Run(answered(after=(again,)))

        answer = run.tool_result("r1-tool-1")

        assert answer is not None
        assert "no" == answer.text()

    def test_through_a_subagent_handle(self) -> None:
        """A subagent handle reads the answers too."""
        with ar.Run(answered()) as run, ar.subagent("booker") as booker:
            answer = booker.tool_result("r1-tool-1")
            turn = booker.tool_results("confirm")

        assert answer is not None
        assert (answer,) == turn
        assert_valid(list(run.events))


class TestTheLoop:
    async def test_call_then_continue_with_the_result(self) -> None:
        """Run 1 calls the tool; run 2, given the client's answer, continues from it."""

        async def agent(run: ar.Run) -> None:
            for answer in run.tool_results("confirm"):
                ar.say(f"You said {answer.text()}.")
                return
            with ar.subagent("booker"):
                ar.call_frontend_tool("confirm", {"question": "Book it?"})

        async with ar.Run(offering(run_id="r1")) as first:
            await agent(first)
        [call_id] = pending(first) or ()
        history = answered(call_id)
        async with ar.Run(history, verify=True) as second:
            await agent(second)

        assert [("You said yes.", None)] == said(second)
        assert pending(second) is None
        assert_valid(list(second.events))
        assert () == Verifier().verify(list(first.events))


class TestRelay:
    def test_a_relayed_agents_frontend_calls_are_the_runs(self) -> None:
        """A relayed run that ends with pending calls: they are pending here, namespaced."""
        foreign = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "x"},
            {"type": "TOOL_CALL_START", "toolCallId": "call_1", "toolCallName": "confirm"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "call_1"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "x",
                "outcome": {"type": "success", "pendingToolCallIds": ["call_1"]},
            },
        ]

        with ar.Run(offering()) as run:
            ar.relay(foreign, name="remote")

        assert ("r-sub-1/call_1",) == pending(run)
        assert_valid(list(run.events))


class TestVerifier:
    def test_accepts_the_frontend_stream(self) -> None:
        """The library's frontend stream passes the strict verifier."""
        with ar.Run(offering()) as run, ar.subagent("s"):
            ar.call_frontend_tool("confirm")

        assert () == Verifier(strict=True).verify(list(run.events))

    @pytest.mark.parametrize(
        ("ids", "rule"),
        [
            (["c", "zz"], "pending-tool-call-unknown"),
            (["c", "c"], "pending-tool-call-duplicate"),
            (["b"], "pending-tool-call-answered"),
        ],
    )
    def test_pending_ids_must_agree_with_the_stream(self, ids: list[str], rule: str) -> None:
        """Strict: pendingToolCallIds names calls of this run, unanswered, each once."""
        events = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "confirm"},
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
            {"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "search"},
            {"type": "TOOL_CALL_END", "toolCallId": "b"},
            {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "b", "content": "x"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {"type": "success", "pendingToolCallIds": ids},
            },
        ]
        parsed = [ar.from_wire(e) for e in events]

        [violation] = Verifier(strict=True).verify(parsed)  # type: ignore[arg-type]

        assert (rule, False) == (violation.rule, violation.client_checked)
        assert () == Verifier(strict=False).verify(parsed)  # type: ignore[arg-type]

    def test_the_pipeline_refuses_a_bad_pending_list(self) -> None:
        """A transformer that invents a pending id is caught before the wire."""

        def invent(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.RunFinishedEvent):
                return ev.RunFinishedEvent(
                    thread_id=event.thread_id,
                    run_id=event.run_id,
                    outcome=ev.RunFinishedSuccessOutcome(pending_tool_call_ids=("ghost",)),
                )
            return event

        with (
            pytest.raises(ar.ProtocolError, match="ghost"),
            ar.Run(make_input(), transformers=[invent]) as run,
        ):
            ar.say("hi")

        assert isinstance(run.events[-1], ev.RunErrorEvent)
        assert json.loads(ar.encode_json(run.events[-1]))["code"] == "protocol_error"
