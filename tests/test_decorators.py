"""
``@subagent`` and ``@step`` on the four kinds of callable.

Functions, coroutine functions, generator functions and async generator
functions: the body sees the scope, the consumer never does between items,
return values and the generator protocol survive, and a generator closed early,
abandoned or driven from elsewhere never leaves a stale scope behind.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

import pytest
from support.events import body, said
from support.kinds import KINDS, consume, raising

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid, make_input


def where() -> tuple[str | None, str | None]:
    """Return the ambient (subagent id, step)."""
    return ar.current_subagent_id(), ar.current_step()


def make(kind: str, decorator: Callable[[Any], Any], seen: list[Any]) -> Any:
    """Return a decorated callable of *kind* that records where its body runs and says so."""
    if kind == "function":

        def function(x: int) -> int:
            seen.append(where())
            ar.say(f"body {x}")
            return x * 2

        return decorator(function)
    if kind == "coroutine":

        async def coroutine(x: int) -> int:
            await asyncio.sleep(0)
            seen.append(where())
            ar.say(f"body {x}")
            return x * 2

        return decorator(coroutine)
    if kind == "generator":

        def generator(x: int) -> Generator[int, None, int]:
            seen.append(where())
            ar.say(f"body {x}")
            yield x
            seen.append(where())
            yield x + 1
            return x * 2

        return decorator(generator)

    async def async_generator(x: int) -> AsyncGenerator[int, None]:
        seen.append(where())
        ar.say(f"body {x}")
        yield x
        await asyncio.sleep(0)
        seen.append(where())
        yield x + 1

    return decorator(async_generator)


async def drive(kind: str, fn: Any, x: int, consumer: list[Any]) -> Any:
    """Call *fn* as its kind wants, recording where the consumer is between items."""
    if kind == "function":
        return fn(x)
    if kind == "coroutine":
        return await fn(x)
    if kind == "generator":
        gen = fn(x)
        items = []
        while True:
            try:
                items.append(next(gen))
            except StopIteration as stop:
                return items, stop.value
            consumer.append(where())
            ar.say("consumer")
    items = []
    async for item in fn(x):
        items.append(item)
        consumer.append(where())
        ar.say("consumer")
    return items


EXPECTED_RESULT = {
    "function": 6,
    "coroutine": 6,
    "generator": ([3, 4], 6),
    "async_generator": [3, 4],
}


class TestSubagentDecorator:
    @pytest.mark.parametrize("kind", KINDS)
    async def test_body_sees_scope_consumer_does_not(self, kind: str) -> None:
        """The body runs in the subagent's scope; the consumer between items stays in its own."""
        seen: list[Any] = []
        consumer: list[Any] = []
        fn = make(kind, ar.subagent("worker"), seen)

        async with ar.Run(make_input(run_id="r")) as run:
            result = await drive(kind, fn, 3, consumer)

        assert EXPECTED_RESULT[kind] == result
        assert {("r-sub-1", None)} == set(seen)
        assert all(c == (None, None) for c in consumer)
        assert ("body 3", "r-sub-1") == said(run)[0]
        assert {owner for text, owner in said(run) if text == "consumer"} <= {None}
        assert_valid(list(run.events))

    @pytest.mark.parametrize("kind", KINDS)
    async def test_return_value_is_the_result(self, kind: str) -> None:
        """SUBAGENT_FINISHED carries the return value (generators: their return value)."""
        fn = make(kind, ar.subagent("worker"), [])

        async with ar.Run(make_input(run_id="r")) as run:
            await drive(kind, fn, 3, [])

        finished = [e for e in body(run) if e["type"] == "SUBAGENT_FINISHED"]
        expected = {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"}
        if kind != "async_generator":
            expected["result"] = 6  # type: ignore[assignment]
        assert [expected] == finished

    @pytest.mark.parametrize("kind", KINDS)
    async def test_each_call_is_a_new_invocation(self, kind: str) -> None:
        """Calling a decorated callable twice announces two invocations with fresh ids."""
        fn = make(kind, ar.subagent("worker"), [])

        async with ar.Run(make_input(run_id="r")) as run:
            await drive(kind, fn, 1, [])
            await drive(kind, fn, 2, [])

        assert [("r-sub-1", "worker"), ("r-sub-2", "worker")] == [
            (e["subagentRunId"], e["name"]) for e in body(run) if e["type"] == "SUBAGENT_STARTED"
        ]

    @pytest.mark.parametrize("kind", KINDS)
    async def test_nested_in_a_subagent(self, kind: str) -> None:
        """A decorated callable called inside a subagent nests under it."""
        fn = make(kind, ar.subagent("worker"), [])

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("boss"):
                await drive(kind, fn, 1, [])

        announced = [e for e in body(run) if e["type"] == "SUBAGENT_STARTED"]
        assert "r-sub-1" == announced[1]["parentSubagentRunId"]
        assert_valid(list(run.events))

    @pytest.mark.parametrize("kind", KINDS)
    async def test_outside_a_run_the_callable_just_runs(self, kind: str) -> None:
        """With no run ambient the decorated callable runs plainly: same results, no scope."""
        seen: list[Any] = []

        def function() -> str:
            seen.append(where())
            return "f"

        async def coroutine() -> str:
            seen.append(where())
            return "c"

        def generator() -> Generator[str, None, None]:
            seen.append(where())
            yield "g"

        async def async_generator() -> AsyncGenerator[str, None]:
            seen.append(where())
            yield "a"

        original = locals()[kind]
        decorated = ar.subagent("worker")(original)

        if kind == "function":
            result: Any = decorated()
        elif kind == "coroutine":
            result = await decorated()
        elif kind == "generator":
            gen = decorated()
            assert original.__code__ is gen.gi_code  # the plain generator, unwrapped
            result = list(gen)
        else:
            agen = decorated()
            assert original.__code__ is agen.ag_code
            result = [item async for item in agen]

        assert {"function": "f", "coroutine": "c", "generator": ["g"], "async_generator": ["a"]}[
            kind
        ] == result
        assert [(None, None)] == seen

    def test_metadata_is_kept(self) -> None:
        """functools.wraps keeps name, docstring and __wrapped__."""

        def original() -> None:
            """Original docstring."""

        decorated = ar.subagent("x")(original)

        assert ("original", "Original docstring.") == (decorated.__name__, decorated.__doc__)
        assert original is decorated.__wrapped__

    def test_coroutine_function_stays_one(self) -> None:
        """A decorated coroutine function is still a coroutine function."""

        async def original() -> None:
            pass

        assert inspect.iscoroutinefunction(ar.subagent("x")(original))

    @pytest.mark.parametrize("kind", KINDS)
    async def test_exception_errors_the_scope_and_propagates(self, kind: str) -> None:
        """A ValueError in any kind sends SUBAGENT_ERROR and propagates as the same object."""
        boom = ValueError("bad input")

        fn = ar.subagent("s")(raising(kind, boom))

        async with ar.Run(make_input(run_id="r"), expose_errors=True) as run:
            with pytest.raises(ValueError, match="bad input") as caught:
                await consume(kind, fn)

        assert boom is caught.value
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "r-sub-1",
            "message": "bad input",
            "code": "ValueError",
        } == body(run)[-1]
        assert_valid(list(run.events))

    @pytest.mark.parametrize("kind", KINDS)
    async def test_interrupted_suspends(self, kind: str) -> None:
        """Interrupted from any kind suspends the invocation naming its interrupt."""
        ask = ev.Interrupt(id="ask", reason="input_required")

        def function() -> None:
            raise ar.Interrupted(ask)  # made in the scope: it takes the subagent's id

        async def coroutine() -> None:
            raise ar.Interrupted(ask)

        def generator() -> Generator[int, None, None]:
            yield 1
            raise ar.Interrupted(ask)

        async def async_generator() -> AsyncGenerator[int, None]:
            yield 1
            raise ar.Interrupted(ask)

        fn = ar.subagent("s")(locals()[kind])

        async with ar.Run(make_input(run_id="r")) as run:
            await consume(kind, fn)

        assert {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": "r-sub-1",
            "outcome": {"type": "suspended", "interruptIds": ["ask"]},
        } == body(run)[-1]
        assert_valid(list(run.events))


