"""
The core defects of issue 11, each pinned by a test that failed before its fix.

Cancellation waiters, deep nesting, raw ``emit`` of run lifecycle or tampered
events, values with no JSON form, the error-exposure policy, transformers that
lose the terminal event, orphans, and the garbage collector's finalizers.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import tracemalloc
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import attrs
import pytest

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._outcomes import GENERIC_MESSAGE
from ambient_runs.errors import InvalidEventError, LeftOpenWarning, ProtocolError
from ambient_runs.testing import assert_valid, make_input
from ambient_runs.verify import Verifier


class TestCancellationWaiters:
    async def test_waiters_leave_the_run_once_they_return(self) -> None:
        """5,000 until_cancelled() calls leave nothing behind in the run (209 B each before)."""
        async with ar.Run(make_input()) as run:
            for _ in range(200):  # warm up: caches, free lists
                await run.until_cancelled(asyncio.sleep(0))
            await asyncio.sleep(0)
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for i in range(5_000):
                    assert await run.until_cancelled(asyncio.sleep(0, i)) == i
                await asyncio.sleep(0)  # the losing waiters finish their cancellation
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
        assert grown < 100_000, f"the run kept {grown} bytes after 5,000 waits"

    async def test_a_cancelled_waiter_leaves_too(self) -> None:
        """A cancelled() waiter whose task is cancelled is forgotten; cancel() still works."""
        async with ar.Run(make_input()) as run:
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for _ in range(2_000):
                    waiter = asyncio.ensure_future(run.cancelled())
                    await asyncio.sleep(0)
                    waiter.cancel()
                    await asyncio.gather(waiter, return_exceptions=True)
                del waiter
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
            last = asyncio.ensure_future(run.cancelled())
            await asyncio.sleep(0)
            run.cancel()
            await asyncio.wait_for(last, 5)
        assert grown < 100_000, f"the run kept {grown} bytes after 2,000 cancelled waiters"

    def test_cancel_does_not_raise_when_a_waiters_loop_has_closed(self) -> None:
        """run.cancel() (thread-safe) skips a waiter whose event loop is closed, wakes the rest."""
        with ar.Run(make_input()) as run:
            dead = asyncio.new_event_loop()
            stale = dead.create_task(run.cancelled())
            dead.run_until_complete(asyncio.sleep(0))  # the waiter is registered
            dead.close()

            async def wait_live() -> bool:
                live = asyncio.ensure_future(run.cancelled())
                await asyncio.sleep(0)
                asyncio.get_running_loop().call_soon(run.cancel)
                await asyncio.wait_for(live, 5)
                return run.is_cancelled

            assert asyncio.run(wait_live())
            run.cancel()  # a second call is a no-op
        assert not stale.done()
        stale._log_destroy_pending = False  # its loop is gone: it can never run again
        del stale


def nest(depth: int, *, write: bool = False) -> list[str | None]:
    """Enter *depth* subagents, each inside the previous one, and leave none; return their ids."""
    opened = []
    for i in range(depth):
        sub = ar.subagent(f"level-{i}")
        sub.__enter__()
        opened.append(sub.id)
        if write:
            ar.message().write(f"{i}")
    return opened


def run_nested(depth: int) -> tuple[ar.Run, list[str | None]]:
    """A run that leaves *depth* nested subagents open when it ends."""
    with ar.Run(make_input()) as run:
        opened = nest(depth)
    return run, opened


def subagent_nested(depth: int) -> tuple[ar.Run, str | None]:
    """A subagent that leaves *depth* nested subagents (each with a message) open."""
    with ar.Run(make_input()) as run, ar.subagent("outer") as outer:
        nest(depth, write=True)
    return run, outer.id


async def fail_nested(depth: int) -> ar.Run:
    """A run that fails with *depth* nested subagents open; return it."""
    run = ar.Run(make_input())
    try:
        async with run:
            nest(depth)
            raise KeyError("boom")
    except KeyError:
        return run
    raise AssertionError("the KeyError must propagate")


class TestDeepNesting:
    DEPTH = 2_000  # well past the recursion limit (330 failed before)

    def test_the_run_closes_any_depth_of_open_subagents(self) -> None:
        """2,000 nested subagents left open: the run closes them innermost first, no recursion."""
        with pytest.warns(LeftOpenWarning):
            run, opened = run_nested(self.DEPTH)
        events = list(run.events)
        assert isinstance(events[-1], ev.RunFinishedEvent)
        closed = [e.subagent_run_id for e in events if isinstance(e, ev.SubagentFinishedEvent)]
        assert closed == opened[::-1]
        assert_valid(events)

    def test_a_subagent_closes_any_depth_it_left_open(self) -> None:
        """The same below an ordinary subagent that ends normally."""
        with pytest.warns(LeftOpenWarning):
            run, outer = subagent_nested(self.DEPTH)
        events = list(run.events)
        assert isinstance(events[-1], ev.RunFinishedEvent)
        finished = [e for e in events if isinstance(e, ev.SubagentFinishedEvent)]
        assert len(finished) == self.DEPTH + 1
        assert finished[-1].subagent_run_id == outer
        assert_valid(events)

    async def test_a_run_that_fails_with_any_depth_open_still_ends(self) -> None:
        """After an exception RUN_ERROR goes out (open subagents need no end); the run is over."""
        run = await fail_nested(self.DEPTH)
        events = list(run.events)
        assert isinstance(events[-1], ev.RunErrorEvent)
        assert events[-1].code == "KeyError"
        assert run.finished
        assert_valid(events)


class TestRawEmit:
    @pytest.mark.parametrize(
        "event",
        [
            ev.RunStartedEvent(thread_id="t", run_id="r"),
            ev.RunFinishedEvent(thread_id="t", run_id="r"),
            ev.RunErrorEvent(message="late"),
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ],
        ids=["RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "a RUN_FINISHED dict"],
    )
    async def test_emit_refuses_the_runs_own_lifecycle(self, event: object) -> None:
        """emit(RUN_*) raises ProtocolError naming the fix; the run still ends once, its way."""
        async with ar.Run(make_input()) as run:
            with pytest.raises(ProtocolError, match="belong to the run") as caught:
                ar.emit(event)
            assert caught.value.rule == "run-lifecycle"
            ar.say("still going")
        events = list(run.events)
        assert [type(e) for e in events].count(ev.RunFinishedEvent) == 1
        assert not [e for e in events if isinstance(e, ev.RunErrorEvent)]
        assert isinstance(events[-1], ev.RunFinishedEvent)
        assert_valid(events)

    async def test_a_transformer_cannot_make_a_lifecycle_event_either(self) -> None:
        """A transformer returning RUN_FINISHED for an ordinary event is refused the same way."""

        def ends_early(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.CustomEvent):
                return ev.RunFinishedEvent(thread_id="t", run_id="r")
            return event

        async with ar.Run(make_input(), transformers=[ends_early]) as run:
            with pytest.raises(ProtocolError, match="belong to the run"):
                ar.emit(ev.CustomEvent(name="x", value=1))
        events = list(run.events)
        assert [type(e) for e in events] == [ev.RunStartedEvent, ev.RunFinishedEvent]


class TestTamperedEvents:
    @pytest.mark.parametrize(
        ("field", "value"),
        [("message_id", None), ("message_id", 7), ("role", "tool"), ("delta", None)],
    )
    async def test_a_tampered_frozen_event_is_revalidated(self, field: str, value: object) -> None:
        """object.__setattr__ on a frozen event: emit re-validates and raises InvalidEventError."""
        event: ev.BaseEvent = (
            ev.TextMessageContentEvent(message_id="m", delta="x")
            if field == "delta"
            else ev.TextMessageStartEvent(message_id="m")
        )
        object.__setattr__(event, field, value)
        async with ar.Run(make_input()) as run:
            with pytest.raises(InvalidEventError, match=field):
                ar.emit(event)
        events = list(run.events)
        assert [type(e) for e in events] == [ev.RunStartedEvent, ev.RunFinishedEvent]

    async def test_an_event_made_without_its_constructor_is_refused(self) -> None:
        """object.__new__(cls) with no fields set: InvalidEventError, not AttributeError."""
        bare = object.__new__(ev.TextMessageEndEvent)
        async with ar.Run(make_input()) as run:
            with pytest.raises(InvalidEventError, match="constructor"):
                ar.emit(bare)
            run.emit(ev.TextMessageStartEvent(message_id="m"))
            run.emit(ev.TextMessageEndEvent(message_id="m"))
        assert_valid(list(run.events))

    def test_the_verifier_reports_a_none_id_as_a_violation(self) -> None:
        """A Verifier fed a tampered event (messageId None) gives violations, never TypeError."""
        start = ev.TextMessageStartEvent(message_id="m")
        object.__setattr__(start, "message_id", None)
        found = Verifier().verify(
            [
                ev.RunStartedEvent(thread_id="t", run_id="r"),
                start,
                ev.RunFinishedEvent(thread_id="t", run_id="r"),
            ]
        )
        assert found
        assert "None" in found[-1].message


class Unprintable(Exception):
    """An exception whose ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ failed too")


