"""Unit tests for `ambient_runs.verify`: one accept and one reject test per rule, and more."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Any

import attrs
import pytest
from test_verify_differential import parse, random_streams
from verify_corpus import CASES, Case

from ambient_runs import events as ev
from ambient_runs.errors import ProtocolError
from ambient_runs.verify import RULES, SPEC_ONLY_RULES, Verifier, Violation, assert_valid

# --------------------------------------------------------------------------- builders


def run_started(run: str = "r", **kw: Any) -> ev.RunStartedEvent:
    return ev.RunStartedEvent(thread_id="t", run_id=run, **kw)


def run_finished(run: str = "r", **kw: Any) -> ev.RunFinishedEvent:
    return ev.RunFinishedEvent(thread_id=kw.pop("thread", "t"), run_id=run, **kw)


def run_error() -> ev.RunErrorEvent:
    return ev.RunErrorEvent(message="boom")


def text_start(mid: str = "m", sub: str | None = None) -> ev.TextMessageStartEvent:
    return ev.TextMessageStartEvent(message_id=mid, subagent_run_id=sub)


def text_content(mid: str = "m", sub: str | None = None) -> ev.TextMessageContentEvent:
    return ev.TextMessageContentEvent(message_id=mid, delta="hi", subagent_run_id=sub)


def text_end(mid: str = "m", sub: str | None = None) -> ev.TextMessageEndEvent:
    return ev.TextMessageEndEvent(message_id=mid, subagent_run_id=sub)


def text(mid: str = "m", sub: str | None = None) -> list[ev.Event]:
    return [text_start(mid, sub), text_content(mid, sub), text_end(mid, sub)]


def tool_start(
    tid: str = "c", sub: str | None = None, parent: str | None = None
) -> ev.ToolCallStartEvent:
    return ev.ToolCallStartEvent(
        tool_call_id=tid, tool_call_name="search", parent_message_id=parent, subagent_run_id=sub
    )


def tool_args(tid: str = "c", sub: str | None = None) -> ev.ToolCallArgsEvent:
    return ev.ToolCallArgsEvent(tool_call_id=tid, delta="{}", subagent_run_id=sub)


def tool_end(tid: str = "c", sub: str | None = None) -> ev.ToolCallEndEvent:
    return ev.ToolCallEndEvent(tool_call_id=tid, subagent_run_id=sub)


def tool(tid: str = "c", sub: str | None = None, parent: str | None = None) -> list[ev.Event]:
    return [tool_start(tid, sub, parent), tool_args(tid, sub), tool_end(tid, sub)]


def tool_result(tid: str = "c", mid: str = "tm", sub: str | None = None) -> ev.ToolCallResultEvent:
    return ev.ToolCallResultEvent(
        message_id=mid, tool_call_id=tid, content="ok", subagent_run_id=sub
    )


def span_start(mid: str = "r", sub: str | None = None) -> ev.ReasoningStartEvent:
    return ev.ReasoningStartEvent(message_id=mid, subagent_run_id=sub)


def span_end(mid: str = "r", sub: str | None = None) -> ev.ReasoningEndEvent:
    return ev.ReasoningEndEvent(message_id=mid, subagent_run_id=sub)


def rmsg_start(mid: str = "r", sub: str | None = None) -> ev.ReasoningMessageStartEvent:
    return ev.ReasoningMessageStartEvent(message_id=mid, subagent_run_id=sub)


def rmsg_content(mid: str = "r", sub: str | None = None) -> ev.ReasoningMessageContentEvent:
    return ev.ReasoningMessageContentEvent(message_id=mid, delta="hm", subagent_run_id=sub)


def rmsg_end(mid: str = "r", sub: str | None = None) -> ev.ReasoningMessageEndEvent:
    return ev.ReasoningMessageEndEvent(message_id=mid, subagent_run_id=sub)


def encrypted(subtype: str, eid: str, sub: str | None = None) -> ev.ReasoningEncryptedValueEvent:
    return ev.ReasoningEncryptedValueEvent(
        subtype=subtype,  # type: ignore[arg-type]
        entity_id=eid,
        encrypted_value="x",
        subagent_run_id=sub,
    )


def step_started(name: str = "plan", sub: str | None = None) -> ev.StepStartedEvent:
    return ev.StepStartedEvent(step_name=name, subagent_run_id=sub)


def step_finished(name: str = "plan", sub: str | None = None) -> ev.StepFinishedEvent:
    return ev.StepFinishedEvent(step_name=name, subagent_run_id=sub)


def sub_started(sid: str = "s1", parent: str | None = None) -> ev.SubagentStartedEvent:
    return ev.SubagentStartedEvent(
        subagent_run_id=sid, name="helper", parent_subagent_run_id=parent
    )


def sub_finished(sid: str = "s1", *interrupt_ids: str, suspended: bool = False) -> Any:
    outcome = (
        ev.SubagentFinishedSuspendedOutcome(interrupt_ids=interrupt_ids or None)
        if suspended
        else None
    )
    return ev.SubagentFinishedEvent(subagent_run_id=sid, outcome=outcome)


def sub_error(sid: str = "s1") -> ev.SubagentErrorEvent:
    return ev.SubagentErrorEvent(subagent_run_id=sid, message="failed")


def interrupt(iid: str, sub: str | None = None) -> ev.Interrupt:
    return ev.Interrupt(id=iid, reason="input_required", subagent_run_id=sub)


def interrupted(*interrupts: ev.Interrupt) -> ev.RunFinishedEvent:
    return run_finished(outcome=ev.RunFinishedInterruptOutcome(interrupts=interrupts))


def activity(mid: str = "a", sub: str | None = None, replace: bool | None = None) -> Any:
    return ev.ActivitySnapshotEvent(
        message_id=mid, activity_type="plan", content={}, replace=replace, subagent_run_id=sub
    )


def activity_delta(mid: str = "a", sub: str | None = None) -> ev.ActivityDeltaEvent:
    return ev.ActivityDeltaEvent(
        message_id=mid,
        activity_type="plan",
        patch=[ev.AddOperation(path="/x", value=1)],
        subagent_run_id=sub,
    )


def assistant(mid: str, *tool_ids: str, sub: str | None = None) -> ev.AssistantMessage:
    calls = [
        ev.ToolCall(id=t, function=ev.FunctionCall(name="search", arguments="{}"))
        for t in tool_ids
    ]
    return ev.AssistantMessage(id=mid, subagent_run_id=sub, tool_calls=calls or None)


def chunk(mid: str | None = None, sub: str | None = None, **kw: Any) -> ev.TextMessageChunkEvent:
    kw.setdefault("delta", "x")
    return ev.TextMessageChunkEvent(message_id=mid, subagent_run_id=sub, **kw)


def tool_chunk(
    tid: str | None = None, name: str | None = None, sub: str | None = None, **kw: Any
) -> ev.ToolCallChunkEvent:
    kw.setdefault("delta", "{")
    return ev.ToolCallChunkEvent(tool_call_id=tid, tool_call_name=name, subagent_run_id=sub, **kw)


def reasoning_chunk(mid: str | None = None, sub: str | None = None) -> Any:
    return ev.ReasoningMessageChunkEvent(message_id=mid, delta="hm", subagent_run_id=sub)


def custom(sub: str | None = None) -> ev.CustomEvent:
    return ev.CustomEvent(name="ping", value=None, subagent_run_id=sub)


# --------------------------------------------------------------------------- helpers


def rules(events: Iterable[ev.Event], *, strict: bool = True) -> list[str]:
    """The rule ids of every violation a fresh verifier finds in *events*."""
    return [v.rule for v in Verifier(strict=strict).verify(events)]


def last_rules(prefix: Iterable[ev.Event], event: ev.Event, *, strict: bool = True) -> list[str]:
    """The rule ids *event* causes after the (valid) *prefix*."""
    verifier = Verifier(strict=strict)
    assert [] == list(verifier.verify(prefix))
    return [v.rule for v in verifier.feed(event)]


def replayed(events: Iterable[ev.Event], *, strict: bool) -> Verifier:
    """A fresh verifier that has been fed *events*."""
    verifier = Verifier(strict=strict)
    verifier.verify(events)
    return verifier


def answers(verifier: Verifier, events: Iterable[ev.Event]) -> list[tuple[Violation, ...]]:
    """What *verifier* answers to each of *events*, in turn."""
    return [verifier.feed(event) for event in events]


# --------------------------------------------------------------------------- tests


class TestViolation:
    def test_fields(self) -> None:
        """A violation carries its rule, message, event type, ids and client flag."""
        violation = Violation("text-not-open", "msg", "TEXT_MESSAGE_END", ("m",), False)

        assert ("text-not-open", "msg", "TEXT_MESSAGE_END", ("m",), False) == attrs.astuple(
            violation
        )

    def test_defaults_are_client_checked_without_ids(self) -> None:
        """Ids default to none and client_checked to True."""
        violation = Violation("first-event", "msg", "RUN_FINISHED")

        assert ((), True) == (violation.ids, violation.client_checked)

    def test_frozen(self) -> None:
        """Violations are immutable."""
        violation = Violation("first-event", "msg", "RUN_FINISHED")

        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            violation.rule = "x"  # type: ignore[misc]

    def test_message_names_type_and_ids(self) -> None:
        """The message follows the client's wording, naming the event type and the id."""
        [violation] = Verifier().verify([run_started(), text_content("m9")])

        assert (
            "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID "
            "'m9'. Start a text message with 'TEXT_MESSAGE_START' first."
        ) == violation.message
        assert ("TEXT_MESSAGE_CONTENT", ("m9",)) == (violation.event_type, violation.ids)


