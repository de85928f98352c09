"""trio: `Run` works under it, cancellation is cancellation, the transport says asyncio only."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import make_input


def summary(run: ar.Run) -> list[tuple[str, Any]]:
    """Return each event's type with its code or outcome."""
    return [
        (e.type.value, getattr(e, "code", None) or type(getattr(e, "outcome", None)).__name__)
        for e in run.events
    ]


class TestTrioCancellation:
    def test_a_cancel_scope_cancels_the_subagent_and_the_run(self) -> None:
        """trio's Cancelled ends a subagent and the run as cancelled, as asyncio's does."""

        @ar.subagent("waiter")
        async def waiter() -> None:
            await trio.sleep(10)

        async def main() -> ar.Run:
            run = ar.Run(make_input())
            with trio.move_on_after(0.01):
                async with run:
                    await waiter()
            return run

        run = trio.run(main)

        assert [
            ("RUN_STARTED", "NoneType"),
            ("SUBAGENT_STARTED", "NoneType"),
            ("SUBAGENT_ERROR", "cancelled"),
            ("RUN_FINISHED", "RunFinishedCancelledOutcome"),
        ] == summary(run)


class TestTrioTransport:
    def test_stream_fails_at_once_saying_asyncio_only(self) -> None:
        """Iterating a stream under trio raises at the first step, naming the way out."""

        async def agent(run: ar.Run) -> None:
            ar.say("never")

        async def main() -> None:
            async for _ in ar.stream(agent, make_input()):
                pass

        with pytest.raises(RuntimeError, match="asyncio only") as caught:
            trio.run(main)
        assert "ambient_runs.Run" in str(caught.value)

    def test_agent_app_refuses_to_start_under_trio(self) -> None:
        """Under a trio server the lifespan startup fails with the reason, so it never serves."""
        app = AgentApp(lambda run: None)
        sent: list[dict[str, Any]] = []

        async def main() -> None:
            messages = iter([{"type": "lifespan.startup"}])

            async def receive() -> dict[str, Any]:
                return next(messages)

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await app({"type": "lifespan"}, receive, send)

        trio.run(main)

        assert 1 == len(sent)
        assert "lifespan.startup.failed" == sent[0]["type"]
        assert "asyncio only" in sent[0]["message"]
