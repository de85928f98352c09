"""Benchmark the JSON differ against ``jsonpatch.make_patch``.

For states of about 1 KB, 100 KB and 1 MB (a dict holding a list of documents with
nested fields), one leaf is changed and then, in one process, these are timed:

* ``publish``: ``StateTracker.publish`` in steady state, the caller mutating its
  state in place between publishes (everything included: comparing, copying the
  changed parts, the exact size rule);
* ``publish_quiet``: ``StateTracker.publish`` when nothing changed (returns None);
* ``diff``: bare ``diff(old, new)`` where ``new`` is a full deep copy of ``old``
  with the leaf changed (no structural sharing: the worst case);
* ``diff_shared``: bare ``diff`` where ``new`` shares every unchanged subtree with
  ``old`` (an immutable-style update);
* ``make_patch``: ``jsonpatch.make_patch(old, new)`` on the same dicts as ``diff``;
* ``dumps``: ``json.dumps`` of the whole state (compact, as on the wire);
* ``deep_copy_json`` and ``copy.deepcopy`` of the whole state.

Every produced patch is checked to apply (``jsonpatch.apply_patch``) to the new
value.  The measures are interleaved (each runs twice per round: "cold", right
after the others, and "warm", right after itself) so that load from elsewhere on
the machine hits them alike; CPU time (``process_time``) and wall time are both
recorded.  The tables show CPU-time medians and make_patch's median divided by
each (how many times faster than make_patch).

Run ``python benchmarks/bench_diff.py [--repeats N]``; ``run(repeats)`` returns the
raw timings (seconds) for programmatic use.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch

try:
    from ambient_runs._diff import StateTracker, deep_copy_json, diff
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from ambient_runs._diff import StateTracker, deep_copy_json, diff

SIZES = {"1KB": 2, "100KB": 340, "1MB": 3400}
"""Label → number of documents (each about 300 bytes of JSON)."""


def make_state(n_docs: int) -> dict[str, Any]:
    """A dict with a list of documents with nested fields."""
    return {
        "title": "research run",
        "step": 0,
        "flags": {"verbose": True, "draft": False},
        "documents": [
            {
                "id": f"doc-{i}",
                "title": f"Document number {i}",
                "score": i * 0.5,
                "rank": i,
                "tags": ["alpha", "beta", f"t{i % 7}"],
                "meta": {
                    "author": {"name": "Ann Example", "id": i % 13},
                    "created": "2024-01-01T00:00:00Z",
                    "reviewed": i % 2 == 0,
                    "note": None,
                },
                "body": "lorem ipsum dolor sit amet " * 3,
            }
            for i in range(n_docs)
        ],
    }


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _check(old: Any, ops: list[dict[str, Any]], new: Any) -> None:
    if _canonical(jsonpatch.apply_patch(old, ops)) != _canonical(new):
        raise AssertionError("patch does not reproduce the new value")


MEASURES = (
    "publish",
    "publish_quiet",
    "diff",
    "diff_shared",
    "make_patch",
    "dumps",
    "deep_copy_json",
    "deepcopy",
)


def _bench_size(n_docs: int, repeats: int) -> dict[str, Any]:
    state = make_state(n_docs)
    middle = len(state["documents"]) // 2
    leaf = state["documents"][middle]["meta"]["author"]
    out: dict[str, Any] = {"docs": n_docs, "bytes": len(_compact(state).encode())}

    # StateTracker.publish in steady state: the caller mutates one leaf in place.
    tracker = StateTracker()
    tracker.publish(state)
    counter = iter(range(10**9))
    for _ in range(3):  # warm the tracker's caches, as a long run would have
        leaf["id"] = next(counter)
        tracker.publish(state)
    before = copy.deepcopy(state)
    leaf["id"] = next(counter)
    result = tracker.publish(state)
    if result is None or result[0] != "delta":
        raise AssertionError(f"expected a delta, got {result!r}")
    _check(before, result[1], state)
    out["publish_patch"] = _compact(result[1])

    quiet_state = copy.deepcopy(state)
    quiet = StateTracker()
    quiet.publish(quiet_state)
    for _ in range(2):
        quiet.publish(quiet_state)

    # Bare diff and make_patch on the same dicts: new is a deep copy, one leaf changed.
    old = make_state(n_docs)
    new = copy.deepcopy(old)
    new["documents"][middle]["meta"]["author"]["id"] = -1
    ops = diff(old, new)
    _check(old, ops, new)
    _check(old, list(jsonpatch.make_patch(old, new)), new)
    out["diff_patch"] = _compact(ops)

    # Structural sharing: only the containers on the path to the changed leaf are new.
    shared = dict(old)
    shared["documents"] = list(old["documents"])
    doc = dict(old["documents"][middle])
    doc["meta"] = dict(doc["meta"])
    doc["meta"]["author"] = {**doc["meta"]["author"], "id": -1}
    shared["documents"][middle] = doc
    _check(old, diff(old, shared), shared)

    actions: dict[str, Callable[[], object]] = {
        "publish": lambda: tracker.publish(state),
        "publish_quiet": lambda: quiet.publish(quiet_state),
        "diff": lambda: diff(old, new),
        "diff_shared": lambda: diff(old, shared),
        "make_patch": lambda: jsonpatch.make_patch(old, new),
        "dumps": lambda: _compact(old),
        "deep_copy_json": lambda: deep_copy_json(old),
        "deepcopy": lambda: copy.deepcopy(old),
    }
    timings: dict[str, dict[str, list[float]]] = {
        series: {m: [] for m in MEASURES}
        for series in ("cpu_cold", "cpu_warm", "wall_cold", "wall_warm")
    }
    # Rounds interleave the measures, so that load from elsewhere on the machine hits
    # them alike.  Each measure runs twice in a row per round: the first run comes right
    # after the other measures (its CPU caches cold), the second right after itself.
    for _ in range(repeats):
        for measure in MEASURES:
            action = actions[measure]
            for heat in ("cold", "warm"):
                if measure == "publish":
                    leaf["id"] = next(counter)  # the caller's in-place change: not timed
                gc.disable()  # as timeit does: a collection would bill one measure for all
                try:
                    wall_start, cpu_start = time.perf_counter(), time.process_time()
                    outcome = action()
                    cpu_time = time.process_time() - cpu_start
                    wall_time = time.perf_counter() - wall_start
                finally:
                    gc.enable()
                timings[f"cpu_{heat}"][measure].append(cpu_time)
                timings[f"wall_{heat}"][measure].append(wall_time)
                if measure == "publish" and (outcome is None or outcome[0] != "delta"):  # type: ignore[index]
                    raise AssertionError(f"expected a delta, got {outcome!r}")
                if measure == "publish_quiet" and outcome is not None:
                    raise AssertionError(f"expected None, got {outcome!r}")
    out.update(timings)
    return out


def run(repeats: int = 20) -> dict[str, Any]:
    """Run every measurement in this process; return the raw timings in seconds.

    ``{size label: {"docs", "bytes", "publish_patch", "diff_patch", "cpu_cold",
    "cpu_warm", "wall_cold", "wall_warm"}}``, each of the last four mapping a measure
    to its list of timings.  "cpu" is this process's CPU time (``time.process_time``),
    which other load on the machine disturbs less than wall time; "cold" runs follow
    the other measures, "warm" runs follow a run of the same measure.
    """
    results: dict[str, Any] = {}
    for label, n_docs in SIZES.items():
        gc.collect()
        results[label] = _bench_size(n_docs, repeats)
    return results


def _table(results: dict[str, Any], series: str) -> list[str]:
    lines = [
        f"{series}: median ms (make_patch's median / this median = times faster)",
        f"{'measure':<16}" + "".join(f"{label:>22}" for label in results),
    ]
    for measure in MEASURES:
        cells = []
        for data in results.values():
            median = statistics.median(data[series][measure])
            ratio = statistics.median(data[series]["make_patch"]) / median
            cells.append(f"{median * 1e3:>10.3f} ({ratio:>7.1f}x)")
        lines.append(f"{measure:<16}" + "".join(f"{cell:>22}" for cell in cells))
    return lines


def _report(results: dict[str, Any]) -> str:
    lines = [*_table(results, "cpu_warm"), "", *_table(results, "cpu_cold"), ""]
    for label, data in results.items():
        lines.append(
            f"{label}: {data['docs']} documents, {data['bytes']} bytes of JSON; "
            f"publish patch {data['publish_patch']}; diff patch {data['diff_patch']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    print(_report(run(args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
