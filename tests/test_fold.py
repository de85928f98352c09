"""The join prelude: a fold of a run's log that the official client accepts mid-run."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.node import client_verify
from support.programs import INPUT, log_of, programs

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._wire import from_wire, to_wire
from ambient_runs.stores import RunView, prelude
from ambient_runs.verify import Verifier

INPUT_WIRE = to_wire(INPUT)

#: A parameter left out.
_MISSING = object()

cases = st.tuples(programs, st.floats(0, 1), st.sampled_from(["success", "error"]))


def joined_at(
    case: tuple[list[Any], float, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The whole log, and the stream of a client joining after a point within it."""
    program, where, finish = case
    log = log_of(program, finish=finish)
    cut = 1 + round(where * (len(log) - 1))
    return log, prelude(log[:cut], INPUT_WIRE) + log[cut:]


def strictly_valid(events: list[dict[str, Any]]) -> None:
    verifier = Verifier(strict=True)
    for event in events:
        verifier.check(from_wire(event))


class TestPrelude:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(cases)
    def test_a_joined_stream_is_valid_to_our_strict_verifier(self, case: Any) -> None:
        log, joined = joined_at(case)

        strictly_valid(log)
        strictly_valid(joined)

    @settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(cases, min_size=25, max_size=25))
    def test_the_client_accepts_it_and_ends_where_a_watcher_ends(self, batch: Any) -> None:
        streams: list[Any] = []
        for case in batch:
            log, joined = joined_at(case)
            watcher = {
                "events": log,
                "initialMessages": INPUT_WIRE["messages"],
                "initialState": INPUT_WIRE["state"],
            }
            streams += [watcher, {"events": joined}]

        verdicts = client_verify(streams)

        for watched, joined_verdict in zip(verdicts[::2], verdicts[1::2], strict=True):
            assert watched["ok"], watched["error"]
            assert joined_verdict["ok"], joined_verdict["error"]
            assert joined_verdict["messages"] == watched["messages"]
            assert joined_verdict["state"] == watched["state"]
            assert joined_verdict["pendingInterrupts"] == watched["pendingInterrupts"]

    def test_a_mid_run_prelude_reopens_what_is_open(self) -> None:
        log = log_of([(9, 0, 1), (0, 1, 0), (1, 1, 7), (3, 0, 0), (4, 1, 3)])
        cut = next(i for i, e in enumerate(log) if e["type"] == "TOOL_CALL_ARGS") + 1

        kinds = [e["type"] for e in prelude(log[:cut], INPUT_WIRE)]

        assert kinds == [
            "RUN_STARTED",
            "MESSAGES_SNAPSHOT",
            "STATE_SNAPSHOT",
            "SUBAGENT_STARTED",
            "TEXT_MESSAGE_START",
            "TOOL_CALL_START",
        ]
        snapshot = prelude(log[:cut], INPUT_WIRE)[1]["messages"]
        assert [m["id"] for m in snapshot] == ["sys", "run-user", "m0", "run-tool-1"]
        assert snapshot[2]["content"] == "w7 "
        assert snapshot[3]["toolCalls"][0]["function"]["arguments"] == '{"q": 3}'

    def test_a_finished_ancestor_of_an_open_subagent_is_announced_and_closed(self) -> None:
        view = RunView(INPUT_WIRE)
        view.apply_all(
            [
                {"type": "RUN_STARTED", "threadId": "thread", "runId": "run"},
                {"type": "SUBAGENT_STARTED", "subagentRunId": "a", "name": "a"},
                {
                    "type": "SUBAGENT_STARTED",
                    "subagentRunId": "b",
                    "name": "b",
                    "parentSubagentRunId": "a",
                },
                {"type": "SUBAGENT_FINISHED", "subagentRunId": "a"},
                {"type": "SUBAGENT_STARTED", "subagentRunId": "c", "name": "c"},
                {"type": "SUBAGENT_FINISHED", "subagentRunId": "c"},
            ]
        )

        announced = [(e["type"], e["subagentRunId"]) for e in view.prelude()[3:]]

        assert announced == [
            ("SUBAGENT_STARTED", "a"),
            ("SUBAGENT_FINISHED", "a"),
            ("SUBAGENT_STARTED", "b"),
        ]

    def test_chunked_streams_replay_the_log(self) -> None:
        log = [
            {"type": "RUN_STARTED", "threadId": "thread", "runId": "run"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "hi"},
        ]

        assert prelude(log, INPUT_WIRE) == log

    def test_an_ended_run_joins_to_its_terminal_event(self) -> None:
        log = log_of([(0, 0, 0), (1, 0, 2), (2, 0, 0)])

        joined = prelude(log, INPUT_WIRE)

        assert joined[-1] == log[-1]
        assert [e["type"] for e in joined] == [
            "RUN_STARTED",
            "MESSAGES_SNAPSHOT",
            "STATE_SNAPSHOT",
            "RUN_FINISHED",
        ]


