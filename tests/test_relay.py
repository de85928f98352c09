"""
`ambient_runs.relay`: another agent's AG-UI stream replayed as a subagent of the current scope.

Every relayed stream goes through our strict verifier and the official client (``_node``), and
its attribution is checked against the program's structure: each relayed event belongs to the
relay's subagent or to a foreign subagent nested under it, never to the parent or another relay.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import ag_ui.core as agui
import pydantic
import pytest
from support.node import client_verify

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._relay import MAX_FRAME, _SSEParser
from ambient_runs.testing import assert_valid, make_input, wire
from ambient_runs.verify import Verifier


def client_ok(*runs: Sequence[ev.BaseEvent]) -> None:
    """Every run is valid for our strict verifier and for the official client."""
    for events in runs:
        assert_valid(list(events))
    verdicts = client_verify([wire(list(events)) for events in runs])
    assert [(True, None)] * len(runs) == [(v["ok"], v["error"]) for v in verdicts]


def owners(events: Sequence[ev.BaseEvent]) -> set[str | None]:
    """Every subagentRunId the events carry (attributing or identifying)."""
    return {getattr(e, "subagent_run_id", None) for e in events}


def under(sid: str, events: Sequence[ev.BaseEvent]) -> list[ev.BaseEvent]:
    """The events of invocation *sid* and of the subagents nested in it."""
    return [
        e
        for e in events
        if (o := getattr(e, "subagent_run_id", None)) is not None
        and (o == sid or o.startswith(sid + "/"))
    ]


async def inner_agent(run: ar.Run) -> dict[str, Any]:
    """The relayed agent: text, a tool call, a nested subagent with a step, state."""
    run.set_state({"n": 1})
    ar.say("hello")
    with ar.tool_call("search") as call:
        call.args({"q": "x"})
        call.result("found")
    with ar.subagent("nested"), ar.step("look"):
        ar.think("hmm")
        ar.say("nested says")
    run.update_state(lambda s: s.update(n=2))
    return {"answer": 42}


async def produce(agent: Any, run_id: str = "inner", **fields: Any) -> list[ev.BaseEvent]:
    """The events an ambient_runs agent streams (its ids are fixed by *run_id*)."""
    return [e async for e in ar.stream(agent, make_input(run_id=run_id, **fields))]


def official(events: Sequence[ev.BaseEvent]) -> list[Any]:
    """The same events as official ag_ui.core objects."""
    adapter = pydantic.TypeAdapter(agui.Event)
    return [adapter.validate_python(ar.to_wire(e)) for e in events]


def sse_bytes(events: Sequence[ev.BaseEvent], chunk: int) -> list[bytes]:
    """The SSE byte stream of *events*, cut into *chunk*-byte pieces (UTF-8 split anywhere)."""
    data = b"".join(b"data: " + ar.encode_json(e) + b"\n\n" for e in events)
    return [data[i : i + chunk] for i in range(0, len(data), chunk)]


def sse_lines(events: Sequence[ev.BaseEvent]) -> list[str]:
    """The SSE stream as lines without terminators, as httpx's aiter_lines yields them."""
    lines: list[str] = []
    for e in events:
        lines += [": keep-alive", "", "data: " + ar.encode_json(e).decode(), ""]
    return lines


async def agen(items: Sequence[Any], *, pause: bool = True) -> AsyncIterator[Any]:
    for item in items:
        if pause:
            await asyncio.sleep(0)
        yield item


