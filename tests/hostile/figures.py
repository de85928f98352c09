"""
Print the hostile suite's headline figures (the README's Reliability section quotes them).

    .venv/bin/python tests/hostile/figures.py

Against a child uvicorn behind the loop probe (`_serve_app.py`), as the suite runs it: the
0.9 MB body of 300,000 bad messages (its 422's size and time, the health requests answered
meanwhile, the server loop's longest hold), a valid 1 MB input (time, longest hold), and
an agent that leaves 100,000 subagents open (the longest hold while its end closes them;
one LeftOpenWarning in the server's log).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

# This folder (the hostile suite's apps and server) and tests/ (the support package).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _server import served
from support.sse import BODY, JSON
from test_limits import HOSTILE, warmed


async def main() -> None:
    async with served("hello") as server, httpx.AsyncClient(timeout=60) as client:
        await warmed(server, client)
        start = time.perf_counter()
        hostile = asyncio.create_task(client.post(server.url, content=HOSTILE, headers=JSON))
        answered = 0
        while not hostile.done():
            await server.health(client)
            answered += 1
            await asyncio.sleep(0.01)
        response = await hostile
        took = time.perf_counter() - start
        hold = (await server.health(client))["max_hold_ms"]
        print(
            f"300,000 bad items: {response.status_code}, {len(response.content):,} B in "
            f"{took * 1000:.0f} ms; {answered} health requests answered meanwhile; "
            f"longest loop hold {hold:.1f} ms"
        )
        messages = [{"id": f"m{i}", "role": "user", "content": "x" * 20} for i in range(14_000)]
        big = json.dumps({"threadId": "t", "runId": "r", "messages": messages}).encode()
        await server.health(client, reset=True)
        start = time.perf_counter()
        response = await client.post(server.url, content=big, headers=JSON)
        took = time.perf_counter() - start
        hold = (await server.health(client))["max_hold_ms"]
        print(
            f"valid 1 MB input: {response.status_code} in {took * 1000:.0f} ms; "
            f"longest loop hold {hold:.1f} ms"
        )
    async with served("leaves_open") as server, httpx.AsyncClient(timeout=60) as client:
        await server.health(client, reset=True)
        start = time.perf_counter()
        response = await client.post(server.url, json=BODY)
        took = time.perf_counter() - start
        hold = (await server.health(client))["max_hold_ms"]
        print(
            f"100,000 subagents left open: {response.status_code}, "
            f"{len(response.content):,} B in {took * 1000:.0f} ms; "
            f"longest loop hold {hold:.1f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
