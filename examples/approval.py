"""
An approval and a frontend tool: the run pauses for the user, and any process resumes it.

    pip install ambient-runs uvicorn
    python examples/approval.py                     # serves http://127.0.0.1:8000/

A ``booker`` subagent finds a train and asks to book it: it raises ``Interrupted`` with an
approval interrupt, and the run ends with an ``interrupt`` outcome. The client answers in its
next run (``resume``: ``status: "resolved"`` and ``payload: {"approved": true}``, or
``status: "cancelled"`` to deny). Nothing is kept on the server between the two runs: the
interrupt's id names the paused invocation, so ``run.resume_for(id)`` gives any worker what it
needs to continue it under the same subagent id.

Once booked, the agent asks the page to show the ticket with the page's own ``show_ticket``
tool when the page offers it (a frontend tool: the run ends with the call pending, and the page
answers it in the run after).
"""

from __future__ import annotations

import argparse

import ambient_runs as ar
from ambient_runs.asgi import AgentApp

TRAIN = "the 9:40 to Lyon"


def agent(run: ar.Run) -> None:
    """Ask for approval, then book on the answer, then show the ticket on the page."""
    for shown in run.tool_results("show_ticket"):  # third run: the page showed it
        ar.say(f"Enjoy the trip ({shown.text()}).")
        return
    for answer in run.resume:  # second run: the user's answer to the approval
        found = run.resume_for(answer.interrupt_id)
        if found is None or found.subagent_name != "booker":
            continue
        with ar.subagent("booker", id=found.subagent_run_id):  # the same invocation, resumed
            payload = found.payload if isinstance(found.payload, dict) else {}
            if found.status != "resolved" or not payload.get("approved"):
                ar.say("Not booked.")
                return
            ar.say(f"Booked {TRAIN}.")
            if any(tool.name == "show_ticket" for tool in run.tools):
                ar.call_frontend_tool("show_ticket", {"train": TRAIN, "seat": "12A"})
        return
    with ar.subagent("booker"):  # first run: find a train, ask before booking it
        ar.say(f"Found {TRAIN}.")
        raise ar.Interrupted(ar.interrupt("approval", message=f"Book {TRAIN}?"))


app = AgentApp(agent)

if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--port", type=int, default=8000)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port)
