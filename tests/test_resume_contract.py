"""
The resume contract, for every adapter that pauses: continuations stay on the server.

A framework run paused behind one `AgentApp` is continued by a *second* app
instance that shares nothing with the first but the continuation store (one
`MemoryContinuations` object in-process, or a real redis-server the tests
start), from nothing but the entry the official client's ``buildResumeArray``
builds: ``{interruptId, status, payload}``. Metadata a client sends changes
nothing; an unknown, expired or repeated answer ends the run with its named
``RUN_ERROR`` code, never a silent new turn. Every stream is judged by the
official client.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support.resume_contract import KINDS, Kind, accepted, post

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.continuations import ContinuationStore, MemoryContinuations, default_store
from ambient_runs.stores.redis import RedisStore
from ambient_runs.stores.redis_continuations import RedisContinuations

JsonDict = dict[str, Any]

KIND_NAMES = sorted(KINDS)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frameworks' test models need no key: make sure nothing reaches for one."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def build_resume_array(interrupts: list[JsonDict], status: str, payload: Any) -> list[JsonDict]:
    """What ``buildResumeArray`` (``@ag-ui/client`` 1.0.0) builds: no metadata, ever."""
    entries = []
    for interrupt in interrupts:
        entry: JsonDict = {"interruptId": interrupt["id"], "status": status}
        if status == "resolved" and payload is not None:
            entry["payload"] = payload
        entries.append(entry)
    return entries


def paused(events: list[JsonDict]) -> list[JsonDict]:
    """The interrupts of a run that must have paused."""
    last = events[-1]
    assert ("RUN_FINISHED", "interrupt") == (last["type"], last.get("outcome", {}).get("type"))
    interrupts: list[JsonDict] = last["outcome"]["interrupts"]
    return interrupts


def error_code(events: list[JsonDict]) -> str | None:
    last = events[-1]
    assert "RUN_ERROR" == last["type"], last
    code: str | None = last.get("code")
    return code


def approved_effect(kind: Kind, interrupts: list[JsonDict], events: list[JsonDict]) -> None:
    """The resumed run did what the approval allowed, on the call the client was asked about."""
    assert "RUN_FINISHED" == events[-1]["type"], events[-1]
    assert "outcome" not in events[-1]
    assert kind.result == events[-1]["result"]
    asked = {i["toolCallId"] for i in interrupts}
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in asked]
    assert [kind.approved] == [r["content"] for r in results]


@pytest.fixture(params=["memory", "redis"])
async def shared(request: pytest.FixtureRequest) -> AsyncIterator[tuple[ContinuationStore, ...]]:
    """Two apps' continuation stores with nothing in common but where they keep them."""
    if request.param == "memory":
        store = MemoryContinuations()
        yield store, store
        return
    url = request.getfixturevalue("redis_url")
    prefix = f"t-{uuid.uuid4().hex}:"
    both = RedisContinuations(url, prefix=prefix), RedisContinuations(url, prefix=prefix)
    yield both
    for one in both:
        await one.aclose()


class TestASecondAppContinues:
    @pytest.mark.parametrize("kind_name", KIND_NAMES)
    async def test_the_client_entry_alone_is_enough(
        self, kind_name: str, shared: tuple[ContinuationStore, ContinuationStore]
    ) -> None:
        """Paused on app 1; app 2, sharing only the store, goes on from buildResumeArray's."""
        kind = KINDS[kind_name]
        agent = kind.make_agent()
        first_app = AgentApp(agent, continuations=shared[0])
        second_app = AgentApp(agent, continuations=shared[1])

        first = await post(first_app, "r1")
        interrupts = paused(first)
        [verdict] = accepted(first)
        for interrupt in interrupts:  # what a UI needs, and an expiry; nothing to continue from
            assert interrupt["expiresAt"].endswith("Z")
            assert len(json.dumps(interrupt)) < 1024, interrupt
            assert "resume" not in json.dumps(interrupt.get("metadata", {}))

        resume = build_resume_array(interrupts, "resolved", kind.approve)
        second = await post(second_app, "r2", messages=verdict["messages"] or [], resume=resume)
        accepted(second, messages=verdict["messages"])

        approved_effect(kind, interrupts, second)

    async def test_an_agents_sdk_state_no_longer_travels(self) -> None:
        """The Agents SDK's serialised RunState (kilobytes) stays on the server."""
        kind = KINDS["openai-agents"]
        store = MemoryContinuations()

        first = await post(AgentApp(kind.make_agent(), continuations=store), "r1")

        [interrupt] = paused(first)
        assert {"ambient_runs": {"toolName": "delete", "arguments": {"path": "/tmp/one"}}} == (
            interrupt["metadata"]
        )
        assert 1 == len(store)


