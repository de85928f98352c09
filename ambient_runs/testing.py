"""
Helpers for testing agents built on ambient_runs.

`assert_valid` is `ambient_runs.verify.assert_valid`, re-exported so a test
finds its helpers in one module.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._wire import to_wire
from ambient_runs.verify import assert_valid

__all__ = ("assert_valid", "capture_events", "make_input", "project", "wire")


@contextmanager
def capture_events() -> Iterator[list[ev.BaseEvent]]:
    """
    Collect every event emitted inside the block, in order.

    Captures the ambient run's events from now on, and every run created inside
    the block (``with capture_events() as events: async with Run(...)``).

    .. versionadded:: 0.1.0
    """
    events: list[ev.BaseEvent] = []
    frame = _scopes.current()
    run = frame.run if frame is not None else None
    if run is not None:
        run.add_tap(events.append)
    token = _scopes.add_tap(events.append)
    try:
        yield events
    finally:
        _scopes.remove_tap(token)
        if run is not None:
            run.remove_tap(events.append)


def make_input(
    thread_id: str = "thread", run_id: str = "run", *, user: str | None = None, **fields: Any
) -> ev.RunAgentInput:
    """
    Build a `RunAgentInput` for a test, optionally with one user message *user*.

    .. versionadded:: 0.1.0
    """
    messages = fields.pop("messages", ())
    if user is not None:
        messages = (*messages, ev.UserMessage(id=f"{run_id}-user", content=user))
    return ev.RunAgentInput(thread_id=thread_id, run_id=run_id, messages=messages, **fields)


def wire(events: Sequence[ev.BaseEvent]) -> list[dict[str, Any]]:
    """
    Return the wire form of every event: easy to compare with literal dicts.

    .. versionadded:: 0.1.0
    """
    return [to_wire(e) for e in events]


def project(events: Sequence[ev.BaseEvent], subagent_run_id: str | None) -> list[ev.BaseEvent]:
    """
    Return the events attributed to (or, for ``SUBAGENT_*``, identifying) one invocation.

    *subagent_run_id* None projects the parent agent's own events.

    .. versionadded:: 0.1.0
    """
    return [e for e in events if getattr(e, "subagent_run_id", None) == subagent_run_id]
