"""A slow reader in store mode gets every event of a 300,000-event run, through a real uvicorn.

The issue this guards (31, item 6): a client reading 300,000 deltas slowly got about 100,000
events and then ``RUN_ERROR events_expired``, because the owner's in-memory window moved on
and the store's default bound had trimmed the rest. Now a reader behind the window continues
from the store, and the default bound keeps a whole run of the documented maximum size.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import httpx
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs import _detached
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import DEFAULT_MAX_EVENTS, MemoryStore, Page

pytestmark = E2E

DELTAS = 300_000
RATE = 4_000_000  # bytes per second the reader takes, once the run is logged to its end


class WatchedStore(MemoryStore):
    """The default MemoryStore, telling when a run has ended and counting what reads served."""

    def __init__(self) -> None:
        super().__init__()  # the defaults: what the reader met
        self.ended = asyncio.Event()
        self.served = 0

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
        if final:
            self.ended.set()
        return last

    async def read(
        self, thread_id: str, run_id: str, after: int, *, limit: int = 1000, wait: float = 0
    ) -> Page:
        page = await super().read(thread_id, run_id, after, limit=limit, wait=wait)
        self.served += len(page.entries)
        return page


async def chatty(run: ar.Run) -> None:
    with ar.message() as message:
        for i in range(DELTAS):
            message.write("x")
            if i % 1000 == 0:
                await asyncio.sleep(0)


async def test_a_slow_reader_gets_all_300_004_events_and_run_finished() -> None:
    """Behind the owner's window, the reader continues from the store: every event, in order."""
    store = WatchedStore()
    app = AgentApp(chatty, store=store)
    started = time.monotonic()
    ids: list[int] = []
    kinds: dict[str, int] = {}
    last_event = b""
    async with (
        asyncio.timeout(120),
        serving(app) as url,
        httpx.AsyncClient(timeout=60) as client,
        client.stream(
            "POST", url, json={"threadId": "t", "runId": "slow", "messages": [], "state": {}}
        ) as response,
    ):
        assert response.status_code == 200
        buffer = b""
        first = True
        async for chunk in response.aiter_raw(65_536):
            if first:
                # The reader stalls until the whole run is logged, so that it is certainly
                # further behind than the owner keeps in memory; then reads at RATE.
                first = False
                await store.ended.wait()
                produced = time.monotonic() - started
            else:
                await asyncio.sleep(len(chunk) / RATE)
            buffer += chunk
            blocks = buffer.split(b"\n\n")
            buffer = blocks.pop()
            for block in blocks:
                id_line, data = block.split(b"\n", 1)
                ids.append(int(id_line[4:]))
                kind = data[15 : data.index(b'"', 15)].decode()
                kinds[kind] = kinds.get(kind, 0) + 1
                last_event = data
    elapsed = time.monotonic() - started

    total = DELTAS + 4
    assert ids == list(range(1, total + 1))
    assert kinds["TEXT_MESSAGE_CONTENT"] == DELTAS
    assert last_event.startswith(b'data: {"type":"RUN_FINISHED"')
    # It fell behind: the owner reads the store for a follower only when the follower is
    # behind the frames it keeps (at most 2 * _KEEP); what the sockets held when the reader
    # stalled came from memory, the rest (a whole 5,000-event page at a time) from the store.
    assert 2 * _detached._KEEP < total
    assert store.served >= 100_000
    assert DEFAULT_MAX_EVENTS >= total
    print(f"\n{total} events, produced in {produced:.1f} s, read in {elapsed:.1f} s")
    print(f"served from the store: {store.served}")