class TestRules:
    def test_spec_only_rules_are_rules(self) -> None:
        """Every spec-only rule is listed in RULES."""
        assert set() == SPEC_ONLY_RULES - set(RULES)

    def test_every_rule_has_a_corpus_case(self) -> None:
        """Each rule id is the expected first violation of at least one corpus stream."""
        covered = {c.rule for c in CASES} | {c.strict_rule for c in CASES}

        assert set() == set(RULES) - covered

    def test_rule_ids_are_kebab_case(self) -> None:
        """Rule ids are short lowercase kebab-case words."""
        assert [] == [r for r in RULES if not r.replace("-", "").isalpha() or r.lower() != r]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
class TestCorpus:
    def test_non_strict_rule(self, case: Case) -> None:
        """Verifier(strict=False) reports the corpus stream's expected first rule."""
        parsed = parse(case.events)
        found = "parse" if parsed is None else next(iter(rules(parsed, strict=False)), None)

        assert case.rule == found

    def test_strict_rule(self, case: Case) -> None:
        """Verifier(strict=True) reports the corpus stream's expected first strict rule."""
        parsed = parse(case.events)
        found = "parse" if parsed is None else next(iter(rules(parsed, strict=True)), None)

        assert case.strict_rule == found


class TestFeed:
    def test_valid_event_returns_empty_tuple(self) -> None:
        """An accepted event yields an empty tuple."""
        assert () == Verifier().feed(run_started())

    def test_rejects_non_events(self) -> None:
        """Anything but an AG-UI event object is a TypeError."""
        with pytest.raises(TypeError, match="expected an AG-UI event object, got dict"):
            Verifier().feed({"type": "RUN_STARTED"})  # type: ignore[arg-type]

    def test_strict_property(self) -> None:
        """The strict flag is readable."""
        assert (True, False) == (Verifier().strict, Verifier(strict=False).strict)


