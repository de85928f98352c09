"""A redis-server of our own for the store benchmark and the store tests: stopped by PID."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

__all__ = ["redis_server"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server of our own on a free 127.0.0.1 port; yield its URL, stop it by PID."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(
            "redis-server is not installed; install it (or set REDIS_URL for the tests)"
        )
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="ambient_runs_redis") as directory:
        options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        proc = subprocess.Popen(
            [binary, "--port", str(port), *options, "--dir", directory, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                        sock.sendall(b"PING\r\n")
                        if sock.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {port}")
                time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()  # by its PID: only the server we started
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
