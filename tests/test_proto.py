"""
The binary transport (`ambient_runs.proto`), judged by the official client.

Every event is encoded here and decoded by ``parseProtoStream`` of
``@ag-ui/client`` 1.0.4 (``tests/support/node_proto.py``); what it decodes must equal
the event's wire form (what the JSON transport carries). The events are every
valid event of the differential test's seeded random streams and of the
verifier's corpus: all 31 event types, with metadata, nulls, nested JSON,
non-ASCII text and every outcome shape.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from support.node_proto import proto_decode
from test_verify_differential import StreamGenerator
from verify_corpus import CASES

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import from_wire, proto, to_wire
from ambient_runs.errors import InvalidInputError
from ambient_runs.events import EVENT_CLASSES
from ambient_runs.testing import make_input


def _valid_events(count: int = 400, seed: int = 35) -> list[ev.BaseEvent]:
    """The events of seeded random streams and of the corpus that parse as AG-UI events."""
    rng = random.Random(seed)
    streams = [StreamGenerator(rng).stream() for _ in range(count)]
    streams += [list(case.events) for case in CASES]
    out = []
    for stream in streams:
        for wire in stream:
            try:
                out.append(from_wire(wire))
            except (InvalidInputError, ValueError, TypeError, KeyError):
                continue
    return out


def _plain(value: Any) -> Any:
    """JSON as the client has it: integral floats as ints (protobuf numbers are doubles)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _expected(event: ev.BaseEvent) -> Any:
    """The event's JSON, as the client decodes it from protobuf."""
    wire = _plain(json.loads(ar.encode_json(event)))
    if "input" in wire:  # the client fills in RunAgentInput's empty lists
        wire["input"] = {"tools": [], "context": [], "resume": [], **wire["input"]}
    return wire


def test_every_event_type_decodes_to_its_wire_form() -> None:
    events = _valid_events()
    assert {type(e) for e in events} == set(EVENT_CLASSES.values())  # all 31 types

    [decoded] = proto_decode([b"".join(proto.encode(e) for e in events)], piece=7)

    assert "error" not in decoded, decoded.get("error")
    got = [_plain(e) for e in decoded["events"]]
    expected = [_expected(e) for e in events]
    wrong = [(x, y) for x, y in zip(got, expected, strict=True) if x != y]
    assert [] == wrong[:5]


def test_the_fast_encoders_write_the_general_paths_bytes() -> None:
    """Events whose fields are all strings are encoded off the object: the same bytes."""
    events = [e for e in _valid_events(100) if type(e) in proto._FLAT]
    assert len({type(e) for e in events}) == len(proto._FLAT)

    assert [proto.encode(e) for e in events] == [proto.encode_wire(to_wire(e)) for e in events]


def test_a_run_decodes_to_its_object_stream() -> None:
    """A whole run (subagent, message, tool call, state, usage) streamed as frames."""

    async def agent(run: ar.Run) -> None:
        with ar.subagent("helper", description="héllo"), ar.message() as m:
            m.write("naïve ")
            m.write("東京")
        with ar.tool_call("search") as call:
            call.args({"q": "x", "n": 3, "deep": {"a": [1, 2.5, None, True]}})
        ar.usage(provider="openai", model="gpt", input_tokens=12, output_tokens=3)
        run.finish_with({"answer": 42})

    import asyncio

    async def both() -> tuple[list[ev.BaseEvent], bytes]:
        objects = [e async for e in ar.stream(agent, make_input())]
        body = b"".join([f async for f in proto.frames(ar.stream(agent, make_input()))])
        return objects, body

    objects, body = asyncio.run(both())
    [decoded] = proto_decode([body], piece=3)

    assert "error" not in decoded
    assert [_plain(e) for e in decoded["events"]] == [_expected(e) for e in objects]


def test_accept_names_the_binary_transport_only_explicitly() -> None:
    assert proto.accepts(proto.CONTENT_TYPE)
    assert proto.accepts(f"text/event-stream;q=0.5, {proto.CONTENT_TYPE}")
    assert not proto.accepts(None)
    assert not proto.accepts("*/*")
    assert not proto.accepts("text/event-stream")
    assert not proto.accepts(f"{proto.CONTENT_TYPE};q=0")


def test_an_event_without_a_binary_form_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="serve this run as SSE"):
        proto.encode_wire({"type": "NOT_AN_EVENT"})


def test_importing_the_library_does_not_import_protobuf() -> None:
    import subprocess
    import sys

    code = "import sys, ambient_runs, ambient_runs.proto; print('google.protobuf' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert done.stdout.strip() == b"False"
