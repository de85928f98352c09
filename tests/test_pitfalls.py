"""
The edge cases of ``shared/reference/ambient-pitfalls.md`` section 3, one test (or more) each.

Every docstring starts with the case's number. Vocabulary: the reference's
``current()`` is `ambient_runs.current_subagent_id` (and ``current_step``);
``run`` is `ambient_runs.Run`. Each test asserts on the emitted event stream.
Where the design deliberately differs from the reference's wording, the test
pins what the library does and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import logging
import random
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette.concurrency import iterate_in_threadpool
from support.events import body, said
from support.kinds import KINDS, consume, raising

import ambient_runs as ar
from ambient_runs import _decorators, _scopes
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input


def owners_of(events: Any) -> dict[str, set[str | None]]:
    """Map each said text to the set of owners it was said under."""
    found: dict[str, set[str | None]] = {}
    for text, owner in said(events):
        found.setdefault(text, set()).add(owner)
    return found


def started(events: Any) -> list[ev.SubagentStartedEvent]:
    """Return every SUBAGENT_STARTED."""
    return [e for e in events if isinstance(e, ev.SubagentStartedEvent)]


def library_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Return what the ambient_runs logger logged."""
    return [r for r in caplog.records if r.name.startswith("ambient_runs")]


class TestConcurrency:
    async def test_create_task_siblings(self) -> None:
        """Pitfall 1: create_task children each tag their own events; the parent's carry none."""

        @ar.subagent("child")
        async def child(n: int) -> None:
            for i in range(3):
                ar.say(f"child {n}.{i}")
                await asyncio.sleep(0)

        async with ar.Run(make_input(run_id="r")) as run:
            first = asyncio.create_task(child(1))
            second = asyncio.create_task(child(2))
            for i in range(3):
                await asyncio.sleep(0)
                ar.say(f"parent during {i}")
            await asyncio.gather(first, second)
            ar.say("parent after")
        events = list(run.events)

        assert {
            **{f"child 1.{i}": {"r-sub-1"} for i in range(3)},
            **{f"child 2.{i}": {"r-sub-2"} for i in range(3)},
            **{f"parent during {i}": {None} for i in range(3)},
            "parent after": {None},
        } == owners_of(events)
        texts = [text for text, _ in said(events)]
        assert texts.index("child 2.0") < texts.index("child 1.1")  # really interleaved
        assert texts.index("parent during 0") < texts.index("child 1.2")
        assert_valid(events)

    @pytest.mark.parametrize("how", ["gather", "taskgroup"])
    async def test_gather_and_taskgroup_siblings(self, how: str) -> None:
        """Pitfall 2: gather/TaskGroup siblings nest under the parent, never each other."""

        @ar.subagent("child")
        async def child(n: int) -> None:
            await asyncio.sleep(0)

            @ar.subagent("grandchild")
            async def grandchild() -> None:
                await asyncio.sleep(0)
                ar.say(f"grandchild of {n}")

            await grandchild()

        async with ar.Run(make_input(run_id="r")) as run:
            async with ar.subagent("parent"):
                if how == "gather":
                    await asyncio.gather(child(1), child(2))
                else:
                    async with asyncio.TaskGroup() as group:
                        group.create_task(child(1))
                        group.create_task(child(2))
                after = ar.current_subagent_id()
            ar.say("top")
        events = list(run.events)

        parents = {e.subagent_run_id: (e.name, e.parent_subagent_run_id) for e in started(events)}
        assert "r-sub-1" == after
        assert [("child", "r-sub-1"), ("child", "r-sub-1")] == [
            parents[sid] for sid in ("r-sub-2", "r-sub-3")
        ]
        assert {("grandchild", "r-sub-2"), ("grandchild", "r-sub-3")} == {
            parents[sid] for sid in ("r-sub-4", "r-sub-5")
        }
        assert {"grandchild of 1", "grandchild of 2", "top"} == set(owners_of(events))
        assert {None} == owners_of(events)["top"]
        assert_valid(events)

    async def test_created_under_a_awaited_under_b(self) -> None:
        """Pitfall 3: created under A, awaited under B: B wins; create_task binds at creation."""

        @ar.subagent("work")
        async def work() -> str | None:
            return ar.current_subagent_id()

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("A") as a:
                pending = work()
                bound_now = asyncio.create_task(work())
            with ar.subagent("B") as b:
                awaited = await pending
            tasked = await bound_now
        parents = {e.subagent_run_id: e.parent_subagent_run_id for e in started(run.events)}

        assert b.id == parents[awaited or ""]
        assert a.id == parents[tasked or ""]
        assert_valid(list(run.events))

    async def test_fire_and_forget_outlives_its_parent(self) -> None:
        """Pitfall 4: a task outliving its parent stays attributed to it; nothing reopens."""
        go = asyncio.Event()

        async def straggler() -> None:
            await go.wait()
            ar.say("late")

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("parent"):
                task = asyncio.create_task(straggler())
            ar.say("parent closed")
            go.set()
            await task

        assert [("parent closed", None), ("late", "r-sub-1")] == said(run.events)
        assert 1 == len(started(run.events))
        assert [("SUBAGENT_FINISHED", "r-sub-1")] == [
            (e["type"], e["subagentRunId"]) for e in body(run) if e["type"] == "SUBAGENT_FINISHED"
        ]
        assert_valid(list(run.events))

    @pytest.mark.parametrize("seed", range(20))
    async def test_nested_fan_out(self, seed: int) -> None:
        """Pitfall 5: 100 tasks x 3 levels, randomly interleaved, build the sequential tree."""

        async def level(path: str, depth: int, rng: random.Random) -> None:
            async with ar.subagent(path):
                for _ in range(rng.randrange(3)):
                    await asyncio.sleep(0)
                ar.say(path)
                if depth < 3:
                    await level(f"{path}/{depth + 1}", depth + 1, rng)

        async def fan_out(concurrent: bool) -> list[ev.BaseEvent]:
            async with ar.Run(make_input(run_id="r")) as run:
                if concurrent:
                    await asyncio.gather(
                        *(level(f"t{i}", 1, random.Random(seed * 1000 + i)) for i in range(100))
                    )
                else:
                    for i in range(100):
                        await level(f"t{i}", 1, random.Random(0))
            return list(run.events)

        def tree(events: list[ev.BaseEvent]) -> dict[str, Any]:
            names = {e.subagent_run_id: e.name for e in started(events)}
            return {
                "parents": {
                    e.name: names.get(e.parent_subagent_run_id or "") for e in started(events)
                },
                "said": {
                    text: {names[o or ""] for o in owners}
                    for text, owners in owners_of(events).items()
                },
            }

        concurrent = await fan_out(concurrent=True)

        assert tree(await fan_out(concurrent=False)) == tree(concurrent)
        assert 300 == len(started(concurrent))
        assert_valid(concurrent)


