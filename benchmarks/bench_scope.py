"""
Scope cost: entering and leaving one scope around an awaited coroutine.

Candidates, each calling and awaiting a decorated (or wrapped) no-op coroutine
*n_calls* times in a loop, on one event loop:

- ``ambient_runs``: a ``@subagent("worker")`` coroutine inside an active run,
  verification on; each call delivers SUBAGENT_STARTED and SUBAGENT_FINISHED to
  an in-memory sink (a list's ``append``);
- ``opentelemetry``: the same coroutine decorated with
  ``tracer.start_as_current_span("worker")``, from a ``TracerProvider`` with no
  span processor or exporter (spans are still created, sampled and ended);
- ``contextvar``: a bare ``ContextVar`` set and reset around the awaited call;
- ``plain``: the undecorated coroutine awaited (the loop's own overhead).

Target: ambient_runs ≤ 0.2x OpenTelemetry.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ambient_runs as ar
from benchmarks import INPUT, figure, interleave_async, ratios

TITLE = "scope cost (@subagent coroutine vs OpenTelemetry span vs ContextVar)"


async def _work() -> None:
    return None


def run(n_calls: int = 1000, rounds: int = 30) -> dict[str, Any]:
    """Time *n_calls* scoped calls per batch, *rounds* interleaved rounds."""
    import asyncio

    return asyncio.run(_run(n_calls, rounds))


async def _run(n_calls: int, rounds: int) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider

    worker = ar.subagent("worker")(_work)
    provider = TracerProvider()
    traced = provider.get_tracer("bench").start_as_current_span("worker")(_work)
    var: contextvars.ContextVar[int] = contextvars.ContextVar("bench", default=0)

    async def with_var() -> None:
        token = var.set(1)
        try:
            return await _work()
        finally:
            var.reset(token)

    delivered: list[int] = []

    async def ours() -> float:
        out: list[Any] = []
        async with ar.Run(INPUT, sink=out.append, verify=True):
            start = time.perf_counter()
            for _ in range(n_calls):
                await worker()
            elapsed = time.perf_counter() - start
        delivered.append(len(out))
        return elapsed / n_calls

    def looping(fn: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[float]]:
        async def candidate() -> float:
            start = time.perf_counter()
            for _ in range(n_calls):
                await fn()
            return (time.perf_counter() - start) / n_calls

        return candidate

    candidates = {
        "ambient_runs": ours,
        "opentelemetry": looping(traced),
        "contextvar": looping(with_var),
        "plain": looping(_work),
    }
    for candidate in candidates.values():  # warm up, untimed
        await candidate()
    samples = await interleave_async(candidates, rounds)
    # RUN_STARTED, then STARTED + FINISHED per call, then RUN_FINISHED.
    expected = 2 * n_calls + 2
    checks = {
        "events_per_run": sorted(set(delivered)),
        "events_per_run_expected": expected,
        "all_delivered": set(delivered) == {expected},
        "verify": True,
    }
    provider.shutdown()
    return {
        "title": TITLE,
        "params": {"n_calls": n_calls, "rounds": rounds},
        "unit": "call",
        "samples": samples,
        "figures": [
            figure(
                "scope: ambient_runs / opentelemetry",
                ratios(samples, "ambient_runs", "opentelemetry"),
                target=("<=", 0.2),
            ),
            figure(
                "scope: ambient_runs / contextvar", ratios(samples, "ambient_runs", "contextvar")
            ),
            figure(
                "scope: opentelemetry / contextvar", ratios(samples, "opentelemetry", "contextvar")
            ),
        ],
        "checks": checks,
    }
