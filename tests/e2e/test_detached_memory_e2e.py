"""Detached runs on the embedded MemoryStore, one uvicorn in the test's loop."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from support.node import client_verify
from support.servers import E2E, serving
from support.sse import frames_of

import ambient_runs as ar
from ambient_runs import sse
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore

pytestmark = E2E


def body(run_id: str) -> dict[str, Any]:
    return {"threadId": "t", "runId": run_id, "messages": [], "state": {}}


gate: asyncio.Event


async def slow(run: ar.Run) -> dict[str, Any]:
    run.set_state({"n": 0})
    with ar.message() as message:
        for i in range(30):
            message.write(f"{i} ")
            run.update_state(lambda s: s.update(n=s["n"] + 1))
            await asyncio.sleep(0.01)
            if i == 10:
                await gate.wait()
    return {"done": True}


@pytest.fixture
async def url() -> Any:
    global gate
    gate = asyncio.Event()
    app = AgentApp(slow, store=MemoryStore(max_events=20_000), lease=1, keep_alive=0.2)
    async with serving(app) as where:
        yield where


async def test_a_disconnect_leaves_the_run_going(url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        async with client.stream("POST", url, json=body("r1")) as response:
            async for line in response.aiter_lines():
                if line.startswith("id: 5"):
                    break
        gate.set()
        whole = await client.get(f"{url}/threads/t/runs/r1")  # a join: waits to the end
        replay = await client.get(f"{url}/threads/t/runs/r1", params={"after": "0"})

    events = [e for _, e in frames_of(replay.text, comments=True)]
    assert events[-1] == {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r1",
        "result": {"done": True},
    }
    assert [i for i, _ in frames_of(replay.text, comments=True)] == list(range(1, len(events) + 1))
    verdicts = client_verify([[e for _, e in frames_of(whole.text, comments=True)], events])
    assert verdicts[0]["ok"], verdicts[0]["error"]
    assert verdicts[1]["ok"], verdicts[1]["error"]
    assert verdicts[0]["messages"] == verdicts[1]["messages"]
    assert verdicts[0]["state"] == verdicts[1]["state"] == {"n": 30}


async def test_cancel_ends_the_run_cancelled_and_idle_followers_get_keep_alives(url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        async with client.stream("POST", url, json=body("r2")) as response:
            text = ""
            async for chunk in response.aiter_text():
                text += chunk
                if sse.KEEP_ALIVE.decode() in text and "cancelling" not in text:
                    answer = await client.post(f"{url}/threads/t/runs/r2/cancel", json={})
                    assert answer.status_code == 202
                    text += "cancelling"
        late = await client.post(f"{url}/threads/t/runs/r2/cancel", json={})

    events = [e for _, e in frames_of(text.replace("cancelling", ""), comments=True)]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert late.status_code == 409
    assert client_verify([events])[0]["ok"]


async def test_the_same_run_id_twice_is_a_conflict(url: str) -> None:
    gate.set()
    async with httpx.AsyncClient(timeout=10) as client:
        first = await client.post(url, json=body("r3"))
        second = await client.post(url, json=body("r3"))

    assert first.status_code == 200
    assert (second.status_code, second.json()["error"]) == (409, "run exists")


async def test_methods_and_cursors_are_checked(url: str) -> None:
    gate.set()
    async with httpx.AsyncClient(timeout=10) as client:
        await client.post(url, json=body("r4"))
        post_follow = await client.post(f"{url}/threads/t/runs/r4", json={})
        get_cancel = await client.get(f"{url}/threads/t/runs/r4/cancel")
        bad = await client.get(f"{url}/threads/t/runs/r4", headers={"Last-Event-ID": "-3"})
        beyond = await client.get(f"{url}/threads/t/runs/r4", headers={"Last-Event-ID": "999"})
        last = await client.get(f"{url}/threads/t/runs/r4", headers={"Last-Event-ID": "0"})

    assert (post_follow.status_code, post_follow.headers["allow"]) == (405, "GET")
    assert (get_cancel.status_code, get_cancel.headers["allow"]) == (405, "POST")
    assert bad.status_code == 400
    assert (beyond.status_code, beyond.text) == (200, "")
    n = len(frames_of(last.text, comments=True))
    tail = await _get(url, "r4", n - 2)
    assert [i for i, _ in frames_of(tail, comments=True)] == [n - 1, n]


async def _get(url: str, run_id: str, after: int) -> str:
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(f"{url}/threads/t/runs/{run_id}?after={after}")).text


async def test_trimmed_events_are_gone_with_a_clean_410() -> None:
    async def chatty(run: ar.Run) -> None:
        for i in range(50):
            ar.say(f"{i}")

    app = AgentApp(chatty, store=MemoryStore(max_events=10))
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as client:
        await client.post(url, json=body("r5"))
        gone = await client.get(f"{url}/threads/t/runs/r5?after=3")
        joined = await client.get(f"{url}/threads/t/runs/r5")

    assert (gone.status_code, gone.json()["error"]) == (410, "events expired")
    assert "join the run without a cursor" in gone.json()["detail"][0]
    assert joined.status_code == 410  # a join needs the whole log


def test_sse_frame_carries_an_id() -> None:
    assert sse.frame(b"{}", id=7) == b"id: 7\ndata: {}\n\n"
    assert sse.frame(b"{}") == b"data: {}\n\n"
    with pytest.raises(ValueError, match="line break"):
        sse.frame(b"{}", id="a\nb")
