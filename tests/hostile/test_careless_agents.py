"""
Issue 11's careless agents, served by a real uvicorn and judged by the official client.

`tests/test_robustness.py` pins each defect in process; here the same programs run behind
`AgentApp`, and ``@ag-ui/client`` 1.0.0 reads what they stream: exactly one terminal event,
a stream our strict verifier accepts, no exception text on the wire, and, where the agent
carries on, not one warning or error from the client.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from support.node import aclient_run, assert_clean
from support.servers import serving
from support.sse import assert_one_terminal

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.asgi import AgentApp
from ambient_runs.errors import InvalidEventError, ProtocolError

pytestmark = [pytest.mark.filterwarnings("ignore::ambient_runs.errors.LeftOpenWarning")]

SECRET = "db password=hunter2 failed"
Case = Callable[[ar.Run], Awaitable[Any]]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ failed too")


async def secret_in_a_subagent(run: ar.Run) -> None:
    """Item 4: an unexpected exception's text never reaches the client."""
    with ar.subagent("db"):
        ar.say("querying")
        raise RuntimeError(SECRET)


async def deep_nesting(run: ar.Run) -> None:
    """Item 5: 330 nested subagents left open, closed by the run without recursion."""
    for depth in range(330):
        ar.subagent(f"level-{depth}").start()
    ar.say("deep")


async def unprintable(run: ar.Run) -> None:
    """Item 13: an exception whose __str__ raises still ends the run once."""
    with ar.subagent("fragile"):
        raise Unprintable


@ar.subagent("gen")
def items() -> Iterator[int]:
    try:
        yield 1
        yield 2
    finally:
        ar.say("cleanup")


async def orphans(run: ar.Run) -> dict[str, int]:
    """Item 10 (both of its programs) and item 11 (abandoned generators, collected)."""
    with ar.subagent("holder"):
        it = items()
    next(it)  # started after holder ended; kept, never finished

    async def late() -> None:
        await asyncio.sleep(0)
        ar.message().write("late")  # outlives its subagent with a message open

    with ar.subagent("x"):
        task = asyncio.create_task(late())
    await task
    for _ in range(50):
        cycle: list[Any] = [items()]
        next(cycle[0])
        cycle.append(cycle)  # only the cycle collector frees it
    gc.collect()
    return {"done": 1}


async def refused_at_the_call(run: ar.Run) -> dict[str, list[str]]:
    """Items 9, 12 and 14: each refused where it is made; the agent carries on."""
    said = ar.message()
    said.write("hello")
    said.end()
    tampered = ev.CustomEvent(name="x", value=1)
    object.__setattr__(tampered, "name", None)
    attempts: dict[str, Callable[[], object]] = {
        "tampered event": lambda: ar.emit(tampered),
        "raw RUN_FINISHED": lambda: ar.emit(ev.RunFinishedEvent(thread_id="t", run_id="r")),
        "unsafe integer": lambda: ar.set_state({"n": 2**53}),
        "reserved key": lambda: ar.emit(ev.CustomEvent(name="x", value=1, metadata={"ag-ui": 1})),
        "user message as parent": lambda: ar.tool_call("search", parent_message_id="u"),
        "activity with a message id": lambda: ar.activity("plan", {"n": 1}, id=said.id),
    }
    refused = []
    for what, attempt in attempts.items():
        try:
            attempt()
        except (InvalidEventError, ProtocolError):
            refused.append(what)
    ar.set_state({"n": 2**53 - 1})
    return {"refused": refused}


WOKEN: dict[str, asyncio.Event] = {}  # by run id: set when the waiting agent wakes


async def waits_until_the_client_leaves(run: ar.Run) -> None:
    """Item 6: thousands of waits leave no waiter behind; a disconnect still wakes the last."""
    for i in range(5_000):
        assert await run.until_cancelled(asyncio.sleep(0, i)) == i
    ar.say("waited")
    try:
        await run.cancelled()
    finally:
        WOKEN[run.run_id].set()


CASES: dict[str, Case] = {
    "waits_until_the_client_leaves": waits_until_the_client_leaves,
    "secret_in_a_subagent": secret_in_a_subagent,
    "deep_nesting": deep_nesting,
    "unprintable": unprintable,
    "orphans": orphans,
    "refused_at_the_call": refused_at_the_call,
}


