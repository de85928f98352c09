"""
OpenTelemetry spans for runs, subagent invocations, steps and tool calls.

``pip install 'ambient-runs[otel]'`` (``opentelemetry-api`` only), then once at start-up::

    from ambient_runs.adapters.otel import AmbientRunsInstrumentor

    AmbientRunsInstrumentor().instrument()  # tracer_provider=... or the global one

Every `Run` made from then on, in any thread, gets spans **derived from the events it
emits** (a tap and, for the correlation stamp, a transformer; see `Run.add_tap`), so there
is one implementation whatever the callable kind (sync, async, generator, thread-hopping)
and the trace agrees with the AG-UI stream by construction:

=====================  ===============================  ====================================
span                   from … to                         parent
=====================  ===============================  ====================================
``invoke_agent``       ``RUN_STARTED`` … terminal event  the current OTel span when the run
  (the run)                                              starts, else the request's
                                                         ``traceparent`` (``run.request``,
                                                         via `AgentApp`), else none (a root)
``invoke_agent NAME``  ``SUBAGENT_STARTED`` …            the span of ``parentSubagentRunId``,
  (an invocation)      ``SUBAGENT_FINISHED|ERROR``       else the run's
``step NAME``          ``STEP_STARTED`` … ``FINISHED``   the invocation owning it (its
                                                         ``subagentRunId``), else the run's
``execute_tool NAME``  ``TOOL_CALL_START`` …             likewise
                       ``TOOL_CALL_RESULT``, or the end
                       of the scope owning it
=====================  ===============================  ====================================

Attributes follow the OpenTelemetry GenAI conventions for agents where they fit:
``gen_ai.operation.name`` (``invoke_agent``, ``execute_tool``), ``gen_ai.agent.name``,
``gen_ai.agent.description``, ``gen_ai.agent.id`` (the ``subagentRunId``: the one identity
the protocol gives an invocation, kept when a suspended invocation is resumed),
``gen_ai.conversation.id`` (the thread), ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and
``gen_ai.usage.*`` from ``RUN_FINISHED.usage`` / ``RUN_ERROR.usage``. The rest is under
``ambient_runs.*``: ``run_id``, ``thread_id``, ``parent_run_id``, ``subagent_run_id``,
``parent_subagent_run_id``, ``parent_tool_call_id``, ``parent_message_id``, ``step.name``,
``outcome`` (``success``, ``suspended``, ``interrupt``, ``cancelled``, ``error``),
``interrupt_ids``, ``exit`` and ``tool_call.result`` (whether a result was sent).

Statuses: ``SUBAGENT_ERROR`` and ``RUN_ERROR`` set ``ERROR`` with the event's message and
``error.type`` (its ``code``). That includes a cancelled invocation, which the protocol
reports as ``SUBAGENT_ERROR`` with code ``cancelled``: the span says what the wire says.
Everything else leaves the status unset, as instrumentation should (a run finished with a
``cancelled`` or ``interrupt`` outcome is not a failure in AG-UI).

Ending: a span ends when the event that closes its scope is delivered, which the library
emits at the moment it closes that scope, however it ends (returned, raised, cancelled,
abandoned generator, orphaned by a task that outlived it, closed by the run's end). A span
that somehow has no closing event (a run that could not send its terminal event) ends, with
an error status, when the `Run` is garbage collected. No span is ever made current, so none
can stay current after its scope or leak into an unrelated trace.

**Why the spans are not made current** (the decision): OpenTelemetry keeps the current
span in its own contextvar. Keeping it equal to the ambient scope would mean setting a
second contextvar at every scope entry and around every generator step, for every user
(the scope benchmark's hot path), and resetting it in exactly the places where
OpenTelemetry's own ``detach`` fails and logs an error: scopes left in another Context or
out of order, which this library handles on purpose. Instead, say where a model call
happens: ``with use_scope_span(): client.chat(...)`` makes the ambient scope's span (the
step's, else the invocation's, else the run's) current for that block, so a model client's
own instrumentation nests under it; `scope_span` returns the span itself.

Correlation: `current_trace_ids` (the ambient scope's) and `run_trace_ids` return the
trace and span ids as hex, and by default ``RUN_STARTED.metadata["ambient_runs"]`` carries
``trace_id``, ``span_id`` and ``traceparent`` of the run span, so a UI can link to the trace
(``instrument(stamp_run_started=False)`` to leave RUN_STARTED alone). The stamp is a
transformer the instrumentor adds to each run and removes once RUN_STARTED is through, so
later events take the run's fast path.

Token usage: `ambient_runs.usage(...)` reports go out as ``CUSTOM`` events named
``ambient_runs.usage``, attributed to the scope that made them; each one sets the
``gen_ai.usage.*`` attributes of its owner's open invocation span to the sum of that
invocation's own reports (a report of the parent agent, or of an invocation no longer
open, counts on the run span only). The run span takes the run's totals from the terminal
event's ``usage``, subagents included. The mapping from `TokenUsage` to attributes is
`usage_attributes`.

`AmbientRunsInstrumentor` follows the contrib convention (``BaseInstrumentor``'s behaviour,
without depending on ``opentelemetry-instrumentation``): one instance per process,
``instrument`` and ``uninstrument`` idempotent (a second call logs a warning and does
nothing), ``is_instrumented_by_opentelemetry``. Runs made before ``instrument`` get no
spans; runs in flight at ``uninstrument`` keep theirs until they end.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from ambient_runs.errors import needs_extra

with needs_extra(
    "ambient_runs.adapters.otel", extra="otel", needs="OpenTelemetry's API", name="opentelemetry"
):
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._usage import USAGE_EVENT
from ambient_runs._version import __version__
from ambient_runs._wire import wire_name

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

    from ambient_runs._run import Run

__all__ = (
    "AmbientRunsInstrumentor",
    "TraceIds",
    "current_trace_ids",
    "run_trace_ids",
    "scope_span",
    "usage_attributes",
    "use_scope_span",
)

_log = logging.getLogger("ambient_runs")

#: Every instrumented run's spans, for the correlation helpers (weak: a run's end frees it).
_TRACES: weakref.WeakKeyDictionary[Run, _RunTrace] = weakref.WeakKeyDictionary()

_INVOKE_AGENT = "invoke_agent"
_EXECUTE_TOOL = "execute_tool"

RunAttributes = Callable[["Run"], "Mapping[str, AttributeValue] | None"]
"""Extra attributes for a run's span, computed when it starts (e.g. the agent's name)."""


@attrs.frozen
class TraceIds:
    """
    A span's trace id and span id, as the lowercase hex W3C Trace Context uses.

    .. versionadded:: 0.1.0
    """

    #: 32 hex digits.
    trace_id: str
    #: 16 hex digits.
    span_id: str
    #: Whether the span was sampled (recorded and exported).
    sampled: bool

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` header naming this span as the parent."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"


def _ids_of(span: Span | None) -> TraceIds | None:
    if span is None:
        return None
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return TraceIds(
        trace_id=trace.format_trace_id(context.trace_id),
        span_id=trace.format_span_id(context.span_id),
        sampled=context.trace_flags.sampled,
    )


def usage_attributes(usage: Sequence[ev.TokenUsage]) -> dict[str, AttributeValue]:
    """
    Return the GenAI usage attributes for *usage* (one `TokenUsage` per provider and model).

    Counts are summed across entries (``gen_ai.usage.input_tokens``, ``output_tokens``,
    ``reasoning.output_tokens``, ``cache_read.input_tokens``,
    ``cache_creation.input_tokens``; a count no entry reports is left out);
    ``gen_ai.provider.name`` and ``gen_ai.response.model`` are set when every entry
    agrees on one. ``totalTokens`` has no GenAI attribute and goes to
    ``ambient_runs.usage.total_tokens``.

    .. versionadded:: 0.1.0
    """
    attributes: dict[str, AttributeValue] = {}
    for key, field in _USAGE_FIELDS:
        counts = [getattr(u, field) for u in usage if getattr(u, field) is not None]
        if counts:
            attributes[key] = sum(counts)
    for key, field in (("gen_ai.provider.name", "provider"), ("gen_ai.response.model", "model")):
        values = {getattr(u, field) for u in usage}
        if len(values) == 1 and None not in values:
            attributes[key] = values.pop()
    return attributes


_USAGE_FIELDS = (
    ("gen_ai.usage.input_tokens", "input_tokens"),
    ("gen_ai.usage.output_tokens", "output_tokens"),
    ("gen_ai.usage.reasoning.output_tokens", "reasoning_tokens"),
    ("gen_ai.usage.cache_read.input_tokens", "cached_input_tokens"),
    ("gen_ai.usage.cache_creation.input_tokens", "cache_write_input_tokens"),
    ("ambient_runs.usage.total_tokens", "total_tokens"),
)


def _end(span: Span, attributes: Mapping[str, AttributeValue] | None = None) -> None:
    if attributes:
        span.set_attributes(attributes)
    span.end()


def _fail(span: Span, message: str | None, code: str | None) -> None:
    span.set_attribute("error.type", code or "_OTHER")
    span.set_status(Status(StatusCode.ERROR, message or None))


class _RunTrace:
    """
    The spans of one run, opened and closed by the run's own events (a tap).

    Called under the run's lock, so one run's events arrive one at a time, in order. Holds
    no reference to the run (a weak one for the request), so a dropped run is collected and
    its finalizer can end what was left open.
    """

    __slots__ = (
        "__weakref__",
        "agents",
        "attributes",
        "contexts",
        "finalizer",
        "run",
        "span",
        "steps",
        "thread_id",
        "tools",
        "tracer",
        "usages",
    )

    HANDLERS: ClassVar[dict[type[ev.BaseEvent], Callable[[_RunTrace, Any], None]]]

    def __init__(self, tracer: trace.Tracer, run: Run, attributes: RunAttributes | None) -> None:
        self.tracer = tracer
        self.run: Callable[[], Run | None] = weakref.ref(run)
        self.attributes = attributes
        self.span: Span | None = None
        #: Open invocations: subagentRunId -> span.
        self.agents: dict[str, Span] = {}
        #: Open steps: (owner, step name) -> spans (a name may be open twice in parallel).
        self.steps: dict[tuple[str | None, str], list[Span]] = {}
        #: Open tool calls: toolCallId -> (owner, span).
        self.tools: dict[str, tuple[str | None, Span]] = {}
        #: The context a child of an owner's span starts in, made once per owner (None: run).
        self.contexts: dict[str | None, Any] = {}
        self.thread_id: str | None = None
        self.finalizer: Any = None
        #: The usage reports of each open invocation: subagentRunId -> reports.
        self.usages: dict[str, list[ev.TokenUsage]] = {}

    # ------------------------------------------------------------------ the run span

    def start_run(self, event: ev.RunStartedEvent) -> None:
        run = self.run()
        self.thread_id = event.thread_id
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": _INVOKE_AGENT,
            "gen_ai.conversation.id": event.thread_id,
            "ambient_runs.thread_id": event.thread_id,
            "ambient_runs.run_id": event.run_id,
        }
        if event.parent_run_id is not None:
            attributes["ambient_runs.parent_run_id"] = event.parent_run_id
        if self.attributes is not None and run is not None:
            try:
                attributes.update(self.attributes(run) or {})
            except Exception:
                _log.warning(
                    "run_attributes failed; the run span has none of its own", exc_info=True
                )
        name = attributes.get("gen_ai.agent.name")
        self.span = self.tracer.start_span(
            f"{_INVOKE_AGENT} {name}" if isinstance(name, str) and name else _INVOKE_AGENT,
            context=_parent_context(run),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def stamp(self, event: ev.BaseEvent) -> ev.BaseEvent:
        """The transformer: start the run span at RUN_STARTED and put its ids in the metadata."""
        if type(event) is not ev.RunStartedEvent:
            return event
        try:
            run = self.run()
            if run is not None:
                run.remove_transformer(self.stamp)  # once is enough: later events go fast
            if self.span is None:
                self.start_run(event)
            ids = _ids_of(self.span)
            if ids is None:
                return event
            metadata = dict(event.metadata or {})
            ours = metadata.get("ambient_runs")
            metadata["ambient_runs"] = {
                **(ours if isinstance(ours, dict) else {}),
                "trace_id": ids.trace_id,
                "span_id": ids.span_id,
                "traceparent": ids.traceparent,
            }
            return attrs.evolve(event, metadata=metadata)
        except Exception:
            _log.debug("the OpenTelemetry stamp of RUN_STARTED failed", exc_info=True)
            return event

    def on_run_started(self, event: ev.RunStartedEvent) -> None:
        if self.span is None:
            self.start_run(event)

    def finish_run(self, attributes: dict[str, AttributeValue], error: Any = None) -> None:
        self.close_all()
        span, self.span = self.span, None
        if span is None:
            return
        if error is not None:
            _fail(span, error.message, error.code)
        _end(span, attributes)
        if self.finalizer is not None:
            self.finalizer.detach()

    def on_run_finished(self, event: ev.RunFinishedEvent) -> None:
        outcome = event.outcome
        attributes: dict[str, AttributeValue] = dict(usage_attributes(event.usage or ()))
        if isinstance(outcome, ev.RunFinishedInterruptOutcome):
            attributes["ambient_runs.outcome"] = "interrupt"
            attributes["ambient_runs.interrupt_ids"] = [i.id for i in outcome.interrupts]
        elif isinstance(outcome, ev.RunFinishedCancelledOutcome):
            attributes["ambient_runs.outcome"] = "cancelled"
        else:
            attributes["ambient_runs.outcome"] = "success"
        self.finish_run(attributes)

    def on_run_error(self, event: ev.RunErrorEvent) -> None:
        attributes: dict[str, AttributeValue] = dict(usage_attributes(event.usage or ()))
        attributes["ambient_runs.outcome"] = "error"
        self.finish_run(attributes, error=event)

    # ------------------------------------------------------------------ invocations

    def parent_of(self, owner: str | None) -> Any:
        """The OTel context for a child of *owner*'s span (the run's when it has none open)."""
        contexts = self.contexts
        found = contexts.get(owner)
        if found is None:
            span = self.agents.get(owner) if owner is not None else None
            if span is None:
                owner, span = None, self.span
                found = contexts.get(None)
            if found is None:
                found = (
                    trace.set_span_in_context(span) if span is not None else otel_context.Context()
                )
                contexts[owner] = found
        return found

    def on_subagent_started(self, event: ev.SubagentStartedEvent) -> None:
        sid, name = event.subagent_run_id, event.name
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": _INVOKE_AGENT,
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": sid,
            "ambient_runs.subagent_run_id": sid,
        }
        if self.thread_id is not None:
            attributes["gen_ai.conversation.id"] = self.thread_id
        for key, value in (
            ("gen_ai.agent.description", event.description),
            ("ambient_runs.parent_subagent_run_id", event.parent_subagent_run_id),
            ("ambient_runs.parent_tool_call_id", event.parent_tool_call_id),
            ("ambient_runs.parent_message_id", event.parent_message_id),
        ):
            if value is not None:
                attributes[key] = value
        self.agents[sid] = self.tracer.start_span(
            f"{_INVOKE_AGENT} {name}",
            context=self.parent_of(event.parent_subagent_run_id),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def close_owned(self, owner: str) -> None:
        """End what *owner* left open: its tool calls without a result, any step."""
        self.contexts.pop(owner, None)
        for call_id in [c for c, (o, _) in self.tools.items() if o == owner]:
            _end(self.tools.pop(call_id)[1], {"ambient_runs.tool_call.result": False})
        for key in [k for k in self.steps if k[0] == owner]:
            for span in self.steps.pop(key):
                span.end()

    def _ended_agent(self, sid: str) -> Span | None:
        """Close what subagent *sid* left open and forget it; its span, if it has one."""
        self.close_owned(sid)
        self.usages.pop(sid, None)
        return self.agents.pop(sid, None)

    def on_subagent_finished(self, event: ev.SubagentFinishedEvent) -> None:
        span = self._ended_agent(event.subagent_run_id)
        if span is None:
            return
        attributes: dict[str, AttributeValue] = {}
        outcome = event.outcome
        if isinstance(outcome, ev.SubagentFinishedSuspendedOutcome):
            attributes["ambient_runs.outcome"] = "suspended"
            attributes["ambient_runs.interrupt_ids"] = list(outcome.interrupt_ids or ())
        else:
            attributes["ambient_runs.outcome"] = "success"
        ours = (event.metadata or {}).get("ambient_runs")
        if isinstance(ours, dict) and isinstance(ours.get("exit"), str):
            attributes["ambient_runs.exit"] = ours["exit"]
        _end(span, attributes)

    def on_subagent_error(self, event: ev.SubagentErrorEvent) -> None:
        span = self._ended_agent(event.subagent_run_id)
        if span is None:
            return
        _fail(span, event.message, event.code)
        _end(span, {"ambient_runs.outcome": "error"})

    # ------------------------------------------------------------------ steps, tool calls

    def on_step_started(self, event: ev.StepStartedEvent) -> None:
        owner, name = event.subagent_run_id, event.step_name
        span = self.tracer.start_span(
            f"step {name}",
            context=self.parent_of(owner),
            kind=SpanKind.INTERNAL,
            attributes={"ambient_runs.step.name": name},
        )
        self.steps.setdefault((owner, name), []).append(span)

    def on_step_finished(self, event: ev.StepFinishedEvent) -> None:
        key = (event.subagent_run_id, event.step_name)
        spans = self.steps.get(key)
        if spans:
            span = spans.pop()
            if not spans:
                del self.steps[key]
            span.end()

    def on_tool_call_start(self, event: ev.ToolCallStartEvent) -> None:
        owner, name = event.subagent_run_id, event.tool_call_name
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": _EXECUTE_TOOL,
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": event.tool_call_id,
            "gen_ai.tool.type": "function",
        }
        if event.parent_message_id is not None:
            attributes["ambient_runs.parent_message_id"] = event.parent_message_id
        span = self.tracer.start_span(
            f"{_EXECUTE_TOOL} {name}",
            context=self.parent_of(owner),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        self.tools[event.tool_call_id] = (owner, span)

    def on_tool_call_result(self, event: ev.ToolCallResultEvent) -> None:
        found = self.tools.pop(event.tool_call_id, None)
        if found is not None:
            _end(found[1], {"ambient_runs.tool_call.result": True})

    def on_custom(self, event: ev.CustomEvent) -> None:
        if event.name != USAGE_EVENT or not isinstance(event.value, dict):
            return
        owner = event.subagent_run_id
        span = self.agents.get(owner) if owner is not None else None
        if span is None or owner is None:
            return  # the run's own: on the run span, through the terminal event's totals
        value = event.value
        report = ev.TokenUsage(**{name: value.get(wire_name(name)) for name in _REPORT_FIELDS})
        reports = self.usages.setdefault(owner, [])
        reports.append(report)
        span.set_attributes(usage_attributes(reports))

    # ------------------------------------------------------------------ the tap

    def on_event(self, event: ev.BaseEvent) -> None:
        """The run's tap: every delivered event, in order. Never raises into the run."""
        handler = self.HANDLERS.get(type(event))
        if handler is not None:
            try:
                handler(self, event)
            except Exception:
                _log.debug("OpenTelemetry span bookkeeping failed", exc_info=True)

    def close_all(self) -> None:
        """End every span still open but the run's (innermost first)."""
        for _, span in reversed(list(self.tools.values())):
            _end(span, {"ambient_runs.tool_call.result": False})
        self.tools.clear()
        for spans in reversed(list(self.steps.values())):
            for span in reversed(spans):
                span.end()
        self.steps.clear()
        for span in reversed(list(self.agents.values())):
            span.end()
        self.agents.clear()
        self.usages.clear()

    def innermost(self, owner: str | None, step: str | None) -> Span | None:
        """The span of a frame's scope: its step's, else its owner's, else the run's."""
        if step is not None:
            spans = self.steps.get((owner, step))
            with contextlib.suppress(IndexError, TypeError):  # it may end meanwhile, elsewhere
                return spans[-1]  # type: ignore[index]
        if owner is not None:
            span = self.agents.get(owner)
            if span is not None:
                return span
        return self.span


