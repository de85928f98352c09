"""
A pydantic-ai agent served over AG-UI, offline: its model is pydantic-ai's ``TestModel``.

    pip install 'ambient-runs[pydantic-ai]' uvicorn
    python examples/pydantic_ai_agent.py            # serves http://127.0.0.1:8000/

Each request runs the agent as one subagent, ``forecaster``: its call to the ``forecast``
tool (arguments streamed), the tool's result and its answer go out as AG-UI events tagged
with that subagent's id. ``TestModel`` calls every tool once (with arguments it makes up),
then answers with a fixed text; put ``"openai:gpt-4o"`` (or any model pydantic-ai knows) in
its place for a real one.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

import ambient_runs as ar
from ambient_runs.adapters.pydantic_ai import run_agent
from ambient_runs.asgi import AgentApp

forecaster = Agent(
    TestModel(custom_output_text="Sunny and 21 °C in Paris tomorrow."),
    instructions="Answer questions about the weather with the forecast tool.",
)


@forecaster.tool_plain
def forecast(city: str) -> str:
    """The forecast for *city* (a real agent would call a weather service)."""
    return f"{city}: sunny, 21 °C"


async def agent(run: ar.Run) -> Any:
    """Run the pydantic-ai agent on the user's last message, as the subagent ``forecaster``."""
    return await run_agent(forecaster, run.last_user_text(), name="forecaster")


app = AgentApp(agent)

if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--port", type=int, default=8000)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port)
