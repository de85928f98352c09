"""
The demo behind ``python -m ambient_runs demo``: a scripted research agent.

No network and no model: a planner splits a question into three angles, runs
three researcher subagents concurrently (each reasons, calls tools, gets
results and streams its findings, with small sleeps standing in for latency),
records their findings in the shared state as they arrive (starting from the state
the client sent: ``asked`` lists the thread's questions so far), reports each
researcher's scripted token usage, and writes the answer. When the client offers a
frontend tool called ``confirm`` (`CONFIRM_TOOL`; a served demo's client, since the
command's own runs offer none), the planner then asks it whether to save the answer
and ends the run with that call pending; the next run of the thread, carrying the
client's tool message, records the decision (``saved`` in the state) without
researching again. The command prints the stream as a live tree, prints raw SSE
frames (``--json``), or serves the agent as an AG-UI endpoint (``--serve``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, TextIO

import attrs

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs._stream import Agent, stream
from ambient_runs._wire import to_wire

__all__ = ("CONFIRM_TOOL", "DEFAULT_QUESTION", "TreePrinter", "main", "research_agent")

DEFAULT_QUESTION = "Should our office switch from a gas boiler to a heat pump?"

CONFIRM_TOOL = ev.Tool(
    name="confirm",
    description=(
        "Ask the user a yes/no question and return the answer: true or false, "
        '{"confirmed": true}, or the text "yes" / "no"'
    ),
    parameters={
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
)
"""The frontend tool the demo uses when the client offers it (the client sends it in ``tools``)."""

_SAVE_QUESTION = "Save this answer to your notes?"


@attrs.frozen
class _Angle:
    """One researcher's brief and its scripted findings."""

    key: str
    query: str
    thought: str
    pages: tuple[str, ...]
    finding: str


_ANGLES = (
    _Angle(
        "efficiency",
        "heat pump seasonal efficiency in cold weather",
        "Peak efficiency figures flatter heat pumps; the seasonal figure is what matters.",
        ("field-trials.example/seasonal-cop", "engineering-notes.example/defrost"),
        "Over a whole season a well-sized air-source heat pump gives about three units "
        "of heat per unit of electricity, cold snaps included.",
    ),
    _Angle(
        "cost",
        "heat pump installation cost and running cost versus gas",
        "Up-front cost and running cost pull in opposite directions; find the break-even.",
        ("installer-survey.example/prices", "tariffs.example/electricity-vs-gas"),
        "It costs more to install than a boiler, and is cheaper to run while electricity "
        "costs under about three times as much as gas.",
    ),
    _Angle(
        "emissions",
        "heat pump lifecycle emissions on the current grid",
        "The answer depends on the grid mix, so compare today's grid with the trend.",
        ("grid-data.example/carbon-intensity", "lifecycle-study.example/heating"),
        "On today's grid it roughly halves heating emissions, and the saving grows as "
        "the grid gets cleaner.",
    ),
)

_ANSWER = (
    "Yes, if the building is reasonably insulated: a heat pump is about three times as "
    "efficient as the boiler, pays back when electricity stays under three times the gas "
    "price, and halves heating emissions today."
)