async def within(run: ar.Run, body: Callable[[], Awaitable[object]]) -> None:
    """Run *body* inside *run*."""
    async with run:
        await body()


async def ended_by(
    error: type[BaseException], body: Callable[[], Awaitable[object]], **options: Any
) -> ar.Run:
    """A run (made with *options*) that *body* leaves with *error*, which propagates."""
    run = ar.Run(make_input(), **options)
    with pytest.raises(error):
        await within(run, body)
    return run


class TestUnprintableExceptions:
    async def test_the_run_still_ends_with_run_error(self) -> None:
        """The user's exception propagates and RUN_ERROR names its class."""

        async def body() -> None:
            ar.say("before")
            raise Unprintable

        run = await ended_by(Unprintable, body)
        last = list(run.events)[-1]
        assert isinstance(last, ev.RunErrorEvent)
        assert last.code == "Unprintable"
        assert_valid(list(run.events))

    async def test_a_subagent_it_leaves_fails(self) -> None:
        """Inside a subagent: SUBAGENT_ERROR (not a plain SUBAGENT_FINISHED), then RUN_ERROR."""

        @ar.subagent("fragile")
        async def fragile() -> None:
            raise Unprintable

        run = await ended_by(Unprintable, fragile)
        events = list(run.events)
        (ending,) = [e for e in events if isinstance(e, ev.SubagentErrorEvent)]
        assert ending.code == "Unprintable"
        assert not [e for e in events if isinstance(e, ev.SubagentFinishedEvent)]
        assert isinstance(events[-1], ev.RunErrorEvent)
        assert_valid(events)

    async def test_a_stream_ends_with_run_error_too(self) -> None:
        """Under stream(): the last event is RUN_ERROR with the class name as code."""

        async def agent(run: ar.Run) -> None:
            with ar.subagent("worker"):
                raise Unprintable

        events = [e async for e in ar.stream(agent, make_input())]
        assert isinstance(events[-1], ev.RunErrorEvent)
        assert events[-1].code == "Unprintable"
        assert_valid(events)


