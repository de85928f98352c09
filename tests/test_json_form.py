"""Python values as JSON: one conversion for every payload, and `register_json_form`."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import uuid
import warnings
from typing import Any

import attrs
import pydantic
import pytest
from ag_ui.core import (
    RunFinishedEvent,
    StateSnapshotEvent,
    SubagentFinishedEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
)

import ambient_runs as ar
from ambient_runs.testing import assert_valid, make_input, wire


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


@dataclasses.dataclass
class Meeting:
    on: datetime.date
    at: datetime.time
    room: uuid.UUID
    fee: decimal.Decimal
    tags: tuple[str, ...] = ()


class Weather(pydantic.BaseModel):
    city: str
    observed: datetime.datetime
    colour: Colour


@attrs.define
class Report:
    weather: Weather
    size: Size
    meetings: list[Meeting]
    note: str | None = None


MEETING = Meeting(
    datetime.date(2026, 3, 1),
    datetime.time(9, 30),
    uuid.UUID(int=7),
    decimal.Decimal("12.50"),
    ("a", "b"),
)
MEETING_JSON = {
    "on": "2026-03-01",
    "at": "09:30:00",
    "room": "00000000-0000-0000-0000-000000000007",
    "fee": "12.50",
    "tags": ["a", "b"],
}
WEATHER = Weather(city="Paris", observed=datetime.datetime(2026, 3, 1, 8), colour=Colour.RED)
WEATHER_JSON = {"city": "Paris", "observed": "2026-03-01T08:00:00", "colour": "red"}


class TestForms:
    def test_every_documented_form(self) -> None:
        report = Report(WEATHER, Size.LARGE, [MEETING])
        assert {"weather": WEATHER_JSON, "size": 3, "meetings": [MEETING_JSON]} == ar.json_form(
            report
        )

    def test_nested_inside_plain_containers_and_keys(self) -> None:
        value = {"when": [datetime.date(2026, 1, 2)], Colour.RED: 1, 2: (Size.LARGE,)}
        assert {"when": ["2026-01-02"], "red": 1, "2": [3]} == ar.json_form(value)

    def test_json_is_returned_as_is(self) -> None:
        value = {"a": [1, 2.5, None, {"b": True}]}
        assert ar.json_form(value) is value

    @pytest.mark.parametrize(
        ("value", "where"),
        [
            ({"a": [1, {"b": {1, 2}}]}, "$.a[1].b is a set"),
            ([float("nan")], "$[0] is nan"),
            (
                Report(WEATHER, Size.LARGE, [dataclasses.replace(MEETING, tags=(b"x",))]),  # type: ignore[arg-type]
                "$.meetings[0].tags[0] is a bytes",
            ),
            ({(1, 2): 3}, "$ is a tuple key"),
        ],
    )
    def test_errors_name_the_path(self, value: Any, where: str) -> None:
        with pytest.raises(ar.InvalidEventError) as caught:
            ar.json_form(value)
        assert f"has no JSON form: {where}" in str(caught.value)

    def test_a_set_names_the_fix(self) -> None:
        with pytest.raises(ar.InvalidEventError, match=r"ambient_runs\.register_json_form"):
            ar.json_form({1, 2})


class Money:
    def __init__(self, amount: decimal.Decimal, currency: str) -> None:
        self.amount, self.currency = amount, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.amount, self.currency) == (
            other.amount,
            other.currency,
        )

    __hash__ = None  # type: ignore[assignment]


class Euro(Money):
    def __init__(self, amount: decimal.Decimal) -> None:
        super().__init__(amount, "EUR")


ar.register_json_form(
    Money,
    lambda m: {"amount": m.amount, "currency": m.currency},  # Decimal inside: made JSON too
    load=lambda j: Money(decimal.Decimal(j["amount"]), j["currency"]),
)


@attrs.define
class Wallet:
    balance: Money


class TestRegister:
    def test_a_registered_type_and_its_subclasses(self) -> None:
        assert [{"amount": "3", "currency": "EUR"}] == ar.json_form([Euro(decimal.Decimal(3))])

    def test_load_makes_it_a_state_field(self) -> None:
        sent = {"balance": {"amount": "9.99", "currency": "GBP"}}
        with ar.Run(make_input(state=sent), state_type=Wallet) as run:
            assert Wallet(Money(decimal.Decimal("9.99"), "GBP")) == run.state()
        with pytest.raises(ar.InvalidInputError) as caught:
            ar.Run(make_input(state={"balance": {"amount": "x"}}), state_type=Wallet)
        [problem] = caught.value.problems
        assert problem.startswith("$.state.balance: not a Money")

    def test_refuses_what_is_not_a_class(self) -> None:
        with pytest.raises(TypeError, match="needs a class"):
            ar.register_json_form("Money", str)  # type: ignore[arg-type]


class TestEverywhere:
    def test_every_payload_takes_the_same_form(self) -> None:
        """args, result, finish_with, set_state, a subagent's return, activity content."""

        @ar.subagent("forecaster")
        def forecast() -> Weather:
            return WEATHER

        with ar.Run(make_input()) as run:
            with ar.tool_call("weather") as call:
                call.args({"on": MEETING.on, "city": "Paris"})
                call.result(WEATHER)
            forecast()
            ar.activity("meetings", {"next": MEETING})
            run.set_state({"meeting": MEETING, "weather": WEATHER})
            run.finish_with(Report(WEATHER, Size.LARGE, []))
        events = wire(list(run.events))
        assert_valid(list(run.events))
        by_type = {e["type"]: e for e in events}
        args = ToolCallArgsEvent.model_validate(by_type["TOOL_CALL_ARGS"])
        assert {"on": "2026-03-01", "city": "Paris"} == json.loads(args.delta)
        result = ToolCallResultEvent.model_validate(by_type["TOOL_CALL_RESULT"])
        assert WEATHER_JSON == json.loads(result.content)
        finished = SubagentFinishedEvent.model_validate(by_type["SUBAGENT_FINISHED"])
        assert WEATHER_JSON == finished.result
        activity = next(e for e in events if e["type"].startswith("ACTIVITY"))
        assert {"next": MEETING_JSON} == activity["content"]
        snapshot = StateSnapshotEvent.model_validate(by_type["STATE_SNAPSHOT"])
        assert {"meeting": MEETING_JSON, "weather": WEATHER_JSON} == snapshot.snapshot
        done = RunFinishedEvent.model_validate(by_type["RUN_FINISHED"])
        assert {"weather": WEATHER_JSON, "size": 3, "meetings": []} == done.result

    def test_a_dict_state_with_a_date_publishes_deltas(self) -> None:
        with ar.Run(make_input(state={"log": [], "title": "a log of the days " * 4})) as run:
            run.update_state(lambda s: s["log"].append(datetime.date(2026, 1, 1)))
            run.update_state(lambda s: s["log"].append(datetime.date(2026, 1, 2)))
        deltas = [e["delta"] for e in wire(list(run.events)) if e["type"] == "STATE_DELTA"]
        assert [{"op": "add", "path": "/log/-", "value": "2026-01-02"}] == deltas[-1]

    def test_typed_pydantic_state_publishes(self) -> None:
        sent = {**WEATHER_JSON, "city": "Lyon, by the Rhône and the Saône, " * 3}
        with ar.Run(make_input(state=sent), state_type=Weather) as run:
            assert sent["city"] == run.state().city
            run.update_state(lambda w: setattr(w, "colour", Colour.RED))
            run.update_state(lambda w: setattr(w, "observed", datetime.datetime(2026, 3, 2)))
        [delta] = [e["delta"] for e in wire(list(run.events)) if e["type"] == "STATE_DELTA"]
        assert [{"op": "replace", "path": "/observed", "value": "2026-03-02T00:00:00"}] == delta

    def test_a_subagent_return_with_no_form_warns_naming_the_path(self) -> None:
        @ar.subagent("bad")
        def bad() -> dict[str, Any]:
            return {"ids": {1, 2}}

        with ar.Run(make_input()), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert {"ids": {1, 2}} == bad()
        [warning] = caught
        assert issubclass(warning.category, ar.ResultWarning)
        assert "$.ids is a set" in str(warning.message)

    def test_errors_on_payloads_name_the_path(self) -> None:
        match = r"\$\.when\[0\] is a set"
        with ar.Run(make_input()) as run, pytest.raises(ar.InvalidEventError, match=match):
            run.finish_with({"when": [set()]})
