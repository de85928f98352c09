"""
`ambient_runs.subagent`: the context manager and handle faces, nesting, endings, results.

The decorator face, across the four callable kinds, is in ``test_decorators.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from support.events import body

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input


def endings(run: ar.Run) -> list[dict[str, Any]]:
    """Return the wire form of every SUBAGENT_FINISHED and SUBAGENT_ERROR."""
    return [e for e in body(run) if e["type"] in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR")]


class TestSubagentContextManager:
    async def test_with_announces_attributes_and_finishes(self) -> None:
        """with subagent(...) announces every given field, tags what is said, and finishes."""
        async with ar.Run(make_input(run_id="r")) as run:
            call = ar.tool_call("delegate")
            call.end()
            with ar.subagent(
                "researcher",
                description="finds sources",
                id="res-1",
                parent_tool_call_id=call.id,
            ) as researcher:
                ar.say("hi")

        assert ("res-1", "researcher") == (researcher.id, researcher.name)
        assert [
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "res-1",
                "name": "researcher",
                "description": "finds sources",
                "parentToolCallId": "r-tool-1",
            },
            {
                "type": "TEXT_MESSAGE_START",
                "subagentRunId": "res-1",
                "messageId": "r-msg-2",
                "role": "assistant",
            },
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "subagentRunId": "res-1",
                "messageId": "r-msg-2",
                "delta": "hi",
            },
            {"type": "TEXT_MESSAGE_END", "subagentRunId": "res-1", "messageId": "r-msg-2"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "res-1"},
        ] == body(run)[2:]
        assert_valid(list(run.events))

    async def test_async_with(self) -> None:
        """async with subagent(...) behaves like with."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            await asyncio.sleep(0)
            ar.say("x")

        assert ["r-sub-1"] * 5 == [e["subagentRunId"] for e in body(run)]

    async def test_parent_message_id_is_announced(self) -> None:
        """parent_message_id goes on SUBAGENT_STARTED."""
        async with ar.Run(make_input()) as run:
            mid = ar.say("spawning")
            with ar.subagent("s", parent_message_id=mid):
                pass

        assert mid == body(run)[3]["parentMessageId"]

    async def test_exception_sends_error_and_propagates_the_same_object(self) -> None:
        """An exception leaving the scope sends SUBAGENT_ERROR and propagates as is."""
        boom = KeyError("missing")

        async with ar.Run(make_input(run_id="r"), expose_errors=True) as run:
            with pytest.raises(KeyError) as caught, ar.subagent("s"):
                raise boom

        assert boom is caught.value
        assert [
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": "r-sub-1",
                "message": "'missing'",
                "code": "KeyError",
            }
        ] == endings(run)
        assert_valid(list(run.events))

    async def test_error_code_attribute_becomes_the_code(self) -> None:
        """An exception's string ``code`` attribute becomes SUBAGENT_ERROR.code."""

        class Busy(Exception):
            code = "busy"

        async with ar.Run(make_input(), expose_errors=True) as run:
            with pytest.raises(Busy), ar.subagent("s"):
                raise Busy

        assert [("Busy", "busy")] == [(e["message"], e["code"]) for e in endings(run)]

    async def test_cancellation_is_error_cancelled(self) -> None:
        """Cancellation inside the scope sends SUBAGENT_ERROR with code cancelled."""
        entered = asyncio.Event()

        async def agent() -> None:
            async with ar.subagent("s"):
                entered.set()
                await asyncio.Event().wait()

        async with ar.Run(make_input(run_id="r")) as run:
            task = asyncio.create_task(agent())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        assert [
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": "r-sub-1",
                "message": "cancelled",
                "code": "cancelled",
            }
        ] == endings(run)
        assert_valid(list(run.events))

    async def test_interrupted_suspends_naming_its_own_interrupts(self) -> None:
        """Interrupted suspends each scope it leaves, naming only interrupts raised there."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("outer"):
            with ar.subagent("inner"):
                raise ar.Interrupted(ev.Interrupt(id="mine", reason="r"))

        assert [
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-2",
                "outcome": {"type": "suspended", "interruptIds": ["mine"]},
            },
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-1",
                "outcome": {"type": "suspended"},
            },
        ] == endings(run)
        assert "r-sub-2" == run.events[-1].outcome.interrupts[0].subagent_run_id  # type: ignore[attr-defined]
        assert_valid(list(run.events))

    async def test_exit_exceptions_are_not_errors(self) -> None:
        """SystemExit and KeyboardInterrupt finish the invocation (named in metadata)."""
        async with ar.Run(make_input(run_id="r")) as run:
            with pytest.raises(SystemExit), ar.subagent("a"):
                raise SystemExit(0)
            with pytest.raises(KeyboardInterrupt), ar.subagent("b"):
                raise KeyboardInterrupt

        assert [
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-1",
                "metadata": {"ambient_runs": {"exit": "SystemExit"}},
            },
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-2",
                "metadata": {"ambient_runs": {"exit": "KeyboardInterrupt"}},
            },
        ] == endings(run)

    async def test_reentering_warns_once_and_announces_once(self) -> None:
        """Entering the same subagent twice warns once; it is announced and finished once."""
        async with ar.Run(make_input()) as run:
            handle = ar.subagent("s")
            with handle:
                with pytest.warns(ar.HandleWarning, match="already started"), handle:
                    ar.say("inner")
                still = ar.current_subagent_id()

        assert handle.id == still
        assert ["SUBAGENT_STARTED", "SUBAGENT_FINISHED"] == [
            e["type"] for e in body(run) if e["type"].startswith("SUBAGENT_")
        ]
        assert_valid(list(run.events))


class TestSubagentHandle:
    async def test_start_and_explicit_emitters(self) -> None:
        """start() announces without making it ambient; the handle's emitters attribute to it."""
        async with ar.Run(make_input(run_id="r")) as run:
            researcher = ar.subagent("researcher").start()
            ambient = ar.current_subagent_id()
            researcher.say("attributed")
            ar.say("not attributed")
            researcher.finish()

        assert None is ambient
        assert ["r-sub-1", None] == [
            e.get("subagentRunId") for e in body(run) if e["type"] == "TEXT_MESSAGE_CONTENT"
        ]
        assert_valid(list(run.events))

    async def test_finish_with_result(self) -> None:
        """finish_with(result) sends SUBAGENT_FINISHED carrying the result."""
        async with ar.Run(make_input(run_id="r")) as run:
            ar.subagent("s").start().finish_with(["a", 1])

        assert [{"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1", "result": ["a", 1]}] == (
            endings(run)
        )

    async def test_suspend_names_interrupt_ids(self) -> None:
        """suspend(ids) sends a suspended outcome; the run then pauses on those interrupts."""
        async with ar.Run(make_input(run_id="r")) as run:
            handle = ar.subagent("s").start()
            ask = ev.Interrupt(id="i-1", reason="input_required", subagent_run_id=handle.id)
            handle.suspend(["i-1"])
            raise ar.Interrupted(ask)

        assert [
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-1",
                "outcome": {"type": "suspended", "interruptIds": ["i-1"]},
            }
        ] == endings(run)
        assert_valid(list(run.events))

    async def test_fail_with_and_without_code(self) -> None:
        """fail(message) and fail(message, code=...) send SUBAGENT_ERROR; the run goes on."""
        async with ar.Run(make_input(run_id="r")) as run:
            ar.subagent("a").start().fail("no luck")
            ar.subagent("b").start().fail("no luck", code="empty")
            ar.say("carry on")

        assert [
            {"type": "SUBAGENT_ERROR", "subagentRunId": "r-sub-1", "message": "no luck"},
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": "r-sub-2",
                "message": "no luck",
                "code": "empty",
            },
        ] == endings(run)
        assert_valid(list(run.events))

    async def test_second_ending_warns_and_sends_nothing(self) -> None:
        """Ending an ended invocation warns HandleWarning and sends nothing."""
        async with ar.Run(make_input()) as run:
            handle = ar.subagent("s").start()
            handle.finish()
            with pytest.warns(ar.HandleWarning):
                handle.fail("again")

        assert 1 == len(endings(run))

    async def test_explicit_end_inside_with_wins(self) -> None:
        """An explicit ending inside ``with`` is the one sent; leaving the block adds nothing."""
        async with ar.Run(make_input()) as run:
            with ar.subagent("s") as handle:
                handle.fail("gave up", code="x")

        assert ["SUBAGENT_ERROR"] == [e["type"] for e in endings(run)]

    async def test_ending_before_start_raises(self) -> None:
        """finish() on a subagent that never started raises HandleClosedError."""
        async with ar.Run(make_input()):
            handle = ar.subagent("s")

            with pytest.raises(ar.HandleClosedError, match="never started"):
                handle.finish()

    async def test_emitting_through_an_unstarted_handle_raises(self) -> None:
        """The handle's emitters need it started."""
        async with ar.Run(make_input()):
            with pytest.raises(ar.HandleClosedError, match="has not started"):
                ar.subagent("s").say("x")

    @pytest.mark.parametrize("how", ["finish", "with", "decorator"])
    async def test_emitting_through_an_ended_handle_raises(self, how: str) -> None:
        """An ended invocation's emitters raise HandleClosedError naming it, and send nothing."""
        async with ar.Run(make_input(run_id="r")) as run:
            if how == "finish":
                handle = ar.subagent("s").start()
                handle.finish()
            elif how == "with":
                with ar.subagent("s") as handle:
                    pass
            else:

                @ar.subagent("s")
                def body_() -> ar.Subagent | None:
                    return ar.current_subagent()

                with pytest.warns(ar.ResultWarning):
                    found = body_()
                assert found is not None
                handle = found
            sent = len(run.events)

            with pytest.raises(ar.HandleClosedError, match=r"'s' \(r-sub-1\) has ended"):
                handle.say("late")
            with pytest.raises(ar.HandleClosedError, match="has ended"):
                ar.use(handle)(ar.say, "late")
            assert sent == len(run.events)

    async def test_entering_an_ended_handle_raises(self) -> None:
        """Entering an ended invocation again raises HandleClosedError and announces nothing."""
        async with ar.Run(make_input(run_id="r")) as run:
            handle = ar.subagent("s")
            with handle:
                pass

            with pytest.raises(ar.HandleClosedError, match="cannot be entered again"), handle:
                pass  # pragma: no cover

        assert ["SUBAGENT_STARTED", "SUBAGENT_FINISHED"] == [e["type"] for e in body(run)]

    async def test_use_makes_a_handle_ambient_for_one_call(self) -> None:
        """use(handle)(fn, ...) runs fn with the handle ambient, even from a bare thread."""
        seen: list[str | None] = []
        async with ar.Run(make_input(run_id="r")) as run:
            handle = ar.subagent("s").start()

            def callback(text: str) -> None:
                seen.append(ar.current_subagent_id())
                ar.say(text)

            thread = threading.Thread(target=ar.use(handle), args=(callback, "from a thread"))
            thread.start()
            thread.join()
            handle.finish()

        assert ["r-sub-1"] == seen
        assert ["r-sub-1"] * 3 == [
            e["subagentRunId"] for e in body(run) if e["type"].startswith("TEXT_")
        ]
        assert_valid(list(run.events))

    async def test_repr(self) -> None:
        """The repr names the subagent, its id and its state."""
        async with ar.Run(make_input(run_id="r")):
            handle = ar.subagent("s")
            before = repr(handle)
            handle.start()
            during = repr(handle)
            handle.finish()

        assert "<Subagent 's' id=None not started>" == before
        assert "<Subagent 's' id='r-sub-1' open>" == during
        assert "<Subagent 's' id='r-sub-1' ended>" == repr(handle)


