"""
Threads: what propagates by default, the one-call helpers, and emitting from many threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.events import said

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input


def report(text: str) -> str | None:
    """Say *text* where this runs and return the ambient subagent id."""
    ar.say(text)
    return ar.current_subagent_id()


def failing_say() -> BaseException | None:
    """Try say() and return what it raised."""
    try:
        ar.say("lost")
    except BaseException as exc:
        return exc
    return None


class TestDefaults:
    async def test_to_thread_propagates(self) -> None:
        """asyncio.to_thread copies the Context: the worker's say() is the subagent's."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            owner = await asyncio.to_thread(report, "from to_thread")

        assert "r-sub-1" == owner
        assert [("from to_thread", "r-sub-1")] == said(run.events)
        assert_valid(list(run.events))

    async def test_bare_run_in_executor_does_not_propagate(self) -> None:
        """loop.run_in_executor starts the worker empty: its say() raises NoActiveRunError."""
        async with ar.Run(make_input()) as run, ar.subagent("s"):
            error = await asyncio.get_running_loop().run_in_executor(None, failing_say)

        assert isinstance(error, ar.NoActiveRunError)
        assert [] == said(run.events)

    async def test_bare_executor_submit_does_not_propagate(self) -> None:
        """ThreadPoolExecutor.submit starts the worker empty: its say() raises NoActiveRunError."""
        async with ar.Run(make_input()) as run, ar.subagent("s"):
            with ThreadPoolExecutor(max_workers=1) as pool:
                error = pool.submit(failing_say).result()

        assert isinstance(error, ar.NoActiveRunError)
        assert [] == said(run.events)

    async def test_bare_thread_does_not_propagate(self) -> None:
        """threading.Thread starts empty: its say() raises NoActiveRunError."""
        errors: list[BaseException | None] = []
        async with ar.Run(make_input()) as run, ar.subagent("s"):
            thread = threading.Thread(target=lambda: errors.append(failing_say()))
            thread.start()
            thread.join()

        assert isinstance(errors[0], ar.NoActiveRunError)
        assert [] == said(run.events)


class TestHelpers:
    async def test_wrap(self) -> None:
        """wrap(fn) carries the subagent into a bare thread in one call."""
        owners: list[str | None] = []
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            target = ar.wrap(lambda: owners.append(report("wrapped")))
            thread = threading.Thread(target=target)
            thread.start()
            thread.join()

        assert ["r-sub-1"] == owners
        assert [("wrapped", "r-sub-1")] == said(run.events)

    async def test_thread(self) -> None:
        """ambient_runs.Thread runs its target in the Context of its creation."""
        owners: list[str | None] = []
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            thread = ar.Thread(target=lambda text: owners.append(report(text)), args=("thread",))
            thread.start()
            thread.join()

        assert ["r-sub-1"] == owners
        assert [("thread", "r-sub-1")] == said(run.events)

    async def test_context_thread_pool_executor(self) -> None:
        """ContextThreadPoolExecutor.submit and map run each job in the submitter's Context."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            with ar.ContextThreadPoolExecutor(max_workers=2) as pool:
                submitted = pool.submit(report, "submitted").result()
                mapped = list(pool.map(report, ["m1", "m2"]))

        assert ["r-sub-1"] * 3 == [submitted, *mapped]
        assert {("submitted", "r-sub-1"), ("m1", "r-sub-1"), ("m2", "r-sub-1")} == set(
            said(run.events)
        )
        assert_valid(list(run.events))

    async def test_run_in_executor(self) -> None:
        """ambient_runs.run_in_executor is loop.run_in_executor with the subagent carried over."""
        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            default = await ar.run_in_executor(None, report, "default pool")
            with ThreadPoolExecutor(max_workers=1) as pool:
                own = await ar.run_in_executor(pool, report, "own pool")

        assert ["r-sub-1", "r-sub-1"] == [default, own]
        assert [("default pool", "r-sub-1"), ("own pool", "r-sub-1")] == said(run.events)

    async def test_wrap_keeps_the_signature_and_result(self) -> None:
        """wrap() passes arguments through, returns the result, and exposes __wrapped__."""

        def add(a: int, b: int = 0) -> int:
            return a + b

        async with ar.Run(make_input()):
            wrapped = ar.wrap(add)

        assert 5 == wrapped(2, b=3)
        assert add is wrapped.__wrapped__  # type: ignore[attr-defined]


class TestWorkerReuse:
    async def test_reused_worker_carries_no_stale_scope(self) -> None:
        """A pool thread reused by another submitter has that submitter's scope."""
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.ContextThreadPoolExecutor(max_workers=1) as pool:
                with ar.subagent("a"):
                    first = pool.submit(report, "job a").result()
                second = pool.submit(report, "job top").result()
                with ar.subagent("b"):
                    third = pool.submit(report, "job b").result()
                idents = {pool.submit(threading.get_ident).result() for _ in range(3)}

        assert ["r-sub-1", None, "r-sub-2"] == [first, second, third]
        assert 1 == len(idents)
        assert [("job a", "r-sub-1"), ("job top", None), ("job b", "r-sub-2")] == said(run.events)
        assert_valid(list(run.events))

    async def test_reused_worker_outside_any_run_sees_no_run(self) -> None:
        """A job submitted after the run ended finds no run in the reused worker."""
        with ar.ContextThreadPoolExecutor(max_workers=1) as pool:
            async with ar.Run(make_input()):
                pool.submit(report, "inside").result()
            error = pool.submit(failing_say).result()

        assert isinstance(error, ar.NoActiveRunError)

    async def test_job_after_its_scope_ended_keeps_that_scope(self) -> None:
        """A job starting after its submitting scope ended is attributed to that scope."""
        gate = threading.Event()

        def job() -> str | None:
            gate.wait()
            return report("late job")

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.ContextThreadPoolExecutor(max_workers=1) as pool:
                with ar.subagent("short"):
                    future = pool.submit(job)
                ar.say("scope over")
                gate.set()
                owner = await asyncio.wrap_future(future)

        assert "r-sub-1" == owner
        assert [("scope over", None), ("late job", "r-sub-1")] == said(run.events)
        assert_valid(list(run.events))


