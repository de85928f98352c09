"""What a run emitted, in the shapes tests compare."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import wire

__all__ = ["body", "said", "types_of"]


def types_of(events: ar.Run | Iterable[ev.BaseEvent] | Iterable[Mapping[str, Any]]) -> list[str]:
    """
    Return the type of every event: of a run's log, of event objects, or of wire dicts.

    An object's type is its `ev.EventType`, a `str` enum: it compares (and hashes)
    equal to its wire spelling, so one list of strings or of members fits all three.
    """
    source = events.events if isinstance(events, ar.Run) else events
    return [e["type"] if isinstance(e, Mapping) else e.TYPE for e in source]


def body(run: ar.Run) -> list[dict[str, Any]]:
    """Return the wire form of the run's events between RUN_STARTED and the terminal event."""
    return wire(list(run.events))[1:-1]


def said(events: ar.Run | Iterable[ev.BaseEvent]) -> list[tuple[str, str | None]]:
    """Return (text, owner) for every TEXT_MESSAGE_CONTENT of *events* (or of a run's log)."""
    source = events.events if isinstance(events, ar.Run) else events
    return [
        (e.delta, e.subagent_run_id) for e in source if isinstance(e, ev.TextMessageContentEvent)
    ]
