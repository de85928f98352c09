"""
Module-level emitters and the handles they return: message, reasoning, tool call, step, emit.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from support.events import body

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input


class TestSay:
    async def test_say_at_top_level_is_untagged(self) -> None:
        """say() in the run's own scope emits an untagged assistant message and returns its id."""
        async with ar.Run(make_input(run_id="r")) as run:
            mid = ar.say("hello")

        assert "r-msg-1" == mid
        assert [
            {"type": "TEXT_MESSAGE_START", "messageId": "r-msg-1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r-msg-1", "delta": "hello"},
            {"type": "TEXT_MESSAGE_END", "messageId": "r-msg-1"},
        ] == body(run)

    async def test_say_in_subagent_is_attributed(self) -> None:
        """say() inside a subagent scope carries that invocation's id on every event."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("researcher"):
                ar.say("found it", id="m-1")

        assert ["r-sub-1"] * 3 == [
            e["subagentRunId"] for e in body(run) if e["type"].startswith("TEXT_")
        ]
        assert_valid(list(run.events))

    async def test_run_method_twin(self) -> None:
        """run.say() gives the same events as the module-level say()."""
        async with ar.Run(make_input(run_id="r")) as ambient:
            ar.say("x")
        async with ar.Run(make_input(run_id="r")) as explicit:
            explicit.say("x")

        assert list(ambient.events) == list(explicit.events)

    async def test_run_method_ignores_the_ambient_subagent(self) -> None:
        """run.say() inside a subagent scope is the parent agent's own: untagged."""
        async with ar.Run(make_input()) as run:
            with ar.subagent("s"):
                run.say("parent speaking")

        content = next(e for e in run.events if isinstance(e, ev.TextMessageContentEvent))
        assert None is content.subagent_run_id


TWINS: list[tuple[str, Callable[[Any], object]]] = [
    ("say", lambda e: e.say("x", id="m")),
    ("think", lambda e: e.think("x", id="m")),
    ("message", lambda e: e.message("user", id="m", name="n").end()),
    ("reasoning", lambda e: e.reasoning(id="m").end()),
    ("tool_call", lambda e: e.tool_call("t", id="c").result("ok")),
    ("step", lambda e: e.step("s").start().end()),
    ("emit", lambda e: e.emit(ev.CustomEvent(name="c", value=1))),
    ("activity", lambda e: e.activity("a", {"k": 1}, id="m")),
]


class TestRunMethodTwins:
    @pytest.mark.parametrize(("name", "use"), TWINS, ids=[n for n, _ in TWINS])
    async def test_run_method_equals_module_function(
        self, name: str, use: Callable[[Any], object]
    ) -> None:
        """Each module-level emitter and its Run method emit the same events at top level."""
        async with ar.Run(make_input(run_id="r")) as module_run:
            use(ar)
        async with ar.Run(make_input(run_id="r")) as method_run:
            use(method_run)

        assert list(module_run.events) == list(method_run.events)
        assert 2 < len(method_run.events)

    async def test_current_subagent_id_methods(self) -> None:
        """run.current_subagent_id() is None, a handle's is its own id, whatever is ambient."""
        async with ar.Run(make_input(run_id="r")) as run:
            handle = ar.subagent("s").start()
            with ar.subagent("other"):
                ids = (run.current_subagent_id(), handle.current_subagent_id())
            handle.finish()

        assert (None, "r-sub-1") == ids


