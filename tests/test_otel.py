"""
`ambient_runs.adapters.otel`: spans derived from the event stream, judged by the SDK's
in-memory exporter against the subagent tree the same stream describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.adapters import otel
from ambient_runs.adapters.otel import AmbientRunsInstrumentor
from ambient_runs.asgi import Headers, Request
from ambient_runs.testing import assert_valid, make_input


class Ledger(SpanProcessor):
    """Count every start and end per span, to prove each span ends exactly once."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        self.lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        with self.lock:
            self.started[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        with self.lock:
            self.ended[span.context.span_id] = self.ended.get(span.context.span_id, 0) + 1

    def open(self) -> list[str]:
        """The names of spans started and not ended."""
        return [name for sid, name in self.started.items() if sid not in self.ended]

    def ended_twice(self) -> list[int]:
        return [sid for sid, n in self.ended.items() if n != 1]


class Traced:
    """A tracer provider with an in-memory exporter and a ledger, instrumented."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.ledger = Ledger()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.ledger)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def check_closed(self) -> None:
        """Every span started has ended, exactly once, and no later than its parent."""
        assert [] == self.ledger.open()
        assert [] == self.ledger.ended_twice()
        spans = self.spans()
        assert len(self.ledger.started) == len(spans)
        ends = {s.context.span_id: s.end_time for s in spans if s.context is not None}
        late = [
            s.name
            for s in spans
            if s.parent is not None
            and s.parent.span_id in ends
            and (s.end_time or 0) > (ends[s.parent.span_id] or 0)
        ]
        assert [] == late


@pytest.fixture
def traced() -> Iterator[Traced]:
    """Instrument with a fresh provider; uninstrument after."""
    found = Traced()
    AmbientRunsInstrumentor().instrument(tracer_provider=found.provider)
    try:
        yield found
    finally:
        AmbientRunsInstrumentor().uninstrument()
        found.provider.shutdown()


# --------------------------------------------------------------------------- the tree


def subagent_tree(events: Sequence[ev.BaseEvent]) -> dict[str, str | None]:
    """subagentRunId -> parentSubagentRunId, from the stream."""
    return {
        e.subagent_run_id: e.parent_subagent_run_id
        for e in events
        if isinstance(e, ev.SubagentStartedEvent)
    }


def run_span_of(spans: Sequence[ReadableSpan], run_id: str) -> ReadableSpan:
    (found,) = [
        s for s in spans if s.attributes and s.attributes.get("ambient_runs.run_id") == run_id
    ]
    return found


def span_tree(spans: Sequence[ReadableSpan], run_id: str) -> dict[str, str | None]:
    """subagentRunId -> the subagentRunId of its span's parent (None: the run span)."""
    run = run_span_of(spans, run_id)
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    assert run.context is not None
    tree: dict[str, str | None] = {}
    for span in spans:
        sid = (span.attributes or {}).get("ambient_runs.subagent_run_id")
        if sid is None:
            continue
        assert span.parent is not None, span.name
        assert run.context.trace_id == span.context.trace_id  # type: ignore[union-attr]
        if span.parent.span_id == run.context.span_id:
            tree[str(sid)] = None
        else:
            parent = by_id[span.parent.span_id]
            tree[str(sid)] = str((parent.attributes or {})["ambient_runs.subagent_run_id"])
    return tree


def owner_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> str | None:
    """The subagentRunId of the span's parent (None: the run span)."""
    assert span.parent is not None
    (parent,) = [s for s in spans if s.context and s.context.span_id == span.parent.span_id]
    sid = (parent.attributes or {}).get("ambient_runs.subagent_run_id")
    return None if sid is None else str(sid)


def check_leaves(events: Sequence[ev.BaseEvent], spans: Sequence[ReadableSpan]) -> None:
    """Each step and tool-call span sits under the invocation owning its event."""
    steps = sorted(
        (e.subagent_run_id or "", e.step_name)
        for e in events
        if isinstance(e, ev.StepStartedEvent)
    )
    tools = sorted(
        (e.subagent_run_id or "", e.tool_call_id)
        for e in events
        if isinstance(e, ev.ToolCallStartEvent)
    )
    step_spans = sorted(
        (owner_of(s, spans) or "", str((s.attributes or {})["ambient_runs.step.name"]))
        for s in spans
        if s.name.startswith("step ")
    )
    tool_spans = sorted(
        (owner_of(s, spans) or "", str((s.attributes or {})["gen_ai.tool.call.id"]))
        for s in spans
        if s.name.startswith("execute_tool ")
    )
    assert steps == step_spans
    assert tools == tool_spans


def attributes_of(spans: Sequence[ReadableSpan], sid: str) -> dict[str, Any]:
    (span,) = [s for s in spans if (s.attributes or {}).get("ambient_runs.subagent_run_id") == sid]
    return dict(span.attributes or {})


def status_of(spans: Sequence[ReadableSpan], sid: str) -> StatusCode:
    (span,) = [s for s in spans if (s.attributes or {}).get("ambient_runs.subagent_run_id") == sid]
    return span.status.status_code


# --------------------------------------------------------------------------- the big one


@ar.subagent("leaf-gen")
def leaf_generator(n: int) -> Iterator[int]:
    """A sync generator subagent with a tool call per item."""
    for i in range(n):
        with ar.tool_call("count") as call:
            call.args({"i": i})
            call.result(i)
        yield i


@ar.subagent("leaf-agen")
async def leaf_async_generator(n: int) -> AsyncIterator[int]:
    """An async generator subagent, awaiting between items."""
    for i in range(n):
        ar.say(f"item {i}")
        await asyncio.sleep(0)
        yield i


@ar.subagent("leaf-thread")
def leaf_in_thread(k: int) -> int:
    """A sync subagent run in a worker thread (asyncio.to_thread carries the context)."""
    with ar.step("compute"):
        ar.say(f"thread {k}")
    return k


@ar.subagent("leaf-fail")
async def leaf_failing(k: int) -> None:
    with ar.step("doomed"):
        await asyncio.sleep(0)
        raise ValueError(f"leaf {k} failed")


@ar.subagent("leaf-slow")
async def leaf_slow() -> None:
    with ar.tool_call("wait"):
        await asyncio.sleep(30)


@ar.subagent("middle")
async def middle(k: int) -> int:
    """Level 2: one of four kinds of leaf (level 3), by k."""
    kind = k % 5
    await asyncio.sleep(0)
    if kind == 0:
        return sum(leaf_generator(2))
    if kind == 1:
        return sum([i async for i in leaf_async_generator(2)])
    if kind == 2:
        return await asyncio.to_thread(leaf_in_thread, k)
    if kind == 3:
        with pytest.raises(ValueError, match="failed"):
            await leaf_failing(k)
        return -1
    async with contextlib.aclosing(leaf_async_generator(5)) as items:
        async for i in items:  # abandoned after the first item: closed by aclosing
            if i == 0:
                break
    return 0


@ar.subagent("top")
async def top(k: int) -> int:
    """Level 1: two middles at once, and a slow leaf cancelled on every seventh."""
    async with asyncio.TaskGroup() as group:
        first = group.create_task(middle(k))
        second = group.create_task(middle(k + 1))
        if k % 7 == 0:
            slow = group.create_task(leaf_slow())
            await asyncio.sleep(0.001)
            slow.cancel()
    return first.result() + second.result()


async def test_100_concurrent_subagents_three_deep_give_the_streams_tree(traced: Traced) -> None:
    """Generators, threads, errors, cancellations, abandons: the same tree, every span ended."""
    async with ar.Run(make_input(run_id="big")) as run:
        results = await asyncio.gather(*(top(k) for k in range(100)))
    events = list(run.events)
    assert_valid(events)
    assert 100 == len(results)
    spans = traced.spans()

    tree = subagent_tree(events)
    assert 100 + 200 + 200 + 15 <= len(tree)  # top, middle, leaf (+ slow leaves)
    assert tree == span_tree(spans, "big")
    check_leaves(events, spans)
    traced.check_closed()

    errors = {e.subagent_run_id: e.code for e in events if isinstance(e, ev.SubagentErrorEvent)}
    assert {"ValueError", "cancelled"} == set(errors.values())
    for sid, code in errors.items():
        assert StatusCode.ERROR == status_of(spans, sid)
        assert code == attributes_of(spans, sid)["error.type"]
        assert "error" == attributes_of(spans, sid)["ambient_runs.outcome"]
    finished = [e.subagent_run_id for e in events if isinstance(e, ev.SubagentFinishedEvent)]
    assert all(StatusCode.UNSET == status_of(spans, sid) for sid in finished)
    # A cancelled slow leaf's tool call never got a result: its span ended with the leaf.
    waits = [s for s in spans if s.name == "execute_tool wait"]
    assert 15 == len(waits)
    assert all(False is (s.attributes or {})["ambient_runs.tool_call.result"] for s in waits)


# --------------------------------------------------------------------------- focused


async def test_names_and_attributes_follow_the_genai_conventions(traced: Traced) -> None:
    """invoke_agent NAME / execute_tool NAME / step NAME, with gen_ai.* attributes."""

    @ar.subagent("researcher", description="looks things up")
    async def research() -> dict[str, int]:
        with ar.step("plan"), ar.tool_call("search", id="call-1") as call:
            call.result("found")
        return {"sources": 3}

    async with ar.Run(make_input("thread-9", "run-9", parent_run_id="run-8")):
        await research()

    spans = {s.name: s for s in traced.spans()}
    assert {"invoke_agent", "invoke_agent researcher", "step plan", "execute_tool search"} == set(
        spans
    )
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": "thread-9",
        "ambient_runs.thread_id": "thread-9",
        "ambient_runs.run_id": "run-9",
        "ambient_runs.parent_run_id": "run-8",
        "ambient_runs.outcome": "success",
    } == dict(spans["invoke_agent"].attributes or {})
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "researcher",
        "gen_ai.agent.id": "run-9-sub-1",
        "gen_ai.agent.description": "looks things up",
        "gen_ai.conversation.id": "thread-9",
        "ambient_runs.subagent_run_id": "run-9-sub-1",
        "ambient_runs.outcome": "success",
    } == dict(spans["invoke_agent researcher"].attributes or {})
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.type": "function",
        "ambient_runs.tool_call.result": True,
    } == dict(spans["execute_tool search"].attributes or {})
    assert {"ambient_runs.step.name": "plan"} == dict(spans["step plan"].attributes or {})
    assert all(s.kind == trace.SpanKind.INTERNAL for s in spans.values())
    traced.check_closed()