class TestNesting:
    async def test_parent_is_filled_automatically(self) -> None:
        """Nested scopes get parentSubagentRunId from the enclosing one, three levels deep."""

        @ar.subagent("leaf")
        def leaf() -> None:
            ar.say("leaf")

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("outer"):
                async with ar.subagent("middle"):
                    leaf()
            with ar.subagent("sibling"):
                pass

        assert [
            ("r-sub-1", "outer", None),
            ("r-sub-2", "middle", "r-sub-1"),
            ("r-sub-3", "leaf", "r-sub-2"),
            ("r-sub-4", "sibling", None),
        ] == [
            (e["subagentRunId"], e["name"], e.get("parentSubagentRunId"))
            for e in body(run)
            if e["type"] == "SUBAGENT_STARTED"
        ]
        assert_valid(list(run.events))

    async def test_handle_subagent_nests_under_the_handle(self) -> None:
        """handle.subagent(...) nests under the handle even when another scope is ambient."""
        async with ar.Run(make_input(run_id="r")) as run:
            outer = ar.subagent("outer").start()
            with ar.subagent("other"), outer.subagent("inner"):
                ar.say("inner speaks")
            outer.finish()

        inner = next(e for e in body(run) if e.get("name") == "inner")
        assert "r-sub-1" == inner["parentSubagentRunId"]
        assert_valid(list(run.events))


