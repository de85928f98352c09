"""The client's state: a run starts from ``input.state``, typed, and publishes against it."""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any, TypedDict

import attrs
import httpx
import jsonpatch
import pydantic
import pytest
from ag_ui.core import StateDeltaEvent, StateSnapshotEvent

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import assert_valid, make_input, wire


@attrs.define
class Task:
    title: str
    due_on: datetime.date | None = None


@attrs.define
class Board:
    tasks: list[Task] = attrs.Factory(list)
    done_count: int = 0


@dataclasses.dataclass
class Counter:
    count: int
    label: str = "clicks"


class Notes(TypedDict):
    text: str


class Profile(pydantic.BaseModel):
    name: str
    age: int


def state_events(run: ar.Run) -> list[dict[str, Any]]:
    """The state events of a finished run, in wire form, each checked by the official models."""
    out = []
    for event in wire(list(run.events)):
        if event["type"] == "STATE_SNAPSHOT":
            StateSnapshotEvent.model_validate(event)
            out.append(event)
        elif event["type"] == "STATE_DELTA":
            StateDeltaEvent.model_validate(event)
            out.append(event)
    return out


def client_view(start: Any, events: list[dict[str, Any]]) -> Any:
    """What a client that held *start* holds after applying *events*."""
    state = start
    for event in events:
        if event["type"] == "STATE_SNAPSHOT":
            state = event["snapshot"]
        else:
            state = jsonpatch.apply_patch(state, event["delta"])
    return state


class TestStartsFromTheClient:
    def test_untyped_state_is_the_clients_json_and_a_copy(self) -> None:
        sent = {"todo": ["milk"], "notes": "x" * 80}
        with ar.Run(make_input(state=sent)) as run:
            assert {"todo": ["milk"], "notes": "x" * 80} == run.state()
            run.update_state(lambda s: s["todo"].append("eggs"))
        assert {"todo": ["milk"], "notes": "x" * 80} == sent  # the input itself is untouched
        [delta] = state_events(run)
        assert "STATE_DELTA" == delta["type"]
        assert [{"op": "add", "path": "/todo/-", "value": "eggs"}] == delta["delta"]
        assert_valid(list(run.events))

    def test_typed_attrs_state_from_camel_case_keys(self) -> None:
        sent = {"tasks": [{"title": "pay the rent"}, {"title": "call"}], "doneCount": 2}
        with ar.Run(make_input(state=sent), state_type=Board) as run:
            board = run.state()
            assert Board([Task("pay the rent"), Task("call")], 2) == board
            run.update_state(lambda b: setattr(b, "done_count", 3))
        [delta] = state_events(run)
        assert [{"op": "replace", "path": "/doneCount", "value": 3}] == delta["delta"]
        assert {**sent, "doneCount": 3} == client_view(sent, [delta])

    def test_dates_and_nested_classes_convert(self) -> None:
        sent = {"tasks": [{"title": "pay", "dueOn": "2026-01-05"}]}
        with ar.Run(make_input(state=sent), state_type=Board) as run:
            assert Board([Task("pay", datetime.date(2026, 1, 5))]) == run.state()

    def test_a_default_instance_gives_its_type(self) -> None:
        with ar.Run(make_input(state={"count": 4}), state=Counter(0)) as run:
            assert Counter(4) == run.state()

    def test_typeddict_and_pydantic_state_types(self) -> None:
        with ar.Run(make_input(state={"text": "hi"}), state_type=Notes) as run:
            assert {"text": "hi"} == run.state()
        with ar.Run(make_input(state={"name": "Ada", "age": 36}), state_type=Profile) as run:
            assert Profile(name="Ada", age=36) == run.state()

    def test_a_client_holding_nothing_starts_from_the_default(self) -> None:
        for sent in ({}, None):
            with ar.Run(make_input(state=sent), state=Counter(7)) as run:
                assert Counter(7) == run.state()
                run.publish_state()
            [event] = state_events(run)
            assert {"count": 7, "label": "clicks"} == client_view({}, [event])

    def test_the_first_publish_is_a_snapshot_when_that_is_smaller(self) -> None:
        sent = {"rows": list(range(50))}
        with ar.Run(make_input(state=sent)) as run:
            run.set_state({"rows": []})
        [event] = state_events(run)
        assert ("STATE_SNAPSHOT", {"rows": []}) == (event["type"], event["snapshot"])


