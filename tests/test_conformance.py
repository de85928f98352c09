"""
Conformance with the official Python SDK, ``ag-ui-protocol==1.0.0``.

For every event type, message type and nested record, the official pydantic
model accepts our wire form and dumps it back unchanged, our reader takes the
official dump back to the same wire form, and our SSE frame is byte for byte
what the official ``EventEncoder`` writes.
"""

from __future__ import annotations

from typing import Any

import ag_ui.core
import pytest
from ag_ui._generated import models as official_models
from ag_ui.encoder import EventEncoder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from support import strategies

from ambient_runs import events as ev
from ambient_runs._wire import _CONVERTER, encode_json, from_wire, to_wire

CONFORMANCE = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def official(cls: type[Any]) -> type[BaseModel]:
    """Return the official model named like *cls*, from ``ag_ui.core`` or the generated models."""
    model = getattr(ag_ui.core, cls.__name__, None) or getattr(official_models, cls.__name__)
    assert isinstance(model, type)
    assert issubclass(model, BaseModel)
    return model


def official_dump(model: BaseModel) -> Any:
    """Dump *model* the way the official encoder does, as Python values."""
    return model.model_dump(mode="json", by_alias=True)


def cases(classes: Any) -> list[Any]:
    """Parametrize over *classes*, each case named for its class."""
    return [pytest.param(cls, id=cls.__name__) for cls in classes]


EVENT_CASES = cases(ev.EVENT_CLASSES.values())
MESSAGE_CASES = cases(ev.MESSAGE_CLASSES.values())
NESTED_CASES = cases(
    [
        *strategies.PARTS,
        *strategies.SOURCES,
        *strategies.OPERATIONS,
        *strategies.NESTED,
    ]
)


class TestCatalogue:
    def test_event_types_are_the_official_31(self) -> None:
        """Our event classes cover exactly the official EventType members, all 31."""
        expected = {member.value for member in official_models.EventType}

        actual = {str(kind) for kind in ev.EVENT_CLASSES}

        assert (31, expected) == (len(actual), actual)

    def test_event_type_enums_agree(self) -> None:
        """Our EventType has the official members, spelled the same, in the same order."""
        expected = [(m.name, m.value) for m in official_models.EventType]

        actual = [(m.name, m.value) for m in ev.EventType]

        assert expected == actual

    @pytest.mark.parametrize("cls", EVENT_CASES)
    def test_event_class_tagged_with_its_type(self, cls: type[Any]) -> None:
        """Each event class carries the official discriminator of the model of the same name."""
        expected = official(cls).model_fields["type"].default

        actual = cls.TYPE

        assert expected == actual

    def test_every_class_has_a_strategy(self) -> None:
        """support/strategies.py builds every event, message, part, source and patch operation."""
        expected = {
            *ev.EVENT_CLASSES.values(),
            *ev.MESSAGE_CLASSES.values(),
            *ev.PART_CLASSES.values(),
            *ev.SOURCE_CLASSES.values(),
            *ev.OPERATION_CLASSES.values(),
        }

        actual = {
            *strategies.EVENTS,
            *strategies.MESSAGES,
            *strategies.PARTS,
            *strategies.SOURCES,
            *strategies.OPERATIONS,
        }

        assert expected == actual


class TestOfficialModelsAcceptOurWire:
    @pytest.mark.parametrize("cls", EVENT_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_event(self, cls: type[Any], data: st.DataObject) -> None:
        """The official model validates our event's wire form and dumps exactly that dict."""
        wire = to_wire(data.draw(strategies.EVENTS[cls]))

        dumped = official_dump(official(cls).model_validate(wire))

        assert wire == dumped

    @pytest.mark.parametrize("cls", MESSAGE_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_message(self, cls: type[Any], data: st.DataObject) -> None:
        """The official model validates our message's wire form and dumps exactly that dict."""
        wire = to_wire(data.draw(strategies.MESSAGES[cls]))

        dumped = official_dump(official(cls).model_validate(wire))

        assert wire == dumped

    @pytest.mark.parametrize("cls", NESTED_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_nested(self, cls: type[Any], data: st.DataObject) -> None:
        """The official model validates each nested record's wire form and dumps exactly that."""
        obj = data.draw(strategies.ALL_NESTED[cls])
        wire = to_wire(obj)

        dumped = official_dump(official(cls).model_validate(wire))

        assert wire == dumped


class TestOurReaderAcceptsOfficialDumps:
    @pytest.mark.parametrize("cls", EVENT_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_event(self, cls: type[Any], data: st.DataObject) -> None:
        """from_wire reads the official dump of an event, and to_wire writes it back unchanged."""
        dumped = official_dump(
            official(cls).model_validate(to_wire(data.draw(strategies.EVENTS[cls])))
        )

        event = from_wire(dumped)

        assert cls is type(event)
        assert dumped == to_wire(event)

    @pytest.mark.parametrize("cls", MESSAGE_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_message(self, cls: type[Any], data: st.DataObject) -> None:
        """The converter reads the official dump of a message by role and writes it back as is."""
        dumped = official_dump(
            official(cls).model_validate(to_wire(data.draw(strategies.MESSAGES[cls])))
        )

        message = _CONVERTER.structure(dumped, ev.Message)

        assert cls is type(message)
        assert dumped == to_wire(message)

    @pytest.mark.parametrize("cls", NESTED_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_nested(self, cls: type[Any], data: st.DataObject) -> None:
        """The converter reads the official dump of a nested record and writes it back as is."""
        dumped = official_dump(
            official(cls).model_validate(to_wire(data.draw(strategies.ALL_NESTED[cls])))
        )

        obj = _CONVERTER.structure(dumped, cls)

        assert dumped == to_wire(obj)


class TestSseBytes:
    @pytest.mark.parametrize("cls", EVENT_CASES)
    @CONFORMANCE
    @given(data=st.data())
    def test_frame_matches_official_encoder(self, cls: type[Any], data: st.DataObject) -> None:
        """Our SSE frame of an event is byte for byte what the official EventEncoder writes."""
        event = data.draw(strategies.EVENTS[cls])
        official_event = official(cls).model_validate(to_wire(event))

        expected = EventEncoder().encode(official_event).encode()
        actual = b"data: " + encode_json(event) + b"\n\n"

        assert expected == actual
