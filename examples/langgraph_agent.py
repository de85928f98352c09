"""
A LangGraph graph served over AG-UI, offline: its model is LangChain's fake chat model.

    pip install 'ambient-runs[langgraph]' uvicorn
    python examples/langgraph_agent.py              # serves http://127.0.0.1:8000/

The graph has two nodes, ``plan`` (plain Python) and ``answer`` (a chat model). Each request
runs it as one subagent, ``advisor``: each node is a step, and the model's tokens stream as
text. ``GenericFakeChatModel`` streams a fixed answer word by word; put any LangChain chat
model in its place for a real one.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph

import ambient_runs as ar
from ambient_runs.adapters.langgraph import run_graph
from ambient_runs.asgi import AgentApp

ANSWER = "A heat pump, if the house is insulated."
model = GenericFakeChatModel(messages=itertools.repeat(AIMessage(ANSWER)))


def plan(state: MessagesState) -> dict[str, Any]:
    """Decide what to look at (a real graph might route here)."""
    return {"messages": [AIMessage("Comparing running costs and emissions.")]}


def answer(state: MessagesState) -> dict[str, Any]:
    """Ask the model."""
    return {"messages": [model.invoke(state["messages"])]}


graph = (
    StateGraph(MessagesState)
    .add_node("plan", plan)
    .add_node("answer", answer)
    .add_edge(START, "plan")
    .add_edge("plan", "answer")
    .compile()
)


async def agent(run: ar.Run) -> Any:
    """Run the graph on the user's last message, as the subagent ``advisor``."""
    question = run.last_user_text() or "Heat pump or boiler?"
    final = await run_graph(graph, {"messages": [("user", question)]}, name="advisor")
    return {"answer": final["messages"][-1].content}


app = AgentApp(agent)

if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--port", type=int, default=8000)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port)
