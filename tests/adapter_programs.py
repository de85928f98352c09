"""
Agent programs for the framework adapter tests, runnable in a fresh process.

``python tests/adapter_programs.py NAME`` reads a RunAgentInput (wire JSON) on
stdin, runs program NAME on it and prints the run's events, one wire-form JSON
object a line: how the resume tests continue a run with nothing but what the
client sends back.
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


# --------------------------------------------------------------------------- entry point


async def _main(name: str) -> None:
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    run_input = ar.RunAgentInput.from_json(sys.stdin.buffer.read())
    async with ar.Run(run_input) as run:
        await PROGRAMS[name](run)
    for event in run.events:
        print(json.dumps(ar.to_wire(event)))


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1]))