_RunTrace.HANDLERS = {
    ev.RunStartedEvent: _RunTrace.on_run_started,
    ev.RunFinishedEvent: _RunTrace.on_run_finished,
    ev.RunErrorEvent: _RunTrace.on_run_error,
    ev.SubagentStartedEvent: _RunTrace.on_subagent_started,
    ev.SubagentFinishedEvent: _RunTrace.on_subagent_finished,
    ev.SubagentErrorEvent: _RunTrace.on_subagent_error,
    ev.StepStartedEvent: _RunTrace.on_step_started,
    ev.StepFinishedEvent: _RunTrace.on_step_finished,
    ev.ToolCallStartEvent: _RunTrace.on_tool_call_start,
    ev.ToolCallResultEvent: _RunTrace.on_tool_call_result,
    ev.CustomEvent: _RunTrace.on_custom,
}

_REPORT_FIELDS = tuple(a.name for a in attrs.fields(ev.TokenUsage))


def _abandon(trace_: _RunTrace) -> None:
    """The run was collected with spans still open (it never sent a terminal event)."""
    try:
        trace_.close_all()
        span, trace_.span = trace_.span, None
        if span is not None:
            _fail(span, "the run ended without a terminal event", "incomplete")
            _end(span, {"ambient_runs.outcome": "error"})
    except Exception:  # pragma: no cover - a finalizer must never raise
        _log.debug("ending an abandoned run's spans failed", exc_info=True)


