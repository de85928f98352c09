"""
Detached runs on Redis: appends per second, a detached run against the same run without
a store, and the replay of a finished run.

The benchmark starts its own ``redis-server`` (127.0.0.1, a free port, no persistence)
and stops it by its PID at the end. Three measurements:

- **appends**: `RedisStore.append` of *append_events* events (a typical
  ``TEXT_MESSAGE_CONTENT``, about 110 bytes of JSON each) in batches of *batch*, one
  append awaited after the other into one run, each with ``first=`` (the idempotent
  form an owner retries with): the rate one worker logs at when its loop ticks gather
  *batch* events. Target: at least 200,000 events/s (issue 35; 50,000 before).
- **detached / plain**: one uvicorn (127.0.0.1, a background thread) serves the same
  agent twice, as ``AgentApp(agent)`` and as ``AgentApp(agent, store=RedisStore(...))``;
  an ``httpx.Client`` in the main thread POSTs to each in turn (a fresh run id every
  time) and reads the whole SSE body. The agent writes *n_events* deltas in a subagent,
  awaiting ``ambient_runs.drain()`` after each, as in ``bench_http``. The figure is the
  per-round ratio of events per second, detached over plain, measured interleaved.
  Target: at least 0.5. The same pair is also called as ASGI applications directly
  (no server, no client: the app's own cost only), with the same target. Over HTTP
  the detached run sends what one append acknowledged as one body chunk while the
  plain one sends a chunk per event, so there the ratio is well above 1; the direct
  figure is the one that shows what the store costs.
- **replay**: a detached run of *replay_events* deltas is run to its end once; then
  each round a *second* ``AgentApp`` on the same Redis (another worker: nothing of the
  run in its memory) answers ``GET …/threads/{threadId}/runs/{runId}?after=0``, timed
  from the request to the last byte of the body, by a client in a process of its own
  (raw socket, one connection). Target: at most 100 ms (issue 35; under 200 ms
  before). The same run *joined* (no cursor: a prelude folded from the whole log) is
  timed the same way and reported.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import ambient_runs as ar
from benchmarks import INPUT, figure, interleave, ratios
from benchmarks._redis import redis_server

TITLE = "detached runs on Redis (appends/s, detached / plain, replay of a finished run)"

_DELTA = "token "
_EVENT = (
    b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"bench-run-msg-1","delta":"token ",'
    b'"subagentRunId":"bench-run-sub-1"}'
)

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


# ---------------------------------------------------------------- appends


async def _appends(url: str, n_events: int, batch: int, rounds: int) -> list[float]:
    """Events per second appended, one value per round (a fresh run each round)."""
    from ambient_runs.stores.redis import RedisStore

    store = RedisStore(url, prefix=f"bench-{uuid.uuid4().hex}:", max_events=n_events + batch)
    events = [_EVENT] * batch
    rates = []
    try:
        for r in range(rounds + 1):  # the first round warms up the connection and scripts
            run_id = f"append-{r}"
            await store.create("t", run_id, input=b"{}", owner="bench", lease=30)
            done = 0
            start = time.perf_counter()
            while done < n_events:
                # first=: the idempotent form a retrying owner uses (a batch already logged
                # is not written twice); its check runs inside the same script as the write.
                await store.append("t", run_id, events, first=done + 1)
                done += batch
            elapsed = time.perf_counter() - start
            if r:
                rates.append(done / elapsed)
    finally:
        await store.aclose()
    return rates


async def _entries(url: str, prefix: str, run_id: str) -> int:
    """How many stream entries (appends) the detached run *run_id* made."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        thread = str(INPUT["threadId"])
        return int(await client.xlen(f"{prefix}{len(thread)}:{thread}:{run_id}:events"))
    finally:
        await client.aclose()


# ---------------------------------------------------------------- the runs


def _agent(n_events: int) -> Callable[[ar.Run], Awaitable[None]]:
    async def agent(run: ar.Run) -> None:
        async with ar.subagent("writer"):
            with ar.message() as handle:
                write = handle.write
                for _ in range(n_events):
                    write(_DELTA)
                    await ar.drain()

    return agent


def _apps(url: str, n_events: int, replay_events: int, prefix: str) -> dict[str, ASGIApp]:
    from ambient_runs.asgi import AgentApp
    from ambient_runs.stores.redis import RedisStore

    agent = _agent(n_events)
    return {
        "plain": AgentApp(agent, verify=True),
        "detached": AgentApp(agent, verify=True, store=RedisStore(url, prefix=prefix)),
        "long": AgentApp(_agent(replay_events), verify=True, store=RedisStore(url, prefix=prefix)),
        "replayer": AgentApp(agent, verify=True, store=RedisStore(url, prefix=prefix)),
    }


