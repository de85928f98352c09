"""
Concurrency: many subagent tasks at once, and the verifier's cost as subagents pile up.

Part 1, per-event cost with *tasks* concurrent subagents against one task:

- ``concurrent``: *tasks* asyncio tasks, each a subagent invocation (``async with
  subagent("worker")``) opening a message and writing *events* deltas, with
  ``await asyncio.sleep(0)`` after every write, all gathered in one run;
- ``sequential``: one task running the same *tasks* invocations one after the
  other, with the same ``sleep(0)`` after every write.

Both emit exactly the same events (the same subagents, messages and deltas, in a
different interleaving), so the ratio isolates what concurrency costs: task
switching, per-task contexts, and the run and verifier holding *tasks* open
subagents instead of one. The sequential side yields with ``sleep(0)`` too,
because otherwise the comparison would mostly measure the event loop's
round trip, which the concurrent side cannot avoid. The sink is an in-memory
list (no encoding), which keeps the library's share of the time high.
Per-event cost is the batch time over the number of events delivered.
Target: concurrent ≤ 1.3x sequential.

Part 2, ``Verifier.feed`` per event with 1, 100, 1,000 and 10,000 open
subagents (each holding one open text message): the same workload is fed to
each verifier (pre-built events, timed around ``feed`` only): content deltas
spread round-robin over the open subagents' messages, and short-lived child
subagents started and finished under them, each with a message of its own.
Target: the slowest per-event cost ≤ 1.5x the fastest (flat in open subagents),
per round. Also reported: the most-open over the fewest-open cost per round,
the growth itself (max/min of noisy numbers leans upward).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.verify import Verifier
from benchmarks import INPUT, figure, interleave, interleave_async, ratios

TITLE = "concurrency (N subagent tasks vs one task; verifier vs open subagents)"


# --------------------------------------------------------------------------- part 1


async def _invocation(events: int, delta: str) -> None:
    async with ar.subagent("worker"):
        with ar.message() as handle:
            write = handle.write
            for _ in range(events):
                write(delta)
                await asyncio.sleep(0)


async def _tasks_part(tasks: int, events: int, rounds: int) -> dict[str, Any]:
    counts: dict[str, set[int]] = {"concurrent": set(), "sequential": set()}

    async def concurrent() -> float:
        out: list[ev.BaseEvent] = []
        async with ar.Run(INPUT, sink=out.append, verify=True):
            start = time.perf_counter()
            await asyncio.gather(*(_invocation(events, "tok") for _ in range(tasks)))
            elapsed = time.perf_counter() - start
            delivered = len(out) - 1  # RUN_STARTED was not timed
        counts["concurrent"].add(delivered)
        return elapsed / delivered

    async def sequential() -> float:
        out: list[ev.BaseEvent] = []
        async with ar.Run(INPUT, sink=out.append, verify=True):

            async def one_task() -> None:
                for _ in range(tasks):
                    await _invocation(events, "tok")

            start = time.perf_counter()
            await asyncio.create_task(one_task())
            elapsed = time.perf_counter() - start
            delivered = len(out) - 1
        counts["sequential"].add(delivered)
        return elapsed / delivered

    candidates = {"concurrent": concurrent, "sequential": sequential}
    samples = await interleave_async(candidates, rounds)
    # Per invocation: SUBAGENT_STARTED, TEXT_MESSAGE_START, deltas, END, SUBAGENT_FINISHED.
    expected = tasks * (events + 4)
    return {
        "samples": samples,
        "checks": {
            "events_per_batch": {k: sorted(v) for k, v in counts.items()},
            "events_per_batch_expected": expected,
            "same_events": counts["concurrent"] == counts["sequential"] == {expected},
        },
    }


# --------------------------------------------------------------------------- part 2


def _open_verifier(open_subagents: int) -> tuple[Verifier, list[tuple[str, str]]]:
    """A verifier in a run with *open_subagents* open subagents, each with an open message."""
    verifier = Verifier()
    feed = verifier.check
    feed(ev.RunStartedEvent(thread_id="t", run_id="r"))
    lanes = []
    for i in range(open_subagents):
        sid, mid = f"sub-{i}", f"msg-{i}"
        feed(ev.SubagentStartedEvent(subagent_run_id=sid, name="worker"))
        feed(ev.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=sid))
        lanes.append((sid, mid))
    return verifier, lanes


def _workload(lanes: list[tuple[str, str]], n_events: int, batch: int) -> list[Any]:
    """About *n_events* events: 12-event child invocations interleaved with deltas on *lanes*."""
    out: list[Any] = []
    i = 0
    while len(out) < n_events:
        sid, _ = lanes[i % len(lanes)]
        # A short-lived child subagent under this lane's subagent.
        child, cmid = f"b{batch}-c{i}", f"b{batch}-m{i}"
        out.append(
            ev.SubagentStartedEvent(
                subagent_run_id=child, name="child", parent_subagent_run_id=sid
            )
        )
        out.append(
            ev.TextMessageStartEvent(message_id=cmid, role="assistant", subagent_run_id=child)
        )
        out.extend(
            ev.TextMessageContentEvent(message_id=cmid, delta="x", subagent_run_id=child)
            for _ in range(4)
        )
        out.append(ev.TextMessageEndEvent(message_id=cmid, subagent_run_id=child))
        out.append(ev.SubagentFinishedEvent(subagent_run_id=child))
        # Deltas on four lanes, round-robin over every open subagent.
        for k in range(4):
            lsid, lmid = lanes[(i + k) % len(lanes)]
            out.append(
                ev.TextMessageContentEvent(message_id=lmid, delta="y", subagent_run_id=lsid)
            )
        i += 1
    return out


def _verifier_part(open_counts: tuple[int, ...], n_events: int, rounds: int) -> dict[str, Any]:
    setups = {n: _open_verifier(n) for n in open_counts}
    batches = iter(range(10**9))
    rejected: list[int] = []

    def candidate(n: int) -> Any:
        verifier, lanes = setups[n]
        feed = verifier.feed

        def measure() -> float:
            events = _workload(lanes, n_events, next(batches))
            bad = 0
            start = time.perf_counter()
            for event in events:
                if feed(event):
                    bad += 1
            elapsed = time.perf_counter() - start
            rejected.append(bad)
            return elapsed / len(events)

        return measure

    candidates = {f"feed @ {n} open": candidate(n) for n in open_counts}
    for c in candidates.values():  # warm up, untimed
        c()
    samples = interleave(candidates, rounds)
    names = list(samples)
    spread = [
        max(samples[name][r] for name in names) / min(samples[name][r] for name in names)
        for r in range(rounds)
    ]
    return {
        "samples": samples,
        "spread": spread,
        "checks": {"rejected_events": sum(rejected), "open_counts": list(open_counts)},
    }


def run(
    tasks: int = 1000,
    events: int = 100,
    rounds: int = 5,
    open_counts: tuple[int, ...] = (1, 100, 1000, 10000),
    feed_events: int = 20_000,
    feed_rounds: int | None = None,
) -> dict[str, Any]:
    """Run both parts; *feed_rounds* defaults to four times *rounds*."""
    part1 = asyncio.run(_tasks_part(tasks, events, rounds))
    part2 = _verifier_part(tuple(open_counts), feed_events, feed_rounds or 4 * rounds)
    samples = {**part1["samples"], **part2["samples"]}
    counts = ", ".join(str(n) for n in open_counts)
    return {
        "title": TITLE,
        "params": {
            "tasks": tasks,
            "events": events,
            "rounds": rounds,
            "open_counts": list(open_counts),
            "feed_events": feed_events,
            "feed_rounds": feed_rounds or 4 * rounds,
            "sleep0_between_emits": "both sides",
        },
        "unit": "event",
        "samples": samples,
        "figures": [
            figure(
                f"concurrency: {tasks} tasks / 1 task (per event)",
                ratios(part1["samples"], "concurrent", "sequential"),
                target=("<=", 1.3),
            ),
            figure(
                f"verifier feed: max/min over {counts} open",
                part2["spread"],
                target=("<=", 1.5),
                note="per round, the slowest of the open counts over the fastest",
            ),
            figure(
                f"verifier feed: {open_counts[-1]} open / {open_counts[0]} open",
                ratios(
                    part2["samples"],
                    f"feed @ {open_counts[-1]} open",
                    f"feed @ {open_counts[0]} open",
                ),
                note="the growth itself, without max/min's upward bias under noise",
            ),
        ],
        "checks": {**part1["checks"], **part2["checks"]},
    }
