"""
`ambient_runs.Run`: lifecycle, terminal events, the event log, accessors, cancellation and ids.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from support.events import types_of

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, capture_events, make_input, project, wire


def finished(events: Any) -> ev.RunFinishedEvent:
    """Return the one RUN_FINISHED of *events*."""
    (last,) = [e for e in events if isinstance(e, ev.RunFinishedEvent)]
    return last


class CodedError(Exception):
    """An error with a machine-readable code."""

    code = "rate_limited"


class TestRunLifecycle:
    async def test_run_started_echoes_ids_and_version(self) -> None:
        """RUN_STARTED comes first, echoing threadId, runId, parentRunId; protocolVersion 1.0."""
        data = make_input("t-1", "r-1", parent_run_id="r-0")

        async with ar.Run(data) as run:
            pass

        assert {
            "type": "RUN_STARTED",
            "threadId": "t-1",
            "runId": "r-1",
            "parentRunId": "r-0",
            "protocolVersion": "1.0",
        } == wire(run.events)[0]

    async def test_normal_end_finishes_with_result(self) -> None:
        """A block ending normally sends exactly one RUN_FINISHED carrying finish_with's result."""
        async with ar.Run(make_input("t", "r")) as run:
            ar.say("hi")
            run.finish_with({"answer": 42})

        assert {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "result": {"answer": 42},
        } == (wire(run.events)[-1])
        assert 1 == sum(
            e.TYPE.value.startswith("RUN_") and e.TYPE.value != "RUN_STARTED" for e in run.events
        )
        assert_valid(list(run.events))

    def test_sync_with_works(self) -> None:
        """Run is also a plain context manager, and emitters work inside it."""
        with ar.Run(make_input()) as run:
            ar.say("sync")

        assert [
            ev.EventType.RUN_STARTED,
            ev.EventType.TEXT_MESSAGE_START,
            ev.EventType.TEXT_MESSAGE_CONTENT,
            ev.EventType.TEXT_MESSAGE_END,
            ev.EventType.RUN_FINISHED,
        ] == types_of(run.events)

    async def test_accepts_wire_input(self) -> None:
        """A wire-form dict is accepted as input."""
        async with ar.Run({"threadId": "t", "runId": "r", "messages": []}) as run:
            pass

        assert ("t", "r") == (run.thread_id, run.run_id)

    async def test_finish_with_rejects_non_json(self) -> None:
        """finish_with refuses a value with no JSON form."""
        async with ar.Run(make_input()) as run:
            with pytest.raises(ar.InvalidEventError):
                run.finish_with(object())

        assert None is finished(run.events).result

    async def test_other_exception_sends_run_error_and_propagates(self) -> None:
        """Any other exception sends RUN_ERROR (message, class name as code), re-raised as is."""
        boom = ValueError("model unavailable")

        with pytest.raises(ValueError, match="model unavailable") as caught:
            async with ar.Run(make_input(), expose_errors=True) as run:
                raise boom

        assert boom is caught.value
        assert {"type": "RUN_ERROR", "message": "model unavailable", "code": "ValueError"} == (
            wire(run.events)[-1]
        )
        assert_valid(list(run.events))

    async def test_run_error_takes_the_exceptions_code(self) -> None:
        """An exception with a string ``code`` attribute lends it to RUN_ERROR.code."""
        with pytest.raises(CodedError):
            async with ar.Run(make_input()) as run:
                raise CodedError("slow down")

        assert "rate_limited" == run.events[-1].code  # type: ignore[attr-defined]

    async def test_asyncio_cancellation_finishes_cancelled(self) -> None:
        """Cancelling the task running the run ends it with a cancelled outcome and re-raises."""
        runs: list[ar.Run] = []
        entered = asyncio.Event()

        async def agent() -> None:
            async with ar.Run(make_input()) as run:
                runs.append(run)
                entered.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(agent())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        assert ev.RunFinishedCancelledOutcome() == finished(runs[0].events).outcome
        assert_valid(list(runs[0].events))

    async def test_check_cancelled_finishes_cancelled_and_stops(self) -> None:
        """RunCancelledError from check_cancelled ends the run cancelled and goes no further."""
        async with ar.Run(make_input()) as run:
            run.cancel()
            run.check_cancelled()
            pytest.fail("check_cancelled did not raise")

        assert ev.RunFinishedCancelledOutcome() == finished(run.events).outcome

    async def test_keyboard_interrupt_finishes_cancelled_and_propagates(self) -> None:
        """KeyboardInterrupt is not an error: the run finishes cancelled and it propagates."""
        with pytest.raises(KeyboardInterrupt):
            async with ar.Run(make_input()) as run:
                raise KeyboardInterrupt

        assert ev.RunFinishedCancelledOutcome() == finished(run.events).outcome

    async def test_interrupted_finishes_with_interrupt_outcome(self) -> None:
        """Interrupted leaving the run ends it with an interrupt outcome and stops there."""
        ask = ev.Interrupt(id="approve-1", reason="confirmation", message="Send it?")

        async with ar.Run(make_input()) as run:
            raise ar.Interrupted(ask)

        assert ev.RunFinishedInterruptOutcome(interrupts=(ask,)) == finished(run.events).outcome
        assert_valid(list(run.events))

    async def test_group_of_interrupts_finishes_with_all_of_them(self) -> None:
        """An exception group of only Interrupted (a TaskGroup) carries every interrupt."""
        first = ev.Interrupt(id="i-1", reason="input_required")
        second = ev.Interrupt(id="i-2", reason="input_required")

        async def ask(interrupt: ev.Interrupt) -> None:
            raise ar.Interrupted(interrupt)

        async with ar.Run(make_input()) as run, asyncio.TaskGroup() as group:
            group.create_task(ask(first))
            group.create_task(ask(second))

        outcome = finished(run.events).outcome
        assert isinstance(outcome, ev.RunFinishedInterruptOutcome)
        assert {"i-1", "i-2"} == {i.id for i in outcome.interrupts}

    def test_interrupted_needs_an_interrupt(self) -> None:
        """Interrupted() with no interrupt is refused."""
        with pytest.raises(ValueError, match="at least one"):
            ar.Interrupted()

    def test_interrupted_accepts_a_sequence(self) -> None:
        """Interrupted(interrupts) takes a sequence as well as separate arguments."""
        asks = [ev.Interrupt(id="a", reason="r"), ev.Interrupt(id="b", reason="r")]

        assert tuple(asks) == ar.Interrupted(asks).interrupts

    async def test_nothing_after_the_terminal_event(self) -> None:
        """An emit after RUN_FINISHED raises ProtocolError instead of sending."""
        async with ar.Run(make_input()) as run:
            pass

        with pytest.raises(ar.ProtocolError, match="already finished"):
            run.say("late")
        assert ev.EventType.RUN_FINISHED == run.events[-1].TYPE

    async def test_entered_once(self) -> None:
        """A Run cannot be entered twice."""
        run = ar.Run(make_input())
        async with run:
            pass

        with pytest.raises(RuntimeError, match="entered once"):
            async with run:
                pass

    async def test_emitting_before_entering_fails(self) -> None:
        """A run's own emitters need the run to have started."""
        run = ar.Run(make_input())

        with pytest.raises(ar.ProtocolError, match="not started"):
            run.say("early")

    async def test_open_handles_closed_at_run_end_in_reverse_order(self) -> None:
        """Whatever is open at the run's end is closed, newest first, with a LeftOpenWarning."""
        with pytest.warns(ar.LeftOpenWarning):  # noqa: PT031
            async with ar.Run(make_input(run_id="r")) as run:
                ar.message()
                ar.step("plan").start()
                ar.tool_call("search")
                ar.reasoning()
                ar.subagent("helper").start()

        assert [
            ev.EventType.SUBAGENT_FINISHED,
            ev.EventType.REASONING_END,
            ev.EventType.TOOL_CALL_END,
            ev.EventType.STEP_FINISHED,
            ev.EventType.TEXT_MESSAGE_END,
            ev.EventType.RUN_FINISHED,
        ] == types_of(run.events)[-6:]
        assert_valid(list(run.events))

    async def test_open_handles_closed_quietly_on_interrupt(self) -> None:
        """Handles left open when Interrupted leaves the run are closed without a warning."""
        async with ar.Run(make_input()) as run:
            ar.message()
            raise ar.Interrupted(ev.Interrupt(id="i", reason="r"))

        last = types_of(run.events)[-2:]
        assert [ev.EventType.TEXT_MESSAGE_END, ev.EventType.RUN_FINISHED] == last
        assert_valid(list(run.events))


