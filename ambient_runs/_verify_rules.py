"""
The verifier's rule table: every rule once, with its message and who checks it.

`Rule` lists each rule `ambient_runs.verify.Verifier` reports: its id, what it
checks (the text `ambient_runs.verify.RULES` shows), the template its message
is built from, and whether the official client (``@ag-ui/client`` 1.0.0)
checks it too. A violation is only ever built by calling a rule with the
event type, the ids and the template's fields, so a rule's message and
``client_checked`` flag have this one source; `RULES` and `SPEC_ONLY_RULES`
are derived from the table.

The templates are `str.format` strings. Their wording follows the client's
error where the client has one, so messages read the same on both sides.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import attrs

__all__ = (
    "OK",
    "RULES",
    "SPEC_ONLY_RULES",
    "Found",
    "Owner",
    "Rule",
    "Violation",
    "no_apply",
    "no_check",
    "who",
)


@attrs.frozen
class Violation:
    """
    One way an event breaks the AG-UI 1.0 sequence rules.

    Args:
        rule: The short kebab-case id of the rule, one of `RULES`.
        message: What is wrong, naming the event type and the ids involved, worded
            like the official client's error where the client has one.
        event_type: The wire type of the offending event (for an error found in an
            event the client synthesizes from a chunk, the chunk's type).
        ids: The message, tool call, step, subagent or interrupt ids involved.
        client_checked: Whether ``@ag-ui/client`` 1.0.0 rejects the event too;
            False for the specification's rules it leaves unchecked.

    .. versionadded:: 0.1.0
    """

    # Its public home, the path users import it from (as the package's exports have).
    __module__ = "ambient_runs.verify"

    rule: str
    message: str
    event_type: str
    ids: tuple[str, ...] = ()
    client_checked: bool = True


Owner: TypeAlias = str | None
"""Who an event or an entity belongs to: a subagent id, or None for the parent agent."""

Found: TypeAlias = tuple[Violation, ...]
"""What checking one event found; empty when it is accepted."""

OK: Final[Found] = ()


def no_check(_: object) -> Found:
    """Check nothing: the event is valid wherever a run is active."""
    return OK


def no_apply(_: object) -> None:
    """Apply nothing: the event changes no state."""


def who(owner: Owner) -> str:
    """An owner as messages name it."""
    return "(the parent agent)" if owner is None else owner


class Rule(enum.Enum):
    """Each rule: its id, what it checks, its message template, whether the client checks it."""

    id: str
    description: str
    template: str
    client_checked: bool

    def __init__(
        self, rule_id: str, description: str, template: str, client_checked: bool = True
    ) -> None:
        self.id = rule_id
        self.description = description
        self.template = template
        self.client_checked = client_checked

    def __call__(self, event_type: str, ids: tuple[str, ...] = (), /, **fields: Any) -> Violation:
        """The violation of this rule by an event of *event_type*, its message filled in."""
        return Violation(
            self.id, self.template.format(**fields), event_type, ids, self.client_checked
        )

    # -- the run lifecycle
    FIRST_EVENT = (
        "first-event",
        "The first event is RUN_STARTED or RUN_ERROR.",
        "First event must be 'RUN_STARTED' (got '{etype}')",
    )
    AFTER_RUN_FINISHED = (
        "after-run-finished",
        "After RUN_FINISHED only RUN_STARTED or RUN_ERROR may follow.",
        "Cannot send event type '{etype}': The run has already finished with 'RUN_FINISHED'. "
        "Start a new run with 'RUN_STARTED'.",
    )
    AFTER_RUN_ERROR = (
        "after-run-error",
        "After RUN_ERROR only RUN_STARTED may follow.",
        "Cannot send event type '{etype}': The run has already errored with 'RUN_ERROR'. "
        "No further events can be sent.",
    )
    RUN_ALREADY_ACTIVE = (
        "run-already-active",
        "RUN_STARTED needs the previous run to be finished.",
        "Cannot send 'RUN_STARTED' while a run is still active. The previous run must be "
        "finished with 'RUN_FINISHED' before starting a new run.",
    )
    OPEN_AT_RUN_FINISHED = (
        "open-at-run-finished",
        "RUN_FINISHED needs every step, text message, reasoning message and span, tool call "
        "and subagent closed.",
        "Cannot send 'RUN_FINISHED' while {what} are still active: {listing}",
    )
    # -- open/close pairing
    TEXT_ALREADY_OPEN = (
        "text-already-open",
        "TEXT_MESSAGE_START names a text message that is open.",
        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{eid}' is already in "
        "progress. Complete it with 'TEXT_MESSAGE_END' first.",
    )
    TEXT_NOT_OPEN = (
        "text-not-open",
        "TEXT_MESSAGE_CONTENT/END names no open text message.",
        "Cannot send '{shown}' event: No active text message found with ID '{eid}'. {hint}",
    )
    TOOL_CALL_ALREADY_OPEN = (
        "tool-call-already-open",
        "TOOL_CALL_START names a tool call that is open.",
        "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{eid}' is already in "
        "progress. Complete it with 'TOOL_CALL_END' first.",
    )
    TOOL_CALL_NOT_OPEN = (
        "tool-call-not-open",
        "TOOL_CALL_ARGS/END names no open tool call.",
        "Cannot send '{shown}' event: No active tool call found with ID '{eid}'. {hint}",
    )
    REASONING_SPAN_ALREADY_OPEN = (
        "reasoning-span-already-open",
        "REASONING_START names a reasoning span that is open.",
        "Cannot send 'REASONING_START' event: A reasoning span with ID '{eid}' is already in "
        "progress. Complete it with 'REASONING_END' first.",
    )
    REASONING_SPAN_NOT_OPEN = (
        "reasoning-span-not-open",
        "REASONING_END names no open reasoning span.",
        "Cannot send '{shown}' event: No active reasoning span found with ID '{eid}'. {hint}",
    )
    REASONING_MESSAGE_ALREADY_OPEN = (
        "reasoning-message-already-open",
        "REASONING_MESSAGE_START names a reasoning message that is open.",
        "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '{eid}' is "
        "already in progress. Complete it with 'REASONING_MESSAGE_END' first.",
    )
    REASONING_MESSAGE_NOT_OPEN = (
        "reasoning-message-not-open",
        "REASONING_MESSAGE_CONTENT/END names no open reasoning message.",
        "Cannot send '{shown}' event: No active reasoning message found with ID '{eid}'. {hint}",
    )
    STEP_ALREADY_ACTIVE = (
        "step-already-active",
        "STEP_STARTED names a step its owner has open.",
        "Step \"{name}\" is already active for 'STEP_STARTED'{where}",
    )
    STEP_NOT_STARTED = (
        "step-not-started",
        "STEP_FINISHED names a step nobody has open.",
        "Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started",
    )
    STEP_OWNER_MISMATCH = (
        "step-owner-mismatch",
        "STEP_FINISHED names a step open under another owner.",
        "Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to {mine}: that step is "
        "open under {theirs}. A step must be finished by whoever started it.",
    )
    # -- attribution
    OWNER_MISMATCH = (
        "owner-mismatch",
        "A tagged continuation or re-opener disagrees with the owner on record for the entity "
        "(text, tool call, reasoning, activity, encrypted value).",
        "Cannot send '{shown}': subagentRunId '{tag}' does not match the {label} '{eid}' "
        "opener's subagent '{owner}'.",
    )
    TOOL_CALL_PARENT_OWNER = (
        "tool-call-parent-owner",
        "A tool call's owner disagrees with the owner of its parent message.",
        "Cannot send 'TOOL_CALL_START': {conflict}. A tool call belongs to the message that "
        "carries it.",
    )
    # -- subagents
    SUBAGENT_ACTIVE = (
        "subagent-active",
        "SUBAGENT_STARTED names a subagent that is active.",
        "Cannot send 'SUBAGENT_STARTED': subagent '{sid}' is already active. Finish it with "
        "'SUBAGENT_FINISHED' first.",
    )
    SUBAGENT_REUSED = (
        "subagent-reused",
        "SUBAGENT_STARTED names a subagent that already finished in this run.",
        "Cannot send 'SUBAGENT_STARTED': subagent '{sid}' has already finished in this run. "
        "Subagent IDs are per-invocation and cannot be reused.",
    )
    SUBAGENT_PARENT_UNKNOWN = (
        "subagent-parent-unknown",
        "SUBAGENT_STARTED names a parent subagent not started in this run.",
        "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not been started "
        "in this run.",
    )
    SUBAGENT_NOT_ACTIVE = (
        "subagent-not-active",
        "SUBAGENT_FINISHED/ERROR names no active subagent.",
        "Cannot send '{etype}': no active subagent found with ID '{sid}'. A 'SUBAGENT_STARTED' "
        "event must be sent first.",
    )
    # -- chunk expansion (the client's transformChunks)
    CHUNK_MISSING_ID = (
        "chunk-missing-id",
        "The first chunk of a stream lacks its messageId or toolCallId.",
        "First {chunk} must have a {field}",
    )
    CHUNK_MISSING_NAME = (
        "chunk-missing-name",
        "The first TOOL_CALL_CHUNK of a stream lacks toolCallName.",
        "First TOOL_CALL_CHUNK must have a toolCallName",
    )
    CHUNK_FIELD_MISMATCH = (
        "chunk-field-mismatch",
        "A continuation chunk repeats role, name, toolCallName or parentMessageId with a "
        "different value.",
        "Cannot continue {entity} '{eid}': chunk {field} '{incoming}' does not match the open "
        "stream's {field} {known}.",
    )
    CHUNK_LANE_MISMATCH = (
        "chunk-lane-mismatch",
        "A chunk's subagentRunId disagrees with the lane that holds its id.",
        "Cannot continue {entity} '{eid}': chunk subagentRunId '{tag}' does not match the open "
        "stream's subagent '{holder}'.",
    )
    CHUNK_AMBIGUOUS = (
        "chunk-ambiguous",
        "An untagged chunk without id could continue several lanes.",
        "Ambiguous {chunk}: it carries neither a {field} nor a subagentRunId, but {count} lanes "
        "have an open {entity}. Attribute the chunk to the subagent it belongs to.",
    )
    # -- the specification's MUSTs the client does not check
    RUN_ID_MISMATCH = (
        "run-id-mismatch",
        "RUN_FINISHED repeats RUN_STARTED's threadId and runId.",
        "Cannot send 'RUN_FINISHED' with threadId '{thread_id}' and runId '{run_id}': the run "
        "started with threadId '{started_thread_id}' and runId '{started_run_id}'.",
        False,
    )
    TOOL_RESULT_UNKNOWN_CALL = (
        "tool-result-unknown-call",
        "TOOL_CALL_RESULT answers a tool call never seen.",
        "Cannot send 'TOOL_CALL_RESULT' for tool call '{tid}': no such tool call was started in "
        "this run or is known from the input's messages.",
        False,
    )
    TOOL_RESULT_OPEN_CALL = (
        "tool-result-open-call",
        "TOOL_CALL_RESULT answers a tool call still open.",
        "Cannot send 'TOOL_CALL_RESULT' for tool call '{tid}': the call is still open. Send "
        "'TOOL_CALL_END' first.",
        False,
    )
    PENDING_TOOL_CALL_UNKNOWN = (
        "pending-tool-call-unknown",
        "A success outcome's pendingToolCallIds names a tool call this run did not start.",
        "Cannot send 'RUN_FINISHED': pendingToolCallIds names tool call '{tid}', which this run "
        "did not start. List only the calls this run made and left for the client to answer.",
        False,
    )
    PENDING_TOOL_CALL_ANSWERED = (
        "pending-tool-call-answered",
        "A success outcome's pendingToolCallIds names a tool call this run answered.",
        "Cannot send 'RUN_FINISHED': pendingToolCallIds names tool call '{tid}', which this run "
        "answered with 'TOOL_CALL_RESULT'. A pending call is one the client answers.",
        False,
    )
    PENDING_TOOL_CALL_DUPLICATE = (
        "pending-tool-call-duplicate",
        "A success outcome's pendingToolCallIds names a tool call twice.",
        "Cannot send 'RUN_FINISHED': pendingToolCallIds names tool call '{tid}' more than once. "
        "List each pending call once, in the order the calls were made.",
        False,
    )
    SUBAGENT_OPEN_AT_FINISH = (
        "subagent-open-at-finish",
        "SUBAGENT_FINISHED while the subagent still owns open messages, reasoning, tool calls, "
        "steps or child subagents.",
        "Cannot send 'SUBAGENT_FINISHED' for subagent '{sid}' while it still has open: "
        "{listing}. Close them first, or end it with 'SUBAGENT_ERROR'.",
        False,
    )
    INTERRUPT_ID_DUPLICATE = (
        "interrupt-id-duplicate",
        "An interrupt outcome repeats an interrupt id.",
        "Cannot send 'RUN_FINISHED': interrupt id '{iid}' appears more than once. Interrupt ids "
        "are unique within a run.",
        False,
    )
    SUSPENDED_WITHOUT_INTERRUPT = (
        "suspended-without-interrupt",
        "A subagent finished suspended but the run did not finish with an interrupt outcome.",
        "Cannot send 'RUN_FINISHED' with a '{outcome}' outcome: subagent(s) {listing} finished "
        "suspended, so the run must finish with an 'interrupt' outcome.",
        False,
    )
    SUSPENDED_INTERRUPT_UNKNOWN = (
        "suspended-interrupt-unknown",
        "A suspended subagent's interruptIds name an interrupt the run's interrupt outcome lacks.",
        "Cannot send 'RUN_FINISHED': subagent '{sid}' finished suspended on interrupt '{iid}', "
        "which the interrupt outcome does not contain.",
        False,
    )
    SUSPENDED_INTERRUPT_OWNER = (
        "suspended-interrupt-owner",
        "A suspended subagent's interruptIds name an interrupt attributed to someone else.",
        "Cannot send 'RUN_FINISHED': subagent '{sid}' finished suspended on interrupt '{iid}', "
        "but that interrupt is attributed to '{owner}'. A subagent lists only the interrupts it "
        "raised itself.",
        False,
    )
    INTERRUPT_SUBAGENT_UNKNOWN = (
        "interrupt-subagent-unknown",
        "An interrupt of the outcome names a subagentRunId not started in this run.",
        "Cannot send 'RUN_FINISHED': interrupt '{iid}' names subagent '{sid}', which was not "
        "started in this run. Attribute the interrupt to a subagent of this run, or omit its "
        "subagentRunId.",
        False,
    )
    TOOL_CALL_PARENT_ROLE = (
        "tool-call-parent-role",
        "TOOL_CALL_START's parentMessageId names a user, system, developer or tool message.",
        "Cannot send 'TOOL_CALL_START' for tool call '{tid}': parentMessageId '{parent}' names a "
        "{role} message, and a tool call belongs to an assistant message. Name the assistant "
        "message that carries the call, or omit parentMessageId.",
        False,
    )
    MESSAGE_ID_KIND_CLASH = (
        "message-id-kind-clash",
        "An activity and a text or reasoning message share a message id (ids are unique across "
        "kinds).",
        "Cannot send '{etype}' for message '{mid}': that id already names {other} in this run. "
        "Message ids are unique across activity, text and reasoning messages; give the {what} "
        "its own id.",
        False,
    )


#: Every rule id `Verifier` reports, and what it checks.
RULES: Final[Mapping[str, str]] = MappingProxyType({r.id: r.description for r in Rule})

#: The rules ``@ag-ui/client`` 1.0.0 does not check; only ``strict=True`` reports them.
SPEC_ONLY_RULES: Final[frozenset[str]] = frozenset(r.id for r in Rule if not r.client_checked)
