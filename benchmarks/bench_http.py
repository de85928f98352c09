"""
Over HTTP: SSE events per second and time to first byte, from uvicorn to a client.

One uvicorn server (127.0.0.1, an ephemeral port, a background thread, the
asyncio loop and h11, access log off) serves both candidates; every response
carries the same events: RUN_STARTED, SUBAGENT_STARTED, TEXT_MESSAGE_START,
the deltas, TEXT_MESSAGE_END, SUBAGENT_FINISHED, RUN_FINISHED.

- ``ambient_runs``: ``ambient_runs.asgi.AgentApp`` serving an agent that writes
  the deltas in a subagent (verification on);
- ``official``: a minimal Starlette endpoint that validates the input with
  ``ag_ui.core.RunAgentInput`` and returns a ``StreamingResponse`` over a
  generator building each ``ag_ui.core`` event and yielding
  ``EventEncoder().encode(event)``.

Each agent runs in one of two ways: **burst**, writing every delta back to back
(ours awaits ``ambient_runs.drain()`` after each, as a well-behaved agent does;
the official generator yields each frame to Starlette, which awaits ``send``),
and **yielding**, awaiting ``asyncio.sleep(0)`` after every delta (an agent
relaying a model's tokens as they arrive, one per loop turn), the same in both.

Figures (per-round ratios, ambient_runs over official):

- **single stream** (httpx, *n_events* deltas): events per second; no target;
- **50 concurrent streams** of *stream_events* deltas each, burst and yielding:
  events per second, all 50 responses read to the end (targets: >= 4x burst,
  >= 1.2x yielding, issue 12);
- the same 50-stream runs by **process CPU time** (both threads), reported
  beside the wall-clock figures: on a machine shared with other work, the
  wall clock of a round also counts whatever else ran meanwhile;
- **time to first byte**, one stream of *stream_events* deltas (burst): from
  writing the request to the first ``data:`` byte, the median over
  *ttfb_requests* requests per candidate per round, the candidates alternating
  request by request. Judged (target: <= 1.5x the official endpoint's) with the
  client in a process of its own, as a browser is; reported with the client
  in the server's process too.

The concurrent and time-to-first-byte figures use a minimal HTTP/1.1 client
on raw asyncio sockets (persistent connections, the chunked body read until its
last chunk), so that the client's own cost, the same for both, does not drown
the server's. For the throughput figures server and client share the process
(and its GIL), and both candidates pay that equally: the client's work is a
share of every event.

Time to first byte is different: a client thread in the server's process
measures when it gets the GIL, not when the first frame is on the socket. A
thread woken by its socket waits for the GIL until the server thread goes
idle or has held it for the switch interval (5 ms); each ``send`` releases
it for a syscall, too briefly for the woken thread to take it, unless there
are many. The official endpoint makes a syscall per event, ``AgentApp`` one
per batch, so in-process the figure swings with the machine's thread wake-up
latency: 0.85x one day and 2.9x the next for the same code on the same
machine, where a client in a process of its own measured 0.9x. Each request
also waits `_SETTLE` after the one before: back to back, a request that
followed the official endpoint's took 0.94 ms to its first byte, one that
followed ours 0.57 ms (Starlette's teardown of the response before).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import ambient_runs as ar
from benchmarks import INPUT, figure, interleave, interleave_async

TITLE = "over HTTP (uvicorn, SSE events per second and time to first byte)"

_DELTA = "token "

_ROOT = os.fspath(Path(__file__).resolve().parent.parent)
"""The checkout, where the time-to-first-byte client's process imports `benchmarks` from."""

_SETTLE = 0.005
"""
Seconds between two time-to-first-byte requests: what the server does after
sending a response (Starlette's task group and the request's teardown, the
run's end) is the previous request's, not the next one's first byte.
"""

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def _ours(n_events: int, *, yielding: bool = False) -> ASGIApp:
    from ambient_runs.asgi import AgentApp

    async def burst(run: Any) -> None:
        async with ar.subagent("writer"):
            with ar.message() as handle:
                write = handle.write
                for _ in range(n_events):
                    write(_DELTA)
                    await ar.drain()

    async def yields(run: Any) -> None:
        async with ar.subagent("writer"):
            with ar.message() as handle:
                write = handle.write
                for _ in range(n_events):
                    write(_DELTA)
                    await asyncio.sleep(0)

    return AgentApp(yields if yielding else burst, verify=True)