async def test_interrupts_suspend_the_invocation_and_the_run(traced: Traced) -> None:
    """A suspended invocation names its interrupts; the run's outcome is interrupt."""

    @ar.subagent("approver")
    async def approve() -> None:
        raise ar.Interrupted(ev.Interrupt(id="int-1", reason="approval"))

    @ar.subagent("boss")
    async def boss() -> None:
        await approve()

    async with ar.Run(make_input(run_id="r")) as run:
        await boss()

    assert_valid(list(run.events))
    spans = traced.spans()
    approver = attributes_of(spans, "r-sub-2")
    assert "suspended" == approver["ambient_runs.outcome"]
    assert ("int-1",) == approver["ambient_runs.interrupt_ids"]
    assert StatusCode.UNSET == status_of(spans, "r-sub-2")
    assert "suspended" == attributes_of(spans, "r-sub-1")["ambient_runs.outcome"]
    run_attributes = run_span_of(spans, "r").attributes or {}
    assert "interrupt" == run_attributes["ambient_runs.outcome"]
    assert ("int-1",) == run_attributes["ambient_runs.interrupt_ids"]
    assert {"r-sub-1": None, "r-sub-2": "r-sub-1"} == span_tree(spans, "r")
    traced.check_closed()


async def test_a_resumed_invocation_keeps_its_agent_id_across_runs(traced: Traced) -> None:
    """Suspended in one run, continued under the same id in the next: one gen_ai.agent.id."""
    async with ar.Run(make_input(run_id="r1")):
        with ar.subagent("approver") as approver:
            sid = approver.id
            assert sid is not None
            raise ar.Interrupted(ev.Interrupt(id="int-1", reason="approval"))
    resume = (ev.ResumeEntry(interrupt_id="int-1", status="resolved"),)
    async with ar.Run(make_input(run_id="r2", resume=resume)) as run:
        with ar.subagent("approver", id=sid):
            ar.say("approved, going on")
    assert_valid(list(run.events))

    agents = [s for s in traced.spans() if s.name == "invoke_agent approver"]
    assert 2 == len(agents)
    assert {sid} == {(s.attributes or {})["gen_ai.agent.id"] for s in agents}
    assert ["suspended", "success"] == [
        (s.attributes or {})["ambient_runs.outcome"] for s in agents
    ]
    assert agents[0].context.trace_id != agents[1].context.trace_id  # type: ignore[union-attr]
    traced.check_closed()


