"""
The agent the viewer's browser test serves: three concurrent subagents, a tool call
each, a state change each, and an approval before it answers.

Its first run researches and asks for approval (an interrupt); the run that
answers it (``resume``) writes the answer if approved.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ambient_runs as ar

TOPICS = ("tea", "coffee", "cocoa")
ANSWER = "Tea: gentle caffeine, and the researchers agree."
PAUSES = {"tea": 0.5, "coffee": 0.8, "cocoa": 0.65}  # long enough that the lanes visibly overlap


async def research(topic: str) -> dict[str, Any]:
    """One researcher: a search tool call, a finding in the state, a line of text."""
    async with ar.subagent(
        "researcher", id=f"research-{topic}", description=f"Looks into {topic}"
    ):
        with ar.reasoning() as thought:
            thought.write(f"What do people say about {topic}?")
        with ar.tool_call("search") as call:
            call.args({"query": f"{topic} benefits"})
        await asyncio.sleep(PAUSES[topic])
        call.result({"hits": len(topic)})
        ar.say(f"{topic.capitalize()} is fine in moderation.")
        ar.update_state(lambda state: state["findings"].update({topic: "fine"}))
        return {"topic": topic}


async def agent(run: ar.Run) -> Any:
    """Research three topics at once, ask for approval, then answer (or not)."""
    for answer in run.resume:
        approved = answer.status == "resolved" and answer.payload == {"approved": True}
        ar.say(ANSWER if approved else "Not published.")
        status = "published" if approved else "held"
        ar.update_state(lambda state, status=status: state.update(status=status))
        return {"approved": approved}
    ar.set_state({"question": run.last_user_text(), "findings": {}, "status": "researching"})
    with ar.step("research"):
        async with asyncio.TaskGroup() as group:
            for topic in TOPICS:
                group.create_task(research(topic))
    ar.update_state(lambda state: state.update(status="awaiting approval"))
    raise ar.Interrupted(ar.interrupt("approval", message="Publish the answer?"))