def _official(n_events: int, *, yielding: bool = False) -> ASGIApp:
    from ag_ui import core
    from ag_ui.encoder import EventEncoder
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    encoder = EventEncoder()

    async def endpoint(request: Request) -> StreamingResponse:
        body = core.RunAgentInput.model_validate(await request.json())
        thread_id, run_id = body.thread_id, body.run_id

        async def frames() -> Any:
            sub, mid = f"{run_id}-sub-1", f"{run_id}-msg-1"
            encode = encoder.encode
            yield encode(
                core.RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version="1.0")
            )
            yield encode(core.SubagentStartedEvent(subagent_run_id=sub, name="writer"))
            yield encode(
                core.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=sub)
            )
            for _ in range(n_events):
                yield encode(
                    core.TextMessageContentEvent(message_id=mid, delta=_DELTA, subagent_run_id=sub)
                )
                if yielding:
                    await asyncio.sleep(0)
            yield encode(core.TextMessageEndEvent(message_id=mid, subagent_run_id=sub))
            yield encode(core.SubagentFinishedEvent(subagent_run_id=sub))
            yield encode(core.RunFinishedEvent(thread_id=thread_id, run_id=run_id))

        return StreamingResponse(frames(), media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def _dispatch(apps: dict[str, ASGIApp]) -> ASGIApp:
    """Route by the first path segment: ``/ours/``, ``/official-yield/``, …"""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        name = scope["path"].strip("/").split("/")[0]
        await apps[name]({**scope, "path": "/", "raw_path": b"/"}, receive, send)

    return app


class _Server:
    """uvicorn on 127.0.0.1, an ephemeral port, in a daemon thread."""

    def __init__(self, app: ASGIApp) -> None:
        import uvicorn

        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            backlog=256,
            timeout_keep_alive=600,  # a stream that ends first waits for the other 49
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)

    def __enter__(self) -> tuple[str, int]:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return "127.0.0.1", port

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


_LAST_CHUNK = b"\r\n0\r\n\r\n"


class _Connection:
    """One persistent HTTP/1.1 connection: POST the input, read the chunked SSE response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()

    async def post(self, request: bytes) -> tuple[bytes, float]:
        """Send *request*; return the raw response and the seconds to its first ``data:``."""
        read = self.reader.read
        start = time.perf_counter()
        self.writer.write(request)
        chunks: list[bytes] = []
        first = 0.0
        while True:
            chunk = await read(1 << 20)
            if not chunk:
                raise RuntimeError("the server closed the connection mid-response")
            chunks.append(chunk)
            if not first and b"data: " in chunk:
                first = time.perf_counter() - start
            if chunk.endswith(_LAST_CHUNK) or (
                len(chunk) < len(_LAST_CHUNK) and b"".join(chunks[-2:]).endswith(_LAST_CHUNK)
            ):
                return b"".join(chunks), first


def _request(host: str, port: int, path: str) -> bytes:
    body = json.dumps(INPUT).encode()
    return (
        f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _first_bytes(
    connection: _Connection, host: str, port: int, rounds: int, requests: int
) -> dict[str, list[float]]:
    """Per round, each candidate's median seconds to its first ``data:`` (burst)."""
    ours, official = _request(host, port, "/ours-burst/"), _request(host, port, "/official-burst/")
    order = [("ambient_runs", ours), ("official", official)]
    ttfb: dict[str, list[float]] = {"ambient_runs": [], "official": []}
    for r in range(rounds):
        times: dict[str, list[float]] = {"ambient_runs": [], "official": []}
        for i in range(requests):
            for name, request in order if (i + r) % 2 == 0 else order[::-1]:
                await asyncio.sleep(_SETTLE)  # the previous response's teardown, untimed
                _, first = await connection.post(request)
                times[name].append(first)
        for name, values in times.items():
            ttfb[name].append(statistics.median(values))
    return ttfb


async def _first_bytes_apart(
    host: str, port: int, rounds: int, requests: int
) -> dict[str, list[float]]:
    """`_first_bytes`, the client in a process of its own (``python -m benchmarks.bench_http``)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.bench_http",
        host,
        str(port),
        str(rounds),
        str(requests),
        cwd=_ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, (_ROOT, os.environ.get("PYTHONPATH")))),
        },
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the time-to-first-byte client exited with {process.returncode}")
    found: dict[str, list[float]] = json.loads(out)
    return found


async def _client_apart(host: str, port: int, rounds: int, requests: int) -> None:
    """The client of `_first_bytes_apart`: print `_first_bytes`' figures as JSON."""
    connection = await _Connection.open(host, port)
    try:
        ttfb = await _first_bytes(connection, host, port, rounds, requests)
    finally:
        connection.close()
    print(json.dumps(ttfb))


