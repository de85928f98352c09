"""Sync agents run in a worker thread with the run's context; what cannot run fails at once."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from support.servers import serving
from support.sse import BODY, assert_one_terminal, events_of

import ambient_runs as ar
from ambient_runs.asgi import AgentApp


class TestSyncAgents:
    async def test_a_plain_function_is_served_from_a_worker_thread(self) -> None:
        """Its emitters attribute as usual, its result finishes the run, the loop is not used."""
        loop_thread = threading.get_ident()
        threads: list[int] = []

        @ar.subagent("helper")
        def helper() -> str:
            ar.say("from the helper")
            return "ok"

        def agent(run: ar.Run) -> dict[str, Any]:
            threads.append(threading.get_ident())
            ar.say(f"sync sees {run.last_user_text()}")
            return {"helper": helper(), "path": run.request.path if run.request else None}

        async with serving(AgentApp(agent)) as url, httpx.AsyncClient(timeout=20) as client:
            response = await client.post(url, json=BODY)

        events = events_of(response.content)
        assert_one_terminal(events)
        assert {"helper": "ok", "path": "/agent"} == events[-1]["result"]
        assert "SUBAGENT_STARTED" in [e["type"] for e in events]
        assert [False] == [t == loop_thread for t in threads]

    async def test_a_plain_function_returning_a_coroutine_is_awaited(self) -> None:
        """A lambda around an async agent works too."""

        async def inner(run: ar.Run) -> str:
            ar.say("inner")
            return "done"

        events = [e async for e in ar.stream(lambda run: inner(run), BODY)]

        assert ("RUN_FINISHED", "done") == (events[-1].type.value, events[-1].result)  # type: ignore[attr-defined]


class TestWhatCannotRun:
    @pytest.mark.parametrize(
        ("agent", "match"),
        [
            (lambda: None, "takes the Run as its one positional argument"),
            (lambda run, other: None, "takes the Run as its one positional argument"),
            ("agent", "must be a callable taking the Run, not str"),
            (None, "must be a callable taking the Run, not NoneType"),
        ],
    )
    def test_refused_at_construction(self, agent: Any, match: str) -> None:
        """AgentApp and stream() refuse it with a TypeError naming the fix, before any request."""
        with pytest.raises(TypeError, match=match):
            AgentApp(agent)
        with pytest.raises(TypeError, match=match):
            ar.stream(agent, BODY)

    def test_a_generator_agent_is_refused(self) -> None:
        """A generator cannot be an agent: the message says to drop the yield."""

        async def agent(run: ar.Run) -> Any:
            yield 1

        with pytest.raises(TypeError, match="drop the `yield`"):
            AgentApp(agent)

    def test_optional_extra_parameters_are_fine(self) -> None:
        """An agent with defaults beyond the Run can be called with the Run alone."""

        async def agent(run: ar.Run, *, model: str = "m") -> None:
            return None

        assert "agent" in repr(AgentApp(agent))