SECRET = "db password=hunter2 failed"


def leaked(events: list[ev.BaseEvent]) -> bool:
    """Whether the secret of `SECRET` reached any event of *events*."""
    return any(b"hunter2" in ar.encode_json(e) for e in events)


async def leaky() -> None:
    """A body that fails with a secret in its message, inside a subagent."""
    with ar.subagent("db"):
        raise RuntimeError(SECRET)


class TestErrorExposure:
    async def test_unexpected_exceptions_read_generic_by_default(self) -> None:
        """RUN_ERROR and SUBAGENT_ERROR say nothing of the text; the codes stay useful."""
        run = await ended_by(RuntimeError, leaky)
        events = list(run.events)
        (failed,) = [e for e in events if isinstance(e, ev.SubagentErrorEvent)]
        assert (failed.message, failed.code) == (GENERIC_MESSAGE, "RuntimeError")
        assert isinstance(events[-1], ev.RunErrorEvent)
        assert (events[-1].message, events[-1].code) == (GENERIC_MESSAGE, "RuntimeError")
        assert not leaked(events)

    async def test_expose_errors_shows_the_text_for_development(self) -> None:
        """expose_errors=True: the exception's text, on both events."""
        run = await ended_by(RuntimeError, leaky, expose_errors=True)
        events = list(run.events)
        (failed,) = [e for e in events if isinstance(e, ev.SubagentErrorEvent)]
        assert failed.message == SECRET
        assert ev.RunErrorEvent(message=SECRET, code="RuntimeError") == events[-1]

    async def test_an_agent_error_tells_the_client_on_purpose(self) -> None:
        """AgentError's message and code go out as they are, without expose_errors."""

        async def body() -> None:
            with ar.subagent("search"):
                raise ar.AgentError("The search service is down", code="search_down")

        run = await ended_by(ar.AgentError, body)
        events = list(run.events)
        (failed,) = [e for e in events if isinstance(e, ev.SubagentErrorEvent)]
        assert (failed.message, failed.code) == ("The search service is down", "search_down")
        assert (
            ev.RunErrorEvent(message="The search service is down", code="search_down")
            == (events[-1])
        )

    async def test_describe_error_maps_an_exception_first(self) -> None:
        """The hook decides; None falls back to the default, and so does a hook that raises."""

        def describe(exc: BaseException) -> tuple[str, str | None] | None:
            if isinstance(exc, TimeoutError):
                return "The model took too long", "model_timeout"
            if isinstance(exc, KeyError):
                raise ValueError("the hook itself is broken")
            return None

        async def times_out() -> None:
            raise TimeoutError(SECRET)

        async def missing() -> None:
            raise KeyError(SECRET)

        timed = await ended_by(TimeoutError, times_out, describe_error=describe)
        assert (
            ev.RunErrorEvent(message="The model took too long", code="model_timeout")
            == (list(timed.events)[-1])
        )
        default = await ended_by(RuntimeError, leaky, describe_error=describe)
        assert list(default.events)[-1].message == GENERIC_MESSAGE  # type: ignore[attr-defined]
        broken = await ended_by(KeyError, missing, describe_error=describe)
        assert (
            ev.RunErrorEvent(message=GENERIC_MESSAGE, code="KeyError") == (list(broken.events)[-1])
        )

    async def test_a_stream_and_its_frames_follow_the_policy(self) -> None:
        """Under stream() and sse.frames: the same generic RUN_ERROR; the text is logged only."""

        async def agent(run: ar.Run) -> None:
            await leaky()

        frames = [f async for f in sse.frames(ar.stream(agent, make_input()))]
        assert b"hunter2" not in b"".join(frames)
        last = json.loads(frames[-1].removeprefix(b"data: "))
        assert {"type": "RUN_ERROR", "message": GENERIC_MESSAGE, "code": "RuntimeError"} == last

    @pytest.mark.parametrize("failure", ["returns None", "raises"])
    async def test_a_failing_error_transformer_never_sends_the_raw_text(
        self, failure: str
    ) -> None:
        """A transformer meant to rewrite RUN_ERROR drops it or raises: the fallback is generic."""

        def rewrite(event: ev.BaseEvent) -> ev.BaseEvent | None:
            if isinstance(event, ev.RunErrorEvent):
                if failure == "raises":
                    raise RuntimeError("the rewriter broke")
                return None
            return event

        async def agent(run: ar.Run) -> None:
            raise RuntimeError(SECRET)

        events = [
            e
            async for e in ar.stream(
                agent, make_input(), transformers=[rewrite], expose_errors=True
            )
        ]
        assert not leaked(events)
        assert isinstance(events[-1], ev.RunErrorEvent)
        assert (events[-1].message, events[-1].code) == (GENERIC_MESSAGE, "RuntimeError")
        assert_valid(events)

    async def test_the_fallback_run_error_goes_through_the_transformers(self) -> None:
        """A transformer failing only on RUN_FINISHED: the RUN_ERROR replacing it is stamped."""

        def stamp(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.RunFinishedEvent):
                raise RuntimeError(SECRET)
            return attrs.evolve(event, metadata={"stamped": True})  # type: ignore[misc]

        async def agent(run: ar.Run) -> None:
            ar.say("hi")

        events = [e async for e in ar.stream(agent, make_input(), transformers=[stamp])]
        assert isinstance(events[-1], ev.RunErrorEvent)
        assert events[-1].metadata == {"stamped": True}
        assert (events[-1].message, events[-1].code) == (GENERIC_MESSAGE, "protocol_error")
        assert not leaked(events)
        assert_valid(events)