@pytest.mark.parametrize(
    ("authoritative", "kept"),
    [
        (_MISSING, ["plan-1", "map-1"]),  # no extension: the snapshot holds no activity
        (["plan"], ["map-1"]),
        (None, []),  # every activity type is authoritative
        ([], ["plan-1", "map-1"]),
    ],
)
def test_a_snapshot_drops_the_activity_types_it_is_authoritative_for(
    authoritative: Any, kept: list[str]
) -> None:
    """RunView (the join's fold) keeps what the client keeps, as the run's own history does."""
    metadata = (
        None
        if authoritative is _MISSING
        else {"@ag-ui/client": {"authoritativeActivityTypes": authoritative}}
    )
    events = [
        ev.ActivitySnapshotEvent(message_id="plan-1", activity_type="plan", content={"n": 1}),
        ev.ActivitySnapshotEvent(message_id="map-1", activity_type="map", content={"n": 2}),
        ev.MessagesSnapshotEvent(
            messages=(ev.UserMessage(id="u1", content="hi"),), metadata=metadata
        ),
    ]
    run = ar.Run(INPUT, record_messages=True)
    with run:
        for event in events:
            ar.emit(event)
    view = RunView(INPUT_WIRE)
    for event in run.events:  # the log, RUN_STARTED to RUN_FINISHED
        view.apply(to_wire(event))
    assert [m["id"] for m in view.messages] == [*kept, "u1"]
    assert view.messages == [to_wire(m) for m in run.messages]


class TestDeepState:
    """Issue 31: a state nested 500 deep made every join of its run a 500 (RecursionError)."""

    @staticmethod
    def nested(depth: int, leaf: Any = 1) -> Any:
        value = leaf
        for _ in range(depth):
            value = {"a": value}
        return value

    @staticmethod
    def depth(value: Any) -> int:
        n = 0
        while isinstance(value, dict):
            value, n = value["a"], n + 1
        return n

    async def test_a_join_of_a_run_with_state_500_deep_answers_it(self) -> None:
        """Snapshot, delta and input state 500 deep: the join's prelude carries the state."""
        from test_detached_failures import request

        from ambient_runs.asgi import AgentApp
        from ambient_runs.stores import MemoryStore

        async def agent(run: ar.Run) -> None:
            run.set_state({"deep": self.nested(500)})
            # A delta carrying a deep value (the agent's own differ stops short of this depth).
            more = [ev.AddOperation(path="/more", value=self.nested(500, 2))]
            ar.emit(ev.StateDeltaEvent(delta=more))
            ar.say("done")

        app = AgentApp(agent, store=MemoryStore())
        payload = {"threadId": "t", "runId": "r", "messages": [], "state": self.nested(500)}
        posted = await request(app, "POST", "/", payload)
        joined = await request(app, "GET", "/threads/t/runs/r")

        assert posted.status == 200
        assert any(e["type"] == "STATE_DELTA" for e in posted.events())
        assert joined.status == 200
        snapshot = next(e for e in joined.events() if e["type"] == "STATE_SNAPSHOT")
        assert self.depth(snapshot["snapshot"]["deep"]) == 500
        assert self.depth(snapshot["snapshot"]["more"]) == 500
        assert joined.events()[-1]["type"] == "RUN_FINISHED"

    async def test_state_10000_deep_is_refused_up_front_and_never_joins_as_a_500(self) -> None:
        """Deeper than the JSON parser takes: the POST is a 400, a join a 404."""
        from test_detached_failures import request

        from ambient_runs.asgi import AgentApp
        from ambient_runs.stores import MemoryStore

        async def agent(run: ar.Run) -> None:
            ar.say("never")

        app = AgentApp(agent, store=MemoryStore(), max_body=10**6)
        payload = {"threadId": "t", "runId": "r", "messages": [], "state": self.nested(10_000)}
        with pytest.raises(RecursionError):  # the test's own json.dumps cannot write it
            await request(app, "POST", "/", payload)
        raw = '{"a":' * 10_000 + "1" + "}" * 10_000
        body = '{"threadId":"t","runId":"r","messages":[],"state":' + raw + "}"
        posted = await _raw_post(app, body.encode())
        joined = await request(app, "GET", "/threads/t/runs/r")

        assert posted == 400
        assert joined.status == 404

    def test_the_fold_alone_takes_any_depth_the_parser_lets_in(self) -> None:
        """RunView copies and patches without recursion: 900 deep, below the parser's limit."""
        deep = self.nested(900)
        view = RunView({"state": deep})
        view.apply({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        view.apply({"type": "STATE_SNAPSHOT", "snapshot": {"x": deep}})
        view.apply({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/y", "value": deep}]})
        view.apply(
            {"type": "STATE_DELTA", "delta": [{"op": "test", "path": "/y/a/a", "value": 1}]}
        )  # a failed test leaves the state as it was, as the client's reducer does

        state = view.prelude()[2]["snapshot"]

        assert self.depth(state["x"]) == self.depth(state["y"]) == 900
        assert state["x"] is not deep


async def _raw_post(app: Any, body: bytes) -> int:
    """POST *body* as it is to *app*; the status."""
    status = 0
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
    }
    await app(scope, receive, send)
    return status


def test_messages_read_between_deltas_hold_the_text_so_far() -> None:
    """RunView gathers a message's deltas before joining them; a reader never sees that."""
    view = RunView({"threadId": "t", "runId": "r", "messages": [], "state": {}})
    view.apply({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    view.apply({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    seen = []
    for word in ("one ", "two ", "three"):
        view.apply({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": word})
        seen.append(view.messages[-1]["content"])
    view.apply({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "!"})
    view.apply({"type": "TEXT_MESSAGE_END", "messageId": "m"})

    assert ["one ", "one two ", "one two three"] == seen
    [snapshot] = [e for e in view.prelude() if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [{"id": "m", "role": "assistant", "content": "one two three!"}] == snapshot["messages"]
