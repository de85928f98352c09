"""Reading SSE bodies as a client does: the events, the ids, and the one-terminal rule."""

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
    """Return the events of an SSE body (its ``data:`` frames), skipping comments."""
    blocks = [b for b in body.split(b"\n\n") if b]
    return [json.loads(b.removeprefix(b"data: ")) for b in blocks if b.startswith(b"data: ")]


def frames_of(body: bytes | str, *, comments: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """
    Return ``(id, event)`` for every frame of an SSE body whose frames carry an ``id:``.

    Each frame must be an ``id:`` line then a ``data:`` line, and nothing else;
    where *comments* is true, comment lines (``:``) are skipped and further lines
    are let be.
    """
    text = body.decode() if isinstance(body, bytes) else body
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line]
        if comments:
            lines = [line for line in lines if not line.startswith(":")]
        if not lines:
            continue
        assert comments or 2 == len(lines), block
        assert lines[0].startswith("id: "), block
        assert lines[1].startswith("data: "), block
        out.append((int(lines[0][4:]), json.loads(lines[1][6:])))
    return out


def assert_one_terminal(events: list[dict[str, Any]]) -> None:
    """Assert a valid AG-UI stream (our verifier) that ends with its one terminal event."""
    types = [e["type"] for e in events]
    assert 1 == sum(t in TERMINAL for t in types), types
    assert types[-1] in TERMINAL, types
    assert_valid([ar.from_wire(e) for e in events])
