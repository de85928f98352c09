"""Tests for ambient_runs.events: construction checks, immutability and discriminators."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest

from ambient_runs import InvalidEventError
from ambient_runs import events as ev

MAX = 2**53 - 1

FUNCTION = ev.FunctionCall(name="f", arguments="{}")


def rejects(cls: type[Any], field: str) -> Any:
    """Expect an InvalidEventError whose message starts with "<Class>.<field> must be"."""
    return pytest.raises(InvalidEventError, match=rf"^{cls.__name__}\.{field} must be ")


#: Every class with a discriminator, and that discriminator's name.
TAGGED: list[tuple[type[Any], str]] = [
    *((cls, "type") for cls in ev.EVENT_CLASSES.values()),
    *((cls, "role") for cls in ev.MESSAGE_CLASSES.values()),
    *((cls, "type") for cls in ev.PART_CLASSES.values()),
    *((cls, "type") for cls in ev.SOURCE_CLASSES.values()),
    *((cls, "op") for cls in ev.OPERATION_CLASSES.values()),
    (ev.ToolCall, "type"),
    (ev.ReasoningMessageStartEvent, "role"),
    (ev.RunFinishedSuccessOutcome, "type"),
    (ev.RunFinishedInterruptOutcome, "type"),
    (ev.RunFinishedCancelledOutcome, "type"),
    (ev.SubagentFinishedSuccessOutcome, "type"),
    (ev.SubagentFinishedSuspendedOutcome, "type"),
]


class TestInvalidEventError:
    def test_is_a_value_error(self) -> None:
        """A construction error is caught by a plain except ValueError."""
        with pytest.raises(ValueError, match="timestamp"):
            ev.StepStartedEvent(step_name="s", timestamp=1.5)  # type: ignore[arg-type]


class TestTimestamp:
    @pytest.mark.parametrize(
        "value",
        [1.0, 1.5, True, False, MAX + 1, -MAX - 1, 2**64, "1"],
        ids=["1.0", "1.5", "True", "False", "2**53", "-2**53", "2**64", "string"],
    )
    def test_rejects_non_int_or_out_of_range(self, value: object) -> None:
        """A float, a bool, a string or an int beyond ±(2**53 - 1) is rejected."""
        with rejects(ev.StepStartedEvent, "timestamp"):
            ev.StepStartedEvent(step_name="s", timestamp=value)  # type: ignore[arg-type]

    @pytest.mark.parametrize("value", [None, 0, -1, MAX, -MAX, 1_764_670_000_000])
    def test_accepts_ints_within_bounds(self, value: int | None) -> None:
        """Any int within ±(2**53 - 1), and None, is accepted as given."""
        actual = ev.StepStartedEvent(step_name="s", timestamp=value).timestamp

        assert value == actual


class TestTokenUsage:
    @pytest.mark.parametrize(
        "value",
        [-1, 1.0, 2.5, True, MAX + 1, "3"],
        ids=["negative", "1.0", "2.5", "True", "2**53", "string"],
    )
    def test_rejects_bad_counts(self, value: object) -> None:
        """A negative, float, bool, string or too large token count is rejected."""
        with rejects(ev.TokenUsage, "input_tokens"):
            ev.TokenUsage(input_tokens=value)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "field",
        [
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "reasoning_tokens",
            "cached_input_tokens",
            "cache_write_input_tokens",
        ],
    )
    def test_every_count_is_checked(self, field: str) -> None:
        """Each of the six counts rejects a negative value."""
        with rejects(ev.TokenUsage, field):
            ev.TokenUsage(**{field: -1})

    def test_accepts_zero_and_the_maximum(self) -> None:
        """Zero and 2**53 - 1 are valid counts."""
        usage = ev.TokenUsage(input_tokens=0, output_tokens=MAX)

        expected = (0, MAX)

        actual = (usage.input_tokens, usage.output_tokens)

        assert expected == actual


class TestRoles:
    @pytest.mark.parametrize("cls", [ev.TextMessageStartEvent, ev.TextMessageChunkEvent])
    @pytest.mark.parametrize("role", ["tool", "reasoning", "activity", "bot", "", 1])
    def test_text_role_outside_the_four_is_rejected(self, cls: type[Any], role: object) -> None:
        """A text message may only stream as developer, system, assistant or user; never tool."""
        with rejects(cls, "role"):
            cls(message_id="m", role=role)

    @pytest.mark.parametrize("role", ["developer", "system", "assistant", "user", None])
    def test_text_roles_accepted(self, role: str | None) -> None:
        """The four text roles, and no role (meaning assistant), are accepted."""
        actual = ev.TextMessageStartEvent(message_id="m", role=role).role  # type: ignore[arg-type]

        assert role == actual

    def test_tool_result_role_is_only_tool(self) -> None:
        """TOOL_CALL_RESULT.role may only be "tool"."""
        with rejects(ev.ToolCallResultEvent, "role"):
            ev.ToolCallResultEvent(
                message_id="m",
                tool_call_id="c",
                content="x",
                role="assistant",  # type: ignore[arg-type]
            )

    def test_encrypted_value_subtype(self) -> None:
        """REASONING_ENCRYPTED_VALUE.subtype is "tool-call" or "message", nothing else."""
        with rejects(ev.ReasoningEncryptedValueEvent, "subtype"):
            ev.ReasoningEncryptedValueEvent(
                subtype="tool_call",  # type: ignore[arg-type]
                entity_id="c",
                encrypted_value="x",
            )

    def test_resume_status(self) -> None:
        """A resume entry's status is "resolved" or "cancelled", nothing else."""
        with rejects(ev.ResumeEntry, "status"):
            ev.ResumeEntry(interrupt_id="i", status="done")  # type: ignore[arg-type]