async def by_case(run: ar.Run) -> Any:
    props = run.input.forwarded_props
    assert isinstance(props, dict)
    return await CASES[props["case"]](run)


def drop_run_finished(event: ev.BaseEvent) -> ev.BaseEvent | None:
    """Item 8: a transformer that removes the terminal event."""
    return None if isinstance(event, ev.RunFinishedEvent) else event


def swap_run_finished(event: ev.BaseEvent) -> ev.BaseEvent:
    """Item 8: a transformer that swaps the terminal event for a CUSTOM."""
    if isinstance(event, ev.RunFinishedEvent):
        return ev.CustomEvent(name="instead", value=None)
    return event


async def judged(app: AgentApp, case: str) -> dict[str, Any]:
    """One run of *case* through the official client; the stream it read, checked."""
    async with serving(app) as url, asyncio.timeout(60):
        result = await aclient_run(
            url,
            [
                {
                    "input": {
                        "threadId": f"t-{case}",
                        "runId": f"r-{case}",
                        "messages": [{"id": "u", "role": "user", "content": "hi"}],
                        "forwardedProps": {"case": case},
                    }
                }
            ],
        )
    (run,) = result["runs"]
    assert_one_terminal(run["events"])
    return run


class TestCarelessAgentsUnderUvicorn:
    async def test_exception_text_stays_on_the_server(self) -> None:
        run = await judged(AgentApp(by_case), "secret_in_a_subagent")
        types = [e["type"] for e in run["events"]]
        assert ["SUBAGENT_ERROR", "RUN_ERROR"] == [t for t in types if t.endswith("ERROR")]
        assert "hunter2" not in repr(run["events"])
        (error,) = run["runErrors"]
        assert "RuntimeError" == error["code"]

    async def test_an_unprintable_exception_ends_the_run_once(self) -> None:
        run = await judged(AgentApp(by_case), "unprintable")
        assert "RUN_ERROR" == run["events"][-1]["type"]
        failed = [e for e in run["events"] if e["type"] == "SUBAGENT_ERROR"]
        assert ["Unprintable"] == [e["code"] for e in failed]

    @pytest.mark.parametrize("case", ["deep_nesting", "orphans", "refused_at_the_call"])
    async def test_the_client_reads_a_clean_finished_run(self, case: str) -> None:
        run = await judged(AgentApp(by_case), case)
        assert "RUN_FINISHED" == run["events"][-1]["type"]
        assert_clean(run)
        if case == "deep_nesting":
            closed = [e for e in run["events"] if e["type"].startswith("SUBAGENT_")]
            assert 660 == len(closed)
        if case == "refused_at_the_call":
            assert 6 == len(run["runFinished"][0]["result"]["refused"])
            assert {"n": 2**53 - 1} == run["state"]
        if case == "orphans":
            said = [e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
            # The 50 collected ones clean up in the run; the kept one after it (dropped).
            assert (said.count("cleanup"), said[0]) == (50, "late")

    @pytest.mark.parametrize("transformer", [drop_run_finished, swap_run_finished])
    async def test_a_transformer_cannot_remove_the_terminal_event(
        self, transformer: Callable[[ev.BaseEvent], Any]
    ) -> None:
        app = AgentApp(by_case, transformers=[transformer])
        run = await judged(app, "deep_nesting")
        assert "RUN_ERROR" == run["events"][-1]["type"]
        assert "terminal-event" not in repr(run["events"])  # the rule's text stays here too

    async def test_a_waiting_agent_is_woken_when_its_client_leaves(self) -> None:
        WOKEN["r-wait"] = asyncio.Event()
        async with serving(AgentApp(by_case)) as url, asyncio.timeout(60):
            case = "waits_until_the_client_leaves"
            body = {
                "threadId": "t",
                "runId": "r-wait",
                "messages": [],
                "forwardedProps": {"case": case},
            }
            result = await aclient_run(url, [{"input": body, "abortAfterEvents": 4}])
            await WOKEN["r-wait"].wait()  # the server sees the disconnect, then cancels
        (run,) = result["runs"]
        said = [e.get("delta") for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
        assert (run["aborted"], said) == (True, ["waited"])


def test_every_case_is_served() -> None:
    """A case added to CASES without a test above would be caught here."""
    tested = {"secret_in_a_subagent", "unprintable", "deep_nesting", "orphans"}
    tested |= {"waits_until_the_client_leaves"}
    assert set(CASES) == tested | {"refused_at_the_call"}