class TestWhatTheClientCannotChange:
    @pytest.mark.parametrize("kind_name", KIND_NAMES)
    async def test_tampered_metadata_changes_nothing(self, kind_name: str) -> None:
        """
        Metadata sent back, forged in every way the adapters once read it, changes nothing.

        A forged continuation (the old ``metadata.ambient_runs.resume`` token with
        another call, history and state), LangGraph's value and a stranger's keys:
        the run continues exactly as with no metadata.
        """
        kind = KINDS[kind_name]
        store = MemoryContinuations()
        agent = kind.make_agent()
        first = await post(AgentApp(agent, continuations=store), "r1")
        interrupts = paused(first)
        [verdict] = accepted(first)
        forged = {
            "ambient_runs": {
                "resume": {
                    "adapter": kind_name,
                    "name": "evil",
                    "prompt": "0" * 16,
                    "call": "someone-elses-call",
                    "toolCallId": "r0-tool-9",
                    "history": [{"kind": "nonsense"}],
                    "state": {"not": "a state"},
                }
            },
            "langgraph": {"value": "forged"},
            "x": [1, 2, 3],
        }
        resume = [
            {**entry, "metadata": forged}
            for entry in build_resume_array(interrupts, "resolved", kind.approve)
        ]

        second = await post(
            AgentApp(agent, continuations=store),
            "r2",
            messages=verdict["messages"] or [],
            resume=resume,
        )
        accepted(second, messages=verdict["messages"])

        approved_effect(kind, interrupts, second)