class TestStepDecorator:
    @pytest.mark.parametrize("kind", KINDS)
    async def test_body_sees_step_consumer_does_not(self, kind: str) -> None:
        """@step wraps every kind: STEP_STARTED/FINISHED around the body, the consumer outside."""
        seen: list[Any] = []
        consumer: list[Any] = []
        fn = make(kind, ar.step("plan"), seen)

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("s"):
                result = await drive(kind, fn, 3, consumer)

        assert EXPECTED_RESULT[kind] == result
        assert {("r-sub-1", "plan")} == set(seen)
        assert all(c == ("r-sub-1", None) for c in consumer)
        steps = [e for e in body(run) if e["type"].startswith("STEP_")]
        assert [
            {"type": "STEP_STARTED", "subagentRunId": "r-sub-1", "stepName": "plan"},
            {"type": "STEP_FINISHED", "subagentRunId": "r-sub-1", "stepName": "plan"},
        ] == steps
        assert_valid(list(run.events))

    @pytest.mark.parametrize("kind", KINDS)
    async def test_each_call_is_a_new_step(self, kind: str) -> None:
        """Two calls make two steps, one after the other."""
        fn = make(kind, ar.step("plan"), [])

        async with ar.Run(make_input()) as run:
            await drive(kind, fn, 1, [])
            await drive(kind, fn, 2, [])

        assert ["STEP_STARTED", "STEP_FINISHED"] * 2 == [
            e["type"] for e in body(run) if e["type"].startswith("STEP_")
        ]

    async def test_step_finishes_when_the_body_raises(self) -> None:
        """A step whose body raises still finishes, and the exception propagates."""

        @ar.step("plan")
        async def plan() -> None:
            raise LookupError("no plan")

        async with ar.Run(make_input()) as run:
            with pytest.raises(LookupError):
                await plan()

        assert ["STEP_STARTED", "STEP_FINISHED"] == [e["type"] for e in body(run)]
        assert_valid(list(run.events))


