"""
The two core hooks the OpenTelemetry adapter stands on: `_scopes.add_run_hook` and
`Run.add_transformer`. Tested without OpenTelemetry: they are plain library features.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

import ambient_runs as ar
from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs.errors import ProtocolError
from ambient_runs.testing import make_input


@pytest.fixture
def seen() -> Iterator[list[Any]]:
    """Register a run hook recording every run it is called with; unregister after."""
    runs: list[Any] = []
    _scopes.add_run_hook(runs.append)
    try:
        yield runs
    finally:
        _scopes.remove_run_hook(runs.append)
    assert runs.append not in _scopes.run_hooks()


def test_a_run_hook_sees_every_run_made_in_any_thread(seen: list[Any]) -> None:
    """Unlike a tap, a run hook is process-wide: a run made in a fresh thread calls it too."""
    here = ar.Run(make_input(run_id="here"))
    made: list[Any] = []
    thread = threading.Thread(target=lambda: made.append(ar.Run(make_input(run_id="there"))))
    thread.start()
    thread.join()

    assert [here, made[0]] == seen


def test_adding_a_hook_twice_calls_it_once(seen: list[Any]) -> None:
    """add_run_hook is idempotent, and remove_run_hook removes the one registration."""
    _scopes.add_run_hook(seen.append)
    ar.Run(make_input())
    assert 1 == len(seen)


def test_a_removed_hook_is_not_called() -> None:
    """After remove_run_hook, new runs no longer call the hook."""
    runs: list[Any] = []
    _scopes.add_run_hook(runs.append)
    _scopes.remove_run_hook(runs.append)
    ar.Run(make_input())
    assert [] == runs


def stamp(event: ev.BaseEvent) -> ev.BaseEvent:
    """Stamp RUN_STARTED's metadata; pass anything else."""
    if isinstance(event, ev.RunStartedEvent):
        return attrs.evolve(event, metadata={"stamped": True})
    return event


async def test_a_hook_can_add_a_transformer_that_rewrites_run_started() -> None:
    """A transformer added by a run hook applies from RUN_STARTED on, after the run's own."""
    order: list[str] = []

    def own(event: ev.BaseEvent) -> ev.BaseEvent:
        order.append("own")
        return event

    def added(event: ev.BaseEvent) -> ev.BaseEvent:
        order.append("added")
        return stamp(event)

    def hook(run: ar.Run) -> None:
        run.add_transformer(added)

    _scopes.add_run_hook(hook)
    try:
        run = ar.Run(make_input(), transformers=[own])
    finally:
        _scopes.remove_run_hook(hook)
    async with run:
        pass

    assert {"stamped": True} == run.events[0].metadata
    assert ["own", "added", "own", "added"] == order


async def test_an_added_transformers_output_is_verified() -> None:
    """What an added transformer returns goes through the verifier like anything else."""

    def bad(event: ev.BaseEvent) -> ev.BaseEvent:
        if isinstance(event, ev.CustomEvent):
            return ev.TextMessageEndEvent(message_id="nobody")
        return event

    async with ar.Run(make_input()) as run:
        run.add_transformer(bad)
        with pytest.raises(ProtocolError):
            ar.emit(ev.CustomEvent(name="n", value=1))
    assert [ev.RunStartedEvent, ev.RunFinishedEvent] == [type(e) for e in run.events]


async def test_remove_transformer_stops_it_and_refuses_a_stranger() -> None:
    """A removed transformer sees nothing more; removing one the run lacks is a ValueError."""
    seen: list[ev.EventType] = []

    def watch(event: ev.BaseEvent) -> ev.BaseEvent:
        seen.append(event.TYPE)
        return event

    async with ar.Run(make_input(), transformers=[watch]) as run:
        run.remove_transformer(watch)
        ar.say("unseen")
        with pytest.raises(ValueError, match="not in"):
            run.remove_transformer(watch)
    assert [ev.EventType.RUN_STARTED] == seen