async def test_a_failed_run_is_an_error_span_and_closes_what_was_open(traced: Traced) -> None:
    """RUN_ERROR: ERROR status with message and code; the open invocation ends first."""

    class Broken(Exception):
        code = "db_down"

    async def failing() -> None:
        async with ar.Run(make_input(run_id="r")):
            with ar.subagent("worker"):
                raise Broken("the database is down")

    with pytest.raises(Broken):
        await failing()

    spans = traced.spans()
    run_span = run_span_of(spans, "r")
    assert StatusCode.ERROR == run_span.status.status_code
    assert "db_down" == (run_span.attributes or {})["error.type"]
    assert StatusCode.ERROR == status_of(spans, "r-sub-1")
    assert [s.name for s in spans][-1] == "invoke_agent"  # the run span ends last
    traced.check_closed()


async def test_a_cancelled_run_ends_its_span_without_error(traced: Traced) -> None:
    """A run cancelled (RUN_FINISHED, cancelled outcome) is not a failure in AG-UI."""

    async def agent() -> None:
        async with ar.Run(make_input(run_id="r")):
            with ar.subagent("sleeper"):
                await asyncio.sleep(30)

    task = asyncio.create_task(agent())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    spans = traced.spans()
    run_span = run_span_of(spans, "r")
    assert StatusCode.UNSET == run_span.status.status_code
    assert "cancelled" == (run_span.attributes or {})["ambient_runs.outcome"]
    assert "cancelled" == attributes_of(spans, "r-sub-1")["error.type"]
    traced.check_closed()