def finish_through(transformer: Callable[[ev.BaseEvent], Any]) -> tuple[ar.Run, ProtocolError]:
    """A plain run that ends normally through *transformer*; return it and what it raised."""
    run = ar.Run(make_input(), transformers=[transformer])
    with pytest.raises(ProtocolError) as caught, run:
        ar.say("hi")
    return run, caught.value


class TestTransformersAndTheTerminalEvent:
    @pytest.mark.parametrize(
        "rewrite",
        [
            lambda e: None,
            lambda e: ev.CustomEvent(name="swapped", value=1),
            lambda e: [e, ev.CustomEvent(name="after", value=1)],
            lambda e: [e, e],
        ],
        ids=["dropped", "swapped for CUSTOM", "followed by CUSTOM", "doubled"],
    )
    def test_the_run_still_ends_once_and_raises(self, rewrite: Callable[..., Any]) -> None:
        """The run ends with one generic RUN_ERROR and raises ProtocolError (terminal-event)."""

        def transformer(event: ev.BaseEvent) -> Any:
            return rewrite(event) if isinstance(event, ev.RunFinishedEvent) else event

        run, error = finish_through(transformer)
        assert error.rule == "terminal-event"
        events = list(run.events)
        terminals = [e for e in events if isinstance(e, ev.RunFinishedEvent | ev.RunErrorEvent)]
        assert terminals == [events[-1]]
        assert (events[-1].message, events[-1].code) == (GENERIC_MESSAGE, "protocol_error")  # type: ignore[attr-defined]
        assert_valid(events)

    def test_a_transformer_that_drops_every_terminal_event(self) -> None:
        """It drops the RUN_ERROR too: that one goes out past the transformers."""

        def drops(event: ev.BaseEvent) -> ev.BaseEvent | None:
            return None if isinstance(event, ev.RunFinishedEvent | ev.RunErrorEvent) else event

        run, error = finish_through(drops)
        assert error.rule == "terminal-event"
        events = list(run.events)
        assert ev.RunErrorEvent(message=GENERIC_MESSAGE, code="protocol_error") == events[-1]
        assert_valid(events)

    def test_rewriting_it_and_adding_before_it_is_fine(self) -> None:
        """A CUSTOM before the terminal event, and a rewritten terminal event, are allowed."""

        def annotate(event: ev.BaseEvent) -> Any:
            if isinstance(event, ev.RunFinishedEvent):
                return [ev.CustomEvent(name="bye", value=1), attrs.evolve(event, result="ok")]
            return event

        with ar.Run(make_input(), transformers=[annotate]) as run:
            ar.say("hi")
        events = list(run.events)
        assert [type(e) for e in events[-2:]] == [ev.CustomEvent, ev.RunFinishedEvent]
        assert events[-1].result == "ok"  # type: ignore[attr-defined]


