"""
Transformers: rewrite, drop or expand events before they are verified and sent.

A transformer is any callable ``event -> event | None | sequence of events``
(`ambient_runs.Run`'s *transformers*, applied in order). Return the event
(changed with ``attrs.evolve`` or not), None to drop it, or several events to
expand it. Whatever comes out is verified like any other event, so a
transformer cannot put an invalid stream on the wire.

The ones shipped here are small configured callables, in the manner of
structlog's processors::

    Run(input, transformers=[Timestamps(), StampMetadata({"tenant": "acme"})])

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import time
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import attrs

from ambient_runs import events as ev

__all__ = ("RedactContent", "StampMetadata", "Timestamps")

T = TypeVar("T")


def _evolve(obj: T, **changes: Any) -> T:
    return cast(T, attrs.evolve(cast(Any, obj), **changes))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Timestamps:
    """
    Give every event without a ``timestamp`` one: integer milliseconds from *clock*.

    Args:
        clock: Returns the time as an ``int`` (ms since epoch by default). Inject
            a fake clock in tests; a float is rejected by the event itself.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_clock",)

    def __init__(self, clock: Callable[[], int] = _now_ms) -> None:
        self._clock = clock

    def __call__(self, event: ev.BaseEvent) -> ev.BaseEvent:
        if event.timestamp is not None:
            return event
        return _evolve(event, timestamp=self._clock())


class StampMetadata:
    """
    Merge *fields* into every event's ``metadata``; keys the event already has win.

    Raises:
        ValueError: *fields* uses the key ``ag-ui``, which the protocol reserves.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, Any]) -> None:
        if "ag-ui" in fields:
            msg = "the metadata key 'ag-ui' is reserved for the protocol; choose another key"
            raise ValueError(msg)
        self._fields = dict(fields)

    def __call__(self, event: ev.BaseEvent) -> ev.BaseEvent:
        merged = {**self._fields, **(event.metadata or {})}
        return _evolve(event, metadata=merged)


def _content_fields() -> dict[type[ev.BaseEvent], str]:
    """
    Map each event class that carries message text to the name of that field.

    Read from the model: a ``delta`` or ``content`` field that holds a string
    (message, reasoning and tool-argument deltas, their chunks, a tool result's
    content). A state delta (a patch) and an activity's content (an object)
    hold no text, so they are not among them.
    """
    found: dict[type[ev.BaseEvent], str] = {}
    for cls in ev.EVENT_CLASSES.values():
        hints = typing.get_type_hints(cls)
        for name in ("delta", "content"):
            if name in hints and _holds_text(hints[name]):
                found[cls] = name
    return found


def _holds_text(tp: Any) -> bool:
    """Whether *tp* is ``str`` or a union with ``str`` among its members."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return str in typing.get_args(tp)
    return tp is str


#: The text-carrying field of each event kind `RedactContent` looks at.
_CONTENT_FIELDS: dict[type[ev.BaseEvent], str] = _content_fields()


class RedactContent:
    """
    Replace message content for which *predicate* is true with *replacement*.

    Looks at the text of message, reasoning and tool-call argument deltas and of
    tool results (string content, and the text of text parts). The event itself
    stays, with its ids and attribution, so the stream keeps its shape.

    Args:
        predicate: Called with each piece of text; True redacts it.
        replacement: What the client sees instead.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_predicate", "_replacement")

    def __init__(self, predicate: Callable[[str], bool], replacement: str = "[redacted]") -> None:
        self._predicate = predicate
        self._replacement = replacement

    def __call__(self, event: ev.BaseEvent) -> ev.BaseEvent:
        field = _CONTENT_FIELDS.get(type(event))
        if field is None:
            return event
        value = getattr(event, field)
        if isinstance(value, str):
            if self._predicate(value):
                return _evolve(event, **{field: self._replacement})
            return event
        if isinstance(value, tuple):  # content parts of a tool result
            parts = tuple(
                _evolve(p, text=self._replacement)
                if isinstance(p, ev.TextPart) and self._predicate(p.text)
                else p
                for p in value
            )
            if parts != value:
                return _evolve(event, **{field: parts})
        return event
