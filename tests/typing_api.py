"""
Type-level tests of the public API, checked by ``mypy --strict`` (``tests/test_typing.py``).

Nothing here runs. Each decorated function is assigned to a ``Callable`` of its
exact signature, and called wrongly once under ``# type: ignore[...]``: with
``warn_unused_ignores`` an ignore that is not needed is an error, so if a
decorator lost the ``ParamSpec`` signature (returning ``Any``, or
``Callable[..., Any]``) the check fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, assert_type

import ambient_runs as ar
from ambient_runs import events as ev


@ar.subagent("researcher", description="finds sources")
def research(topic: str, *, depth: int = 1) -> list[str]:
    """A sync subagent."""
    return [topic] * depth


@ar.subagent("writer")
async def write(draft: str, words: int) -> str:
    """An async subagent."""
    return draft[:words]


@ar.subagent("streamer")
def stream(count: int) -> Iterator[int]:
    """A generator subagent."""
    yield from range(count)


@ar.subagent("async streamer")
async def astream(count: int) -> AsyncIterator[int]:
    """An async generator subagent."""
    for n in range(count):
        yield n


@ar.step("plan")
def plan(goal: str) -> int:
    """A sync step."""
    return len(goal)


@ar.step("draft")
async def draft(goal: str) -> str:
    """An async step."""
    return goal


research_ref: Callable[[str], list[str]] = research
research_kw: Callable[..., list[str]] = research
write_ref: Callable[[str, int], Coroutine[Any, Any, str]] = write
stream_ref: Callable[[int], Iterator[int]] = stream
astream_ref: Callable[[int], AsyncIterator[int]] = astream
plan_ref: Callable[[str], int] = plan
draft_ref: Callable[[str], Coroutine[Any, Any, str]] = draft

wrong_research: Callable[[int], str] = research  # type: ignore[assignment]
wrong_write: Callable[[str], Coroutine[Any, Any, str]] = write  # type: ignore[assignment]


async def wrong_calls() -> None:
    """Calls the signatures forbid: each ignore is needed only while the signature survives."""
    research(42)  # type: ignore[arg-type]
    research("x", depth="deep")  # type: ignore[arg-type]
    await write("x", "many")  # type: ignore[arg-type]
    stream("three")  # type: ignore[arg-type]
    astream(None)  # type: ignore[arg-type]
    plan(3.5)  # type: ignore[arg-type]
    ar.wrap(research)(7)  # type: ignore[arg-type]


def helpers_keep_signatures() -> None:
    """wrap, ContextThreadPoolExecutor.submit and Run methods keep their types."""
    wrapped: Callable[[str], list[str]] = ar.wrap(research)
    with ar.ContextThreadPoolExecutor() as pool:
        future: Future[list[str]] = pool.submit(research, "topic")
        pool.submit(research, 1)  # type: ignore[arg-type]
    del wrapped, future


async def run_api() -> None:
    """The Run and handle API, as typed."""
    async with ar.Run(ev.RunAgentInput(thread_id="t", run_id="r")) as run:
        message_id: str = run.say("hi")
        ambient_id: str = ar.say("hi")
        handle: ar.MessageHandle = ar.message("assistant", id="m", name="n")
        handle.write("x")
        call: ar.ToolCallHandle = ar.tool_call("search", parent_message_id=message_id)
        result_id: str = call.result({"hits": 1})
        sub: ar.Subagent = ar.subagent("s", id="s-1")
        with sub as entered:
            same: ar.Subagent = entered
            owner: str | None = ar.current_subagent_id()
        step: ar.Step = ar.step("x")
        async with step:
            pass
        answer: str | None = await run.until_cancelled(write("draft", 2))
        resumed: ar.Resumption | None = run.resume_for("i-1")
        answered: ar.ToolResult | None = run.tool_result("r0-tool-1")
        turn: tuple[ar.ToolResult, ...] = sub.tool_results("confirm")
        shown: ar.ToolCallHandle = ar.tool_call("show", frontend=True)
        events: list[ev.BaseEvent] = run.events.drain()
        run.say(3)  # type: ignore[arg-type]
        if answered is None:
            ar.call_frontend_tool("confirm", {"question": "ok?"})
    del ambient_id, result_id, same, owner, answer, resumed, answered, turn, shown, events


@ar.subagent("typed")
async def typed(topic: str) -> dict[str, Any]:
    """The README's shape: an async subagent returning ``dict[str, Any]`` (Any inside)."""
    return {"topic": topic}


@ar.step("typed step")
def typed_step(items: list[Any]) -> dict[str, Any]:
    """A step whose parameter and return mention Any."""
    return {"n": len(items)}


async def types_survive() -> None:
    """What mypy infers equals what was declared: Any inside a signature no longer erases it."""
    assert_type(await typed("x"), dict[str, Any])
    assert_type(typed_step([]), dict[str, Any])
    assert_type(research("x"), list[str])
    assert_type(await write("x", 1), str)
    assert_type(stream(2), Iterator[int])
    assert_type(astream(2), AsyncIterator[int])
    await typed(1)  # type: ignore[arg-type]
    typed_step("not a list")  # type: ignore[arg-type]


async def events_have_a_type() -> None:
    """Events, from a run's log or a stream, have ``.type`` (an EventType)."""
    async with ar.Run(ev.RunAgentInput(thread_id="t", run_id="r")) as run:
        pass
    assert_type(run.events[0], ev.BaseEvent)
    assert_type(run.events[0].type, ev.EventType)
    first_type: str = run.events[0].type  # a str enum: compares and formats as its value
    async for event in ar.stream(agent_for_types, {"threadId": "t", "runId": "r"}):
        assert_type(event, ev.BaseEvent)
        assert_type(event.type, ev.EventType)
    del first_type


async def agent_for_types(run: ar.Run) -> dict[str, Any]:
    """An agent as AgentApp and stream take it."""
    return await typed(run.thread_id)