class TestRunLifecycle:
    def test_first_event_run_started(self) -> None:
        """RUN_STARTED may open a stream."""
        assert [] == rules([run_started(), run_finished()])

    def test_first_event_run_error(self) -> None:
        """RUN_ERROR may open a stream, and a run may follow it."""
        assert [] == rules([run_error(), run_started(), run_finished()])

    def test_first_event_other(self) -> None:
        """Any other first event breaks first-event."""
        assert ["first-event"] == rules([custom()])

    def test_after_run_finished(self) -> None:
        """After RUN_FINISHED only RUN_STARTED or RUN_ERROR may follow."""
        assert ["after-run-finished"] == last_rules([run_started(), run_finished()], custom())

    def test_late_run_error(self) -> None:
        """One RUN_ERROR may follow RUN_FINISHED."""
        assert [] == rules([run_started(), run_finished(), run_error()])

    def test_after_run_error(self) -> None:
        """After RUN_ERROR only RUN_STARTED may follow, not even another RUN_ERROR."""
        assert ["after-run-error"] == last_rules([run_started(), run_error()], run_error())

    def test_run_error_with_open_work(self) -> None:
        """RUN_ERROR ends a run whatever is still open."""
        events = [run_started(), text_start(), tool_start(), step_started(), sub_started()]

        assert [] == last_rules(events, run_error())

    def test_run_already_active(self) -> None:
        """A second RUN_STARTED needs the first run closed."""
        assert ["run-already-active"] == last_rules([run_started()], run_started("r2"))

    def test_new_run_resets_state(self) -> None:
        """A message id owned by s1 in one run is free for s2 in the next."""
        events = [run_started(), *text("m", "s1"), run_finished(), run_started("r2")]

        assert [] == last_rules(events, text_start("m", "s2"))

    def test_open_at_run_finished(self) -> None:
        """RUN_FINISHED with an open text message breaks open-at-run-finished."""
        assert ["open-at-run-finished"] == last_rules(
            [run_started(), text_start()], run_finished()
        )

    def test_open_at_run_finished_names_steps_first(self) -> None:
        """Open steps are reported first, with their owners, as the client words it."""
        verifier = Verifier()
        verifier.verify([run_started(), text_start(), step_started("a", "s1"), step_started("b")])
        [violation] = verifier.feed(run_finished())

        assert (
            "Cannot send 'RUN_FINISHED' while steps are still active: a (subagent 's1'), b"
        ) == violation.message

    def test_truncated_stream_is_not_a_violation(self) -> None:
        """A stream may simply stop; nothing checks for a missing terminal event."""
        assert [] == rules([run_started(), text_start()])


class TestTextMessages:
    def test_pairing(self) -> None:
        """START, CONTENT and END of one id pass, and the id may be reopened after END."""
        assert [] == rules([run_started(), *text(), *text(), run_finished()])

    def test_already_open(self) -> None:
        """A second START on an open id breaks text-already-open."""
        assert ["text-already-open"] == last_rules([run_started(), text_start()], text_start())

    def test_content_not_open(self) -> None:
        """CONTENT for no open message breaks text-not-open."""
        assert ["text-not-open"] == last_rules([run_started()], text_content())

    def test_end_not_open(self) -> None:
        """END after END breaks text-not-open."""
        assert ["text-not-open"] == last_rules([run_started(), *text()], text_end())


class TestToolCalls:
    def test_pairing(self) -> None:
        """START, ARGS, END and a result pass, and the id may be reopened after END."""
        events = [run_started(), *tool(), tool_result(), *tool(), run_finished()]

        assert [] == rules(events)

    def test_already_open(self) -> None:
        """A second START on an open tool call breaks tool-call-already-open."""
        assert ["tool-call-already-open"] == last_rules(
            [run_started(), tool_start()], tool_start()
        )

    def test_args_not_open(self) -> None:
        """ARGS for no open tool call breaks tool-call-not-open."""
        assert ["tool-call-not-open"] == last_rules([run_started()], tool_args())

    def test_end_not_open(self) -> None:
        """END for no open tool call breaks tool-call-not-open."""
        assert ["tool-call-not-open"] == last_rules([run_started()], tool_end())


class TestReasoning:
    def test_span_and_message_share_an_id(self) -> None:
        """A span and a message may both use one id: they are separate namespaces."""
        events = [
            run_started(),
            span_start(),
            rmsg_start(),
            rmsg_content(),
            rmsg_end(),
            span_end(),
            run_finished(),
        ]

        assert [] == rules(events)

    def test_span_already_open(self) -> None:
        """A second REASONING_START on an open span breaks reasoning-span-already-open."""
        assert ["reasoning-span-already-open"] == last_rules(
            [run_started(), span_start()], span_start()
        )

    def test_span_not_open(self) -> None:
        """REASONING_END with no open span breaks reasoning-span-not-open."""
        assert ["reasoning-span-not-open"] == last_rules([run_started()], span_end())

    def test_message_already_open(self) -> None:
        """A second REASONING_MESSAGE_START breaks reasoning-message-already-open."""
        assert ["reasoning-message-already-open"] == last_rules(
            [run_started(), rmsg_start()], rmsg_start()
        )

    def test_message_not_open(self) -> None:
        """An open span does not make REASONING_MESSAGE_CONTENT legal."""
        assert ["reasoning-message-not-open"] == last_rules(
            [run_started(), span_start()], rmsg_content()
        )


