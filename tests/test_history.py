"""The run's message history: `Run.messages`, `publish_messages`, thread stores."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from ag_ui.core import MessagesSnapshotEvent
from support.node import client_verify
from support.sse import events_of

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._history import COMPACT_EVERY
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import assert_valid, make_input, wire

JsonDict = dict[str, Any]

BEFORE = (
    ev.SystemMessage(id="sys", content="Be brief."),
    ev.UserMessage(id="u1", content="Find flights"),
    ev.AssistantMessage(
        id="a0",
        tool_calls=(
            ev.ToolCall(id="old-call", function=ev.FunctionCall(name="lookup", arguments="{}")),
        ),
    ),
)


def recorded(input: ev.RunAgentInput, **options: Any) -> ar.Run:
    """A run that records its messages (``record_messages=True``; off by default)."""
    return ar.Run(input, record_messages=True, **options)


def history_wire(run: ar.Run) -> list[JsonDict]:
    return [ar.to_wire(m) for m in run.messages]


# ---------------------------------------------------------------------------- programs
# Each writes one run; the run's history must equal what the official client's reducer
# makes of the same events, starting from the same messages.


def streamed_text_and_subagents(run: ar.Run) -> None:
    ar.say("Looking.")
    with ar.subagent("researcher"), ar.message() as m:
        for word in ("Two ", "flights ", "found, ", "café ", "東京\n"):
            m.write(word)
    with ar.subagent("writer"):
        ar.say("Summary.")


def tool_calls_and_results(run: ar.Run) -> None:
    with ar.message() as m:
        m.write("Let me search.")
    with ar.subagent("searcher"):
        call = ar.tool_call("search", parent_message_id=m.id)
        call.args('{"q": ')
        call.args('"flights"}')
        call.result("3 hits")
        other = ar.tool_call("weather")  # no parent: a message of its own, id = the call's
        other.args({"city": "Oslo"})
        other.result([ev.TextPart(text="sunny")])
    second = ar.tool_call("book", parent_message_id=m.id)
    second.end()
    second.result({"ok": True})
    ar.emit(ev.ToolCallResultEvent(message_id="late", tool_call_id="old-call", content="late"))


def reasoning_and_encrypted(run: ar.Run) -> None:
    with ar.subagent("thinker"):
        with ar.reasoning() as r:
            r.write("First, ")
            r.write("think.")
            r.encrypted("opaque-1")
        ar.think("Quick thought.")
    call = ar.tool_call("calc")
    call.end()
    ar.emit(
        ev.ReasoningEncryptedValueEvent(
            subtype="tool-call", entity_id=call.id, encrypted_value="opaque-2"
        )
    )


def activities(run: ar.Run) -> None:
    plan = ar.activity("plan", {"steps": ["search"]})
    plan.update({"steps": ["search", "book"]})
    with ar.subagent("booker"):
        ar.activity("progress", {"percent": 10}, id="act-2").update({"percent": 50})
    ar.emit(
        ev.ActivitySnapshotEvent(
            message_id="act-2", activity_type="progress", content={"n": 1}, replace=False
        )
    )


def metadata_and_reused_ids(run: ar.Run) -> None:
    ar.emit(ev.TextMessageStartEvent(message_id="u1", role="assistant", metadata={"a": 1}))
    ar.emit(ev.TextMessageContentEvent(message_id="u1", delta=" (edited)", metadata={"b": 2}))
    ar.emit(ev.TextMessageEndEvent(message_id="u1", metadata={"a": 3}))
    ar.emit(
        ev.ToolCallStartEvent(
            tool_call_id="c9", tool_call_name="x", parent_message_id="a0", metadata={"k": "v"}
        )
    )
    ar.emit(ev.ToolCallArgsEvent(tool_call_id="c9", delta="{}"))
    ar.emit(ev.ToolCallEndEvent(tool_call_id="c9"))
    with ar.message("user", name="ada") as m:
        m.write("a user turn")
    ar.emit(
        ev.ToolCallStartEvent(tool_call_id="c10", tool_call_name="y", parent_message_id="fresh")
    )
    ar.emit(ev.ToolCallEndEvent(tool_call_id="c10"))
    with ar.message(id="again") as first:  # ended, then opened again under its id
        for i in range(600):
            first.write(f"{i} ")
    with ar.message(id="again") as second:
        second.write("and more")


def chunks(run: ar.Run) -> None:
    ar.emit(ev.TextMessageChunkEvent(message_id="k1", delta="chunked "))
    ar.emit(ev.TextMessageChunkEvent(delta="text"))
    ar.emit(ev.TextMessageChunkEvent(message_id="k2", delta="next"))
    ar.emit(ev.ToolCallChunkEvent(tool_call_id="kc", tool_call_name="t", delta='{"a"'))
    ar.emit(ev.ToolCallChunkEvent(delta=": 1}"))
    ar.emit(ev.ReasoningMessageChunkEvent(message_id="kr", delta="chunked thought"))
    ar.emit(ev.ReasoningMessageChunkEvent(delta=" goes on"))
    ar.say("explicit closes the lanes")


def snapshots(run: ar.Run) -> None:
    ar.say("first")
    ar.think("a thought")
    with ar.message() as m:
        m.write("before the snapshot, ")
        ar.emit(
            ev.MessagesSnapshotEvent(
                messages=(
                    ev.UserMessage(id="u1", content="Find flights, rewritten"),
                    ev.AssistantMessage(id=m.id, content="before the snapshot, "),
                    ev.UserMessage(id="new", content="added by the snapshot"),
                )
            )
        )
        m.write("after it")
    ar.publish_messages()
    ar.say("last")


def authoritative_activities(run: ar.Run) -> None:
    ar.activity("plan", {"v": 1}, id="p1")
    ar.activity("note", {"v": 2}, id="n1")
    ar.think("kept: the snapshot holds no reasoning")
    for kinds in (["plan"], "oops", None):
        ar.emit(
            ev.MessagesSnapshotEvent(
                messages=(ev.UserMessage(id="u1", content="Find flights"),),
                metadata={"@ag-ui/client": {"authoritativeActivityTypes": kinds}},
            )
        )
        ar.activity("plan", {"v": 3})


PROGRAMS: dict[str, Callable[[ar.Run], None]] = {
    f.__name__: f
    for f in (
        streamed_text_and_subagents,
        tool_calls_and_results,
        reasoning_and_encrypted,
        activities,
        metadata_and_reused_ids,
        chunks,
        snapshots,
        authoritative_activities,
    )
}


class TestAgreesWithTheOfficialClient:
    def test_history_equals_the_clients_messages(self) -> None:
        """For every program, `run.messages` is what the official client's reducer builds."""
        runs: dict[str, ar.Run] = {}
        for name, program in PROGRAMS.items():
            with recorded(make_input(run_id=name, messages=BEFORE)) as run:
                program(run)  # verified as it goes (the run's verifier is on)
            runs[name] = run
        verdicts = client_verify(
            [
                {"events": wire(list(run.events)), "initialMessages": wire(list(BEFORE))}
                for run in runs.values()
            ]
        )
        for (name, run), verdict in zip(runs.items(), verdicts, strict=True):
            assert (True, None) == (verdict["ok"], verdict["error"]), name
            assert verdict["messages"] == history_wire(run), name

    def test_a_message_in_flight_has_its_text_so_far(self) -> None:
        """Mid-message, the history holds the open message with what was written, unended."""
        with recorded(make_input()) as run, ar.message() as m:
            m.write("half ")
            m.write("way")
            mid = run.messages
            [verdict] = client_verify([wire(list(run.events))], mode="full")
            m.write(" there")

        assert ev.AssistantMessage(id=m.id, content="half way") == mid[-1]
        assert "half way there" == run.messages[-1].content
        assert [ar.to_wire(x) for x in mid] == verdict["messages"]


