"""
Each file of ``examples/`` runs as its docstring says, and does what it says.

Every example is started as its own process (``python examples/NAME.py --port P``, the
command of its docstring), on a free loopback port; the test waits for uvicorn's "running"
line, drives it with the official ``@ag-ui/client`` (``tests/node``) or a real HTTP client,
checks what came back, and stops the process by its PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.node import assert_clean, client_run, client_verify

import ambient_runs as ar
from ambient_runs.testing import assert_valid

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

pytestmark = [pytest.mark.e2e]

USER = {"id": "u1", "role": "user", "content": "What about it?"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running(name: str, *args: str, timeout: float = 60) -> Iterator[str]:
    """
    Start ``python examples/NAME.py --port P ARGS``; yield ``http://127.0.0.1:P``.

    Ready is uvicorn's own "Uvicorn running on" line on stderr (read by a thread that keeps
    draining the pipe, so the child never blocks on it). On exit the process is sent SIGTERM
    by its PID, then killed if it has not ended within 10 s.
    """
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--port", str(port), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = threading.Event()
    log: list[str] = []

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()  # the process ended: stop waiting

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        ready.wait(timeout)
        if process.poll() is not None or not any("Uvicorn running on" in x for x in log):
            raise RuntimeError(f"examples/{name}.py did not start:\n{''.join(log)}")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
        reader.join(10)
        assert process.stderr is not None
        process.stderr.close()


def _events(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in run["events"] if e["type"] == kind]


def _text(run: dict[str, Any]) -> str:
    return "".join(e["delta"] for e in _events(run, "TEXT_MESSAGE_CONTENT"))


class TestEveryExample:
    def test_each_example_has_its_command_and_a_test(self) -> None:
        """Each example's docstring gives the command that runs it, and this file runs it."""
        source = Path(__file__).read_text()
        for path in sorted(EXAMPLES.glob("*.py")):
            doc = path.read_text().split('"""')[1]

            assert f"python examples/{path.name}" in doc, path.name
            assert f'running("{path.stem}"' in source, path.name
            assert f'--8<-- "examples/{path.name}"' in (ROOT / "docs" / "examples.md").read_text()


class TestFrameworkExamples:
    def test_pydantic_ai_agent(self) -> None:
        """The pydantic-ai agent calls its tool and answers, as one subagent, offline."""
        with running("pydantic_ai_agent") as base:
            result = client_run(base + "/", [{"input": {"runId": "r1", "messages": [USER]}}])

        [run] = result["runs"]
        assert_clean(run)
        assert ["forecaster"] == [e["name"] for e in _events(run, "SUBAGENT_STARTED")]
        assert ["forecast"] == [e["toolCallName"] for e in _events(run, "TOOL_CALL_START")]
        assert "Sunny and 21 °C in Paris tomorrow." == _text(run)
        assert {"r1-sub-1"} == {e.get("subagentRunId") for e in _events(run, "TOOL_CALL_RESULT")}

    def test_langgraph_agent(self) -> None:
        """The LangGraph graph runs its two nodes as steps and streams the model's answer."""
        with running("langgraph_agent") as base:
            result = client_run(base + "/", [{"input": {"runId": "r1", "messages": [USER]}}])

        [run] = result["runs"]
        assert_clean(run)
        assert ["advisor"] == [e["name"] for e in _events(run, "SUBAGENT_STARTED")]
        assert ["plan", "answer"] == [e["stepName"] for e in _events(run, "STEP_STARTED")]
        assert "A heat pump, if the house is insulated." in _text(run)
        assert {"answer": "A heat pump, if the house is insulated."} == (
            _events(run, "RUN_FINISHED")[0]["result"]
        )

    def test_openai_agents_agent(self) -> None:
        """The Agents SDK agent calls its tool and answers, scripted, twice in a row."""
        with running("openai_agents_agent") as base:
            result = client_run(
                base + "/",
                [
                    {"input": {"runId": "r1", "messages": [USER]}},
                    {"input": {"runId": "r2"}},  # a fresh script per request
                ],
            )

        for run in result["runs"]:
            assert_clean(run)
            assert ["order_status"] == [e["toolCallName"] for e in _events(run, "TOOL_CALL_START")]
            assert ["Order A-17 left the warehouse this morning."] == [
                e["content"] for e in _events(run, "TOOL_CALL_RESULT")
            ]
            assert "Your order A-17 is on its way." == _text(run)


NOTIFY = {
    "name": "notify",
    "description": "Show a message on the page",
    "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
}
SHOW_TICKET = {
    "name": "show_ticket",
    "description": "Show the ticket on the page",
    "parameters": {"type": "object", "properties": {"train": {"type": "string"}}},
}