def _words(text: str) -> list[str]:
    """Split *text* into word-sized deltas, spaces kept: a model's token stream."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + words[-1:]


async def _paced(parts: Sequence[str], delay: float) -> AsyncIterator[str]:
    for part in parts:
        await asyncio.sleep(delay)
        yield part


def research_agent(pace: float = 1.0) -> Agent:
    """
    Return the demo's research agent, its scripted delays scaled by *pace* (0: none).

    Args:
        pace: Multiplies every sleep; 0 runs the script as fast as it goes.

    Returns:
        An agent for `ambient_runs.stream` or `ambient_runs.asgi.AgentApp`.

    .. versionadded:: 0.1.0
    """

    async def researcher(angle: _Angle) -> dict[str, Any]:
        async with ar.subagent("researcher", description=f"Looks into {angle.key}") as scope:
            with ar.reasoning() as thought:
                for part in _words(angle.thought):
                    thought.write(part)
                    await asyncio.sleep(0.01 * pace)
            with ar.tool_call("web_search") as search:
                search.args({"query": angle.query})
            await asyncio.sleep(0.15 * pace)
            search.result({"results": list(angle.pages)})
            with ar.tool_call("read_page") as read:
                read.args({"url": angle.pages[0]})
            await asyncio.sleep(0.1 * pace)
            read.result(angle.finding)
            with ar.message() as message:
                await message.astream(_paced(_words(angle.finding), 0.02 * pace))
            ar.usage(  # the scripted model's bill, summed into RUN_FINISHED.usage
                provider="scripted",
                model="demo-researcher",
                input_tokens=40 * len(angle.pages),
                output_tokens=len(_words(angle.thought)) + len(_words(angle.finding)),
            )

            def record(state: dict[str, Any]) -> None:
                state["findings"][angle.key] = angle.finding
                state["sources"] += len(angle.pages)

            ar.update_state(record)
            report = {"angle": angle.key, "sources": len(angle.pages)}
            scope.finish_with(report)  # SUBAGENT_FINISHED.result
            return report

    async def planner(run: ar.Run) -> dict[str, Any] | None:
        for reply in run.tool_results(CONFIRM_TOOL.name):  # the client ran our confirm
            saved = _confirmed(reply)
            kept = run.state() if isinstance(run.state(), dict) else {}
            ar.set_state({**kept, "saved": saved, "status": "done"})
            ar.say("Saved to your notes." if saved else "Not saved.")
            return None
        question = run.last_user_text() or DEFAULT_QUESTION
        held = run.state()  # the client's state: what earlier runs of the thread left
        asked = held.get("asked", []) if isinstance(held, dict) else []
        with ar.step("plan"):
            ar.think("Three things decide this: efficiency, cost and emissions.")
            ar.set_state(
                {
                    "question": question,
                    "asked": [*asked, question] if isinstance(asked, list) else [question],
                    "status": "researching",
                    "findings": {},
                    "sources": 0,
                }
            )
            ar.say("I'll look into efficiency, cost and emissions in parallel.")
        with ar.step("research"):
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(researcher(angle)) for angle in _ANGLES]
        with ar.step("answer"):
            with ar.message() as answer:
                await answer.astream(_paced(_words(_ANSWER), 0.015 * pace))
            ar.update_state(lambda state: state.update(status="answered"))
        result = {"answer": _ANSWER, "research": [task.result() for task in tasks]}
        if run.tool(CONFIRM_TOOL.name) is not None:  # the client offers it: ask, and stop here
            run.finish_with(result)
            ar.call_frontend_tool(CONFIRM_TOOL.name, {"question": _SAVE_QUESTION})
        return result

    return planner


def _confirmed(answer: ar.ToolResult) -> bool:
    """Read a confirm tool's answer: ``true``, ``{"confirmed": true}`` or the text "yes"."""
    if answer.error is not None:
        return False
    try:
        value = answer.value()
    except ValueError:
        value = answer.text()
    if isinstance(value, dict):
        value = value.get("confirmed", value.get("approved"))
    if isinstance(value, str):
        return value.strip().lower() in {"yes", "y", "true", "ok", "save"}
    return value is True


# --------------------------------------------------------------------------- the tree

_COLOURS = ("36", "35", "33", "32", "34", "31")  # cyan, magenta, yellow, green, blue, red


