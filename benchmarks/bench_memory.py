"""
Memory under a slow consumer: peak RSS growth while streaming *n_events* events.

In a fresh subprocess (so the peak belongs to this measurement alone), an agent
run through ``ambient_runs.stream`` (verification on) writes *n_events* deltas
to a message as fast as it can, awaiting ``ambient_runs.drain()`` every
*drain_every* events. The consumer is slower: for each event it encodes the SSE
frame and awaits ``asyncio.sleep(0)`` (a socket write that yields), so between
two of its reads the agent gets to emit a burst. Only backpressure keeps the
buffer bounded.

Peak RSS is read after a short warm-up stream and again at the end; the growth
is the figure (a second run with ``record_messages=True`` shows what keeping
the run's history, the message's text, adds). The peak is
``/proc/self/status``'s ``VmHWM`` on Linux (not
``ru_maxrss``, which a child inherits from its parent across ``exec``), and
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` elsewhere; ``VmRSS`` is also
sampled during the stream where available. A control run (in its
own subprocess: the same *n_events* events, the agent never draining) shows
what the same measurement reports when nothing bounds the buffer.

Target: growth < 64 MB.

Also, by ``tracemalloc`` in this process (`kept`): the memory a run keeps per
finished ``@subagent`` call while it stays open (target < 16 B at 1,000,000
calls), and per open idle `Run` (target <= 4 KB), issue 12's target 4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

TITLE = "memory under a slow consumer (stream + drain, peak RSS growth)"

_DELTA = "token "


def _status_mb(field: str) -> float | None:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MB; None without /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _rss_now_mb() -> float | None:
    return _status_mb("VmRSS")


def _maxrss_mb() -> float:
    """
    This process's peak RSS in MB.

    Linux's ``VmHWM`` when there is one: ``ru_maxrss`` survives ``exec``, so in a
    child spawned (vfork + exec) by a large parent it starts at the parent's size
    and hides any growth below that. Elsewhere ``ru_maxrss``.
    """
    peak = _status_mb("VmHWM")
    if peak is not None:
        return peak
    rusage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rusage / (1024 * 1024) if sys.platform == "darwin" else rusage / 1024


async def _stream_once(
    n_events: int, drain_every: int, buffer: int, *, history: bool = False
) -> dict[str, Any]:
    import ambient_runs as ar
    from ambient_runs import _stream, sse
    from ambient_runs import events as ev
    from benchmarks import INPUT

    stream = getattr(ar, "stream", _stream.stream)  # the module's until it is exported

    async def agent(run: Any) -> None:
        async with ar.subagent("producer"):
            with ar.message() as handle:
                write = handle.write
                for i in range(1, n_events + 1):
                    write(_DELTA)
                    if drain_every and i % drain_every == 0:
                        await ar.drain()

    events = stream(agent, INPUT, buffer=buffer, verify=True, record_messages=history)
    received = 0
    encoded_bytes = 0
    sampled_peak = 0.0
    last: Any = None
    start = time.perf_counter()
    async for event in events:
        encoded_bytes += len(sse.encode(event))
        received += 1
        last = event
        await asyncio.sleep(0)
        if received % 20_000 == 0:
            now = _rss_now_mb()
            if now is not None and now > sampled_peak:
                sampled_peak = now
    elapsed = time.perf_counter() - start
    stats = events.statistics()
    return {
        "received": received,
        "encoded_bytes": encoded_bytes,
        "last_event": type(last).__name__,
        "finished": isinstance(last, ev.RunFinishedEvent),
        "max_buffered": stats.max_buffered,
        "high_water": stats.high_water,
        "elapsed_s": elapsed,
        "sampled_peak_rss_mb": sampled_peak or None,
    }


def child(
    n_events: int, drain_every: int, buffer: int, *, history: bool = False
) -> dict[str, Any]:
    """The measurement, in this process: warm up, then stream and compare peak RSS."""
    warm_up = _stream_once(min(2000, n_events), drain_every, buffer, history=history)
    asyncio.run(warm_up)  # imports, caches
    before_peak, before_now = _maxrss_mb(), _rss_now_mb()
    result = asyncio.run(_stream_once(n_events, drain_every, buffer, history=history))
    after_peak = _maxrss_mb()
    result.update(
        n_events=n_events,
        drain_every=drain_every,
        buffer=buffer,
        peak_rss_before_mb=before_peak,
        rss_before_mb=before_now,
        peak_rss_after_mb=after_peak,
        peak_rss_growth_mb=after_peak - before_peak,
    )
    return result


def _in_subprocess(
    n_events: int, drain_every: int, buffer: int, *, history: bool = False
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_memory",
        "--child",
        str(n_events),
        "--drain-every",
        str(drain_every),
        "--buffer",
        str(buffer),
        *(("--history",) if history else ()),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory child failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def kept(n_calls: int, n_runs: int) -> dict[str, float]:
    """
    Bytes kept, by tracemalloc, per finished ``@subagent`` call and per open idle `Run`.

    Calls: one run (verification on, a sink that keeps nothing) makes *n_calls*
    calls of an empty ``@subagent`` coroutine; what is still allocated when they
    have all finished, while the run is still open, divided by *n_calls*.
    Runs: *n_runs* entered runs (``RUN_STARTED`` sent, nothing else) held
    open at once; what they hold, divided by *n_runs*. Both after a warm-up and
    a full collection, so caches and interned strings are not counted.
    """
    import gc
    import tracemalloc

    import ambient_runs as ar
    from benchmarks import INPUT

    def sink(event: object) -> None:
        pass

    @ar.subagent("child")
    async def child() -> None:
        pass

    async def calls() -> float:
        async with ar.Run(INPUT, sink=sink, verify=True):
            for _ in range(100):
                await child()
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for _ in range(n_calls):
                    await child()
                gc.collect()
                return (tracemalloc.get_traced_memory()[0] - before) / n_calls
            finally:
                tracemalloc.stop()

    async def runs() -> float:
        input = ar.RunAgentInput.from_wire(INPUT)
        held = []
        for _ in range(10):
            held.append(await ar.Run(input, sink=sink, verify=True).__aenter__())
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(n_runs):
                held.append(await ar.Run(input, sink=sink, verify=True).__aenter__())
            gc.collect()
            return (tracemalloc.get_traced_memory()[0] - before) / n_runs
        finally:
            tracemalloc.stop()

    return {"per_call": asyncio.run(calls()), "per_run": asyncio.run(runs())}


def run(
    n_events: int = 1_000_000,
    drain_every: int = 100,
    buffer: int = 1024,
    n_calls: int = 1_000_000,
    n_runs: int = 1000,
) -> dict[str, Any]:
    """Measure in a subprocess; also a control (the same events, no drain) in another."""
    measured = _in_subprocess(n_events, drain_every, buffer)
    control = _in_subprocess(n_events, 0, buffer)
    recorded = _in_subprocess(n_events, drain_every, buffer, history=True)
    growth = measured["peak_rss_growth_mb"]
    text_mb = n_events * len(_DELTA) / 1e6
    held = kept(n_calls, n_runs)
    return {
        "title": TITLE,
        "params": {
            "n_events": n_events,
            "drain_every": drain_every,
            "buffer": buffer,
            "n_calls": n_calls,
            "n_runs": n_runs,
        },
        "unit": "event",
        "samples": {},
        "figures": [
            {
                "name": f"memory: peak RSS growth, {n_events:,} events",
                "values": [growth],
                "unit": "MB",
                "target": {"op": "<", "value": 64.0},
                "note": ("one measurement in a fresh subprocess"),
            },
            {
                "name": f"memory: the same, record_messages=True, {n_events:,} events",
                "values": [recorded["peak_rss_growth_mb"]],
                "unit": "MB",
                "target": None,
                "note": f"the run's history keeps the message's {text_mb:.1f} MB of text",
            },
            {
                "name": f"memory control: {control['n_events']:,} events, no drain",
                "values": [control["peak_rss_growth_mb"]],
                "unit": "MB",
                "target": None,
                "note": "nothing bounds the buffer: shows the measurement sees growth",
            },
            {
                "name": f"memory kept per finished @subagent call, {n_calls:,} calls",
                "values": [held["per_call"]],
                "unit": "B",
                "target": {"op": "<", "value": 16.0},
                "note": "tracemalloc, one open run (issue 12, target 4)",
            },
            {
                "name": f"memory per open idle Run, {n_runs:,} runs",
                "values": [held["per_run"]],
                "unit": "B",
                "target": {"op": "<=", "value": 4096.0},
                "note": "tracemalloc, entered runs held open (issue 12, target 4)",
            },
        ],
        "absolute": {
            "events streamed": (
                f"{measured['received']:,} ({measured['encoded_bytes']:,} SSE bytes)"
            ),
            "stream time": f"{measured['elapsed_s']:.1f} s",
            "peak RSS before/after": (
                f"{measured['peak_rss_before_mb']:.1f} / {measured['peak_rss_after_mb']:.1f} MB"
            ),
            "max buffered / high water": f"{measured['max_buffered']} / {measured['high_water']}",
            "control max buffered": f"{control['max_buffered']:,}",
        },
        "checks": {
            "all_events_received": measured["received"] == n_events + 6,
            "ended_with_run_finished": measured["finished"],
            "buffer_bounded": measured["max_buffered"] <= buffer + drain_every,
        },
        "measured": measured,
        "control": control,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="memory benchmark child")
    parser.add_argument("--child", type=int, required=True, metavar="N_EVENTS")
    parser.add_argument("--drain-every", type=int, default=100)
    parser.add_argument("--buffer", type=int, default=1024)
    parser.add_argument("--history", action="store_true", help="record_messages=True")
    args = parser.parse_args(argv)
    result = child(args.child, args.drain_every, args.buffer, history=args.history)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