class TestOwnership:
    def test_untagged_continuation_passes(self) -> None:
        """An untagged CONTENT or END continues a subagent's message."""
        events = [run_started(), text_start("m", "s1"), text_content(), text_end(), run_finished()]

        assert [] == rules(events)

    def test_tagged_continuation_of_parent_message(self) -> None:
        """A subagent-tagged CONTENT on a parent message breaks owner-mismatch."""
        assert ["owner-mismatch"] == last_rules(
            [run_started(), text_start()], text_content("m", "s1")
        )

    def test_owner_kept_after_close(self) -> None:
        """Owners outlive the entity: another subagent may not reopen the id in this run."""
        assert ["owner-mismatch"] == last_rules(
            [run_started(), *text("m", "s1")], text_start("m", "s2")
        )

    def test_empty_string_is_a_subagent(self) -> None:
        """The subagent id "" is not the parent agent."""
        assert ["owner-mismatch"] == last_rules(
            [run_started(), text_start()], text_content("m", "")
        )

    def test_tool_call_parent_owner(self) -> None:
        """A tool call tagged differently from its parent message breaks tool-call-parent-owner."""
        events = [run_started(), *text("m", "s1")]

        assert ["tool-call-parent-owner"] == last_rules(events, tool_start("c", "s2", parent="m"))

    def test_tool_call_inherits_parent_owner(self) -> None:
        """An untagged tool call under s1's message belongs to s1."""
        events = [run_started(), *text("m", "s1"), tool_start("c", parent="m")]

        assert ["owner-mismatch"] == last_rules(events, tool_args("c", "s2"))

    def test_tool_call_reopen_under_other_owner(self) -> None:
        """Reopening a call under a message of another owner breaks tool-call-parent-owner."""
        events = [run_started(), *text("m0"), *tool("c", parent="m0"), *text("m1", "s1")]

        assert ["tool-call-parent-owner"] == last_rules(events, tool_start("c", parent="m1"))

    def test_tool_result_mints_owner(self) -> None:
        """TOOL_CALL_RESULT records its message under its own tag."""
        events = [run_started(), *tool(), tool_result("c", "tm", "s1")]

        assert ["owner-mismatch"] == last_rules(events, text_start("tm", "s2"))

    def test_reasoning_owner_shared_by_span_and_message(self) -> None:
        """A span and a message with one id share one owner."""
        assert ["owner-mismatch"] == last_rules(
            [run_started(), span_start("r", "s1")], rmsg_start("r", "s2")
        )

    def test_encrypted_value_tool_call_owner(self) -> None:
        """An encrypted value for a closed tool call is checked against the call's owner."""
        events = [run_started(), *tool("c", "s1")]

        assert ["owner-mismatch"] == last_rules(events, encrypted("tool-call", "c", "s2"))

    def test_encrypted_value_reasoning_message_owner(self) -> None:
        """A "message" encrypted value falls back to the reasoning message's owner."""
        events = [run_started(), rmsg_start("r", "s1"), rmsg_end("r")]

        assert ["owner-mismatch"] == last_rules(events, encrypted("message", "r", "s2"))

    def test_encrypted_value_matching_or_unknown(self) -> None:
        """Matching, untagged and unknown-entity encrypted values pass."""
        events = [
            run_started(),
            *tool("c", "s1"),
            encrypted("tool-call", "c", "s1"),
            encrypted("tool-call", "c"),
            encrypted("message", "nowhere", "s3"),
            run_finished(),
        ]

        assert [] == rules(events)

    def test_activity_delta_owner(self) -> None:
        """ACTIVITY_DELTA is checked against the snapshot's owner."""
        assert ["owner-mismatch"] == last_rules(
            [run_started(), activity("a", "s1")], activity_delta("a", "s2")
        )

    def test_activity_replace_false_keeps_owner(self) -> None:
        """A non-replacing snapshot of a known activity does not re-own it."""
        events = [run_started(), activity("a", "s1"), activity("a", "s2", replace=False)]

        assert ["owner-mismatch"] == last_rules(events, activity_delta("a", "s2"))

    def test_activity_replace_reowns(self) -> None:
        """A replacing snapshot re-owns the activity."""
        events = [run_started(), activity("a", "s1"), activity("a", "s2")]

        assert [] == last_rules(events, activity_delta("a", "s2"))

    def test_messages_snapshot_overwrites(self) -> None:
        """MESSAGES_SNAPSHOT is authoritative for owners, tool calls included."""
        snapshot = ev.MessagesSnapshotEvent(messages=[assistant("m", "c", sub="s2")])
        events = [run_started(), *text("m", "s1"), snapshot]

        assert [[], ["owner-mismatch"]] == [
            last_rules(events, text_start("m", "s2")),
            last_rules(events, tool_start("c", "s1")),
        ]

    def test_input_messages_seed_unclaimed_ids(self) -> None:
        """RUN_STARTED.input.messages seed owners; the first record of an id wins."""
        agent_input = ev.RunAgentInput(
            thread_id="t", run_id="r", messages=[assistant("m", sub="s1"), assistant("m")]
        )

        assert ["owner-mismatch"] == last_rules(
            [run_started(input=agent_input)], text_start("m", "s2")
        )


class TestSteps:
    def test_steps_are_per_owner(self) -> None:
        """The parent and a subagent may each have a step of the same name open."""
        events = [
            run_started(),
            step_started("tools"),
            step_started("tools", "s1"),
            step_finished("tools", "s1"),
            step_finished("tools"),
            run_finished(),
        ]

        assert [] == rules(events)

    def test_already_active(self) -> None:
        """A second STEP_STARTED by the same owner breaks step-already-active."""
        assert ["step-already-active"] == last_rules(
            [run_started(), step_started("a", "s1")], step_started("a", "s1")
        )

    def test_not_started(self) -> None:
        """STEP_FINISHED of a step nobody opened breaks step-not-started."""
        assert ["step-not-started"] == last_rules([run_started()], step_finished())

    def test_owner_mismatch(self) -> None:
        """Finishing the parent's step under a subagent's tag breaks step-owner-mismatch."""
        [violation] = Verifier().verify(
            [run_started(), step_started("a"), step_finished("a", "s1")]
        )

        assert ("step-owner-mismatch", ("a", "s1")) == (violation.rule, violation.ids)