class TreePrinter:
    """
    Print a run's events as a live tree: one line per finished item, grouped by subagent.

    Text and reasoning print when their message ends (deltas of concurrent
    subagents interleave); tool calls when their arguments are complete, and
    their results; state changes; subagent starts and ends. Each line is
    indented by the subagent's nesting and labelled with its name (``#n`` per
    invocation), in its own colour when *colour* is on.

    .. versionadded:: 0.1.0
    """

    def __init__(self, out: TextIO, *, colour: bool, root: str = "planner") -> None:
        self.out = out
        self.colour = colour
        self.events = 0
        self._labels: dict[str | None, str] = {None: root}
        self._depth: dict[str | None, int] = {None: 0}
        self._tints: dict[str | None, str] = {None: "1"}
        self._counts: dict[str, int] = {}
        self._text: dict[str, list[str]] = {}
        self._calls: dict[str, tuple[str, list[str]]] = {}

    @property
    def subagents(self) -> int:
        """How many subagent invocations were announced."""
        return len(self._labels) - 1

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def _line(self, owner: str | None, text: str, style: str = "") -> None:
        depth = self._depth.get(owner, 1)
        label = self._paint(self._labels.get(owner, owner or "?"), self._tints.get(owner, ""))
        print(f"{'    ' * depth}  {label}  {self._paint(text, style)}", file=self.out, flush=True)

    def __call__(self, event: ev.BaseEvent) -> None:
        """Take the next *event*; print a line when it completes something."""
        self.events += 1
        owner: str | None = getattr(event, "subagent_run_id", None)
        match event:
            case ev.RunStartedEvent():
                line = f"run {event.run_id} (thread {event.thread_id})"
                print(self._paint(line, "1"), file=self.out, flush=True)
            case ev.SubagentStartedEvent():
                self._announce(event)
                self._line(owner, f"started: {event.description or event.name}", "2")
            case ev.SubagentFinishedEvent():
                result = "" if event.result is None else f" -> {_brief(event.result)}"
                self._line(owner, f"finished{result}", "2")
            case ev.SubagentErrorEvent():
                self._line(owner, f"failed: {event.message}", "31")
            case ev.StepStartedEvent():
                self._line(owner, f"step {event.step_name}", "2")
            case ev.TextMessageContentEvent() | ev.ReasoningMessageContentEvent():
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
                outcome = "success" if event.outcome is None else event.outcome.type
                print(self._paint(f"run finished: {outcome}", "1"), file=self.out, flush=True)
                if isinstance(event.outcome, ev.RunFinishedSuccessOutcome):
                    for call in event.outcome.pending_tool_call_ids or ():
                        line = f"waiting for the client to answer tool call {call}"
                        print(self._paint(line, "2"), file=self.out, flush=True)
                for used in event.usage or ():
                    line = (
                        f"tokens ({used.provider}/{used.model}): {used.input_tokens or 0} in, "
                        f"{used.output_tokens or 0} out"
                    )
                    print(self._paint(line, "2"), file=self.out, flush=True)
            case ev.RunErrorEvent():
                line = f"run failed: {event.message} ({event.code})"
                print(self._paint(line, "1;31"), file=self.out, flush=True)
            case _:
                pass

    def _announce(self, event: ev.SubagentStartedEvent) -> None:
        sid = event.subagent_run_id
        number = self._counts[event.name] = self._counts.get(event.name, 0) + 1
        self._labels[sid] = f"{event.name}#{number}"
        self._depth[sid] = self._depth.get(event.parent_subagent_run_id, 0) + 1
        self._tints[sid] = _COLOURS[(len(self._labels) - 2) % len(_COLOURS)]

    def summary(self, seconds: float) -> str:
        """Return the one-line summary: events, subagents, duration."""
        line = f"summary: {self.events} events, {self.subagents} subagents, {seconds:.2f} s"
        return self._paint(line, "1;32")