@dataclasses.dataclass
class Report:
    """A result with a JSON form."""

    sources: int


class TestResults:
    async def test_json_return_value_is_the_result(self) -> None:
        """A decorated subagent's JSON-able return value becomes SUBAGENT_FINISHED.result."""

        @ar.subagent("s")
        def agent() -> Report:
            return Report(sources=3)

        async with ar.Run(make_input(run_id="r")) as run:
            value = agent()

        assert Report(3) == value
        assert [
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1", "result": {"sources": 3}}
        ] == (endings(run))

    async def test_none_sends_no_result(self) -> None:
        """A subagent returning None finishes without a result."""

        @ar.subagent("s")
        async def agent() -> None:
            return None

        async with ar.Run(make_input(run_id="r")) as run:
            await agent()

        assert [{"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"}] == endings(run)

    async def test_non_json_result_warns(self) -> None:
        """A return value with no JSON form warns ResultWarning; the value is still returned."""
        marker = object()

        @ar.subagent("s")
        def agent() -> object:
            return marker

        async with ar.Run(make_input(run_id="r")) as run:
            with pytest.warns(ar.ResultWarning, match="no JSON form"):
                value = agent()

        assert marker is value
        assert [{"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"}] == endings(run)


class TestLeftOpen:
    async def test_scope_end_closes_everything_in_reverse(self) -> None:
        """A scope ending closes its open message, reasoning, call, step, child, newest first."""
        async with ar.Run(make_input(run_id="r")) as run:
            with pytest.warns(ar.LeftOpenWarning), ar.subagent("s"):  # noqa: PT031
                ar.message()
                ar.reasoning().write("hmm")
                ar.tool_call("search")
                ar.step("plan").start()
                ar.subagent("child").start()
            ar.say("after")

        assert [
            ("SUBAGENT_FINISHED", "r-sub-2"),
            ("STEP_FINISHED", "r-sub-1"),
            ("TOOL_CALL_END", "r-sub-1"),
            ("REASONING_MESSAGE_END", "r-sub-1"),
            ("REASONING_END", "r-sub-1"),
            ("TEXT_MESSAGE_END", "r-sub-1"),
            ("SUBAGENT_FINISHED", "r-sub-1"),
        ] == [(e["type"], e.get("subagentRunId")) for e in body(run)[-10:-3]]
        assert_valid(list(run.events))

    async def test_closed_handles_of_a_child_close_first(self) -> None:
        """A child left open closes its own open handles before it finishes."""
        async with ar.Run(make_input(run_id="r")) as run:
            with pytest.warns(ar.LeftOpenWarning), ar.subagent("s"):  # noqa: PT031
                child = ar.subagent("child").start()
                child.message()

        assert [
            ("TEXT_MESSAGE_END", "r-sub-2"),
            ("SUBAGENT_FINISHED", "r-sub-2"),
            ("SUBAGENT_FINISHED", "r-sub-1"),
        ] == [(e["type"], e.get("subagentRunId")) for e in body(run)[-3:]]
        assert_valid(list(run.events))

    async def test_after_an_exception_closing_is_quiet(self) -> None:
        """After an exception open handles are closed quietly, then SUBAGENT_ERROR."""
        async with ar.Run(make_input(run_id="r")) as run:
            with pytest.raises(RuntimeError, match="boom"), ar.subagent("s"):  # noqa: PT012
                ar.message()
                raise RuntimeError("boom")

        assert ["TEXT_MESSAGE_END", "SUBAGENT_ERROR"] == [e["type"] for e in body(run)[-2:]]
        assert_valid(list(run.events))

    async def test_handles_closed_by_their_owner_are_not_reclosed(self) -> None:
        """Handles ended in time leave nothing for the scope to close, and no warning."""
        async with ar.Run(make_input()) as run:
            with ar.subagent("s"):
                with ar.message() as message:
                    message.write("x")
                with ar.step("plan"):
                    pass

        assert 1 == sum(e["type"] == "TEXT_MESSAGE_END" for e in body(run))
        assert_valid(list(run.events))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect once, then keep the cyclic garbage collector off: only refcounting frees."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class TestLifetime:
    @pytest.mark.parametrize("face", ["decorator", "with"])
    async def test_an_ended_invocation_is_freed_without_the_garbage_collector(
        self, face: str
    ) -> None:
        """An invocation and its frame hold no cycle: they go when the call ends."""
        refs: list[weakref.ref[ar.Subagent]] = []

        @ar.subagent("worker")
        async def worker() -> None:
            handle = ar.current_subagent()
            assert handle is not None
            refs.append(weakref.ref(handle))

        async with ar.Run(make_input()):
            with gc_paused():
                for _ in range(3):
                    if face == "decorator":
                        await worker()
                    else:
                        with ar.subagent("worker") as handle:
                            refs.append(weakref.ref(handle))
                        del handle
                alive = [ref() for ref in refs if ref() is not None]
                cyclic = gc.collect()

        assert 3 == len(refs)
        assert ([], 0) == (alive, cyclic)

    @pytest.mark.parametrize("face", ["decorator", "with"])
    async def test_an_ended_step_is_freed_without_the_garbage_collector(self, face: str) -> None:
        """A step and its frame hold no cycle either."""
        plan = ar.step("plan")

        @plan
        async def planned() -> None:
            return None

        async with ar.Run(make_input()) as run:
            with gc_paused():
                for _ in range(3):
                    if face == "decorator":
                        await planned()
                    else:
                        with ar.step("plan"):
                            pass
                alive = [o for o in gc.get_objects() if type(o) is ar.Step and o is not plan]
                cyclic = gc.collect()

        assert ([], 0) == (alive, cyclic)
        assert 6 == sum(e["type"].startswith("STEP_") for e in body(run))

    async def test_an_ended_step_cannot_be_started_again(self) -> None:
        """Starting an ended step raises HandleClosedError and sends nothing."""
        async with ar.Run(make_input()) as run:
            step = ar.step("plan")
            with step:
                pass

            with pytest.raises(ar.HandleClosedError, match="cannot be started again"):
                step.start()

        assert ["STEP_STARTED", "STEP_FINISHED"] == [e["type"] for e in body(run)]