class TestSubagents:
    def test_lifecycle_with_nesting(self) -> None:
        """Nested subagents announced parent first and closed child first pass."""
        events = [
            run_started(),
            sub_started("s1"),
            sub_started("s2", parent="s1"),
            sub_finished("s2"),
            sub_finished("s1"),
            run_finished(),
        ]

        assert [] == rules(events)

    def test_already_active(self) -> None:
        """Announcing an active subagent again breaks subagent-active."""
        assert ["subagent-active"] == last_rules([run_started(), sub_started()], sub_started())

    def test_reused_in_run(self) -> None:
        """Announcing a finished subagent again in the same run breaks subagent-reused."""
        events = [run_started(), sub_started(), sub_finished()]

        assert ["subagent-reused"] == last_rules(events, sub_started())

    def test_reused_in_next_run(self) -> None:
        """A later run may announce the same id again (resuming it)."""
        events = [run_started(), sub_started(), sub_finished(), run_finished(), run_started("r2")]

        assert [] == last_rules(events, sub_started())

    def test_parent_unknown(self) -> None:
        """A parent subagent not started in this run breaks subagent-parent-unknown."""
        assert ["subagent-parent-unknown"] == last_rules(
            [run_started()], sub_started("s2", parent="s1")
        )

    def test_parent_finished_is_known(self) -> None:
        """A parent that already finished in this run is still a known parent."""
        events = [run_started(), sub_started("s1"), sub_finished("s1")]

        assert [] == last_rules(events, sub_started("s2", parent="s1"))

    def test_minted_ids_are_remembered_like_any_other(self) -> None:
        """Ids of the minted shape ``<run>-sub-<n>``: reuse refused, a finished one a parent."""
        events = [run_started("r")]
        for n in (1, 2, 3, 5):  # 4 never starts
            events += [sub_started(f"r-sub-{n}"), sub_finished(f"r-sub-{n}")]

        assert [["subagent-reused"], ["subagent-reused"], [], ["subagent-parent-unknown"]] == [
            last_rules(events, sub_started("r-sub-1")),
            last_rules(events, sub_started("r-sub-5")),
            last_rules(events, sub_started("r-sub-6", parent="r-sub-3")),
            last_rules(events, sub_started("r-sub-6", parent="r-sub-4")),
        ]

    def test_minted_ids_started_out_of_order(self) -> None:
        """Minted-shape ids started in any order are each known exactly once."""
        order = [7, 2, 1, 9, 3, 4, 5, 6, 8]
        events = [run_started("r")]
        for n in order:
            events += [sub_started(f"r-sub-{n}", parent=None), sub_finished(f"r-sub-{n}")]
        verifier = replayed(events, strict=True)

        assert [["subagent-reused"]] * 9 + [[]] == [
            [v.rule for v in verifier.feed(sub_started(f"r-sub-{n}"))] for n in range(1, 11)
        ]

    def test_ids_near_the_minted_shape_are_other_ids(self) -> None:
        """``r-sub-01``, ``r-sub-+1``, a non-ASCII digit, another run's: none is ``r-sub-1``."""
        near = ["r-sub-01", "r-sub-+1", "r-sub-1 ", "r-sub-\u0661", "r-sub-", "r2-sub-1"]
        near += ["rr-sub-1", "r-sub-" + "9" * 40]
        events = [run_started("r"), sub_started("r-sub-1"), sub_finished("r-sub-1")]
        fresh = [last_rules(events, sub_started(sid)) for sid in near]
        again = [
            last_rules([*events, sub_started(sid), sub_finished(sid)], sub_started(sid))
            for sid in near
        ]

        assert ([[]] * len(near), [["subagent-reused"]] * len(near)) == (fresh, again)

    def test_minted_ids_reset_with_the_run(self) -> None:
        """A later run with the same run id may start its minted ids again."""
        events = [run_started("r"), sub_started("r-sub-1"), sub_finished("r-sub-1")]
        events += [run_finished("r"), run_started("r")]

        assert [] == last_rules(events, sub_started("r-sub-1"))

    def test_not_active(self) -> None:
        """Finishing or failing an unknown subagent breaks subagent-not-active."""
        assert [["subagent-not-active"], ["subagent-not-active"]] == [
            last_rules([run_started()], sub_finished()),
            last_rules([run_started()], sub_error()),
        ]

    def test_tags_need_no_lifecycle(self) -> None:
        """Events may be tagged before the announcement and after the close."""
        events = [
            run_started(),
            *text("a", "s1"),
            sub_started("s1"),
            sub_finished("s1"),
            *text("b", "s1"),
            run_finished(),
        ]

        assert [] == rules(events)