def test_a_sync_run_and_an_abandoned_generator(traced: Traced) -> None:
    """A sync run; a generator subagent dropped half-way ends when the library closes it."""
    with ar.Run(make_input(run_id="r")) as run:
        items = leaf_generator(3)
        assert 0 == next(items)
        del items
        gc.collect()
        # Closed by the collector: the leaf's span ends then, not at the run's end.
        assert {"execute_tool count", "invoke_agent leaf-gen"} == {
            traced.ledger.started[sid] for sid in traced.ledger.ended
        }
        with ar.subagent("after"):
            pass

    events = list(run.events)
    spans = traced.spans()
    assert subagent_tree(events) == span_tree(spans, "r")
    traced.check_closed()


def test_a_scope_entered_in_one_thread_and_left_in_another(traced: Traced) -> None:
    """The orphaned exit is recorded once in the stream; its span ends there, once."""
    with ar.Run(make_input(run_id="r")) as run:
        scope = ar.subagent("hopper")
        scope.__enter__()
        ar.say("in the first thread")
        worker = threading.Thread(target=scope.__exit__, args=(None, None, None))
        worker.start()
        worker.join()
        # The hopper's frame is still set here (left in another Context), but its span
        # ended: the ambient span falls back to the run's, never a dead one.
        assert otel.run_trace_ids(run) == otel.current_trace_ids()
        ar.say("the parent again")

    events = list(run.events)
    assert_valid(events)
    spans = traced.spans()
    assert {"r-sub-1": None} == span_tree(spans, "r")
    traced.check_closed()