class TestSinkAndVerify:
    async def test_sink_receives_every_event(self) -> None:
        """A sink gets every event in order, and run.events is then unavailable."""
        received: list[ev.BaseEvent] = []

        async with ar.Run(make_input(), sink=received.append) as run:
            ar.say("x")

        assert 5 == len(received)
        with pytest.raises(AttributeError, match="without a sink"):
            run.events  # noqa: B018

    async def test_verify_refuses_a_bad_event(self) -> None:
        """With verify=True an event breaking the protocol raises ProtocolError and is not sent."""
        async with ar.Run(make_input()) as run:
            with pytest.raises(ar.ProtocolError):
                ar.emit(ev.TextMessageContentEvent(message_id="nope", delta="x"))

        assert ev.EventType.TEXT_MESSAGE_CONTENT not in types_of(run.events)

    async def test_verify_false_lets_it_through(self) -> None:
        """With verify=False the same event goes out unchecked."""
        async with ar.Run(make_input(), verify=False) as run:
            ar.emit(ev.TextMessageContentEvent(message_id="nope", delta="x"))

        assert ev.EventType.TEXT_MESSAGE_CONTENT in types_of(run.events)

    async def test_transformer_rewrites_events(self) -> None:
        """A transformer sees each event and what it returns is what goes out."""

        def shout(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.TextMessageContentEvent):
                return ev.TextMessageContentEvent(
                    message_id=event.message_id, delta=event.delta.upper()
                )
            return event

        async with ar.Run(make_input(), transformers=[shout]) as run:
            ar.say("quiet")

        assert ["QUIET"] == [
            e.delta for e in run.events if isinstance(e, ev.TextMessageContentEvent)
        ]


