"""
Benchmarks for ambient_runs; ``python benchmarks/run.py`` runs them all.

The machine they run on is assumed noisy, so nothing is judged by an absolute
time. Each benchmark runs its candidates side by side in one process, in
rounds, rotating the order every round; a round yields one time per candidate
and one *ratio* per comparison, and the reported figure is the median of the
per-round ratios with their spread. Absolute medians are reported too, for
reading, never for judging.

Every ``bench_*`` module exposes ``run(...)`` returning a plain dict (JSON-able):

- ``title``, ``params``;
- ``samples``: ``{candidate: [seconds per unit, one per round]}``, and ``unit``
  (what one unit is: an event, a call, a publish);
- ``figures``: a list of ``{"name", "values", "unit", "target", "note"}``, where
  ``values`` holds one number per round and ``target`` is ``None`` or
  ``{"op": "<=" | ">=" | "<", "value": float}`` applied to the median;
- ``checks``: correctness facts established outside the timed regions.

This package holds the helpers they share.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = (
    "INPUT",
    "figure",
    "floor_writes",
    "interleave",
    "interleave_async",
    "meets",
    "official_writes",
    "per_round",
    "ratios",
    "summarize",
)

INPUT: dict[str, Any] = {
    "threadId": "bench-thread",
    "runId": "bench-run",
    "messages": [],
    "tools": [],
    "context": [],
    "state": {},
    "forwardedProps": None,
}
"""A minimal RunAgentInput in wire form."""


def official_writes(
    texts: Sequence[str], message_id: str, owner: str, out: list[bytes]
) -> Callable[[], float]:
    """
    The official path for a message's deltas, as a timed candidate (seconds per delta).

    ``ag_ui.core.TextMessageContentEvent(...)``, ``EventEncoder().encode(...)`` and
    ``.encode()`` per delta, the frames appended to *out* (cleared first).
    """
    from ag_ui.core import TextMessageContentEvent
    from ag_ui.encoder import EventEncoder

    encode = EventEncoder().encode

    def official() -> float:
        out.clear()
        append, event = out.append, TextMessageContentEvent
        start = time.perf_counter()
        for delta in texts:
            append(
                encode(event(message_id=message_id, delta=delta, subagent_run_id=owner)).encode()
            )
        return (time.perf_counter() - start) / len(texts)

    return official


def floor_writes(
    texts: Sequence[str], message_id: str, owner: str, out: list[bytes]
) -> Callable[[], float]:
    """
    The hand-written floor for the same deltas (seconds per delta): a dict, ``json.dumps``
    (compact, not ASCII-only), the SSE framing and ``.encode()``, appended to *out*.
    """

    def floor() -> float:
        out.clear()
        append, dumps = out.append, json.dumps
        start = time.perf_counter()
        for delta in texts:
            d = {
                "type": "TEXT_MESSAGE_CONTENT",
                "subagentRunId": owner,
                "messageId": message_id,
                "delta": delta,
            }
            append(
                ("data: " + dumps(d, separators=(",", ":"), ensure_ascii=False) + "\n\n").encode()
            )
        return (time.perf_counter() - start) / len(texts)

    return floor


def _order(names: Sequence[str], round_index: int) -> list[str]:
    """Rotate *names* by the round number, so no candidate always runs first."""
    k = round_index % len(names)
    return [*names[k:], *names[:k]]


def interleave(
    candidates: Mapping[str, Callable[[], float]], rounds: int
) -> dict[str, list[float]]:
    """
    Run every candidate once per round, in rotating order; collect what each returns.

    A candidate runs one batch and returns its own measurement (typically
    seconds per unit, timed around the work only, so its setup is excluded).
    A full collection runs before each batch so garbage from one candidate is
    not collected on another's clock.
    """
    names = list(candidates)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in _order(names, r):
            gc.collect()
            out[name].append(candidates[name]())
    return out


async def interleave_async(
    candidates: Mapping[str, Callable[[], Awaitable[float]]], rounds: int
) -> dict[str, list[float]]:
    """`interleave` for candidates that are coroutine functions (one event loop for all)."""
    names = list(candidates)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in _order(names, r):
            gc.collect()
            await asyncio.sleep(0)
            out[name].append(await candidates[name]())
    return out


def per_round(fn: Callable[[], object], units: int) -> Callable[[], float]:
    """Wrap *fn* (one batch of *units* units) into a candidate returning seconds per unit."""

    def candidate() -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) / units

    return candidate


def ratios(samples: Mapping[str, Sequence[float]], num: str, den: str) -> list[float]:
    """Per-round ratios ``samples[num][r] / samples[den][r]``."""
    return [a / b for a, b in zip(samples[num], samples[den], strict=True)]


def figure(
    name: str,
    values: Sequence[float],
    *,
    unit: str = "x",
    target: tuple[str, float] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One reported figure: per-round *values*, judged (if at all) by their median."""
    return {
        "name": name,
        "values": list(values),
        "unit": unit,
        "target": None if target is None else {"op": target[0], "value": target[1]},
        "note": note,
    }


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, extremes and count of *values*."""
    data = sorted(values)
    if len(data) >= 2:
        p25, _, p75 = statistics.quantiles(data, n=4, method="inclusive")
    else:
        p25 = p75 = data[0]
    return {
        "median": statistics.median(data),
        "p25": p25,
        "p75": p75,
        "min": data[0],
        "max": data[-1],
        "n": len(data),
    }


def meets(value: float, target: Mapping[str, Any]) -> bool:
    """Whether *value* meets ``{"op", "value"}``."""
    op, bound = target["op"], target["value"]
    if op == "<=":
        return bool(value <= bound)
    if op == "<":
        return bool(value < bound)
    if op == ">=":
        return bool(value >= bound)
    if op == ">":
        return bool(value > bound)
    raise ValueError(f"unknown target operator {op!r}")
