"""
Seed parity: every example of the Rust seed's ``SubagentHandle`` documentation, in Python.

Each test reproduces one example of ``shared/seed`` with the same event order
and the same ids (``r-sub-1`` for the first subagent of run ``r``). The Rust
examples drain the log after ``RUN_STARTED``; so do these.
"""

from __future__ import annotations

import dataclasses

from support.events import types_of

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input


class TestSubagentHandleExample:
    async def test_handle_attributes_and_parent_stays_untagged(self) -> None:
        """The handle example: [1] carries r-sub-1, [4] finishes it, [5] is untagged."""
        async with ar.Run(make_input(run_id="r")) as run:
            started = run.events.drain()
            with run.subagent("researcher") as researcher:
                researcher.say("Three sources found.")
                researcher.finish_with({"sources": 3})
            run.say("Thanks.")
            events = run.events.drain()

        assert [ev.EventType.RUN_STARTED] == types_of(started)
        assert ev.EventType.SUBAGENT_STARTED == events[0].TYPE
        assert "r-sub-1" == events[1].subagent_run_id  # type: ignore[attr-defined]
        assert ev.EventType.SUBAGENT_FINISHED == events[4].TYPE
        assert None is events[5].subagent_run_id  # type: ignore[attr-defined]
        assert {"sources": 3} == events[4].result  # type: ignore[attr-defined]
        assert_valid([*started, *events, *run.events])

    async def test_module_level_twin_emits_the_same_stream(self) -> None:
        """The same example written with ambient emitters gives the identical stream."""
        async with ar.Run(make_input(run_id="r")) as explicit:
            with explicit.subagent("researcher") as researcher:
                researcher.say("Three sources found.")
                researcher.finish_with({"sources": 3})
            explicit.say("Thanks.")
        async with ar.Run(make_input(run_id="r")) as ambient:
            with ar.subagent("researcher") as handle:
                ar.say("Three sources found.")
                handle.finish_with({"sources": 3})
            ar.say("Thanks.")

        assert list(explicit.events) == list(ambient.events)

    async def test_nesting_through_a_handle_is_automatic(self) -> None:
        """A subagent opened through a handle gets the handle's id as parentSubagentRunId."""
        async with ar.Run(make_input(run_id="r")) as run:
            with run.subagent("outer") as outer, outer.subagent("inner") as inner:
                inner.say("deep")
        events = list(run.events)

        announced = [e for e in events if isinstance(e, ev.SubagentStartedEvent)]
        assert [("r-sub-1", None), ("r-sub-2", "r-sub-1")] == [
            (e.subagent_run_id, e.parent_subagent_run_id) for e in announced
        ]
        assert_valid(events)

    async def test_terminators_restore_the_enclosing_attribution(self) -> None:
        """Every ending method emits its terminator untagged by the invocation it closes."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("a") as a:
                a.finish()
            with ar.subagent("b") as b:
                b.fail("no sources", code="empty")
            ar.say("after")
        events = list(run.events)

        assert [
            ev.SubagentFinishedEvent(subagent_run_id="r-sub-1"),
            ev.SubagentErrorEvent(subagent_run_id="r-sub-2", message="no sources", code="empty"),
        ] == [e for e in events if isinstance(e, ev.SubagentFinishedEvent | ev.SubagentErrorEvent)]
        assert None is events[-2].subagent_run_id  # type: ignore[attr-defined]
        assert_valid(events)


class TestAccessorExamples:
    async def test_last_user_text(self) -> None:
        """The last_user_text example: the user's "add milk" comes back as text."""
        data = ev.RunAgentInput(
            thread_id="thread-1",
            run_id="run-1",
            messages=(ev.UserMessage(id="msg-1", content="add milk"),),
        )

        async with ar.Run(data) as run:
            text = run.last_user_text()

        assert "add milk" == text

    async def test_until_cancelled_returns_the_answer(self) -> None:
        """The until_cancelled example: a future that wins the race gives its value."""

        async def reply() -> str:
            return "the model's reply"

        async with ar.Run(make_input()) as run:
            answer = await run.until_cancelled(reply())

        assert "the model's reply" == answer