class TestNothingToSay:
    def test_no_state_publishes_nothing(self) -> None:
        with ar.Run(make_input()) as run:
            assert run.state() is None
            run.publish_state()
        assert [] == state_events(run)

    def test_an_unchanged_client_state_publishes_nothing(self) -> None:
        with ar.Run(make_input(state={"a": 1})) as run:
            run.publish_state()
            run.update_state(lambda s: None)
        assert [] == state_events(run)

    def test_null_set_on_purpose_is_sent(self) -> None:
        with ar.Run(make_input(state={"a": 1})) as run:
            run.set_state(None)
        [event] = state_events(run)
        assert client_view({"a": 1}, [event]) is None

    @pytest.mark.parametrize("where", ["value", "key"])
    def test_a_delta_utf8_cannot_carry_is_refused_after_plain_ones(self, where: str) -> None:
        """A lone surrogate in a delta's value or path is refused, however plain the last ones."""
        state: dict[str, Any] = {"doc": {"n": 0}, "other": "x"}
        with ar.Run(make_input(), state=state) as run:
            for n in range(1, 5):  # one leaf again and again: the tracker's fastest path
                state["doc"]["n"] = n
                run.publish_state()
            if where == "value":
                state["doc"]["n"] = "\ud800"
            else:
                state["doc"]["\ud800"] = 1
            with pytest.raises(ar.InvalidEventError):
                run.publish_state()
            del state["doc"]["\ud800" if where == "key" else "n"]
            state["doc"]["n"] = 9
            run.publish_state()  # the next publish goes out, and the client catches up
        events = state_events(run)
        assert all("\\ud800" not in json.dumps(event) for event in events)  # its JSON escape
        assert {"doc": {"n": 9}, "other": "x"} == client_view({}, events)
        assert_valid(list(run.events))


class TestRefused:
    def test_a_state_that_does_not_convert_names_every_field(self) -> None:
        sent = {"tasks": [{"dueOn": "soon"}, {"title": 3}], "doneCount": "2"}
        with pytest.raises(ar.InvalidInputError) as caught:
            ar.Run(make_input(state=sent), state_type=Board)
        assert isinstance(caught.value, ValueError)
        assert {
            "$.state.tasks[0].title: required, missing",
            "$.state.tasks[0].dueOn: expected an ISO 8601 date, got 'soon'",
            "$.state.tasks[1].title: expected a string, got int",
            "$.state.doneCount: expected an integer, got str",
        } == set(caught.value.problems)

    def test_a_state_nested_past_the_recursion_limit(self) -> None:
        deep: Any = "x"
        for _ in range(5000):
            deep = {"k": deep}
        with pytest.raises(ar.InvalidInputError) as caught:
            ar.Run(make_input(state=deep))
        assert ("$.state: nesting exceeds the recursion limit",) == caught.value.problems

    def test_pydantic_problems_are_located(self) -> None:
        with pytest.raises(ar.InvalidInputError) as caught:
            ar.Run(make_input(state={"name": "Ada", "age": "old"}), state_type=Profile)
        [problem] = caught.value.problems
        assert problem.startswith("$.state.age: ")

    def test_a_type_that_is_no_state_type(self) -> None:
        with pytest.raises(TypeError, match="state_type=<class 'int'> is not a state type"):
            ar.Run(make_input(state={"a": 1}), state_type=int)

    async def test_agent_app_answers_422_naming_the_field(self) -> None:
        ran = []

        async def agent(run: ar.Run) -> None:
            ran.append(run)

        app = AgentApp(agent, state_type=Counter)
        body = {"threadId": "t", "runId": "r", "messages": [], "state": {"count": "many"}}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            response = await client.post("/", json=body)
            good = await client.post("/", json={**body, "state": {"count": 1}})
        assert 422 == response.status_code
        assert {
            "error": "invalid state",
            "detail": ["$.state.count: expected an integer, got str"],
        } == json.loads(response.content)
        assert 200 == good.status_code
        assert [Counter(1)] == [run.state() for run in ran]

    async def test_the_starlette_helper_answers_422_too(self) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        from ambient_runs.adapters.starlette import serve

        async def agent(run: ar.Run) -> None:
            ar.say(f"count {run.state().count}")

        async def route(request: Request) -> Response:
            return serve(agent, request, state_type=Counter)

        app = Starlette(routes=[Route("/agent", route, methods=["POST"])])
        body = {"threadId": "t", "runId": "r", "messages": [], "state": {"label": 1}}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            response = await client.post("/agent", json=body)
        assert 422 == response.status_code
        assert {
            "error": "invalid state",
            "detail": [
                "$.state.count: required, missing",
                "$.state.label: expected a string, got int",
            ],
        } == json.loads(response.content)
