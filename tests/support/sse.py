"""What tests read from SSE responses: events, frames with ids, the one-terminal rule."""

from __future__ import annotations

import json
from typing import Any

import ambient_runs as ar
from ambient_runs.testing import assert_valid

__all__ = ["BODY", "JSON", "assert_one_terminal", "events_of", "frames_of"]

BODY = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
JSON = {"content-type": "application/json"}
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


def events_of(body: bytes) -> list[dict[str, Any]]:
    """Return the events of an SSE body, skipping comments."""
    blocks = [b for b in body.split(b"\n\n") if b]
    return [json.loads(b.removeprefix(b"data: ")) for b in blocks if b.startswith(b"data: ")]


def assert_one_terminal(events: list[dict[str, Any]]) -> None:
    """Assert a valid AG-UI stream (our verifier) that ends with its one terminal event."""
    types = [e["type"] for e in events]
    assert 1 == sum(t in TERMINAL for t in types), types
    assert types[-1] in TERMINAL, types
    assert_valid([ar.from_wire(e) for e in events])


def frames_of(body: bytes | str, *, comments: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """(id, event) per frame: an ``id:`` line, a ``data:`` line (and ``:`` lines if *comments*)."""
    out = []
    for block in (body.decode() if isinstance(body, bytes) else body).split("\n\n"):
        lines = [x for x in block.split("\n") if x and not (comments and x.startswith(":"))]
        if lines:
            assert comments or 2 == len(lines), block
            assert lines[0].startswith("id: "), block
            assert lines[1].startswith("data: "), block
            out.append((int(lines[0][4:]), json.loads(lines[1][6:])))
    return out