class TestAttribution:
    async def test_each_message_carries_the_scope_that_made_it(self) -> None:
        """A message made in a subagent has its ``subagent_run_id``; the parent's has None."""

        @ar.subagent("researcher")
        async def research() -> str:
            ar.say("found it")
            return ar.current_subagent_id() or ""

        async with recorded(make_input(user="hi")) as run:
            ar.say("on it")
            ids = await asyncio.gather(research(), research())
            handle = run.subagent("writer").start()
            handle.say("written")
            handle.finish()

        owners = [(m.role, m.subagent_run_id) for m in run.messages]
        assert [
            ("user", None),
            ("assistant", None),
            ("assistant", ids[0]),
            ("assistant", ids[1]),
            ("assistant", handle.id),
        ] == owners

    def test_a_tool_call_belongs_to_its_message_and_its_result_to_its_scope(self) -> None:
        """Calls go on the message holding them; a result takes the tag of the scope sending it."""
        with recorded(make_input()) as run:
            with ar.subagent("a") as a:
                said = ar.say("calling")
            call = run.tool_call("t", parent_message_id=said)
            call.result("r")

        holder, result = run.messages
        assert (a.id, ("t",)) == (
            holder.subagent_run_id,
            tuple(c.function.name for c in holder.tool_calls or ()),
        )
        assert (a.id, call.id) == (result.subagent_run_id, result.tool_call_id)


