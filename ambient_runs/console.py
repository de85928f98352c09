"""
See a run in a terminal: its events printed as a live tree, grouped by subagent.

`TreePrinter` takes events one at a time (call it with each) and prints a line
whenever something completes: a message or a reasoning message when it ends, a
tool call when its arguments are complete and again with its result, each state
change, each step, each subagent's start (with its invocation id as on the wire,
``subagentRunId``) and end, and the run's outcome: interrupts to answer, frontend
tool calls pending, token usage. Lines are indented by subagent nesting and
labelled ``name#n`` (the n-th invocation of that name); concurrent subagents'
lines interleave as their work completes. Colour is used when the output is a
terminal, unless ``NO_COLOR`` is set (https://no-color.org)::

    from ambient_runs.console import TreePrinter

    printer = TreePrinter()  # sys.stdout; colour if it is a terminal
    async for event in ambient_runs.stream(agent, input):
        printer(event)

``python -m ambient_runs demo`` and ``python -m ambient_runs tail`` print with it.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from ambient_runs import events as ev
from ambient_runs._wire import to_wire

__all__ = ("TreePrinter", "colour_wanted")

_COLOURS = ("36", "35", "33", "32", "34", "31")  # cyan, magenta, yellow, green, blue, red


def colour_wanted(out: TextIO) -> bool:
    """
    Whether to colour what goes to *out*: when it is a terminal, unless ``NO_COLOR`` is set.

    .. versionadded:: 0.1.0
    """
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


class TreePrinter:
    """
    Print a run's events as a live tree: one line per finished item, grouped by subagent.

    Call the printer with each event, in order. It keeps what it needs to join
    deltas (text, arguments) and prints nothing for events that complete
    nothing. Several runs in a row (a resume after an interrupt) print one
    after the other.

    Args:
        out: Where to print (default: ``sys.stdout`` at each call).
        colour: Colour the lines with ANSI codes; None (the default): when
            *out* is a terminal and ``NO_COLOR`` is not set (`colour_wanted`).
        root: The label of the run's own lines (the parent agent).

    Attributes:
        events: How many events the printer has taken.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, out: TextIO | None = None, *, colour: bool | None = None, root: str = "agent"
    ) -> None:
        self._out = out
        self.colour = colour_wanted(self.out) if colour is None else colour
        self.events = 0
        self._labels: dict[str | None, str] = {None: root}
        self._depth: dict[str | None, int] = {None: 0}
        self._tints: dict[str | None, str] = {None: "1"}
        self._counts: dict[str, int] = {}
        self._text: dict[str, list[str]] = {}
        self._calls: dict[str, tuple[str, list[str]]] = {}

    @property
    def out(self) -> TextIO:
        """Where the printer prints."""
        return sys.stdout if self._out is None else self._out

    @property
    def subagents(self) -> int:
        """How many subagent invocations were announced."""
        return len(self._labels) - 1

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def _print(self, text: str, style: str = "") -> None:
        print(self._paint(text, style), file=self.out, flush=True)

    def _line(self, owner: str | None, text: str, style: str = "") -> None:
        depth = self._depth.get(owner, 1)
        label = self._paint(self._labels.get(owner, owner or "?"), self._tints.get(owner, ""))
        print(f"{'    ' * depth}  {label}  {self._paint(text, style)}", file=self.out, flush=True)

    def __call__(self, event: ev.BaseEvent) -> None:
        """
        Take the next *event*; print a line when it completes something.

        .. versionadded:: 0.1.0
        """
        self.events += 1
        owner: str | None = getattr(event, "subagent_run_id", None)
        match event:
            case ev.RunStartedEvent():
                self._print(f"run {event.run_id} (thread {event.thread_id})", "1")
            case ev.SubagentStartedEvent():
                self._announce(event)
                about = event.description or event.name
                self._line(owner, f"started {event.subagent_run_id}: {about}", "2")
            case ev.SubagentFinishedEvent():
                if isinstance(event.outcome, ev.SubagentFinishedSuspendedOutcome):
                    waiting = ", ".join(event.outcome.interrupt_ids or ())
                    self._line(owner, f"suspended, waiting on {waiting}", "33")
                else:
                    result = "" if event.result is None else f" -> {_brief(event.result)}"
                    self._line(owner, f"finished{result}", "2")
            case ev.SubagentErrorEvent():
                self._line(owner, f"failed: {event.message}", "31")
            case ev.StepStartedEvent():
                self._line(owner, f"step {event.step_name}", "2")
            case ev.TextMessageStartEvent() | ev.ReasoningMessageStartEvent():
                self._text.setdefault(event.message_id, [])
            case (
                ev.TextMessageContentEvent()
                | ev.ReasoningMessageContentEvent()
                | ev.TextMessageChunkEvent()
                | ev.ReasoningMessageChunkEvent()
            ):
                if event.message_id is not None and event.delta:
                    self._text.setdefault(event.message_id, []).append(event.delta)
            case ev.TextMessageEndEvent():
                self._line(owner, f"says: {''.join(self._text.pop(event.message_id, []))}")
            case ev.ReasoningMessageEndEvent():
                text = "".join(self._text.pop(event.message_id, []))
                self._line(owner, f"thinks: {text}", "2;3")
            case ev.ToolCallStartEvent():
                self._calls[event.tool_call_id] = (event.tool_call_name, [])
            case ev.ToolCallArgsEvent():
                self._calls.get(event.tool_call_id, ("?", []))[1].append(event.delta)
            case ev.ToolCallEndEvent():
                name, args = self._calls.get(event.tool_call_id, ("?", []))
                self._line(owner, f"calls {name}({''.join(args)})")
            case ev.ToolCallResultEvent():
                self._line(owner, f"  -> {_brief(event.content)}", "2")
            case ev.StateSnapshotEvent():
                self._line(owner, f"state = {_brief(event.snapshot)}", "2")
            case ev.StateDeltaEvent():
                ops = ", ".join(f"{op.op} {op.path}" for op in event.delta)
                self._line(owner, f"state: {ops}", "2")
            case ev.RunFinishedEvent():
                self._finished(event)
            case ev.RunErrorEvent():
                self._flush_text()
                self._print(f"run failed: {event.message} ({event.code})", "1;31")
            case _:
                pass

    def _finished(self, event: ev.RunFinishedEvent) -> None:
        self._flush_text()
        outcome = event.outcome
        self._print(f"run finished: {'success' if outcome is None else outcome.type}", "1")
        if isinstance(outcome, ev.RunFinishedSuccessOutcome):
            for call in outcome.pending_tool_call_ids or ():
                self._print(f"waiting for the client to answer tool call {call}", "2")
        elif isinstance(outcome, ev.RunFinishedInterruptOutcome):
            for pending in outcome.interrupts:
                where = (
                    "" if pending.subagent_run_id is None else f" (in {pending.subagent_run_id})"
                )
                said = "" if pending.message is None else f": {pending.message}"
                self._print(f"interrupt {pending.id}{where}: {pending.reason}{said}", "33")
        for used in event.usage or ():
            line = (
                f"tokens ({used.provider}/{used.model}): {used.input_tokens or 0} in, "
                f"{used.output_tokens or 0} out"
            )
            self._print(line, "2")

    def _flush_text(self) -> None:
        """Forget text that never ended (a join that began mid-message, a failed run)."""
        self._text.clear()
        self._calls.clear()

    def _announce(self, event: ev.SubagentStartedEvent) -> None:
        sid = event.subagent_run_id
        if sid in self._labels:  # a resumed invocation, announced again under its id
            return
        number = self._counts[event.name] = self._counts.get(event.name, 0) + 1
        self._labels[sid] = f"{event.name}#{number}"
        self._depth[sid] = self._depth.get(event.parent_subagent_run_id, 0) + 1
        self._tints[sid] = _COLOURS[(len(self._labels) - 2) % len(_COLOURS)]

    def summary(self, seconds: float) -> str:
        """
        Return the one-line summary: events, subagents, duration (*seconds*).

        .. versionadded:: 0.1.0
        """
        line = f"summary: {self.events} events, {self.subagents} subagents, {seconds:.2f} s"
        return self._paint(line, "1;32")


def _brief(value: Any, width: int = 90) -> str:
    """Return *value* as one line of JSON (or text), cut to *width* characters."""
    text = value if isinstance(value, str) else json.dumps(to_wire(value), ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."