def _parent_context(run: Run | None) -> Any:
    """
    The context a run span starts in.

    The current OTel span, when there is one (a server span of an ASGI instrumentation, or
    the user's own span around the run); else the trace context in the request's headers
    (``run.request.headers``, through the global propagator: ``traceparent`` and
    ``tracestate`` by default); else an empty context, so the run span is a root.
    """
    current = otel_context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        return current
    request = getattr(run, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        extracted = propagate.extract(headers, context=otel_context.Context())
        if trace.get_current_span(extracted).get_span_context().is_valid:
            return extracted
    return otel_context.Context()


# --------------------------------------------------------------------------- correlation


def _trace_of_frame() -> tuple[_RunTrace | None, Any]:
    frame = _scopes.current()
    if frame is None:
        return None, None
    return _TRACES.get(frame.run), frame


def scope_span() -> Span:
    """
    Return the span of the ambient scope: the step's, else the invocation's, else the run's.

    `opentelemetry.trace.INVALID_SPAN` outside any run, or in a run that is not
    instrumented (made before `AmbientRunsInstrumentor.instrument`).

    .. versionadded:: 0.1.0
    """
    found, frame = _trace_of_frame()
    if found is None:
        return trace.INVALID_SPAN
    return found.innermost(frame.owner, frame.step_name) or trace.INVALID_SPAN


@contextlib.contextmanager
def use_scope_span() -> Iterator[Span]:
    """
    Make the ambient scope's span (see `scope_span`) OpenTelemetry's current span in the block.

    So a model client's own instrumentation, called inside, nests under the invocation::

        @ar.subagent("researcher")
        async def research(topic: str) -> str:
            with use_scope_span():
                return await client.chat(...)  # its span is a child of invoke_agent researcher

    The span is not ended on exit and exceptions are neither recorded nor used to set its
    status: the event stream decides both. Like any ``with`` block, do not keep it open
    across a ``yield``.

    .. versionadded:: 0.1.0
    """
    with trace.use_span(
        scope_span(), end_on_exit=False, record_exception=False, set_status_on_exception=False
    ) as span:
        yield span


def current_trace_ids() -> TraceIds | None:
    """
    Return the trace and span ids of the ambient scope's span (see `scope_span`).

    None outside any run, or in a run that is not instrumented.

    .. versionadded:: 0.1.0
    """
    return _ids_of(scope_span())


def run_trace_ids(run: Run) -> TraceIds | None:
    """
    Return the trace and span ids of *run*'s span (None before it starts or if not instrumented).

    .. versionadded:: 0.1.0
    """
    found = _TRACES.get(run)
    return None if found is None else _ids_of(found.span)


# --------------------------------------------------------------------------- instrumentor


class AmbientRunsInstrumentor:
    """
    Trace every `Run` of the process with OpenTelemetry (see the module docstring).

    Follows the OpenTelemetry contrib instrumentors' convention: a singleton whose
    `instrument` and `uninstrument` are idempotent (a repeated call logs a warning and does
    nothing). Depends on ``opentelemetry-api`` only.

    .. versionadded:: 0.1.0
    """

    _instance: ClassVar[AmbientRunsInstrumentor | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _is_instrumented_by_opentelemetry: bool
    _hook: Callable[[Run], None] | None

    def __new__(cls) -> AmbientRunsInstrumentor:
        with cls._lock:
            if cls._instance is None:
                instance = super().__new__(cls)
                instance._is_instrumented_by_opentelemetry = False
                instance._hook = None
                cls._instance = instance
            return cls._instance

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        """Whether `instrument` is in effect."""
        return self._is_instrumented_by_opentelemetry

    def instrumentation_dependencies(self) -> Collection[str]:
        """The instrumented library, as a requirement (the contrib instrumentors' API)."""
        return ("ambient-runs",)

    def instrument(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        stamp_run_started: bool = True,
        run_attributes: RunAttributes | None = None,
        skip_dep_check: bool = False,
        **ignored: Any,
    ) -> None:
        """
        Trace every `Run` made from now on, in any thread.

        Args:
            tracer_provider: Where the spans go; the global provider by default.
            stamp_run_started: Put the run span's ids into ``RUN_STARTED.metadata``
                (``{"ambient_runs": {"trace_id", "span_id", "traceparent"}}``).
            run_attributes: Called with each run as it starts; the attributes it returns
                are added to the run span (``gen_ai.agent.name`` also names it).
            skip_dep_check: Accepted for the contrib API; there is nothing to check.
            ignored: Other contrib options (``meter_provider``, …): no effect.
        """
        with self._lock:
            if self._is_instrumented_by_opentelemetry:
                _log.warning("Attempting to instrument while already instrumented")
                return
            tracer = trace.get_tracer("ambient_runs", __version__, tracer_provider=tracer_provider)

            def hook(run: Run) -> None:
                try:
                    found = _RunTrace(tracer, run, run_attributes)
                    found.finalizer = weakref.finalize(run, _abandon, found)
                    found.finalizer.atexit = False
                    _TRACES[run] = found
                    run.add_tap(found.on_event)
                    if stamp_run_started:
                        run.add_transformer(found.stamp)
                except Exception:
                    _log.debug("instrumenting a run with OpenTelemetry failed", exc_info=True)

            self._hook = hook
            _scopes.add_run_hook(hook)
            self._is_instrumented_by_opentelemetry = True

    def uninstrument(self, **ignored: Any) -> None:
        """Stop tracing new runs (runs in flight keep their spans until they end)."""
        with self._lock:
            if not self._is_instrumented_by_opentelemetry:
                _log.warning("Attempting to uninstrument while already uninstrumented")
                return
            if self._hook is not None:
                _scopes.remove_run_hook(self._hook)
            self._hook = None
            self._is_instrumented_by_opentelemetry = False
