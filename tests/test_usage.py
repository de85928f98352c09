"""Token usage: `ambient_runs.usage` in every scope, summed into the run's terminal event."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from ag_ui.core import CustomEvent, RunErrorEvent, RunFinishedEvent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ambient_runs as ar
from ambient_runs.adapters.otel import AmbientRunsInstrumentor
from ambient_runs.testing import assert_valid, make_input, wire


def last(run: ar.Run) -> dict[str, Any]:
    return wire(list(run.events))[-1]


class TestTotals:
    async def test_summed_per_provider_and_model_subagents_included(self) -> None:
        @ar.subagent("researcher")
        async def research() -> None:
            ar.usage(provider="openai", model="gpt-4o", input_tokens=100, output_tokens=20)
            ar.usage(provider="openai", model="gpt-4o", input_tokens=50, reasoning_tokens=7)

        async with ar.Run(make_input()) as run:
            run.usage(provider="anthropic", model="claude", input_tokens=3, output_tokens=4)
            await asyncio.gather(research(), research())
            handle = run.subagent("writer").start()
            handle.usage(provider="anthropic", model="claude", cached_input_tokens=9)
            handle.finish()
        end = last(run)
        RunFinishedEvent.model_validate(end)
        assert [
            {
                "provider": "anthropic",
                "model": "claude",
                "inputTokens": 3,
                "outputTokens": 4,
                "cachedInputTokens": 9,
            },
            {
                "provider": "openai",
                "model": "gpt-4o",
                "inputTokens": 300,
                "outputTokens": 40,
                "reasoningTokens": 14,
            },
        ] == end["usage"]
        assert_valid(list(run.events))

    def test_reports_from_many_threads_all_count(self) -> None:
        """Threads reporting at once through one subagent handle: no report is lost."""
        threads, reports = 8, 500
        with ar.Run(make_input()) as run:
            handle = run.subagent("pool").start()
            barrier = threading.Barrier(threads)

            def report() -> None:
                barrier.wait()
                for _ in range(reports):
                    handle.usage(provider="p", model="m", input_tokens=1, output_tokens=2)

            workers = [threading.Thread(target=report) for _ in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            handle.finish()
        total = threads * reports
        assert [
            {"provider": "p", "model": "m", "inputTokens": total, "outputTokens": 2 * total}
        ] == last(run)["usage"]
        assert total == sum(1 for e in run.events if e.TYPE.value == "CUSTOM")

    def test_each_report_is_a_custom_event_of_its_scope(self) -> None:
        with ar.Run(make_input()) as run, ar.subagent("s") as sub:
            report = ar.usage(model="m", output_tokens=5)
        assert (None, "m", 5) == (report.provider, report.model, report.output_tokens)
        [custom] = [e for e in wire(list(run.events)) if e["type"] == "CUSTOM"]
        CustomEvent.model_validate(custom)
        assert {
            "type": "CUSTOM",
            "subagentRunId": sub.id,
            "name": "ambient_runs.usage",
            "value": {"model": "m", "outputTokens": 5},
        } == custom

    def test_a_run_error_carries_the_usage(self) -> None:
        def body() -> None:
            ar.usage(provider="p", input_tokens=1)
            raise RuntimeError("model down")

        run = ar.Run(make_input())
        with pytest.raises(RuntimeError), run:
            body()
        end = last(run)
        RunErrorEvent.model_validate(end)
        assert [{"provider": "p", "inputTokens": 1}] == end["usage"]

    def test_a_cancelled_finish_carries_the_usage(self) -> None:
        with ar.Run(make_input()) as run:
            ar.usage(provider="p", output_tokens=2)
            run.cancel()
            run.check_cancelled()
        end = last(run)
        RunFinishedEvent.model_validate(end)
        assert ({"type": "cancelled"}, [{"provider": "p", "outputTokens": 2}]) == (
            end["outcome"],
            end["usage"],
        )

    def test_no_usage_no_field(self) -> None:
        with ar.Run(make_input()) as run:
            pass
        assert "usage" not in last(run)

    @pytest.mark.parametrize("bad", [1.5, True, -1, "3"])
    def test_counts_are_integers(self, bad: Any) -> None:
        with ar.Run(make_input()), pytest.raises(ar.InvalidEventError, match="input_tokens"):
            ar.usage(input_tokens=bad)

    def test_needs_a_run(self) -> None:
        with pytest.raises(ar.NoActiveRunError):
            ar.usage(input_tokens=1)

    def test_a_misspelt_count_names_the_counts(self) -> None:
        counts: dict[str, Any] = {"input_token": 1}
        with ar.Run(make_input()) as run:
            with pytest.raises(TypeError, match=r"input_tokens, output_tokens.*not input_token$"):
                run.usage(**counts)
            with pytest.raises(TypeError, match=r"not input_token$"):
                ar.usage(**counts)
        assert "usage" not in last(run)

    def test_the_counts_are_the_token_usage_fields(self) -> None:
        # `TokenCounts` types the keywords both faces take: it drifts from TokenUsage at a cost.
        fields = [a.name for a in attrs.fields(ar.events.TokenUsage)]
        assert ["provider", "model", *ar.TokenCounts.__annotations__] == fields


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    AmbientRunsInstrumentor().instrument(tracer_provider=provider)
    try:
        yield found
    finally:
        AmbientRunsInstrumentor().uninstrument()
        provider.shutdown()


class TestOpenTelemetry:
    def test_each_invocation_span_has_its_own_usage_and_the_run_span_the_sum(
        self, exporter: InMemorySpanExporter
    ) -> None:
        @ar.subagent("researcher")
        def research(tokens: int) -> None:
            ar.usage(provider="openai", model="gpt-4o", input_tokens=tokens, output_tokens=1)
            ar.usage(provider="openai", model="gpt-4o", input_tokens=tokens)

        with ar.Run(make_input()):
            research(10)
            research(30)
            ar.usage(provider="openai", model="gpt-4o", output_tokens=5)
        spans = {
            (s.name, s.attributes.get("gen_ai.agent.id")): s.attributes
            for s in exporter.get_finished_spans()
            if s.attributes is not None
        }
        assert 20 == spans[("invoke_agent researcher", "run-sub-1")]["gen_ai.usage.input_tokens"]
        assert 60 == spans[("invoke_agent researcher", "run-sub-2")]["gen_ai.usage.input_tokens"]
        run_span = spans[("invoke_agent", None)]
        assert (80, 7, "gpt-4o") == (
            run_span["gen_ai.usage.input_tokens"],
            run_span["gen_ai.usage.output_tokens"],
            run_span["gen_ai.response.model"],
        )