class TestWhatIsRecorded:
    def test_the_history_is_what_was_delivered(self) -> None:
        """A transformer's rewrite is what the history holds, as it is what the client got."""

        def redact(event: ev.BaseEvent) -> ev.BaseEvent:
            if isinstance(event, ev.TextMessageContentEvent):
                return ev.TextMessageContentEvent(
                    message_id=event.message_id, delta=event.delta.replace("secret", "******")
                )
            return event

        with recorded(make_input(), transformers=[redact]) as run, ar.message() as m:
            m.write("the secret ")
            run.remove_transformer(redact)
            m.write("is out")

        assert "the ****** is out" == run.messages[-1].content

    def test_the_input_messages_come_first_unchanged(self) -> None:
        """The messages before the run are the same objects, in the client's order."""
        with recorded(make_input(messages=BEFORE)) as run:
            ar.say("hi")

        assert BEFORE == run.messages[:3]
        assert all(a is b for a, b in zip(BEFORE, run.messages, strict=False))

    def test_reading_twice_with_nothing_open_gives_the_same_tuple(self) -> None:
        """With nothing open the tuple is cached; a new event makes a new one."""
        with recorded(make_input()) as run:
            ar.say("a")
            first = run.messages
            assert first is run.messages
            ar.say("b")
            assert 2 == len(run.messages)

    def test_last_user_text_reads_the_history(self) -> None:
        """`last_user_text` sees the conversation, a loaded history included."""
        loaded = (ev.UserMessage(id="old", content="from the store"),)
        with recorded(make_input(), history=loaded) as run:
            assert "from the store" == run.last_user_text()

    def test_a_handle_reads_the_same_history(self) -> None:
        """A subagent handle's ``messages`` is the run's."""
        with recorded(make_input(user="hi")) as run, ar.subagent("s") as sub:
            ar.say("x")
            assert run.messages == sub.messages


class TestTheHotPath:
    def test_a_streamed_message_keeps_its_text_not_its_deltas(self) -> None:
        """Past `COMPACT_EVERY` pending deltas the history joins them: no delta is kept."""
        with recorded(make_input(), sink=lambda event: None) as run, ar.message() as m:
            deltas = [f"piece {i} " for i in range(4 * COMPACT_EVERY)]
            before = [sys.getrefcount(d) for d in deltas]
            for delta in deltas:
                m.write(delta)
            del delta
            after = [sys.getrefcount(d) for d in deltas]
            held = [a - b for a, b in zip(after, before, strict=True)]

        assert [0] * len(deltas) == held
        assert "".join(deltas) == run.messages[-1].content

    def test_at_most_compact_every_deltas_wait_to_be_joined(self) -> None:
        """Between joins, the pending deltas are held: never more than `COMPACT_EVERY`."""
        with recorded(make_input(), sink=lambda event: None), ar.message() as m:
            deltas = [f"piece {i} " for i in range(COMPACT_EVERY + 10)]
            before = [sys.getrefcount(d) for d in deltas]
            for delta in deltas:
                m.write(delta)
            del delta
            after = [sys.getrefcount(d) for d in deltas]
            held = [a - b for a, b in zip(after, before, strict=True)]
            m.write("end")

        assert [0] * COMPACT_EVERY + [1] * 10 == held

    def test_a_transformer_added_mid_message_records_each_delta_once(self) -> None:
        """Fast path before, the transformers' path after: every delta once, in order."""
        with recorded(make_input()) as run, ar.message() as m:
            m.write("fast, ")
            run.add_transformer(lambda event: event)
            m.write("then transformed")

        assert "fast, then transformed" == run.messages[-1].content


