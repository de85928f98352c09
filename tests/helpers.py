"""Helpers the test modules share: what a run emitted, in the shapes tests compare."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import wire

__all__ = ["body", "said"]


def body(run: ar.Run) -> list[dict[str, Any]]:
    """Return the wire form of the run's events between RUN_STARTED and the terminal event."""
    return wire(list(run.events))[1:-1]


def said(events: ar.Run | Iterable[ev.BaseEvent]) -> list[tuple[str, str | None]]:
    """Return (text, owner) for every TEXT_MESSAGE_CONTENT of *events* (or of a run's log)."""
    source = events.events if isinstance(events, ar.Run) else events
    return [
        (e.delta, e.subagent_run_id) for e in source if isinstance(e, ev.TextMessageContentEvent)
    ]