def _dispatch(apps: dict[str, ASGIApp], loops: list[asyncio.AbstractEventLoop]) -> ASGIApp:
    """
    Route by the first path segment (``/plain/…``, ``/detached/…``), which is stripped.

    The server's event loop is put in *loops* (the stores' connections live there).
    """

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if not loops:
            loops.append(asyncio.get_running_loop())
        if scope["type"] != "http":
            return
        name, _, rest = scope["path"].lstrip("/").partition("/")
        path = "/" + rest
        await apps[name]({**scope, "path": path, "raw_path": path.encode()}, receive, send)

    return app


class _Server:
    """uvicorn on 127.0.0.1, an ephemeral port, in a daemon thread with its own loop."""

    def __init__(self, app: ASGIApp) -> None:
        import uvicorn

        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def _body(run_id: str) -> dict[str, Any]:
    return {**INPUT, "runId": run_id}


def _data_lines(body: bytes, run_id: str) -> list[bytes]:
    """The ``data:`` lines of an SSE body, with the run id masked (it differs per request)."""
    mask = run_id.encode()
    return [line.replace(mask, b"RUN") for line in body.split(b"\n") if line.startswith(b"data: ")]


def _ids(body: bytes) -> list[int]:
    return [int(line[4:]) for line in body.split(b"\n") if line.startswith(b"id: ")]


async def _direct(app: ASGIApp, run_id: str) -> tuple[float, bytes]:
    """Call *app* as ASGI for one run, no server: seconds to the end of the body, the body."""
    import json

    payload = json.dumps(_body(run_id)).encode()
    chunks: list[bytes] = []
    finished = asyncio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    start = time.perf_counter()
    await app(scope, receive, send)
    return time.perf_counter() - start, b"".join(chunks)