async def test_the_run_span_continues_the_current_otel_span(traced: Traced) -> None:
    """Inside a user's span, the run span is its child (same trace)."""
    tracer = traced.provider.get_tracer("user")
    with tracer.start_as_current_span("request") as outer:
        async with ar.Run(make_input(run_id="r")):
            pass
    run_span = run_span_of(traced.spans(), "r")
    assert run_span.parent is not None
    assert outer.get_span_context().span_id == run_span.parent.span_id
    assert outer.get_span_context().trace_id == run_span.context.trace_id  # type: ignore[union-attr]


async def test_the_run_span_continues_the_requests_traceparent(traced: Traced) -> None:
    """With no current span, the traceparent header of run.request is the parent."""
    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    request = Request(
        method="POST",
        path="/agent",
        headers=Headers([(b"TraceParent", f"00-{trace_id}-{span_id}-01".encode())]),
    )
    async with ar.Run(make_input(run_id="r"), request=request) as run:
        pass
    run_span = run_span_of(traced.spans(), "r")
    assert run_span.parent is not None
    assert run_span.parent.is_remote
    assert int(span_id, 16) == run_span.parent.span_id
    assert int(trace_id, 16) == run_span.context.trace_id  # type: ignore[union-attr]
    stamp = run.events[0].metadata
    assert stamp is not None
    assert trace_id == stamp["ambient_runs"]["trace_id"]


async def test_without_any_parent_the_run_span_is_a_root(traced: Traced) -> None:
    """No current span and no request: a root span, in a trace of its own."""
    async with ar.Run(make_input(run_id="a")):
        pass
    async with ar.Run(make_input(run_id="b")):
        pass
    a, b = run_span_of(traced.spans(), "a"), run_span_of(traced.spans(), "b")
    assert a.parent is None
    assert b.parent is None
    assert a.context.trace_id != b.context.trace_id  # type: ignore[union-attr]


async def test_correlation_ids_and_the_run_started_stamp(traced: Traced) -> None:
    """current_trace_ids names the ambient scope's span; RUN_STARTED carries the run's."""
    seen: dict[str, Any] = {}

    @ar.subagent("worker")
    async def work() -> None:
        seen["worker"] = otel.current_trace_ids()
        with ar.step("inner"):
            seen["step"] = otel.current_trace_ids()

    assert otel.current_trace_ids() is None
    async with ar.Run(make_input(run_id="r")) as run:
        seen["run"] = otel.current_trace_ids()
        await work()
        assert seen["run"] == otel.run_trace_ids(run)

    spans = {s.name: s for s in traced.spans()}
    for key, name in (
        ("run", "invoke_agent"),
        ("worker", "invoke_agent worker"),
        ("step", "step inner"),
    ):
        ctx = spans[name].context
        assert ctx is not None
        assert trace.format_span_id(ctx.span_id) == seen[key].span_id
        assert trace.format_trace_id(ctx.trace_id) == seen[key].trace_id
    assert {
        "ambient_runs": {
            "trace_id": seen["run"].trace_id,
            "span_id": seen["run"].span_id,
            "traceparent": f"00-{seen['run'].trace_id}-{seen['run'].span_id}-01",
        }
    } == run.events[0].metadata
    assert_valid(list(run.events))


async def test_stamping_can_be_turned_off() -> None:
    """instrument(stamp_run_started=False) leaves RUN_STARTED as the library built it."""
    provider = TracerProvider()
    AmbientRunsInstrumentor().instrument(tracer_provider=provider, stamp_run_started=False)
    try:
        async with ar.Run(make_input(run_id="r")) as run:
            assert otel.run_trace_ids(run) is not None
    finally:
        AmbientRunsInstrumentor().uninstrument()
    assert run.events[0].metadata is None


async def test_the_stamp_leaves_the_fast_path_after_run_started(traced: Traced) -> None:
    """The stamping transformer removes itself once RUN_STARTED is through."""
    async with ar.Run(make_input()) as run:
        assert () == run.pipeline.transformers