class TestThink:
    async def test_think_emits_a_whole_reasoning_block(self) -> None:
        """think() sends start, message start, content, message end and end under one id."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            mid = ar.think("pondering")

        assert [
            {"type": "REASONING_START", "subagentRunId": "r-sub-1", "messageId": mid},
            {
                "type": "REASONING_MESSAGE_START",
                "subagentRunId": "r-sub-1",
                "messageId": mid,
                "role": "reasoning",
            },
            {
                "type": "REASONING_MESSAGE_CONTENT",
                "subagentRunId": "r-sub-1",
                "messageId": mid,
                "delta": "pondering",
            },
            {"type": "REASONING_MESSAGE_END", "subagentRunId": "r-sub-1", "messageId": mid},
            {"type": "REASONING_END", "subagentRunId": "r-sub-1", "messageId": mid},
        ] == body(run)[1:-1]
        assert_valid(list(run.events))


class TestMessageHandle:
    async def test_role_id_and_name(self) -> None:
        """message(role, id, name) opens a message with exactly those fields."""
        async with ar.Run(make_input()) as run:
            with ar.message("system", id="sys-1", name="policy") as handle:
                handle.write("be brief")

        assert {
            "type": "TEXT_MESSAGE_START",
            "messageId": "sys-1",
            "role": "system",
            "name": "policy",
        } == body(run)[0]
        assert_valid(list(run.events))

    async def test_explicit_calls(self) -> None:
        """A handle works without ``with``: write pieces, then end."""
        async with ar.Run(make_input(run_id="r")) as run:
            handle = ar.message()
            handle.write("a")
            handle.write("b")
            handle.end()

        assert [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
        ] == [e["type"] for e in body(run)]
        assert handle.ended

    async def test_stream_consumes_an_iterable(self) -> None:
        """stream() writes every chunk of an iterable and returns the whole text."""
        async with ar.Run(make_input()) as run:
            with ar.message() as handle:
                text = handle.stream(iter(["Hel", "lo"]))

        assert "Hello" == text
        assert ["Hel", "lo"] == [e["delta"] for e in body(run) if "delta" in e]

    async def test_astream_consumes_an_async_iterable(self) -> None:
        """astream() writes every chunk of an async iterable and returns the whole text."""

        async def chunks() -> AsyncIterator[str]:
            for piece in ("wor", "ld"):
                await asyncio.sleep(0)
                yield piece

        async with ar.Run(make_input()) as run:
            with ar.message() as handle:
                text = await handle.astream(chunks())

        assert "world" == text
        assert ["wor", "ld"] == [e["delta"] for e in body(run) if "delta" in e]

    async def test_end_twice_warns_and_sends_once(self) -> None:
        """Ending a message twice is harmless: one END, one HandleWarning."""
        async with ar.Run(make_input()) as run:
            handle = ar.message()
            handle.end()
            with pytest.warns(ar.HandleWarning, match="already ended"):
                handle.end()

        assert 1 == sum(e["type"] == "TEXT_MESSAGE_END" for e in body(run))

    async def test_write_after_end_raises(self) -> None:
        """Writing to an ended message raises HandleClosedError."""
        async with ar.Run(make_input()):
            handle = ar.message()
            handle.end()

            with pytest.raises(ar.HandleClosedError):
                handle.write("late")


class TestReasoningHandle:
    async def test_first_write_opens_the_message(self) -> None:
        """The first write opens a reasoning message; end closes message and block."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.reasoning(id="rz") as handle:
                handle.write("a")
                handle.write("b")
                handle.encrypted("opaque")

        assert [
            {"type": "REASONING_START", "messageId": "rz"},
            {"type": "REASONING_MESSAGE_START", "messageId": "rz", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rz", "delta": "a"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rz", "delta": "b"},
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "rz",
                "encryptedValue": "opaque",
            },
            {"type": "REASONING_MESSAGE_END", "messageId": "rz"},
            {"type": "REASONING_END", "messageId": "rz"},
        ] == body(run)
        assert_valid(list(run.events))

    async def test_without_writes_only_the_block(self) -> None:
        """A reasoning block never written to sends only REASONING_START and REASONING_END."""
        async with ar.Run(make_input()) as run:
            ar.reasoning().end()

        assert ["REASONING_START", "REASONING_END"] == [e["type"] for e in body(run)]

    async def test_write_after_end_raises(self) -> None:
        """Writing to an ended reasoning block raises HandleClosedError."""
        async with ar.Run(make_input()):
            handle = ar.reasoning()
            handle.end()

            with pytest.raises(ar.HandleClosedError):
                handle.write("late")


class TestToolCallHandle:
    async def test_args_text_and_json(self) -> None:
        """args() sends text as is and any other JSON value as JSON text."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.tool_call("search", id="c-1") as call:
                call.args('{"q":')
                call.args({"k": [1, "é"]})

        assert [
            {"type": "TOOL_CALL_START", "toolCallId": "c-1", "toolCallName": "search"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c-1", "delta": '{"q":'},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c-1", "delta": '{"k": [1, "é"]}'},
            {"type": "TOOL_CALL_END", "toolCallId": "c-1"},
        ] == body(run)

    async def test_result_ends_the_call_and_answers_it(self) -> None:
        """result() closes open arguments, then sends TOOL_CALL_RESULT under a fresh message id."""
        async with ar.Run(make_input(run_id="r")) as run:
            call = ar.tool_call("search")
            call.args("{}")
            result_id = call.result({"hits": 3})

        assert "r-msg-1" == result_id == call.result_message_id
        assert [
            {"type": "TOOL_CALL_END", "toolCallId": "r-tool-1"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "r-msg-1",
                "toolCallId": "r-tool-1",
                "content": '{"hits": 3}',
            },
        ] == body(run)[-2:]
        assert_valid(list(run.events))

    async def test_result_takes_text_and_parts(self) -> None:
        """result() sends a string as is and a sequence of content parts as parts."""
        async with ar.Run(make_input()) as run:
            ar.tool_call("a").result("plain")
            ar.tool_call("b").result([ev.TextPart(text="part")])

        contents = [e["content"] for e in body(run) if e["type"] == "TOOL_CALL_RESULT"]
        assert ["plain", [{"type": "text", "text": "part"}]] == contents

    async def test_parent_message_id_and_end_twice(self) -> None:
        """parent_message_id goes on TOOL_CALL_START; a second end warns."""
        async with ar.Run(make_input()) as run:
            mid = ar.say("calling")
            call = ar.tool_call("search", parent_message_id=mid)
            call.end()
            with pytest.warns(ar.HandleWarning):
                call.end()

        start = next(e for e in body(run) if e["type"] == "TOOL_CALL_START")
        assert mid == start["parentMessageId"]

    async def test_args_after_end_raises(self) -> None:
        """args() after end() raises HandleClosedError."""
        async with ar.Run(make_input()):
            call = ar.tool_call("x")
            call.end()

            with pytest.raises(ar.HandleClosedError):
                call.args("{}")


class TestActivity:
    async def test_snapshot_then_delta(self) -> None:
        """activity() publishes a snapshot; update() a patch against it."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            handle = ar.activity("progress", {"done": 0, "total": 10, "label": "x" * 40}, id="a")
            handle.update({"done": 5, "total": 10, "label": "x" * 40})

        activity = [e for e in body(run) if e["type"].startswith("ACTIVITY_")]
        assert ["ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA"] == [e["type"] for e in activity]
        assert [{"op": "replace", "path": "/done", "value": 5}] == activity[1]["patch"]
        assert {"r-sub-1"} == {e["subagentRunId"] for e in activity}
        assert_valid(list(run.events))


