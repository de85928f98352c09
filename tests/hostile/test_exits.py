"""Item 1: an agent's SystemExit or KeyboardInterrupt ends its run, never the server."""

from __future__ import annotations

import httpx
import pytest
from _server import served
from support.sse import BODY, assert_one_terminal, events_of

import ambient_runs as ar
from ambient_runs.testing import make_input


class TestServedRunsSurviveExits:
    @pytest.mark.parametrize(
        ("app", "code"),
        [
            ("exits", "SystemExit"),
            ("interrupts", "KeyboardInterrupt"),
            ("exits_in_a_thread", "SystemExit"),
        ],
    )
    async def test_the_run_ends_with_run_error_and_the_server_keeps_serving(
        self, app: str, code: str
    ) -> None:
        """Three such requests in a row each get RUN_ERROR; the process answers after them."""
        async with served(app) as server, httpx.AsyncClient(timeout=20) as client:
            for _ in range(3):
                response = await client.post(server.url, json=BODY)
                events = events_of(response.content)
                assert_one_terminal(events)
                assert ("RUN_ERROR", code) == (events[-1]["type"], events[-1]["code"])
            health = await client.get(server.base + "/_health")

            assert (200, True) == (health.status_code, server.alive)


class TestInProcessRunKeepsItsBehaviour:
    async def test_a_plain_run_still_lets_system_exit_through(self) -> None:
        """Without a stream, SystemExit ends the run as cancelled and propagates, as documented."""
        run = ar.Run(make_input())
        with pytest.raises(SystemExit):
            async with run:
                raise SystemExit(2)

        assert ["RUN_STARTED", "RUN_FINISHED"] == [e.type.value for e in run.events]
        assert "RunFinishedCancelledOutcome" == type(run.events[-1].outcome).__name__  # type: ignore[attr-defined]

    async def test_stream_reports_system_exit_as_run_error(self) -> None:
        """`stream()` alone (no server) turns an agent's SystemExit into RUN_ERROR too."""

        async def agent(run: ar.Run) -> None:
            raise SystemExit(4)

        events = [e async for e in ar.stream(agent, make_input())]

        assert ("RUN_ERROR", "SystemExit") == (events[-1].type.value, events[-1].code)  # type: ignore[attr-defined]