async def test_no_span_is_ever_current_outside_use_scope_span(traced: Traced) -> None:
    """Scopes never touch OTel's context; use_scope_span sets it for its block only."""
    tracer = traced.provider.get_tracer("model-client")
    before = otel_context.get_current()

    @ar.subagent("writer")
    async def write() -> None:
        assert trace.get_current_span() is trace.INVALID_SPAN
        with otel.use_scope_span() as span:
            assert span is trace.get_current_span()
            with tracer.start_as_current_span("chat model"):
                await asyncio.sleep(0)
        assert trace.get_current_span() is trace.INVALID_SPAN

    async with ar.Run(make_input(run_id="r")):
        await write()
        assert trace.get_current_span() is trace.INVALID_SPAN
    assert before == otel_context.get_current()

    spans = {s.name: s for s in traced.spans()}
    chat, writer = spans["chat model"], spans["invoke_agent writer"]
    assert chat.parent is not None
    assert writer.context is not None
    assert writer.context.span_id == chat.parent.span_id
    traced.check_closed()


async def test_usage_on_the_terminal_event_lands_on_the_run_span(traced: Traced) -> None:
    """RUN_FINISHED.usage becomes the gen_ai.usage.* attributes, summed across models."""

    def with_usage(event: ev.BaseEvent) -> ev.BaseEvent:
        if isinstance(event, ev.RunFinishedEvent):
            import attrs

            return attrs.evolve(
                event,
                usage=(
                    ev.TokenUsage(provider="openai", model="a", input_tokens=10, output_tokens=2),
                    ev.TokenUsage(provider="openai", model="b", input_tokens=5, total_tokens=9),
                ),
            )
        return event

    async with ar.Run(make_input(run_id="r"), transformers=[with_usage]):
        pass
    attributes = run_span_of(traced.spans(), "r").attributes or {}
    assert 15 == attributes["gen_ai.usage.input_tokens"]
    assert 2 == attributes["gen_ai.usage.output_tokens"]
    assert 9 == attributes["ambient_runs.usage.total_tokens"]
    assert "openai" == attributes["gen_ai.provider.name"]
    assert "gen_ai.response.model" not in attributes  # two models: no one value


def test_usage_attributes_maps_every_count() -> None:
    """The one mapping from TokenUsage to attributes, ready for per-scope usage."""
    assert {
        "gen_ai.usage.input_tokens": 3,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.usage.reasoning.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 1,
        "gen_ai.usage.cache_creation.input_tokens": 2,
        "ambient_runs.usage.total_tokens": 7,
        "gen_ai.provider.name": "p",
        "gen_ai.response.model": "m",
    } == otel.usage_attributes(
        [
            ev.TokenUsage(
                provider="p",
                model="m",
                input_tokens=3,
                output_tokens=4,
                total_tokens=7,
                reasoning_tokens=5,
                cached_input_tokens=1,
                cache_write_input_tokens=2,
            )
        ]
    )
    assert {} == otel.usage_attributes([])


async def test_run_attributes_name_the_run_span(traced: Traced) -> None:
    """run_attributes adds per-run attributes; gen_ai.agent.name names the span."""
    AmbientRunsInstrumentor().uninstrument()
    AmbientRunsInstrumentor().instrument(
        tracer_provider=traced.provider,
        run_attributes=lambda run: {"gen_ai.agent.name": "travel", "tenant": run.thread_id},
    )
    async with ar.Run(make_input("acme", "r")):
        pass
    (span,) = traced.spans()
    assert "invoke_agent travel" == span.name
    assert "acme" == (span.attributes or {})["tenant"]


