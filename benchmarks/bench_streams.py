"""
Thousands of streams on one worker: throughput, time to first byte, loop stalls, memory.

One uvicorn worker in a process of its own (``benchmarks._child``: 127.0.0.1, asyncio,
h11) serves two candidates, each a run of *events* deltas whose agent awaits
``asyncio.sleep(0)`` after every delta (an agent relaying a model's tokens as they come,
one per loop turn), the same events in both:

- ``ambient_runs``: ``AgentApp`` (verification on), the deltas in a subagent;
- ``official``: Starlette's ``StreamingResponse`` over a generator building each
  ``ag_ui.core`` event and yielding ``EventEncoder().encode(event)``
  (``benchmarks.bench_http._official``).

A storm: the client (this process, raw asyncio sockets, one connection per stream,
opened before the clock starts) writes *streams* requests at once and reads every
response to its last chunk. Per storm, read from the worker: the longest loop stall (a
probe task sleeping 2 ms at a time, by the wall clock: whatever held the loop, garbage
collection included), the longest collection, and the peak RSS (sampled by the probe)
above the RSS before the storm. Storms of 1,000 and 2,000 streams, the candidates
alternating, *rounds* of each.

Figures (targets: issue 35):

- events/s, ambient_runs / official (all events of all streams over the storm's wall
  time; >= 4x);
- time to first byte p99 (request written to the first ``data:`` byte, over the storm's
  streams), ambient_runs / official (<= 1.5x);
- the longest loop stall, ambient_runs, in ms (<= 100 ms);
- memory per open stream: on a fresh worker per candidate and count (a worker's
  allocator keeps what one storm grew for the next, so only a first storm shows it),
  the peak RSS over the storm minus the RSS before it, over the streams (<= 16 KB).

The stall and the longest collection are also reported by the loop thread's CPU clock:
on a machine whose other work takes the cores away, the wall clock counts the time the
worker was not running at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from benchmarks import INPUT, figure
from benchmarks._child import Child

TITLE = "thousands of streams on one worker (uvicorn; events/s, p99 TTFB, stalls, memory)"

_LAST_CHUNK = b"\r\n0\r\n\r\n"


def _serve(events: int) -> None:
    from benchmarks._child import serve
    from benchmarks.bench_http import _dispatch, _official, _ours

    app = _dispatch(
        {
            "ambient_runs": _ours(events, yielding=True),
            "official": _official(events, yielding=True),
        }
    )
    serve(app, backlog=4096, probe=True)


async def _stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[float, float, int]:
    """Write *request*; read to the last chunk. (start, first data: byte, frames)."""
    start = time.perf_counter()
    writer.write(request)
    first = 0.0
    frames = 0
    tail = b""
    while True:
        chunk = await reader.read(1 << 18)
        if not chunk:
            raise RuntimeError("the server closed the connection mid-response")
        if not first and b"data: " in chunk:
            first = time.perf_counter()
        joined = tail + chunk  # a frame's "data: " may straddle two reads
        frames += joined.count(b"data: ") - tail.count(b"data: ")
        tail = joined[-16:]
        if tail.endswith(_LAST_CHUNK):
            return start, first, frames


async def _storm(port: int, name: str, streams: int) -> dict[str, Any]:
    body = json.dumps(INPUT).encode()
    request = (
        f"POST /{name}/ HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    pool = []
    for _ in range(streams):  # connections first, untimed (the accept queue is not the run)
        pool.append(await asyncio.open_connection("127.0.0.1", port, limit=1 << 20))
    try:
        found = await asyncio.gather(*(_stream(r, w, request) for r, w in pool))
    finally:
        for _, writer in pool:
            writer.close()
    begin = min(s for s, _, _ in found)
    end = time.perf_counter()
    ttfb = sorted(f - s for s, f, _ in found)
    return {
        "seconds": end - begin,
        "ttfb_p99": ttfb[min(len(ttfb) - 1, int(len(ttfb) * 0.99))],
        "ttfb_p50": statistics.median(ttfb),
        "frames": sorted({n for _, _, n in found}),
    }


async def _measure(
    server: Child, events: int, counts: tuple[int, ...], rounds: int
) -> dict[str, Any]:
    total = events + 6
    names = ("ambient_runs", "official")
    found: dict[str, dict[str, list[Any]]] = {}
    for name in names:  # warm up: imports, first-call caches
        await _storm(server.port, name, 50)
    await asyncio.sleep(0.2)
    for count in counts:
        rows: dict[str, list[Any]] = {
            f"{n} {key}": []
            for n in names
            for key in ("rate", "ttfb", "stall", "stall_cpu", "gc", "gc_cpu")
        }
        rows["frames"] = []
        for r in range(rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                server.figures()  # resets the probe
                storm = await _storm(server.port, name, count)
                after = server.figures()
                rows[f"{name} rate"].append(count * total / storm["seconds"])
                rows[f"{name} ttfb"].append(storm["ttfb_p99"])
                rows[f"{name} stall"].append(after["stall"])
                rows[f"{name} gc"].append(after["gc"])
                rows[f"{name} stall_cpu"].append(after["stall_cpu"])
                rows[f"{name} gc_cpu"].append(after["gc_cpu"])
                rows["frames"].extend(storm["frames"])
                await asyncio.sleep(0.2)  # the storm's teardown, before the next probe reset
        found[str(count)] = rows
    return found


def _fresh_memory(events: int, name: str, count: int) -> float:
    """Peak RSS growth per stream over one storm of *count*, on a worker of its own."""
    with Child("benchmarks.bench_streams", [str(events)]) as server:

        async def storm() -> float:
            await _storm(server.port, name, 20)  # imports, first-call caches: not the streams'
            before = server.figures()
            await _storm(server.port, name, count)
            after = server.figures()
            return max(0, after["rss_peak"] - before["rss"]) / count

        return asyncio.run(storm())


def run(
    events: int = 200, counts: tuple[int, ...] = (1000, 2000), rounds: int = 3
) -> dict[str, Any]:
    """Storms of *counts* concurrent streams against one worker, both candidates alternating."""
    total = events + 6
    with Child("benchmarks.bench_streams", [str(events)]) as server:
        load_before = os.getloadavg()
        found = asyncio.run(_measure(server, events, counts, rounds))
    memory = {
        (name, count): _fresh_memory(events, name, count)
        for count in counts
        for name in ("ambient_runs", "official")
    }
    load_after = os.getloadavg()
    figures = []
    samples: dict[str, list[float]] = {}
    absolute: dict[str, Any] = {"load average before, after": f"{load_before}, {load_after}"}
    frames_ok = True
    for count, rows in found.items():
        n = f"{int(count):,}"
        ours_rate, official_rate = rows["ambient_runs rate"], rows["official rate"]
        samples[f"ambient_runs ({n} streams)"] = [1 / v for v in ours_rate]
        samples[f"official ({n} streams)"] = [1 / v for v in official_rate]
        figures += [
            figure(
                f"streams, {n} concurrent: events/s vs official",
                [a / b for a, b in zip(ours_rate, official_rate, strict=True)],
                target=(">=", 4.0),
                note="agents awaiting asyncio.sleep(0) per delta; uvicorn in its own process",
            ),
            figure(
                f"streams, {n} concurrent: time to first byte p99 / official",
                [
                    a / b
                    for a, b in zip(rows["ambient_runs ttfb"], rows["official ttfb"], strict=True)
                ],
                target=("<=", 1.5),
                note="request written to first data: byte, p99 over the storm's streams",
            ),
            figure(
                f"streams, {n} concurrent: longest loop stall (ambient_runs)",
                [v * 1e3 for v in rows["ambient_runs stall"]],
                unit="ms",
                target=("<=", 100.0),
                note="a probe task's lateness by the wall clock, garbage collection included",
            ),
            figure(
                f"streams, {n} concurrent: longest loop stall, loop thread CPU (ambient_runs)",
                [v * 1e3 for v in rows["ambient_runs stall_cpu"]],
                unit="ms",
                note="the same probe by the loop thread's CPU clock: what the loop itself ran "
                "between two wake-ups, without the time the machine's other work took",
            ),
            figure(
                f"streams, {n} concurrent: memory per open stream (ambient_runs)",
                [memory["ambient_runs", int(count)] / 1024],
                unit="KB",
                target=("<=", 16.0),
                note="a fresh worker's peak RSS over one storm minus its RSS before, per stream",
            ),
        ]
        for name in ("ambient_runs", "official"):
            absolute[f"{name}, {n} streams: events/s (median)"] = (
                f"{statistics.median(rows[f'{name} rate']):,.0f}"
            )
            absolute[f"{name}, {n} streams: TTFB p99 (median)"] = (
                f"{statistics.median(rows[f'{name} ttfb']) * 1e3:.1f} ms"
            )
            stall, pause = max(rows[f"{name} stall"]), max(rows[f"{name} gc"])
            absolute[f"{name}, {n} streams: longest stall, longest gc (max)"] = (
                f"{stall * 1e3:.1f} ms, {pause * 1e3:.1f} ms"
            )
            cpu_stall, cpu_pause = max(rows[f"{name} stall_cpu"]), max(rows[f"{name} gc_cpu"])
            absolute[f"{name}, {n} streams: the same by the loop thread's CPU clock (max)"] = (
                f"{cpu_stall * 1e3:.1f} ms, {cpu_pause * 1e3:.1f} ms"
            )
            absolute[f"{name}, {n} streams: memory per stream (fresh worker)"] = (
                f"{memory[name, int(count)] / 1024:.1f} KB"
            )
        frames_ok = frames_ok and set(rows["frames"]) == {total}
    return {
        "title": TITLE,
        "params": {"events": events, "counts": list(counts), "rounds": rounds},
        "unit": "event",
        "samples": samples,
        "figures": figures,
        "absolute": absolute,
        "checks": {"every_stream_got_every_frame": frames_ok},
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        _serve(int(sys.argv[2]))
    else:
        result = run(counts=(int(sys.argv[1]) if sys.argv[1:] else 1000,), rounds=2)
        for fig in result["figures"]:
            print(fig["name"], [round(v, 3) for v in fig["values"]])
        print(json.dumps(result["absolute"], indent=1), result["checks"])
