"""
State publishing: a value's changes as ``STATE_SNAPSHOT``/``STATE_DELTA`` (or activity) events.

`tracked_change` turns a value into what to send through a `StateTracker`
(``_diff``): a snapshot first, then RFC 6902 deltas when they are smaller. The
run's typed state and every `ActivityHandle` publish through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ambient_runs import events as ev
from ambient_runs._diff import StateTracker, deep_copy_json
from ambient_runs._wire import (
    check_json,
    is_state_type,
    json_form,
    safe_scalar,
    structure_state,
    wire_form,
)
from ambient_runs.errors import InvalidEventError, InvalidInputError

if TYPE_CHECKING:
    from ambient_runs._scopes import Frame

__all__ = (
    "RunState",
    "initial_state",
    "operations",
    "publish_state_in",
    "send_tracked",
    "set_state_in",
    "tracked_change",
    "update_state_in",
)


def tracked_change(tracker: Any, value: Any) -> tuple[str, Any, bool] | None:
    """
    Publish *value* through a `StateTracker`: what to send, or None when nothing changed.

    Returns ``(kind, payload, plain)``: *plain* says the payload is a delta of
    plain-text paths and `safe_scalar` values (`_plain_patch`), which encodes for
    certain. Only what goes out is checked for a JSON form: the whole value for
    a snapshot, the operations for a delta, so an unchanged megabyte costs no
    encoding. When that check fails, the tracker is reset (the next publish is a
    snapshot) and `InvalidEventError` is raised.
    """
    plain = False
    try:
        try:
            change = tracker.publish(wire_form(value))
        except TypeError:
            # A JSON container holding Python values (a date, a model): their JSON
            # form, or InvalidEventError naming the bad one. The tracker refused
            # before changing anything, so the retry diffs as the first try would.
            change = tracker.publish(json_form(value))
        if change is None:
            return None
        plain = change[0] == "delta" and _plain_patch(change[1])
        if not plain:
            check_json(change[1], value)
    except (TypeError, ValueError, RecursionError) as exc:
        tracker.reset()
        if isinstance(exc, InvalidEventError):
            raise
        msg = f"{type(value).__name__} has no JSON form: {exc}"
        raise InvalidEventError(msg) from None
    kind, payload = change
    return kind, payload, plain


#: The tracker's own operations, built without their validators: the differ only
#: writes paths of escaped tokens (``_diff.escape_pointer``), always valid pointers.
_TRUSTED_OPERATIONS: dict[str, Callable[..., ev.JsonPatchOperation]] = {
    "add": ev.unchecked(ev.AddOperation, "path", "value"),
    "replace": ev.unchecked(ev.ReplaceOperation, "path", "value"),
    "remove": ev.unchecked(ev.RemoveOperation, "path"),
}

_delta_event: Callable[[tuple[ev.JsonPatchOperation, ...], str | None], ev.StateDeltaEvent] = (
    ev.unchecked(ev.StateDeltaEvent, "delta", "subagent_run_id")
)
"""A ``STATE_DELTA`` of trusted operations, attributed to an owner the library checked."""


def _plain_patch(patch: Sequence[dict[str, Any]]) -> bool:
    """Whether `check_json` would pass *patch* for certain: `safe_scalar` paths and values."""
    return all(
        safe_scalar(op["path"]) and ("value" not in op or safe_scalar(op["value"])) for op in patch
    )


def operations(patch: Sequence[dict[str, Any]]) -> tuple[ev.JsonPatchOperation, ...]:
    """
    A `StateTracker`'s patch (wire dicts) as event operations.

    The differ writes only ``add``, ``replace`` and ``remove`` with valid paths, so
    those are built without validation (equal to the constructors' objects);
    anything else goes through its class.
    """
    ops: list[ev.JsonPatchOperation] = []
    for op in patch:
        kind = op["op"]
        trusted = _TRUSTED_OPERATIONS.get(kind)
        if trusted is not None and "path" in op:
            if kind == "remove" and len(op) == 2:
                ops.append(trusted(op["path"]))
                continue
            if kind != "remove" and len(op) == 3 and "value" in op:
                ops.append(trusted(op["path"], op["value"]))
                continue
        cls = ev.OPERATION_CLASSES[kind]
        kwargs = {("from_" if k == "from" else k): v for k, v in op.items() if k != "op"}
        ops.append(cls(**kwargs))
    return tuple(ops)


_ABSENT: Any = object()


def initial_state(client: Any, default: Any, state_type: Any) -> RunState:
    """
    The state a run starts from: the client's (``input.state``), else *default*.

    - The client's state, when it holds something (not absent, not ``{}``), is
      converted into *state_type* (`structure_state`; `InvalidInputError` naming
      each bad field under ``$.state``), or kept as the JSON it is without one.
    - A client holding nothing (``{}``) starts from *default* when there is one,
      else from ``{}`` converted into *state_type*.
    - Without *state_type*, a *default* that is an attrs instance, a dataclass or
      a pydantic model gives its class as the type.

    What the client sent is the baseline the first publish is a delta against
    (when that is smaller); an absent state has none, so the first publish is a
    snapshot.

    Raises:
        TypeError: *state_type* is not a type the client's state converts into.
        InvalidInputError: The client's state does not convert.
    """
    if (
        state_type is None
        and default is not None
        and not isinstance(default, dict)
        and is_state_type(type(default))
    ):
        state_type = type(default)
    if state_type is not None and not is_state_type(state_type):
        msg = (
            f"state_type={state_type!r} is not a state type: give an attrs class, a "
            "dataclass, a TypedDict, a pydantic model or dict"
        )
        raise TypeError(msg)
    if client is None:
        return RunState(default)
    if type(client) is dict and not client and default is not None:
        return RunState(default, {})
    # One copy, so that the agent's changes never reach the input; the input's own
    # state is the baseline, which the tracker copies when it first publishes.
    try:
        own = deep_copy_json(client)
    except RecursionError:
        msg = "invalid state"
        raise InvalidInputError(msg, ["$.state: nesting exceeds the recursion limit"]) from None
    if state_type is not None:
        own = structure_state(own, state_type)
    return RunState(own, client)


def send_tracked(
    tracker: StateTracker, send: Callable[..., None], event: ev.BaseEvent, *, told: bool = False
) -> None:
    """
    Send the event of a tracked change; when it is refused, forget the change.

    The tracker already counts the change as published. A refused event (a
    value the pipeline's checks reject, a run that has finished) never reached
    the client, so the tracker is reset: the next publish is a snapshot, never
    a delta against something the client does not hold.

    *told*: the event is a ``STATE_DELTA`` whose strings were all found plain
    already (`tracked_change`'s *plain*, the owner an id the run checked), so
    `Pipeline.send` skips its encodability check (its *text* None: the history
    keeps no state).
    """
    try:
        if told:
            send(event, None)
        else:
            send(event)
    except BaseException:
        tracker.reset()
        raise


class RunState:
    """
    A run's typed state and what was last published of it.

    The value is whatever the agent set (an attrs instance, a dataclass, a pydantic
    model or a JSON dict); publishing compares its wire form with the last one
    sent, or, before the first publish, with *baseline*: the state the client sent,
    which it holds already. A state that is None and was never set on purpose
    publishes nothing (no ``{"snapshot": null}`` that would wipe the client's).
    """

    __slots__ = ("_baseline", "_tracker", "explicit", "value")

    def __init__(self, value: Any, baseline: Any = _ABSENT) -> None:
        self.value = value
        #: Whether the value was given or set on purpose (a None then publishes a null).
        self.explicit = value is not None
        self._baseline = baseline
        self._tracker: StateTracker | None = None

    def publish(self, frame: Frame) -> None:
        """Publish what changed since the last publish, attributed to *frame*'s owner."""
        pipeline = frame.pipeline
        with pipeline.lock:
            if self._tracker is None:
                if self.value is None and not self.explicit and self._baseline is _ABSENT:
                    return
                self._tracker = StateTracker()
                if self._baseline is not _ABSENT:
                    self._tracker.baseline(self._baseline)
            change = tracked_change(self._tracker, self.value)
            if change is None:
                return
            kind, payload, plain = change
            if kind == "snapshot":
                event: ev.BaseEvent = ev.StateSnapshotEvent(
                    snapshot=payload, subagent_run_id=frame.owner
                )
            else:
                event = _delta_event(operations(payload), frame.owner)
            send_tracked(self._tracker, pipeline.send, event, told=plain)


def set_state_in(frame: Frame, value: Any) -> None:
    """Replace the run's state and publish the change, attributed to *frame*'s owner."""
    state = frame.pipeline.state
    state.value = value
    state.explicit = True
    state.publish(frame)


def update_state_in(frame: Frame, update: Callable[[Any], Any]) -> None:
    """Apply *update* to the run's state (mutate, or return a new one) and publish."""
    state = frame.pipeline.state
    new = update(state.value)
    if new is not None:
        state.value = new
        state.explicit = True
    state.publish(frame)


def publish_state_in(frame: Frame) -> None:
    """Publish the run's state, attributed (as provenance) to *frame*'s owner."""
    frame.pipeline.state.publish(frame)
