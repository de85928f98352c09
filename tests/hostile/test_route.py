"""Item 3: the README's own Starlette route ends a failing stream with RUN_ERROR."""

from __future__ import annotations

import httpx
from _server import served
from support.sse import BODY, assert_one_terminal, events_of


class TestCustomRoute:
    async def test_an_event_that_cannot_be_encoded_ends_the_stream_with_run_error(self) -> None:
        """The stream is not cut: the client gets RUN_ERROR as the one terminal event."""
        async with served("starlette_route") as server, httpx.AsyncClient(timeout=20) as client:
            response = await client.post(server.url, json=BODY)

        events = events_of(response.content)
        assert (200, "RUN_ERROR") == (response.status_code, events[-1]["type"])
        assert_one_terminal(events)
