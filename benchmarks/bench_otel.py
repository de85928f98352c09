"""
OpenTelemetry instrumentation cost: per subagent call and per event.

One ``TracerProvider`` with no span processor (spans are created, sampled and
ended, not exported: the instrumentation's own cost, not an exporter's), one
event loop. Per **subagent call**, each candidate awaits a ``@subagent("worker")``
coroutine that says one short message (five verified events per call) *n_calls*
times inside a run:

- ``plain``: the run uninstrumented;
- ``instrumented``: the run made under `AmbientRunsInstrumentor` (an
  ``invoke_agent worker`` span per call, derived from the events);
- ``hand_written``: the run uninstrumented, each call wrapped by hand in
  ``tracer.start_as_current_span("invoke_agent worker")`` (what a user would
  write instead, without the attributes, outcomes or error statuses);
- ``hand_attributes``: the same with the attributes the instrumentor sets (five
  at the start, the outcome at the end): the SDK validates each attribute, and
  that is most of the difference between the two above.

Per **event**, each candidate writes *n_events* ``TEXT_MESSAGE_CONTENT`` deltas
into one open message, ``plain`` against ``instrumented`` (events that open or
close no span: the tap's lookup is the whole cost).

Reported, no target: the ratios, and the added cost per call and per event
(``instrumented - plain``, per round) against the hand-written span's.
"""

from __future__ import annotations

import time
from typing import Any

import ambient_runs as ar
from benchmarks import INPUT, figure, interleave_async, ratios

TITLE = "OpenTelemetry instrumentation (per @subagent call, per event)"


async def _say() -> None:
    ar.say("ok")


def run(n_calls: int = 500, n_events: int = 20000, rounds: int = 40) -> dict[str, Any]:
    """Time *n_calls* calls and *n_events* events per batch, *rounds* interleaved rounds."""
    import asyncio

    return asyncio.run(_run(n_calls, n_events, rounds))


async def _run(n_calls: int, n_events: int, rounds: int) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider

    from ambient_runs.adapters.otel import AmbientRunsInstrumentor

    provider = TracerProvider()
    tracer = provider.get_tracer("bench")
    instrumentor = AmbientRunsInstrumentor()
    worker = ar.subagent("worker")(_say)
    delivered: dict[str, set[int]] = {}

    def make_run(instrumented: bool, out: list[Any]) -> ar.Run:
        if not instrumented:
            return ar.Run(INPUT, sink=out.append)
        instrumentor.instrument(tracer_provider=provider)
        try:  # the hook runs at construction: the run keeps its tap after uninstrument
            return ar.Run(INPUT, sink=out.append)
        finally:
            instrumentor.uninstrument()

    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "worker",
        "gen_ai.agent.id": "bench-run-sub-1",
        "ambient_runs.subagent_run_id": "bench-run-sub-1",
        "gen_ai.conversation.id": "bench-thread",
    }

    def calls(name: str, instrumented: bool, by_hand: bool, with_attributes: bool = False) -> Any:
        async def candidate() -> float:
            out: list[Any] = []
            async with make_run(instrumented, out):
                start = time.perf_counter()
                if with_attributes:
                    for _ in range(n_calls):
                        with tracer.start_as_current_span(
                            "invoke_agent worker", attributes=attributes
                        ) as span:
                            await worker()
                            span.set_attributes({"ambient_runs.outcome": "success"})
                elif by_hand:
                    for _ in range(n_calls):
                        with tracer.start_as_current_span("invoke_agent worker"):
                            await worker()
                else:
                    for _ in range(n_calls):
                        await worker()
                elapsed = time.perf_counter() - start
            delivered.setdefault(name, set()).add(len(out))
            return elapsed / n_calls

        return candidate

    def events(name: str, instrumented: bool) -> Any:
        async def candidate() -> float:
            out: list[Any] = []
            async with make_run(instrumented, out):
                with ar.message() as message:
                    write = message.write
                    start = time.perf_counter()
                    for _ in range(n_events):
                        write("tok")
                    elapsed = time.perf_counter() - start
            delivered.setdefault(name, set()).add(len(out))
            return elapsed / n_events

        return candidate

    candidates = {
        "call: plain": calls("call: plain", False, False),
        "call: instrumented": calls("call: instrumented", True, False),
        "call: hand_written": calls("call: hand_written", False, True),
        "call: hand_attributes": calls("call: hand_attributes", False, True, True),
        "event: plain": events("event: plain", False),
        "event: instrumented": events("event: instrumented", True),
    }
    for candidate in candidates.values():  # warm up, untimed
        await candidate()
    samples = await interleave_async(candidates, rounds)

    added_call = [
        i - p for i, p in zip(samples["call: instrumented"], samples["call: plain"], strict=True)
    ]
    added_hand = [
        h - p for h, p in zip(samples["call: hand_written"], samples["call: plain"], strict=True)
    ]
    added_event = [
        i - p for i, p in zip(samples["event: instrumented"], samples["event: plain"], strict=True)
    ]
    # RUN_STARTED, five events per call, RUN_FINISHED; and START, deltas, END, both run events.
    expected_calls, expected_events = 5 * n_calls + 2, n_events + 4
    checks = {
        "events_per_call_batch": sorted(
            {n for k, v in delivered.items() if k.startswith("call") for n in v}
        ),
        "events_per_call_batch_expected": expected_calls,
        "events_per_event_batch": sorted(
            {n for k, v in delivered.items() if k.startswith("event") for n in v}
        ),
        "events_per_event_batch_expected": expected_events,
        "all_delivered": all(
            v == {expected_calls if k.startswith("call") else expected_events}
            for k, v in delivered.items()
        ),
        "uninstrumented_after": not instrumentor.is_instrumented_by_opentelemetry,
    }
    provider.shutdown()
    return {
        "title": TITLE,
        "params": {"n_calls": n_calls, "n_events": n_events, "rounds": rounds},
        "unit": "call or event",
        "samples": samples,
        "figures": [
            figure(
                "otel: call instrumented / plain",
                ratios(samples, "call: instrumented", "call: plain"),
            ),
            figure(
                "otel: call instrumented / hand-written span",
                ratios(samples, "call: instrumented", "call: hand_written"),
            ),
            figure(
                "otel: added per call, instrumented / hand-written",
                [a / h for a, h in zip(added_call, added_hand, strict=True) if h > 0] or [0.0],
                note="the instrumentation's own cost against a bare span's",
            ),
            figure(
                "otel: call instrumented / hand-written + attributes",
                ratios(samples, "call: instrumented", "call: hand_attributes"),
            ),
            figure("otel: added per call", [max(a, 0.0) * 1e6 for a in added_call], unit="µs"),
            figure(
                "otel: event instrumented / plain",
                ratios(samples, "event: instrumented", "event: plain"),
            ),
            figure("otel: added per event", [max(a, 0.0) * 1e9 for a in added_event], unit="ns"),
        ],
        "checks": checks,
    }