class TestManyThreads:
    async def test_concurrent_emitters_give_a_valid_totally_ordered_stream(self) -> None:
        """Eight threads emitting at once: a valid stream, the sink never entered twice."""
        events: list[ev.BaseEvent] = []
        inside = threading.Lock()
        overlaps: list[ev.BaseEvent] = []

        def sink(event: ev.BaseEvent) -> None:
            if not inside.acquire(blocking=False):
                overlaps.append(event)
                return
            try:
                events.append(event)
            finally:
                inside.release()

        start = threading.Barrier(8)

        def worker(n: int) -> None:
            start.wait()
            with ar.subagent(f"t{n}"):
                for i in range(40):
                    ar.say(f"{n}.{i}")
                with ar.message() as handle:
                    for i in range(40):
                        handle.write(f"{n}:{i}")
                with ar.tool_call("x") as call:
                    call.args({"n": n})

        async with ar.Run(make_input(run_id="r"), sink=sink):
            threads = [ar.Thread(target=worker, args=(n,)) for n in range(8)]
            for thread in threads:
                thread.start()
            await asyncio.to_thread(lambda: [thread.join() for thread in threads])

        assert [] == overlaps
        assert 8 == sum(isinstance(e, ev.SubagentFinishedEvent) for e in events)
        assert_valid(events)
        for index, event in enumerate(events):
            if isinstance(event, ev.TextMessageContentEvent) and "." in event.delta:
                assert ev.EventType.TEXT_MESSAGE_START == events[index - 1].TYPE
                assert ev.EventType.TEXT_MESSAGE_END == events[index + 1].TYPE

    async def test_thread_attribution_under_contention(self) -> None:
        """Every thread's events carry its own subagent, never a neighbour's."""
        async with ar.Run(make_input(run_id="r")) as run:

            def worker(n: int) -> None:
                with ar.subagent(f"t{n}") as mine:
                    for i in range(25):
                        ar.say(f"{n}")
                        assert mine.id == ar.current_subagent_id(), i

            with ar.ContextThreadPoolExecutor(max_workers=4) as pool:
                list(pool.map(worker, range(8)))
        events = list(run.events)

        names = {
            e.subagent_run_id: e.name for e in events if isinstance(e, ev.SubagentStartedEvent)
        }
        assert all(names[owner or ""] == f"t{text}" for text, owner in said(events))
        assert_valid(events)


class TestExplicitContext:
    async def test_copy_context_run_behaves_like_the_helper(self) -> None:
        """A bare Thread given copy_context().run attributes like ambient_runs.Thread."""
        owners: dict[str, str | None] = {}

        def record(key: str) -> Callable[[], None]:
            return lambda: owners.__setitem__(key, report(key))

        async with ar.Run(make_input(run_id="r")) as run, ar.subagent("s"):
            context = contextvars.copy_context()
            explicit = threading.Thread(target=context.run, args=(record("explicit"),))
            helper = ar.Thread(target=record("helper"))
            for thread in (explicit, helper):
                thread.start()
                thread.join()

        assert {"explicit": "r-sub-1", "helper": "r-sub-1"} == owners
        assert {("explicit", "r-sub-1"), ("helper", "r-sub-1")} == set(said(run.events))

    @pytest.mark.parametrize("helper", ["wrap", "Thread"])
    async def test_helpers_copy_per_call(self, helper: str) -> None:
        """A helper-run job that changes the scope does not change it for the submitter."""
        seen: list[str | None] = []

        def enter_and_leave_open() -> None:
            ar.subagent("inner").__enter__()
            seen.append(ar.current_subagent_id())

        with pytest.warns(ar.LeftOpenWarning):  # noqa: PT031
            async with ar.Run(make_input(run_id="r")), ar.subagent("s"):
                if helper == "wrap":
                    thread = threading.Thread(target=ar.wrap(enter_and_leave_open))
                else:
                    thread = ar.Thread(target=enter_and_leave_open)
                thread.start()
                thread.join()
                seen.append(ar.current_subagent_id())

        assert ["r-sub-2", "r-sub-1"] == seen
