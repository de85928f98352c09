"""
The public byte path: an agent run by ``ambient_runs.stream()``, consumed with ``sse.frames``.

What `AgentApp` and the README's Starlette route do with a run, measured from
the agent's first emit to the consumer holding the last frame (so both the
agent's side and the encoder's are on the clock; the run's setup is not).

Per **message write** (*n_events* token-like deltas into one open message of a
subagent, verification on, one burst):

- ``message: bytes``: ``handle.write(delta)``, the frames collected from ``sse.frames``;
- ``message: official``: ``ag_ui.core.TextMessageContentEvent(...)``, then
  ``EventEncoder().encode(...)`` and ``.encode()``;
- ``message: floor``: a dict, ``json.dumps`` (compact, not ASCII-only), the
  framing and ``.encode()``.

Per **@subagent call** (*n_calls* awaited calls of a no-op ``@subagent("worker")``
coroutine, two verified events each):

- ``subagent: bytes``: inside a streamed run, the frames collected from ``sse.frames``;
- ``subagent: objects``: inside a plain `Run` whose sink is a list's ``append``;
- ``subagent: otel``: the same no-op coroutine decorated with
  ``tracer.start_as_current_span("worker")`` (an SDK ``TracerProvider`` with no
  span processor: spans are created, sampled and ended, not exported).

Targets (issue 12): message bytes ≤ 0.12x official and ≤ 0.25x the json floor;
subagent bytes ≤ 0.2x OpenTelemetry (objects: reported).
"""

from __future__ import annotations

import json
import time
from typing import Any

import ambient_runs as ar
from ambient_runs import sse
from benchmarks import INPUT, figure, floor_writes, interleave_async, official_writes, ratios
from benchmarks.bench_pipeline import deltas

TITLE = "public byte path (stream() + sse.frames): message write, @subagent call"


async def _work() -> None:
    return None


async def timed_stream(agent: Any, last: int, seen: dict[str, list[bytes]], name: str) -> float:
    """
    Stream *agent* through `sse.frames`; seconds from its mark to frame number *last*.

    *agent* takes the run and a list it appends its start mark to; the frames are kept
    in *seen* under *name*, for the byte-identity checks.
    """
    marks: list[float] = []
    frames: list[bytes] = []

    async def marked(run: ar.Run) -> None:
        await agent(run, marks)

    append = frames.append
    async for frame in sse.frames(ar.stream(marked, INPUT)):
        append(frame)
        if len(frames) == last:
            marks.append(time.perf_counter())
    seen[name] = frames
    return marks[1] - marks[0]


def run(n_events: int = 2000, n_calls: int = 500, rounds: int = 40) -> dict[str, Any]:
    """Time *n_events* writes and *n_calls* calls per batch, *rounds* interleaved rounds."""
    import asyncio

    return asyncio.run(_run(n_events, n_calls, rounds))


async def _run(n_events: int, n_calls: int, rounds: int) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider

    texts = deltas(n_events)
    worker = ar.subagent("worker")(_work)
    provider = TracerProvider()
    traced = provider.get_tracer("bench").start_as_current_span("worker")(_work)
    seen: dict[str, list[bytes]] = {}

    async def write_agent(run: ar.Run, marks: list[float]) -> None:
        with ar.subagent("bench"), ar.message() as handle:
            write = handle.write
            marks.append(time.perf_counter())
            for delta in texts:
                write(delta)

    async def message_bytes() -> float:
        # RUN_STARTED, SUBAGENT_STARTED, TEXT_MESSAGE_START, then the deltas.
        return await timed_stream(write_agent, 3 + n_events, seen, "message") / n_events

    message_id, owner = "bench-run-msg-1", "bench-run-sub-1"
    official_out: list[bytes] = []
    official = official_writes(texts, message_id, owner, official_out)
    floor_out: list[bytes] = []
    floor = floor_writes(texts, message_id, owner, floor_out)

    async def message_official() -> float:
        return official()

    async def message_floor() -> float:
        return floor()

    async def call_agent(run: ar.Run, marks: list[float]) -> None:
        marks.append(time.perf_counter())
        for _ in range(n_calls):
            await worker()

    async def subagent_bytes() -> float:
        # RUN_STARTED, then two frames per call.
        return await timed_stream(call_agent, 1 + 2 * n_calls, seen, "subagent") / n_calls

    async def subagent_objects() -> float:
        out: list[Any] = []
        async with ar.Run(INPUT, sink=out.append, verify=True):
            start = time.perf_counter()
            for _ in range(n_calls):
                await worker()
            elapsed = time.perf_counter() - start
        return elapsed / n_calls

    async def subagent_otel() -> float:
        start = time.perf_counter()
        for _ in range(n_calls):
            await traced()
        return (time.perf_counter() - start) / n_calls

    candidates = {
        "message: bytes": message_bytes,
        "message: official": message_official,
        "message: floor": message_floor,
        "subagent: bytes": subagent_bytes,
        "subagent: objects": subagent_objects,
        "subagent: otel": subagent_otel,
    }
    for candidate in candidates.values():  # warm up, untimed; keeps the frames to compare
        await candidate()
    deltas_out = seen["message"][3 : 3 + n_events]
    checks = {
        "message_frames_identical_to_official": deltas_out == official_out,
        "message_json_equal_to_floor": [json.loads(f[6:]) for f in deltas_out]
        == [json.loads(f[6:]) for f in floor_out],
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
                "bytes: message write / official",
                ratios(samples, "message: bytes", "message: official"),
                target=("<=", 0.12),
            ),
            figure(
                "bytes: message write / json floor",
                ratios(samples, "message: bytes", "message: floor"),
                target=("<=", 0.25),
            ),
            figure(
                "bytes: @subagent call / otel span",
                ratios(samples, "subagent: bytes", "subagent: otel"),
                target=("<=", 0.2),
            ),
            figure(
                "bytes: @subagent call, object sink / otel span",
                ratios(samples, "subagent: objects", "subagent: otel"),
            ),
        ],
        "checks": checks,
    }