class TestSpecRules:
    def test_run_id_mismatch(self) -> None:
        """RUN_FINISHED must repeat RUN_STARTED's ids; only strict mode checks it."""
        events = [run_started(), run_finished("other")]

        assert (["run-id-mismatch"], []) == (rules(events), rules(events, strict=False))

    def test_thread_id_mismatch(self) -> None:
        """A different threadId at RUN_FINISHED is a run-id-mismatch too."""
        assert ["run-id-mismatch"] == rules([run_started(), run_finished(thread="x")])

    def test_tool_result_unknown_call(self) -> None:
        """A result for a call never seen breaks tool-result-unknown-call in strict mode."""
        events = [run_started(), tool_result("ghost"), run_finished()]

        assert (["tool-result-unknown-call"], []) == (rules(events), rules(events, strict=False))

    def test_tool_result_open_call(self) -> None:
        """A result for a call still open breaks tool-result-open-call in strict mode."""
        events = [run_started(), tool_start(), tool_result(), tool_end(), run_finished()]

        assert (["tool-result-open-call"], []) == (rules(events), rules(events, strict=False))

    def test_tool_result_known_from_history(self) -> None:
        """Calls from the input's messages, a snapshot or known_tool_call_ids may be answered."""
        agent_input = ev.RunAgentInput(thread_id="t", run_id="r", messages=[assistant("a", "c1")])
        snapshot = ev.MessagesSnapshotEvent(messages=[assistant("b", "c2")])
        events = [
            run_started(input=agent_input),
            snapshot,
            tool_result("c1", "t1"),
            tool_result("c2", "t2"),
            tool_result("c3", "t3"),
            run_finished(),
        ]

        assert [] == list(Verifier(known_tool_call_ids=["c3"]).verify(events))

    def test_subagent_open_at_finish(self) -> None:
        """A subagent may not finish while it owns anything open; strict mode only."""
        opened: list[list[ev.Event]] = [
            [text_start("m", "s1")],
            [*text("m", "s1"), tool_start("c", parent="m")],
            [span_start("r", "s1")],
            [rmsg_start("r", "s1")],
            [step_started("a", "s1")],
            [sub_started("s2", parent="s1")],
        ]
        found = [
            (
                last_rules([run_started(), sub_started("s1"), *o], sub_finished("s1")),
                last_rules(
                    [run_started(), sub_started("s1"), *o], sub_finished("s1"), strict=False
                ),
            )
            for o in opened
        ]

        assert [(["subagent-open-at-finish"], [])] * len(opened) == found

    def test_subagent_open_at_finish_lists_what(self) -> None:
        """The violation names the subagent and what it left open."""
        verifier = Verifier()
        verifier.verify([run_started(), sub_started("s1"), text_start("m", "s1")])
        [violation] = verifier.feed(sub_finished("s1"))

        assert ("s1", "m") == violation.ids
        assert not violation.client_checked
        assert "text message 'm'" in violation.message

    def test_subagent_closed_work_may_finish(self) -> None:
        """Once its work is closed, a subagent may finish."""
        events = [run_started(), sub_started("s1"), *text("m", "s1"), step_started("a", "s1")]
        events += [step_finished("a", "s1")]

        assert [] == last_rules(events, sub_finished("s1"))

    def test_subagent_error_is_lenient(self) -> None:
        """SUBAGENT_ERROR may abandon open work (which RUN_FINISHED still requires closed)."""
        events = [run_started(), sub_started("s1"), text_start("m", "s1"), sub_error("s1")]

        assert ["open-at-run-finished"] == rules([*events, run_finished()])
        assert [] == rules([*events, text_end("m"), run_finished()])

    def test_interrupt_id_duplicate(self) -> None:
        """Interrupt ids are unique within an interrupt outcome."""
        events = [run_started(), interrupted(interrupt("i"), interrupt("i"))]

        assert (["interrupt-id-duplicate"], []) == (rules(events), rules(events, strict=False))

    def test_suspended_with_its_interrupt(self) -> None:
        """A suspended subagent followed by an interrupt outcome holding its interrupt passes."""
        events = [
            run_started(),
            sub_started("s1"),
            sub_finished("s1", "i1", suspended=True),
            interrupted(interrupt("i1", "s1")),
        ]

        assert [] == rules(events)

    def test_suspended_interrupt_unknown(self) -> None:
        """interruptIds must name interrupts of the outcome."""
        events = [
            run_started(),
            sub_started("s1"),
            sub_finished("s1", "i1", suspended=True),
            interrupted(interrupt("i2", "s1")),
        ]

        assert (["suspended-interrupt-unknown"], []) == (
            rules(events),
            rules(events, strict=False),
        )

    def test_suspended_interrupt_owner(self) -> None:
        """interruptIds name only interrupts the subagent raised itself."""
        events = [
            run_started(),
            sub_started("s1"),
            sub_started("s2"),
            sub_finished("s2"),
            sub_finished("s1", "i1", suspended=True),
            interrupted(interrupt("i1", "s2")),
        ]

        assert ["suspended-interrupt-owner"] == rules(events)

    def test_suspended_without_interrupt(self) -> None:
        """A suspended subagent requires the run to finish with an interrupt outcome."""
        events = [run_started(), sub_started("s1"), sub_finished("s1", suspended=True)]

        assert (["suspended-without-interrupt"], []) == (
            rules([*events, run_finished()]),
            rules([*events, run_finished()], strict=False),
        )
        assert [] == rules([*events, run_error()])

    def test_spec_violations_are_not_client_checked(self) -> None:
        """Spec-only violations say client_checked=False."""
        found = Verifier().verify([run_started(), tool_result("ghost"), run_finished("x")])

        assert [False, False] == [v.client_checked for v in found]


