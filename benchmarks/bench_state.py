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
  to encode;
- ``plain``: `plain_diff`, a plain recursive differ descending wherever ``==``
  says two values differ, from a copy of the state before the change to the
  state after it (no type-exact comparison, no copy kept for the next publish,
  no event): the floor issue 12 sets (target 6: ``publish`` <= 2x it at every
  size);
- ``orjson``: ``orjson.dumps`` of the whole state, the fastest snapshot
  encoding there is (a bench dependency only; skipped without it);
- ``pickle``: one plain fast-mode pickle of the whole state (protocol 3), after
  the same change: what a publish read the state with to prove that no type
  (``1`` and ``1.0``, ``True`` and ``1``) hid behind ``==`` before its pickler
  was seeded with the state's strings (``_diff._KnownLeaf``), reported for
  reading (``publish / pickle``), never a target.

Each batch is timed by process CPU time. Before timing, the delta
``publish_state`` emits for one change is applied with ``jsonpatch`` to the
state before the change and compared with the state after.

Targets: ``publish`` ≥ 20x faster than ``make_patch`` at ~1 MB; ``publish`` <= 2x
``plain`` at every size.
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
from ambient_runs._diff import _make_dumper
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


def plain_diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations from *old* to *new*, descending wherever ``==`` says they differ."""
    ops: list[dict[str, Any]] = []
    _plain(old, new, path, ops)
    return ops


def _plain(old: Any, new: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if type(old) is dict and type(new) is dict:
        for key, value in new.items():
            at = path + "/" + key.replace("~", "~0").replace("/", "~1")
            if key not in old:
                ops.append({"op": "add", "path": at, "value": value})
            elif old[key] != value:
                _plain(old[key], value, at, ops)
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": path + "/" + key})
    elif type(old) is list and type(new) is list:
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            if a != b:
                _plain(a, b, f"{path}/{i}", ops)
        for i in range(len(old) - 1, len(new) - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        for value in new[len(old) :]:
            ops.append({"op": "add", "path": path + "/-", "value": value})
    elif old != new:
        ops.append({"op": "replace", "path": path, "value": new})


def _repeats(fn: Callable[[], object]) -> int:
    """How many calls of *fn* make a batch of about `MIN_BATCH_S` (at least 1)."""
    start = time.process_time()
    fn()
    once = max(time.process_time() - start, 1e-7)
    return max(1, min(10_000, round(MIN_BATCH_S / once)))


def _batch(fn: Callable[[], object], repeats: int) -> Callable[[], float]:
    # Process CPU time: on a machine shared with other work, wall time bills a candidate
    # for the time it was not running (every candidate here is single-threaded).
    def candidate() -> float:
        start = time.process_time()
        for _ in range(repeats):
            fn()
        return (time.process_time() - start) / repeats

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

        plain_before = copy.deepcopy(state)

        def plain() -> None:
            leaf["id"] = next(counter)
            plain_diff(plain_before, state)

        leaf["id"] = -2
        ours = plain_diff(plain_before, state)
        if _canonical(jsonpatch.apply_patch(plain_before, ours)) != _canonical(state):
            raise AssertionError("plain_diff's patch does not reproduce the new state")

        dump_state = _make_dumper(3)

        def pickled() -> None:
            leaf["id"] = next(counter)
            dump_state(state)

        candidates = {
            "publish": _batch(publish, _repeats(publish)),
            "pickle": _batch(pickled, _repeats(pickled)),
            "make_patch": _batch(make_patch, _repeats(make_patch)),
            "dumps": _batch(dumps, _repeats(dumps)),
            "plain": _batch(plain, _repeats(plain)),
        }
        try:
            import orjson
        except ImportError:  # a bench dependency; the figure is skipped without it
            pass
        else:

            def orjson_dumps() -> None:
                orjson.dumps(state)

            candidates["orjson"] = _batch(orjson_dumps, _repeats(orjson_dumps))
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
        figures.append(
            figure(
                f"state {label}: publish / plain == differ",
                ratios(data["samples"], "publish", "plain"),
                target=("<=", 2.0),
                note="issue 12, target 6",
            )
        )
        figures.append(
            figure(
                f"state {label}: publish / one pickle of the state",
                ratios(data["samples"], "publish", "pickle"),
                note="one plain pickle of the caller's state (a publish's, seeded, writes less)",
            )
        )
        if "orjson" in data["samples"]:
            figures.append(
                figure(
                    f"state {label}: publish / orjson snapshot",
                    ratios(data["samples"], "publish", "orjson"),
                    note="below 1: the delta costs less than encoding the state with orjson",
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
