"""The warnings and errors users meet first name what happened, where, and the fix."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import make_input


class TestLeftOpenWarning:
    async def test_a_message_names_its_id_the_fix_and_the_users_line(self) -> None:
        """A message left open in a subagent: its id, how to end it, and this file's line."""

        async def program() -> None:
            async with ar.Run(make_input()):
                with ar.subagent("writer"):
                    ar.message(id="m9").write("half")

        with pytest.warns(ar.LeftOpenWarning) as caught:
            await program()

        [warning] = caught
        text = str(warning.message)
        assert text.startswith("message 'm9' was still open when its scope ended")
        assert "open it in a `with` block, or call its end()" in text
        assert __file__ == warning.filename

    async def test_a_tool_call_names_its_tool_and_id(self) -> None:
        """A tool call left open names the tool and the call id."""

        async def program() -> None:
            async with ar.Run(make_input()):
                with ar.subagent("researcher"):
                    ar.tool_call("search", id="call-7").args({"q": "x"})

        with pytest.warns(ar.LeftOpenWarning) as caught:
            await program()

        [warning] = caught
        assert str(warning.message).startswith("tool call 'search' (call-7) was still open")
        assert __file__ == warning.filename

    async def test_a_step_names_its_name(self) -> None:
        """A step started and never ended names the step."""

        async def program() -> None:
            async with ar.Run(make_input()):
                with ar.subagent("planner"):
                    ar.step("plan").start()

        with pytest.warns(ar.LeftOpenWarning) as caught:
            await program()

        [warning] = caught
        assert str(warning.message).startswith("step 'plan' was still open")
        assert __file__ == warning.filename

    async def test_a_subagent_names_its_name_id_and_how_to_finish_it(self) -> None:
        """A handle started and never finished: name, id, and finish() as the fix."""
        with pytest.warns(ar.LeftOpenWarning) as caught:
            async with ar.Run(make_input(run_id="r")) as run:
                run.subagent("auditor").start()

        [warning] = caught
        text = str(warning.message)
        assert text.startswith("subagent 'auditor' (r-sub-1) was still open")
        assert "call its finish()" in text
        assert __file__ == warning.filename

    async def test_a_decorated_subagent_points_at_its_call(self) -> None:
        """Through a decorator, the warning still lands on the user's file, not the library's."""

        @ar.subagent("researcher")
        async def research() -> None:
            ar.message(id="left").write("x")

        with pytest.warns(ar.LeftOpenWarning) as caught:
            async with ar.Run(make_input()):
                await research()

        [warning] = caught
        assert str(warning.message).startswith("message 'left' was still open")
        assert __file__ == warning.filename

    async def test_a_few_left_open_warn_each(self) -> None:
        """Three handles left open in one scope: three warnings, each naming its handle."""
        with pytest.warns(ar.LeftOpenWarning) as caught:  # noqa: PT031
            async with ar.Run(make_input(run_id="r")) as run:
                for name in ("a", "b", "c"):
                    run.subagent(name).start()

        assert [
            "subagent 'c' (r-sub-3)",
            "subagent 'b' (r-sub-2)",
            "subagent 'a' (r-sub-1)",
        ] == [str(w.message).partition(" was still open")[0] for w in caught]

    async def test_many_left_open_are_one_warning_with_a_count_and_a_few_names(self) -> None:
        """10,000 subagents left open: every one finished, one warning (count, three names)."""
        with pytest.warns(ar.LeftOpenWarning) as caught:  # noqa: PT031
            async with ar.Run(make_input(run_id="r")) as run:
                for n in range(10_000):
                    run.subagent(f"s{n}").start()

        [warning] = caught
        assert str(warning.message).startswith(
            "10000 handles were still open when their scope ended; ambient_runs closed them: "
            "subagent 's9999' (r-sub-10000), subagent 's9998' (r-sub-9999), "
            "subagent 's9997' (r-sub-9998) and 9997 more. End each before its scope ends"
        )
        assert __file__ == warning.filename
        finished = [e for e in run.events if e.TYPE is ev.EventType.SUBAGENT_FINISHED]
        assert 10_000 == len(finished)


class TestNoActiveRunError:
    def test_outside_any_run_it_names_the_run(self) -> None:
        """In the main thread, the message says to call it inside a run."""
        with pytest.raises(ar.NoActiveRunError) as caught:
            ar.say("x")

        text = str(caught.value)
        assert "say() needs an active run" in text
        assert "ContextThreadPoolExecutor" not in text

    async def test_in_a_plain_thread_pool_it_names_the_context_carrying_helpers(self) -> None:
        """A plain pool loses the context: the error names the helpers that carry it."""
        async with ar.Run(make_input()):
            with concurrent.futures.ThreadPoolExecutor(thread_name_prefix="plain") as pool:
                future = pool.submit(ar.say, "lost")
                with pytest.raises(ar.NoActiveRunError) as caught:
                    future.result(timeout=10)

            with ar.ContextThreadPoolExecutor() as pool:  # the fix works
                pool.submit(ar.say, "found").result(timeout=10)

        text = str(caught.value)
        assert "thread 'plain_0'" in text
        for helper in ("ContextThreadPoolExecutor", "run_in_executor", "ambient_runs.Thread"):
            assert helper in text

    async def test_in_run_in_executor_too(self) -> None:
        """loop.run_in_executor does not carry the context either; the error says so."""
        async with ar.Run(make_input()):
            loop = asyncio.get_running_loop()
            with pytest.raises(ar.NoActiveRunError, match=r"ambient_runs\.run_in_executor"):
                await loop.run_in_executor(None, ar.say, "lost")


class Opaque:
    """A value with no JSON form, neither ours nor pydantic's."""


class TestResultWarning:
    @pytest.mark.parametrize(
        ("result", "expected"),
        [
            (
                {"sources": [1, Opaque()]},
                "$.sources[1] is an Opaque, which has no JSON form",
            ),
            ([1.5, float("nan")], "$[1] is nan, which is not a JSON number"),
            ({"k": {"inner": object()}}, "$.k.inner is an object, which has no JSON form"),
            (Opaque(), "$ is an Opaque, which has no JSON form"),
        ],
    )
    async def test_names_the_field_without_a_json_form(self, result: Any, expected: str) -> None:
        """The warning names the path of the first value JSON cannot hold, and the fix."""

        @ar.subagent("researcher")
        async def research() -> Any:
            return result

        with pytest.warns(ar.ResultWarning) as caught:
            async with ar.Run(make_input()):
                await research()

        [warning] = caught
        text = str(warning.message)
        assert text.startswith("subagent 'researcher' ")
        assert expected in text
        assert "convert that value, or call finish_with()" in text
        assert __file__ == warning.filename
