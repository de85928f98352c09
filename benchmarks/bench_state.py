"""
State deltas: ``publish_state()`` after one leaf change, for ~1 KB, ~100 KB and ~1 MB.

The states are `benchmarks.bench_diff.make_state` (a dict holding a list of
documents with nested fields). Per size, candidates:

- ``publish``: change one leaf in place, then ``ambient_runs.publish_state()``
  inside a run with verification on and a null sink: the whole path (wire form,
  diff, the size rule, a ``STATE_DELTA`` event, verification);
- ``make_patch``: ``jsonpatch.make_patch(old, new)`` on the wire dicts before
  and after the same change;
- ``dumps``: ``json.dumps`` of the whole state (compact), what a snapshot costs
  to encode.

Before timing, the delta ``publish_state`` emits for one change is applied with
``jsonpatch`` to the state before the change and compared with the state after.

Target: ``publish`` ≥ 20x faster than ``make_patch`` at ~1 MB.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import jsonpatch

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._wire import to_wire
from benchmarks import INPUT, figure, interleave, ratios
from benchmarks.bench_diff import SIZES, make_state

TITLE = "state deltas (publish_state after one leaf change)"

MIN_BATCH_S = 0.01
"""Repeat a candidate within a batch until one batch takes about this long."""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _repeats(fn: Callable[[], object]) -> int:
    """How many calls of *fn* make a batch of about `MIN_BATCH_S` (at least 1)."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(10_000, round(MIN_BATCH_S / once)))


def _batch(fn: Callable[[], object], repeats: int) -> Callable[[], float]:
    def candidate() -> float:
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start) / repeats

    return candidate


def _bench_size(label: str, n_docs: int, rounds: int) -> dict[str, Any]:
    state = make_state(n_docs)
    middle = len(state["documents"]) // 2
    leaf = state["documents"][middle]["meta"]["author"]
    counter = itertools.count(1)
    last: list[ev.BaseEvent] = []

    def null_sink(event: ev.BaseEvent) -> None:
        last[:] = (event,)  # keeps only the latest event (for the checks)

    with ar.Run(INPUT, sink=null_sink, verify=True, state=state) as run:
        assert run._verifier is not None
        ar.publish_state()  # the first publish is the snapshot
        assert isinstance(last[0], ev.StateSnapshotEvent)

        def publish() -> None:
            leaf["id"] = next(counter)
            ar.publish_state()

        for _ in range(3):  # steady state, as in a long run
            publish()

        # The check: the emitted delta turns the previous state into the new one.
        before = copy.deepcopy(state)
        publish()
        event = last[0]
        if not isinstance(event, ev.StateDeltaEvent):
            raise AssertionError(f"expected a STATE_DELTA, got {type(event).__name__}")
        delta = [to_wire(op) for op in event.delta]
        applied = jsonpatch.apply_patch(before, delta)
        if _canonical(applied) != _canonical(state):
            raise AssertionError("the emitted delta does not reproduce the new state")

        old = copy.deepcopy(state)
        leaf["id"] = -1
        new = copy.deepcopy(state)
        theirs = jsonpatch.make_patch(old, new)
        if _canonical(theirs.apply(old)) != _canonical(new):
            raise AssertionError("make_patch's patch does not reproduce the new state")

        def make_patch() -> None:
            jsonpatch.make_patch(old, new)

        def dumps() -> None:
            _compact(state)

        candidates = {
            "publish": _batch(publish, _repeats(publish)),
            "make_patch": _batch(make_patch, _repeats(make_patch)),
            "dumps": _batch(dumps, _repeats(dumps)),
        }
        samples = interleave(candidates, rounds)
        still_delta = isinstance(last[0], ev.StateDeltaEvent)

    return {
        "label": label,
        "docs": n_docs,
        "bytes": len(_compact(state).encode()),
        "samples": samples,
        "delta": _compact(delta),
        "delta_applies": True,
        "delta_ops": len(delta),
        "make_patch_ops": len(list(theirs)),
        "last_publish_was_delta": still_delta,
    }


def run(rounds: int = 12, sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Time the candidates for each size in *sizes* (default: ~1 KB, ~100 KB, ~1 MB)."""
    sizes = SIZES if sizes is None else sizes
    per_size = {label: _bench_size(label, n, rounds) for label, n in sizes.items()}
    samples: dict[str, list[float]] = {}
    figures = []
    checks: dict[str, Any] = {}
    for label, data in per_size.items():
        for candidate, values in data["samples"].items():
            samples[f"{candidate} @ {label}"] = values
        figures.append(
            figure(
                f"state {label}: make_patch / publish (speed-up)",
                ratios(data["samples"], "make_patch", "publish"),
                target=(">=", 20.0) if label == "1MB" else None,
            )
        )
        figures.append(
            figure(
                f"state {label}: dumps / publish (speed-up)",
                ratios(data["samples"], "dumps", "publish"),
            )
        )
        checks[f"{label}"] = (
            f"{data['bytes']} bytes; delta applies: {data['delta_applies']}; "
            f"delta {data['delta']}; make_patch ops {data['make_patch_ops']}; "
            f"steady state publishes deltas: {data['last_publish_was_delta']}"
        )
    return {
        "title": TITLE,
        "params": {"rounds": rounds, "sizes": dict(sizes), "min_batch_s": MIN_BATCH_S},
        "unit": "publish",
        "samples": samples,
        "figures": figures,
        "checks": checks,
        "sizes": {
            label: {k: v for k, v in data.items() if k != "samples"}
            for label, data in per_size.items()
        },
    }
