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
- ``floor``: the least any verified, attributed scope can do, written by hand:
  a ``ContextVar`` set and reset around the call, the two events built with the
  library's own trusted constructors (no validation), a dict of active ids as
  the whole verification, one lock per event, the same sink. No handle object,
  no nesting, no ownership or suspension rules, no leak handling;
- ``contextvar``: a bare ``ContextVar`` set and reset around the awaited call;
- ``plain``: the undecorated coroutine awaited (the loop's own overhead).

Reported, not judged. Issue 12 moved the ``@subagent`` target (≤ 0.2x
OpenTelemetry) to the byte path a served run takes (`benchmarks.bench_bytes`)
and asks for this object-sink figure beside it. The ``floor / opentelemetry``
figure says how much of a span the two event objects alone cost.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ambient_runs as ar
from ambient_runs import events as ev
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

    floor_frame: contextvars.ContextVar[str | None] = contextvars.ContextVar("floor", default=None)
    started = ev.unchecked(ev.SubagentStartedEvent, "subagent_run_id", "name")
    finished = ev.unchecked(ev.SubagentFinishedEvent, "subagent_run_id")
    lock = threading.RLock()
    ids = itertools.count(1)
    active: dict[str, str | None] = {}
    floor_out: list[Any] = []
    sink = floor_out.append

    async def floor_scoped() -> None:
        sid = f"bench-run-sub-{next(ids)}"
        announce = started(sid, "worker")
        with lock:
            if sid in active:
                raise RuntimeError(sid)
            active[sid] = floor_frame.get()
            sink(announce)
        token = floor_frame.set(sid)
        try:
            result = await _work()
        finally:
            floor_frame.reset(token)
        ending = finished(sid)
        with lock:
            del active[sid]
            sink(ending)
        return result

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
        "floor": looping(floor_scoped),
        "contextvar": looping(with_var),
        "plain": looping(_work),
    }
    for candidate in candidates.values():  # warm up, untimed
        await candidate()
        floor_out.clear()
    samples = await interleave_async(candidates, rounds)
    floor_events = len(floor_out)
    # RUN_STARTED, then STARTED + FINISHED per call, then RUN_FINISHED.
    expected = 2 * n_calls + 2
    checks = {
        "events_per_run": sorted(set(delivered)),
        "events_per_run_expected": expected,
        "all_delivered": set(delivered) == {expected},
        "floor_events_per_batch": floor_events / rounds,
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
            ),
            figure("scope: ambient_runs / floor", ratios(samples, "ambient_runs", "floor")),
            figure("scope: floor / opentelemetry", ratios(samples, "floor", "opentelemetry")),
            figure(
                "scope: ambient_runs / contextvar", ratios(samples, "ambient_runs", "contextvar")
            ),
            figure(
                "scope: opentelemetry / contextvar", ratios(samples, "opentelemetry", "contextvar")
            ),
        ],
        "checks": checks,
    }