LONE = "a\ud800b"


def _message_write() -> None:
    with ar.message() as message:
        message.write(LONE)


def _reasoning_write() -> None:
    with ar.reasoning() as block:
        block.write(LONE)


def _tool_args() -> None:
    with ar.tool_call("search") as call:
        call.args({"q": LONE})


def _tool_result() -> None:
    with ar.tool_call("search") as call:
        call.result(LONE)


UNENCODABLE: dict[str, Callable[[], object]] = {
    "say": lambda: ar.say(LONE),
    "think": lambda: ar.think(LONE),
    "message.write": _message_write,
    "message name": lambda: ar.message(name=LONE),
    "reasoning.write": _reasoning_write,
    "tool_call name": lambda: ar.tool_call(LONE),
    "tool_call.args": _tool_args,
    "tool_call.result": _tool_result,
    "subagent name": lambda: ar.subagent(LONE).start(),
    "step name": lambda: ar.step(LONE).start(),
    "activity": lambda: ar.activity("progress", {"note": LONE}),
    "set_state": lambda: ar.set_state({"note": LONE}),
    "finish_with NaN": lambda: ar.current_run().finish_with(float("nan")),
    "custom NaN": lambda: ar.emit(ev.CustomEvent(name="x", value=float("nan"))),
    "custom Infinity": lambda: ar.emit(ev.CustomEvent(name="x", value=[float("inf")])),
    "custom set": lambda: ar.emit(ev.CustomEvent(name="x", value={1, 2})),
    "custom object": lambda: ar.emit(ev.CustomEvent(name="x", value={"o": object()})),
    "custom surrogate": lambda: ar.emit(ev.CustomEvent(name="x", value={"k": LONE})),
    "custom name": lambda: ar.emit(ev.CustomEvent(name=LONE, value=1)),
    "raw set": lambda: ar.emit(ev.RawEvent(event={"x": {1}})),
    "raw surrogate key": lambda: ar.emit(ev.RawEvent(event={LONE: 1})),
    "metadata": lambda: ar.emit(ev.CustomEvent(name="x", value=1, metadata={"m": LONE})),
}


