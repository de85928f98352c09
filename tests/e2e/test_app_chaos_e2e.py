"""
Issue 31's chaos suite through the served app: two workers, one redis-server, stalled and filled.

Two real uvicorn servers in this loop are two `AgentApp` workers sharing one RedisStore
URL: a redis-server of the test's own (`support.redis_server.RedisProcess`, 127.0.0.1, a
free port), stopped with SIGSTOP and filled to its ``maxmemory`` by its PID and its own
CONFIG. What every client received is compared, frame id by frame id and payload by
payload, with the run's log read back from the store; every stream is judged by
`ambient_runs.verify`. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from support.redis_server import RedisProcess, redis_process
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.stores.redis import RedisStore
from ambient_runs.testing import assert_valid

pytestmark = E2E

STALL = 8.0  # seconds redis-server is stopped mid-run (issue 31)
STEP = 0.02  # seconds between the agent's deltas: a steady stream
STEPS = 500  # deltas per run: 10 s of streaming, longer than the stall


@pytest.fixture
def server() -> Iterator[RedisProcess]:
    """A redis-server for this test alone (never REDIS_URL): it is about to be broken."""
    with redis_process() as started:
        yield started


async def steady(run: ar.Run) -> str:
    """One message, a numbered delta every `STEP` s: duplicates and gaps show in the numbers."""
    with ar.message() as message:
        for i in range(STEPS):
            message.write(f"{i} ")
            await asyncio.sleep(STEP)
    return "done"


def body(run_id: str) -> dict[str, Any]:
    return {"threadId": "t", "runId": run_id, "messages": [], "state": {}}


@contextlib.asynccontextmanager
async def worker(url: str, prefix: str, lease: float) -> AsyncIterator[str]:
    """One AgentApp worker on a real uvicorn, on a RedisStore of its own for the shared URL."""
    store = RedisStore(url, prefix=prefix, retention=120)
    app = AgentApp(steady, store=store, lease=lease, keep_alive=0.5)
    try:
        async with serving(app) as where:
            yield where
    finally:
        await store.aclose()


class Reader:
    """A streaming response read to its end, every byte kept; *seen* counts its data frames."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.text = ""
        self.progress = asyncio.Condition()

    async def run(self) -> None:
        async for chunk in self.response.aiter_text():
            async with self.progress:
                self.text += chunk
                self.progress.notify_all()

    @property
    def seen(self) -> int:
        return self.text.count("\ndata: ") + self.text.startswith("data: ")

    async def until(self, frames: int) -> None:
        async with self.progress:
            await self.progress.wait_for(lambda: self.seen >= frames)

    def frames(self) -> list[tuple[int | None, dict[str, Any]]]:
        """(id, event) per frame; the id is None only for an end the log does not hold yet
        (the RUN_ERROR a client gets while the store does not answer)."""
        assert self.response.status_code == 200, self.text  # never a plain-text 500
        assert self.response.headers["content-type"].startswith("text/event-stream")
        return frames(self.text)


def frames(text: str) -> list[tuple[int | None, dict[str, Any]]]:
    """The (id, event) frames of an SSE body; keep-alive comments skipped."""
    out: list[tuple[int | None, dict[str, Any]]] = []
    for block in text.split("\n\n"):
        lines = [x for x in block.split("\n") if x and not x.startswith(":")]
        if not lines:
            continue
        ids = [int(x[4:]) for x in lines if x.startswith("id: ")]
        data = [x[6:] for x in lines if x.startswith("data: ")]
        assert len(data) == 1, block
        assert len(lines) == len(ids) + 1 <= 2, block
        out.append((ids[0] if ids else None, json.loads(data[0])))
    return out


async def logged(url: str, prefix: str, run_id: str) -> list[tuple[int, dict[str, Any]]]:
    """The run's log, (sequence number, event) per entry, read back through a RedisStore."""
    store = RedisStore(url, prefix=prefix)
    try:
        page = await store.read("t", run_id, 0, limit=100_000)
    finally:
        await store.aclose()
    return [(seq, json.loads(line)) for seq, line in page.entries]


