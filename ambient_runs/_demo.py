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
from ambient_runs.console import TreePrinter, colour_wanted

__all__ = ("CONFIRM_TOOL", "DEFAULT_QUESTION", "main", "research_agent")

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

_GENERIC = (  # (key, what the query asks, the researcher's thought, its finding)
    (
        "evidence",
        "what the evidence says",
        "Start from what was measured, not from opinion.",
        "Comparisons on '{topic}' find smaller differences than people expect.",
    ),
    (
        "trade-offs",
        "the trade-offs",
        "Each option wins on something; find what each one wins on.",
        "Each side of '{topic}' wins on something: weigh what matters most first.",
    ),
    (
        "experience",
        "what people who tried it say",
        "Those who have tried it know the catches.",
        "People who tried the options of '{topic}' settle on what fits their day.",
    ),
)


def _topic(question: str) -> str:
    return question.strip().rstrip("?!. ") or question


def _scripted(question: str) -> bool:
    """Whether *question* is the heat-pump script's (the one topic the demo knows in depth)."""
    return any(word in question.lower() for word in ("heat", "boiler"))


def _angles_for(question: str) -> tuple[_Angle, ...]:
    """The angles researched: the heat-pump script for its question, generic ones otherwise."""
    if _scripted(question):
        return _ANGLES
    topic = _topic(question)
    slug = "".join(c if c.isalnum() else "-" for c in topic.lower()).strip("-")[:40] or "topic"
    return tuple(
        _Angle(
            key,
            f"{topic}: {query}",
            thought,
            (f"{key}.example/{slug}", f"reviews.example/{slug}"),
            finding.format(topic=topic),
        )
        for key, query, thought, finding in _GENERIC
    )


def _answer_for(question: str) -> str:
    if _scripted(question):
        return _ANSWER
    return (
        f"On '{_topic(question)}': the differences are smaller than expected, each option wins "
        "on something, and most people settle on what fits their day. (A scripted answer: "
        "this demo has no model.)"
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
        angles = _angles_for(question)
        keys = [angle.key for angle in angles]
        plan = f"{', '.join(keys[:-1])} and {keys[-1]}"
        answer_text = _answer_for(question)
        held = run.state()  # the client's state: what earlier runs of the thread left
        asked = held.get("asked", []) if isinstance(held, dict) else []
        with ar.step("plan"):
            ar.think(f"Three things decide this: {plan}.")
            ar.set_state(
                {
                    "question": question,
                    "asked": [*asked, question] if isinstance(asked, list) else [question],
                    "status": "researching",
                    "findings": {},
                    "sources": 0,
                }
            )
            ar.say(f"I'll look into {plan} in parallel.")
        with ar.step("research"):
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(researcher(angle)) for angle in angles]
        with ar.step("answer"):
            with ar.message() as answer:
                await answer.astream(_paced(_words(answer_text), 0.015 * pace))
            ar.update_state(lambda state: state.update(status="answered"))
        result = {"answer": answer_text, "research": [task.result() for task in tasks]}
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


# --------------------------------------------------------------------------- the command


def _input(question: str) -> ev.RunAgentInput:
    return ev.RunAgentInput(
        thread_id="demo-thread",
        run_id="demo-run",
        messages=(ev.UserMessage(id="demo-user", content=question),),
    )


async def _print_tree(question: str, pace: float, out: TextIO) -> int:
    printer = TreePrinter(out, colour=colour_wanted(out), root="planner")
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
    from ambient_runs._dev import store

    return store(url)


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
        f"Offer it a frontend tool named {CONFIRM_TOOL.name!r} and it asks before saving.\n"
        f"Watch it in a browser: open http://{host}:{port}/ (the live run viewer).",
        file=sys.stderr,
    )
    if store is not None:
        print(
            f"Runs are detached, logged to {store!r}: GET /threads/<threadId>/runs/<runId> "
            "resumes (Last-Event-ID) or joins one, POST …/cancel cancels it",
            file=sys.stderr,
        )
    app = AgentApp(research_agent(pace), keep_alive=15, store=store, viewer=True)
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
    dev = commands.add_parser(
        "dev",
        help="serve your agent on 127.0.0.1 with the live run viewer, reloading on changes",
        description=(
            "Serve MODULE:ATTR (an agent function, an AgentApp, or an ASGI app that mounts "
            "one) on 127.0.0.1 with uvicorn (pip install 'ambient-runs[dev]'), restart it "
            "when a .py file of its folder changes, and serve the live run viewer beside "
            "it: open the printed address in a browser."
        ),
    )
    dev.add_argument("target", metavar="MODULE:ATTR", help="what to serve, e.g. my_agent:agent")
    dev.add_argument(
        "--port", type=int, default=8000, help="the port to listen on (default: %(default)s)"
    )
    dev.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help=(
            "run an agent function detached, logged to a store, so the viewer can open "
            "runs by id: 'memory' (this process; cleared on reload) or redis://host:port/db"
        ),
    )
    dev.add_argument(
        "--no-reload", dest="reload", action="store_false", help="do not restart on changes"
    )
    dev.set_defaults(fail=dev.error)
    tail = commands.add_parser(
        "tail",
        help="follow a served run in the terminal, as a tree",
        description=(
            "Follow a run an AgentApp serves and print it as a live tree, subagent ids as "
            "on the wire. URL is either a stored run (.../threads/<threadId>/runs/<runId>, "
            "an app with a store: joins it, running or ended) or the endpoint itself with "
            "--message, which starts a run. Exit status 0 when the run finished, 1 when it "
            "failed or the stream broke. Colour on a terminal unless NO_COLOR is set."
        ),
    )
    tail.add_argument("url", metavar="URL", help="the run's URL, or the endpoint's with --message")
    tail.add_argument("--message", default=None, help="start a run with this user message")
    tail.add_argument(
        "--thread", default=None, metavar="ID", help="with --message: the thread (default: new)"
    )
    tail.add_argument(
        "--replay",
        action="store_true",
        help="with a run's URL: every event from the first, not the folded join",
    )
    tail.set_defaults(fail=tail.error)
    return parser


def _dev_command(args: argparse.Namespace) -> int:
    from ambient_runs._dev import DevTargetError, serve

    try:
        return serve(args.target, port=args.port, store_url=args.store, reload=args.reload)
    except (DevTargetError, ImportError) as error:  # MissingExtraError is an ImportError
        print(f"error: {error}", file=sys.stderr)
        return 2


def _tail_command(args: argparse.Namespace, out: TextIO) -> int:
    from ambient_runs._tail import TailUsageError, tail

    try:
        return tail(
            args.url, message=args.message, thread_id=args.thread, replay=args.replay, out=out
        )
    except TailUsageError as error:
        args.fail(str(error))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet(out)
        return 1
    return 2  # not reached: fail exits


def _quiet(out: TextIO) -> None:
    """The reader went away (`… | head`): stop quietly, as command-line tools do."""
    if out is sys.stdout:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """
    Run the command line: ``python -m ambient_runs demo|dev|tail …``.

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
    if args.command == "dev":
        return _dev_command(args)
    if args.command == "tail":
        return _tail_command(args, out)
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
        _quiet(out)
        return 1
