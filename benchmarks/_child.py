"""
A uvicorn server in a child process of its own, whose CPU time the parent can read.

The benchmarks that judge a server's cost (the peers, the followers, thousands of
streams) run it apart from their client, so that neither the client's work nor the
wait for one GIL is counted as the server's. The child answers ``GET /__cpu__`` with
its own ``time.process_time()`` and its resident set size (nanosecond CPU clock, unlike
the operating system's 10 ms accounting ticks), and stops when its standard input
closes; the parent stops it by its PID if it does not.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Child", "serve"]

ROOT = Path(__file__).resolve().parent.parent

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def _rss() -> int:
    with open("/proc/self/statm") as statm:  # Linux: resident pages are the second field
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Probe:
    """
    A task that sleeps *tick* seconds at a time and records how late it wakes (a loop
    stall, by the wall clock, whatever held the loop: a callback, a collection), the
    longest garbage-collection pause (``gc.callbacks``), and the peak RSS it samples.

    Each is also taken by the loop thread's CPU clock (``time.thread_time``): on a
    machine whose other work takes the cores away, the wall clock also counts the time
    the process was not running; the CPU clock counts only what the loop itself ran.
    """

    def __init__(self, tick: float = 0.002) -> None:
        self.tick = tick
        self.reset()
        self._gc_start = self._gc_start_cpu = 0.0
        gc.callbacks.append(self._gc)

    def reset(self) -> dict[str, float]:
        found = {
            "stall": getattr(self, "stall", 0.0),
            "stall_cpu": getattr(self, "stall_cpu", 0.0),
            "gc": getattr(self, "gc_pause", 0.0),
            "gc_cpu": getattr(self, "gc_cpu", 0.0),
            "gc_count": getattr(self, "gc_count", 0),
            "rss_peak": getattr(self, "rss_peak", 0),
        }
        self.stall, self.stall_cpu, self.gc_pause, self.gc_cpu = 0.0, 0.0, 0.0, 0.0
        self.gc_count, self.rss_peak = 0, _rss()
        return found

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            self._gc_start_cpu = time.thread_time()
        else:
            self.gc_pause = max(self.gc_pause, time.perf_counter() - self._gc_start)
            self.gc_cpu = max(self.gc_cpu, time.thread_time() - self._gc_start_cpu)
            self.gc_count += 1

    async def run(self) -> None:
        tick, clock, cpu = self.tick, time.perf_counter, time.thread_time
        while True:
            before, before_cpu = clock(), cpu()
            await asyncio.sleep(tick)
            late = clock() - before - tick
            if late > self.stall:
                self.stall = late
            held = cpu() - before_cpu  # sleeping costs no CPU: this is what others ran
            if held > self.stall_cpu:
                self.stall_cpu = held
            rss = _rss()
            if rss > self.rss_peak:
                self.rss_peak = rss


def _with_cpu(app: ASGIApp, probe: Probe | None = None) -> ASGIApp:
    async def wrapped(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/__cpu__":
            found: dict[str, Any] = {"cpu": time.process_time(), "rss": _rss()}
            if probe is not None:
                found.update(probe.reset())
            body = json.dumps(found).encode()
            headers = [(b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def serve(
    app: ASGIApp,
    *,
    backlog: int = 2048,
    setup: Callable[[], None] | None = None,
    probe: bool = False,
) -> None:
    """
    Serve *app* on 127.0.0.1 (ephemeral port); print the port; stop when stdin closes.

    *setup* runs in the loop once the server listens; with *probe*, a `Probe` runs
    there too, and ``GET /__cpu__`` also answers (and resets) its figures.
    """
    import uvicorn

    prober = Probe() if probe else None
    config = uvicorn.Config(
        _with_cpu(app, prober),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
        lifespan="off",
        loop="asyncio",
        http="h11",
        backlog=backlog,
        timeout_keep_alive=600,
    )
    server = uvicorn.Server(config)

    def watch() -> None:  # the parent closing our stdin is the signal to stop
        sys.stdin.read()
        server.should_exit = True

    async def main() -> None:
        threading.Thread(target=watch, daemon=True).start()
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.01)
        if setup is not None:
            setup()
        probing = None if prober is None else asyncio.create_task(prober.run())
        print(server.servers[0].sockets[0].getsockname()[1], flush=True)
        await task
        if probing is not None:
            probing.cancel()

    asyncio.run(main())


class Child:
    """``python -m <module> serve <args>`` as a child process: its port, CPU time and RSS."""

    def __init__(self, module: str, args: Sequence[str] = ()) -> None:
        self.command = [sys.executable, "-m", module, "serve", *args]

    def __enter__(self) -> Child:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
            "LANGSMITH_TRACING": "false",
        }
        self.proc = subprocess.Popen(
            self.command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.__exit__()
            raise RuntimeError(f"{' '.join(self.command[2:])} did not start")
        self.port = int(line)
        self.pid = self.proc.pid
        self._sock: socket.socket | None = None
        return self

    def _probe(self) -> dict[str, Any]:
        if self._sock is None:
            self._sock = socket.create_connection(("127.0.0.1", self.port))
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.sendall(b"GET /__cpu__ HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += self._sock.recv(4096)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += self._sock.recv(4096)
        found: dict[str, Any] = json.loads(body)
        return found

    def cpu(self) -> float:
        """The child's CPU seconds so far (``time.process_time()``, all its threads)."""
        return float(self._probe()["cpu"])

    def rss(self) -> int:
        """The child's resident set size, in bytes."""
        return int(self._probe()["rss"])

    def figures(self) -> dict[str, Any]:
        """CPU, RSS and (with a probe) its figures since the last call, which resets them."""
        return self._probe()

    def __exit__(self, *exc: object) -> None:
        if getattr(self, "_sock", None) is not None:
            assert self._sock is not None
            self._sock.close()
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # asks it to stop
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # by its PID: only the process we started
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
