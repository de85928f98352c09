"""A real uvicorn serving an ASGI app on 127.0.0.1, in the test's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

__all__ = ["E2E", "serving"]

# No skip when Node is missing: the harness fails with what to install instead,
# so a machine without the official client cannot pass the suite by skipping it.
E2E = [pytest.mark.e2e]
"""The marks of every end-to-end test module: ``pytestmark = E2E``."""


@contextlib.asynccontextmanager
async def serving(app: Any, path: str = "/agent") -> AsyncIterator[str]:
    """
    Serve *app* with a real uvicorn in this event loop, on 127.0.0.1 and an ephemeral port.

    Yields the URL of *path* on it (the app sees every path); on exit, shuts the server
    down. Every wait is bounded.
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        ws="none",
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if task.done():
                    task.result()  # it failed to start: say why
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