class TestRecordingOff:
    def test_by_default_messages_are_those_before_the_run(self) -> None:
        """By default nothing is kept: `messages` is the input's, as before."""
        inp = make_input(user="hi")
        with ar.Run(inp) as run:
            ar.say("not kept")
            with ar.message() as m:
                m.write("nor this")

        assert inp.messages == run.messages
        assert run.pipeline.history is None

    def test_publish_messages_refuses(self) -> None:
        """A snapshot without the run's messages would drop them at the client: it raises."""
        with (
            ar.Run(make_input()),
            pytest.raises(ar.MessagesNotRecordedError, match="record_messages=True"),
        ):
            ar.publish_messages()


class TestPublishMessages:
    def test_sends_the_history_as_one_snapshot_that_is_not_attributed(self) -> None:
        """Module-level, on the run and on a handle: one MESSAGES_SNAPSHOT of `run.messages`."""
        with recorded(make_input(user="hi")) as run:
            with ar.subagent("s") as sub:
                ar.say("from s")
                ar.publish_messages()
                sub.publish_messages()
            run.publish_messages()
            expected = run.messages

        snapshots = [e for e in wire(list(run.events)) if e["type"] == "MESSAGES_SNAPSHOT"]
        assert 3 == len(snapshots)
        for snapshot in snapshots:
            MessagesSnapshotEvent.model_validate(snapshot)
            assert "subagentRunId" not in snapshot
            assert [ar.to_wire(m) for m in expected] == snapshot["messages"]
        assert_valid(list(run.events))

    def test_outside_a_run_raises(self) -> None:
        """No ambient run: `NoActiveRunError`, naming the call."""
        with pytest.raises(ar.NoActiveRunError, match="publish_messages"):
            ar.publish_messages()

    def test_before_an_interrupt_the_client_gets_the_conversation(self) -> None:
        """Published before pausing, the snapshot reaches the client and the run pauses validly."""
        inp = make_input(user="book it")
        with recorded(inp) as run:
            ar.say("Shall I?")
            ar.publish_messages()
            raise ar.Interrupted(ar.interrupt("approval"))

        [verdict] = client_verify(
            [{"events": wire(list(run.events)), "initialMessages": wire(list(inp.messages))}]
        )
        assert (True, None) == (verdict["ok"], verdict["error"])
        assert history_wire(run) == verdict["messages"]


class TestHistoryArgument:
    def test_a_history_the_client_lacks_is_sent_first(self) -> None:
        """*history* beyond the client's messages: MESSAGES_SNAPSHOT right after RUN_STARTED."""
        loaded = (ev.UserMessage(id="earlier", content="hello"),)
        with recorded(make_input(), history=loaded) as run:
            ar.say("answer")

        events = wire(list(run.events))
        assert ["RUN_STARTED", "MESSAGES_SNAPSHOT", "TEXT_MESSAGE_START"] == [
            e["type"] for e in events[:3]
        ]
        assert [ar.to_wire(m) for m in loaded] == events[1]["messages"]

    @pytest.mark.parametrize(
        ("held", "sent", "history"),
        [
            pytest.param(["u2"], ["u2"], ["u1", "a1", "act1", "u2"], id="thin-client"),
            pytest.param([], [], ["u1", "a1"], id="new-device"),
            pytest.param(
                ["u1", "act1", "a1", "u3"],
                ["u1", "a1", "u3"],
                ["u1", "act1", "a1", "u2", "a2", "u3"],
                id="another-device-spoke-meanwhile",
            ),
        ],
    )
    def test_the_client_ends_holding_the_history_in_its_order(
        self, held: list[str], sent: list[str], history: list[str]
    ) -> None:
        """Whatever part of the thread the client holds, it ends with the run's, in order."""

        def message(mid: str) -> ev.Message:
            if mid.startswith("act"):
                return ev.ActivityMessage(id=mid, activity_type="plan", content={"m": mid})
            if mid.startswith("a"):
                return ev.AssistantMessage(id=mid, content=f"said {mid}")
            return ev.UserMessage(id=mid, content=f"asked {mid}")

        loaded = tuple(message(m) for m in history)
        with recorded(make_input(messages=[message(m) for m in sent]), history=loaded) as run:
            ar.say("answer")

        [verdict] = client_verify(
            [
                {
                    "events": wire(list(run.events)),
                    "initialMessages": [ar.to_wire(message(m)) for m in held],
                }
            ]
        )
        assert (True, None) == (verdict["ok"], verdict["error"])
        assert loaded == run.messages[: len(loaded)]
        assert history_wire(run) == verdict["messages"]

    def test_a_history_equal_to_the_clients_but_for_activities_sends_nothing(self) -> None:
        """Activity messages are never sent back by clients: they do not count as missing."""
        sent = make_input(user="hi")
        loaded = (
            *sent.messages,
            ev.ActivityMessage(id="act", activity_type="plan", content={"a": 1}),
        )
        with recorded(sent, history=loaded) as run:
            pass

        assert ["RUN_STARTED", "RUN_FINISHED"] == [e["type"] for e in wire(list(run.events))]
        assert loaded == run.messages

    def test_a_result_answers_a_call_from_the_history(self) -> None:
        """A call only the history holds is known to the verifier: its result is accepted."""
        with recorded(make_input(), history=BEFORE) as run:
            ar.emit(ev.ToolCallResultEvent(message_id="r", tool_call_id="old-call", content="x"))

        assert "r" == run.messages[3].id

    def test_refuses_what_is_not_a_message(self) -> None:
        """A history of dicts is refused, naming the value."""
        with pytest.raises(TypeError, match=r"not an ambient_runs\.events message"):
            ar.Run(make_input(), history=[{"id": "x", "role": "user", "content": "hi"}])  # type: ignore[list-item]


