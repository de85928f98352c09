"""
State publishing: a value's changes as ``STATE_SNAPSHOT``/``STATE_DELTA`` (or activity) events.

`tracked_change` turns a value into what to send through a `StateTracker`
(``_diff``): a snapshot first, then RFC 6902 deltas when they are smaller. The
run's typed state and every `ActivityHandle` publish through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ambient_runs import events as ev
from ambient_runs._diff import StateTracker
from ambient_runs._wire import check_json, wire_form
from ambient_runs.errors import InvalidEventError

if TYPE_CHECKING:
    from ambient_runs._scopes import Frame

__all__ = ("operations", "publish_state_in", "set_state_in", "tracked_change", "update_state_in")


def tracked_change(tracker: Any, value: Any) -> tuple[str, Any] | None:
    """
    Publish *value* through a `StateTracker`: what to send, or None when nothing changed.

    Only what goes out is checked for a JSON form: the whole value for a snapshot,
    the operations for a delta, so an unchanged megabyte costs no encoding. When
    that check fails, the tracker is reset (the next publish is a snapshot) and
    `InvalidEventError` is raised.
    """
    try:
        change = tracker.publish(wire_form(value))
        if change is not None:
            check_json(change[1], value)
    except (TypeError, ValueError, RecursionError) as exc:
        tracker.reset()
        if isinstance(exc, InvalidEventError):
            raise
        msg = f"{type(value).__name__} has no JSON form: {exc}"
        raise InvalidEventError(msg) from None
    return cast("tuple[str, Any] | None", change)


def operations(patch: Sequence[dict[str, Any]]) -> tuple[ev.JsonPatchOperation, ...]:
    ops: list[ev.JsonPatchOperation] = []
    for op in patch:
        cls = ev.OPERATION_CLASSES[op["op"]]
        kwargs = {("from_" if k == "from" else k): v for k, v in op.items() if k != "op"}
        ops.append(cls(**kwargs))
    return tuple(ops)


def set_state_in(frame: Frame, state: Any) -> None:
    """Replace the run's state and publish the change, attributed to *frame*'s owner."""
    frame.run._state = state
    publish_state_in(frame)


def update_state_in(frame: Frame, update: Callable[[Any], Any]) -> None:
    """Apply *update* to the run's state (mutate, or return a new one) and publish."""
    run = frame.run
    new = update(run._state)
    if new is not None:
        run._state = new
    publish_state_in(frame)


def publish_state_in(frame: Frame) -> None:
    """Publish the run's state, attributed (as provenance) to *frame*'s owner."""
    run = frame.run
    with run._lock:
        if run._tracker is None:
            run._tracker = StateTracker()
        change = tracked_change(run._tracker, run._state)
        if change is None:
            return
        kind, payload = change
        if kind == "snapshot":
            run._send(ev.StateSnapshotEvent(snapshot=payload, subagent_run_id=frame.owner))
        else:
            run._send(ev.StateDeltaEvent(delta=operations(payload), subagent_run_id=frame.owner))