class TestUnencodableValues:
    @pytest.mark.parametrize("call", list(UNENCODABLE), ids=list(UNENCODABLE))
    async def test_refused_at_the_call_and_nothing_enters_the_stream(self, call: str) -> None:
        """InvalidEventError at the call; the stream has nothing of it and encodes end to end."""
        refused: list[BaseException] = []

        async def agent(run: ar.Run) -> None:
            ar.say("before")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", LeftOpenWarning)
                    UNENCODABLE[call]()
            except InvalidEventError as error:
                refused.append(error)
            ar.say("after")

        frames = [f async for f in sse.frames(ar.stream(agent, make_input()))]
        assert refused, f"{call} was accepted"
        events = [json.loads(f.removeprefix(b"data: ")) for f in frames]
        assert events[-1]["type"] == "RUN_FINISHED"
        said_here = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
        assert said_here == ["before", "after"]
        assert_valid(events)


UNSAFE = 2**53  # the smallest integer a JavaScript client cannot hold exactly


def _activity_update() -> None:
    handle = ar.activity("progress", {"done": 1})
    handle.update({"done": -UNSAFE})


MISREAD: dict[str, Callable[[], object]] = {
    "set_state": lambda: ar.set_state({"deep": [{"n": UNSAFE}]}),
    "set_state negative": lambda: ar.set_state({"n": -(2**64)}),
    "activity": lambda: ar.activity("progress", {"n": UNSAFE}),
    "activity update": _activity_update,
    "emit STATE_SNAPSHOT": lambda: ar.emit(ev.StateSnapshotEvent(snapshot=UNSAFE)),
    "emit STATE_DELTA": lambda: ar.emit(
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": UNSAFE}]}
    ),
    "reserved metadata key": lambda: ar.emit(
        ev.CustomEvent(name="x", value=1, metadata={"ag-ui": {"mine": True}})
    ),
    "reserved metadata key, wire dict": lambda: ar.emit(
        {"type": "CUSTOM", "name": "x", "value": 1, "metadata": {"ag-ui": 1}}
    ),
    "reserved metadata key, interrupt": lambda: ar.interrupt("ask", metadata={"ag-ui": 1}),
}


class TestValuesAClientWouldMisread:
    """Issue 11 item 14: integers past 2^53 in state or activity, and the reserved metadata key."""

    @pytest.mark.parametrize("call", list(MISREAD), ids=list(MISREAD))
    async def test_refused_at_the_call_and_nothing_enters_the_stream(self, call: str) -> None:
        refused: list[InvalidEventError] = []

        async def agent(run: ar.Run) -> None:
            ar.say("before")
            try:
                MISREAD[call]()
            except InvalidEventError as error:
                refused.append(error)
            ar.say("after")

        frames = [f async for f in sse.frames(ar.stream(agent, make_input()))]
        assert len(refused) == 1, f"{call} was accepted"
        text = str(refused[0])
        assert ("ag-ui" in text) if "reserved" in call else ("as a string" in text), text
        events = [json.loads(f.removeprefix(b"data: ")) for f in frames]
        assert [e["type"] for e in events if e["type"].startswith(("STATE", "CUSTOM"))] == []
        said_here = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
        assert (said_here, events[-1]["type"]) == (["before", "after"], "RUN_FINISHED")
        assert_valid(events)

    def test_the_message_names_where_the_integer_is(self) -> None:
        with ar.Run(make_input()), pytest.raises(InvalidEventError) as caught:
            ar.set_state({"a/b": {"list": [0, UNSAFE + 1]}})
        assert f"integer {UNSAFE + 1} at /snapshot/a~1b/list/1" in str(caught.value)

    def test_safe_integers_floats_and_digit_strings_pass(self) -> None:
        edge = 2**53 - 1
        value = {"max": edge, "min": -edge, "f": 1e300, "g": 12345678901234567.0, "s": "9" * 40}
        with ar.Run(make_input()) as run:
            ar.set_state(value)
            ar.activity("progress", value)
        snapshots = [e for e in run.events if isinstance(e, ev.StateSnapshotEvent)]
        assert [s.snapshot for s in snapshots] == [value]

    def test_after_a_refused_change_the_next_publish_is_a_snapshot(self) -> None:
        """The refused change never reached the client: no delta may build on it."""
        base = {f"k{i}": "x" * 20 for i in range(50)}
        with ar.Run(make_input()) as run:
            ar.set_state({**base, "a": 1})
            with pytest.raises(InvalidEventError):
                ar.set_state({**base, "a": 1, "big": UNSAFE})
            ar.set_state({**base, "a": 2})  # a delta from the refused value would remove /big
            ar.set_state({**base, "a": 3})
        kinds = [type(e).__name__ for e in run.events if "State" in type(e).__name__]
        assert kinds == ["StateSnapshotEvent", "StateSnapshotEvent", "StateDeltaEvent"]
        assert_valid(run.events)

    def test_an_activity_refused_update_is_followed_by_a_snapshot(self) -> None:
        base = {f"k{i}": "x" * 20 for i in range(50)}
        with ar.Run(make_input()) as run:
            handle = ar.activity("progress", {**base, "n": 1})
            with pytest.raises(InvalidEventError):
                handle.update({**base, "n": 1, "big": UNSAFE})
            handle.update({**base, "n": 2})
        kinds = [type(e).__name__ for e in run.events if "Activity" in type(e).__name__]
        assert kinds == ["ActivitySnapshotEvent", "ActivitySnapshotEvent"]

    def test_metadata_of_our_own_keys_passes(self) -> None:
        with ar.Run(make_input()) as run:
            ar.emit(ev.CustomEvent(name="x", value=1, metadata={"agui": 1, "mine": {"ag-ui": 1}}))
        assert [type(e) for e in run.events].count(ev.CustomEvent) == 1


