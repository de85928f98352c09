"""The apps the hostile suite serves in a child uvicorn: `APPS` maps a name to a factory."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import ambient_runs as ar
from ambient_runs import sse
from ambient_runs.asgi import AgentApp


async def exits(run: ar.Run) -> None:
    """An agent that exits the process the way argparse inside a tool would."""
    ar.say("x")
    sys.exit(2)


async def interrupts(run: ar.Run) -> None:
    """An agent that raises KeyboardInterrupt from inside a subagent."""
    with ar.subagent("worker"):
        ar.say("working")
        raise KeyboardInterrupt


def exits_in_a_thread(run: ar.Run) -> None:
    """A plain (sync) agent that exits."""
    ar.say("sync")
    sys.exit(3)


async def hello(run: ar.Run) -> dict[str, str]:
    """Say hello."""
    ar.say(f"Hello, {run.last_user_text() or 'you'}!")
    return {"greeted": "yes"}


async def varied(run: ar.Run) -> Any:
    """An agent whose stream depends on the input: what the fuzz test drives."""
    text = run.last_user_text() or ""
    seed = sum(map(ord, text)) + len(run.messages)
    if seed % 7 == 0:
        raise RuntimeError(f"the model failed on {len(text)} characters")
    run.set_state({"seen": len(run.messages), "tools": [t.name for t in run.tools]})
    with ar.subagent("researcher"):
        with ar.tool_call("search") as call:
            call.args({"q": text[:50]})
            await asyncio.sleep(0)
            call.result(f"{seed % 5} hits")
        ar.update_state(lambda s: s.update(hits=seed % 5))
    with ar.message() as answer:
        for word in text.split()[:20] or ["nothing"]:
            answer.write(word + " ")
        await ar.drain()
    if seed % 11 == 0:
        raise ar.Interrupted(ar.Interrupt(id="", reason="confirm", message="Go on?"))
    return {"words": len(text.split()), "forwarded": run.forwarded_props is not None}


def starlette_route() -> Any:
    """The README's custom route, with an agent that emits a value JSON cannot carry."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def agent(run: ar.Run) -> None:
        ar.say("fine")
        ar.say("a\ud800b")  # a lone surrogate: it cannot be encoded as UTF-8 JSON

    async def custom(request: Request) -> StreamingResponse:
        run_input = ar.RunAgentInput.from_json(await request.body())
        frames = sse.frames(ar.stream(agent, run_input), keep_alive=15)
        return StreamingResponse(frames, media_type=sse.CONTENT_TYPE)

    return Starlette(routes=[Route("/agent", custom, methods=["POST"])])


async def leaves_open(run: ar.Run) -> None:
    """An agent that starts 100,000 subagents and finishes none: the run's end closes them."""
    for n in range(100_000):
        run.subagent(f"s{n}").start()
        if n % 1000 == 0:
            await ar.drain()


APPS: dict[str, Callable[[], Any]] = {
    "exits": lambda: AgentApp(exits),
    "interrupts": lambda: AgentApp(interrupts),
    "exits_in_a_thread": lambda: AgentApp(exits_in_a_thread),
    "hello": lambda: AgentApp(hello),
    "slow_body": lambda: AgentApp(hello, body_timeout=0.5),
    "varied": lambda: AgentApp(varied, body_timeout=2, allow_origins=["https://app.example"]),
    "starlette_route": starlette_route,
    "leaves_open": lambda: AgentApp(leaves_open),
}