class TestStep:
    async def test_step_as_context_manager(self) -> None:
        """with step(name) sends STEP_STARTED and STEP_FINISHED and makes the step current."""
        async with ar.Run(make_input()) as run:
            with ar.step("plan"):
                inside = ar.current_step()
            after = ar.current_step()

        assert ("plan", None) == (inside, after)
        assert [
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STEP_FINISHED", "stepName": "plan"},
        ] == body(run)

    async def test_step_as_async_context_manager_in_subagent(self) -> None:
        """async with step(name) in a subagent is that subagent's step (steps are per owner)."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"), ar.step("plan"):
            ar.say("step work")

        assert [
            {"type": "STEP_STARTED", "subagentRunId": "r-sub-1", "stepName": "plan"},
            {"type": "STEP_FINISHED", "subagentRunId": "r-sub-1", "stepName": "plan"},
        ] == [e for e in body(run) if e["type"].startswith("STEP_")]
        assert_valid(list(run.events))

    async def test_step_by_explicit_calls(self) -> None:
        """start() and end() work without ``with``; a second end warns."""
        async with ar.Run(make_input()) as run:
            handle = ar.step("plan").start()
            handle.end()
            with pytest.warns(ar.HandleWarning):
                handle.end()

        assert ["STEP_STARTED", "STEP_FINISHED"] == [e["type"] for e in body(run)]

    async def test_run_step_belongs_to_the_parent(self) -> None:
        """run.step() inside a subagent scope is the parent agent's step."""
        async with ar.Run(make_input()) as run, ar.subagent("s"), run.step("top"):
            pass

        assert [
            {"type": "STEP_STARTED", "stepName": "top"},
            {"type": "STEP_FINISHED", "stepName": "top"},
        ] == [e for e in body(run) if e["type"].startswith("STEP_")]


class TestEmit:
    async def test_untagged_event_is_attributed(self) -> None:
        """emit() attributes an untagged attributable event to the ambient subagent."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            ar.emit(ev.CustomEvent(name="ping", value=1))

        assert {"type": "CUSTOM", "subagentRunId": "r-sub-1", "name": "ping", "value": 1} == (
            body(run)[1]
        )

    async def test_tagged_event_keeps_its_tag(self) -> None:
        """emit() leaves an event that carries its own subagentRunId alone."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("a"):
                pass
            with ar.subagent("b"):
                ar.emit(ev.CustomEvent(name="ping", value=1, subagent_run_id="r-sub-1"))

        custom = next(e for e in body(run) if e["type"] == "CUSTOM")
        assert "r-sub-1" == custom["subagentRunId"]


class TestCurrentSubagentId:
    async def test_values_in_and_out_of_scopes(self) -> None:
        """current_subagent_id() is None at top level and outside runs, the id inside a scope."""
        outside = ar.current_subagent_id()
        async with ar.Run(make_input(run_id="r")) as run:
            top = ar.current_subagent_id()
            with ar.subagent("s") as handle:
                inside = ar.current_subagent_id()
                current = ar.current_subagent()

        assert (None, None, "r-sub-1") == (outside, top, inside)
        assert handle is current
        assert "r-sub-1" == run.events[1].subagent_run_id  # type: ignore[attr-defined]