class TestTaps:
    """`Run.add_tap` and `Run.remove_tap`, from outside a delivery and from inside one."""

    async def test_a_tap_sees_every_later_event_after_the_sink(self) -> None:
        """A tap added mid-run gets each event the sink gets from then on, after the sink."""
        order: list[tuple[str, ev.EventType]] = []

        def sink(event: ev.BaseEvent) -> None:
            order.append(("sink", event.TYPE))

        def tap(event: ev.BaseEvent) -> None:
            order.append(("tap", event.TYPE))

        async with ar.Run(make_input(), sink=sink) as run:
            run.add_tap(tap)
            ar.say("x")
            run.remove_tap(tap)
            ar.say("y")

        start, content, end = (
            ev.EventType.TEXT_MESSAGE_START,
            ev.EventType.TEXT_MESSAGE_CONTENT,
            ev.EventType.TEXT_MESSAGE_END,
        )
        assert [
            ("sink", ev.EventType.RUN_STARTED),
            *[(who, kind) for kind in (start, content, end) for who in ("sink", "tap")],
            *[("sink", kind) for kind in (start, content, end)],
            ("sink", ev.EventType.RUN_FINISHED),
        ] == order

    async def test_a_tap_that_removes_itself_leaves_the_event_to_the_others(self) -> None:
        """The event in flight still reaches every tap it started with; later ones skip it."""
        first: list[ev.EventType] = []
        second: list[ev.EventType] = []

        async with ar.Run(make_input()) as run:

            def once(event: ev.BaseEvent) -> None:
                first.append(event.TYPE)
                run.remove_tap(once)

            run.add_tap(once)
            run.add_tap(lambda event: second.append(event.TYPE))
            ar.say("x")

        assert [ev.EventType.TEXT_MESSAGE_START] == first
        assert [
            ev.EventType.TEXT_MESSAGE_START,
            ev.EventType.TEXT_MESSAGE_CONTENT,
            ev.EventType.TEXT_MESSAGE_END,
            ev.EventType.RUN_FINISHED,
        ] == second

    async def test_a_tap_added_by_a_tap_sees_the_next_event_first(self) -> None:
        """A tap added during a delivery is not handed the event in flight."""
        late: list[ev.EventType] = []

        async with ar.Run(make_input()) as run:

            def adder(event: ev.BaseEvent) -> None:
                if event.TYPE is ev.EventType.TEXT_MESSAGE_START:
                    run.add_tap(lambda later: late.append(later.TYPE))

            run.add_tap(adder)
            ar.say("x")

        assert [
            ev.EventType.TEXT_MESSAGE_CONTENT,
            ev.EventType.TEXT_MESSAGE_END,
            ev.EventType.RUN_FINISHED,
        ] == late

    async def test_removing_a_tap_the_run_lacks_names_the_fix(self) -> None:
        """A tap never added, or removed already, is a ValueError that says what to remove."""

        def tap(event: ev.BaseEvent) -> None:
            pass

        async with ar.Run(make_input()) as run:
            with pytest.raises(ValueError, match="is not in this run's taps: remove only one"):
                run.remove_tap(tap)
            run.add_tap(tap)
            run.remove_tap(tap)
            with pytest.raises(ValueError, match="and only once"):
                run.remove_tap(tap)