class TestOutcomes:
    def test_interrupt_outcome_needs_an_interrupt(self) -> None:
        """An interrupt outcome with no interrupts is rejected."""
        with rejects(ev.RunFinishedInterruptOutcome, "interrupts"):
            ev.RunFinishedInterruptOutcome(interrupts=[])

    def test_interrupt_outcome_holds_only_interrupts(self) -> None:
        """An interrupt outcome rejects items that are not Interrupts."""
        with rejects(ev.RunFinishedInterruptOutcome, "interrupts"):
            ev.RunFinishedInterruptOutcome(interrupts=[{"id": "i", "reason": "r"}])  # type: ignore[list-item]

    def test_run_finished_outcome_type(self) -> None:
        """RUN_FINISHED only takes a run outcome, not a subagent one."""
        with rejects(ev.RunFinishedEvent, "outcome"):
            ev.RunFinishedEvent(
                thread_id="t",
                run_id="r",
                outcome=ev.SubagentFinishedSuccessOutcome(),  # type: ignore[arg-type]
            )

    def test_subagent_finished_outcome_type(self) -> None:
        """SUBAGENT_FINISHED only takes a subagent outcome, not a run one."""
        with rejects(ev.SubagentFinishedEvent, "outcome"):
            ev.SubagentFinishedEvent(
                subagent_run_id="s",
                outcome=ev.RunFinishedCancelledOutcome(),  # type: ignore[arg-type]
            )


class TestJsonPointers:
    @pytest.mark.parametrize(
        "pointer",
        ["a", "a/b", "/~", "/~2", "/a~", "/a/~x", "\n", "#/a", " /a", 1, None],
    )
    def test_malformed_pointers_are_rejected(self, pointer: object) -> None:
        """A path that is not "" or /-separated tokens with ~0/~1 escapes is rejected."""
        with rejects(ev.AddOperation, "path"):
            ev.AddOperation(path=pointer, value=1)  # type: ignore[arg-type]

    @pytest.mark.parametrize("cls", [ev.MoveOperation, ev.CopyOperation])
    def test_from_is_checked_too(self, cls: type[Any]) -> None:
        """The from_ path of move and copy must be a JSON Pointer as well."""
        with rejects(cls, "from_"):
            cls(from_="a", path="/b")

    @pytest.mark.parametrize("pointer", ["", "/", "/a/b", "/~0/~1", "/0/-", "/a\n", "/ü/😀", "//"])
    def test_wellformed_pointers_are_accepted(self, pointer: str) -> None:
        """ "", "/", escapes, array indexes and any other characters inside tokens are accepted."""
        actual = ev.RemoveOperation(path=pointer).path

        assert pointer == actual