EMITTERS: list[tuple[str, Callable[[], object]]] = [
    ("say", lambda: ar.say("x")),
    ("think", lambda: ar.think("x")),
    ("message", lambda: ar.message()),
    ("reasoning", lambda: ar.reasoning()),
    ("tool_call", lambda: ar.tool_call("x")),
    ("activity", lambda: ar.activity("x", {})),
    ("emit", lambda: ar.emit(ev.CustomEvent(name="x", value=1))),
    ("step", lambda: ar.step("x").start()),
    ("subagent", lambda: ar.subagent("x").start()),
    ("state", lambda: ar.state()),
    ("publish_state", lambda: ar.publish_state()),
    ("current_run", lambda: ar.current_run()),
]


class TestNoActiveRun:
    @pytest.mark.parametrize(("name", "call"), EMITTERS, ids=[n for n, _ in EMITTERS])
    def test_emitter_outside_a_run_raises(self, name: str, call: Callable[[], object]) -> None:
        """Every emitter outside any run raises NoActiveRunError, a LookupError naming the fix."""
        with pytest.raises(ar.NoActiveRunError) as caught:
            call()

        assert isinstance(caught.value, LookupError)
        assert f"{name}() needs an active run" in str(caught.value)
        assert "ambient_runs.Run(input)" in str(caught.value)

    def test_step_decorator_and_subagent_need_no_run_to_be_made(self) -> None:
        """Making a step or subagent object (as a decorator does at import) needs no run."""
        made = (ar.step("x"), ar.subagent("x"))

        assert (False, False) == (made[0].ended, made[1].started)


class TestHandleOwnership:
    async def test_continuation_from_another_task_keeps_the_owner(self) -> None:
        """A message opened in a subagent keeps its owner when written from a task at top level."""
        async with ar.Run(make_input(run_id="r")) as run:
            researcher = ar.subagent("s").start()
            handle = researcher.message()

            async def elsewhere() -> None:
                handle.write("from a task")
                handle.end()

            await asyncio.create_task(elsewhere())
            researcher.finish()
            top = ar.current_subagent_id()

        assert None is top
        assert {"r-sub-1"} == {
            e.get("subagentRunId") for e in body(run) if e["type"].startswith("TEXT_")
        }
        assert_valid(list(run.events))

    async def test_continuation_from_a_thread_keeps_the_owner(self) -> None:
        """A tool call opened in a subagent keeps its owner when continued from a bare thread."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s"):
                call = ar.tool_call("search")

                def worker() -> None:
                    call.args("{}")
                    call.result("done")

                thread = threading.Thread(target=worker)
                thread.start()
                thread.join()

        assert {"r-sub-1"} == {
            e.get("subagentRunId") for e in body(run) if e["type"].startswith("TOOL_")
        }
        assert_valid(list(run.events))

    async def test_tool_call_takes_its_parent_messages_owner(self) -> None:
        """A tool call on a subagent's message is that subagent's, wherever it is opened."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s"):
                mid = ar.say("I'll search")
            with ar.subagent("t"):
                call = ar.tool_call("search", parent_message_id=mid)
                call.end()
            top = ar.tool_call("lookup", parent_message_id=mid)
            top.result("ok")

        assert {"r-sub-1"} == {
            e.get("subagentRunId") for e in body(run) if e["type"].startswith("TOOL_")
        }
        assert_valid(list(run.events))

    async def test_tool_call_on_a_parent_message_from_a_subagent(self) -> None:
        """A tool call attached to the parent's message, opened inside a subagent, is untagged."""
        async with ar.Run(make_input(run_id="r")) as run:
            mid = ar.say("delegating")
            with ar.subagent("s"):
                with ar.tool_call("search", parent_message_id=mid) as call:
                    call.args("{}")
                ar.say("sub work")

        assert {None} == {
            e.get("subagentRunId") for e in body(run) if e["type"].startswith("TOOL_")
        }
        assert_valid(list(run.events))

    @pytest.mark.parametrize("opens", ["say", "message"])
    async def test_tool_call_on_a_subagents_message_is_closed_by_that_subagent(
        self, opens: str
    ) -> None:
        """A call opened at top level on a subagent's message is closed when that subagent ends."""
        async with ar.Run(make_input(run_id="r")) as run:
            researcher = ar.subagent("s").start()
            if opens == "say":
                mid = researcher.say("I'll search")
            else:
                with researcher.message() as message:
                    message.write("I'll search")
                mid = message.id
            call = ar.tool_call("search", parent_message_id=mid)
            with pytest.warns(ar.LeftOpenWarning):
                researcher.finish()

        assert call.ended
        assert [
            ("TOOL_CALL_START", "r-sub-1"),
            ("TOOL_CALL_END", "r-sub-1"),
            ("SUBAGENT_FINISHED", "r-sub-1"),
        ] == [(e["type"], e.get("subagentRunId")) for e in body(run)[-3:]]
        assert_valid(list(run.events))
