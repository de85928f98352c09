"""
ambient_runs: stream AG-UI 1.0 events from Python agents with ambient attribution.

The current run, subagent and step live in contextvars, so ``@subagent("researcher")``
on a function and a bare ``say("…")`` inside it produce correctly attributed events.
"""

from ambient_runs._version import __version__
from ambient_runs._wire import from_wire, to_wire
from ambient_runs.errors import (
    AmbientRunsError,
    HandleClosedError,
    InvalidEventError,
    InvalidInputError,
    NoActiveRunError,
    ProtocolError,
)
from ambient_runs.events import Event, EventType, Interrupt, RunAgentInput

__all__ = [
    "AmbientRunsError",
    "__version__",
    "Event",
    "EventType",
    "HandleClosedError",
    "Interrupt",
    "InvalidEventError",
    "InvalidInputError",
    "NoActiveRunError",
    "ProtocolError",
    "RunAgentInput",
    "from_wire",
    "to_wire",
]
