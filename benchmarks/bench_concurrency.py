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

Part 2, ``Verifier.feed`` (strict) per event with 1, 100, 1,000 and 10,000
open subagents, each holding one open text message and one open tool call:
the same workload is fed to each verifier (pre-built events, timed around
``feed`` only): message and tool-call deltas spread round-robin over the open
subagents, and short-lived child subagents started and finished under them,
each with a message and a tool call of its own (and the call's result).
Target (issue 12, target 5): the cost at the most open over the cost at the
fewest, per round, ≤ 1.5x. Also reported: the slowest of all the open counts
over the fastest, per round (max/min of noisy numbers leans upward).
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


_STRIDE = 7919
"""A prime: the stride of part 2's visits over the open subagents."""


def _open_verifier(open_subagents: int) -> tuple[Verifier, list[tuple[str, str, str]]]:
    """A verifier with *open_subagents* open subagents, each with an open message and call."""
    verifier = Verifier()
    feed = verifier.check
    feed(ev.RunStartedEvent(thread_id="t", run_id="r"))
    lanes = []
    for i in range(open_subagents):
        sid, mid, tid = f"sub-{i}", f"msg-{i}", f"call-{i}"
        feed(ev.SubagentStartedEvent(subagent_run_id=sid, name="worker"))
        feed(ev.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=sid))
        feed(ev.ToolCallStartEvent(tool_call_id=tid, tool_call_name="f", subagent_run_id=sid))
        lanes.append((sid, mid, tid))
    return verifier, lanes


def _workload(lanes: list[tuple[str, str, str]], n_events: int, batch: int) -> list[Any]:
    """About *n_events* events: 14-event child invocations interleaved with deltas on *lanes*."""
    out: list[Any] = []
    # The lanes are visited in a stride coprime to every open count, continuing from one
    # batch to the next, so that all of them take turns and consecutive events touch lanes
    # far apart (the open subagents' records are not kept warm by their order in memory).
    start, count = batch * n_events, len(lanes)
    i = 0
    while len(out) < n_events:
        sid = lanes[((start + 5 * i) * _STRIDE) % count][0]
        # A short-lived child subagent under this lane's subagent: a message, a tool call.
        child, cmid, ctid = f"b{batch}-c{i}", f"b{batch}-m{i}", f"b{batch}-t{i}"
        out += [
            ev.SubagentStartedEvent(
                subagent_run_id=child, name="child", parent_subagent_run_id=sid
            ),
            ev.TextMessageStartEvent(message_id=cmid, role="assistant", subagent_run_id=child),
            ev.TextMessageContentEvent(message_id=cmid, delta="x", subagent_run_id=child),
            ev.TextMessageContentEvent(message_id=cmid, delta="x", subagent_run_id=child),
            ev.TextMessageEndEvent(message_id=cmid, subagent_run_id=child),
            ev.ToolCallStartEvent(tool_call_id=ctid, tool_call_name="f", subagent_run_id=child),
            ev.ToolCallArgsEvent(tool_call_id=ctid, delta="{}", subagent_run_id=child),
            ev.ToolCallEndEvent(tool_call_id=ctid, subagent_run_id=child),
            ev.ToolCallResultEvent(
                message_id=f"b{batch}-r{i}", tool_call_id=ctid, content="ok", subagent_run_id=child
            ),
            ev.SubagentFinishedEvent(subagent_run_id=child),
        ]
        # Deltas on two lanes' messages and two lanes' tool calls, round-robin over them all.
        for k in range(4):
            lsid, lmid, ltid = lanes[((start + 5 * i + 1 + k) * _STRIDE) % count]
            if k % 2:
                out.append(
                    ev.ToolCallArgsEvent(tool_call_id=ltid, delta="1", subagent_run_id=lsid)
                )
            else:
                out.append(
                    ev.TextMessageContentEvent(message_id=lmid, delta="y", subagent_run_id=lsid)
                )
        i += 1
    return out


SLICES = 10
"""Part 2 times each candidate's batch in this many slices and keeps the fastest."""

BUSY = 1000
"""Part 2: how many of the open subagents the workload visits (all of them when fewer)."""


def _verifier_part(open_counts: tuple[int, ...], n_events: int, rounds: int) -> dict[str, Any]:
    setups = {n: _open_verifier(n) for n in open_counts}
    batches = iter(range(10**9))
    rejected: list[int] = []

    def candidate(n: int, busy: int) -> Any:
        verifier, all_lanes = setups[n]
        lanes = all_lanes[:busy]
        feed = verifier.feed

        def measure() -> float:
            # SLICES back-to-back slices of the batch; the fastest slice's per-event CPU
            # time stands for the round (CPU time and the minimum: a preemption or a
            # neighbour's burst on this shared machine lands on one slice, not the figure).
            slices = [_workload(lanes, n_events // SLICES, next(batches)) for _ in range(SLICES)]
            bad, best = 0, float("inf")
            for events in slices:
                start = time.process_time()
                for event in events:
                    if feed(event):
                        bad += 1
                best = min(best, (time.process_time() - start) / len(events))
            rejected.append(bad)
            return best

        return measure

    candidates = {f"feed @ {n} open": candidate(n, BUSY) for n in open_counts}
    names = list(candidates)
    most = open_counts[-1]
    if most > BUSY:  # every open subagent busy: what the memory hierarchy adds
        candidates[f"feed @ {most} open, all busy"] = candidate(most, most)
    for c in candidates.values():  # warm up, untimed
        c()
    samples = interleave(candidates, rounds)
    spread = [
        max(samples[name][r] for name in names) / min(samples[name][r] for name in names)
        for r in range(rounds)
    ]
    return {
        "samples": samples,
        "spread": spread,
        "checks": {
            "rejected_events": sum(rejected),
            "all_events_accepted": not any(rejected),
            "open_counts": list(open_counts),
        },
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
                f"verifier feed: {open_counts[-1]} open / {open_counts[0]} open",
                ratios(
                    part2["samples"],
                    f"feed @ {open_counts[-1]} open",
                    f"feed @ {open_counts[0]} open",
                ),
                target=("<=", 1.5),
                note="issue 12, target 5: open subagents, each with a message and a tool call",
            ),
            figure(
                f"verifier feed: max/min over {counts} open",
                part2["spread"],
                note="per round, the slowest of the open counts over the fastest (leans upward)",
            ),
            *(
                [
                    figure(
                        f"verifier feed: {open_counts[-1]} open, all busy / {open_counts[0]} open",
                        ratios(
                            part2["samples"],
                            f"feed @ {open_counts[-1]} open, all busy",
                            f"feed @ {open_counts[0]} open",
                        ),
                        note="every open subagent takes turns: cache misses, not lookups",
                    )
                ]
                if f"feed @ {open_counts[-1]} open, all busy" in part2["samples"]
                else []
            ),
        ],
        "checks": {**part1["checks"], **part2["checks"]},
    }
