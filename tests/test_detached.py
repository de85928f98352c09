"""Detached runs in one process: the owner serves its own followers from memory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from support.sse import frames_of

import ambient_runs as ar
from ambient_runs import _detached
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore, Page, worker_lost_event


class CountingStore(MemoryStore):
    """A MemoryStore that counts the reads made of it, and tells when a run logged *n* events."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.appended = asyncio.Condition()

    async def append(
        self,
        thread_id: str,
        run_id: str,
        events: Sequence[bytes],
        *,
        final: bool = False,
        first: int | None = None,
    ) -> int:
        last = await super().append(thread_id, run_id, events, final=final, first=first)
        async with self.appended:
            self.appended.notify_all()
        return last

    async def logged(self, run_id: str, n: int) -> None:
        """Return once run *run_id* of thread ``t`` has *n* events logged (its end: -1)."""

        async def enough() -> bool:
            info = await self.info("t", run_id)
            return info.end is not None if n < 0 else info.last >= n

        async with self.appended:
            while not await enough():
                await self.appended.wait()

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        self.reads += 1
        return await super().read(thread_id, run_id, after, limit=limit, wait=wait)


async def call(
    app: AgentApp,
    method: str,
    path: str,
    payload: dict[str, Any] | None = None,
    query: bytes = b"",
    on_body: Callable[[bytes], Awaitable[None]] | None = None,
) -> bytes:
    """One ASGI request to *app*; the response body (*on_body* sees each chunk first)."""
    raw = b"" if payload is None else json.dumps(payload).encode()
    done = asyncio.Event()
    chunks: list[bytes] = []
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if on_body is not None and chunk:
                await on_body(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                done.set()

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": [(b"content-type", b"application/json")],
    }
    async with asyncio.timeout(20):
        await app(scope, receive, send)
    return b"".join(chunks)


def start(run_id: str) -> dict[str, Any]:
    return {"threadId": "t", "runId": run_id, "messages": [], "state": {}}


async def test_the_owner_serves_its_followers_without_reading_the_store() -> None:
    gate = asyncio.Event()

    async def agent(run: ar.Run) -> None:
        with ar.message() as message:
            for i in range(40):
                message.write(f"{i} ")
                await asyncio.sleep(0)
                if i == 20:
                    await gate.wait()

    store = CountingStore()
    app = AgentApp(agent, store=store)

    async def resume_midway() -> bytes:
        await store.logged("r", 10)
        resumed = asyncio.create_task(call(app, "GET", "/threads/t/runs/r", query=b"after=7"))
        await asyncio.sleep(0.05)
        gate.set()
        return await resumed

    started, resumed = await asyncio.gather(call(app, "POST", "/", start("r")), resume_midway())

    assert store.reads == 0
    whole = frames_of(started)
    assert [i for i, _ in whole] == list(range(1, len(whole) + 1))
    assert whole[-1][1]["type"] == "RUN_FINISHED"
    assert frames_of(resumed) == whole[7:]
    # Once the run is over this worker no longer owns it: the store answers.
    replayed = await call(app, "GET", "/threads/t/runs/r", query=b"after=0")
    assert store.reads > 0
    assert replayed == started


async def test_a_follower_behind_what_the_owner_keeps_catches_up_from_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_detached, "_KEEP", 4)

    async def agent(run: ar.Run) -> None:
        with ar.message() as message:
            for i in range(200):
                message.write(f"{i} ")
                await asyncio.sleep(0)

    store = CountingStore()
    app = AgentApp(agent, store=store)

    async def slow_client(chunk: bytes) -> None:
        # The first chunk waits until the run has ended: the owner kept only the last few.
        await store.logged("slow", -1)

    body = await call(app, "POST", "/", start("slow"), on_body=slow_client)

    got = frames_of(body)
    assert [i for i, _ in got] == list(range(1, 204 + 1))
    assert [e["delta"] for _, e in got if e["type"] == "TEXT_MESSAGE_CONTENT"] == [
        f"{i} " for i in range(200)
    ]
    assert store.reads > 0
    logged = (await store.read("t", "slow", 0, limit=1000)).entries
    assert [(i, json.loads(e)) for i, e in logged] == got


async def test_a_run_ended_by_another_worker_reaches_the_owners_followers() -> None:
    gate = asyncio.Event()

    async def agent(run: ar.Run) -> None:
        ar.say("before")
        await gate.wait()
        ar.say("after")  # refused by the store: the run has ended

    store = CountingStore()
    app = AgentApp(agent, store=store, lease=5)

    async def end_elsewhere() -> None:
        await store.logged("lost", 4)
        # What a follower on another worker does when the owner's lease lapsed.
        await store.append("t", "lost", [worker_lost_event(5)], final=True)
        gate.set()

    body, _ = await asyncio.gather(call(app, "POST", "/", start("lost")), end_elsewhere())

    got = frames_of(body)
    assert [i for i, _ in got] == list(range(1, len(got) + 1))
    assert got[-1][1]["type"] == "RUN_ERROR"
    assert got[-1][1]["code"] == "worker_lost"
    assert "before" in body.decode()
    assert "after" not in body.decode()
    assert store.reads > 0  # the rest came from the store


async def test_a_plain_agent_in_a_thread_is_logged_whole_and_in_order() -> None:
    def agent(run: ar.Run) -> None:  # runs in a worker thread: its taps come from there
        with ar.message() as message:
            for i in range(300):
                message.write(f"{i} ")

    store = CountingStore()
    app = AgentApp(agent, store=store)

    got = frames_of(await call(app, "POST", "/", start("plain")))

    assert [i for i, _ in got] == list(range(1, len(got) + 1))
    assert [e["delta"] for _, e in got if e["type"] == "TEXT_MESSAGE_CONTENT"] == [
        f"{i} " for i in range(300)
    ]
    assert got[-1][1]["type"] == "RUN_FINISHED"
    logged = (await store.read("t", "plain", 0, limit=1000)).entries
    assert [(i, json.loads(e)) for i, e in logged] == got