def _replays_apart(base: str, path: str, count: int) -> tuple[list[float], bytes]:
    """
    *count* replays of *path*, timed by a client in a process of its own; the last body.

    In this process the client thread would wait for the server thread's GIL (and
    httpx's parsing of a megabyte would count), so the figure would be the two threads'
    sum, not what a joining client waits.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = os.fspath(Path(__file__).resolve().parent.parent)
    host, port = base.removeprefix("http://").split(":")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_store", host, port, path, str(count)],
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))),
        },
        capture_output=True,
        check=True,
        timeout=300,
    )
    times_line, _, body = done.stdout.partition(b"\n")
    return [float(t) for t in times_line.split()], body


def _replay_client(host: str, port: int, path: str, count: int) -> None:
    """The client of `_replays_apart`: GET *path* *count* times on one connection; print."""
    import socket

    from benchmarks.bench_http import _dechunk

    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = f"GET {path} HTTP/1.1\r\nhost: {host}:{port}\r\n\r\n".encode()
    times, raw = [], b""
    for _ in range(count):
        data = bytearray()
        start = time.perf_counter()
        sock.sendall(request)
        while not data.endswith(b"\r\n0\r\n\r\n"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the server closed the connection mid-response")
            data += chunk
        times.append(time.perf_counter() - start)
        raw = bytes(data)
    sock.close()
    sys.stdout.buffer.write(" ".join(map(repr, times)).encode() + b"\n" + _dechunk(raw)[1])


def run(
    n_events: int = 10_000,
    rounds: int = 8,
    append_events: int = 200_000,
    batch: int = 256,
    replay_events: int = 10_000,
) -> dict[str, Any]:
    """Start a redis-server, measure appends, detached against plain, and replays."""
    import httpx

    total = n_events + 6
    with redis_server() as url:
        append_rates = asyncio.run(_appends(url, append_events, batch, rounds))
        prefix = f"bench-{uuid.uuid4().hex}:"
        apps = _apps(url, n_events, replay_events, prefix)
        bodies: dict[str, tuple[str, bytes]] = {}
        loops: list[asyncio.AbstractEventLoop] = []
        server = _Server(_dispatch(apps, loops))
        with server as base, httpx.Client(base_url=base, timeout=120) as client:

            def over_http(name: str) -> Callable[[], float]:
                def fetch() -> float:
                    run_id = f"{name}-{uuid.uuid4().hex}"
                    chunks: list[bytes] = []
                    start = time.perf_counter()
                    with client.stream("POST", f"/{name}/", json=_body(run_id)) as response:
                        response.raise_for_status()
                        for chunk in response.iter_raw():
                            chunks.append(chunk)
                    elapsed = time.perf_counter() - start
                    bodies[name] = (run_id, b"".join(chunks))
                    return elapsed / total

                return fetch

            http = {"plain": over_http("plain"), "detached": over_http("detached")}
            for fetch in http.values():  # warm up, and the bodies to check: untimed
                fetch()
            same_data = _data_lines(bodies["plain"][1], bodies["plain"][0]) == _data_lines(
                bodies["detached"][1], bodies["detached"][0]
            )
            detached_ids = _ids(bodies["detached"][1])
            entries = asyncio.run(_entries(url, prefix, bodies["detached"][0]))
            http_samples = interleave(http, rounds)

            # The finished run to replay, then its replays from the other worker.
            long_id = f"long-{uuid.uuid4().hex}"
            with client.stream("POST", "/long/", json=_body(long_id)) as response:
                response.raise_for_status()
                long_body = response.read()
            replay_path = f"/replayer/threads/{INPUT['threadId']}/runs/{long_id}?after=0"
            replays, replay_body = _replays_apart(base, replay_path, rounds + 1)
            replays = replays[1:]  # the first one warms the other worker's connection up
            # A join (no cursor): the prelude folded from the whole log, then the end.
            joins, _ = _replays_apart(base, replay_path.partition("?")[0], rounds + 1)
            joins = joins[1:]
            for app in apps.values():  # close the stores in the loop their connections use
                store = getattr(app, "store", None)
                if store is not None:
                    asyncio.run_coroutine_threadsafe(store.aclose(), loops[0]).result(30)

        # The same two apps called directly, in a loop of their own (no server, no client).
        async def direct() -> dict[str, list[float]]:
            from benchmarks import interleave_async

            # The stores' connections belong to the server's loop, which is gone: new ones.
            direct_apps = _apps(url, n_events, replay_events, f"bench-{uuid.uuid4().hex}:")

            def candidate(name: str) -> Callable[[], Awaitable[float]]:
                async def call() -> float:
                    elapsed, _ = await _direct(direct_apps[name], f"{name}-{uuid.uuid4().hex}")
                    return elapsed / total

                return call

            candidates = {"plain": candidate("plain"), "detached": candidate("detached")}
            for call in candidates.values():
                await call()
            try:
                return await interleave_async(candidates, rounds)
            finally:
                for app in direct_apps.values():
                    store = getattr(app, "store", None)
                    if store is not None:
                        await store.aclose()

        direct_samples = asyncio.run(direct())

    replay_ids = _ids(replay_body)
    long_total = replay_events + 6
    samples = {
        "plain over HTTP": http_samples["plain"],
        "detached over HTTP": http_samples["detached"],
        "plain, ASGI direct": direct_samples["plain"],
        "detached, ASGI direct": direct_samples["detached"],
    }
    speed = ratios(http_samples, "plain", "detached")
    direct_speed = ratios(direct_samples, "plain", "detached")
    return {
        "title": TITLE,
        "params": {
            "n_events": n_events,
            "rounds": rounds,
            "append_events": append_events,
            "batch": batch,
            "replay_events": replay_events,
        },
        "unit": "event",
        "samples": samples,
        "figures": [
            figure(
                f"store: events/s appended into local Redis (batches of {batch})",
                append_rates,
                unit="ev/s",
                target=(">=", 200_000),
                note="one worker, one run, idempotent batches (first=), each append awaited "
                "before the next (issue 35)",
            ),
            figure(
                "store: detached / plain run over HTTP (events per second)",
                speed,
                target=(">=", 0.5),
                note="the same agent, AgentApp with a RedisStore over AgentApp without",
            ),
            figure(
                "store: detached / plain run, ASGI direct (events per second)",
                direct_speed,
                target=(">=", 0.5),
                note="no server, no client: the app's own cost",
            ),
            figure(
                f"store: replay of a finished run, {replay_events:,} events, to last byte",
                [seconds * 1000 for seconds in replays],
                unit="ms",
                target=("<=", 100),
                note="GET ?after=0 on another worker of the same Redis, over loopback, the "
                "client in a process of its own (issue 35)",
            ),
            figure(
                f"store: join of a finished run (no cursor), {replay_events:,} events, "
                "to last byte",
                [seconds * 1000 for seconds in joins],
                unit="ms",
                note="GET with no cursor: the prelude RunView folds from the whole log; "
                "as the replay above",
            ),
        ],
        "absolute": {
            **{
                f"{name} events/s (median)": f"{1 / sorted(v)[len(v) // 2]:,.0f}"
                for name, v in samples.items()
            },
            "appended events/s (median)": f"{sorted(append_rates)[len(append_rates) // 2]:,.0f}",
            "detached run over HTTP: events per append": f"{total / entries:,.1f}",
        },
        "checks": {
            "detached_data_equals_plain": same_data,
            "detached_ids_dense": detached_ids == list(range(1, total + 1)),
            "replay_frames_complete": replay_ids == list(range(1, long_total + 1)),
            "replay_equals_the_live_stream": replay_body == long_body,
        },
    }


if __name__ == "__main__":  # the client of `_replays_apart`: host port path count
    _replay_client(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
