"""
A FastAPI app for a CopilotKit-style page: shared state and a frontend tool.

    pip install 'ambient-runs[starlette]' fastapi uvicorn
    python examples/copilotkit_app.py               # serves http://127.0.0.1:8000/agent/

The page (CopilotKit, or any ``@ag-ui/client`` ``HttpAgent`` pointed at ``/agent/``) holds a
shopping list as the agent's shared state, ``{"items": [...]}``, and offers a tool of its own,
``notify`` (``{"message": string}``), that shows a message on the page.

Asked to add something, the agent adds it to the list (a ``STATE_DELTA`` the page applies) and
calls ``notify``; the run ends with that call pending, the page runs the tool and sends its
result in the next run, where the agent reads it and says so. A page that offers no
``notify`` gets a plain message instead. CORS lets a dev server on another port call it.
"""

from __future__ import annotations

import argparse
from typing import Any

from fastapi import FastAPI

import ambient_runs as ar
from ambient_runs.asgi import AgentApp


@ar.subagent("list-keeper")
def add_item(item: str) -> None:
    """Add *item* to the shared list and tell the page (attributed to this subagent)."""
    ar.update_state(lambda state: state["items"].append(item))
    ar.say(f"Added {item}.")


def agent(run: ar.Run) -> dict[str, Any] | None:
    """Add the user's item to the page's list, or report what the page's tool answered."""
    for shown in run.tool_results("notify"):  # the next run: the page ran the tool
        ar.say(f"The page says: {shown.text()}")
        return {"items": run.state()["items"]}
    item = (run.last_user_text() or "").removeprefix("Add ").strip() or "something"
    if run.state() is None:  # a page that sent no state yet
        run.set_state({"items": []})
    add_item(item)
    if any(tool.name == "notify" for tool in run.tools):
        ar.call_frontend_tool("notify", {"message": f"{item} is on the list"})  # ends the run
    ar.say("(This page has no notify tool.)")
    return None


api = FastAPI(title="shopping list")
api.mount(
    "/agent",  # POST http://127.0.0.1:8000/agent/ (with the slash)
    AgentApp(agent, allow_origins=["http://localhost:3000", "http://127.0.0.1:3000"]),
)
app = api

if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--port", type=int, default=8000)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port)