def _dechunk(raw: bytes) -> tuple[int, bytes]:
    """The status and the body of a chunked HTTP/1.1 response."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"transfer-encoding: chunked" in head.lower(), head
    body = bytearray()
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return status, bytes(body)
        body += rest[:size]
        rest = rest[size + 2 :]


async def _concurrent(
    host: str, port: int, stream_events: int, streams: int, rounds: int, ttfb_requests: int
) -> dict[str, Any]:
    """The 50-stream throughput and the time to first byte, on the client's own loop."""
    total = stream_events + 6
    paths = {
        "ours-burst": "/ours-burst/",
        "official-burst": "/official-burst/",
        "ours-yield": "/ours-yield/",
        "official-yield": "/official-yield/",
    }
    requests = {name: _request(host, port, path) for name, path in paths.items()}
    pool = [await _Connection.open(host, port) for _ in range(streams)]
    try:
        bodies: dict[str, bytes] = {}
        cpu: dict[str, list[float]] = {name: [] for name in paths}

        def throughput(name: str) -> Callable[[], Awaitable[float]]:
            request = requests[name]

            async def fetch() -> float:
                start, start_cpu = time.perf_counter(), time.process_time()
                answers = await asyncio.gather(*(c.post(request) for c in pool))
                elapsed = time.perf_counter() - start
                cpu[name].append((time.process_time() - start_cpu) / (streams * total))
                bodies[name] = answers[-1][0]
                return elapsed / (streams * total)

            return fetch

        burst = {
            "ambient_runs": throughput("ours-burst"),
            "official": throughput("official-burst"),
        }
        yields = {
            "ambient_runs": throughput("ours-yield"),
            "official": throughput("official-yield"),
        }
        for fetch in (*burst.values(), *yields.values()):  # warm up (and the bodies), untimed
            await fetch()
        decoded = {name: _dechunk(raw) for name, raw in bodies.items()}
        checks = {
            "concurrent_status_200": {s for s, _ in decoded.values()} == {200},
            "concurrent_frames_per_response": {
                name: body.count(b"data: ") for name, (_, body) in decoded.items()
            },
            "concurrent_identical_bodies": (
                decoded["ours-burst"][1]
                == decoded["official-burst"][1]
                == decoded["ours-yield"][1]
                == decoded["official-yield"][1]
            ),
            "concurrent_all_frames_received": {
                body.count(b"data: ") for _, body in decoded.values()
            }
            == {total},
        }
        for values in cpu.values():
            values.clear()  # the warm-up's
        burst_samples = await interleave_async(burst, rounds)
        yield_samples = await interleave_async(yields, rounds)

        ttfb = await _first_bytes(pool[0], host, port, rounds, ttfb_requests)
        ttfb_apart = await _first_bytes_apart(host, port, rounds, ttfb_requests)
    finally:
        for connection in pool:
            connection.close()
    return {
        "burst": burst_samples,
        "yield": yield_samples,
        "ttfb": ttfb,
        "ttfb_apart": ttfb_apart,
        "cpu": cpu,
        "checks": checks,
    }


def _ratios(ttfb: dict[str, list[float]]) -> list[float]:
    """Per-round time to first byte of ambient_runs over official's."""
    return [a / o for a, o in zip(ttfb["ambient_runs"], ttfb["official"], strict=True)]


def _speed(samples: dict[str, list[float]]) -> list[float]:
    """Per-round events/s of ambient_runs over official's (samples are seconds per event)."""
    return [o / a for a, o in zip(samples["ambient_runs"], samples["official"], strict=True)]


