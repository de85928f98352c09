"""
An OpenAI Agents SDK agent served over AG-UI, offline: its model is the SDK's ``ScriptedModel``.

    pip install 'ambient-runs[openai-agents]' uvicorn
    python examples/openai_agents_agent.py          # serves http://127.0.0.1:8000/

Each request runs the agent as one subagent, ``support``: the scripted model calls the
``order_status`` tool, the tool runs, and the model answers; the call, its arguments, its
result and the answer stream as AG-UI events tagged with that subagent's id. Give the agent a
real model (``model="gpt-4o"``) instead of the script to talk to OpenAI.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # offline: no trace exporter

from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

import ambient_runs as ar
from ambient_runs.adapters.openai_agents import run_agent
from ambient_runs.asgi import AgentApp

set_tracing_disabled(True)


@function_tool
def order_status(order_id: str) -> str:
    """Look an order up (a real tool would ask the shop's database)."""
    return f"Order {order_id} left the warehouse this morning."


def support_agent() -> Agent[Any]:
    """A fresh agent per request: a script is consumed as the model is called."""
    script = ScriptedModel(
        [
            [function_call("order_status", {"order_id": "A-17"}, call_id="call_1")],
            [assistant_message("Your order A-17 is on its way.")],
        ]
    )
    return Agent(name="support", model=script, tools=[order_status])


async def agent(run: ar.Run) -> Any:
    """Run the agent on the user's last message, as the subagent ``support``."""
    return await run_agent(support_agent(), run.last_user_text(), name="support")


app = AgentApp(agent)

if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--port", type=int, default=8000)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port)