class TestGeneratorProtocol:
    async def test_send_throw_close_and_return(self) -> None:
        """A decorated generator still takes send(), throw() and close(), and returns its value."""
        closed_in: list[Any] = []

        @ar.subagent("echo")
        def echo() -> Generator[str, str, str]:
            received = yield "ready"
            try:
                yield f"got {received}"
            except KeyError:
                yield "caught"
            try:
                yield "waiting"
            finally:
                closed_in.append(where())
                ar.say("closing")
            return "unreachable"

        async with ar.Run(make_input(run_id="r")) as run:
            gen = echo()
            is_generator = inspect.isgenerator(gen)
            steps = [next(gen), gen.send("hi"), gen.throw(KeyError("k")), next(gen)]
            gen.close()
            after = where()

        assert is_generator
        assert ["ready", "got hi", "caught", "waiting"] == steps
        assert [("r-sub-1", None)] == closed_in
        assert (None, None) == after
        assert ("closing", "r-sub-1") == said(run)[-1]
        assert {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"} == body(run)[-1]
        assert_valid(list(run.events))

    async def test_yield_from_gets_the_return_value(self) -> None:
        """``yield from`` a decorated generator receives its return value."""

        @ar.subagent("inner")
        def inner() -> Generator[int, None, str]:
            yield 1
            return "done"

        def outer() -> Generator[int, None, str]:
            value = yield from inner()
            return value

        async with ar.Run(make_input()):
            gen = outer()
            next(gen)
            with pytest.raises(StopIteration) as stop:
                next(gen)

        assert "done" == stop.value.value

    async def test_thrown_exception_not_caught_ends_the_scope(self) -> None:
        """An exception thrown in and not caught ends the invocation with SUBAGENT_ERROR."""

        @ar.subagent("s")
        def gen() -> Generator[int, None, None]:
            yield 1
            yield 2

        async with ar.Run(make_input(run_id="r")) as run:
            g = gen()
            next(g)
            with pytest.raises(OSError, match="disk"):
                g.throw(OSError("disk"))

        assert "SUBAGENT_ERROR" == body(run)[-1]["type"]
        assert_valid(list(run.events))

    async def test_asend_athrow_aclose(self) -> None:
        """A decorated async generator still takes asend(), athrow() and aclose()."""
        closed_in: list[Any] = []

        @ar.subagent("echo")
        async def echo() -> AsyncGenerator[str, str]:
            received = yield "ready"
            try:
                yield f"got {received}"
            except KeyError:
                yield "caught"
            try:
                yield "waiting"
            finally:
                closed_in.append(where())
                ar.say("closing")

        async with ar.Run(make_input(run_id="r")) as run:
            gen = echo()
            is_asyncgen = inspect.isasyncgen(gen)
            steps = [
                await gen.asend(None),
                await gen.asend("hi"),
                await gen.athrow(KeyError("k")),
                await anext(gen),
            ]
            await gen.aclose()
            after = where()

        assert is_asyncgen
        assert ["ready", "got hi", "caught", "waiting"] == steps
        assert [("r-sub-1", None)] == closed_in
        assert (None, None) == after
        assert {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"} == body(run)[-1]
        assert_valid(list(run.events))

    async def test_never_started_generator_opens_nothing(self) -> None:
        """A decorated generator that is created but never advanced announces nothing."""

        @ar.subagent("lazy")
        def lazy() -> Generator[int, None, None]:
            yield 1

        async with ar.Run(make_input()) as run:
            gen = lazy()
            gen.close()

        assert [] == body(run)


class TestAbandonedGenerators:
    async def test_async_generator_abandoned_without_aclose(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Breaking out without aclose keeps the consumer's scope; finalization logs no error."""
        caplog.set_level(logging.DEBUG)

        @ar.subagent("stream")
        async def stream() -> AsyncGenerator[int, None]:
            for n in range(10):
                ar.say(f"item {n}")
                yield n

        async with ar.Run(make_input(run_id="r")) as run:
            async for _ in stream():
                break
            ar.say("after break")
            during = where()
            gc.collect()
            for _ in range(3):
                await asyncio.sleep(0)
            ar.say("later")

        assert (None, None) == during
        assert [("item 0", "r-sub-1"), ("after break", None), ("later", None)] == said(run)
        assert 1 == sum(e["type"] == "SUBAGENT_FINISHED" for e in body(run))
        assert [] == [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert_valid(list(run.events))

    async def test_sync_generator_abandoned_is_finished_by_gc(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A started sync generator dropped on the floor is finished when collected, quietly."""
        caplog.set_level(logging.DEBUG)

        @ar.subagent("stream")
        def stream() -> Generator[int, None, None]:
            yield 1
            yield 2

        async with ar.Run(make_input(run_id="r")) as run:
            gen = stream()
            next(gen)
            del gen
            gc.collect()
            ar.say("after")

        assert [
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "r-sub-1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "r-msg-1", "role": "assistant"},
        ] == body(run)[1:3]
        assert [] == [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert_valid(list(run.events))

    async def test_generator_outliving_the_run_is_closed_by_the_run(self) -> None:
        """A started generator still open at run end is finished by the run, with a warning."""

        @ar.subagent("stream")
        def stream() -> Generator[int, None, None]:
            yield 1
            yield 2

        with pytest.warns(ar.LeftOpenWarning):  # noqa: PT031
            async with ar.Run(make_input(run_id="r")) as run:
                gen = stream()
                next(gen)
        gen.close()

        assert ["SUBAGENT_FINISHED", "RUN_FINISHED"] == [e.TYPE.value for e in run.events][-2:]
        assert_valid(list(run.events))

    async def test_created_in_one_task_iterated_in_another(self) -> None:
        """A generator made in a subagent and iterated by another task nests under its creator."""

        @ar.subagent("stream")
        async def stream() -> AsyncGenerator[int, None]:
            ar.say("streaming")
            yield 1

        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("endpoint"):
                gen = stream()

            async def runner() -> list[int]:
                return [item async for item in gen]

            items = await asyncio.create_task(runner())

        assert [1] == items
        assert [("streaming", "r-sub-2")] == said(run)
        started = [e for e in body(run) if e["type"] == "SUBAGENT_STARTED"]
        assert "r-sub-1" == started[1]["parentSubagentRunId"]
        assert_valid(list(run.events))