class TestChunks:
    def test_lane_assembles_and_closes_at_run_finished(self) -> None:
        """Id-less continuation chunks extend the open stream; RUN_FINISHED closes it."""
        events = [run_started(), chunk("m"), chunk(), chunk(), run_finished()]

        assert [] == rules(events)

    def test_missing_id(self) -> None:
        """The first chunk of a stream needs its id."""
        assert [["chunk-missing-id"], ["chunk-missing-id"]] == [
            last_rules([run_started()], chunk()),
            last_rules([run_started()], tool_chunk(name="search")),
        ]

    def test_missing_tool_name(self) -> None:
        """The first tool chunk needs its toolCallName."""
        assert ["chunk-missing-name"] == last_rules([run_started()], tool_chunk("c"))

    def test_field_mismatch(self) -> None:
        """A continuation may repeat role or toolCallName only with the same value."""
        assert [["chunk-field-mismatch"], [], ["chunk-field-mismatch"]] == [
            last_rules([run_started(), chunk("m")], chunk(role="user")),
            last_rules([run_started(), chunk("m")], chunk(role="assistant")),
            last_rules([run_started(), tool_chunk("c", "a")], tool_chunk(name="b")),
        ]

    def test_lanes_per_owner(self) -> None:
        """Two subagents stream chunks in parallel when they tag them."""
        events = [
            run_started(),
            chunk("a", "s1"),
            chunk("b", "s2"),
            chunk(None, "s1"),
            chunk(None, "s2"),
            chunk("a"),
            run_finished(),
        ]

        assert [] == rules(events)

    def test_ambiguous(self) -> None:
        """An untagged id-less chunk with two subagent lanes open is ambiguous."""
        events = [run_started(), chunk("a", "s1"), chunk("b", "s2")]

        assert ["chunk-ambiguous"] == last_rules(events, chunk())

    def test_sole_lane_fallback(self) -> None:
        """An untagged id-less chunk continues the only open lane."""
        assert [] == rules([run_started(), chunk("a", "s1"), chunk(), run_finished()])

    def test_lane_mismatch(self) -> None:
        """A chunk naming an id held by another lane must not carry another tag."""
        events = [run_started(), chunk("a", "s1")]

        assert ["chunk-lane-mismatch"] == last_rules(events, chunk("a", "s2"))

    def test_explicit_event_closes_own_lane(self) -> None:
        """An explicit CONTENT in the chunk's lane first closes the chunk stream."""
        assert ["text-not-open"] == last_rules([run_started(), chunk("m")], text_content("m"))

    def test_explicit_event_leaves_other_lanes(self) -> None:
        """An event in another lane leaves the chunk stream open."""
        events = [run_started(), chunk("m", "s1"), custom(), chunk(None, "s1"), run_finished()]

        assert [] == rules(events)

    def test_foreign_close_blocks_the_lane(self) -> None:
        """A chunk stream closed explicitly from another lane makes the client's END fail."""
        events = [run_started(), chunk("m", "s1"), text_end("m")]

        assert [["text-not-open"], ["text-not-open"]] == [
            last_rules(events, run_finished()),
            last_rules(events, run_error()),
        ]

    def test_synthesized_start_is_verified(self) -> None:
        """The START a chunk expands into is checked like an explicit one."""
        assert ["text-already-open"] == last_rules(
            [run_started(), text_start("m", "s1")], chunk("m")
        )

    def test_subagent_finish_closes_its_lane(self) -> None:
        """SUBAGENT_FINISHED closes the subagent's chunk lane."""
        events = [run_started(), sub_started(), chunk("m", "s1"), sub_finished()]

        assert ["chunk-missing-id"] == last_rules(events, chunk(None, "s1"))

    def test_reasoning_chunks(self) -> None:
        """Reasoning chunks assemble a reasoning message."""
        events = [run_started(), reasoning_chunk("r"), reasoning_chunk(), run_finished()]

        assert [] == rules(events)

    def test_tool_chunk_result_in_lane(self) -> None:
        """A result in the chunk's lane closes the call first, so strict mode accepts it."""
        events = [run_started(), tool_chunk("c", "search"), tool_result("c"), run_finished()]

        assert [] == rules(events)


class TestAtomicity:
    def test_refused_event_leaves_state_unchanged(self) -> None:
        """
        Across 600 random streams, a verifier that refused an event acts as if it never saw it.

        After each refused event, a verifier fed the stream so far and one fed
        only the events accepted so far must answer alike to every event that
        follows and, again, to every event of the stream.
        """
        changed = []
        for stream in random_streams(600, 7):
            parsed = parse(stream)
            if parsed is None:
                continue
            for strict in (True, False):
                verifier = Verifier(strict=strict)
                accepted: list[ev.Event] = []
                for index, event in enumerate(parsed):
                    if not verifier.feed(event):
                        accepted.append(event)
                        continue
                    probes = [*parsed[index + 1 :], *parsed]
                    saw_it = replayed([*accepted, event], strict=strict)
                    never_saw_it = replayed(accepted, strict=strict)
                    if answers(saw_it, probes) != answers(never_saw_it, probes):
                        changed.append((strict, index, type(event).__name__))

        assert [] == changed

    def test_skipping_refused_events_gives_a_valid_stream(self) -> None:
        """Dropping the refused events from a stream leaves a stream that is accepted whole."""
        still_invalid = 0
        for stream in random_streams(600, 11):
            parsed = parse(stream) or []
            verifier = Verifier()
            kept = [e for e in parsed if not verifier.feed(e)]
            still_invalid += bool(Verifier().verify(kept))

        assert 0 == still_invalid

    def test_producer_can_carry_on(self) -> None:
        """After a refused CONTENT the message is still open and can be finished."""
        verifier = Verifier()
        verifier.verify([run_started(), text_start("m", "s1")])

        assert ["owner-mismatch"] == [v.rule for v in verifier.feed(text_content("m", "s2"))]
        assert [] == list(verifier.verify([text_content("m"), text_end("m"), run_finished()]))

    def test_refused_chunk_rolls_back_lane_close(self) -> None:
        """A chunk whose START is refused does not close the lane's previous stream."""
        verifier = Verifier()
        verifier.verify([run_started(), text_start("x", "s1"), chunk("m")])

        assert ["text-already-open"] == [v.rule for v in verifier.feed(chunk("x"))]
        assert [] == list(verifier.verify([chunk(), text_end("x"), run_finished()]))

    def test_refused_run_finished_rolls_back_lane_ends(self) -> None:
        """RUN_FINISHED refused for an open step leaves the chunk stream open."""
        verifier = Verifier()
        verifier.verify([run_started(), chunk("m"), step_started("plan", "s1")])

        assert ["open-at-run-finished"] == [v.rule for v in verifier.feed(run_finished())]
        assert [] == list(verifier.verify([chunk(), step_finished("plan", "s1"), run_finished()]))


