"""A subagent handle: attribution after an explicit end, and the run through the handle."""

from __future__ import annotations

import asyncio
import typing

import pytest
from support.events import said

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._reads import Reads
from ambient_runs.testing import assert_valid, make_input


class TestTerminatorRestoresAttribution:
    @pytest.mark.parametrize("end", ["finish", "finish_with", "suspend", "fail"])
    def test_a_say_after_an_explicit_end_belongs_to_the_enclosing_scope(self, end: str) -> None:
        with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("outer") as outer:
                with ar.subagent("inner") as inner:
                    ar.say("before")
                    if end == "finish_with":
                        inner.finish_with({"ok": 1})
                    elif end == "suspend":
                        inner.suspend("i1")
                    elif end == "fail":
                        inner.fail("no")
                    else:
                        inner.finish()
                    assert outer.id == ar.current_subagent_id()
                    ar.say("after")
                ar.say("outer again")
            ar.say("root")
            if end == "suspend":  # the run ends on the interrupt the invocation waits for
                raise ar.Interrupted(ev.Interrupt(id="i1", reason="r", subagent_run_id=inner.id))
        assert [
            ("before", inner.id),
            ("after", outer.id),
            ("outer again", outer.id),
            ("root", None),
        ] == said(run)
        assert_valid(list(run.events))

    async def test_async_with_and_the_run_level(self) -> None:
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("solo") as solo:
            solo.finish()
            assert ar.current_subagent_id() is None
            ar.say("mine")
        assert [("mine", None)] == said(run)
        assert_valid(list(run.events))

    async def test_another_task_keeps_the_frame_it_inherited(self) -> None:
        """Only the block that ended it is restored: a finish from another task changes none."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("solo") as solo:
                await asyncio.to_thread(solo.finish)
                assert solo.id == ar.current_subagent_id()
        assert_valid(list(run.events))


class TestHandleReachesTheRun:
    async def test_input_state_and_cancellation(self) -> None:
        tools = (ev.Tool(name="search", description="web", parameters={"type": "object"}),)
        answer = ev.ResumeEntry(interrupt_id="i1", status="resolved", payload=1)
        input = make_input(run_id="r", user="hello", state={"n": 1}, tools=tools, resume=(answer,))
        async with ar.Run(input) as run:
            handle = run.subagent("worker").start()
            assert handle.run is run
            assert (input, "thread", "r") == (handle.input, handle.thread_id, handle.run_id)
            assert ("hello", tools) == (handle.last_user_text(), handle.tools)
            found = handle.resume_for("i1")
            assert found is not None
            assert found.payload == 1
            assert {"n": 1} == handle.state()
            handle.update_state(lambda s: s.update(n=2))
            assert not handle.is_cancelled
            run.cancel()
            assert handle.is_cancelled
            with pytest.raises(ar.RunCancelledError):
                handle.check_cancelled()
            await asyncio.wait_for(handle.cancelled(), 1)
            assert await handle.until_cancelled(asyncio.sleep(10)) is None
            handle.finish()
        [published] = [e for e in run.events if isinstance(e, ev.StateSnapshotEvent)]
        assert handle.id == published.subagent_run_id  # through the handle: attributed to it
        assert_valid(list(run.events))

    def test_before_it_starts_there_is_no_run(self) -> None:
        with ar.Run(make_input()):
            handle = ar.subagent("later")
            with pytest.raises(ar.HandleClosedError, match="not started"):
                handle.run  # noqa: B018


class TestReadOnlyAttributes:
    """What handles and invocations show of their state reads true and cannot be written."""

    def test_each_reads_its_state_and_refuses_assignment(self) -> None:
        with ar.Run(make_input(run_id="r")) as run:
            spec = ar.subagent("worker", description="does work", parent_tool_call_id="c1")
            with spec as worker, ar.step("plan") as step, ar.message() as message:
                shown = {
                    "worker": (worker.name, worker.description, worker.parent_tool_call_id),
                    "ids": (worker.id, message.owner, step.owner),
                    "started": (worker.started, worker.ended, message.ended, step.ended),
                    "step": (step.name, step.spec.name),
                }
                for handle, name in [
                    (worker, "id"),
                    (worker, "name"),
                    (worker, "ended"),
                    (worker, "spec"),
                    (message, "owner"),
                    (message, "ended"),
                    (step, "name"),
                ]:
                    with pytest.raises(AttributeError):
                        setattr(handle, name, "other")
            assert (worker.ended, message.ended, step.ended) == (True, True, True)
        assert shown == {
            "worker": ("worker", "does work", "c1"),
            "ids": (worker.id, worker.id, worker.id),
            "started": (True, False, False, False),
            "step": ("plan", "plan"),
        }
        assert worker.id is not None
        assert worker.id.startswith("r-sub-")
        assert type(worker).ended.__doc__, "each attribute keeps its documentation"
        # Evaluated annotations keep the type read (`typing.get_type_hints`, as cattrs does).
        assert typing.get_type_hints(ar.Subagent)["started"] == Reads[bool]
        assert run.finished