class TestPageExamples:
    def test_copilotkit_app_state_and_frontend_tool(self) -> None:
        """The page's list gets the item (a state delta), its notify tool is called and read."""
        with running("copilotkit_app") as base:
            result = client_run(
                base + "/agent/",
                [
                    {
                        "input": {
                            "runId": "r1",
                            "messages": [{"id": "u1", "role": "user", "content": "Add eggs"}],
                            "tools": [NOTIFY],
                        },
                        "answerTools": {"notify": "shown"},
                    },
                    {"input": {"runId": "r2", "tools": [NOTIFY]}},
                ],
                initial_state={"items": ["milk"]},
            )

        first, second = result["runs"]
        assert_clean(first)
        assert_clean(second)
        # One publication of the new list (a delta or a snapshot: whichever is smaller).
        assert 1 == len([e for e in first["events"] if e["type"].startswith("STATE_")])
        assert [{"message": "eggs is on the list"}] == [
            t["arguments"] for t in first["executedTools"]
        ]
        assert ["r1-tool-1"] == first["runFinished"][0]["pendingToolCallIds"]
        assert "The page says: shown" == _text(second)
        assert {"items": ["milk", "eggs"]} == result["state"]

    def test_approval_then_frontend_tool(self) -> None:
        """The run pauses on an approval, a later run resumes it, and the ticket tool is called."""
        interrupt_id = "r1-int-1~r1-sub-1~booker"  # deterministic: run, counter, invocation
        approve = {
            "interruptId": interrupt_id,
            "status": "resolved",
            "payload": {"approved": True},
        }
        with running("approval") as base:
            result = client_run(
                base + "/",
                [
                    {"input": {"runId": "r1", "messages": [USER]}},
                    {
                        "input": {"runId": "r2", "resume": [approve], "tools": [SHOW_TICKET]},
                        "answerTools": {"show_ticket": "ticket 12A shown"},
                    },
                    {"input": {"runId": "r3", "tools": [SHOW_TICKET]}},
                ],
            )

        paused, booked, shown = result["runs"]
        for run in result["runs"]:
            assert_clean(run)
        assert [interrupt_id] == [i["id"] for i in paused["runFinished"][0]["interrupts"]]
        assert ["r1-sub-1"] == [e["subagentRunId"] for e in _events(booked, "SUBAGENT_STARTED")]
        assert "Booked the 9:40 to Lyon." == _text(booked)
        assert ["show_ticket"] == [t["name"] for t in booked["executedTools"]]
        assert "Enjoy the trip (ticket 12A shown)." == _text(shown)

    def test_approval_denied(self) -> None:
        """A cancelled answer to the approval books nothing."""
        deny = {"interruptId": "r1-int-1~r1-sub-1~booker", "status": "cancelled"}
        with running("approval") as base:
            result = client_run(
                base + "/",
                [
                    {"input": {"runId": "r1", "messages": [USER]}},
                    {"input": {"runId": "r2", "resume": [deny]}},
                ],
            )

        assert "Not booked." == _text(result["runs"][1])


def _frames(lines: Iterator[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(id, event)`` for each SSE frame of *lines*."""
    frame_id = None
    for line in lines:
        if line.startswith("id: "):
            frame_id = int(line[4:])
        elif line.startswith("data: "):
            assert frame_id is not None
            yield frame_id, json.loads(line[6:])


class TestDetachedExample:
    def test_two_workers_share_a_run(self, redis_url: str) -> None:
        """A run started on one worker and dropped half way is finished from the other."""
        body = {"threadId": "t", "runId": "r1", "messages": [USER]}
        with (
            running("detached_redis", "--redis", redis_url) as first,
            running("detached_redis", "--redis", redis_url) as second,
            httpx.Client(timeout=30) as client,
        ):
            seen: list[tuple[int, dict[str, Any]]] = []
            with client.stream("POST", first + "/", json=body) as response:
                assert 200 == response.status_code
                for item in _frames(response.iter_lines()):
                    seen.append(item)
                    if len(seen) == 8:
                        break  # the client goes away; the run goes on
            resumed = client.get(
                second + "/threads/t/runs/r1", headers={"last-event-id": str(seen[-1][0])}
            )
            joined = client.get(second + "/threads/t/runs/r1")

        rest = list(_frames(iter(resumed.text.splitlines())))
        ids = [i for i, _ in seen + rest]
        events = [e for _, e in seen + rest]
        assert list(range(1, len(ids) + 1)) == ids
        assert_valid([ar.from_wire(e) for e in events])
        assert "RUN_FINISHED" == events[-1]["type"]
        words = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert re.sub(r"\s+", " ", words).strip().endswith("never will be.")
        [verdict] = client_verify([[e for _, e in _frames(iter(joined.text.splitlines()))]])
        assert (True, []) == (verdict["ok"], verdict["warnings"])
