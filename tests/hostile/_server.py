"""Start one of `_apps.APPS` in a child uvicorn on a free loopback port; stop it by PID."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

__all__ = ["Served", "served"]

_SCRIPT = Path(__file__).resolve().parent / "_serve_app.py"


class Served:
    """A running child server: its URLs, its process, and the probe's figures."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/agent"
        self.port = port

    @property
    def alive(self) -> bool:
        """Whether the server process is still running."""
        return self.process.returncode is None

    async def health(self, client: httpx.AsyncClient, *, reset: bool = False) -> dict[str, Any]:
        """Ask the probe for its figures (and zero them, with *reset*)."""
        if reset:
            response = await client.post(f"{self.base}/_health/reset")
        else:
            response = await client.get(f"{self.base}/_health")
        response.raise_for_status()
        figures: dict[str, Any] = response.json()
        return figures


@contextlib.asynccontextmanager
async def served(name: str) -> AsyncIterator[Served]:
    """Serve ``APPS[name]`` in a child process; on exit, stop that process (by its PID)."""
    # The child's log goes to a file: a pipe nobody reads would fill and stall it.
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(_SCRIPT), name, stdout=asyncio.subprocess.PIPE, stderr=log
    )
    try:
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 30)
        except TimeoutError:
            line = b""
        if not line.strip().isdigit():
            process.kill()
            await process.wait()
            log.seek(0)
            error = log.read()
            raise RuntimeError(f"the server did not start: {line!r} {error.decode()[-2000:]}")
        yield Served(process, int(line))
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()