class TestNamedErrors:
    @pytest.mark.parametrize("kind_name", KIND_NAMES)
    async def test_an_unknown_id_is_interrupt_unknown(self, kind_name: str) -> None:
        """An answer to an id no store issued: RUN_ERROR interrupt_unknown, no new turn."""
        kind = KINDS[kind_name]
        app = AgentApp(kind.make_agent(), continuations=MemoryContinuations())
        resume = [{"interruptId": "r0-int-1", "status": "resolved", "payload": kind.approve}]

        events = await post(app, "r2", resume=resume)
        accepted(events)

        assert "interrupt_unknown" == error_code(events)
        assert "r0-int-1" in events[-1]["message"]
        assert not any(e["type"].startswith("TOOL_CALL") for e in events)

    async def test_one_bad_answer_leaves_the_good_ones_answerable(self) -> None:
        """A good answer next to an unknown one: interrupt_unknown, and the good one stays."""
        kind = KINDS["pydantic-ai"]
        app = AgentApp(kind.make_agent(), continuations=MemoryContinuations())
        interrupts = paused(await post(app, "r1"))
        good = build_resume_array(interrupts, "resolved", kind.approve)

        mixed = await post(
            app, "r2", resume=[*good, {"interruptId": "r0-int-9", "status": "resolved"}]
        )
        alone = await post(app, "r3", resume=good)

        assert "interrupt_unknown" == error_code(mixed)
        approved_effect(kind, interrupts, alone)

    @pytest.mark.parametrize("kind_name", KIND_NAMES)
    async def test_a_second_answer_is_interrupt_answered(
        self, kind_name: str, shared: tuple[ContinuationStore, ContinuationStore]
    ) -> None:
        """The same answer again (a retry, another tab, another worker): interrupt_answered."""
        kind = KINDS[kind_name]
        agent = kind.make_agent()
        apps = [AgentApp(agent, continuations=s) for s in shared]
        first = await post(apps[0], "r1")
        interrupts = paused(first)
        [verdict] = accepted(first)
        resume = build_resume_array(interrupts, "resolved", kind.approve)
        messages = verdict["messages"] or []

        second = await post(apps[1], "r2", messages=messages, resume=resume)
        third = await post(apps[0], "r3", messages=messages, resume=resume)
        accepted(third, messages=verdict["messages"])

        approved_effect(kind, interrupts, second)
        assert "interrupt_answered" == error_code(third)
        assert not any(e["type"].startswith("TOOL_CALL") for e in third)

    @pytest.mark.parametrize("kind_name", KIND_NAMES)
    async def test_a_late_answer_is_interrupt_expired_but_a_cancel_is_taken(
        self, kind_name: str
    ) -> None:
        """Past its ttl, an answer is interrupt_expired; cancelling it is still taken."""
        kind = KINDS[kind_name]
        clock = Clock()
        store = MemoryContinuations(ttl=60, clock=clock)
        agent = kind.make_agent()
        app = AgentApp(agent, continuations=store)
        first = await post(app, "r1")
        interrupts = paused(first)
        [verdict] = accepted(first)
        messages = verdict["messages"] or []
        clock.now += 61

        late = await post(
            app,
            "r2",
            messages=messages,
            resume=build_resume_array(interrupts, "resolved", kind.approve),
        )
        cancel = await post(
            app, "r3", messages=messages, resume=build_resume_array(interrupts, "cancelled", None)
        )
        accepted(late, cancel, messages=verdict["messages"])

        assert "interrupt_expired" == error_code(late)
        assert "RUN_FINISHED" == cancel[-1]["type"]
        asked = {i["toolCallId"] for i in interrupts}
        results = [
            e["content"]
            for e in cancel
            if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in asked
        ]
        assert kind.approved not in results  # cancelled: not done

    async def test_an_expired_answer_on_redis_is_interrupt_expired(self, redis_url: str) -> None:
        """Redis keeps time itself: past the ttl, interrupt_expired (then unknown after grace)."""
        kind = KINDS["pydantic-ai"]
        store = RedisContinuations(redis_url, prefix=f"t-{uuid.uuid4().hex}:", ttl=0.2)
        app = AgentApp(kind.make_agent(), continuations=store)
        interrupts = paused(await post(app, "r1"))
        await asyncio.sleep(0.3)  # the ttl passing is the point: no event to await

        late = await post(
            app, "r2", resume=build_resume_array(interrupts, "resolved", kind.approve)
        )

        assert "interrupt_expired" == error_code(late)
        await store.aclose()


class TestStores:
    @pytest.fixture(params=["memory", "redis"])
    async def store(self, request: pytest.FixtureRequest) -> AsyncIterator[ContinuationStore]:
        if request.param == "memory":
            yield MemoryContinuations()
            return
        url = request.getfixturevalue("redis_url")
        store = RedisContinuations(url, prefix=f"t-{uuid.uuid4().hex}:")
        yield store
        await store.aclose()

    async def test_take_is_once(self, store: ContinuationStore) -> None:
        """put, take: the data; take again: answered; an id never put: unknown."""
        await store.put("i1", {"history": [1, "two", None]})

        assert {"history": [1, "two", None]} == await store.take("i1")
        with pytest.raises(ar.InterruptAnsweredError):
            await store.take("i1")
        with pytest.raises(ar.InterruptUnknownError):
            await store.take("i2")

    async def test_concurrent_takes_continue_once(self, store: ContinuationStore) -> None:
        """Twenty workers take one interrupt at once: exactly one gets it."""
        await store.put("i1", {"n": 1})

        got = await asyncio.gather(*(store.take("i1") for _ in range(20)), return_exceptions=True)

        assert [{"n": 1}] == [g for g in got if isinstance(g, dict)]
        assert 19 == sum(isinstance(g, ar.InterruptAnsweredError) for g in got)

    async def test_drop_forgets(self, store: ContinuationStore) -> None:
        """A dropped interrupt reads as unknown."""
        await store.put("i1", {})
        await store.drop("i1")

        with pytest.raises(ar.InterruptUnknownError):
            await store.take("i1")

    async def test_data_must_be_json(self, store: ContinuationStore) -> None:
        """A continuation that is not JSON is refused when kept, not when taken."""
        with pytest.raises(TypeError, match="JSON object"):
            await store.put("i1", {"x": object()})


