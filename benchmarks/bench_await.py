"""
Agents that await, on the public byte path: an agent run by ``ambient_runs.stream()``,
consumed with ``sse.frames``, verification on (issue 35, target 1).

A real agent does not write its deltas in one burst: it awaits between tokens.
Measured from the agent's first emit to the consumer holding the last frame:

Per **token** (*n_events* token-like deltas into one open message of a subagent):

- ``drain: bytes``: ``handle.write(t); await ar.drain()`` per token;
- ``astream: bytes``: ``await handle.astream(tokens)``, *tokens* an async generator;
- ``message: official``: ``ag_ui.core.TextMessageContentEvent(...)``, then
  ``EventEncoder().encode(...)`` and ``.encode()`` per token (no awaiting: the
  official path's cost per event, the same baseline as ``bench_bytes``).

Per **@subagent call followed by a drain** (*n_calls* awaited calls of a no-op
``@subagent("worker")`` coroutine, each followed by ``await ar.drain()``):

- ``subagent+drain: bytes``: inside a streamed run, the frames collected;
- ``subagent: otel``: the same no-op coroutine decorated with
  ``tracer.start_as_current_span("worker")`` (an SDK ``TracerProvider`` with no
  span processor), as in ``bench_bytes``.

Targets (issue 35): drain and astream ≤ 0.12x official; subagent + drain ≤ 0.2x
OpenTelemetry. The frames are checked identical to the burst's (outside the clock).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import ambient_runs as ar
from benchmarks import figure, interleave_async, official_writes, ratios
from benchmarks.bench_bytes import timed_stream
from benchmarks.bench_pipeline import deltas

TITLE = "agents that await (stream() + sse.frames): drain per token, astream, @subagent + drain"


async def _work() -> None:
    return None


async def _tokens(texts: Sequence[str]) -> AsyncIterator[str]:
    for text in texts:
        yield text


def run(n_events: int = 2000, n_calls: int = 500, rounds: int = 40) -> dict[str, Any]:
    """Time *n_events* tokens and *n_calls* calls per batch, *rounds* interleaved rounds."""
    import asyncio

    return asyncio.run(_run(n_events, n_calls, rounds))


async def _run(n_events: int, n_calls: int, rounds: int) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider

    texts = deltas(n_events)
    worker = ar.subagent("worker")(_work)
    provider = TracerProvider()
    traced = provider.get_tracer("bench").start_as_current_span("worker")(_work)
    seen: dict[str, list[bytes]] = {}

    async def drain_agent(run: ar.Run, marks: list[float]) -> None:
        with ar.subagent("bench"), ar.message() as handle:
            write, drain = handle.write, ar.drain
            marks.append(time.perf_counter())
            for delta in texts:
                write(delta)
                await drain()

    async def astream_agent(run: ar.Run, marks: list[float]) -> None:
        with ar.subagent("bench"), ar.message() as handle:
            tokens = _tokens(texts)
            marks.append(time.perf_counter())
            await handle.astream(tokens)

    async def burst_agent(run: ar.Run, marks: list[float]) -> None:
        with ar.subagent("bench"), ar.message() as handle:
            marks.append(time.perf_counter())
            for delta in texts:
                handle.write(delta)

    # RUN_STARTED, SUBAGENT_STARTED, TEXT_MESSAGE_START, then the deltas.
    last = 3 + n_events

    async def drain_bytes() -> float:
        return await timed_stream(drain_agent, last, seen, "drain") / n_events

    async def astream_bytes() -> float:
        return await timed_stream(astream_agent, last, seen, "astream") / n_events

    message_id, owner = "bench-run-msg-1", "bench-run-sub-1"
    official_out: list[bytes] = []
    official = official_writes(texts, message_id, owner, official_out)

    async def message_official() -> float:
        return official()

    async def call_agent(run: ar.Run, marks: list[float]) -> None:
        drain = ar.drain
        marks.append(time.perf_counter())
        for _ in range(n_calls):
            await worker()
            await drain()

    async def subagent_drain_bytes() -> float:
        # RUN_STARTED, then two frames per call.
        return await timed_stream(call_agent, 1 + 2 * n_calls, seen, "subagent") / n_calls

    async def subagent_otel() -> float:
        start = time.perf_counter()
        for _ in range(n_calls):
            await traced()
        return (time.perf_counter() - start) / n_calls

    candidates = {
        "drain: bytes": drain_bytes,
        "astream: bytes": astream_bytes,
        "message: official": message_official,
        "subagent+drain: bytes": subagent_drain_bytes,
        "subagent: otel": subagent_otel,
    }
    for candidate in candidates.values():  # warm up, untimed; keeps the frames to compare
        await candidate()
    await timed_stream(burst_agent, last, seen, "burst")
    checks = {
        "drain_frames_identical_to_burst": seen["drain"] == seen["burst"],
        "astream_frames_identical_to_burst": seen["astream"] == seen["burst"],
        "deltas_identical_to_official": seen["drain"][3:last] == official_out,
        "subagent_frames": len(seen["subagent"]) == 2 + 2 * n_calls,
        "verify": True,
    }
    samples = await interleave_async(candidates, rounds)
    provider.shutdown()
    return {
        "title": TITLE,
        "params": {"n_events": n_events, "n_calls": n_calls, "rounds": rounds},
        "unit": "event or call",
        "samples": samples,
        "figures": [
            figure(
                "await: write + drain per token / official",
                ratios(samples, "drain: bytes", "message: official"),
                target=("<=", 0.12),
            ),
            figure(
                "await: astream from an async iterator / official",
                ratios(samples, "astream: bytes", "message: official"),
                target=("<=", 0.12),
            ),
            figure(
                "await: @subagent call + drain / otel span",
                ratios(samples, "subagent+drain: bytes", "subagent: otel"),
                target=("<=", 0.2),
            ),
        ],
        "checks": checks,
    }
