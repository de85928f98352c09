"""
Concurrency: create_task, gather and TaskGroup each keep their own attribution.

The central property: however tasks interleave, the stream projected onto any
one subagent (ids normalised by subagent name and order of appearance) equals
the projection of a sequential run of the same work.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input, wire

Yield = Callable[[], Awaitable[None]]


def normalise(events: list[ev.BaseEvent]) -> dict[str | None, list[dict[str, Any]]]:
    """
    Project *events* onto each subagent (by name) and the parent (None), ids made canonical.

    Subagent ids become their names; message and tool call ids become their order
    of first appearance within the projection. Run events are left out.
    """
    names: dict[str | None, str | None] = {None: None}
    names.update(
        {e.subagent_run_id: e.name for e in events if isinstance(e, ev.SubagentStartedEvent)}
    )
    assert len(set(names.values())) == len(names), "subagent names must be unique"
    by_owner: dict[str | None, list[ev.BaseEvent]] = {sid: [] for sid in names}
    for event in events:
        if event.TYPE not in (ev.EventType.RUN_STARTED, ev.EventType.RUN_FINISHED):
            by_owner[getattr(event, "subagent_run_id", None)].append(event)
    out: dict[str | None, list[dict[str, Any]]] = {}
    for sid, owned in by_owner.items():
        ids: dict[str, str] = {}
        projected = []
        for event in wire(owned):
            for key in ("subagentRunId", "parentSubagentRunId"):
                if key in event:
                    event[key] = names[event[key]]
            for key in ("messageId", "toolCallId", "parentMessageId"):
                if key in event:
                    event[key] = ids.setdefault(event[key], f"id-{len(ids)}")
            projected.append(event)
        out[names[sid]] = projected
    return out


async def work(index: int, pause: Yield) -> None:
    """One unit of fan-out work: a subagent with a tool call, a nested child and a grandchild."""
    async with ar.subagent(f"w{index}"):
        ar.say(f"start {index}")
        await pause()
        with ar.tool_call("search") as call:
            await pause()
            call.args({"q": index})
        call.result(f"hits {index}")
        async with ar.subagent(f"w{index}.child"):
            await pause()
            ar.think(f"child {index}")
            async with ar.subagent(f"w{index}.child.leaf"):
                await pause()
                ar.say(f"leaf {index}")
        await pause()
        ar.say(f"done {index}")


async def no_pause() -> None:
    """Never yield to the loop."""


def seeded_pauses(seed: int) -> Callable[[int], Yield]:
    """Return a factory of per-task pauses that yield to the loop 0-3 times, reproducibly."""

    def for_task(index: int) -> Yield:
        rng = random.Random(seed * 100_003 + index)

        async def pause() -> None:
            for _ in range(rng.randrange(4)):
                await asyncio.sleep(0)

        return pause

    return for_task


async def run_fan_out(count: int, pauses: Callable[[int], Yield], how: str) -> list[ev.BaseEvent]:
    """Run *count* units of work concurrently (*how*: gather, taskgroup, tasks) or sequentially."""
    async with ar.Run(make_input(run_id="r")) as run:
        ar.say("parent before")
        if how == "sequential":
            for index in range(count):
                await work(index, pauses(index))
        elif how == "gather":
            await asyncio.gather(*(work(index, pauses(index)) for index in range(count)))
        elif how == "taskgroup":
            async with asyncio.TaskGroup() as group:
                for index in range(count):
                    group.create_task(work(index, pauses(index)))
        else:
            tasks = [asyncio.create_task(work(index, pauses(index))) for index in range(count)]
            await asyncio.wait(tasks)
        ar.say("parent after")
    return list(run.events)


_SEQUENTIAL: dict[int, dict[str | None, list[dict[str, Any]]]] = {}


async def sequential_projection(count: int) -> dict[str | None, list[dict[str, Any]]]:
    """Return the normalised projection of a sequential run of *count* units (computed once)."""
    if count not in _SEQUENTIAL:
        _SEQUENTIAL[count] = normalise(await run_fan_out(count, lambda _: no_pause, "sequential"))
    return _SEQUENTIAL[count]


class TestFanOutProjection:
    @pytest.mark.parametrize("how", ["gather", "taskgroup", "tasks"])
    async def test_thousand_concurrent_subagents_match_a_sequential_run(self, how: str) -> None:
        """1,000 concurrent subagent tasks project, per subagent, onto exactly a sequential run."""
        concurrent = await run_fan_out(1000, seeded_pauses(1), how)

        actual = normalise(concurrent)
        expected = await sequential_projection(1000)
        assert 3001 == len(expected)
        assert expected == actual
        assert_valid(concurrent)

    async def test_the_stream_really_interleaves(self) -> None:
        """The concurrent stream is not secretly sequential: subagents overlap in time."""
        events = await run_fan_out(50, seeded_pauses(2), "gather")

        open_now: set[str] = set()
        most = 0
        for event in events:
            if isinstance(event, ev.SubagentStartedEvent):
                open_now.add(event.subagent_run_id)
            elif isinstance(event, ev.SubagentFinishedEvent):
                open_now.discard(event.subagent_run_id)
            most = max(most, len(open_now))
        assert most > 50

    @pytest.mark.parametrize("seed", range(5))
    async def test_nested_fan_out_is_structurally_sequential(self, seed: int) -> None:
        """100 tasks x 3 nested levels with random interleaving build the sequential tree."""
        concurrent = await run_fan_out(100, seeded_pauses(seed), "gather")
        sequential = await run_fan_out(100, lambda _: no_pause, "sequential")

        def tree(events: list[ev.BaseEvent]) -> set[tuple[str, str | None]]:
            names = {
                e.subagent_run_id: e.name for e in events if isinstance(e, ev.SubagentStartedEvent)
            }
            return {
                (e.name, names.get(e.parent_subagent_run_id or ""))
                for e in events
                if isinstance(e, ev.SubagentStartedEvent)
            }

        assert tree(sequential) == tree(concurrent)
        assert await sequential_projection(100) == normalise(concurrent)


class TestSiblings:
    @pytest.mark.parametrize("how", ["gather", "taskgroup"])
    async def test_siblings_are_parented_to_the_parent(self, how: str) -> None:
        """gather and TaskGroup children nest under the enclosing subagent, never each other."""

        @ar.subagent("child")
        async def child(n: int) -> None:
            for _ in range(3):
                await asyncio.sleep(0)
                ar.say(f"child {n}")

        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("parent"):
            if how == "gather":
                await asyncio.gather(child(1), child(2), child(3))
            else:
                async with asyncio.TaskGroup() as group:
                    for n in (1, 2, 3):
                        group.create_task(child(n))
            after = ar.current_subagent_id()
        events = list(run.events)

        assert "r-sub-1" == after
        assert [("r-sub-1", "r-sub-1")] * 3 == [
            ("r-sub-1", e.parent_subagent_run_id)
            for e in events
            if isinstance(e, ev.SubagentStartedEvent) and e.name == "child"
        ]
        owners = {
            e.delta: set()  # type: ignore[var-annotated]
            for e in events
            if isinstance(e, ev.TextMessageContentEvent)
        }
        for e in events:
            if isinstance(e, ev.TextMessageContentEvent):
                owners[e.delta].add(e.subagent_run_id)
        assert {"child 1": {"r-sub-2"}, "child 2": {"r-sub-3"}, "child 3": {"r-sub-4"}} == owners
        assert_valid(events)

    async def test_taskgroup_failure_errors_the_failing_child_and_cancels_the_rest(self) -> None:
        """In a failing TaskGroup the child errors, its siblings end cancelled, the run errors."""
        release = asyncio.Event()

        @ar.subagent("child")
        async def child(n: int) -> None:
            if n == 2:
                await asyncio.sleep(0)
                raise ValueError("child 2 failed")
            await release.wait()

        run = ar.Run(make_input(run_id="r"))
        with pytest.raises(ExceptionGroup):  # noqa: PT012
            async with run, ar.subagent("parent"), asyncio.TaskGroup() as group:
                for n in (1, 2, 3):
                    group.create_task(child(n))
        events = list(run.events)

        assert {
            ("r-sub-2", "cancelled"),
            ("r-sub-3", "ValueError"),
            ("r-sub-4", "cancelled"),
            ("r-sub-1", "ExceptionGroup"),
        } == {(e.subagent_run_id, e.code) for e in events if isinstance(e, ev.SubagentErrorEvent)}
        assert ev.EventType.RUN_ERROR == events[-1].TYPE
        assert_valid(events)

    async def test_cancelling_one_sibling_leaves_the_others(self) -> None:
        """Cancelling one child task ends only that child, as cancelled."""
        gate = asyncio.Event()

        @ar.subagent("child")
        async def child(n: int) -> int:
            await gate.wait()
            ar.say(f"child {n}")
            return n

        async with ar.Run(make_input(run_id="r")) as run:
            tasks = [asyncio.create_task(child(n)) for n in range(3)]
            await asyncio.sleep(0)
            tasks[1].cancel()
            gate.set()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        events = list(run.events)

        assert 0 == results[0]
        assert isinstance(results[1], asyncio.CancelledError)
        assert 2 == results[2]
        assert [("r-sub-2", "cancelled")] == [
            (e.subagent_run_id, e.code) for e in events if isinstance(e, ev.SubagentErrorEvent)
        ]
        assert_valid(events)


class TestConcurrentHandles:
    async def test_interleaved_streaming_messages_stay_apart(self) -> None:
        """Messages streamed from concurrent subagents interleave but each keeps its own owner."""

        @ar.subagent("writer")
        async def writer(n: int) -> None:
            with ar.message() as handle:
                for piece in range(5):
                    await asyncio.sleep(0)
                    handle.write(f"{n}:{piece}")

        async with ar.Run(make_input(run_id="r")) as run:
            await asyncio.gather(*(writer(n) for n in range(4)))
        events = list(run.events)

        contents = [e for e in events if isinstance(e, ev.TextMessageContentEvent)]
        first_owner = {}
        for e in contents:
            first_owner.setdefault(e.delta.split(":")[0], e.subagent_run_id)
        assert all(first_owner[e.delta.split(":")[0]] == e.subagent_run_id for e in contents)
        assert 4 == len(set(first_owner.values()))
        assert [e.delta for e in contents] != sorted(e.delta for e in contents)
        assert_valid(events)

    async def test_task_started_in_a_step_keeps_the_step(self) -> None:
        """A task created inside a step sees that step and its subagent."""
        seen: list[tuple[str | None, str | None]] = []

        async def look() -> None:
            await asyncio.sleep(0)
            seen.append((ar.current_subagent_id(), ar.current_step()))

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s"):
                async with ar.step("plan"):
                    await asyncio.gather(look(), look())
                await asyncio.create_task(look())

        assert [("r-sub-1", "plan"), ("r-sub-1", "plan"), ("r-sub-1", None)] == seen
        assert_valid(list(run.events))
