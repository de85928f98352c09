"""Two uvicorn workers sharing one Redis: runs that outlive their connection, end to end.

Every stream a client assembles (resumed parts concatenated, or a join) goes through the
official client, and ends with the messages and state of a client that watched from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.node import client_verify
from support.servers import E2E

pytestmark = E2E

HERE = Path(__file__).resolve().parent
LEASE = 1.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _worker(
    redis_url: str, prefix: str, pace: float
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    env = {
        **os.environ,
        "AR_REDIS_URL": redis_url,
        "AR_PREFIX": prefix,
        "AR_LEASE": str(LEASE),
        "AR_PACE": str(pace),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "_detached_app:app",
            "--app-dir",
            str(HERE),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("a uvicorn worker did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def workers(redis_url: str) -> Iterator[dict[str, Any]]:
    """Worker A and worker B (the demo at a pace of ~2 s per run), and K, a slow one to kill."""
    prefix = f"e2e-{uuid.uuid4().hex}:"
    with (
        _worker(redis_url, prefix, 0.6) as a,
        _worker(redis_url, prefix, 0.6) as b,
        _worker(redis_url, prefix, 20) as k,
    ):
        yield {"a": a[0], "b": b[0], "k": k[0], "k_proc": k[1]}


def _input(run_id: str) -> dict[str, Any]:
    return {
        "threadId": "thread",
        "runId": run_id,
        "state": {},
        "messages": [{"id": f"{run_id}-u", "role": "user", "content": "Heat pump?"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


class Frames:
    """An SSE response read frame by frame: (id, event) pairs."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()
        self.seen: list[tuple[int, dict[str, Any]]] = []

    async def next(self) -> tuple[int, dict[str, Any]] | None:
        frame_id: int | None = None
        data: str | None = None
        async for line in self.lines:
            if line.startswith("id: "):
                frame_id = int(line[4:])
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data is not None:
                assert frame_id is not None, "every frame carries an id"
                item = (frame_id, json.loads(data))
                self.seen.append(item)
                return item
        return None

    async def take(self, n: int) -> list[tuple[int, dict[str, Any]]]:
        for _ in range(n):
            if await self.next() is None:
                break
        return self.seen

    async def rest(self) -> list[tuple[int, dict[str, Any]]]:
        while await self.next() is not None:
            pass
        return self.seen


