"""
Child process: serve `_apps.APPS[argv[1]]` with uvicorn on 127.0.0.1, behind a loop probe.

Prints the port on stdout once listening. ``GET /_health`` answers the probe's figures
at once (``{"max_hold_ms", "max_lag_ms", "ticks"}``); ``POST /_health/reset`` zeroes them.
The probe wakes every 2 ms and measures, between two wake-ups, how much CPU time the loop
thread spent (a callback that holds the loop shows here, whatever else runs on the machine)
and how late it woke (wall clock, which a busy machine inflates).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _apps import APPS

TICK = 0.002


class Probe:
    """ASGI middleware: answers /_health from its own figures, forwards the rest."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.reset()

    def reset(self) -> None:
        self.max_hold = 0.0
        self.max_lag = 0.0
        self.ticks = 0

    async def run(self) -> None:
        while True:
            wall, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(TICK)
            self.max_hold = max(self.max_hold, time.thread_time() - cpu)
            self.max_lag = max(self.max_lag, time.perf_counter() - wall - TICK)
            self.ticks += 1

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/_health"):
            if scope["path"] == "/_health/reset":
                self.reset()
            body = json.dumps(
                {
                    "max_hold_ms": self.max_hold * 1000,
                    "max_lag_ms": self.max_lag * 1000,
                    "ticks": self.ticks,
                }
            ).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


async def main(name: str) -> None:
    import uvicorn

    probe = Probe(APPS[name]())
    config = uvicorn.Config(
        probe,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        ws="none",
        log_level="critical",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise SystemExit("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    prober = asyncio.create_task(probe.run())
    print(server.servers[0].sockets[0].getsockname()[1], flush=True)
    await serving
    prober.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
