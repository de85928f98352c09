"""Store failures in detached runs are named, never hidden (issue 31, item 7).

A `FlakyStore` is a real `MemoryStore` that can be taken down: every call then raises the
kind of error a client library raises (a plain ``ConnectionError``, not a `StoreError`), as
redis-py does. Two `AgentApp` on one store are two workers: the owner and another.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore, Page, RunInfo, RunNotFoundError


class FlakyStore(MemoryStore):
    """A MemoryStore that fails on demand, as a network store does."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.down = False
        self.land_then_fail: set[str] = set()  # the next such call runs, then times out
        self.appended = asyncio.Condition()

    def _check(self, what: str) -> None:
        if self.down:
            raise ConnectionError(f"Error 111 connecting to the store ({what})")

    def _landed(self, what: str) -> None:
        if what in self.land_then_fail:
            self.land_then_fail.discard(what)
            raise TimeoutError(f"{what}: timed out waiting for the reply")

    async def create(
        self, thread_id: str, run_id: str, *, input: bytes, owner: str, lease: float
    ) -> None:
        self._check("create")
        await super().create(thread_id, run_id, input=input, owner=owner, lease=lease)
        self._landed("create")

    async def append(
        self,
        thread_id: str,
        run_id: str,
        events: Sequence[bytes],
        *,
        final: bool = False,
        first: int | None = None,
    ) -> int:
        self._check("append")
        last = await super().append(thread_id, run_id, events, final=final, first=first)
        async with self.appended:
            self.appended.notify_all()
        self._landed("append")
        return last

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        self._check("read")
        page = await super().read(thread_id, run_id, after, limit=limit, wait=wait)
        self._check("read")
        return page

    async def info(self, thread_id: str, run_id: str) -> RunInfo:
        self._check("info")
        return await super().info(thread_id, run_id)

    async def renew(self, thread_id: str, run_id: str, *, owner: str, lease: float) -> bool:
        self._check("renew")
        return await super().renew(thread_id, run_id, owner=owner, lease=lease)

    async def end_lost(self, thread_id: str, run_id: str, event: bytes) -> bool:
        self._check("end_lost")
        return await super().end_lost(thread_id, run_id, event)

    async def request_cancel(self, thread_id: str, run_id: str) -> bool:
        self._check("request_cancel")
        return await super().request_cancel(thread_id, run_id)

    async def discard(self, thread_id: str, run_id: str, *, owner: str) -> bool:
        self._check("discard")
        return await super().discard(thread_id, run_id, owner=owner)

    async def logged(self, run_id: str, n: int) -> None:
        """Return once run *run_id* of thread ``t`` has *n* events logged."""
        async with self.appended:
            while (await self._last(run_id)) < n:
                await self.appended.wait()

    async def _last(self, run_id: str) -> int:
        try:
            return (await MemoryStore.info(self, "t", run_id)).last
        except RunNotFoundError:  # not created yet
            return -1


class Answer:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for block in self.body.split(b"\n\n"):
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    out.append(json.loads(line[6:]))
        return out

    def ids(self) -> list[int]:
        return [int(line[4:]) for line in self.body.split(b"\n") if line.startswith(b"id: ")]


async def request(
    app: AgentApp, method: str, path: str, payload: dict[str, Any] | None = None
) -> Answer:
    """One ASGI request to *app*, to its end (the client stays until the body ends)."""
    raw = b"" if payload is None else json.dumps(payload).encode()
    done = asyncio.Event()
    asked = False
    answer = Answer()

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            answer.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"content-type", b"application/json")],
    }
    async with asyncio.timeout(20):
        await app(scope, receive, send)
    return answer


def start(run_id: str) -> dict[str, Any]:
    return {"threadId": "t", "runId": run_id, "messages": [], "state": {}}


def assert_503(answer: Answer) -> None:
    assert answer.status == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["retry-after"] == "1"
    assert answer.json()["error"] == "store unavailable"


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="ambient_runs")
    caplog.set_level(logging.ERROR, logger="asyncio")
    return caplog


async def quick(run: ar.Run) -> str:
    ar.say("hello")
    return "done"