class TestMergeHistory:
    def test_stored_first_the_clients_copy_in_place_new_ones_after(self) -> None:
        """Stored order; a sent copy replaces its stored one; unknown sent messages follow."""
        stored = (
            ev.UserMessage(id="u1", content="hi"),
            ev.ActivityMessage(id="act", activity_type="t", content={}),
            ev.AssistantMessage(id="a1", content="hello"),
        )
        sent = (
            ev.AssistantMessage(id="a1", content="hello", encrypted_value="e"),
            ev.UserMessage(id="u1", content="hi"),
            ev.UserMessage(id="u2", content="more"),
        )

        merged = ar.merge_history(stored, sent)

        assert (stored[0], stored[1], sent[0], sent[2]) == merged

    def test_a_thin_client_gets_the_whole_thread(self) -> None:
        """A client sending only its new message gets it after the stored conversation."""
        stored = (ev.UserMessage(id="u1", content="hi"),)
        new = ev.UserMessage(id="u2", content="more")

        assert (*stored, new) == ar.merge_history(stored, (new,))


class TestMemoryThreadStore:
    async def test_round_trips_a_thread(self) -> None:
        """What is saved is loaded back; an unknown thread is empty."""
        store = ar.MemoryThreadStore()
        await store.save("t", list(BEFORE))

        assert (BEFORE, ()) == (await store.load("t"), await store.load("other"))
        assert isinstance(store, ar.ThreadStore)
        assert ("t" in store, len(store)) == (True, 1)
        store.forget("t")
        assert () == await store.load("t")

    async def test_forgets_the_least_recently_used_thread_past_its_bound(self) -> None:
        """Past *max_threads*, the thread least recently loaded or saved goes."""
        store = ar.MemoryThreadStore(max_threads=2)
        await store.save("a", BEFORE)
        await store.save("b", BEFORE)
        await store.load("a")
        await store.save("c", BEFORE)

        assert (True, False, True) == ("a" in store, "b" in store, "c" in store)
        assert "<MemoryThreadStore 2 threads>" == repr(store)

    def test_refuses_a_bound_below_one(self) -> None:
        """*max_threads* must be at least 1."""
        with pytest.raises(ValueError, match="max_threads must be >= 1"):
            ar.MemoryThreadStore(max_threads=0)


def body_of(thread: str, run_id: str, messages: Sequence[ev.Message]) -> bytes:
    return json.dumps(
        {
            "threadId": thread,
            "runId": run_id,
            "messages": [ar.to_wire(m) for m in messages],
        }
    ).encode()


