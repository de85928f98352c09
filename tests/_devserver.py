"""``python -m ambient_runs dev`` in a subprocess: started on a free port, stopped by PID."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import attrs

__all__ = ["DevServer", "dev_server", "free_port", "post_run"]

READY_WITHIN = 30.0  # seconds for uvicorn to start (a cold import of the app included)


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@attrs.define
class DevServer:
    """A running dev server: its process, its root URL, and where its output goes."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        """What the server printed so far (stdout and stderr together)."""
        return self.log.read_text(errors="replace")

    def worker_pids(self) -> list[int]:
        """The PIDs of the uvicorn worker processes the reloader started (one per reload)."""
        return [int(p) for p in re.findall(r"Started server process \[(\d+)\]", self.output())]


def _get(url: str, timeout: float = 2.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return int(response.status)


def post_run(endpoint: str, text: str, run_id: str = "r1", timeout: float = 10.0) -> str:
    """POST a one-message RunAgentInput to *endpoint*; return the whole SSE body."""
    message = {"id": "u", "role": "user", "content": text}
    body = json.dumps({"threadId": "t", "runId": run_id, "messages": [message]}).encode()
    request = urllib.request.Request(
        endpoint, data=body, headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return str(response.read().decode())


@contextlib.contextmanager
def dev_server(app_dir: Path, target: str, *args: str) -> Iterator[DevServer]:
    """
    Run ``python -m ambient_runs dev TARGET`` from *app_dir* on a free port until ready.

    On exit, stops it by its PID (SIGINT, as Ctrl-C does) and waits, bounded; a server
    that does not stop is killed with its process group, and the test fails.
    """
    port = free_port()
    log = app_dir / "dev.log"
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "ambient_runs", "dev", target, "--port", str(port), *args],
            cwd=app_dir,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: a stuck server is killed with its worker
        )
    server = DevServer(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + READY_WITHIN
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"dev exited ({process.returncode}):\n{server.output()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                if _get(f"{server.url}/_viewer") == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"dev not ready in {READY_WITHIN} s:\n{server.output()}")
            time.sleep(0.1)
        yield server
    finally:
        stop(server)


def stop(server: DevServer, within: float = 15.0) -> int:
    """Stop *server* as Ctrl-C does; return its exit status. Kill its group if it hangs."""
    process = server.process
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(within)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
            raise RuntimeError(f"dev did not stop in {within} s:\n{server.output()}") from None
    return int(process.returncode)
