"""Items 2 and 7: a 422 stays small and off the loop; a body that will not arrive gets 408."""

from __future__ import annotations

import asyncio
import json

import httpx
from _server import Served, served
from support.sse import JSON, assert_one_terminal, events_of

# 300,000 bad messages in 0.9 MB: 42 MB of 422 after 6-12 s on the loop, before.
HOSTILE = json.dumps(
    {"threadId": "t", "runId": "r", "messages": [{}] * 300_000}, separators=(",", ":")
).encode()
HOLD_MS = 50
# One small valid run first: the figures are about what a request costs the loop, not the
# child process's one-time costs (imports on the first run, the parse threads starting).
WARM = json.dumps({"threadId": "t", "runId": "warm", "messages": []}).encode()


async def warmed(server: Served, client: httpx.AsyncClient) -> None:
    """Serve one small run to completion, then zero the probe's figures."""
    warm = await client.post(server.url, content=WARM, headers=JSON)
    assert_one_terminal(events_of(warm.content))
    await server.health(client, reset=True)


class TestProblemAmplification:
    async def test_the_422_is_capped_and_the_loop_keeps_answering(self) -> None:
        """20 problems and a count of the rest; health answered meanwhile; no 50 ms hold."""
        async with served("hello") as server, httpx.AsyncClient(timeout=60) as client:
            await warmed(server, client)
            hostile = asyncio.create_task(client.post(server.url, content=HOSTILE, headers=JSON))
            answered_meanwhile = 0
            while not hostile.done():
                await server.health(client)
                answered_meanwhile += not hostile.done()
                await asyncio.sleep(0.01)
            response = await hostile
            figures = await server.health(client)

        body = response.json()
        assert (422, 20, 299_980) == (response.status_code, len(body["detail"]), body["omitted"])
        assert len(response.content) < 10_000
        assert answered_meanwhile >= 1
        assert figures["max_hold_ms"] < HOLD_MS, figures

    async def test_a_large_valid_body_is_parsed_off_the_loop(self) -> None:
        """A valid 1 MB input runs, and its parse holds the loop less than 50 ms."""
        messages = [{"id": f"m{i}", "role": "user", "content": "x" * 20} for i in range(14_000)]
        big = json.dumps({"threadId": "t", "runId": "r", "messages": messages}).encode()
        assert 900_000 < len(big) < 1_000_000
        async with served("hello") as server, httpx.AsyncClient(timeout=60) as client:
            await warmed(server, client)
            response = await client.post(server.url, content=big, headers=JSON)
            figures = await server.health(client)

        assert_one_terminal(events_of(response.content))
        assert figures["max_hold_ms"] < HOLD_MS, figures


async def _raw(port: int, head: bytes, body: bytes) -> tuple[bytes, bool]:
    """Send *head* and part of a body on a raw socket; return the answer and whether it closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), 10)
        rest = await asyncio.wait_for(reader.read(), 10)  # b"" once the server closes
        return answer + rest, True
    finally:
        writer.close()


class TestBodyTimeout:
    async def test_a_half_sent_body_gets_408_and_the_connection_closes(self) -> None:
        """Content-Length says 100, 10 bytes come: 408 after body_timeout, then close."""
        async with served("slow_body") as server:
            head = (
                b"POST /agent HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 100\r\n\r\n"
            )
            answer, closed = await _raw(server.port, head, b'{"threadId"')

        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"error":"request timeout"' in answer
        assert closed

    async def test_a_chunked_body_that_never_ends_gets_408(self) -> None:
        """A chunked body whose last chunk never comes is timed out the same way."""
        async with served("slow_body") as server:
            head = (
                b"POST /agent HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            answer, closed = await _raw(server.port, head, b'5\r\n{"thr\r\n')

        assert answer.startswith(b"HTTP/1.1 408 ")
        assert closed

    async def test_many_stalled_bodies_do_not_stop_the_server(self) -> None:
        """100 stalled connections at once all get 408 while a normal request is served."""
        async with served("slow_body") as server, httpx.AsyncClient(timeout=20) as client:
            head = (
                b"POST /agent HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 100\r\n\r\n"
            )
            stalled = [asyncio.create_task(_raw(server.port, head, b"{")) for _ in range(100)]
            await asyncio.sleep(0.05)
            normal = await client.post(
                server.url, json={"threadId": "t", "runId": "r", "messages": []}
            )
            answers = await asyncio.gather(*stalled)

        assert "RUN_FINISHED" == events_of(normal.content)[-1]["type"]
        assert [True] * 100 == [a.startswith(b"HTTP/1.1 408 ") and c for a, c in answers]
