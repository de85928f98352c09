"""A real redis-server for the store tests: started on a free port, stopped by PID."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["RedisProcess", "redis_process", "redis_server"]

if str(ROOT := Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._redis import redis_server as spawned


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """Yield the URL of a Redis: ``REDIS_URL`` if set, else our own redis-server."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with spawned() as own:
        yield own


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisProcess:
    """
    A redis-server of our own that a chaos test may stall, kill and restart.

    It listens on 127.0.0.1 only, on a port picked free once and kept across
    restarts (clients reconnect to the same URL); every signal goes to the PID
    this object started, never to any other redis-server.
    """

    def __init__(self, directory: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; the chaos tests need one")
        self.binary = binary
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self) -> None:
        """Start the server and wait (at most 10 s) until it answers PING."""
        options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), *options, "--dir", self.directory],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def _pid(self) -> int:
        assert self.proc is not None, "the server is not running"
        assert self.proc.poll() is None, "the server is not running"
        return self.proc.pid

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets open and answers nothing (a stall)."""
        os.kill(self._pid(), signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT: the stalled server goes on with what it had received."""
        os.kill(self._pid(), signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL, and wait for it: every connection drops, every key is gone."""
        os.kill(self._pid(), signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(5)
        self.paused = False

    def stop(self) -> None:
        """Terminate the server if it runs (resumed first if stalled)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self.paused:
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def redis_process() -> Iterator[RedisProcess]:
    """A started `RedisProcess` of its own (never ``REDIS_URL``), stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="ambient_runs_chaos") as directory:
        server = RedisProcess(directory)
        server.start()
        try:
            yield server
        finally:
            server.stop()