class TestFieldTypes:
    @pytest.mark.parametrize(
        ("cls", "kwargs", "field"),
        [
            (ev.TextMessageContentEvent, {"message_id": 1, "delta": "d"}, "message_id"),
            (ev.TextMessageContentEvent, {"message_id": None, "delta": "d"}, "message_id"),
            (ev.TextMessageContentEvent, {"message_id": b"m", "delta": "d"}, "message_id"),
            (ev.TextMessageContentEvent, {"message_id": "m", "delta": None}, "delta"),
            (ev.ToolCallStartEvent, {"tool_call_id": 1, "tool_call_name": "f"}, "tool_call_id"),
            (ev.StepStartedEvent, {"step_name": "s", "subagent_run_id": 1}, "subagent_run_id"),
            (ev.SubagentStartedEvent, {"subagent_run_id": None, "name": "n"}, "subagent_run_id"),
            (ev.RunStartedEvent, {"thread_id": "t", "run_id": 7}, "run_id"),
            (ev.UserMessage, {"id": None, "content": "hi"}, "id"),
            (ev.ToolMessage, {"id": "t", "content": "x", "tool_call_id": 3}, "tool_call_id"),
            (ev.Interrupt, {"id": 1, "reason": "r"}, "id"),
            (ev.ToolCall, {"id": ["c"], "function": FUNCTION}, "id"),
        ],
    )
    def test_ids_must_be_strings(self, cls: type[Any], kwargs: dict[str, Any], field: str) -> None:
        """Ids and other string fields reject numbers, bytes, lists and (when required) None."""
        with rejects(cls, field):
            cls(**kwargs)

    def test_empty_string_is_a_valid_id(self) -> None:
        """The empty string is a legal id, subagent run ids included."""
        event = ev.TextMessageEndEvent(message_id="", subagent_run_id="")

        expected = ("", "")

        actual = (event.message_id, event.subagent_run_id)

        assert expected == actual

    @pytest.mark.parametrize("value", [[], "x", 1, ()])
    def test_metadata_must_be_an_object(self, value: object) -> None:
        """metadata is a dict or absent; an array, string or number is rejected."""
        with rejects(ev.StepStartedEvent, "metadata"):
            ev.StepStartedEvent(step_name="s", metadata=value)  # type: ignore[arg-type]

    def test_activity_content_must_be_an_object(self) -> None:
        """ACTIVITY_SNAPSHOT.content is a JSON object."""
        with rejects(ev.ActivitySnapshotEvent, "content"):
            ev.ActivitySnapshotEvent(message_id="m", activity_type="a", content=[1])  # type: ignore[arg-type]

    def test_replace_must_be_a_bool(self) -> None:
        """ACTIVITY_SNAPSHOT.replace is a bool or absent."""
        with rejects(ev.ActivitySnapshotEvent, "replace"):
            ev.ActivitySnapshotEvent(
                message_id="m",
                activity_type="a",
                content={},
                replace=1,  # type: ignore[arg-type]
            )

    @pytest.mark.parametrize("content", [None, 1, {"type": "text"}, ["text"]])
    def test_content_is_a_string_or_parts(self, content: object) -> None:
        """Message content is a string or a sequence of content parts."""
        with rejects(ev.UserMessage, "content"):
            ev.UserMessage(id="u", content=content)  # type: ignore[arg-type]

    def test_media_part_needs_a_source(self) -> None:
        """A media part's source is a DataSource, UrlSource or FileSource."""
        with rejects(ev.ImagePart, "source"):
            ev.ImagePart(source={"type": "url", "value": "u"})  # type: ignore[arg-type]

    def test_tool_call_function_type(self) -> None:
        """A tool call's function is a FunctionCall."""
        with rejects(ev.ToolCall, "function"):
            ev.ToolCall(id="c", function={"name": "f", "arguments": "{}"})  # type: ignore[arg-type]

    def test_run_started_input_type(self) -> None:
        """RUN_STARTED.input is a RunAgentInput or absent."""
        with rejects(ev.RunStartedEvent, "input"):
            ev.RunStartedEvent(thread_id="t", run_id="r", input={"threadId": "t"})  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "value",
        ["abc", None, 5, (m for m in ()), {"a": 1}],
        ids=["string", "None", "number", "generator", "dict"],
    )
    def test_sequences_reject_non_sequences(self, value: object) -> None:
        """Sequence fields reject a string (not split into characters), None, generators, dicts."""
        with rejects(ev.MessagesSnapshotEvent, "messages"):
            ev.MessagesSnapshotEvent(messages=value)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("cls", "field"),
        [
            (ev.RunFinishedSuccessOutcome, "pending_tool_call_ids"),
            (ev.SubagentFinishedSuspendedOutcome, "interrupt_ids"),
        ],
    )
    def test_id_lists_reject_a_bare_string(self, cls: type[Any], field: str) -> None:
        """A single id string is not taken for a list of its characters."""
        with rejects(cls, field):
            cls(**{field: "call-1"})

    def test_lists_become_tuples(self) -> None:
        """Lists given for sequence fields are stored as tuples."""
        event = ev.StateDeltaEvent(delta=[ev.RemoveOperation(path="/a")])

        actual = event.delta

        assert (ev.RemoveOperation(path="/a"),) == actual