def run(
    n_events: int = 20_000,
    rounds: int = 6,
    *,
    stream_events: int = 1000,
    streams: int = 50,
    concurrent_rounds: int | None = None,
    ttfb_requests: int = 40,
) -> dict[str, Any]:
    """Time the single stream, the 50 concurrent streams and the time to first byte."""
    import httpx

    total = n_events + 6
    apps = {
        "ours": _ours(n_events),
        "official": _official(n_events),
        "ours-burst": _ours(stream_events),
        "official-burst": _official(stream_events),
        "ours-yield": _ours(stream_events, yielding=True),
        "official-yield": _official(stream_events, yielding=True),
    }
    bodies: dict[str, bytes] = {}
    with _Server(_dispatch(apps)) as (host, port):
        base = f"http://{host}:{port}"
        with httpx.Client(base_url=base, timeout=120) as client:

            def candidate(name: str) -> Callable[[], float]:
                def fetch() -> float:
                    chunks: list[bytes] = []
                    start = time.perf_counter()
                    with client.stream("POST", f"/{name}/", json=INPUT) as response:
                        response.raise_for_status()
                        for chunk in response.iter_raw():
                            chunks.append(chunk)
                    elapsed = time.perf_counter() - start
                    bodies[name] = b"".join(chunks)
                    return elapsed / total

                return fetch

            candidates = {"ambient_runs": candidate("ours"), "official": candidate("official")}
            for fetch in candidates.values():  # warm up (and the bodies to check), untimed
                fetch()
            frames = {name: body.count(b"data: ") for name, body in bodies.items()}
            identical = bodies["ours"] == bodies["official"]
            samples = interleave(candidates, rounds)
        concurrent = asyncio.run(
            _concurrent(
                host, port, stream_events, streams, concurrent_rounds or rounds, ttfb_requests
            )
        )
    ttfb, ttfb_apart, cpu = concurrent["ttfb"], concurrent["ttfb_apart"], concurrent["cpu"]
    return {
        "title": TITLE,
        "params": {
            "n_events": n_events,
            "rounds": rounds,
            "events_per_response": total,
            "stream_events": stream_events,
            "streams": streams,
            "concurrent_rounds": concurrent_rounds or rounds,
            "ttfb_requests": ttfb_requests,
            "server": "uvicorn, asyncio loop, h11",
        },
        "unit": "event",
        "samples": {
            **samples,
            **{f"{k} (50 streams, burst)": v for k, v in concurrent["burst"].items()},
            **{f"{k} (50 streams, yielding)": v for k, v in concurrent["yield"].items()},
        },
        "figures": [
            figure(
                "http: ambient_runs / official (events per second)",
                _speed(samples),
                note="one stream (httpx client); above 1: ambient_runs streams faster",
            ),
            figure(
                f"http, {streams} streams, burst: events/s vs official",
                _speed(concurrent["burst"]),
                target=(">=", 4.0),
                note="the agent writes every delta back to back (awaiting drain())",
            ),
            figure(
                f"http, {streams} streams, yielding: events/s vs official",
                _speed(concurrent["yield"]),
                target=(">=", 1.2),
                note="both agents await asyncio.sleep(0) after every delta",
            ),
            figure(
                f"http, {streams} streams, burst: CPU per event, official / ours",
                _speed({"ambient_runs": cpu["ours-burst"], "official": cpu["official-burst"]}),
                note="process CPU time (server and client threads), not judged: robust to load",
            ),
            figure(
                f"http, {streams} streams, yielding: CPU per event, official / ours",
                _speed({"ambient_runs": cpu["ours-yield"], "official": cpu["official-yield"]}),
                note="process CPU time (server and client threads), not judged: robust to load",
            ),
            figure(
                "http, time to first byte p50 / official",
                _ratios(ttfb_apart),
                target=("<=", 1.5),
                note="one stream, burst; request written to first data: byte; the client "
                "in a process of its own",
            ),
            figure(
                "http, time to first byte p50 / official, client in the server's process",
                _ratios(ttfb),
                note="not judged: the client thread waits for the server's GIL (see the module)",
            ),
        ],
        "absolute": {
            **{
                f"{name} events/s (median)": f"{1 / statistics.median(v):,.0f}"
                for name, v in samples.items()
            },
            **{
                f"{name} events/s, {streams} streams {mode} (median)": (
                    f"{1 / statistics.median(v):,.0f}"
                )
                for mode in ("burst", "yield")
                for name, v in concurrent[mode].items()
            },
            **{
                f"{name} time to first byte p50 (median){where}": (
                    f"{statistics.median(v) * 1e3:.3f} ms"
                )
                for where, found in (("", ttfb_apart), (", client in-process", ttfb))
                for name, v in found.items()
            },
        },
        "checks": {
            "frames_per_response": frames,
            "all_frames_received": set(frames.values()) == {total},
            "identical_bodies": identical,
            **concurrent["checks"],
        },
    }


if __name__ == "__main__":  # the client of `_first_bytes_apart`: host port rounds requests
    _host, _port, _rounds, _requests = sys.argv[1:]
    asyncio.run(_client_apart(_host, int(_port), int(_rounds), int(_requests)))
