"""Shared checks of the adapter tests: the official client, attribution, new processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ambient_runs as ar
from ambient_runs.stores.redis_continuations import RedisContinuations
from support.node import ClientVerdict, client_verify

JsonDict = dict[str, Any]

PROGRAMS = Path(__file__).resolve().parent.parent / "adapter_programs.py"

_ENTITY_KEYS = ("messageId", "toolCallId")


def client_accepts(events: Sequence[JsonDict], messages: Sequence[JsonDict] = ()) -> ClientVerdict:
    """Run *events* through the official client (after *messages*); assert it took them cleanly."""
    [verdict] = client_verify([{"events": list(events), "initialMessages": list(messages)}])
    assert (True, None, [], []) == (
        verdict["ok"],
        verdict["error"],
        verdict["warnings"],
        verdict["consoleErrors"],
    ), verdict
    return verdict


def wire_of(run: ar.Run) -> list[JsonDict]:
    """The run's events in wire form."""
    return [ar.to_wire(e) for e in run.events]


def owners(events: Sequence[JsonDict]) -> dict[str, str | None]:
    """
    Map each message and tool call id to the invocation it belongs to.

    Asserts that no id is shared by two invocations, and that each invocation's
    events come between its ``SUBAGENT_STARTED`` and its end.
    """
    owner_of: dict[str, str | None] = {}
    open_subagents: set[str] = set()
    for event in events:
        kind = event["type"]
        sid = event.get("subagentRunId")
        if kind == "SUBAGENT_STARTED":
            open_subagents.add(sid)
            continue
        if kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            open_subagents.discard(sid)
            continue
        if sid is not None and kind not in ("RUN_FINISHED",):
            assert sid in open_subagents, f"{kind} of {sid} outside its invocation"
        for key in _ENTITY_KEYS:
            if key in event and not (kind == "TOOL_CALL_RESULT" and key == "messageId"):
                entity = event[key]
                assert owner_of.setdefault(entity, sid) == sid, f"{entity} shared: {event}"
    return owner_of


def by_subagent(events: Sequence[JsonDict]) -> dict[str | None, list[JsonDict]]:
    """Events grouped by the invocation they are attributed to (or identify)."""
    groups: dict[str | None, list[JsonDict]] = defaultdict(list)
    for event in events:
        groups[event.get("subagentRunId")].append(event)
    return dict(groups)


def started(events: Sequence[JsonDict]) -> dict[str, JsonDict]:
    """Each ``SUBAGENT_STARTED`` by its subagentRunId."""
    return {e["subagentRunId"]: e for e in events if e["type"] == "SUBAGENT_STARTED"}


def in_fresh_process(
    program: str, run_input: Mapping[str, Any], continuations: RedisContinuations
) -> list[JsonDict]:
    """
    Run *program* of ``adapter_programs.py`` on *run_input* in a new Python process.

    Its continuations are where *continuations* keeps them (the same Redis
    and prefix): the one thing it shares with the process that paused.
    """
    assert continuations.url is not None
    out = subprocess.run(
        [sys.executable, str(PROGRAMS), program, continuations.url, continuations.prefix],
        input=json.dumps(run_input).encode(),
        # This checkout's package first, whatever the venv has installed.
        env={**os.environ, "PYTHONPATH": str(PROGRAMS.parent.parent)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert 0 == out.returncode, out.stderr.decode()
    return [json.loads(line) for line in out.stdout.decode().splitlines()]


def redis_continuations(redis_url: str) -> RedisContinuations:
    """Continuations on the test Redis under a prefix of their own (no test sees another's)."""
    return RedisContinuations(redis_url, prefix=f"t-{uuid.uuid4().hex}:")


def answer_all(verdict: ClientVerdict, payload: Any = True) -> list[JsonDict]:
    """
    Resume entries answering every interrupt the client holds, as ``buildResumeArray`` builds them.

    ``{interruptId, status: "resolved", payload}``: no metadata, which the
    official client does not send back.
    """
    return [
        {
            "interruptId": i["id"],
            "status": "resolved",
            "payload": payload(i) if callable(payload) else payload,
        }
        for i in verdict.get("pendingInterrupts", [])
    ]
