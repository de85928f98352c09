"""
Followers of one detached run: what a thousand clients joining one run cost a worker.

A ``redis-server`` of the benchmark's own (``benchmarks._redis``) and two uvicorn worker
processes on 127.0.0.1, both ``AgentApp(agent, store=RedisStore(...))`` on it:

- the **owner** runs the agent: it waits for a go (``POST /go/{runId}``, so that every
  follower has joined before the first delta), then writes *events* deltas in a
  subagent, awaiting ``ambient_runs.drain()`` after each;
- the **follower worker** owns nothing: each follower is a
  ``GET /threads/{threadId}/runs/{runId}`` with no cursor (a join: the prelude folded
  from the log, then the live tail), which this worker serves from the store.

The client (this process: raw sockets, asyncio) POSTs the run to the owner, joins it
*followers* times on the follower worker, waits until every join has its prelude, reads
the follower worker's CPU time (its ``time.process_time()``, ``benchmarks._child``), says
go, and reads it again once every follower has the run's last chunk. The figure is the
follower worker's CPU per event delivered (events times followers), 1,000 followers over
one, one value per round (one round: a 1,000-follower run, and *single_runs* one-follower
runs, whose CPU is summed).
Target (issue 35): at most 2x.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from benchmarks import INPUT, figure
from benchmarks._child import Child
from benchmarks._redis import redis_server

TITLE = "followers of one detached run on one worker (CPU per event delivered)"

_ROOT = Path(__file__).resolve().parent.parent
_THREAD = "followers"
_LAST_CHUNK = b"\r\n0\r\n\r\n"


# ---------------------------------------------------------------- the worker processes


def _app(url: str, prefix: str, events: int) -> Any:
    import ambient_runs as ar
    from ambient_runs.asgi import AgentApp
    from ambient_runs.stores.redis import RedisStore

    gates: dict[str, asyncio.Event] = {}

    def gate(run_id: str) -> asyncio.Event:
        return gates.setdefault(run_id, asyncio.Event())

    async def agent(run: ar.Run) -> None:
        await gate(run.input.run_id).wait()
        gates.pop(run.input.run_id, None)
        async with ar.subagent("writer"):
            with ar.message() as handle:
                write = handle.write
                for _ in range(events):
                    write("token ")
                    await ar.drain()

    app = AgentApp(agent, store=RedisStore(url, prefix=prefix), keep_alive=None)

    async def dispatch(scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/go/"):
            gate(path[4:].strip("/")).set()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return dispatch


def _serve(url: str, prefix: str, events: int) -> None:
    from benchmarks._child import serve

    serve(_app(url, prefix, events), backlog=4096)


# ---------------------------------------------------------------- the client


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)


def _post(port: int, path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _read_until(reader: asyncio.StreamReader, seen: bytearray, marker: bytes) -> None:
    while marker not in seen:
        chunk = await reader.read(1 << 16)
        if not chunk:
            raise RuntimeError("the server closed the connection mid-response")
        seen += chunk


async def _drain_to_end(reader: asyncio.StreamReader, seen: bytearray) -> int:
    """Read to the response's last chunk; count the ``data:`` frames it carried."""
    frames = seen.count(b"\ndata: ") + seen.startswith(b"data: ")
    tail = bytes(seen[-16:])
    while not tail.endswith(_LAST_CHUNK):
        chunk = await reader.read(1 << 20)
        if not chunk:
            raise RuntimeError("the server closed the connection mid-response")
        frames += (tail[-8:] + chunk).count(b"\ndata: ")
        tail = (tail + chunk)[-16:]
    return frames