class TestForms:
    async def test_every_form_relays_the_same_stream(self) -> None:
        """Objects, official models, wire dicts, JSON text, SSE lines and SSE bytes: one result."""
        inner = await produce(inner_agent)
        inner[2] = ev.TextMessageStartEvent(message_id="inner-msg-1", metadata={"é": "ü"})
        forms = {
            "events": inner,
            "official": official(inner),
            "dicts": [ar.to_wire(e) for e in inner],
            "json": [ar.encode_json(e).decode() for e in inner],
            "lines": sse_lines(inner),
            "frames": ["data: " + ar.encode_json(e).decode() + "\n\n" for e in inner],
            "bytes1": sse_bytes(inner, 1),
            "bytes7": sse_bytes(inner, 7),
            "bytes_all": sse_bytes(inner, 1 << 20),
        }
        relayed: dict[str, list[dict[str, Any]]] = {}
        for label, items in forms.items():
            for sync in (True, False):
                async with ar.Run(make_input(run_id="outer")) as run:
                    if sync:
                        result = ar.relay(iter(items), name="remote")
                    else:
                        result = await ar.relay(agen(items), name="remote")
                assert {"answer": 42} == result, label
                relayed[f"{label}/{sync}"] = wire(list(run.events))
        first = relayed.pop("events/True")
        assert dict.fromkeys(relayed, first) == relayed
        assert {"type": "SUBAGENT_STARTED", "subagentRunId": "outer-sub-1", "name": "remote"} == (
            first[1]
        )
        assert {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": "outer-sub-1",
            "result": {"answer": 42},
        } == first[-2]

    async def test_ids_are_namespaced_and_nesting_remapped(self) -> None:
        """Foreign ids live under the subagent id; the nested subagent hangs under the relay."""
        inner = await produce(inner_agent)
        async with ar.Run(make_input(run_id="outer")) as run:
            ar.say("before")
            ar.relay(inner, name="remote", description="a remote agent")
        events = list(run.events)
        out = wire(events)
        started = [e for e in out if e["type"] == "SUBAGENT_STARTED"]
        assert [
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "outer-sub-1",
                "name": "remote",
                "description": "a remote agent",
            },
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "outer-sub-1/inner-sub-1",
                "name": "nested",
                "parentSubagentRunId": "outer-sub-1",
            },
        ] == started
        ids = {v for e in out[6:-2] for k, v in e.items() if k in ("messageId", "toolCallId")}
        assert ids
        assert all(i.startswith("outer-sub-1/inner-") for i in ids)
        relayed = events[5:-1]
        assert relayed == under("outer-sub-1", relayed)
        nested = [
            e for e in relayed if getattr(e, "subagent_run_id", "") == "outer-sub-1/inner-sub-1"
        ]
        assert ["SUBAGENT_STARTED", "STEP_STARTED", "REASONING_START"] == [
            e.TYPE.value for e in nested[:3]
        ]
        client_ok(events)

    async def test_untagged_continuations_keep_the_openers_owner(self) -> None:
        """A foreign continuation without a tag belongs to whoever opened the entity."""
        foreign = [
            ev.RunStartedEvent(thread_id="t", run_id="f"),
            ev.SubagentStartedEvent(subagent_run_id="s", name="helper"),
            ev.TextMessageStartEvent(message_id="m", subagent_run_id="s"),
            ev.TextMessageContentEvent(message_id="m", delta="a"),
            ev.TextMessageEndEvent(message_id="m"),
            ev.ToolCallStartEvent(tool_call_id="c", tool_call_name="t", parent_message_id="m"),
            ev.ToolCallEndEvent(tool_call_id="c"),
            ev.ReasoningEncryptedValueEvent(
                subtype="tool-call", entity_id="c", encrypted_value="x"
            ),
            ev.SubagentFinishedEvent(subagent_run_id="s"),
            ev.RunFinishedEvent(thread_id="t", run_id="f"),
        ]
        async with ar.Run(make_input(run_id="o")) as run:
            ar.relay(foreign, name="r")
        events = list(run.events)
        assert {"o-sub-1/s"} == owners(events[3:-3])
        client_ok(events)

    async def test_emit_accepts_official_events_and_wire_dicts(self) -> None:
        """emit() takes an ag_ui.core event or a wire dict, and attributes it like its own."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s"):
                ar.emit(agui.CustomEvent(name="ping", value=None))
                ar.emit({"type": "RAW", "event": {"a": 1}})
            run.emit(agui.StateSnapshotEvent(snapshot=None))
        assert [
            {"type": "CUSTOM", "subagentRunId": "r-sub-1", "name": "ping", "value": None},
            {"type": "RAW", "subagentRunId": "r-sub-1", "event": {"a": 1}},
        ] == wire(list(run.events))[2:4]
        assert {"type": "STATE_SNAPSHOT", "snapshot": None} == wire(list(run.events))[5]
        with pytest.raises(TypeError, match="expected an AG-UI event"):
            async with ar.Run(make_input()):
                ar.emit(42)

    async def test_relay_outside_a_run_and_bad_arguments_raise(self) -> None:
        """No run: NoActiveRunError; a string or a number is not a stream."""
        with pytest.raises(ar.NoActiveRunError, match="relay"):
            ar.relay([], name="x")
        async with ar.Run(make_input()):
            with pytest.raises(TypeError, match="iterable"):
                ar.relay("data: {}", name="x")
            with pytest.raises(TypeError, match="iterable"):
                ar.relay(3, name="x")  # type: ignore[call-overload]


class TestConcurrency:
    async def test_two_relays_of_colliding_streams_interleave_cleanly(self) -> None:
        """Two concurrent relays of streams with the very same ids stay apart, and valid."""
        inner = await produce(inner_agent)
        async with ar.Run(make_input(run_id="o")) as run, asyncio.TaskGroup() as tg:
            a = tg.create_task(ar.relay(agen(inner), name="a"))
            b = tg.create_task(ar.relay(agen(official(inner)), name="b"))
        events = list(run.events)
        assert ({"answer": 42}, {"answer": 42}) == (a.result(), b.result())
        sids = [e.subagent_run_id for e in events if isinstance(e, ev.SubagentStartedEvent)]
        top = [s for s in sids if "/" not in s]
        assert ["o-sub-1", "o-sub-2"] == sorted(top)
        # interleaved: the second relay started before the first finished
        kinds = [(e.TYPE.value, getattr(e, "subagent_run_id", None)) for e in events]
        assert kinds.index(("SUBAGENT_STARTED", top[1])) < kinds.index(
            ("SUBAGENT_FINISHED", top[0])
        )
        body = events[1:-1]
        assert len(body) == len(under(top[0], body)) + len(under(top[1], body))
        for sid in top:
            relayed = [
                ev_
                for ev_ in under(sid, body)
                if not isinstance(ev_, ev.SubagentStartedEvent) or ev_.subagent_run_id != sid
            ]
            ids = [
                getattr(e, "message_id", None) or getattr(e, "tool_call_id", None) for e in relayed
            ]
            assert all(i.startswith(sid + "/") for i in ids if i is not None)
        client_ok(events)


def foreign_run(*body: ev.BaseEvent, end: ev.BaseEvent | None = None) -> list[ev.BaseEvent]:
    start = ev.RunStartedEvent(thread_id="t", run_id="f")
    return [start, *body] if end is None else [start, *body, end]


OPEN_WORK = (
    ev.SubagentStartedEvent(subagent_run_id="s", name="helper"),
    ev.StepStartedEvent(step_name="work", subagent_run_id="s"),
    ev.TextMessageStartEvent(message_id="m", subagent_run_id="s"),
    ev.TextMessageContentEvent(message_id="m", delta="half", subagent_run_id="s"),
    ev.ReasoningStartEvent(message_id="r"),
    ev.ReasoningMessageStartEvent(message_id="r"),
    ev.ToolCallStartEvent(tool_call_id="c", tool_call_name="t"),
)


class TestFailures:
    async def test_run_error_becomes_subagent_error_and_raises(self) -> None:
        """A foreign RUN_ERROR: what it left open is closed, SUBAGENT_ERROR, RelayError."""
        stream = foreign_run(*OPEN_WORK, end=ev.RunErrorEvent(message="boom", code="E42"))
        async with ar.Run(make_input(run_id="o")) as run:
            with pytest.raises(ar.RelayError) as caught:
                await ar.relay(agen(stream), name="remote")
            ar.say("recovered")
        assert ("remote", "o-sub-1", "boom", "E42") == (
            caught.value.name,
            caught.value.subagent_run_id,
            caught.value.reason,
            caught.value.code,
        )
        assert "catch RelayError around relay()" in str(caught.value)
        out = wire(list(run.events))
        assert [
            {"type": "TOOL_CALL_END", "subagentRunId": "o-sub-1", "toolCallId": "o-sub-1/c"},
            {
                "type": "REASONING_MESSAGE_END",
                "subagentRunId": "o-sub-1",
                "messageId": "o-sub-1/r",
            },
            {"type": "REASONING_END", "subagentRunId": "o-sub-1", "messageId": "o-sub-1/r"},
            {"type": "TEXT_MESSAGE_END", "subagentRunId": "o-sub-1/s", "messageId": "o-sub-1/m"},
            {"type": "STEP_FINISHED", "subagentRunId": "o-sub-1/s", "stepName": "work"},
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": "o-sub-1/s",
                "message": "boom",
                "code": "E42",
            },
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": "o-sub-1",
                "message": "boom",
                "code": "E42",
            },
        ] == out[9:16]
        assert "RUN_FINISHED" == out[-1]["type"]
        client_ok(list(run.events))

    async def test_a_run_error_first_fails_the_subagent(self) -> None:
        """RUN_ERROR before any RUN_STARTED (an unreachable agent) is a failure too."""
        async with ar.Run(make_input(run_id="o")) as run:
            with pytest.raises(ar.RelayError, match="unreachable"):
                ar.relay([{"type": "RUN_ERROR", "message": "unreachable"}], name="remote")
        assert ["SUBAGENT_STARTED", "SUBAGENT_ERROR"] == [
            e["type"] for e in wire(list(run.events))[1:-1]
        ]
        client_ok(list(run.events))

    async def test_uncaught_relay_error_fails_the_run(self) -> None:
        """Left to propagate, the RelayError ends the run with RUN_ERROR, code relayed."""
        stream = foreign_run(end=ev.RunErrorEvent(message="boom", code="E42"))
        with pytest.raises(ar.RelayError) as caught:
            async with ar.Run(make_input(run_id="o"), expose_errors=True) as run:
                ar.relay(stream, name="remote")
        assert {"type": "RUN_ERROR", "message": str(caught.value), "code": "E42"} == wire(
            list(run.events)
        )[-1]
        client_ok(list(run.events))

    @pytest.mark.parametrize(
        ("stream", "code", "reason"),
        [
            (foreign_run(*OPEN_WORK), "truncated", "ended without RUN_FINISHED"),
            (
                [b'data: {"type":"RUN_STARTED","threadId":"t","runId":"f"}\n\ndata: {'],
                "invalid_stream",
                "not JSON",
            ),
            (
                foreign_run(ev.TextMessageContentEvent(message_id="m", delta="x")),
                "invalid_stream",
                "No active text message",
            ),
            (
                foreign_run(*OPEN_WORK, end=ev.RunFinishedEvent(thread_id="t", run_id="f")),
                "invalid_stream",
                "still active",
            ),
            ([{"type": "RUN_STARTED", "threadId": "t"}], "invalid_stream", "runId"),
            (
                [ev.RunStartedEvent(thread_id="t", run_id="f"), 12],
                "invalid_stream",
                "not an AG-UI event: int",
            ),
            ([b"\xff\xfe"], "invalid_stream", "UTF-8"),
            (
                foreign_run(
                    end=ev.RunFinishedEvent(
                        thread_id="t", run_id="f", outcome=ev.RunFinishedCancelledOutcome()
                    )
                ),
                "cancelled",
                "cancelled",
            ),
        ],
        ids=[
            "truncated",
            "bad-json",
            "sequence",
            "open-at-finish",
            "schema",
            "not-event",
            "utf8",
            "cancelled",
        ],
    )
    async def test_broken_streams_fail_the_subagent_and_nothing_invalid_is_sent(
        self, stream: list[Any], code: str, reason: str
    ) -> None:
        """Truncation, bad JSON, bad sequences, bad fields: SUBAGENT_ERROR with a code."""
        async with ar.Run(make_input(run_id="o")) as run:
            with pytest.raises(ar.RelayError, match=reason) as caught:
                ar.relay(stream, name="remote")
        assert code == caught.value.code
        last = wire(list(run.events))[-2]
        assert ("SUBAGENT_ERROR", "o-sub-1", code) == (
            last["type"],
            last["subagentRunId"],
            last["code"],
        )
        client_ok(list(run.events))

    @pytest.mark.parametrize(
        ("delta", "problem"),
        [
            ({"delta": 5}, "delta"),
            ({"delta": "x", "subagentRunId": None}, "subagentRunId"),
            ({"delta": "x", "timestamp": True}, "timestamp"),
            ({"delta": "x", "timestamp": 1.5}, "timestamp"),
            ({"delta": "x", "timestamp": 2**53}, "timestamp"),
        ],
    )
    async def test_malformed_deltas_in_wire_form_are_refused(
        self, delta: dict[str, Any], problem: str
    ) -> None:
        """The quick read of plain deltas refuses what the converter refuses."""
        stream = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "f"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", **delta},
        ]
        async with ar.Run(make_input(run_id="o")) as run:
            with pytest.raises(ar.RelayError, match=problem) as caught:
                ar.relay(stream, name="remote")
        assert "invalid_stream" == caught.value.code
        client_ok(list(run.events))

    async def test_deltas_keep_their_timestamp_metadata_and_raw_event(self) -> None:
        """Every base field of a relayed delta survives, whatever form it came in."""
        stream = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "f"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": "s"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a", "timestamp": 7},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b", "metadata": {"k": 1},
             "rawEvent": {"x": [1]}, "subagentRunId": "s"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "f"},
        ]  # fmt: skip
        for form in (stream, [ar.from_wire(d) for d in stream]):
            async with ar.Run(make_input(run_id="o")) as run:
                ar.relay(form, name="remote")
            assert [
                {"type": "TEXT_MESSAGE_CONTENT", "timestamp": 7, "subagentRunId": "o-sub-1/s",
                 "messageId": "o-sub-1/m", "delta": "a"},
                {"type": "TEXT_MESSAGE_CONTENT", "rawEvent": {"x": [1]}, "metadata": {"k": 1},
                 "subagentRunId": "o-sub-1/s", "messageId": "o-sub-1/m", "delta": "b"},
            ] == wire(list(run.events))[3:5]  # fmt: skip

    async def test_unknown_event_types_are_dropped_with_a_warning(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A type AG-UI 1.0 does not know is dropped, as the official client drops it."""
        stream = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "f"},
            {"type": "THINKING_START"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "f", "result": 1},
        ]
        with caplog.at_level(logging.WARNING, "ambient_runs"):
            async with ar.Run(make_input(run_id="o")) as run:
                assert 1 == ar.relay(stream, name="remote")
        assert ["THINKING_START"] == [r.args[1] for r in caplog.records]  # type: ignore[index]
        assert 4 == len(run.events)

    async def test_a_raising_source_fails_the_subagent_and_propagates(self) -> None:
        """The source's own exception closes what was open and propagates unchanged."""

        def source() -> Iterator[ev.BaseEvent]:
            yield from foreign_run(*OPEN_WORK)
            raise LookupError("source broke")

        with pytest.raises(LookupError, match="source broke"):
            async with ar.Run(make_input(run_id="o"), expose_errors=True) as run:
                ar.relay(source(), name="remote")
        out = wire(list(run.events))
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "o-sub-1",
            "message": "source broke",
            "code": "LookupError",
        } == out[-2]
        client_ok(list(run.events))


