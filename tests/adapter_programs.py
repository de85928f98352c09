"""
Agent programs for the framework adapter tests, runnable in a fresh process.

``python tests/adapter_programs.py NAME REDIS_URL PREFIX`` reads a RunAgentInput
(wire JSON) on stdin, runs program NAME on it with its continuations on that
Redis, under PREFIX (`RedisContinuations`), and prints the run's events, one wire-form JSON
object a line: how the resume tests continue a run after a restart, with
nothing but what the client sends back (the official client's resume entries)
and the shared Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import ambient_runs as ar

Program = Callable[[ar.Run], Awaitable[None]]

PROGRAMS: dict[str, Program] = {}


def program(fn: Program) -> Program:
    PROGRAMS[fn.__name__] = fn
    return fn


async def gather_interrupts(*calls: Awaitable[Any]) -> list[Any]:
    """Await *calls* concurrently; raise every `Interrupted` together, else return the results."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise BaseExceptionGroup("agents paused or failed", errors)
    return results


# --------------------------------------------------------------------------- pydantic-ai


def pydantic_ai_approver() -> Any:
    """A TestModel agent: one plain tool, one that needs approval, one deferred externally."""
    from pydantic_ai import Agent, CallDeferred
    from pydantic_ai.models.test import TestModel

    agent = Agent(TestModel(), name="approver")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    @agent.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        return f"deleted {path}"

    @agent.tool_plain
    def lookup(q: str) -> str:
        raise CallDeferred(metadata={"queue": "lookups"})

    return agent


@program
async def pydantic_ai_two_approvers(run: ar.Run) -> None:
    from ambient_runs.adapters.pydantic_ai import run_agent

    results = await gather_interrupts(
        run_agent(pydantic_ai_approver(), "first", name="ops"),
        run_agent(pydantic_ai_approver(), "second", name="ops"),
    )
    run.finish_with(results)


# --------------------------------------------------------------------------- openai-agents


def after_tool_output(first: Any, then: Any) -> Any:
    """A scripted step that answers *then* once the input holds a tool output, else *first*."""
    from agents.testing import ModelStep

    def respond(call: Any) -> Any:
        items = call.input if isinstance(call.input, list) else []
        answered = any(
            (i.get("type") if isinstance(i, dict) else getattr(i, "type", None))
            == "function_call_output"
            for i in items
        )
        return then if answered else first

    return ModelStep.respond(respond)


def openai_approver(tag: str) -> Any:
    """A ScriptedModel agent that hands off to a clerk whose tool needs approval."""
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    @function_tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path} for {tag}"

    def clerk_step(call: Any) -> Any:
        items = call.input if isinstance(call.input, list) else []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if any(str(o.get("call_id")) == "call_2" for o in outputs):
            return [assistant_message(f"{tag}: done")]
        return [function_call("delete", {"path": f"/tmp/{tag}"}, call_id="call_2")]

    from agents.testing import ModelStep

    clerk = Agent(
        name="clerk",
        model=ScriptedModel([ModelStep.respond(clerk_step)] * 3),
        tools=[delete],
    )
    return Agent(
        name="desk",
        model=ScriptedModel([[function_call("transfer_to_clerk", {}, call_id="call_1")]] * 2),
        handoffs=[clerk],
    )


@program
async def openai_two_approvers(run: ar.Run) -> None:
    from ambient_runs.adapters.openai_agents import run_agent

    results = await gather_interrupts(
        run_agent(openai_approver("one"), "first", name="desk"),
        run_agent(openai_approver("two"), "second", name="desk"),
    )
    run.finish_with(results)


# --------------------------------------------------------------------------- entry point


async def _main(name: str, redis_url: str, prefix: str) -> None:
    from ambient_runs.stores.redis_continuations import RedisContinuations

    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    os.environ.pop("OPENAI_API_KEY", None)
    run_input = ar.RunAgentInput.from_json(sys.stdin.buffer.read())
    continuations = RedisContinuations(redis_url, prefix=prefix)
    try:
        async with ar.Run(run_input, continuations=continuations) as run:
            await PROGRAMS[name](run)
    finally:
        await continuations.aclose()
    for event in run.events:
        print(json.dumps(ar.to_wire(event)))


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:4]))