class TestEventLog:
    async def test_drain_returns_and_forgets(self) -> None:
        """drain() hands back the events logged so far and empties the log."""
        async with ar.Run(make_input()) as run:
            first = run.events.drain()
            ar.say("x")
            second = run.events.drain()
            remaining = len(run.events)

        assert [ev.EventType.RUN_STARTED] == types_of(first)
        assert 3 == len(second)
        assert 0 == remaining
        assert [ev.EventType.RUN_FINISHED] == types_of(run.events)

    async def test_log_is_a_sequence(self) -> None:
        """The log supports len, iteration and indexing."""
        async with ar.Run(make_input()) as run:
            pass

        assert 2 == len(run.events)
        assert ev.EventType.RUN_STARTED == run.events[0].TYPE
        assert types_of(run.events) == [e.TYPE for e in list(run.events)]


class TestTestingHelpers:
    async def test_capture_events_of_a_run_made_inside(self) -> None:
        """capture_events() collects every event of a run created in the block, sink or not."""
        sink: list[ev.BaseEvent] = []
        with capture_events() as events:
            async with ar.Run(make_input(), sink=sink.append):
                ar.say("captured")

        assert sink == events
        assert 5 == len(events)

    async def test_capture_events_inside_a_run_from_now_on(self) -> None:
        """Inside a run, capture_events() collects the ambient run's events in the block only."""
        async with ar.Run(make_input()) as run:
            ar.say("before")
            with capture_events() as events:
                ar.say("during")
            ar.say("after")

        assert [("during", None)] == [
            (e.delta, e.subagent_run_id)
            for e in events
            if isinstance(e, ev.TextMessageContentEvent)
        ]
        assert (3, 11) == (len(events), len(run.events))

    async def test_capture_events_follows_runs_in_tasks(self) -> None:
        """A run started by a task created in the block is captured too."""

        async def agent(run_id: str) -> None:
            async with ar.Run(make_input(run_id=run_id)):
                ar.say(run_id)

        with capture_events() as events:
            await asyncio.gather(agent("a"), agent("b"))

        assert {"a", "b"} == {e.delta for e in events if isinstance(e, ev.TextMessageContentEvent)}
        assert 10 == len(events)

    async def test_project_and_wire(self) -> None:
        """project() picks one invocation's events (None: the parent's); wire() gives dicts."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s"):
                ar.say("mine")
            ar.say("parent")
        events = list(run.events)

        assert [
            {"type": "SUBAGENT_STARTED", "subagentRunId": "r-sub-1", "name": "s"},
            {
                "type": "TEXT_MESSAGE_START",
                "subagentRunId": "r-sub-1",
                "messageId": "r-msg-1",
                "role": "assistant",
            },
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "subagentRunId": "r-sub-1",
                "messageId": "r-msg-1",
                "delta": "mine",
            },
            {"type": "TEXT_MESSAGE_END", "subagentRunId": "r-sub-1", "messageId": "r-msg-1"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"},
        ] == wire(project(events, "r-sub-1"))
        assert [
            "RUN_STARTED",
            *["TEXT_MESSAGE_" + p for p in ("START", "CONTENT", "END")],
            "RUN_FINISHED",
        ] == [e.TYPE.value for e in project(events, None)]

    def test_make_input(self) -> None:
        """make_input builds a RunAgentInput, with an optional user message."""
        data = make_input("t", "r", user="hi")

        assert ("t", "r") == (data.thread_id, data.run_id)
        assert (ev.UserMessage(id="r-user", content="hi"),) == data.messages


class TestCurrentRun:
    async def test_inside_a_run_and_its_tasks(self) -> None:
        """current_run() is the ambient run, in the block and in tasks it starts."""
        async with ar.Run(make_input()) as run:
            here = ar.current_run()
            in_task = await asyncio.create_task(asyncio.to_thread(ar.current_run))

        assert run is here
        assert run is in_task

    async def test_outside_any_run(self) -> None:
        """current_run() outside a run raises NoActiveRunError, also after a run ended."""
        with pytest.raises(ar.NoActiveRunError):
            ar.current_run()
        async with ar.Run(make_input()):
            pass

        with pytest.raises(ar.NoActiveRunError):
            ar.current_run()


class TestAccessors:
    async def test_request_fields(self) -> None:
        """The accessors read the request: ids, messages, tools, context, forwarded props."""
        tool = ev.Tool(name="search", description="web search", parameters={"type": "object"})
        data = make_input(
            "t",
            "r",
            parent_run_id="p",
            user="hello",
            tools=(tool,),
            context=(ev.Context(description="tz", value="UTC"),),
            forwarded_props={"k": 1},
        )

        async with ar.Run(data) as run:
            pass

        assert data is run.input
        assert ("t", "r", "p") == (run.thread_id, run.run_id, run.parent_run_id)
        assert data.messages == run.messages
        assert (tool,) == run.tools
        assert tool is run.tool("search")
        assert None is run.tool("missing")
        assert (ev.Context(description="tz", value="UTC"),) == run.context
        assert {"k": 1} == run.forwarded_props

    async def test_absent_collections_read_as_empty(self) -> None:
        """Absent tools, context and resume read as empty; not a resume."""
        async with ar.Run(make_input()) as run:
            pass

        assert ((), (), ()) == (run.tools, run.context, run.resume)
        assert not run.is_resume

    async def test_last_user_text(self) -> None:
        """last_user_text is the last user message as text, text parts only."""
        messages = (
            ev.UserMessage(id="1", content="first"),
            ev.AssistantMessage(id="2", content="reply"),
            ev.UserMessage(
                id="3",
                content=(
                    ev.TextPart(text="look at"),
                    ev.ImagePart(source=ev.UrlSource(value="https://x/y.png")),
                    ev.TextPart(text="this"),
                ),
            ),
        )

        async with ar.Run(make_input(messages=messages)) as run:
            pass

        assert "look at\nthis" == run.last_user_text()

    async def test_last_user_text_none_versus_empty(self) -> None:
        """No user message gives None, which differs from an empty user message."""
        async with ar.Run(make_input()) as none:
            pass
        async with ar.Run(make_input(user="")) as empty:
            pass

        assert None is none.last_user_text()
        assert "" == empty.last_user_text()

    async def test_resume(self) -> None:
        """resume, resume_for and is_resume read the answers to earlier interrupts."""
        answer = ev.ResumeEntry(interrupt_id="i-1", status="resolved", payload={"ok": True})

        async with ar.Run(make_input(resume=(answer,))) as run:
            pass

        assert run.is_resume
        assert (answer,) == run.resume
        resumption = run.resume_for("i-1")
        assert resumption is not None
        assert answer is resumption.entry
        assert None is run.resume_for("i-2")


class TestCancellation:
    async def test_flags_and_check(self) -> None:
        """cancel() flips is_cancelled, is idempotent, and check_cancelled then raises."""
        async with ar.Run(make_input()) as run:
            before = run.is_cancelled
            run.check_cancelled()
            run.cancel()
            run.cancel()
            after = run.is_cancelled
            with pytest.raises(ar.RunCancelledError):
                run.check_cancelled()

        assert (False, True) == (before, after)

    async def test_cancelled_resolves_when_cancelled_from_a_thread(self) -> None:
        """cancelled() wakes up when another thread cancels the run."""
        async with ar.Run(make_input()) as run:
            waiter = asyncio.create_task(run.cancelled())
            await asyncio.sleep(0)
            worker = threading.Thread(target=run.cancel)
            worker.start()
            await waiter
            worker.join()
            done = waiter.done()

        assert done

    async def test_cancelled_returns_at_once_when_already_cancelled(self) -> None:
        """cancelled() on a cancelled run returns immediately."""
        async with ar.Run(make_input()) as run:
            run.cancel()
            await run.cancelled()
            run.finish_with("ok")

        assert "ok" == finished(run.events).result

    async def test_until_cancelled_none_when_cancellation_wins(self) -> None:
        """until_cancelled gives None when the run is cancelled first, and cancels the work."""
        started = asyncio.Event()
        work_cancelled = False

        async def slow() -> str:
            nonlocal work_cancelled
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                work_cancelled = True
                raise
            return "never"

        async with ar.Run(make_input()) as run:

            async def trip() -> None:
                await started.wait()
                run.cancel()

            tripper = asyncio.create_task(trip())
            answer = await run.until_cancelled(slow())
            await tripper
            await asyncio.sleep(0)

        assert None is answer
        assert work_cancelled


class TestIds:
    async def test_ids_derive_from_run_id_and_counters(self) -> None:
        """Fresh ids are <run id>-msg-n, -tool-n and -sub-n, each counter its own."""
        async with ar.Run(make_input(run_id="r")) as run:
            ids = [
                run.new_message_id(),
                run.new_message_id(),
                run.new_tool_call_id(),
                run.new_subagent_run_id(),
                run.new_subagent_run_id(),
            ]

        assert ["r-msg-1", "r-msg-2", "r-tool-1", "r-sub-1", "r-sub-2"] == ids

    async def test_ids_unique_under_threads(self) -> None:
        """Ids drawn from many threads at once never repeat."""
        drawn: list[str] = []
        lock = threading.Lock()

        async with ar.Run(make_input(run_id="r")) as run:

            def draw() -> None:
                mine = [
                    f(run)
                    for _ in range(500)
                    for f in (
                        ar.Run.new_message_id,
                        ar.Run.new_tool_call_id,
                        ar.Run.new_subagent_run_id,
                    )
                ]
                with lock:
                    drawn.extend(mine)

            workers = [threading.Thread(target=draw) for _ in range(8)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()

        assert 8 * 500 * 3 == len(set(drawn))

    async def test_subagent_ids_unique_under_tasks(self) -> None:
        """Subagents announced from many tasks get distinct ids, in order of announcement."""

        @ar.subagent("worker")
        async def worker() -> None:
            await asyncio.sleep(0)

        async with ar.Run(make_input(run_id="r")) as run:
            await asyncio.gather(*(worker() for _ in range(50)))

        announced = [
            e.subagent_run_id for e in run.events if isinstance(e, ev.SubagentStartedEvent)
        ]
        assert [f"r-sub-{n}" for n in range(1, 51)] == announced


class TestInterruptAndResume:
    async def test_interrupt_in_subagent_suspends_it_and_pauses_the_run(self) -> None:
        """Interrupted in a subagent suspends it, naming its interrupts, then pauses the run."""

        @ar.subagent("approver")
        async def approver() -> None:
            ar.say("I need approval.")
            raise ar.Interrupted(ev.Interrupt(id="approve", reason="confirmation"))

        async with ar.Run(make_input(run_id="r")) as run:
            await approver()
        events = list(run.events)

        assert {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": "r-sub-1",
            "outcome": {"type": "suspended", "interruptIds": ["approve"]},
        } == wire(events)[-2]
        assert {
            "type": "RUN_FINISHED",
            "threadId": "thread",
            "runId": "r",
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {"id": "approve", "reason": "confirmation", "subagentRunId": "r-sub-1"}
                ],
            },
        } == wire(events)[-1]
        assert_valid(events)

    async def test_resuming_run_continues_the_suspended_subagent(self) -> None:
        """A resuming run reads resume_for(id) and continues the invocation under its old id."""

        @ar.subagent("approver")
        async def first_turn() -> None:
            raise ar.Interrupted(ev.Interrupt(id="approve", reason="confirmation"))

        async with ar.Run(make_input(run_id="r1")) as paused:
            await first_turn()
        (interrupt,) = finished(paused.events).outcome.interrupts  # type: ignore[union-attr]
        answer = ev.ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload="yes")

        async with ar.Run(make_input(run_id="r2", resume=(answer,))) as resumed:
            reply = resumed.resume_for(interrupt.id)
            assert reply is not None
            with ar.subagent("approver", id=interrupt.subagent_run_id):
                ar.say(f"Approved: {reply.payload}")
        events = list(resumed.events)

        assert [
            {"type": "SUBAGENT_STARTED", "subagentRunId": "r1-sub-1", "name": "approver"},
            {
                "type": "TEXT_MESSAGE_START",
                "subagentRunId": "r1-sub-1",
                "messageId": "r2-msg-1",
                "role": "assistant",
            },
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "subagentRunId": "r1-sub-1",
                "messageId": "r2-msg-1",
                "delta": "Approved: yes",
            },
            {"type": "TEXT_MESSAGE_END", "subagentRunId": "r1-sub-1", "messageId": "r2-msg-1"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "r1-sub-1"},
        ] == wire(events)[1:-1]
        assert_valid(events)

    async def test_interrupt_raised_outside_keeps_explicit_owner(self) -> None:
        """An interrupt that names its subagent keeps it; one raised at top level has none."""
        async with ar.Run(make_input()):
            top = ar.Interrupted(ev.Interrupt(id="a", reason="r"))
            with ar.subagent("s"):
                tagged = ar.Interrupted(ev.Interrupt(id="b", reason="r", subagent_run_id="x"))

        assert None is top.interrupts[0].subagent_run_id
        assert "x" == tagged.interrupts[0].subagent_run_id
