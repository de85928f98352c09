"""
The binary transport (`ambient_runs.proto`) against SSE, as `AgentApp` sends them (issue 35).

Two runs, each streamed by ``ambient_runs.stream()`` and encoded the way
`AgentApp` answers (every frame ready at once joined into one body chunk):

- the **demo run** (``ambient_runs._demo.research_agent(pace=0)``: three
  researchers, reasoning, tool calls, state, the answer), and
- a **message run**: *n_events* token-like deltas into one open message of a
  subagent, the agent draining after each (an agent that awaits).

Per run, from the stream's first take to its last byte, per event:

- ``sse``: ``sse._batches`` (the SSE byte path: hot events are frames made by
  construction, the rest encoded);
- ``proto``: ``proto.frames`` (every event encoded from its object).

Figures: the bytes of the demo run, proto / SSE (target ≤ 0.5x); the encoding
cost, proto / SSE, per event, for both runs (target ≤ 1.0x: no worse than the
SSE byte path).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import ambient_runs as ar
from ambient_runs import proto, sse
from ambient_runs._demo import research_agent
from benchmarks import INPUT, figure, interleave_async, ratios
from benchmarks.bench_pipeline import deltas

TITLE = "binary transport (proto.frames) / SSE (sse._batches): bytes and encoding cost"

DEMO_INPUT: dict[str, Any] = {
    **INPUT,
    "messages": [{"id": "u1", "role": "user", "content": "Heat pump or boiler?"}],
}


def run(n_events: int = 2000, rounds: int = 30) -> dict[str, Any]:
    """Time the demo run and an *n_events*-delta run both ways, *rounds* interleaved rounds."""
    import asyncio

    return asyncio.run(_run(n_events, rounds))


async def _run(n_events: int, rounds: int) -> dict[str, Any]:
    texts = deltas(n_events)
    demo = research_agent(pace=0)
    sizes: dict[str, list[int]] = {"sse": [], "proto": []}
    counts: dict[str, int] = {}

    async def message_agent(run: ar.Run) -> None:
        with ar.subagent("bench"), ar.message() as handle:
            write, drain = handle.write, ar.drain
            for delta in texts:
                write(delta)
                await drain()

    async def timed(body: AsyncIterator[bytes]) -> tuple[float, int]:
        start = time.perf_counter()
        total = 0
        async for chunk in body:
            total += len(chunk)
        return time.perf_counter() - start, total

    async def events_of(agent: Any, input: Any) -> int:
        return len([e async for e in ar.stream(agent, input)])

    counts["demo"] = await events_of(demo, DEMO_INPUT)
    counts["message"] = await events_of(message_agent, INPUT)

    def candidate(agent: Any, input: Any, name: str, binary: bool) -> Any:
        async def measure() -> float:
            stream = ar.stream(agent, input)
            body = proto.frames(stream) if binary else sse._batches(stream, None)
            seconds, total = await timed(body)
            if name == "demo":
                sizes["proto" if binary else "sse"].append(total)
            return seconds / counts[name]

        return measure

    candidates = {
        "demo: sse": candidate(demo, DEMO_INPUT, "demo", False),
        "demo: proto": candidate(demo, DEMO_INPUT, "demo", True),
        "message: sse": candidate(message_agent, INPUT, "message", False),
        "message: proto": candidate(message_agent, INPUT, "message", True),
    }
    for measure in candidates.values():  # warm up, untimed
        await measure()
    sizes["sse"].clear()
    sizes["proto"].clear()
    samples = await interleave_async(candidates, rounds)
    bytes_ratio = [p / s for p, s in zip(sizes["proto"], sizes["sse"], strict=True)]
    return {
        "title": TITLE,
        "params": {"n_events": n_events, "rounds": rounds},
        "unit": "event",
        "samples": samples,
        "figures": [
            figure("proto: bytes of the demo run / SSE", bytes_ratio, target=("<=", 0.5)),
            figure(
                "proto: encoding cost per event, demo run / SSE byte path",
                ratios(samples, "demo: proto", "demo: sse"),
                target=("<=", 1.0),
            ),
            figure(
                "proto: encoding cost per event, deltas + drain / SSE byte path",
                ratios(samples, "message: proto", "message: sse"),
                target=("<=", 1.0),
            ),
        ],
        "checks": {
            "demo_events": counts["demo"],
            "demo_bytes_sse": sizes["sse"][0],
            "demo_bytes_proto": sizes["proto"][0],
        },
    }