class TestCheck:
    def test_accepts(self) -> None:
        """check() returns None for a valid event."""
        assert None is Verifier().check(run_started())

    def test_raises_protocol_error(self) -> None:
        """check() raises ProtocolError with the first violation's message and rule, and all."""
        verifier = Verifier()
        verifier.check(run_started())
        with pytest.raises(ProtocolError) as info:
            verifier.check(
                run_finished(
                    "x",
                    outcome=ev.RunFinishedInterruptOutcome(
                        interrupts=[interrupt("i"), interrupt("i")]
                    ),
                )
            )

        assert ("run-id-mismatch", 2) == (info.value.rule, len(info.value.violations))
        assert str(info.value).startswith("Cannot send 'RUN_FINISHED' with threadId")
        assert isinstance(info.value, ValueError)

    def test_refused_event_changes_nothing(self) -> None:
        """After check() raised, the producer can go on as if the event was never sent."""
        verifier = Verifier()
        verifier.check(run_started())
        with pytest.raises(ProtocolError):
            verifier.check(text_end())
        verifier.check(run_finished())

        assert ["after-run-finished"] == [v.rule for v in verifier.feed(text_start())]


class TestVerify:
    def test_collects_every_violation_in_order(self) -> None:
        """verify() goes on after a refused event and returns every violation in order."""
        found = Verifier().verify(
            [text_end(), run_started(), text_end(), tool_end(), run_finished()]
        )

        assert ["first-event", "text-not-open", "tool-call-not-open"] == [v.rule for v in found]

    def test_accepts_any_iterable(self) -> None:
        """verify() takes a generator."""

        def stream() -> Iterator[ev.Event]:
            yield run_started()
            yield run_finished()

        assert () == Verifier().verify(stream())


class TestAssertValid:
    def test_passes_on_valid_stream(self) -> None:
        """A valid stream passes silently."""
        assert None is assert_valid([run_started(), *text(), run_finished()])

    def test_lists_violations_with_indexes(self) -> None:
        """The AssertionError lists every violation with its event index."""
        with pytest.raises(AssertionError) as info:
            assert_valid([run_started(), text_end("m"), run_finished("x")])

        assert str(info.value).splitlines()[0] == "2 AG-UI violation(s) in 3 events:"
        assert str(info.value).splitlines()[1].startswith("  [1] TEXT_MESSAGE_END text-not-open:")
        assert str(info.value).splitlines()[2].startswith("  [2] RUN_FINISHED run-id-mismatch:")

    def test_non_strict(self) -> None:
        """With strict=False only the client's rules count."""
        assert None is assert_valid([run_started(), run_finished("x")], strict=False)

    def test_wire_dicts(self) -> None:
        """Wire-form dicts are parsed; one that does not parse is reported at its index."""
        with pytest.raises(
            AssertionError, match=r"\[1\] invalid-event: invalid TEXT_MESSAGE_START"
        ):
            assert_valid(
                [
                    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                    {"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": None},
                    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
                ]
            )


class TestConstantCost:
    @staticmethod
    def traced_lines(verifier: Verifier, event: ev.Event) -> int:
        """Count the Python lines executed while feeding *event*."""
        count = 0

        def tracer(frame: FrameType, what: str, arg: Any) -> Any:
            nonlocal count
            if what == "line":
                count += 1
            return tracer

        # No collection inside the traced call: a gc callback (hypothesis installs
        # one) would run Python lines of its own and count them as the verifier's.
        enabled = gc.isenabled()
        gc.disable()
        sys.settrace(tracer)
        try:
            verifier.feed(event)
        finally:
            sys.settrace(None)
            if enabled:
                gc.enable()
        return count

    @staticmethod
    def busy(subagents: int) -> Verifier:
        """A verifier with *subagents* open subagents, each with a message, call, step, lane."""
        verifier = Verifier()
        verifier.feed(run_started())
        for n in range(subagents):
            sid = f"s{n}"
            for event in (
                sub_started(sid),
                text_start(f"m{n}", sid),
                tool_start(f"c{n}", sid),
                step_started("work", sid),
                chunk(f"k{n}", sid),
            ):
                assert () == verifier.feed(event)
        return verifier

    def test_per_event_work_does_not_grow(self) -> None:
        """Each event executes as many lines with 10,000 open subagents as with 10."""
        probes = [
            text_content("m5", "s5"),  # closes s5's chunk lane first
            text_start("new", "s5"),
            text_end("m5", "s5"),
            tool_args("c5", "s5"),
            tool_end("c5"),
            tool_result("c5"),
            step_started("other", "s5"),
            step_finished("work", "s5"),
            sub_started("s-new", parent="s5"),
            sub_finished("s5"),  # refused: s5 still owns "new", "other" and s-new
            sub_error("s6"),
            chunk(None, "s5"),  # refused: s5's lane is closed
            chunk("k-new", "s6"),
            chunk(),  # the sole-lane fallback is not an option: ambiguous
            custom("s7"),
            encrypted("message", "m5", "s5"),
            activity("a", "s5"),
            activity_delta("a", "s6"),
        ]
        small, large = self.busy(10), self.busy(10_000)
        costs = [
            (type(p).__name__, self.traced_lines(small, p), self.traced_lines(large, p))
            for p in probes
        ]

        assert [(name, lines, lines) for name, lines, _ in costs] == costs

    def test_long_stream_with_many_open_subagents(self) -> None:
        """A 100,000-event stream interleaving 1,000 open subagents verifies cleanly."""
        verifier = self.busy(1_000)
        events = [text_content(f"m{n % 1_000}", f"s{n % 1_000}") for n in range(100_000)]

        assert () == verifier.verify(events)