class TestImmutability:
    @pytest.mark.parametrize(
        "obj",
        [
            ev.TextMessageEndEvent(message_id="m"),
            ev.UserMessage(id="u", content="hi"),
            ev.RunAgentInput(thread_id="t", run_id="r"),
            ev.AddOperation(path="", value=1),
        ],
        ids=["event", "message", "input", "operation"],
    )
    def test_frozen(self, obj: Any) -> None:
        """Events and records cannot be changed in place."""
        field = attrs.fields(type(obj))[-1].name

        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(obj, field, None)

    def test_evolve_returns_a_changed_copy(self) -> None:
        """attrs.evolve gives a new event with the change, leaving the original alone."""
        event = ev.TextMessageContentEvent(message_id="m", delta="d")
        expected = (
            ev.TextMessageContentEvent(message_id="m", delta="d"),
            ev.TextMessageContentEvent(
                message_id="m", delta="d", timestamp=5, subagent_run_id="s"
            ),
        )

        changed = attrs.evolve(event, timestamp=5, subagent_run_id="s")

        assert expected == (event, changed)

    def test_evolve_validates(self) -> None:
        """attrs.evolve runs the same checks as construction."""
        event = ev.TextMessageContentEvent(message_id="m", delta="d")

        with rejects(ev.TextMessageContentEvent, "timestamp"):
            attrs.evolve(event, timestamp=1.5)

    def test_evolve_keeps_the_discriminator(self) -> None:
        """An evolved REASONING_MESSAGE_START keeps its type and role."""
        event = attrs.evolve(ev.ReasoningMessageStartEvent(message_id="m"), message_id="n")

        expected = (ev.EventType.REASONING_MESSAGE_START, "reasoning", "n")

        actual = (event.type, event.role, event.message_id)

        assert expected == actual