class TestCancellation:
    async def test_cancelling_the_caller_closes_the_stream_and_the_source(self) -> None:
        """Cancelled mid-stream: open work closed, SUBAGENT_ERROR cancelled, source closed."""
        closed = asyncio.Event()
        reached = asyncio.Event()

        async def source() -> AsyncIterator[ev.BaseEvent]:
            try:
                for e in foreign_run(*OPEN_WORK):
                    yield e
                reached.set()
                await asyncio.Event().wait()  # a remote agent that goes quiet
                yield ev.RunFinishedEvent(thread_id="t", run_id="f")
            finally:
                closed.set()

        run = ar.Run(make_input(run_id="o"))

        async def agent() -> None:
            async with run:
                await ar.relay(source(), name="remote")

        task = asyncio.create_task(agent())
        await asyncio.wait_for(reached.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        events = list(run.events)
        assert closed.is_set()
        out = wire(events)
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "o-sub-1",
            "message": "cancelled",
            "code": "cancelled",
        } == out[-2]
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "o-sub-1/s",
            "message": "cancelled",
            "code": "cancelled",
        } == out[-3]
        assert {"type": "cancelled"} == out[-1]["outcome"]
        client_ok(events)


class TestInterrupts:
    async def test_interrupt_suspends_and_resume_maps_back(self) -> None:
        """A foreign interrupt suspends the relay; the next run continues it and maps ids back."""

        def paused() -> list[ev.BaseEvent]:
            return foreign_run(
                ev.SubagentStartedEvent(subagent_run_id="s", name="approver"),
                ev.ToolCallStartEvent(tool_call_id="c", tool_call_name="pay", subagent_run_id="s"),
                ev.ToolCallEndEvent(tool_call_id="c", subagent_run_id="s"),
                ev.SubagentFinishedEvent(
                    subagent_run_id="s",
                    outcome=ev.SubagentFinishedSuspendedOutcome(interrupt_ids=["i1"]),
                ),
                end=ev.RunFinishedEvent(
                    thread_id="t",
                    run_id="f",
                    outcome=ev.RunFinishedInterruptOutcome(
                        interrupts=[
                            ev.Interrupt(
                                id="i1", reason="tool_call", subagent_run_id="s", tool_call_id="c"
                            ),
                            ev.Interrupt(id="i2", reason="input_required"),
                        ]
                    ),
                ),
            )

        async with ar.Run(make_input(run_id="r1")) as first:
            ar.relay(paused(), name="pay agent")
        out = wire(list(first.events))
        outcome = out[-1]["outcome"]
        i1, i2 = (i["id"] for i in outcome["interrupts"])
        assert ("relay:pay%20agent:r1-sub-1:i1", "relay:pay%20agent:r1-sub-1:i2") == (i1, i2)
        assert [
            {
                "id": i1,
                "reason": "tool_call",
                "subagentRunId": "r1-sub-1/s",
                "toolCallId": "r1-sub-1/c",
            },
            {"id": i2, "reason": "input_required", "subagentRunId": "r1-sub-1"},
        ] == outcome["interrupts"]
        assert {"type": "suspended", "interruptIds": [i2]} == out[-2]["outcome"]
        assert {"type": "suspended", "interruptIds": [i1]} == out[-3]["outcome"]

        # A fresh run: only the client's resume (and history) carries what is needed.
        resume = [
            ev.ResumeEntry(interrupt_id=i1, status="resolved", payload={"ok": True}),
            ev.ResumeEntry(interrupt_id=i2, status="cancelled"),
            ev.ResumeEntry(interrupt_id="someone-else", status="resolved"),
        ]
        history = (
            ev.AssistantMessage(
                id="r1-sub-1/c",
                subagent_run_id="r1-sub-1/s",
                tool_calls=[
                    ev.ToolCall(
                        id="r1-sub-1/c", function=ev.FunctionCall(name="pay", arguments="")
                    )
                ],
            ),
        )
        seen: list[tuple[ev.ResumeEntry, ...]] = []
        async with ar.Run(make_input(run_id="r2", resume=resume, messages=history)) as second:
            foreign_resume = ar.relay_resume("pay agent")
            seen.append(foreign_resume)
            assert () == ar.relay_resume("other agent")
            resumed = foreign_run(
                ev.SubagentStartedEvent(subagent_run_id="s", name="approver"),
                ev.ToolCallResultEvent(
                    message_id="res", tool_call_id="c", content="paid", subagent_run_id="s"
                ),
                ev.SubagentFinishedEvent(subagent_run_id="s"),
                end=ev.RunFinishedEvent(thread_id="t", run_id="f2", result="done"),
            )
            assert "done" == await ar.relay(agen(resumed), name="pay agent")
            assert () == ar.relay_resume("pay agent")  # taken
        assert [("i1", "resolved", {"ok": True}), ("i2", "cancelled", None)] == [
            (e.interrupt_id, e.status, e.payload) for e in seen[0]
        ]
        out2 = wire(list(second.events))
        assert {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": "r1-sub-1",
            "name": "pay agent",
        } == out2[1]
        assert "r1-sub-1/c" == out2[3]["toolCallId"]
        verdicts = client_verify(
            [
                {
                    "events": wire(list(first.events)) + out2,
                    "runAgent": {},
                }
            ]
        )
        assert (True, None) == (verdicts[0]["ok"], verdicts[0]["error"])
        client_ok(list(first.events))
        assert () == Verifier(known_tool_call_ids=["r1-sub-1/c"]).verify(list(second.events))