async def post(app: AgentApp, body: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post("/", content=body, headers={"content-type": "application/json"})


class TestAgentAppThreads:
    async def test_saves_each_run_and_starts_the_next_from_it(self) -> None:
        """Run 1 is saved; run 2, sent only its new message, starts from the whole thread."""
        store = ar.MemoryThreadStore()
        histories: list[tuple[ev.Message, ...]] = []

        async def agent(run: ar.Run) -> None:
            histories.append(run.messages)
            ar.say(f"reply to {run.last_user_text()}")

        app = AgentApp(agent, threads=store)
        first = ev.UserMessage(id="u1", content="one")
        second = ev.UserMessage(id="u2", content="two")
        await post(app, body_of("t", "r1", [first]))
        response = await post(app, body_of("t", "r2", [second]))

        saved = await store.load("t")
        assert ["u1", "r1-msg-1", "u2", "r2-msg-1"] == [m.id for m in saved]
        assert (first, saved[1], second) == histories[1]
        events = events_of(response.content)
        assert "MESSAGES_SNAPSHOT" == events[1]["type"]  # the client lacked r1's messages

    async def test_a_failed_save_is_a_run_error_the_client_sees(self) -> None:
        """A store that cannot save ends a good run with RUN_ERROR ``thread_store_error``."""

        class Broken(ar.MemoryThreadStore):
            async def save(self, thread_id: str, messages: Sequence[ev.Message]) -> None:
                raise OSError("disk full")

        app = AgentApp(lambda run: ar.say("hi"), threads=Broken())
        events = events_of((await post(app, body_of("t", "r", []))).content)

        assert {
            "type": "RUN_ERROR",
            "message": "the conversation could not be saved; the server's log has the details",
            "code": "thread_store_error",
        } == events[-1]

    async def test_a_failed_agent_still_saves_and_its_error_stands(self) -> None:
        """The agent's exception ends the run; what it said before is saved all the same."""
        store = ar.MemoryThreadStore()

        async def agent(run: ar.Run) -> None:
            ar.say("partial")
            raise ar.AgentError("boom", code="mine")

        events = events_of(
            (await post(AgentApp(agent, threads=store), body_of("t", "r", []))).content
        )

        assert ("RUN_ERROR", "mine") == (events[-1]["type"], events[-1]["code"])
        assert ["partial"] == [m.content for m in await store.load("t")]

    async def test_a_run_cancelled_by_a_disconnect_is_saved(self) -> None:
        """The client leaves mid-run: the run is cancelled and what it said is still saved."""
        store = ar.MemoryThreadStore()
        started = asyncio.Event()

        async def agent(run: ar.Run) -> None:
            ar.say("before the client left")
            started.set()
            await run.cancelled()

        app = AgentApp(agent, threads=store)
        body = body_of("t", "r", [ev.UserMessage(id="u", content="hi")])
        gone = asyncio.Event()
        sent: list[dict[str, Any]] = []
        requested = False

        async def receive() -> dict[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/",
            "headers": [(b"content-type", b"application/json")],
        }
        async with asyncio.timeout(10):
            serving = asyncio.ensure_future(app(scope, receive, send))
            await started.wait()
            gone.set()
            await serving

        assert ["u", "r-msg-1"] == [m.id for m in await store.load("t")]

    async def test_a_failed_load_is_a_503_before_any_stream(self) -> None:
        """A store that cannot load answers 503 and never runs the agent."""

        class Down(ar.MemoryThreadStore):
            async def load(self, thread_id: str) -> tuple[ev.Message, ...]:
                raise ConnectionError("down")

        ran: list[ar.Run] = []
        response = await post(AgentApp(ran.append, threads=Down()), body_of("t", "r", []))

        assert (503, []) == (response.status_code, ran)
        assert "thread store unavailable" == response.json()["error"]

    def test_refuses_what_is_not_a_store_and_options_it_owns(self) -> None:
        """*threads* must be a ThreadStore; *history* and *record_messages* are then its own."""
        with pytest.raises(TypeError, match="threads must be a ThreadStore"):
            AgentApp(lambda run: None, threads={})  # type: ignore[arg-type]
        for option in ({"history": ()}, {"record_messages": False}):
            with pytest.raises(TypeError, match="AgentApp owns the run's"):
                AgentApp(lambda run: None, threads=ar.MemoryThreadStore(), **option)