class TestSmallRules:
    """Issue 11 item 14: the verifier's rules the run now applies at the call."""

    def test_a_tool_call_cannot_belong_to_the_users_message(self) -> None:
        with ar.Run(make_input(user="hi")), pytest.raises(ProtocolError) as caught:
            ar.tool_call("search", parent_message_id="run-user")
        assert caught.value.rule == "tool-call-parent-role"
        assert "names a user message" in str(caught.value)

    def test_a_tool_call_may_belong_to_the_agents_message(self) -> None:
        with ar.Run(make_input(user="hi")) as run:
            with ar.message() as message:
                message.write("let me look")
            with ar.tool_call("search", parent_message_id=message.id) as call:
                call.args({"q": "x"})
        assert_valid(run.events)

    def test_an_activity_cannot_take_a_messages_id(self) -> None:
        with ar.Run(make_input()) as run:
            ar.say("hello")
            said = next(e for e in run.events if isinstance(e, ev.TextMessageStartEvent))
            with pytest.raises(ProtocolError) as caught:
                ar.activity("progress", {"n": 1}, id=said.message_id)
            assert caught.value.rule == "message-id-kind-clash"

    def test_an_interrupt_naming_a_subagent_never_started_is_refused(self) -> None:
        ghost = ev.Interrupt(id="i1", reason="ask", subagent_run_id="ghost")
        run = ar.Run(make_input())
        with pytest.raises(ProtocolError) as caught, run:
            raise ar.Interrupted(ghost)
        assert caught.value.rule == "interrupt-subagent-unknown"


@ar.subagent("gen")
def two_items() -> Iterator[int]:
    """A generator subagent (the issue's first orphan)."""
    yield 1
    yield 2


def orphan_generator() -> tuple[ar.Run, Iterator[int], str | None]:
    """Create a generator inside a subagent and start it after that subagent ended."""
    with ar.Run(make_input()) as run:
        with ar.subagent("holder") as holder:
            it = two_items()
        next(it)  # started after holder ended; the consumer keeps it and stops
    return run, it, holder.id


async def orphan_message() -> tuple[ar.Run, str | None]:
    """A task that outlived its subagent leaves a message open (the issue's second orphan)."""
    async with ar.Run(make_input()) as run:

        async def late() -> None:
            await asyncio.sleep(0)
            ar.message().write("late")

        with ar.subagent("x") as x:
            task = asyncio.create_task(late())
        await task
    return run, x.id