class TestState:
    async def test_state_events_go_through_the_runs_state(self) -> None:
        """Foreign snapshots and deltas become the run's state, published by its own differ."""
        stream = foreign_run(
            ev.StateDeltaEvent(delta=[ev.AddOperation(path="/seen", value=True)]),
            ev.StateSnapshotEvent(snapshot={"a": [1, 2], "b": "x" * 50}),
            ev.StateDeltaEvent(delta=[ev.AddOperation(path="/a/-", value=3)]),
            ev.StateDeltaEvent(delta=[ev.RemoveOperation(path="/nope")]),  # does not apply
            end=ev.RunFinishedEvent(thread_id="t", run_id="f"),
        )
        async with ar.Run(make_input(run_id="o"), state={"mine": 1}) as run:
            ar.relay(stream, name="remote")
        assert {"a": [1, 2, 3], "b": "x" * 50} == run.state()
        verdict = client_verify([wire(list(run.events))])[0]
        assert (True, {"a": [1, 2, 3], "b": "x" * 50}) == (verdict["ok"], verdict["state"])
        kinds = [e["type"] for e in wire(list(run.events)) if e["type"].startswith("STATE")]
        assert ["STATE_SNAPSHOT", "STATE_SNAPSHOT", "STATE_DELTA"] == kinds

    async def test_state_key_mounts_the_relayed_state(self) -> None:
        """With state_key, the relayed state is one key of the run's dict state."""
        stream = foreign_run(
            ev.StateSnapshotEvent(snapshot={"a": 1}),
            end=ev.RunFinishedEvent(thread_id="t", run_id="f"),
        )
        async with ar.Run(make_input(run_id="o"), state={"mine": 1}) as run:
            ar.relay(stream, name="remote", state_key="remote")
        assert {"mine": 1, "remote": {"a": 1}} == run.state()
        verdict = client_verify([wire(list(run.events))])[0]
        assert {"mine": 1, "remote": {"a": 1}} == verdict["state"]
        async with ar.Run(make_input(), state=[1]):
            with pytest.raises(TypeError, match="state_key"):
                ar.relay(stream, name="remote", state_key="k")