class TestSubagentWithExample:
    async def test_agents_as_tools_order(self) -> None:
        """The subagent_with example: call closes, subagent runs, result (types 3, 7, 8)."""
        async with ar.Run(make_input(run_id="r")) as run:
            run.events.drain()
            call = run.tool_call("task")
            call.args('{"brief":"find sources"}')
            call_id, result_id = call.id, call.result_message_id
            call.end()

            announce = ev.SubagentStartedEvent(
                subagent_run_id="researcher-7", name="researcher", parent_tool_call_id=call_id
            )
            with run.subagent_with(announce) as researcher:
                researcher.say("Three sources found.")
                researcher.finish()

            run.emit(
                ev.ToolCallResultEvent(
                    message_id=result_id, tool_call_id=call_id, content="3 sources"
                )
            )
            kinds = types_of(run.events.drain())

        assert ev.EventType.SUBAGENT_STARTED == kinds[3]
        assert ev.EventType.SUBAGENT_FINISHED == kinds[7]
        assert ev.EventType.TOOL_CALL_RESULT == kinds[8]
        assert 9 == len(kinds)

    async def test_explicit_id_and_links_go_out_as_announced(self) -> None:
        """The announcement keeps its explicit id and parentToolCallId; its events carry the id."""
        async with ar.Run(make_input(run_id="r")) as run:
            call = run.tool_call("task")
            call.end()
            announce = ev.SubagentStartedEvent(
                subagent_run_id="researcher-7", name="researcher", parent_tool_call_id=call.id
            )
            with ar.subagent_with(announce):
                ar.say("Three sources found.")
            call.result("3 sources")
        events = list(run.events)

        started = next(e for e in events if isinstance(e, ev.SubagentStartedEvent))
        assert announce == started
        assert ["researcher-7"] * 3 == [
            e.subagent_run_id
            for e in events
            if isinstance(
                e, ev.TextMessageContentEvent | ev.TextMessageStartEvent | ev.TextMessageEndEvent
            )
        ]
        assert_valid(events)

    async def test_absent_parent_is_filled_from_the_enclosing_scope(self) -> None:
        """subagent_with fills a missing parentSubagentRunId from the ambient subagent."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("outer"):
                announce = ev.SubagentStartedEvent(subagent_run_id="inner-1", name="inner")
                with ar.subagent_with(announce):
                    pass
        events = list(run.events)

        inner = next(
            e
            for e in events
            if isinstance(e, ev.SubagentStartedEvent) and e.subagent_run_id == "inner-1"
        )
        assert "r-sub-1" == inner.parent_subagent_run_id
        assert_valid(events)


@dataclasses.dataclass
class Draft:
    """The seed's state example."""

    revision: int = 0


class TestStateExample:
    async def test_update_state_mutates_and_publishes(self) -> None:
        """The update_state example: revision becomes 1, and the change is published."""
        async with ar.Run(make_input(), state=Draft()) as run:

            def bump(draft: Draft) -> None:
                draft.revision += 1

            run.update_state(bump)
            revision = run.state().revision
        events = list(run.events)

        assert 1 == revision
        assert [ev.StateSnapshotEvent(snapshot={"revision": 1})] == [
            e for e in events if isinstance(e, ev.StateSnapshotEvent)
        ]
        assert_valid(events)

    async def test_publish_state_is_a_no_op_without_change(self) -> None:
        """publish_state sends nothing when nothing changed since the last publish."""
        async with ar.Run(make_input(), state=Draft()) as run:
            run.publish_state()
            run.publish_state()
        kinds = types_of(list(run.events))

        assert 1 == kinds.count(ev.EventType.STATE_SNAPSHOT)

    async def test_set_state_publishes_a_delta_after_the_snapshot(self) -> None:
        """set_state after the first publish sends the change as a STATE_DELTA."""
        async with ar.Run(make_input(), state={"items": ["a"] * 20, "n": 0}) as run:
            run.publish_state()
            run.set_state({"items": ["a"] * 20, "n": 1})
        events = list(run.events)

        delta = next(e for e in events if isinstance(e, ev.StateDeltaEvent))
        assert [{"op": "replace", "path": "/n", "value": 1}] == ar.to_wire(delta)["delta"]
        assert_valid(events)