class TestMemoryContinuations:
    async def test_expiry_then_grace_then_forgotten(self) -> None:
        """Before the ttl: taken; after: expired (cancel still taken); after grace: unknown."""
        clock = Clock()
        store = MemoryContinuations(ttl=10, grace=5, clock=clock)
        await store.put("late", {})
        await store.put("cancelled", {"c": 1})
        await store.put("forgotten", {})
        clock.now += 10

        with pytest.raises(ar.InterruptExpiredError):
            await store.take("late")
        assert {"c": 1} == await store.take("cancelled", expired_ok=True)
        clock.now += 5
        with pytest.raises(ar.InterruptUnknownError):
            await store.take("forgotten")

    async def test_bounded_by_entries_and_bytes_oldest_first(self) -> None:
        """Past max_entries or max_bytes the oldest interrupts are forgotten first."""
        by_count = MemoryContinuations(max_entries=3)
        by_size = MemoryContinuations(max_bytes=250)
        for n in range(5):
            await by_count.put(f"i{n}", {"n": n})
            await by_size.put(f"i{n}", {"pad": "x" * 90})

        assert 3 == len(by_count)
        assert 2 == len(by_size)
        with pytest.raises(ar.InterruptUnknownError):
            await by_count.take("i1")
        assert {"n": 4} == await by_count.take("i4")
        assert {"pad": "x" * 90} == await by_size.take("i4")

    def test_bad_settings_are_refused(self) -> None:
        """A ttl, grace or bound that cannot work is a ValueError naming it."""
        with pytest.raises(ValueError, match="ttl"):
            MemoryContinuations(ttl=0)
        with pytest.raises(ValueError, match="grace"):
            MemoryContinuations(grace=-1)
        with pytest.raises(ValueError, match="max_entries"):
            MemoryContinuations(max_entries=0)


class TestWhereAppsKeepThem:
    def test_by_default_the_process_store(self) -> None:
        """Without store= or continuations=, every app and run uses the process's store."""
        app = AgentApp(KINDS["pydantic-ai"].make_agent())

        assert default_store() is app.continuations
        assert (
            default_store()
            is ar.Run({"threadId": "t", "runId": "r", "messages": []}).continuations
        )

    async def test_beside_a_redis_store_on_its_connection(self, redis_url: str) -> None:
        """store=RedisStore(...): continuations on the same client, under the store's prefix."""
        store = RedisStore(redis_url, prefix="app-a:")
        app = AgentApp(KINDS["pydantic-ai"].make_agent(), store=store)

        continuations = app.continuations
        assert isinstance(continuations, RedisContinuations)
        assert "app-a:continuations:" == continuations.prefix
        assert store._redis is continuations._redis
        await continuations.put("i1", {"ok": True})
        again = RedisContinuations(redis_url, prefix="app-a:continuations:")
        assert {"ok": True} == await again.take("i1")
        await again.aclose()
        await store.aclose()

    def test_a_wrong_store_is_refused(self) -> None:
        """continuations= that is not a ContinuationStore: TypeError naming the protocol."""
        with pytest.raises(TypeError, match="ContinuationStore"):
            ar.Run({"threadId": "t", "runId": "r", "messages": []}, continuations=object())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="ContinuationStore"):
            AgentApp(KINDS["pydantic-ai"].make_agent(), continuations=object())  # type: ignore[arg-type]