async def _one_run(owner: Child, worker: Child, followers: int) -> tuple[float, list[int]]:
    """One detached run followed *followers* times: the follower worker's CPU, frames each."""
    run_id = f"r-{uuid.uuid4().hex}"
    body = json.dumps({**INPUT, "threadId": _THREAD, "runId": run_id}).encode()
    o_reader, o_writer = await _open(owner.port)
    o_writer.write(_post(owner.port, "/", body))
    started = bytearray()
    await _read_until(o_reader, started, b"RUN_STARTED")  # in the log before it is sent
    join = (
        f"GET /threads/{_THREAD}/runs/{run_id} HTTP/1.1\r\nhost: 127.0.0.1:{worker.port}\r\n"
        "accept: text/event-stream\r\n\r\n"
    ).encode()
    pool = [await _open(worker.port) for _ in range(followers)]
    seen = [bytearray() for _ in pool]
    for _, writer in pool:
        writer.write(join)
    await asyncio.gather(
        *(_read_until(r, s, b"RUN_STARTED") for (r, _), s in zip(pool, seen, strict=True))
    )
    before = worker.cpu()
    _, g_writer = await _open(owner.port)
    g_writer.write(_post(owner.port, f"/go/{run_id}", b""))
    frames = await asyncio.gather(
        *(_drain_to_end(r, s) for (r, _), s in zip(pool, seen, strict=True))
    )
    spent = worker.cpu() - before
    await _drain_to_end(o_reader, started)
    for writer in (o_writer, g_writer, *(w for _, w in pool)):
        writer.close()
    return spent, frames


async def _measure(
    owner: Child, worker: Child, events: int, followers: int, single_runs: int, rounds: int
) -> dict[str, Any]:
    await _one_run(owner, worker, 1)  # warm up: connections, scripts, imports
    many: list[float] = []
    one: list[float] = []
    frames_seen: set[int] = set()
    total = events + 6  # RUN_STARTED, SUBAGENT_STARTED, START, deltas, END, FINISHED x2
    for r in range(rounds):
        order = ("many", "one") if r % 2 == 0 else ("one", "many")
        for kind in order:
            if kind == "many":
                spent, frames = await _one_run(owner, worker, followers)
                many.append(spent / (followers * total))
            else:
                spent = 0.0
                for _ in range(single_runs):
                    cost, frames = await _one_run(owner, worker, 1)
                    spent += cost
                one.append(spent / (single_runs * total))
            frames_seen.update(frames)
    return {"many": many, "one": one, "frames": sorted(frames_seen)}


def run(
    events: int = 1000, followers: int = 1000, single_runs: int = 20, rounds: int = 3
) -> dict[str, Any]:
    """Start Redis and the two workers; follow runs with one and with *followers* clients."""
    prefix = f"bench-{uuid.uuid4().hex}:"
    with (
        redis_server() as url,
        Child("benchmarks.bench_followers", [url, prefix, str(events)]) as owner,
        Child("benchmarks.bench_followers", [url, prefix, str(events)]) as worker,
    ):
        load_before = os.getloadavg()
        found = asyncio.run(_measure(owner, worker, events, followers, single_runs, rounds))
        load_after = os.getloadavg()
        rss = worker.rss()
    many, one = found["many"], found["one"]
    return {
        "title": TITLE,
        "params": {
            "events": events,
            "followers": followers,
            "single_runs": single_runs,
            "rounds": rounds,
        },
        "unit": "event delivered",
        "samples": {f"{followers} followers": many, "one follower": one},
        "figures": [
            figure(
                f"followers: CPU per event delivered, {followers:,} followers / one",
                [a / b for a, b in zip(many, one, strict=True)],
                target=("<=", 2.0),
                note="the follower worker's process CPU; joins over HTTP on a "
                "worker that does not own the run",
            )
        ],
        "absolute": {
            "load average before, after": f"{load_before}, {load_after}",
            "follower worker RSS at the end": f"{rss / 1e6:.1f} MB",
        },
        "checks": {
            # Every follower got the prelude (RUN_STARTED) and every live frame after it.
            "frames_per_follower": found["frames"],
        },
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        _serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(json.dumps(run(events=500, followers=200, single_runs=5, rounds=2), indent=1))
