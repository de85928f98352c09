"""
The agents of the resume contract tests: one approval-gated action per adapter.

Each `Kind` builds the agent an `AgentApp` serves (a new framework object per
run, as a server restarted between the question and the answer would), says
what answer approves, and reads the approved action's effect off the resumed
run's events. Shared by ``test_resume_contract.py``, ``test_approval_contract.py`` and the Node
end-to-end test, so the official client and the Python checks see the same programs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import httpx

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import make_input
from support.node import client_verify

JsonDict = dict[str, Any]

__all__ = ["APPROVALS", "KINDS", "Kind", "accepted", "post", "sse_events"]


@attrs.frozen
class Kind:
    """One adapter's approval: the agent, the approving payload, and the approved effect."""

    name: str
    make_agent: Callable[[], Callable[[ar.Run], Any]]
    approve: Any
    #: The TOOL_CALL_RESULT content of the approved call.
    approved: str
    #: The result of the run the approval let finish.
    result: Any


def _pydantic_ai() -> Callable[[ar.Run], Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from ambient_runs.adapters.pydantic_ai import run_agent

    async def agent(run: ar.Run) -> Any:
        model = Agent(TestModel(call_tools=["delete"]), name="ops")

        @model.tool_plain(requires_approval=True)
        def delete(path: str) -> str:
            return f"deleted {path}"

        return await run_agent(model, "clean up", name="ops")

    return agent


def _openai_agents() -> Callable[[ar.Run], Any]:
    from adapter_programs import openai_approver

    from ambient_runs.adapters.openai_agents import run_agent

    async def agent(run: ar.Run) -> Any:
        return await run_agent(openai_approver("one"), "first", name="desk")

    return agent


def _langgraph() -> Callable[[ar.Run], Any]:
    from langgraph.checkpoint.memory import InMemorySaver
    from test_adapter_langgraph import calling, paying_graph, question

    from ambient_runs.adapters.langgraph import run_graph

    # LangGraph's own state lives in its checkpointer: the one thing besides the
    # continuation store that both apps must share (a database in production).
    saver = InMemorySaver()

    async def agent(run: ar.Run) -> Any:
        script = [calling(text="Paid.")] if run.is_resume else [calling(("pay", {"amount": 5}))]
        final = await run_graph(paying_graph(saver, script), question(), name="payer")
        return final["messages"][-1].content

    return agent


class _Remote:
    """A remote AG-UI agent whose pay call waits for approval (a plain `ar.interrupt`)."""

    async def __call__(self, run: ar.Run) -> Any:
        with ar.subagent("approver"):
            entry = run.resume_for("approve-1")
            if entry is None:
                with ar.tool_call("pay", id="call-1") as call:
                    call.args({"amount": 5})
                raise ar.Interrupted(
                    ar.Interrupt(id="approve-1", reason="confirmation", tool_call_id="call-1")
                )
            with ar.tool_call("pay", id="call-1") as call:  # reopened to answer it
                call.result("paid" if entry.payload == "yes" else "not paid")
            return {"approved": entry.payload}


def _relay() -> Callable[[ar.Run], Any]:
    from ambient_runs.adapters import http

    remote = AgentApp(_Remote())

    async def agent(run: ar.Run) -> Any:
        transport = httpx.ASGITransport(app=remote)
        async with httpx.AsyncClient(transport=transport) as client:
            remote_input = make_input("remote-thread", f"{run.run_id}-x", user="pay")
            return await http.relay(
                "http://remote/agent", remote_input, name="payer", client=client
            )

    return agent


def _relayed(inner: Callable[[], Callable[[ar.Run], Any]]) -> Callable[[], Any]:
    """*inner*'s agent served by a remote app of its own, reached through ``http.relay``."""

    def make() -> Callable[[ar.Run], Any]:
        from ambient_runs.adapters import http
        from ambient_runs.continuations import MemoryContinuations

        remote = AgentApp(inner(), continuations=MemoryContinuations())

        async def agent(run: ar.Run) -> Any:
            transport = httpx.ASGITransport(app=remote)
            async with httpx.AsyncClient(transport=transport) as client:
                remote_input = make_input("remote-thread", f"{run.run_id}-x", user="go")
                return await http.relay(
                    "http://remote/agent", remote_input, name="remote", client=client
                )

        return agent

    return make


KINDS = {
    "pydantic-ai": Kind(
        "pydantic-ai", _pydantic_ai, {"approved": True}, "deleted a", '{"delete":"deleted a"}'
    ),
    "openai-agents": Kind(
        "openai-agents",
        _openai_agents,
        {"approved": True},
        "deleted /tmp/one for one",
        "one: done",
    ),
    "langgraph": Kind("langgraph", _langgraph, "yes", "paid", "Paid."),
    "relay": Kind("relay", _relay, "yes", "paid", {"approved": "yes"}),
}


#: The approval adapters, and each behind ``http.relay``: one approval contract for all.
APPROVALS = {
    "pydantic-ai": KINDS["pydantic-ai"],
    "openai-agents": KINDS["openai-agents"],
    "relay(pydantic-ai)": attrs.evolve(
        KINDS["pydantic-ai"], name="relay(pydantic-ai)", make_agent=_relayed(_pydantic_ai)
    ),
    "relay(openai-agents)": attrs.evolve(
        KINDS["openai-agents"], name="relay(openai-agents)", make_agent=_relayed(_openai_agents)
    ),
}


def accepted(*streams: list[JsonDict], messages: list[JsonDict] | None = None) -> list[Any]:
    """Each stream through the official client (after *messages*): accepted, no warnings."""
    verdicts = client_verify(
        [{"events": s, "initialMessages": list(messages or [])} for s in streams]
    )
    for verdict in verdicts:
        assert (True, None, [], []) == (
            verdict["ok"],
            verdict["error"],
            verdict["warnings"],
            verdict["consoleErrors"],
        ), verdict
    return verdicts


def sse_events(body: bytes) -> list[JsonDict]:
    """The events of an SSE response body (its ``data:`` lines)."""
    return [
        json.loads(line[len(b"data: ") :])
        for line in body.splitlines()
        if line.startswith(b"data: ")
    ]


async def post(
    app: AgentApp,
    run_id: str,
    *,
    messages: Sequence[JsonDict] = (),
    resume: Sequence[JsonDict] | None = None,
) -> list[JsonDict]:
    """POST one run of thread ``t`` to *app* (httpx's ASGI transport); its events."""
    body: JsonDict = {
        "threadId": "t",
        "runId": run_id,
        "messages": list(messages) or [{"id": f"{run_id}-u", "role": "user", "content": "go"}],
    }
    if resume is not None:
        body["resume"] = list(resume)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.post(
            "/agent", json=body, headers={"content-type": "application/json"}
        )
    assert 200 == response.status_code, response.text
    return sse_events(response.content)