def payloads(frames: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The events of *frames*, without their ids."""
    return [event for _, event in frames]


@contextlib.asynccontextmanager
async def opened(
    client: httpx.AsyncClient, method: str, url: str, **kw: Any
) -> AsyncIterator[Frames]:
    async with client.stream(method, url, **kw) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"] == "text/event-stream"
        yield Frames(response)


def assert_same_end(
    assembled: list[dict[str, Any]],
    watched: list[dict[str, Any]],
    run_id: str,
    *,
    join: bool = False,
) -> None:
    """
    Both streams pass the official client; they end with equal messages and state.

    A *join* needs no history: a client with none (a new tab) ends the same too.
    """
    start = {"initialMessages": _input(run_id)["messages"], "initialState": {}}
    fresh = {"events": assembled} if join else {"events": assembled, **start}
    verdicts = client_verify([{"events": assembled, **start}, {"events": watched, **start}, fresh])
    for verdict in verdicts:
        assert verdict["ok"], verdict["error"]
        assert verdict["warnings"] == []
    assert verdicts[0]["messages"] == verdicts[1]["messages"]
    assert verdicts[0]["state"] == verdicts[1]["state"]
    assert verdicts[2]["messages"] == verdicts[1]["messages"]


async def test_resume_on_another_worker_after_a_disconnect(workers: dict[str, Any]) -> None:
    run_id = f"resume-{uuid.uuid4().hex[:6]}"
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=30) as client:
        async with opened(client, "POST", workers["a"] + "/", json=_input(run_id)) as first:
            part = await first.take(25)  # then the client goes (the connection closes)
        last = part[-1][0]
        assert [i for i, _ in part] == list(range(1, last + 1))

        url = f"{workers['b']}/threads/thread/runs/{run_id}"
        async with opened(client, "GET", url, headers={"Last-Event-ID": str(last)}) as second:
            rest = await second.rest()
        async with opened(client, "GET", url + "?after=0") as replay:  # the whole log
            whole = await replay.rest()

    assert rest[0][0] == last + 1
    assert part + rest == whole  # exactly the missed frames, in order, none twice
    assert rest[-1][1]["type"] == "RUN_FINISHED"
    assert_same_end(payloads(part + rest), payloads(whole), run_id)


async def test_join_mid_run_from_a_third_client(workers: dict[str, Any]) -> None:
    run_id = f"join-{uuid.uuid4().hex[:6]}"
    async with (
        asyncio.timeout(60),
        httpx.AsyncClient(timeout=30) as client,
        opened(client, "POST", workers["a"] + "/", json=_input(run_id)) as watcher,
    ):
        await watcher.take(40)
        url = f"{workers['b']}/threads/thread/runs/{run_id}"
        async with opened(client, "GET", url) as joiner:
            joined = await joiner.rest()
        watched = await watcher.rest()

    kinds = [e["type"] for _, e in joined]
    assert kinds[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert len(joined) < len(watched)  # a prelude, not a replay
    assert joined[-1][1] == watched[-1][1]
    assert_same_end(payloads(joined), payloads(watched), run_id, join=True)


async def test_many_followers_and_a_cancel_from_another_worker(workers: dict[str, Any]) -> None:
    run_id = f"cancel-{uuid.uuid4().hex[:6]}"
    url = f"{workers['b']}/threads/thread/runs/{run_id}"
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=30) as client:
        async with opened(client, "POST", workers["a"] + "/", json=_input(run_id)) as owner:
            await owner.take(10)

            async def follow(base: str) -> list[tuple[int, dict[str, Any]]]:
                async with opened(
                    client, "GET", f"{base}/threads/thread/runs/{run_id}?after=0"
                ) as f:
                    return await f.rest()

            bases = (workers["a"], workers["b"], workers["b"])
            followers = [asyncio.create_task(follow(base)) for base in bases]
            await owner.take(10)
            answer = await client.post(url + "/cancel", json={})
            assert answer.status_code == 202, answer.text
            seen = await owner.rest()
            results = await asyncio.gather(*followers)
        again = await client.post(url + "/cancel", json={})

    assert seen[-1][1]["type"] == "RUN_FINISHED"
    assert seen[-1][1]["outcome"] == {"type": "cancelled"}
    assert all(result == seen for result in results)
    assert again.status_code == 409
    assert_same_end(payloads(seen), payloads(results[0]), run_id)


async def test_unknown_runs_and_bad_cursors_get_clean_answers(workers: dict[str, Any]) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        missing = await client.get(f"{workers['b']}/threads/thread/runs/nope")
        bad = await client.get(f"{workers['b']}/threads/thread/runs/nope?after=x")
        cancel = await client.post(f"{workers['b']}/threads/thread/runs/nope/cancel", json={})

    assert (missing.status_code, missing.json()["error"]) == (404, "run not found")
    assert (bad.status_code, bad.json()["error"]) == (400, "bad cursor")
    assert cancel.status_code == 404


async def test_a_killed_owner_is_worker_lost_for_its_followers(workers: dict[str, Any]) -> None:
    run_id = f"kill-{uuid.uuid4().hex[:6]}"
    url = f"{workers['b']}/threads/thread/runs/{run_id}"
    async with (
        asyncio.timeout(60),
        httpx.AsyncClient(timeout=30) as client,
        opened(client, "POST", workers["k"] + "/", json=_input(run_id)) as owner,
    ):
        await owner.take(8)
        async with (
            opened(client, "GET", url) as joiner,
            opened(client, "GET", url + "?after=0") as replayer,
        ):
            await joiner.take(3)
            workers["k_proc"].send_signal(signal.SIGKILL)
            workers["k_proc"].wait(10)
            killed = time.monotonic()
            joined = await joiner.rest()
            lost_after = time.monotonic() - killed
            replayed = await replayer.rest()

    for stream in (joined, replayed):
        assert stream[-1][1]["type"] == "RUN_ERROR"
        assert stream[-1][1]["code"] == "worker_lost"
    assert lost_after < LEASE + 2  # the lease, plus a follower's poll and the machine's load
    assert_same_end(payloads(joined), payloads(replayed), run_id, join=True)
