"""`ambient_runs.console`: the tree a terminal shows of a run."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from ambient_runs import events as ev
from ambient_runs._stream import stream
from ambient_runs.console import TreePrinter, colour_wanted
from ambient_runs.testing import make_input

sys.path.insert(0, str(Path(__file__).parent / "viewer"))
from tea_agent import agent


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        """Pretend to be a terminal."""
        return True


async def printed(out: io.StringIO, **options: object) -> str:
    """Print the tea agent's first run to *out*; return what was printed."""
    printer = TreePrinter(out, **options)  # type: ignore[arg-type]
    async for event in stream(agent, make_input(run_id="r1", user="Tea?")):
        printer(event)
    return out.getvalue()


class TestColourWanted:
    def test_a_terminal_gets_colour_a_pipe_does_not(self) -> None:
        """Colour on a terminal only."""
        assert (True, False) == (colour_wanted(Terminal()), colour_wanted(io.StringIO()))

    def test_no_color_wins(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """NO_COLOR set (any value) turns colour off even on a terminal."""
        monkeypatch.setenv("NO_COLOR", "1")

        assert not colour_wanted(Terminal())


class TestTreePrinter:
    async def test_shows_each_subagent_with_its_wire_id(self) -> None:
        """Every invocation's start line names its subagentRunId, as on the wire."""
        output = await printed(io.StringIO())

        for n, topic in enumerate(("tea", "coffee", "cocoa"), 1):
            assert f"      researcher#{n}  started research-{topic}: Looks into {topic}" in (
                output.splitlines()
            )

    async def test_prints_the_interrupt_to_answer(self) -> None:
        """An interrupt outcome prints each interrupt: its id, reason and message."""
        output = await printed(io.StringIO())

        assert output.splitlines()[-2:] == [
            "run finished: interrupt",
            "interrupt r1-int-1: approval: Publish the answer?",
        ]

    async def test_colour_follows_the_stream_unless_told(self) -> None:
        """Default colour: on for a terminal, off for a pipe; colour=False overrides."""
        on = await printed(Terminal())
        off = await printed(io.StringIO())
        forced_off = await printed(Terminal(), colour=False)

        assert ("\x1b[" in on, "\x1b[" in off, "\x1b[" in forced_off) == (True, False, False)

    def test_prints_to_stdout_by_default(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without *out* the printer writes to sys.stdout (as it is at each call)."""
        TreePrinter(colour=False)(ev.RunStartedEvent(thread_id="t", run_id="r"))

        assert "run r (thread t)\n" == capsys.readouterr().out

    def test_a_suspended_subagent_says_what_it_waits_on(self) -> None:
        """SUBAGENT_FINISHED suspended prints the interrupt ids it waits on."""
        out = io.StringIO()
        printer = TreePrinter(out, colour=False)
        printer(ev.SubagentStartedEvent(subagent_run_id="s1", name="approver"))
        outcome = ev.SubagentFinishedSuspendedOutcome(interrupt_ids=("i1",))
        printer(ev.SubagentFinishedEvent(subagent_run_id="s1", outcome=outcome))

        assert "      approver#1  suspended, waiting on i1" == out.getvalue().splitlines()[-1]