def _brief(value: Any, width: int = 90) -> str:
    """Return *value* as one line of JSON (or text), cut to *width* characters."""
    text = value if isinstance(value, str) else json.dumps(to_wire(value), ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _colour_wanted(out: TextIO) -> bool:
    """Colour when writing to a terminal, unless NO_COLOR is set (https://no-color.org)."""
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


# --------------------------------------------------------------------------- the command


def _input(question: str) -> ev.RunAgentInput:
    return ev.RunAgentInput(
        thread_id="demo-thread",
        run_id="demo-run",
        messages=(ev.UserMessage(id="demo-user", content=question),),
    )


async def _print_tree(question: str, pace: float, out: TextIO) -> int:
    printer = TreePrinter(out, colour=_colour_wanted(out))
    started = time.perf_counter()
    async for event in stream(research_agent(pace), _input(question)):
        printer(event)
    print(printer.summary(time.perf_counter() - started), file=out, flush=True)
    return 0


async def _print_frames(question: str, pace: float, out: TextIO) -> int:
    binary = getattr(out, "buffer", None)
    async for frame in sse.frames(stream(research_agent(pace), _input(question))):
        if binary is not None:
            binary.write(frame)
            binary.flush()
        else:
            out.write(frame.decode())
            out.flush()
    return 0


def _store(url: str | None) -> Any:
    """The run store of ``--store``: None, a MemoryStore (``memory``) or a RedisStore."""
    if url is None:
        return None
    if url == "memory":
        from ambient_runs.stores import MemoryStore

        return MemoryStore()
    from ambient_runs.stores.redis import RedisStore

    return RedisStore(url)


def _serve(host: str, port: int, pace: float, store_url: str | None = None) -> int:
    try:
        uvicorn = importlib.import_module("uvicorn")
    except ImportError:
        print(
            "error: --serve needs uvicorn, which is not installed. Install it with:\n"
            "    pip install uvicorn",
            file=sys.stderr,
        )
        return 2
    from ambient_runs.asgi import AgentApp

    try:
        store = _store(store_url)
    except ImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"Serving the demo agent on http://{host}:{port}/ (POST a RunAgentInput; Ctrl-C stops). "
        f"Offer it a frontend tool named {CONFIRM_TOOL.name!r} and it asks before saving.",
        file=sys.stderr,
    )
    if store is not None:
        print(
            f"Runs are detached, logged to {store!r}: GET /threads/<threadId>/runs/<runId> "
            "resumes (Last-Event-ID) or joins one, POST …/cancel cancels it",
            file=sys.stderr,
        )
    app = AgentApp(research_agent(pace), keep_alive=15, store=store)
    uvicorn.run(app, host=host, port=port)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ambient_runs",
        description="ambient_runs: stream AG-UI 1.0 events from Python agents.",
    )
    parser.add_argument("--version", action="version", version=f"ambient-runs {ar.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the scripted research agent (no network, no model)",
        description=(
            "Run a scripted research agent: a planner opens three concurrent researcher "
            "subagents (reasoning, tool calls and results, streamed text), updates the "
            "shared state as their findings arrive, and writes an answer. By default the "
            "stream is printed as a live tree grouped by subagent, then a one-line "
            "summary. Colour is used on a terminal unless NO_COLOR is set."
        ),
    )
    demo.add_argument(
        "--question",
        default=DEFAULT_QUESTION,
        help="the user's question (default: %(default)r)",
    )
    demo.add_argument(
        "--pace",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="scale the scripted delays; 0 runs without any (default: %(default)s)",
    )
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument(
        "--json",
        action="store_true",
        help="print the raw SSE frames (data: {...}) instead of the tree",
    )
    mode.add_argument(
        "--serve",
        action="store_true",
        help="serve the agent as an AG-UI endpoint over HTTP (needs uvicorn)",
    )
    demo.add_argument(
        "--host",
        default=None,
        help="with --serve: the address to bind (default: 127.0.0.1, this machine only)",
    )
    demo.add_argument(
        "--port",
        type=int,
        default=None,
        help="with --serve: the port to listen on (default: 8000)",
    )
    demo.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help=(
            "with --serve: run detached, logged to a store that other workers can share: "
            "redis://host:port/db (needs the redis extra) or 'memory' (this process only)"
        ),
    )
    demo.set_defaults(fail=demo.error)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """
    Run the command line: ``python -m ambient_runs demo [--json | --serve] …``.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).
        out: Where the demo prints (default: ``sys.stdout``).

    Returns:
        The exit status.

    .. versionadded:: 0.1.0
    """
    parser = _parser()
    args = parser.parse_args(argv)
    out = sys.stdout if out is None else out
    if args.pace < 0:
        args.fail("--pace must be 0 or more")
    if not args.serve and (args.host is not None or args.port is not None):
        args.fail("--host and --port only apply with --serve")
    if not args.serve and args.store is not None:
        args.fail("--store only applies with --serve")
    if args.store not in (None, "memory") and not args.store.startswith(
        ("redis://", "rediss://", "unix://")
    ):
        args.fail("--store takes redis://host:port/db or 'memory'")
    if args.serve:
        port = 8000 if args.port is None else args.port
        return _serve(args.host or "127.0.0.1", port, args.pace, args.store)
    show = _print_frames if args.json else _print_tree
    try:
        return asyncio.run(show(args.question, args.pace, out))
    except BrokenPipeError:
        # The reader went away (`… | head`): stop quietly, as command-line tools do.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
