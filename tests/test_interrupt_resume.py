"""Interrupts that resume anywhere: a caught `Interrupted`, `interrupt`, `Run.resume_for`."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from ag_ui.core import RunFinishedEvent

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input, wire


def terminal(run: ar.Run) -> dict[str, Any]:
    """The run's terminal event in wire form, checked by the official model when it finished."""
    last = wire(list(run.events))[-1]
    if last["type"] == "RUN_FINISHED":
        RunFinishedEvent.model_validate(last)
    return last


class TestCaughtInterrupted:
    def test_a_caught_interrupt_leaves_a_valid_run_with_its_interrupts(self) -> None:
        @ar.subagent("approver")
        def ask() -> None:
            raise ar.Interrupted(ar.interrupt("approval", message="Book it?"))

        with ar.Run(make_input(run_id="r1")) as run:
            try:
                ask()
            except ar.Interrupted:
                ar.say("I will wait for your answer.")  # the fallback
            run.finish_with({"asked": True})
        assert_valid(list(run.events))
        end = terminal(run)
        assert "RUN_FINISHED" == end["type"]
        [pending] = end["outcome"]["interrupts"]
        assert ("approval", "Book it?", "r1-sub-1") == (
            pending["reason"],
            pending["message"],
            pending["subagentRunId"],
        )
        assert {"asked": True} == end["result"]
        suspended = next(e for e in wire(list(run.events)) if e["type"] == "SUBAGENT_FINISHED")
        assert [pending["id"]] == suspended["outcome"]["interruptIds"]

    def test_a_later_interrupt_joins_the_caught_one(self) -> None:
        @ar.subagent("first")
        def first() -> None:
            raise ar.Interrupted(ar.interrupt("one"))

        @ar.subagent("second")
        def second() -> None:
            raise ar.Interrupted(ar.interrupt("two"))

        with ar.Run(make_input(run_id="r1")) as run:
            with contextlib.suppress(ar.Interrupted):
                first()
            second()
        assert_valid(list(run.events))
        assert ["one", "two"] == [i["reason"] for i in terminal(run)["outcome"]["interrupts"]]

    def test_an_error_after_a_caught_interrupt_is_a_run_error(self) -> None:
        @ar.subagent("first")
        def first() -> None:
            raise ar.Interrupted(ar.interrupt("one"))

        def body() -> None:
            with contextlib.suppress(ar.Interrupted):
                first()
            raise KeyError("boom")

        run = ar.Run(make_input())
        with pytest.raises(KeyError), run:
            body()
        assert ("RUN_ERROR", "KeyError") == (terminal(run)["type"], terminal(run)["code"])


class TestInterruptIds:
    def test_inside_a_subagent_the_id_names_the_invocation(self) -> None:
        with ar.Run(make_input(run_id="r1")), ar.subagent("re/viewer~x") as sub:
            made = ar.interrupt("approval", tool_call_id="c1", metadata={"k": 1})
        assert made.id == "r1-int-1~r1-sub-1~re%2Fviewer%7Ex"
        assert (sub.id, "c1", {"k": 1}) == (made.subagent_run_id, made.tool_call_id, made.metadata)

    def test_outside_a_subagent_a_plain_fresh_id(self) -> None:
        with ar.Run(make_input(run_id="r1")):
            assert ("r1-int-1", None) == (
                (made := ar.interrupt("confirm")).id,
                made.subagent_run_id,
            )

    def test_needs_a_run(self) -> None:
        with pytest.raises(ar.NoActiveRunError):
            ar.interrupt("confirm")


class TestResumeFor:
    def test_a_fresh_run_continues_the_invocation_from_the_answer_alone(self) -> None:
        @ar.subagent("re/viewer")
        def review() -> None:
            raise ar.Interrupted(ar.interrupt("approval"))

        with ar.Run(make_input(run_id="r1")) as paused:
            review()
        [pending] = terminal(paused)["outcome"]["interrupts"]

        # Another process: nothing but the client's answer.
        answer = ev.ResumeEntry(interrupt_id=pending["id"], status="resolved", payload="yes")
        with ar.Run(make_input(run_id="r2", resume=(answer,))) as resumed:
            found = resumed.resume_for(pending["id"])
            assert found is not None
            assert ("r1-sub-1", "re/viewer", "yes", "resolved") == (
                found.subagent_run_id,
                found.subagent_name,
                found.payload,
                found.status,
            )
            assert found.subagent_name is not None
            with ar.subagent(found.subagent_name, id=found.subagent_run_id):
                ar.say(f"Approved: {found.payload}")
        events = wire(list(resumed.events))
        assert_valid(list(resumed.events))
        started = next(e for e in events if e["type"] == "SUBAGENT_STARTED")
        assert ("r1-sub-1", "re/viewer") == (started["subagentRunId"], started["name"])
        assert {"r1-sub-1"} == {e["subagentRunId"] for e in events if "messageId" in e}

    def test_an_id_of_ones_own_has_no_invocation(self) -> None:
        answer = ev.ResumeEntry(interrupt_id="mine", status="cancelled")
        with ar.Run(make_input(resume=(answer,))) as run:
            found = run.resume_for("mine")
            assert found is not None
            assert (answer, None, None) == (
                found.entry,
                found.subagent_run_id,
                found.subagent_name,
            )
            assert run.resume_for("other") is None


def test_the_interrupt_docstring_names_what_exists() -> None:
    doc = ev.Interrupt.__doc__ or ""
    assert "ambient_runs.interrupt" in doc
    assert callable(ar.interrupt)