async def logged_to_its_end(
    url: str, prefix: str, run_id: str
) -> list[tuple[int, dict[str, Any]]]:
    """The log once it holds a terminal event (a failed owner logs its end once Redis is back)."""
    async with asyncio.timeout(30):
        while True:
            log = await logged(url, prefix, run_id)
            if log and log[-1][1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                return log
            await asyncio.sleep(0.1)  # polling the store: nothing to await across processes


def deltas(events: list[dict[str, Any]]) -> list[int]:
    """The numbers the agent wrote, in the order they came."""
    return [int(e["delta"]) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]


def check_against_log(
    got: list[tuple[int | None, dict[str, Any]]], log: list[tuple[int, dict[str, Any]]]
) -> None:
    """
    Assert that *got* is the log from its start, once each (the same ids, the same
    payloads), then at most one id-less RUN_ERROR: the end the store could not log yet.
    """
    ids = [seq for seq, _ in got if seq is not None]
    assert len(ids) == len(set(ids)), ids  # no duplicate
    assert ids == list(range(1, len(ids) + 1)), ids  # no gap: nothing lost up to the last
    assert all(seq is not None for seq, _ in got[:-1]), got[-3:]
    by_seq = dict(log)
    for seq, event in got:
        if seq is None:
            assert event["type"] == "RUN_ERROR", event
        else:
            assert by_seq[seq] == event, seq  # the payload the log holds under that id


async def stalled_run(server: RedisProcess, lease: float) -> dict[str, Any]:
    """
    Owner on worker A, follower on worker B from the log's start, SIGSTOP mid-run;
    return what each client got and the log.
    """
    prefix, run_id = f"s-{uuid.uuid4().hex}:", "stall"
    async with (
        asyncio.timeout(STALL + 60),
        worker(server.url, prefix, lease) as a,
        worker(server.url, prefix, lease) as b,
        httpx.AsyncClient(timeout=STALL + 30) as client,
        client.stream("POST", a, json=body(run_id)) as response,
    ):
        owner = Reader(response)
        owner_task = asyncio.create_task(owner.run())
        await owner.until(10)
        async with client.stream(
            "GET", f"{b}/threads/t/runs/{run_id}", headers={"last-event-id": "0"}
        ) as joined:
            follower = Reader(joined)
            follower_task = asyncio.create_task(follower.run())
            await follower.until(20)
            await owner.until(40)
            stalled_at = owner.seen
            server.pause()
            try:
                await asyncio.sleep(STALL)  # the stall itself, not a synchronisation
            finally:
                server.resume()
            await asyncio.gather(owner_task, follower_task)
    log = await logged_to_its_end(server.url, prefix, run_id)
    return {"owner": owner, "follower": follower, "log": log, "stalled_at": stalled_at}


def judge(reader: Reader, log: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """A client's stream: valid AG-UI, one terminal at its end, the log's events once each."""
    frames = reader.frames()
    events = [event for _, event in frames]
    assert_valid(events)
    types = [e["type"] for e in events]
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR"), types[-5:]  # never a clean end without
    assert 1 == sum(t in ("RUN_FINISHED", "RUN_ERROR") for t in types)
    if types[-1] == "RUN_ERROR":
        assert events[-1]["code"] == "store_unavailable", events[-1]
    check_against_log(frames, log)
    numbers = deltas(events)
    assert numbers == list(range(len(numbers)))
    return events[-1]


class TestStall:
    async def test_a_lease_longer_than_the_stall_rides_it_out(self, server: RedisProcess) -> None:
        """Lease 20 s, stall 8 s: both clients get every event once and RUN_FINISHED."""
        started = time.monotonic()
        got = await stalled_run(server, lease=20.0)
        took = time.monotonic() - started
        log = got["log"]
        for reader in (got["owner"], got["follower"]):
            assert judge(reader, log)["type"] == "RUN_FINISHED"
            assert reader.frames() == log  # the whole log, nothing more, nothing less
        assert deltas([e for _, e in log]) == list(range(STEPS))
        assert took > STALL  # the run went through the stall
        assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
        assert_valid([e for _, e in log])
        print(
            f"\nlease 20 s, SIGSTOP {STALL:.0f} s after frame {got['stalled_at']}: both clients "
            f"RUN_FINISHED, {len(log)} events each = the log, duplicated 0, lost 0, {took:.1f} s"
        )

    async def test_a_lease_shorter_than_the_stall_ends_with_store_unavailable(
        self, server: RedisProcess
    ) -> None:
        """Lease 3 s, stall 8 s: each client ends with RUN_ERROR store_unavailable, what it
        got is the log's start once each, and the log ends once (logged after the stall)."""
        got = await stalled_run(server, lease=3.0)
        log = got["log"]
        ends = [judge(reader, log) for reader in (got["owner"], got["follower"])]
        assert [e["code"] for e in ends] == ["store_unavailable"] * 2, ends
        assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
        numbers = deltas([e for _, e in log])
        assert numbers == list(range(len(numbers)))  # no delta logged twice, none skipped
        types = [e["type"] for _, e in log]
        assert 1 == sum(t in ("RUN_FINISHED", "RUN_ERROR") for t in types)
        assert_valid([e for _, e in log])
        print(
            f"\nlease 3 s, SIGSTOP {STALL:.0f} s: clients ended "
            f"{[(e['type'], e.get('code')) for e in ends]}, log {len(log)} events ending "
            f"{types[-1]} {log[-1][1].get('code')}, duplicated 0, lost 0"
        )


FOLLOWERS = 500
BURST = 1000
BURST_AT_ONCE = 100  # the burst's client concurrency: POSTs in flight at once


async def paced(run: ar.Run) -> str:
    """The followed run: 200 numbered deltas 50 ms apart (10 s), going on as the burst starts."""
    with ar.message() as message:
        for i in range(200):
            message.write(f"{i} ")
            await asyncio.sleep(0.05)
    return "done"


async def quick(run: ar.Run) -> str:
    ar.say("hello")
    return "done"


async def load_agent(run: ar.Run) -> Any:
    return await (paced(run) if run.run_id == "followed" else quick(run))


class TestLoad:
    async def test_500_followers_and_a_1000_post_burst_on_one_worker(
        self, server: RedisProcess, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A run owned by worker A; on worker B 500 HTTP followers from its start and 1,000
        POSTs (100 in flight): no 5xx but a JSON 503 with Retry-After, every follower gets
        the log exactly, the owner's run finishes with its lease held."""
        caplog.set_level(logging.WARNING)
        prefix = f"l-{uuid.uuid4().hex}:"
        stores = [RedisStore(server.url, prefix=prefix, retention=120) for _ in range(2)]
        # The default lease (10 s): a lease shorter than the pool's 5 s wait would end runs
        # whose appends queue for a connection under the burst.
        apps = [AgentApp(load_agent, store=s, keep_alive=0.5) for s in stores]
        statuses: dict[int, int] = {}
        ends: dict[str, int] = {}  # how the 200s ended: RUN_FINISHED or a RUN_ERROR's code
        bad: list[str] = []
        limits = httpx.Limits(max_connections=FOLLOWERS + 10)
        # The burst's own client opens a connection per POST: reusing a keep-alive one that
        # uvicorn closes for idling (5 s) as the POST goes out is a client-side race (httpx
        # does not retry a POST), not what this test measures.
        fresh = httpx.Limits(max_connections=BURST_AT_ONCE, max_keepalive_connections=0)
        try:
            async with (
                asyncio.timeout(300),
                serving(apps[0]) as a,
                serving(apps[1]) as b,
                httpx.AsyncClient(timeout=120, limits=limits) as client,
                httpx.AsyncClient(timeout=120, limits=fresh) as burster,
                client.stream("POST", a, json=body("followed")) as response,
            ):
                owner = Reader(response)
                owner_task = asyncio.create_task(owner.run())
                await owner.until(3)
                connected = 0
                all_connected = asyncio.Event()
                followers: list[Reader] = []

                async def follow() -> None:
                    nonlocal connected
                    url = f"{b}/threads/t/runs/followed?after=0"
                    async with client.stream("GET", url) as joined:
                        reader = Reader(joined)
                        followers.append(reader)
                        connected += 1
                        if connected == FOLLOWERS:
                            all_connected.set()
                        await reader.run()

                started = time.monotonic()
                follower_tasks = [asyncio.create_task(follow()) for _ in range(FOLLOWERS)]
                await all_connected.wait()
                joined_in = time.monotonic() - started
                gate = asyncio.Semaphore(BURST_AT_ONCE)

                async def post(i: int) -> None:
                    async with gate:
                        answer = await burster.post(b, json=body(f"burst-{i}"))
                    statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
                    if answer.status_code == 200:
                        last = frames(answer.text)[-1][1]
                        end = last.get("code") or last["type"]
                        ends[end] = ends.get(end, 0) + 1
                    elif not (
                        answer.status_code == 503
                        and answer.headers["content-type"] == "application/json"
                        and answer.headers.get("retry-after") == "1"
                    ):
                        bad.append(f"{answer.status_code} {answer.text[:200]}")

                burst_started = time.monotonic()
                await asyncio.gather(*(post(i) for i in range(BURST)))
                burst_took = time.monotonic() - burst_started
                owner_finished_during_burst = owner_task.done()
                await asyncio.gather(owner_task, *follower_tasks)
                took = time.monotonic() - started
        finally:
            for store in stores:
                await store.aclose()
        log = await logged(server.url, prefix, "followed")
        complete = sum(reader.frames() == log for reader in followers)
        print(
            f"\n{FOLLOWERS} HTTP followers joined on one worker in {joined_in:.1f} s, "
            f"{complete} got all {len(log)} events in order; the burst of {BURST} POSTs "
            f"({BURST_AT_ONCE} in flight) took {burst_took:.1f} s: statuses {statuses}, "
            f"the 200s ended {ends}; the owner's run ended {log[-1][1]['type']} (done during "
            f"the burst: {owner_finished_during_burst}), all in {took:.1f} s"
        )

        assert not bad, bad[:5]
        # A POST that got its 200 under this load ends finished or with a named error.
        assert set(ends) <= {"RUN_FINISHED", "store_unavailable"}, ends
        assert set(statuses) <= {200, 503}, statuses
        assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
        assert log[-1][1]["type"] == "RUN_FINISHED"  # not worker_lost: the lease held
        assert deltas([e for _, e in log]) == list(range(200))
        assert owner.frames() == log
        assert_valid([e for _, e in log])
        assert complete == FOLLOWERS
        assert "'followed'" not in caplog.text  # nothing logged about the owner's run


class TestFull:
    async def test_maxmemory_full_is_named_and_the_same_app_serves_again(
        self, server: RedisProcess
    ) -> None:
        """noeviction at a tiny maxmemory: a new POST is a JSON 503 naming maxmemory, a running
        run ends with RUN_ERROR store_unavailable; after freeing memory the same app serves."""
        prefix = f"m-{uuid.uuid4().hex}:"
        admin = aioredis.Redis.from_url(server.url)
        try:
            async with (
                asyncio.timeout(60),
                worker(server.url, prefix, 2.0) as a,
                httpx.AsyncClient(timeout=30) as client,
                client.stream("POST", a, json=body("running")) as response,
            ):
                running = Reader(response)
                task = asyncio.create_task(running.run())
                await running.until(10)
                await admin.config_set("maxmemory-policy", "noeviction")
                await admin.config_set("maxmemory", "1")  # below what it holds: writes refused
                refused = await client.post(a, json=body("new"))
                await task
                await admin.config_set("maxmemory", "0")
                again = await client.post(a, json=body("after"))
        finally:
            await admin.aclose()

        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"] == "application/json"
        assert refused.headers["retry-after"] == "1"
        answer = refused.json()
        assert answer["error"] == "store unavailable"
        assert "maxmemory" in json.dumps(answer)
        events = [event for _, event in running.frames()]
        assert_valid(events)
        assert events[-1]["type"] == "RUN_ERROR"
        assert events[-1]["code"] == "store_unavailable"
        assert again.status_code == 200
        after = [event for _, event in frames(again.text)]
        assert_valid(after)
        assert after[-1]["type"] == "RUN_FINISHED"
        print(f"\nmaxmemory full: POST {refused.status_code} {answer}; run ended {events[-1]}")
