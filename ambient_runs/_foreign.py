"""
Foreign event objects: official ``ag_ui.core`` events and wire dicts, read as our own.

Duck-typed: nothing of ``ag_ui`` is imported. `emit` and `relay` use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from ambient_runs import events as ev
from ambient_runs._wire import from_wire

__all__ = ("coerce_event",)


def coerce_event(obj: object) -> ev.BaseEvent:
    """
    Return *obj* as an `ambient_runs` event.

    Accepts an `ambient_runs` event (returned as is), a wire dict (camelCase keys,
    as `from_wire` reads it), or an official ``ag_ui.core`` event object, read
    through its ``model_dump(mode="json", by_alias=True)``: the official models
    omit absent optional fields there and keep the nulls that mean something
    (``CUSTOM.value``, ``STATE_SNAPSHOT.snapshot``), which ``exclude_none`` would
    drop. Nothing of ``ag_ui`` is imported.

    Raises:
        InvalidInputError: The dict (or dump) is not a valid AG-UI 1.0 event.
        TypeError: *obj* is none of those.
    """
    if isinstance(obj, ev.BaseEvent):
        return obj
    if isinstance(obj, Mapping):
        event: ev.BaseEvent = from_wire(obj if isinstance(obj, dict) else dict(obj))
        return event
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and hasattr(obj, "type"):
        return cast("ev.BaseEvent", from_wire(dump(mode="json", by_alias=True)))
    msg = (
        f"expected an AG-UI event (an ambient_runs event, an official ag_ui.core event or a "
        f"wire dict), got {type(obj).__name__}"
    )
    raise TypeError(msg)