class TestOrphans:
    def test_a_generator_started_after_its_scope_ended_is_closed_by_the_run(self) -> None:
        """RUN_FINISHED, with the orphan subagent finished first and a LeftOpenWarning."""
        with pytest.warns(LeftOpenWarning):
            run, it, holder = orphan_generator()
        events = list(run.events)
        assert isinstance(events[-1], ev.RunFinishedEvent)
        (started,) = [
            e for e in events if isinstance(e, ev.SubagentStartedEvent) and e.name == "gen"
        ]
        assert started.parent_subagent_run_id == holder  # created inside holder: its child
        gen_end = [
            e
            for e in events
            if isinstance(e, ev.SubagentFinishedEvent)
            and e.subagent_run_id == started.subagent_run_id
        ]
        assert len(gen_end) == 1
        assert_valid(events)
        it.close()  # the consumer lets go later: nothing more is sent, nothing raised

    async def test_a_task_that_outlived_its_subagent_has_its_message_closed(self) -> None:
        """The late message keeps the ended subagent's id and is closed at the run's end."""
        with pytest.warns(LeftOpenWarning):
            run, x = await orphan_message()
        events = list(run.events)
        assert isinstance(events[-1], ev.RunFinishedEvent)
        (late,) = [e for e in events if isinstance(e, ev.TextMessageContentEvent)]
        assert (late.delta, late.subagent_run_id) == ("late", x)
        ends = [e for e in events if isinstance(e, ev.TextMessageEndEvent)]
        assert [e.message_id for e in ends] == [late.message_id]
        assert_valid(events)


GC_AUDIT = """
import contextvars, gc, sys
import ambient_runs as ar
from ambient_runs.testing import make_input

collecting = False
depth = 0
violations = []
USER_VARS = [contextvars.ContextVar(f"user-{i}") for i in range(40)]


def on_gc(phase, info):
    global collecting
    collecting = phase == "start"


def profile(frame, event, arg):
    global depth
    name = getattr(arg, "__qualname__", "")
    if name == "Context.run":
        depth += 1 if event == "c_call" else -1 if event in ("c_return", "c_exception") else 0
    elif event == "c_call" and collecting and not depth and name.startswith("ContextVar."):
        if name in ("ContextVar.set", "ContextVar.reset"):
            violations.append(name)


@ar.subagent("gen")
def items():
    try:
        yield 1
        yield 2
    finally:
        ar.say("cleanup")


def steps(i):
    # A name per abandoned step: a step waits for the collector to end it, and the
    # collector's timing is not ours, so two live "gen-step"s of the same owner would
    # (rightly) be refused as a duplicate active step.
    @ar.step(f"gen-step-{i}")
    def body():
        yield 1

    return body()


def abandon(make, *args):
    it = make(*args)
    next(it)
    cycle = [it]
    cycle.append(cycle)  # only the cycle collector can free it


def batch(rounds, audit):
    gc.set_threshold(1, 1, 1)
    for r in range(rounds):
        with ar.Run(make_input()) as run:
            if audit:
                sys.setprofile(profile)
            for i in range(40):
                abandon(items)
                abandon(steps, i)
                for var in USER_VARS:  # user code inside ContextVar.set, collections meanwhile
                    var.set(i)
            gc.collect()
            sys.setprofile(None)
        said = [e.delta for e in run.events if type(e).__name__ == "TextMessageContentEvent"]
        assert said.count("cleanup") == 40, said.count("cleanup")


gc.callbacks.append(on_gc)
batch(int(sys.argv[1]), audit=sys.argv[2] == "audit")
print("violations", len(violations))
"""


class TestGarbageCollectorFinalizers:
    def run_batch(self, tmp_path: Any, *args: str) -> subprocess.CompletedProcess[str]:
        script = tmp_path / "gc_batch.py"
        script.write_text(GC_AUDIT)
        return subprocess.run(
            [sys.executable, "-W", "ignore::UserWarning", str(script), *args],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def test_no_finalizer_writes_the_context_it_interrupted(self, tmp_path: Any) -> None:
        """Under a profiler: no ContextVar.set/reset of the current Context inside a collection."""
        done = self.run_batch(tmp_path, "2", "audit")
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["violations", "0"]

    def test_a_stress_batch_runs_clean(self, tmp_path: Any) -> None:
        """Many abandoned generator subagents through collections (3.11): exit 0, every cleanup."""
        done = self.run_batch(tmp_path, "10", "stress")
        assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