class TestMessagesSnapshot:
    async def test_snapshot_replays_only_what_the_stream_did_not_carry(self) -> None:
        """A foreign MESSAGES_SNAPSHOT is never forwarded; its new output messages are replayed."""
        stream = foreign_run(
            ev.TextMessageStartEvent(message_id="streamed"),
            ev.TextMessageContentEvent(message_id="streamed", delta="live"),
            ev.TextMessageEndEvent(message_id="streamed"),
            ev.MessagesSnapshotEvent(
                messages=[
                    ev.UserMessage(id="u", content="question"),
                    ev.AssistantMessage(id="streamed", content="live"),
                    ev.AssistantMessage(
                        id="a2",
                        content="calling",
                        tool_calls=[
                            ev.ToolCall(id="c", function=ev.FunctionCall(name="f", arguments="{}"))
                        ],
                    ),
                    ev.ToolMessage(id="t1", tool_call_id="c", content="42"),
                    ev.ToolMessage(id="t2", tool_call_id="unknown", content="?"),
                    ev.ReasoningMessage(id="th", content="why"),
                    ev.ActivityMessage(id="act", activity_type="plan", content={"s": 1}),
                ]
            ),
            end=ev.RunFinishedEvent(thread_id="t", run_id="f"),
        )
        async with ar.Run(make_input(run_id="o", user="hi")) as run:
            ar.relay(stream, name="remote")
        out = wire(list(run.events))
        assert "MESSAGES_SNAPSHOT" not in [e["type"] for e in out]
        assert [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "ACTIVITY_SNAPSHOT",
        ] == [e["type"] for e in out[5:-2]]
        verdict = client_verify(
            [
                {
                    "events": out,
                    "initialMessages": [{"id": "o-user", "role": "user", "content": "hi"}],
                }
            ]
        )[0]
        assert verdict["ok"], verdict["error"]
        assert [
            "o-user",
            "o-sub-1/streamed",
            "o-sub-1/a2",
            "o-sub-1/t1",
            "o-sub-1/th",
            "o-sub-1/act",
        ] == [m["id"] for m in verdict["messages"] or []]
        assert_valid(list(run.events))


