"""``python -m ambient_runs tail``: follow a served run, or a stored one, as a tree."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import pytest
from support.servers import serving

from ambient_runs._demo import main
from ambient_runs._tail import TailUsageError, run_url, tail
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore

sys.path.insert(0, str(Path(__file__).parent / "viewer"))
from tea_agent import TOPICS, agent


class TestRunUrl:
    @pytest.mark.parametrize(
        ("url", "ids"),
        [
            ("http://h/agent/threads/t1/runs/r1", ("t1", "r1")),
            ("http://h/agent/threads/a%2Fb/runs/r%201/", ("a/b", "r 1")),
            ("http://h/agent", None),
            ("http://h/agent/threads/t1/runs/r1/cancel", None),
        ],
    )
    def test_tells_a_run_from_an_endpoint(self, url: str, ids: tuple[str, str] | None) -> None:
        """…/threads/T/runs/R names a run (ids unquoted); anything else is an endpoint."""
        assert ids == run_url(url)

    @pytest.mark.parametrize(
        ("url", "options", "says"),
        [
            ("http://h/agent", {}, "names no run"),
            ("http://h/agent/threads/t/runs/r", {"message": "hi"}, "drop one"),
            ("http://h/agent", {"message": "hi", "replay": True}, "--replay applies"),
        ],
    )
    def test_options_that_name_no_one_run_are_refused(
        self, url: str, options: dict[str, object], says: str
    ) -> None:
        """No message for an endpoint, a message for a run, replay of a new run: refused."""
        with pytest.raises(TailUsageError, match=says):
            tail(url, **options)  # type: ignore[arg-type]


def tail_text(*args: str) -> tuple[int, str]:
    """Run ``tail`` through the command line in this process; return its status and output."""
    out = io.StringIO()
    return main(["tail", *args], out=out), out.getvalue()


class TestTailServed:
    async def test_starts_a_run_and_prints_its_tree_with_the_wire_ids(self) -> None:
        """--message POSTs a run and prints every subagent with its id, then the outcome."""
        async with serving(AgentApp(agent)) as url:
            status, output = await asyncio.to_thread(tail_text, url, "--message", "Tea?")

        lines = output.splitlines()
        assert 0 == status
        assert lines[0].startswith("run ")
        for n, topic in enumerate(TOPICS, 1):
            assert any(
                f"researcher#{n}  started research-{topic}: Looks into {topic}" in line
                for line in lines
            ), output
            assert f'calls search({{"query": "{topic} benefits"}})' in output
        assert "run finished: interrupt" in lines
        assert any(line.endswith("approval: Publish the answer?") for line in lines)
        assert "\x1b[" not in output  # not a terminal: no colour

    async def test_a_refused_request_is_status_1(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A server error (here: 404 of an unknown stored run) prints it, exit status 1."""
        async with serving(AgentApp(agent, store=MemoryStore())) as url:
            status, _ = await asyncio.to_thread(tail_text, f"{url}/threads/t/runs/nope")

        assert 1 == status
        assert "HTTP 404" in capsys.readouterr().err


class TestTailStored:
    async def test_joins_and_replays_a_stored_run(self) -> None:
        """A stored run's URL joins it (folded), --replay streams it all from the first event."""
        async with serving(AgentApp(agent, store=MemoryStore())) as url:
            started, first = await asyncio.to_thread(
                tail_text, url, "--message", "Tea?", "--thread", "t1"
            )
            run_id = first.split()[1]  # "run <runId> (thread t1)": the id tail made
            stored = f"{url}/threads/t1/runs/{run_id}"
            joined_status, joined = await asyncio.to_thread(tail_text, stored)
            replay_status, replayed = await asyncio.to_thread(tail_text, stored, "--replay")

        assert (0, 0, 0) == (started, joined_status, replay_status)
        assert "findings" in joined
        assert "run finished: interrupt" in joined
        assert "started research-tea" not in joined  # folded: the prelude, not the story
        for topic in TOPICS:
            assert f"started research-{topic}" in replayed
        assert "run finished: interrupt" in replayed