class TestGenerators:
    async def test_sync_generator_scope_stays_in_the_body(self) -> None:
        """Pitfall 6: a sync generator's body is scoped; the consumer keeps its own scope."""

        @ar.subagent("producer")
        def produce() -> Generator[int, None, None]:
            for n in range(3):
                ar.say(f"produced {n}")
                yield n

        consumer_view: list[str | None] = []
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("consumer") as consumer:
                for n in produce():
                    consumer_view.append(ar.current_subagent_id())
                    ar.say(f"consumed {n}")

        assert [consumer.id] * 3 == consumer_view
        assert {
            **{f"produced {n}": {"r-sub-2"} for n in range(3)},
            **{f"consumed {n}": {"r-sub-1"} for n in range(3)},
        } == owners_of(run.events)
        assert "r-sub-1" == started(run.events)[1].parent_subagent_run_id
        assert_valid(list(run.events))

    @pytest.mark.parametrize("driver", ["async for", "create_task per item"])
    async def test_async_generator_scope_stays_in_the_body(self, driver: str) -> None:
        """Pitfall 7: the same for async generators, also driven by create_task(anext(g))."""

        @ar.subagent("producer")
        async def produce() -> AsyncGenerator[int, None]:
            for n in range(3):
                await asyncio.sleep(0)
                ar.say(f"produced {n}")
                yield n

        consumer_view: list[str | None] = []
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("consumer"):
                gen = produce()
                if driver == "async for":
                    async for n in gen:
                        consumer_view.append(ar.current_subagent_id())
                        ar.say(f"consumed {n}")
                else:
                    while True:
                        try:
                            n = await asyncio.create_task(anext(gen))  # type: ignore[arg-type]
                        except StopAsyncIteration:
                            break
                        consumer_view.append(ar.current_subagent_id())
                        ar.say(f"consumed {n}")

        assert ["r-sub-1"] * 3 == consumer_view
        assert {
            **{f"produced {n}": {"r-sub-2"} for n in range(3)},
            **{f"consumed {n}": {"r-sub-1"} for n in range(3)},
        } == owners_of(run.events)
        assert 2 == sum(e["type"] == "SUBAGENT_FINISHED" for e in body(run))
        assert_valid(list(run.events))

    async def test_break_without_aclosing(self, caplog: pytest.LogCaptureFixture) -> None:
        """Pitfall 8: break without aclosing: consumer events untagged; finalization is silent."""
        caplog.set_level(logging.DEBUG)

        @ar.subagent("stream")
        async def stream() -> AsyncGenerator[int, None]:
            try:
                for n in range(100):
                    ar.say(f"item {n}")
                    yield n
            finally:
                ar.say("stream cleanup")

        async with ar.Run(make_input(run_id="r")) as run:
            async for n in stream():
                if n == 1:
                    break
            ar.say("kept emitting")
            in_consumer = ar.current_subagent_id()
            gc.collect()
            for _ in range(5):
                await asyncio.sleep(0)
            ar.say("still mine")
        events = list(run.events)

        assert None is in_consumer
        assert [
            ("item 0", "r-sub-1"),
            ("item 1", "r-sub-1"),
            ("kept emitting", None),
            ("stream cleanup", "r-sub-1"),
            ("still mine", None),
        ] == said(events)
        assert [] == [r for r in library_logs(caplog) if r.levelno > logging.DEBUG]
        assert 1 == sum(isinstance(e, ev.SubagentFinishedEvent) for e in events)
        assert_valid(events)

    @pytest.mark.parametrize("kind", ["generator", "async_generator"])
    async def test_abandoned_at_the_end_of_the_run(
        self, kind: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Pitfall 8: one abandoned as the run ends is finalized later with no error or log."""
        caplog.set_level(logging.DEBUG)

        @ar.subagent("stream")
        def sync_stream() -> Generator[int, None, None]:
            try:
                yield 1
                yield 2
            finally:
                ar.say("cleanup")

        @ar.subagent("stream")
        async def async_stream() -> AsyncGenerator[int, None]:
            try:
                yield 1
                yield 2
            finally:
                ar.say("cleanup")

        kept: list[Any] = []
        with pytest.warns(ar.LeftOpenWarning):  # noqa: PT031
            async with ar.Run(make_input(run_id="r")) as run:
                if kind == "generator":
                    kept.append(sync_stream())
                    next(kept[0])  # still referenced when the run ends
                else:
                    async for _ in async_stream():
                        break
        kept.clear()
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)

        assert ["SUBAGENT_STARTED", "SUBAGENT_FINISHED"] == [e["type"] for e in body(run)]
        assert [] == [r for r in caplog.records if r.levelno > logging.DEBUG]
        assert_valid(list(run.events))

    async def test_decorated_generators_closed_out_of_order(self) -> None:
        """Pitfall 9: decorated generators closed out of order leave the outer scope current."""

        @ar.subagent("gen")
        async def gen(name: str) -> AsyncGenerator[str, None]:
            ar.say(f"{name} open")
            yield name
            yield name

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("outer") as outer:
                a, b = gen("A"), gen("B")
                await anext(a)
                await anext(b)
                await a.aclose()
                await b.aclose()
                after = ar.current_subagent_id()
                ar.say("outer again")

        assert outer.id == after
        assert ("outer again", "r-sub-1") == said(run.events)[-1]
        assert_valid(list(run.events))

    async def test_scopes_in_generator_bodies_closed_out_of_order(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Pitfall 9: scopes held across yields, closed A then B, never resurrect A."""
        caplog.set_level(logging.DEBUG)

        async def gen(name: str) -> AsyncGenerator[str, None]:
            async with ar.subagent(name):
                yield name
                yield name

        async with ar.Run(make_input(run_id="r")) as run:
            a, b = gen("A"), gen("B")
            await anext(a)
            await anext(b)
            await a.aclose()
            await b.aclose()
            after = ar.current_subagent_id()
            ar.say("outer again")
        events = list(run.events)

        assert None is after
        assert ("outer again", None) == said(events)[-1]
        assert [] == [r for r in library_logs(caplog) if r.levelno > logging.DEBUG]
        assert_valid(events)

    async def test_created_in_one_task_iterated_in_another(self) -> None:
        """Pitfall 10: a generator iterated in another task nests where it was created."""

        @ar.subagent("body")
        async def body_stream() -> AsyncGenerator[str, None]:
            ar.say("chunk")
            yield "chunk"

        def endpoint() -> AsyncGenerator[str, None]:
            with ar.subagent("endpoint"):
                return body_stream()

        async def runner(stream: AsyncGenerator[str, None]) -> list[str]:
            return [chunk async for chunk in stream]

        async with ar.Run(make_input(run_id="r")) as run:
            stream = endpoint()
            chunks = await asyncio.create_task(runner(stream))

        assert ["chunk"] == chunks
        assert [("chunk", "r-sub-2")] == said(run.events)
        assert [("endpoint", None), ("body", "r-sub-1")] == [
            (e.name, e.parent_subagent_run_id) for e in started(run.events)
        ]
        assert_valid(list(run.events))

    async def test_sync_generator_through_a_threadpool(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Pitfall 11: a generator driven from a threadpool sees its scope on every chunk."""
        caplog.set_level(logging.DEBUG)

        @ar.subagent("body")
        def chunks() -> Iterator[str]:
            for n in range(4):
                ar.say(f"chunk {n} in {ar.current_subagent_id()}")
                yield f"chunk {n}"

        async with ar.Run(make_input(run_id="r")) as run:
            got = [chunk async for chunk in iterate_in_threadpool(chunks())]
            threaded = chunks()
            sentinel = object()
            while await asyncio.to_thread(next, threaded, sentinel) is not sentinel:
                pass

        assert [f"chunk {n}" for n in range(4)] == got
        assert [(f"chunk {n} in r-sub-1", "r-sub-1") for n in range(4)] + [
            (f"chunk {n} in r-sub-2", "r-sub-2") for n in range(4)
        ] == said(run.events)
        assert 2 == sum(e["type"] == "SUBAGENT_FINISHED" for e in body(run))
        assert [] == library_logs(caplog)
        assert_valid(list(run.events))

    async def test_generator_protocol_fidelity(self) -> None:
        """Pitfall 12: wrapped generators keep the whole generator protocol and their kind."""
        import inspect

        @ar.subagent("sync")
        def sync_gen() -> Generator[int, int, str]:
            got = yield 1
            try:
                yield got * 10
            except ValueError:
                yield -1
            return "returned"

        @ar.subagent("async")
        async def async_gen() -> AsyncGenerator[int, int]:
            got = yield 1
            try:
                yield got * 10
            except ValueError:
                yield -1
            yield 99

        async with ar.Run(make_input(run_id="r")) as run:
            g = sync_gen()
            sync_steps = [next(g), g.send(4), g.throw(ValueError)]
            with pytest.raises(StopIteration) as stop:
                next(g)
            closing = sync_gen()
            next(closing)
            closing.close()
            a = async_gen()
            async_steps = [await a.asend(None), await a.asend(4), await a.athrow(ValueError)]
            await a.aclose()

        assert (inspect.isgenerator(g), inspect.isasyncgen(a)) == (True, True)
        assert [1, 40, -1] == sync_steps
        assert "returned" == stop.value.value
        assert [1, 40, -1] == async_steps
        assert [
            ("r-sub-1", "returned"),
            ("r-sub-2", None),
            ("r-sub-3", None),
        ] == [
            (e.subagent_run_id, e.result)
            for e in run.events
            if isinstance(e, ev.SubagentFinishedEvent)
        ]
        assert_valid(list(run.events))

    async def test_never_consumed_generator(self) -> None:
        """Pitfall 13: a never-consumed scoped generator opens nothing; the run ends cleanly."""

        @ar.subagent("unused")
        def unused() -> Generator[int, None, None]:
            ar.say("never")
            yield 1

        @ar.subagent("unused")
        async def unused_async() -> AsyncGenerator[int, None]:
            ar.say("never")
            yield 1

        async with ar.Run(make_input(run_id="r")) as run:
            pending = [unused(), unused_async()]
            del pending
            gc.collect()

        assert [] == body(run)
        assert ev.EventType.RUN_FINISHED == run.events[-1].TYPE

    async def test_started_then_dropped_generator_is_closed_by_gc(self) -> None:
        """Pitfall 13: a started generator dropped unfinished is finished when collected."""

        @ar.subagent("dropped")
        def dropped() -> Generator[int, None, None]:
            yield 1
            yield 2

        async with ar.Run(make_input(run_id="r")) as run:
            gen = dropped()
            next(gen)
            del gen
            gc.collect()
            ar.say("after")

        assert ["SUBAGENT_STARTED", "SUBAGENT_FINISHED"] == [e["type"] for e in body(run)][:2]
        assert_valid(list(run.events))


PATHS = ["to_thread", "run_in_executor", "submit", "Thread", "wrap", "ContextThreadPoolExecutor"]


class TestThreads:
    @pytest.mark.parametrize("path", PATHS)
    async def test_documented_propagation(self, path: str) -> None:
        """Pitfall 14: to_thread and the helpers propagate; bare executors do not."""
        outcome: list[Any] = []

        def job() -> None:
            try:
                ar.say(path)
                outcome.append(ar.current_subagent_id())
            except ar.NoActiveRunError as exc:
                outcome.append(exc)

        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            if path == "to_thread":
                await asyncio.to_thread(job)
            elif path == "run_in_executor":
                await asyncio.get_running_loop().run_in_executor(None, job)
            elif path == "submit":
                with ThreadPoolExecutor(max_workers=1) as pool:
                    pool.submit(job).result()
            elif path == "ContextThreadPoolExecutor":
                with ar.ContextThreadPoolExecutor(max_workers=1) as pool:
                    pool.submit(job).result()
            else:
                worker = (
                    ar.Thread(target=job)
                    if path == "Thread"
                    else threading.Thread(target=ar.wrap(job))
                )
                worker.start()
                worker.join()

        if path in ("run_in_executor", "submit"):
            assert isinstance(outcome[0], ar.NoActiveRunError)
            assert [] == said(run.events)
        else:
            assert ["r-sub-1"] == outcome
            assert [(path, "r-sub-1")] == said(run.events)

    async def test_bare_thread_does_not_propagate(self) -> None:
        """Pitfall 14: a bare threading.Thread starts with no run at all."""
        outcome: list[BaseException] = []

        def job() -> None:
            try:
                ar.say("lost")
            except ar.NoActiveRunError as exc:
                outcome.append(exc)

        async with ar.Run(make_input()) as run, ar.subagent("s"):
            worker = threading.Thread(target=job)
            worker.start()
            worker.join()

        assert 1 == len(outcome)
        assert [] == said(run.events)

    async def test_executor_reuse_is_not_sticky(self) -> None:
        """Pitfall 15: a helper job carries its submitter's subagent; reuse is not sticky."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.ContextThreadPoolExecutor(max_workers=1) as pool:
                with ar.subagent("first"):
                    pool.submit(ar.say, "job 1").result()
                pool.submit(ar.say, "job 2").result()
                with ar.subagent("second"):
                    pool.submit(ar.say, "job 3").result()

        assert [("job 1", "r-sub-1"), ("job 2", None), ("job 3", "r-sub-2")] == said(run.events)
        assert_valid(list(run.events))

    async def test_explicit_context_like_the_helper(self) -> None:
        """Pitfall 16: a Thread given copy_context().run (3.14's context=) matches the helper."""
        results: dict[str, str | None] = {}

        def job(key: str) -> None:
            ar.say(key)
            results[key] = ar.current_subagent_id()

        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            explicit = threading.Thread(
                target=contextvars.copy_context().run, args=(job, "explicit")
            )
            helper = ar.Thread(target=job, args=("helper",))
            for worker in (explicit, helper):
                worker.start()
                worker.join()

        assert {"explicit": "r-sub-1", "helper": "r-sub-1"} == results
        assert [("explicit", "r-sub-1"), ("helper", "r-sub-1")] == said(run.events)

    async def test_job_starting_after_its_scope_ended(self) -> None:
        """Pitfall 17: a job starting after its scope ended is still attributed to it."""
        gate = threading.Event()

        def job() -> None:
            gate.wait()
            ar.say("late job")

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.ContextThreadPoolExecutor(max_workers=1) as pool:
                with ar.subagent("short-lived"):
                    future = pool.submit(job)
                gate.set()
                await asyncio.wrap_future(future)

        assert ["SUBAGENT_STARTED", "SUBAGENT_FINISHED"] == [e["type"] for e in body(run)][:2]
        assert [("late job", "r-sub-1")] == said(run.events)
        assert_valid(list(run.events))


class TestCrossContextExit:
    async def test_entered_in_one_task_exited_in_another(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Pitfall 18: entered in task 1, exited in task 2: ends once, quietly, one DEBUG line."""
        caplog.set_level(logging.DEBUG)
        handle = ar.subagent("streamed")
        entered = asyncio.Event()

        async def task_one() -> None:
            handle.__enter__()
            ar.say("in task 1")
            entered.set()

        async def task_two() -> tuple[str | None, str | None]:
            await entered.wait()
            before = ar.current_subagent_id()
            handle.__exit__(None, None, None)
            return before, ar.current_subagent_id()

        async with ar.Run(make_input(run_id="r")) as run:
            one = asyncio.create_task(task_one())
            views = await asyncio.create_task(task_two())
            await one
            ar.say("parent")

        assert (None, None) == views
        assert 1 == sum(e["type"] == "SUBAGENT_FINISHED" for e in body(run))
        assert [("in task 1", "r-sub-1"), ("parent", None)] == said(run.events)
        logs = library_logs(caplog)
        assert [logging.DEBUG] == [r.levelno for r in logs]
        assert_valid(list(run.events))

    async def test_end_from_a_thread_or_callback(self) -> None:
        """Pitfall 19: end() from a thread or callback is sent and touches no contextvar."""
        seen_in_thread: list[Any] = []
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s") as sub:
                message = ar.message()
                message.write("partial")

                def from_thread() -> None:
                    message.end()
                    seen_in_thread.append(_scopes.current())

                worker = threading.Thread(target=from_thread)
                worker.start()
                worker.join()
                call = ar.tool_call("slow")
                done = asyncio.Event()

                def timeout() -> None:
                    call.end()
                    done.set()

                asyncio.get_running_loop().call_soon(timeout)
                await done.wait()
                inside = ar.current_subagent_id()
            after = ar.current_subagent_id()

        assert [None] == seen_in_thread
        assert (sub.id, None) == (inside, after)
        assert [
            ("TEXT_MESSAGE_END", "r-sub-1"),
            ("TOOL_CALL_START", "r-sub-1"),
            ("TOOL_CALL_END", "r-sub-1"),
            ("SUBAGENT_FINISHED", "r-sub-1"),
        ] == [(e["type"], e["subagentRunId"]) for e in body(run)[-4:]]
        assert_valid(list(run.events))

    async def test_reentry_and_double_end(self) -> None:
        """Pitfall 20: entering or ending a handle twice is idempotent and warns once."""
        async with ar.Run(make_input(run_id="r")) as run:
            sub = ar.subagent("s")
            with sub:
                with pytest.warns(ar.HandleWarning) as sub_warnings, sub:
                    pass
                step = ar.step("plan")
                with step:
                    with pytest.warns(ar.HandleWarning) as step_warnings, step:
                        inner_step = ar.current_step()
                    still = ar.current_step()
                message = ar.message()
                message.end()
                with pytest.warns(ar.HandleWarning) as end_warnings:
                    message.end()

        assert (1, 1, 1) == (len(sub_warnings), len(step_warnings), len(end_warnings))
        assert ("plan", "plan") == (inner_step, still)
        kinds = [e["type"] for e in body(run)]
        assert (1, 1, 1, 1, 1) == (
            kinds.count("SUBAGENT_STARTED"),
            kinds.count("SUBAGENT_FINISHED"),
            kinds.count("STEP_STARTED"),
            kinds.count("STEP_FINISHED"),
            kinds.count("TEXT_MESSAGE_END"),
        )
        assert_valid(list(run.events))


class TestExceptions:
    @pytest.mark.parametrize("kind", KINDS)
    async def test_value_error_in_every_kind(self, kind: str) -> None:
        """Pitfall 21: a ValueError from any kind errors the scope and propagates as is."""
        boom = ValueError("broken")

        fn = ar.subagent("s")(raising(kind, boom))
        async with ar.Run(make_input(run_id="r"), expose_errors=True) as run:
            with pytest.raises(ValueError, match="broken") as caught:
                await consume(kind, fn)

        assert boom is caught.value
        assert boom.__traceback__ is caught.value.__traceback__
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "r-sub-1",
            "message": "broken",
            "code": "ValueError",
        } == body(run)[-1]
        assert_valid(list(run.events))

    async def test_exception_classes_policy(self) -> None:
        """Pitfall 22: cancellation is code cancelled; GeneratorExit and exits are no errors."""
        entered = asyncio.Event()

        @ar.subagent("cancelled")
        async def cancelled() -> None:
            entered.set()
            await asyncio.Event().wait()

        @ar.subagent("closed")
        def closed() -> Generator[int, None, None]:
            yield 1
            yield 2

        async with ar.Run(make_input(run_id="r")) as run:
            task = asyncio.create_task(cancelled())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gen = closed()
            next(gen)
            gen.close()
            for exit_exc in (SystemExit(0), KeyboardInterrupt()):
                with pytest.raises(type(exit_exc)), ar.subagent("exiting"):
                    raise exit_exc
        endings = [e for e in body(run) if e["type"] in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR")]

        assert [
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": "r-sub-1",
                "message": "cancelled",
                "code": "cancelled",
            },
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-2"},
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-3",
                "metadata": {"ambient_runs": {"exit": "SystemExit"}},
            },
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r-sub-4",
                "metadata": {"ambient_runs": {"exit": "KeyboardInterrupt"}},
            },
        ] == endings
        assert_valid(list(run.events))

    async def test_library_failures_never_change_control_flow(self) -> None:
        """Pitfall 23: a sink failing on the error path never replaces the user's exception."""
        delivered: list[ev.BaseEvent] = []

        def sink(event: ev.BaseEvent) -> None:
            if isinstance(event, ev.SubagentErrorEvent | ev.RunErrorEvent):
                raise ConnectionError("client went away")
            delivered.append(event)

        boom = ValueError("user error")

        @ar.subagent("s")
        async def agent() -> None:
            raise boom

        with pytest.raises(ValueError, match="user error") as caught:
            async with ar.Run(make_input(), sink=sink):
                await agent()

        assert boom is caught.value
        assert ev.EventType.SUBAGENT_STARTED == delivered[-1].TYPE


class TestLifecycle:
    async def test_scopes_are_collectable(self) -> None:
        """Pitfall 24: after 10k calls captured by call_later, every scope is collectable."""
        refs: list[weakref.ref[ar.Subagent]] = []
        fired = 0

        def tick() -> None:
            nonlocal fired
            fired += 1

        @ar.subagent("tiny")
        async def tiny() -> None:
            me = ar.current_subagent()
            assert me is not None
            refs.append(weakref.ref(me))
            asyncio.get_running_loop().call_later(0, tick)

        async with ar.Run(make_input(run_id="r")) as run:
            for _ in range(10_000):
                await tiny()
            while fired < 10_000:  # noqa: ASYNC110 - the timers fire on the next loop turns
                await asyncio.sleep(0)
            gc.collect()
            alive = sum(ref() is not None for ref in refs)

        assert 0 == alive
        assert 20_000 == len(body(run))

    def test_no_run_fast_path(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Pitfall 25: with no run, a decorated call costs one contextvar read."""
        reads = 0
        real = _scopes.current

        def counting() -> Any:
            nonlocal reads
            reads += 1
            return real()

        @ar.subagent("x")
        def plain(n: int) -> int:
            return n + 1

        @ar.step("y")
        def stepped(n: int) -> int:
            return n + 2

        # The wrappers read the frame through their module's alias of `_scopes.current`.
        monkeypatch.setattr(_decorators, "_current", counting)

        assert (2, 3) == (plain(1), stepped(1))
        assert 2 == reads

    async def test_say_does_not_walk_the_context(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Pitfall 26: say() and scopes never copy or scan the Context (structural part)."""
        unrelated = [contextvars.ContextVar(f"unrelated_{n}") for n in range(200)]
        for n, var in enumerate(unrelated):
            var.set(n)

        def no_copy() -> contextvars.Context:
            raise AssertionError("copy_context called on the hot path")

        async with ar.Run(make_input(run_id="r")) as run:
            monkeypatch.setattr(contextvars, "copy_context", no_copy)
            with ar.subagent("s"):
                ar.say("cheap")
            monkeypatch.undo()

        assert [("cheap", "r-sub-1")] == said(run.events)

    @pytest.mark.parametrize("kind", KINDS)
    async def test_own_contextvar_writes_stay_visible(self, kind: str) -> None:
        """Pitfall 27: a decorated callable's own ContextVar.set() reaches its caller."""
        mine: contextvars.ContextVar[str] = contextvars.ContextVar("mine", default="unset")

        def function() -> None:
            mine.set("set by function")

        async def coroutine() -> None:
            mine.set("set by coroutine")

        def generator() -> Generator[None, None, None]:
            mine.set("set by generator")
            yield

        async def async_generator() -> AsyncGenerator[None, None]:
            mine.set("set by async_generator")
            yield

        fn = ar.subagent("s")(locals()[kind])
        async with ar.Run(make_input()) as run:
            await consume(kind, fn)
            seen = mine.get()

        assert f"set by {kind}" == seen
        assert ["SUBAGENT_STARTED", "SUBAGENT_FINISHED"] == [e["type"] for e in body(run)]


class TestApiEdges:
    async def test_three_faces(self) -> None:
        """Pitfall 28: subagent("x") works as a decorator, as ``with`` and as ``async with``."""

        @ar.subagent("x")
        def decorated() -> None:
            ar.say("decorator")

        async with ar.Run(make_input(run_id="r")) as run:
            decorated()
            with ar.subagent("x"):
                ar.say("with")
            async with ar.subagent("x"):
                ar.say("async with")

        assert [("decorator", "r-sub-1"), ("with", "r-sub-2"), ("async with", "r-sub-3")] == (
            said(run.events)
        )
        assert_valid(list(run.events))

    async def test_below_contextmanager(self) -> None:
        """Pitfall 28: @contextmanager over @subagent scopes the manager's code, not the block."""

        @contextlib.contextmanager
        @ar.subagent("cm")
        def managed() -> Iterator[str]:
            ar.say("enter")
            yield "value"
            ar.say("exit")

        async with ar.Run(make_input(run_id="r")) as run:
            with managed() as value:
                ar.say("block")

        assert "value" == value
        assert [("enter", "r-sub-1"), ("block", None), ("exit", "r-sub-1")] == said(run.events)
        assert_valid(list(run.events))

    @pytest.mark.parametrize("flavour", ["sync", "async"])
    async def test_above_contextmanager(self, flavour: str) -> None:
        """Pitfall 28: @subagent over @(async)contextmanager scopes the whole with statement."""
        if flavour == "sync":

            @ar.subagent("cm")
            @contextlib.contextmanager
            def managed() -> Iterator[str]:
                ar.say("enter")
                yield "value"
                ar.say("exit")

        else:

            @ar.subagent("cm")  # type: ignore[misc]
            @contextlib.asynccontextmanager
            async def managed() -> AsyncIterator[str]:
                ar.say("enter")
                yield "value"
                ar.say("exit")

        async with ar.Run(make_input(run_id="r")) as run:
            if flavour == "sync":
                with managed() as value:
                    ar.say("block")
            else:
                async with managed() as value:  # type: ignore[attr-defined]
                    ar.say("block")
            ar.say("after")

        assert "value" == value
        assert [
            ("enter", "r-sub-1"),
            ("block", "r-sub-1"),
            ("exit", "r-sub-1"),
            ("after", None),
        ] == said(run.events)
        assert_valid(list(run.events))

    async def test_above_contextmanager_error_in_block(self) -> None:
        """Pitfall 28: an error in such a with block errors the scope and propagates."""

        @ar.subagent("cm")
        @contextlib.contextmanager
        def managed() -> Iterator[None]:
            yield

        boom = RuntimeError("in block")
        async with ar.Run(make_input(run_id="r")) as run:
            with pytest.raises(RuntimeError) as caught, managed():
                raise boom

        assert boom is caught.value
        assert "SUBAGENT_ERROR" == body(run)[-1]["type"]

    def test_outside_a_run_raises(self) -> None:
        """Pitfall 29 (deliberately different): say() outside a run raises NoActiveRunError."""
        with pytest.raises(ar.NoActiveRunError, match=r"ambient_runs\.Run\(input\)"):
            ar.say("nobody listens")

    async def test_explicit_handle_overrides_ambient(self) -> None:
        """Pitfall 30: an explicit handle attributes from callbacks, threads, other scopes."""
        async with ar.Run(make_input(run_id="r")) as run:
            researcher = ar.subagent("researcher").start()

            def foreign() -> None:  # a bare thread: empty Context, like a gevent greenlet
                researcher.say("via handle")
                ar.use(researcher)(ar.say, "via use")

            worker = threading.Thread(target=foreign)
            worker.start()
            worker.join()
            with ar.subagent("other"):
                researcher.say("handle beats ambient")
                ar.say("ambient")
            done = asyncio.Event()
            asyncio.get_running_loop().call_soon(
                functools.partial(ar.use(researcher), lambda: (ar.say("callback"), done.set()))
            )
            await done.wait()
            researcher.finish()

        assert [
            ("via handle", "r-sub-1"),
            ("via use", "r-sub-1"),
            ("handle beats ambient", "r-sub-1"),
            ("ambient", "r-sub-2"),
            ("callback", "r-sub-1"),
        ] == said(run.events)
        assert_valid(list(run.events))