class TestSSEParser:
    def test_crlf_comments_fields_and_multiline_data(self) -> None:
        """CRLF lines, comments, event/id/retry fields and several data lines."""
        parser = _SSEParser()
        out = parser.feed_bytes(b': hi\r\nevent: x\r\nid: 3\r\ndata: {"a":\r\ndata:1}\r\n\r\n')
        assert ['{"a":\n1}'] == out
        assert ["tail"] == parser.feed_bytes(b"data: tail") + parser.close()

    def test_a_frame_over_the_limit_is_refused(self) -> None:
        """An unterminated line or an event's data over 10 MiB stops the stream."""
        from ambient_runs._relay import _Broken

        def flood(feed: Any, piece: Any) -> None:
            for _ in range(MAX_FRAME // 65536 + 2):
                feed(piece)

        with pytest.raises(_Broken, match="MiB"):
            flood(_SSEParser().feed_bytes, b"x" * 65536)
        with pytest.raises(_Broken, match="MiB"):
            flood(_SSEParser().feed_lines, "data: " + "x" * 65536)

    async def test_relay_of_an_oversized_frame_fails_cleanly(self) -> None:
        """A remote that never ends its line cannot grow our memory without bound."""

        def source() -> Iterator[bytes]:
            yield b'data: {"type":"RUN_STARTED","threadId":"t","runId":"f"}\n\ndata: "'
            while True:
                yield b"x" * 65536

        async with ar.Run(make_input(run_id="o")) as run:
            with pytest.raises(ar.RelayError, match="MiB"):
                ar.relay(source(), name="remote")
        assert_valid(list(run.events))
        assert json.loads(ar.encode_json(run.events[-2]))["code"] == "invalid_stream"