class TestBeforeTheStream:
    async def test_a_post_while_the_store_is_down_is_a_json_503_and_leaves_nothing(self) -> None:
        """POST answers 503 with Retry-After; once the store is back, the same runId runs."""
        store = FlakyStore()
        app = AgentApp(quick, store=store)
        store.down = True

        refused = await request(app, "POST", "/", start("r"))
        store.down = False
        await asyncio.sleep(0)  # the background discard of what the create may have left
        retried = await request(app, "POST", "/", start("r"))

        assert_503(refused)
        assert retried.status == 200
        assert retried.events()[-1]["type"] == "RUN_FINISHED"

    async def test_join_resume_and_cancel_while_the_store_is_down_are_503(self) -> None:
        """Every route that reads the store before streaming answers 503, never a plain 500."""
        store = FlakyStore()
        app = AgentApp(quick, store=store)
        assert (await request(app, "POST", "/", start("r"))).status == 200
        store.down = True

        answers = [
            await request(app, "GET", "/threads/t/runs/r"),
            await request(app, "GET", "/threads/t/runs/r?after=1"),
            await request(app, "POST", "/threads/t/runs/r/cancel"),
        ]

        for answer in answers:
            assert_503(answer)

    async def test_a_create_that_landed_and_then_failed_leaves_no_phantom_run(self) -> None:
        """The run is discarded: a join finds nothing, a retry on either worker runs it."""
        store = FlakyStore()
        owner, other = AgentApp(quick, store=store), AgentApp(quick, store=store)
        store.land_then_fail = {"create"}

        refused = await request(owner, "POST", "/", start("a"))
        for _ in range(3):
            await asyncio.sleep(0)  # the discard runs in the background
        joined = await request(other, "GET", "/threads/t/runs/a")
        elsewhere = await request(other, "POST", "/", start("a"))
        store.land_then_fail = {"create"}
        again = await request(owner, "POST", "/", start("b"))
        same_worker = await request(owner, "POST", "/", start("b"))  # before any discard ran

        assert_503(refused)
        assert_503(again)
        assert joined.status == 404
        assert elsewhere.status == 200
        assert elsewhere.events()[-1]["type"] == "RUN_FINISHED"
        assert same_worker.status == 200
        assert same_worker.events()[-1]["type"] == "RUN_FINISHED"

    async def test_a_full_memory_store_refuses_new_runs_with_503(self) -> None:
        """Live runs filling max_runs: 503 with Retry-After; once one ends, it makes room."""
        gate = asyncio.Event()

        async def waits(run: ar.Run) -> None:
            await gate.wait()

        store = FlakyStore(max_runs=1)
        app = AgentApp(waits, store=store)
        first = asyncio.create_task(request(app, "POST", "/", start("one")))
        await store.logged("one", 1)

        refused = await request(app, "POST", "/", start("two"))
        gate.set()
        await first
        admitted = await request(app, "POST", "/", start("three"))

        assert_503(refused)
        assert "max_runs=1" in refused.json()["detail"][0]
        assert admitted.status == 200


class TestDuringTheStream:
    async def test_the_store_going_down_ends_owner_and_follower_with_store_unavailable(
        self, logged: pytest.LogCaptureFixture
    ) -> None:
        """The owner's client and a follower on another worker both get a terminal RUN_ERROR."""
        gate = asyncio.Event()

        async def agent(run: ar.Run) -> None:
            ar.say("before")
            await gate.wait()
            ar.say("after")

        store = FlakyStore()
        owner = AgentApp(agent, store=store, lease=0.5)
        other = AgentApp(agent, store=store, lease=0.5)
        watching = asyncio.create_task(request(owner, "POST", "/", start("r")))
        await store.logged("r", 4)
        following = asyncio.create_task(request(other, "GET", "/threads/t/runs/r"))
        await asyncio.sleep(0.05)
        store.down = True
        gate.set()

        watched, followed = await asyncio.gather(watching, following)
        store.down = False
        settled = await _eventually_ended(store, "r")

        for answer in (watched, followed):
            assert answer.status == 200
            last = answer.events()[-1]
            assert (last["type"], last["code"]) == ("RUN_ERROR", "store_unavailable")
        assert b"after" not in watched.body
        # Once the store answers again, its log ends as the owner's client saw it end.
        assert json.loads(settled[-1][1])["code"] == "store_unavailable"
        text = logged.text
        assert "never retrieved" not in text
        assert "run 'r' of thread 't'" in text

    async def test_a_lost_log_is_events_lost_for_owner_and_follower(self) -> None:
        """The store restarted empty mid-run: events_lost, not events_expired, not a clean end."""
        gate = asyncio.Event()

        async def agent(run: ar.Run) -> None:
            ar.say("before")
            await gate.wait()
            ar.say("after")

        store = FlakyStore()
        owner = AgentApp(agent, store=store, lease=0.5)
        other = AgentApp(agent, store=store, lease=0.5)
        watching = asyncio.create_task(request(owner, "POST", "/", start("r")))
        await store.logged("r", 4)
        following = asyncio.create_task(request(other, "GET", "/threads/t/runs/r?after=2"))
        await asyncio.sleep(0.05)
        await MemoryStore.aclose(store)  # everything forgotten, as a restarted Redis
        gate.set()

        watched, followed = await asyncio.gather(watching, following)

        for answer in (watched, followed):
            last = answer.events()[-1]
            assert (last["type"], last["code"]) == ("RUN_ERROR", "events_lost")

    async def test_a_retried_append_that_landed_is_not_written_twice(self) -> None:
        """An append that timed out after landing is retried at the same first: no duplicate."""

        async def agent(run: ar.Run) -> None:
            for i in range(5):
                ar.say(f"{i}")
                await asyncio.sleep(0.01)

        store = FlakyStore()
        app = AgentApp(agent, store=store)
        store.land_then_fail = {"append"}

        answer = await request(app, "POST", "/", start("r"))
        logged = (await MemoryStore.read(store, "t", "r", 0)).entries

        assert answer.ids() == list(range(1, len(answer.ids()) + 1))
        assert [json.loads(e) for _, e in logged] == answer.events()
        assert answer.events()[-1]["type"] == "RUN_FINISHED"


async def _eventually_ended(store: FlakyStore, run_id: str) -> list[tuple[int, bytes]]:
    async with asyncio.timeout(10), store.appended:
        while (await MemoryStore.info(store, "t", run_id)).end is None:
            await store.appended.wait()
    return (await MemoryStore.read(store, "t", run_id, 0)).entries
