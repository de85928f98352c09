"""Tests for the demo: ``python -m ambient_runs demo`` and its scripted agent."""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from ambient_runs import events as ev
from ambient_runs._demo import (
    _ANSWER,
    CONFIRM_TOOL,
    DEFAULT_QUESTION,
    main,
    research_agent,
)
from ambient_runs._stream import stream
from ambient_runs.asgi import AgentApp
from ambient_runs.console import TreePrinter
from ambient_runs.testing import assert_valid, make_input, wire

SUMMARY = re.compile(r"^summary: (\d+) events, 3 subagents, \d+\.\d\d s$")


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        """Pretend to be a terminal."""
        return True


def run_demo(*args: str, out: io.StringIO | None = None) -> tuple[int, str]:
    """Run the demo in-process at full speed; return its status and output."""
    out = io.StringIO() if out is None else out
    status = main(["demo", "--pace", "0", *args], out=out)
    return status, out.getvalue()


class TestDemoTree:
    def test_prints_three_researchers_and_a_summary(self) -> None:
        """The tree shows the planner, the three researchers (ids as on the wire), a summary."""
        status, output = run_demo()

        lines = output.splitlines()
        assert 0 == status
        assert "run demo-run (thread demo-thread)" == lines[0]
        for n, angle in enumerate(("efficiency", "cost", "emissions"), 1):
            assert f"      researcher#{n}  started demo-run-sub-{n}: Looks into {angle}" in lines
        assert any(line.startswith("  planner  says: Yes,") for line in lines)
        assert "run finished: success" == lines[-3]
        assert "tokens (scripted/demo-researcher): 240 in, 101 out" == lines[-2]
        assert SUMMARY.match(lines[-1]), lines[-1]

    def test_indents_subagents_by_nesting(self) -> None:
        """Researcher lines sit one level deeper than the planner's."""
        _, output = run_demo()

        lines = output.splitlines()
        researcher = {len(x) - len(x.lstrip()) for x in lines if "researcher#" in x}
        planner = {len(x) - len(x.lstrip()) for x in lines if "planner" in x}
        assert ({2}, {6}) == (planner, researcher)

    def test_colours_a_terminal(self) -> None:
        """On a terminal the tree is coloured with ANSI codes."""
        _, output = run_demo(out=Terminal())

        assert "\x1b[" in output

    def test_no_color_turns_colour_off(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """NO_COLOR disables colour even on a terminal."""
        monkeypatch.setenv("NO_COLOR", "1")
        _, output = run_demo(out=Terminal())

        assert "\x1b[" not in output

    def test_plain_output_is_not_coloured(self) -> None:
        """Output that is not a terminal (a pipe, a file) carries no ANSI codes."""
        _, output = run_demo()

        assert "\x1b[" not in output

    def test_runs_as_a_module(self) -> None:
        """``python -m ambient_runs demo`` runs and ends with the summary."""
        done = subprocess.run(
            [sys.executable, "-m", "ambient_runs", "demo", "--pace", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"NO_COLOR": "1"},
            cwd=Path(__file__).resolve().parent.parent,
        )

        assert (0, "") == (done.returncode, done.stderr)
        assert SUMMARY.match(done.stdout.splitlines()[-1])


class TestDemoQuestion:
    def test_researches_the_question_asked(self) -> None:
        """--question "Tea or coffee?" researches tea or coffee, not the heat pump's angles."""
        status, output = run_demo("--question", "Tea or coffee?")

        assert 0 == status
        assert "Tea or coffee" in output
        assert 3 == output.count('calls web_search({"query": "Tea or coffee: ')
        assert [] == [w for w in ("efficiency", "emissions", "heat pump") if w in output]

    def test_the_default_question_keeps_its_script(self) -> None:
        """The heat-pump question still gets the efficiency, cost and emissions angles."""
        _, output = run_demo()

        assert all(w in output for w in ("efficiency", "cost", "emissions"))


async def browser_get(app: AgentApp) -> httpx.Response:
    """A browser's GET of the served demo, in process."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        return await client.get("/", headers={"accept": "text/html"})


class TestDemoJson:
    def test_frames_parse_into_a_valid_stream(self) -> None:
        """--json prints SSE frames that parse into one valid AG-UI run."""
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        status = main(["demo", "--pace", "0", "--json"], out=out)
        out.flush()
        raw = out.buffer.getvalue()  # type: ignore[attr-defined]

        blocks = raw.split(b"\n\n")
        events = [json.loads(b.removeprefix(b"data: ")) for b in blocks if b]
        assert (0, b"") == (status, blocks[-1])
        assert all(b.startswith(b"data: {") for b in blocks[:-1])
        assert_valid(events)
        names = [e["name"] for e in events if e["type"] == "SUBAGENT_STARTED"]
        assert ["researcher"] * 3 == names
        assert "RUN_FINISHED" == events[-1]["type"]


class TestDemoCommandLine:
    def test_help_explains_each_option(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``demo --help`` documents every option."""
        with pytest.raises(SystemExit) as exited:
            main(["demo", "--help"])

        text = capsys.readouterr().out
        assert 0 == exited.value.code
        for option in ("--json", "--serve", "--host", "--port", "--pace", "--question"):
            assert option in text

    @pytest.mark.parametrize(
        "args",
        [["--port", "9000"], ["--host", "0.0.0.0"], ["--json", "--serve"], ["--pace", "-1"], []],
        ids=["port", "host", "json+serve", "pace", "no-command"],
    )
    def test_bad_arguments_exit_2(
        self, args: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Options that make no sense together are usage errors."""
        with pytest.raises(SystemExit) as exited:
            main(["demo", *args] if args else [])

        assert 2 == exited.value.code
        assert "error:" in capsys.readouterr().err

    def test_serve_without_uvicorn_says_how_to_install_it(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--serve without uvicorn fails clearly, naming the install command."""
        monkeypatch.setitem(sys.modules, "uvicorn", None)

        status = main(["demo", "--serve"])

        assert 2 == status
        assert "pip install uvicorn" in capsys.readouterr().err

    def test_serve_runs_uvicorn_on_localhost(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """--serve hands an AgentApp to uvicorn, bound to 127.0.0.1:8000 unless told."""
        calls: list[tuple[Any, dict[str, Any]]] = []
        fake = types.ModuleType("uvicorn")
        fake.run = lambda app, **kwargs: calls.append((app, kwargs))  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "uvicorn", fake)

        main(["demo", "--serve"])
        main(["demo", "--serve", "--host", "::1", "--port", "9001"])

        [(app, default), (_, chosen)] = calls
        assert isinstance(app, AgentApp)
        assert 200 == asyncio.run(browser_get(app)).status_code  # the live run viewer
        assert ({"host": "127.0.0.1", "port": 8000}, {"host": "::1", "port": 9001}) == (
            default,
            chosen,
        )


class TestResearchAgent:
    async def test_stream_is_valid_and_state_complete(self) -> None:
        """The agent's run is valid AG-UI; the state ends with three findings, answered."""
        events = [e async for e in stream(research_agent(0), make_input(user="heat?"))]

        assert_valid(events)
        [*_, last] = events
        assert isinstance(last, ev.RunFinishedEvent)
        assert ["efficiency", "cost", "emissions"] == [r["angle"] for r in last.result["research"]]

    async def test_uses_the_default_question_without_a_user_message(self) -> None:
        """With no user message the planner researches the default question."""
        events = [e async for e in stream(research_agent(0), make_input())]

        [snapshot] = [e for e in events if isinstance(e, ev.StateSnapshotEvent)]
        assert DEFAULT_QUESTION == snapshot.snapshot["question"]

    async def test_offered_confirm_it_asks_to_save_and_stops(self) -> None:
        """A client offering `confirm`: the answer, then the call, pending; the result is kept."""
        offered = make_input(run_id="d1", user="heat?", tools=(CONFIRM_TOOL,))

        events = [e async for e in stream(research_agent(0), offered)]

        assert_valid(events)
        [*_, last] = events
        assert isinstance(last, ev.RunFinishedEvent)
        assert isinstance(last.outcome, ev.RunFinishedSuccessOutcome)
        [call_id] = last.outcome.pending_tool_call_ids or ()
        [start] = [
            e for e in events if isinstance(e, ev.ToolCallStartEvent) and e.tool_call_id == call_id
        ]
        assert ("confirm", None) == (start.tool_call_name, start.subagent_run_id)
        assert not [
            e
            for e in events
            if isinstance(e, ev.ToolCallResultEvent) and e.tool_call_id == call_id
        ]
        assert _ANSWER == last.result["answer"]

    @pytest.mark.parametrize(
        ("content", "saved"),
        [
            ('{"confirmed": true}', True),
            ("true", True),
            ("yes", True),
            ("no", False),
            ("{}", False),
        ],
    )
    async def test_the_next_run_records_the_clients_decision(
        self, content: str, saved: bool
    ) -> None:
        """Given the client's answer, the planner records it without researching again."""
        call = ev.ToolCall(
            id="d1-tool-7",
            function=ev.FunctionCall(name="confirm", arguments='{"question": "Save?"}'),
        )
        history = (
            ev.UserMessage(id="u1", content="heat?"),
            ev.AssistantMessage(id="d1-tool-7", tool_calls=(call,)),
            ev.ToolMessage(id="t1", tool_call_id="d1-tool-7", content=content),
        )
        state = {"question": "heat?", "status": "answered", "findings": {}, "sources": 6}
        answered = make_input(run_id="d2", messages=history, tools=(CONFIRM_TOOL,), state=state)

        events = [e async for e in stream(research_agent(0), answered)]

        assert_valid(events)
        assert not [e for e in events if isinstance(e, ev.SubagentStartedEvent)]
        [change] = wire(
            [e for e in events if isinstance(e, ev.StateDeltaEvent | ev.StateSnapshotEvent)]
        )
        final = (
            change["snapshot"]
            if change["type"] == "STATE_SNAPSHOT"
            else jsonpatch.apply_patch(state, change["delta"])
        )
        assert {**state, "status": "done", "saved": saved} == final
        said = [e.delta for e in events if isinstance(e, ev.TextMessageContentEvent)]
        assert ["Saved to your notes." if saved else "Not saved."] == said
        [*_, last] = events
        assert isinstance(last, ev.RunFinishedEvent)
        assert last.outcome is None


class TestTreePending:
    def test_prints_the_calls_the_client_must_answer(self) -> None:
        """A success outcome with pending frontend calls prints a line per call."""
        out = io.StringIO()
        printer = TreePrinter(out, colour=False)
        outcome = ev.RunFinishedSuccessOutcome(pending_tool_call_ids=("d1-tool-7",))

        printer(ev.RunFinishedEvent(thread_id="t", run_id="d1", outcome=outcome))

        assert [
            "run finished: success",
            "waiting for the client to answer tool call d1-tool-7",
        ] == out.getvalue().splitlines()


class TestServeDetached:
    def test_store_serves_the_demo_detached(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """--store hands uvicorn an AgentApp with that store: memory, or Redis by URL."""
        from ambient_runs.stores import MemoryStore
        from ambient_runs.stores.redis import RedisStore

        calls: list[Any] = []
        fake = types.ModuleType("uvicorn")
        fake.run = lambda app, **kwargs: calls.append(app)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "uvicorn", fake)

        main(["demo", "--serve", "--store", "memory"])
        main(["demo", "--serve", "--store", "redis://127.0.0.1:1/0"])
        main(["demo", "--serve"])

        assert [type(app.store) for app in calls] == [MemoryStore, RedisStore, type(None)]
        assert calls[1].store.url == "redis://127.0.0.1:1/0"

    @pytest.mark.parametrize(
        "argv", [["demo", "--store", "memory"], ["demo", "--serve", "--store", "postgres://x"]]
    )
    def test_store_needs_serve_and_a_store_url(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit):
            main(argv)

        assert "--store" in capsys.readouterr().err