class TestDiscriminators:
    @pytest.mark.parametrize(
        ("cls", "tag"), [pytest.param(cls, tag, id=cls.__name__) for cls, tag in TAGGED]
    )
    def test_not_an_init_argument(self, cls: type[Any], tag: str) -> None:
        """The discriminator is fixed by the class and cannot be passed to the constructor."""
        expected = (False, False)

        actual = (attrs.fields_dict(cls)[tag].init, tag in inspect.signature(cls).parameters)

        assert expected == actual

    @pytest.mark.parametrize("cls", ev.EVENT_CLASSES.values(), ids=lambda cls: cls.__name__)
    def test_passing_the_type_fails(self, cls: type[Any]) -> None:
        """Passing type= to an event constructor is a TypeError, whatever the value."""
        with pytest.raises(TypeError, match="unexpected keyword argument 'type'"):
            cls(type=cls.TYPE)

    @pytest.mark.parametrize(
        ("kind", "cls"), [pytest.param(k, c, id=str(k)) for k, c in ev.EVENT_CLASSES.items()]
    )
    def test_event_type_matches_class(self, kind: ev.EventType, cls: type[Any]) -> None:
        """Each event class's type default and TYPE are its EVENT_CLASSES key."""
        actual = (attrs.fields_dict(cls)["type"].default, cls.TYPE)

        assert (kind, kind) == actual

    def test_event_classes_are_the_31(self) -> None:
        """EVENT_CLASSES maps all 31 EventType members, in declaration order."""
        expected = list(ev.EventType)

        actual = list(ev.EVENT_CLASSES)

        assert expected == actual


def _module_tree() -> ast.Module:
    return ast.parse(Path(ev.__file__).read_text())


class TestOneListPerFamily:
    def test_all_names_every_public_class(self) -> None:
        """Every public class defined in the module, VideoPart included, is in ``__all__``."""
        defined = {
            node.name
            for node in _module_tree().body
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
        }

        assert "VideoPart" in defined
        assert set() == defined - set(ev.__all__)

    def test_all_names_every_alias_but_the_free_form_json(self) -> None:
        """The public type aliases are exported, except JSON and Metadata (free-form payloads)."""
        aliases = {
            node.target.id
            for node in _module_tree().body
            if isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and ast.unparse(node.annotation) == "TypeAlias"
            and not node.target.id.startswith("_")
        }

        assert {"JSON", "Metadata"} == aliases - set(ev.__all__)
        assert {"Event", "Message", "ContentPart", "PartSource", "JsonPatchOperation"} <= aliases

    def test_all_is_sorted_and_names_only_what_exists(self) -> None:
        """``__all__`` is sorted, without repeats, and each name is defined in the module."""
        assert sorted(set(ev.__all__)) == list(ev.__all__)
        assert [] == [name for name in ev.__all__ if not hasattr(ev, name)]

    @pytest.mark.parametrize(
        ("base", "registry"),
        [
            (ev.BaseEvent, ev.EVENT_CLASSES),
            (ev._MessageBase, ev.MESSAGE_CLASSES),
            (ev._MediaPart, ev.PART_CLASSES),
        ],
        ids=["events", "messages", "media parts"],
    )
    def test_every_subclass_is_registered(self, base: type[Any], registry: dict[Any, Any]) -> None:
        """A class defined in the model but left out of its family's union would be caught here."""
        defined = {
            cls
            for name in ev.__all__
            if isinstance(cls := getattr(ev, name), type)
            and issubclass(cls, base)
            and cls is not base
        }

        assert set() == defined - set(registry.values())

    @pytest.mark.parametrize(
        ("union", "registry"),
        [
            (ev.Event, ev.EVENT_CLASSES),
            (ev.Message, ev.MESSAGE_CLASSES),
            (ev.ContentPart, ev.PART_CLASSES),
            (ev.PartSource, ev.SOURCE_CLASSES),
            (ev.JsonPatchOperation, ev.OPERATION_CLASSES),
            (ev.RunFinishedOutcome, ev.RUN_OUTCOME_CLASSES),
            (ev.SubagentFinishedOutcome, ev.SUBAGENT_OUTCOME_CLASSES),
        ],
        ids=lambda x: getattr(x, "__name__", ""),
    )
    def test_registry_is_its_union(self, union: Any, registry: dict[Any, Any]) -> None:
        """Each registry holds exactly its union's classes, in the union's order, all exported."""
        members = list(get_args(union))

        assert members == list(registry.values())
        assert [] == [cls.__name__ for cls in members if cls.__name__ not in ev.__all__]

    def test_every_event_type_has_one_class(self) -> None:
        """Each EventType member is the TYPE of exactly one class of the Event union."""
        types = [cls.TYPE for cls in get_args(ev.Event)]

        assert sorted(ev.EventType) == sorted(types)
        assert len(set(types)) == len(types)