async def test_a_failing_run_attributes_still_traces_the_run(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken run_attributes callback is logged; the run span and its tree are intact."""

    def broken(run: ar.Run) -> dict[str, str]:
        raise KeyError("tenant")

    AmbientRunsInstrumentor().uninstrument()
    AmbientRunsInstrumentor().instrument(tracer_provider=traced.provider, run_attributes=broken)
    with caplog.at_level(logging.WARNING, logger="ambient_runs"):
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("worker"):
                pass
    assert ["run_attributes failed; the run span has none of its own"] == [
        r.getMessage() for r in caplog.records
    ]
    assert {"r-sub-1": None} == span_tree(traced.spans(), "r")
    assert run.events[0].metadata is not None
    traced.check_closed()


def test_a_run_that_never_finishes_ends_its_spans_when_collected(traced: Traced) -> None:
    """A run dropped without a terminal event: its spans end, as errors, at collection."""
    run = ar.Run(make_input(run_id="r"))
    run.__enter__()
    ar.subagent("stuck").start()
    run.pipeline.finished = True  # as when the run could not send its terminal event
    from ambient_runs import _scopes

    _scopes.leave(run._token, run._root, "run")
    del run
    gc.collect()
    spans = traced.spans()
    assert {"invoke_agent", "invoke_agent stuck"} == {s.name for s in spans}
    assert StatusCode.ERROR == run_span_of(spans, "r").status.status_code
    traced.check_closed()


# --------------------------------------------------------------------------- the instrumentor


def test_the_instrumentor_is_a_singleton_and_idempotent(caplog: pytest.LogCaptureFixture) -> None:
    """One instance; a repeated instrument/uninstrument warns and does nothing."""
    instrumentor = AmbientRunsInstrumentor()
    assert instrumentor is AmbientRunsInstrumentor()
    assert not instrumentor.is_instrumented_by_opentelemetry
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with caplog.at_level(logging.WARNING, logger="ambient_runs"):
        instrumentor.instrument(tracer_provider=provider)
        instrumentor.instrument(tracer_provider=provider)
        assert instrumentor.is_instrumented_by_opentelemetry
        with ar.Run(make_input(run_id="one")):
            pass
        instrumentor.uninstrument()
        instrumentor.uninstrument()
    assert not instrumentor.is_instrumented_by_opentelemetry
    assert [
        "Attempting to instrument while already instrumented",
        "Attempting to uninstrument while already uninstrumented",
    ] == [r.getMessage() for r in caplog.records]
    with ar.Run(make_input(run_id="two")):
        pass
    assert 1 == len(exporter.get_finished_spans())  # one span: the run made while instrumented
    assert ("ambient-runs",) == tuple(instrumentor.instrumentation_dependencies())


def test_a_run_in_flight_at_uninstrument_keeps_its_spans(traced: Traced) -> None:
    """Uninstrumenting stops new runs only: a run in flight still ends its spans."""
    with ar.Run(make_input(run_id="r")):
        with ar.subagent("worker"):
            AmbientRunsInstrumentor().uninstrument()
        AmbientRunsInstrumentor().instrument(tracer_provider=traced.provider)
    assert 2 == len(traced.spans())
    traced.check_closed()


async def test_instrumentation_never_raises_into_the_run(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing span bookkeeping is logged at DEBUG; the run goes on unchanged."""

    def broken(self: Any, event: Any) -> None:
        raise RuntimeError("exporter on fire")

    monkeypatch.setitem(otel._RunTrace.HANDLERS, ev.SubagentStartedEvent, broken)
    async with ar.Run(make_input(run_id="r")) as run:
        with ar.subagent("worker"):
            ar.say("fine")
    assert_valid(list(run.events))


def test_import_ambient_runs_pulls_in_no_opentelemetry() -> None:
    """The package and every top-level module import without opentelemetry."""
    code = (
        "import sys, pkgutil, importlib, ambient_runs\n"
        "for m in pkgutil.iter_modules(ambient_runs.__path__):\n"
        "    if m.name != '__main__': importlib.import_module('ambient_runs.' + m.name)\n"
        "print(sorted(k for k in sys.modules if k.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == out.stdout.strip()


def test_the_adapter_without_opentelemetry_names_the_extra() -> None:
    """Importing the adapter with no opentelemetry raises ImportError naming the extra."""
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "try:\n"
        "    import ambient_runs.adapters.otel\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'ambient-runs[otel]'" in out.stdout
