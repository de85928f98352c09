"""
Hand-written AG-UI streams for the verifier, each with the verdict it must get.

Every case is a list of wire-form events (camelCase dicts, as they travel) and:

- ``rule``: the rule id of the first violation ``Verifier(strict=False)``
  reports, ``"parse"`` when `ambient_runs.from_wire` already refuses an event
  (the official client's zod stage refuses it too), or None for a valid
  stream. The official client accepts exactly the cases whose ``rule`` is None.
- ``strict_rule``: the same for ``Verifier(strict=True)``; it differs from
  ``rule`` only for the specification's MUSTs the client leaves unchecked.
- ``divergence``: set when our side is *known* to disagree with the client,
  with the reason. The differential test then requires the disagreement, so
  that fixing it shows up.

Events whose ``type`` is not one of the 31 AG-UI types are dropped before our
verifier sees them, exactly as the client's enforcement stage drops them.

`tests/test_verify.py` checks ``rule`` and ``strict_rule`` without Node;
`tests/test_verify_differential.py` checks the client's verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ("CASES", "Case")

Event = dict[str, Any]

_SAME: Any = object()


@dataclass(frozen=True)
class Case:
    """One hand-written stream and the verdicts it must get."""

    name: str
    events: tuple[Event, ...]
    rule: str | None
    strict_rule: str | None
    divergence: str | None = None

    @property
    def client_ok(self) -> bool:
        """Whether the official client accepts the stream."""
        accepted = self.rule is None
        return accepted if self.divergence is None else not accepted


CASES: list[Case] = []


def case(
    name: str,
    events: list[Event],
    rule: str | None = None,
    *,
    strict: str | None = _SAME,
    divergence: str | None = None,
) -> None:
    """Add a case; *strict* defaults to *rule*."""
    assert all(c.name != name for c in CASES), name
    CASES.append(Case(name, tuple(events), rule, rule if strict is _SAME else strict, divergence))


# --------------------------------------------------------------------------- builders


def _tag(event: Event, sub: str | None) -> Event:
    return event if sub is None else {**event, "subagentRunId": sub}


def rs(run: str = "r", thread: str = "t", **extra: Any) -> Event:
    return {"type": "RUN_STARTED", "threadId": thread, "runId": run, **extra}


def rf(run: str = "r", thread: str = "t", **extra: Any) -> Event:
    return {"type": "RUN_FINISHED", "threadId": thread, "runId": run, **extra}


def rerr(message: str = "boom", **extra: Any) -> Event:
    return {"type": "RUN_ERROR", "message": message, **extra}


def ts(mid: str, sub: str | None = None, **extra: Any) -> Event:
    return _tag({"type": "TEXT_MESSAGE_START", "messageId": mid, **extra}, sub)


def tc(mid: str, sub: str | None = None, delta: str = "hi") -> Event:
    return _tag({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta}, sub)


def te(mid: str, sub: str | None = None) -> Event:
    return _tag({"type": "TEXT_MESSAGE_END", "messageId": mid}, sub)


def text(mid: str, sub: str | None = None) -> list[Event]:
    return [ts(mid, sub), tc(mid, sub), te(mid, sub)]


def tool_s(tid: str, sub: str | None = None, parent: str | None = None) -> Event:
    event = {"type": "TOOL_CALL_START", "toolCallId": tid, "toolCallName": "search"}
    if parent is not None:
        event["parentMessageId"] = parent
    return _tag(event, sub)


def tool_a(tid: str, sub: str | None = None) -> Event:
    return _tag({"type": "TOOL_CALL_ARGS", "toolCallId": tid, "delta": "{}"}, sub)


def tool_e(tid: str, sub: str | None = None) -> Event:
    return _tag({"type": "TOOL_CALL_END", "toolCallId": tid}, sub)


def tool(tid: str, sub: str | None = None, parent: str | None = None) -> list[Event]:
    return [tool_s(tid, sub, parent), tool_a(tid, sub), tool_e(tid, sub)]


def result(mid: str, tid: str, sub: str | None = None) -> Event:
    return _tag(
        {"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": tid, "content": "ok"}, sub
    )


def span_s(mid: str, sub: str | None = None) -> Event:
    return _tag({"type": "REASONING_START", "messageId": mid}, sub)


def span_e(mid: str, sub: str | None = None) -> Event:
    return _tag({"type": "REASONING_END", "messageId": mid}, sub)


def rm_s(mid: str, sub: str | None = None) -> Event:
    return _tag({"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}, sub)


def rm_c(mid: str, sub: str | None = None) -> Event:
    return _tag({"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": "hm"}, sub)


def rm_e(mid: str, sub: str | None = None) -> Event:
    return _tag({"type": "REASONING_MESSAGE_END", "messageId": mid}, sub)


def enc(subtype: str, eid: str, sub: str | None = None) -> Event:
    return _tag(
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": subtype,
            "entityId": eid,
            "encryptedValue": "xyz",
        },
        sub,
    )


def step_s(name: str, sub: str | None = None) -> Event:
    return _tag({"type": "STEP_STARTED", "stepName": name}, sub)


def step_f(name: str, sub: str | None = None) -> Event:
    return _tag({"type": "STEP_FINISHED", "stepName": name}, sub)


def sa_s(sid: str, parent: str | None = None, **extra: Any) -> Event:
    event = {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper", **extra}
    if parent is not None:
        event["parentSubagentRunId"] = parent
    return event


def sa_f(sid: str, **extra: Any) -> Event:
    return {"type": "SUBAGENT_FINISHED", "subagentRunId": sid, **extra}


def suspended(sid: str, *interrupt_ids: str) -> Event:
    outcome: Event = {"type": "suspended"}
    if interrupt_ids:
        outcome["interruptIds"] = list(interrupt_ids)
    return sa_f(sid, outcome=outcome)


def sa_err(sid: str) -> Event:
    return {"type": "SUBAGENT_ERROR", "subagentRunId": sid, "message": "failed"}


def interrupted(*interrupts: Event, run: str = "r") -> Event:
    return rf(run, outcome={"type": "interrupt", "interrupts": list(interrupts)})


def intr(iid: str, sub: str | None = None) -> Event:
    return _tag({"id": iid, "reason": "input_required"}, sub)


def act_s(mid: str, sub: str | None = None, **extra: Any) -> Event:
    return _tag(
        {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": mid,
            "activityType": "plan",
            "content": {"steps": []},
            **extra,
        },
        sub,
    )


def act_d(mid: str, sub: str | None = None) -> Event:
    return _tag(
        {
            "type": "ACTIVITY_DELTA",
            "messageId": mid,
            "activityType": "plan",
            "patch": [{"op": "add", "path": "/steps/-", "value": "x"}],
        },
        sub,
    )


def snapshot(*messages: Event) -> Event:
    return {"type": "MESSAGES_SNAPSHOT", "messages": list(messages)}


def msg(mid: str, role: str = "assistant", sub: str | None = None, **extra: Any) -> Event:
    base: Event = {"id": mid, "role": role}
    if role in ("user", "system", "developer", "reasoning"):
        base["content"] = "text"
    if role == "activity":
        base.update(activityType="plan", content={})
    if role == "tool":
        base.update(content="ok", toolCallId="tc")
    return _tag({**base, **extra}, sub)


def with_calls(mid: str, *tids: str, sub: str | None = None) -> Event:
    calls = [
        {"id": t, "type": "function", "function": {"name": "search", "arguments": "{}"}}
        for t in tids
    ]
    return msg(mid, "assistant", sub, toolCalls=calls)


def custom(sub: str | None = None) -> Event:
    return _tag({"type": "CUSTOM", "name": "ping", "value": None}, sub)


def raw(sub: str | None = None) -> Event:
    return _tag({"type": "RAW", "event": {"x": 1}}, sub)


def state(sub: str | None = None) -> Event:
    return _tag({"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}, sub)


def state_d(sub: str | None = None) -> Event:
    return _tag({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": 2}]}, sub)


def _drop_none(event: Event) -> Event:
    return {k: v for k, v in event.items() if v is not None}


def chunk(
    mid: str | None = None, delta: str | None = "x", sub: str | None = None, **extra: Any
) -> Event:
    return _drop_none(
        {
            "type": "TEXT_MESSAGE_CHUNK",
            "messageId": mid,
            "delta": delta,
            "subagentRunId": sub,
            **extra,
        }
    )


def tchunk(
    tid: str | None = None,
    name: str | None = None,
    delta: str | None = "{",
    sub: str | None = None,
    **extra: Any,
) -> Event:
    return _drop_none(
        {
            "type": "TOOL_CALL_CHUNK",
            "toolCallId": tid,
            "toolCallName": name,
            "delta": delta,
            "subagentRunId": sub,
            **extra,
        }
    )


def rchunk(mid: str | None = None, delta: str | None = "hm", sub: str | None = None) -> Event:
    return _drop_none(
        {"type": "REASONING_MESSAGE_CHUNK", "messageId": mid, "delta": delta, "subagentRunId": sub}
    )


# --------------------------------------------------------------------------- run lifecycle

case("minimal-run", [rs(), rf()])
case("empty-stream", [])
case("text-message", [rs(), *text("m"), rf()])
case("run-error-first", [rerr()])
case("run-error-first-then-run", [rerr(), rs(), rf()])
case("first-event-text", [ts("m"), rs(), rf()], "first-event")
case("first-event-run-finished", [rf()], "first-event")
case("event-after-run-finished", [rs(), rf(), custom()], "after-run-finished")
case("late-run-error", [rs(), rf(), rerr()])
case("late-run-error-twice", [rs(), rf(), rerr(), rerr()], "after-run-error")
case("event-after-run-error", [rs(), rerr(), custom()], "after-run-error")
case("run-error-twice", [rs(), rerr(), rerr()], "after-run-error")
case("run-after-run-error", [rs(), rerr(), rs("r2"), rf("r2")])
case("nested-run-started", [rs(), rs("r2"), rf("r2")], "run-already-active")
case("run-finished-twice", [rs(), rf(), rf()], "after-run-finished")
case("truncated-run", [rs(), ts("m"), tc("m")])
case("run-error-abandons-open-work", [rs(), ts("m"), tool_s("c"), step_s("s"), sa_s("s1"), rerr()])
case("two-runs", [rs(), *text("m1"), rf(), rs("r2"), *text("m2"), rf("r2")])
case(
    "owners-reset-between-runs",
    [rs(), *text("m", "s1"), rf(), rs("r2"), *text("m", "s2"), rf("r2")],
)
case(
    "open-message-blocks-next-run",
    [rs(), ts("m"), rs("r2")],
    "run-already-active",
)

# --------------------------------------------------------------------------- text messages

case("text-reopen-after-close", [rs(), *text("m"), ts("m"), tc("m"), te("m"), rf()])
case("text-start-twice", [rs(), ts("m"), ts("m")], "text-already-open")
case("text-content-unknown", [rs(), tc("m")], "text-not-open")
case("text-end-unknown", [rs(), te("m")], "text-not-open")
case("text-end-twice", [rs(), *text("m"), te("m")], "text-not-open")
case("text-open-at-run-finished", [rs(), ts("m"), rf()], "open-at-run-finished")
case("text-empty-delta-keepalive", [rs(), ts("m"), tc("m", delta=""), te("m"), rf()])
case("text-user-role", [rs(), ts("m", role="user"), te("m"), rf()])
case("text-tool-role-refused", [rs(), ts("m", role="tool"), te("m"), rf()], "parse")
case("text-interleaved", [rs(), ts("a"), ts("b"), tc("a"), tc("b"), te("b"), te("a"), rf()])

# --------------------------------------------------------------------------- ownership

case("tagged-continuation-matches", [rs(), *text("m", "s1"), rf()])
case("untagged-continuation-passes", [rs(), ts("m", "s1"), tc("m"), te("m"), rf()])
case("tagged-content-on-parent-message", [rs(), ts("m"), tc("m", "s1")], "owner-mismatch")
case("tagged-end-other-subagent", [rs(), ts("m", "s1"), te("m", "s2")], "owner-mismatch")
case("reopen-by-other-owner", [rs(), *text("m", "s1"), ts("m", "s2")], "owner-mismatch")
case(
    "untagged-reopen-keeps-owner",
    [rs(), *text("m", "s1"), ts("m"), tc("m", "s2")],
    "owner-mismatch",
)
case("empty-string-subagent-is-not-parent", [rs(), ts("m"), tc("m", "")], "owner-mismatch")
case("empty-string-subagent-owns", [rs(), ts("m", ""), tc("m"), te("m", ""), rf()])
case("tags-before-announce", [rs(), *text("m", "s1"), sa_s("s1"), sa_f("s1"), rf()])
case("tags-after-finish", [rs(), sa_s("s1"), sa_f("s1"), *text("m", "s1"), rf()])
case(
    "tags-without-lifecycle", [rs(), *text("m", "s9"), step_s("x", "s9"), step_f("x", "s9"), rf()]
)

# --------------------------------------------------------------------------- tool calls

case("tool-call-with-result", [rs(), *tool("c"), result("tm", "c"), rf()])
case("tool-args-unknown", [rs(), tool_a("c")], "tool-call-not-open")
case("tool-end-unknown", [rs(), tool_e("c")], "tool-call-not-open")
case("tool-start-twice", [rs(), tool_s("c"), tool_s("c")], "tool-call-already-open")
case("tool-reopen-after-end", [rs(), *tool("c"), *tool("c"), rf()])
case("tool-open-at-run-finished", [rs(), tool_s("c"), rf()], "open-at-run-finished")
case(
    "tool-parent-message-owner-mismatch",
    [rs(), *text("m", "s1"), tool_s("c", "s2", parent="m")],
    "tool-call-parent-owner",
)
case(
    "tool-inherits-parent-message-owner",
    [rs(), *text("m", "s1"), tool_s("c", parent="m"), tool_a("c", "s2")],
    "owner-mismatch",
)
case(
    "tool-inherited-owner-continues",
    [rs(), *text("m", "s1"), tool_s("c", parent="m"), tool_a("c", "s1"), tool_e("c", "s1"), rf()],
)
case(
    "tool-reopen-under-other-owners-message",
    [rs(), *text("m0"), *tool("c", parent="m0"), *text("m1", "s1"), tool_s("c", parent="m1")],
    "tool-call-parent-owner",
)
case("tool-unknown-parent-message", [rs(), *tool("c", "s1", parent="nowhere"), rf()])
case(
    "tool-parent-is-a-user-message",
    [
        rs(input={"threadId": "t", "runId": "r", "messages": [msg("u1", "user")]}),
        *tool("c", parent="u1"),
        rf(),
    ],
    strict="tool-call-parent-role",
)
case(
    "tool-parent-is-a-system-message-of-a-snapshot",
    [rs(), snapshot(msg("s", "system")), *tool("c", parent="s"), rf()],
    strict="tool-call-parent-role",
)
case(
    "tool-parent-is-a-developer-text-message",
    [rs(), ts("d", role="developer"), tc("d"), te("d"), *tool("c", parent="d"), rf()],
    strict="tool-call-parent-role",
)
case(
    "tool-parent-is-a-tool-result",
    [rs(), *tool("c0"), result("tm", "c0"), *tool("c1", parent="tm"), rf()],
    strict="tool-call-parent-role",
)
case(
    "tool-parent-user-message-replaced-by-assistant",
    [rs(), snapshot(msg("m", "user")), snapshot(msg("m")), *tool("c", parent="m"), rf()],
)
case(
    "tool-parent-chunk-is-a-user-message",
    [rs(), snapshot(msg("u1", "user")), tchunk("c", "search", parentMessageId="u1"), rf()],
    strict="tool-call-parent-role",
)
case(
    "tool-parent-message-id-null-tolerated",
    [rs(), {**tool_s("c"), "parentMessageId": None}, tool_e("c"), rf()],
)
case(
    "tool-result-unknown-call",
    [rs(), result("tm", "ghost"), rf()],
    strict="tool-result-unknown-call",
)
case(
    "tool-result-open-call",
    [rs(), tool_s("c"), result("tm", "c"), tool_e("c"), rf()],
    strict="tool-result-open-call",
)
case(
    "frontend-tool-call-pending",
    [
        rs(),
        *tool("f1", "s1"),
        *tool("b1"),
        result("tm", "b1"),
        rf(outcome={"type": "success", "pendingToolCallIds": ["f1"]}),
    ],
)
case(
    "frontend-tool-call-pending-chunk",
    [rs(), tchunk("f1", "confirm"), rf(outcome={"type": "success", "pendingToolCallIds": ["f1"]})],
)
case(
    "pending-tool-call-unknown",
    [rs(), *tool("c"), rf(outcome={"type": "success", "pendingToolCallIds": ["c", "other"]})],
    strict="pending-tool-call-unknown",
)
case(
    "pending-tool-call-from-history",
    [
        rs(input={"threadId": "t", "runId": "r", "messages": [with_calls("a1", "c0")]}),
        rf(outcome={"type": "success", "pendingToolCallIds": ["c0"]}),
    ],
    strict="pending-tool-call-unknown",
)
case(
    "pending-tool-call-answered",
    [
        rs(),
        *tool("c"),
        result("tm", "c"),
        rf(outcome={"type": "success", "pendingToolCallIds": ["c"]}),
    ],
    strict="pending-tool-call-answered",
)
case(
    "pending-tool-call-duplicate",
    [rs(), *tool("c"), rf(outcome={"type": "success", "pendingToolCallIds": ["c", "c"]})],
    strict="pending-tool-call-duplicate",
)
case(
    "tool-result-for-history-call",
    [
        rs(input={"threadId": "t", "runId": "r", "messages": [with_calls("a1", "c0")]}),
        result("tm", "c0"),
        rf(),
    ],
)
case(
    "tool-result-for-snapshot-call",
    [rs(), snapshot(with_calls("a1", "c0")), result("tm", "c0"), rf()],
)
case(
    "tool-result-mints-message-owner",
    [rs(), *tool("c"), result("tm", "c", "s1"), ts("tm", "s2")],
    "owner-mismatch",
)
case(
    "tool-result-newest-mint-wins",
    [rs(), *tool("c"), result("tm", "c", "s1"), result("tm", "c"), ts("tm", "s1")],
    "owner-mismatch",
)

# --------------------------------------------------------------------------- reasoning

case(
    "reasoning-span-and-message-share-id",
    [rs(), span_s("r"), rm_s("r"), rm_c("r"), rm_e("r"), span_e("r"), rf()],
)
case("reasoning-span-twice", [rs(), span_s("r"), span_s("r")], "reasoning-span-already-open")
case("reasoning-end-unknown", [rs(), span_e("r")], "reasoning-span-not-open")
case("reasoning-message-twice", [rs(), rm_s("r"), rm_s("r")], "reasoning-message-already-open")
case("reasoning-content-unknown", [rs(), rm_c("r")], "reasoning-message-not-open")
case(
    "reasoning-span-is-not-a-message", [rs(), span_s("r"), rm_c("r")], "reasoning-message-not-open"
)
case("reasoning-message-open-at-finish", [rs(), rm_s("r"), rf()], "open-at-run-finished")
case("reasoning-span-open-at-finish", [rs(), span_s("r"), rf()], "open-at-run-finished")
case("reasoning-owner-shared", [rs(), span_s("r", "s1"), rm_s("r", "s2")], "owner-mismatch")
case(
    "reasoning-reopen-untagged-keeps-owner",
    [rs(), rm_s("r", "s1"), rm_e("r"), rm_s("r"), rm_c("r", "s2")],
    "owner-mismatch",
)
case(
    "reasoning-message-without-role",
    [rs(), {"type": "REASONING_MESSAGE_START", "messageId": "r"}],
    "parse",
)
case(
    "reasoning-text-namespaces-separate",
    [rs(), *text("x", "s1"), rm_s("x", "s2"), rm_e("x"), rf()],
)

# --------------------------------------------------------------------------- encrypted values

case(
    "encrypted-tool-call-after-end",
    [rs(), *tool("c", "s1"), enc("tool-call", "c", "s2")],
    "owner-mismatch",
)
case("encrypted-tool-call-matching", [rs(), *tool("c", "s1"), enc("tool-call", "c", "s1"), rf()])
case(
    "encrypted-reasoning-message",
    [rs(), rm_s("r", "s1"), rm_e("r", "s1"), enc("message", "r", "s2")],
    "owner-mismatch",
)
case(
    "encrypted-text-owner-before-reasoning",
    [rs(), *text("x", "s1"), rm_s("x", "s2"), rm_e("x"), enc("message", "x", "s2")],
    "owner-mismatch",
)
case("encrypted-unknown-entity", [rs(), enc("message", "nope", "s1"), rf()])
case(
    "encrypted-tool-call-ignores-messages",
    [rs(), *text("x", "s1"), enc("tool-call", "x", "s2"), rf()],
)
case("encrypted-untagged-always-passes", [rs(), *tool("c", "s1"), enc("tool-call", "c"), rf()])

# --------------------------------------------------------------------------- steps

case(
    "steps-per-owner",
    [rs(), step_s("tools"), step_s("tools", "s1"), step_f("tools", "s1"), step_f("tools"), rf()],
)
case("step-started-twice", [rs(), step_s("a"), step_s("a")], "step-already-active")
case(
    "step-started-twice-subagent",
    [rs(), step_s("a", "s1"), step_s("a", "s1")],
    "step-already-active",
)
case("step-not-started", [rs(), step_f("a")], "step-not-started")
case("step-finished-by-other-owner", [rs(), step_s("a"), step_f("a", "s1")], "step-owner-mismatch")
case("step-finished-by-parent", [rs(), step_s("a", "s1"), step_f("a")], "step-owner-mismatch")
case("step-empty-string-owner", [rs(), step_s("a"), step_f("a", "")], "step-owner-mismatch")
case("step-open-at-run-finished", [rs(), step_s("a", "s1"), rf()], "open-at-run-finished")
case(
    "step-restarted-after-finish", [rs(), step_s("a"), step_f("a"), step_s("a"), step_f("a"), rf()]
)

# --------------------------------------------------------------------------- subagents

case(
    "subagent-nesting",
    [
        rs(),
        sa_s("s1"),
        *text("m1", "s1"),
        sa_s("s2", parent="s1"),
        *text("m2", "s2"),
        sa_f("s2"),
        sa_f("s1", result={"answer": 42}),
        rf(),
    ],
)
case("subagent-started-twice", [rs(), sa_s("s1"), sa_s("s1")], "subagent-active")
case("subagent-reused-in-run", [rs(), sa_s("s1"), sa_f("s1"), sa_s("s1")], "subagent-reused")
case(
    "subagent-reused-after-error", [rs(), sa_s("s1"), sa_err("s1"), sa_s("s1")], "subagent-reused"
)
case(
    "subagent-reused-across-runs",
    [rs(), sa_s("s1"), sa_f("s1"), rf(), rs("r2"), sa_s("s1"), sa_f("s1"), rf("r2")],
)
case("subagent-parent-unknown", [rs(), sa_s("s2", parent="s1")], "subagent-parent-unknown")
case(
    "subagent-parent-from-previous-run",
    [rs(), sa_s("s1"), sa_f("s1"), rf(), rs("r2"), sa_s("s2", parent="s1")],
    "subagent-parent-unknown",
)
case(
    "subagent-parent-already-finished",
    [rs(), sa_s("s1"), sa_f("s1"), sa_s("s2", parent="s1"), sa_f("s2"), rf()],
)
case("subagent-finish-unknown", [rs(), sa_f("s1")], "subagent-not-active")
case("subagent-error-unknown", [rs(), sa_err("s1")], "subagent-not-active")
case("subagent-finish-twice", [rs(), sa_s("s1"), sa_f("s1"), sa_f("s1")], "subagent-not-active")
case("subagent-open-at-run-finished", [rs(), sa_s("s1"), rf()], "open-at-run-finished")
case("subagent-error-then-run-goes-on", [rs(), sa_s("s1"), sa_err("s1"), *text("m"), rf()])
case(
    "subagent-finished-with-open-message",
    [rs(), sa_s("s1"), ts("m", "s1"), sa_f("s1"), te("m", "s1"), rf()],
    strict="subagent-open-at-finish",
)
case(
    "subagent-finished-with-open-tool-call",
    [rs(), sa_s("s1"), *text("m", "s1"), tool_s("c", parent="m"), sa_f("s1"), tool_e("c"), rf()],
    strict="subagent-open-at-finish",
)
case(
    "subagent-finished-with-open-step",
    [rs(), sa_s("s1"), step_s("plan", "s1"), sa_f("s1"), step_f("plan", "s1"), rf()],
    strict="subagent-open-at-finish",
)
case(
    "subagent-finished-with-open-reasoning",
    [rs(), sa_s("s1"), span_s("r", "s1"), sa_f("s1"), span_e("r"), rf()],
    strict="subagent-open-at-finish",
)
case(
    "subagent-finished-with-open-child",
    [rs(), sa_s("s1"), sa_s("s2", parent="s1"), sa_f("s1"), sa_f("s2"), rf()],
    strict="subagent-open-at-finish",
)
case(
    "subagent-suspended-with-open-message",
    [
        rs(),
        sa_s("s1"),
        ts("m", "s1"),
        suspended("s1", "i1"),
        te("m"),
        interrupted(intr("i1", "s1")),
    ],
    strict="subagent-open-at-finish",
)
case(
    "subagent-error-with-open-message",
    [rs(), sa_s("s1"), ts("m", "s1"), sa_err("s1"), te("m", "s1"), rf()],
)
case(
    "subagent-closes-everything-first",
    [
        rs(),
        sa_s("s1"),
        step_s("plan", "s1"),
        sa_s("s2", parent="s1"),
        *tool("c", "s2"),
        sa_f("s2"),
        span_s("r", "s1"),
        span_e("r", "s1"),
        step_f("plan", "s1"),
        sa_f("s1"),
        result("tm", "c", "s1"),
        rf(),
    ],
)
case(
    "subagent-suspended-and-interrupted",
    [rs(), sa_s("s1"), suspended("s1", "i1"), interrupted(intr("i1", "s1"))],
)
case(
    "subagent-suspended-by-descendant",
    [
        rs(),
        sa_s("s1"),
        sa_s("s2", parent="s1"),
        suspended("s2", "i1"),
        suspended("s1"),
        interrupted(intr("i1", "s2")),
    ],
)
case(
    "suspended-interrupt-unknown",
    [rs(), sa_s("s1"), suspended("s1", "i1"), interrupted(intr("i2", "s1"))],
    strict="suspended-interrupt-unknown",
)
case(
    "suspended-interrupt-owner",
    [rs(), sa_s("s1"), suspended("s1", "i1"), interrupted(intr("i1"))],
    strict="suspended-interrupt-owner",
)
case(
    "suspended-without-interrupt",
    [rs(), sa_s("s1"), suspended("s1", "i1"), rf()],
    strict="suspended-without-interrupt",
)
case(
    "suspended-then-cancelled",
    [rs(), sa_s("s1"), suspended("s1"), rf(outcome={"type": "cancelled"})],
    strict="suspended-without-interrupt",
)
case(
    "suspended-then-run-error",
    [rs(), sa_s("s1"), suspended("s1", "i1"), rerr()],
)
case(
    "interrupt-id-duplicate",
    [rs(), interrupted(intr("i1"), intr("i1"))],
    strict="interrupt-id-duplicate",
)
case(
    "interrupt-names-unknown-subagent",
    [rs(), interrupted(intr("i1", "ghost"))],
    strict="interrupt-subagent-unknown",
)
case(
    "interrupt-names-finished-subagent",
    [rs(), sa_s("s1"), sa_f("s1"), interrupted(intr("i1", "s1"))],
)
case("interrupt-empty-list", [rs(), rf(outcome={"type": "interrupt", "interrupts": []})], "parse")
case(
    "resume-suspended-subagent",
    [
        rs(),
        sa_s("s1"),
        *tool("c", "s1"),
        suspended("s1", "i1"),
        interrupted({**intr("i1", "s1"), "toolCallId": "c"}),
        rs(
            "r2",
            input={
                "threadId": "t",
                "runId": "r2",
                "messages": [with_calls("m", "c", sub="s1")],
                "resume": [{"interruptId": "i1", "status": "resolved", "payload": {"ok": True}}],
            },
        ),
        sa_s("s1"),
        result("tm", "c", "s1"),
        *text("m2", "s1"),
        sa_f("s1"),
        rf("r2"),
    ],
)
case(
    "subagent-success-with-interrupt-ids-stripped",
    [rs(), sa_s("s1"), sa_f("s1", outcome={"type": "success", "interruptIds": ["i"]}), rf()],
)
case(
    "subagent-outcome-unknown-type",
    [rs(), sa_s("s1"), sa_f("s1", outcome={"type": "weird"}), rf()],
    "parse",
    divergence="The client strips an unrecognised outcome member (with a warning) and reads "
    "it as success; from_wire refuses it, since a producer must never send one.",
)
case(
    "run-outcome-unknown-type",
    [rs(), rf(outcome={"type": "weird"})],
    "parse",
    divergence="As for subagent-outcome-unknown-type: the client strips the outcome and "
    "reads the run as a success (digest §10 trap 18); from_wire refuses it.",
)
case("subagent-parent-null", [rs(), sa_s("s1", parentSubagentRunId=None)], "parse")

# --------------------------------------------------------------------------- run ids (spec only)

case("run-id-mismatch", [rs(), rf("other")], strict="run-id-mismatch")
case("thread-id-mismatch", [rs(), rf(thread="other")], strict="run-id-mismatch")
case("run-id-mismatch-second-run", [rs(), rf(), rs("r2"), rf("r")], strict="run-id-mismatch")

# --------------------------------------------------------------------------- activity

case("activity-delta-matching", [rs(), act_s("a", "s1"), act_d("a", "s1"), act_d("a"), rf()])
case("activity-delta-owner-mismatch", [rs(), act_s("a", "s1"), act_d("a", "s2")], "owner-mismatch")
case(
    "activity-replace-false-keeps-owner",
    [rs(), act_s("a", "s1"), act_s("a", "s2", replace=False), act_d("a", "s2")],
    "owner-mismatch",
)
case(
    "activity-replace-reowns",
    [rs(), act_s("a", "s1"), act_s("a", "s2"), act_d("a", "s2"), rf()],
)
case(
    "activity-replace-false-on-new-owns",
    [rs(), act_s("a", "s1", replace=False), act_d("a", "s1"), rf()],
)
case("activity-delta-unknown", [rs(), act_d("a", "s1"), rf()])
case(
    "activity-takes-a-text-id",
    [rs(), *text("m"), act_s("m"), rf()],
    strict="message-id-kind-clash",
)
case(
    "activity-delta-on-a-user-message",
    [
        rs(input={"threadId": "t", "runId": "r", "messages": [msg("u1", "user")]}),
        act_d("u1"),
        rf(),
    ],
    strict="message-id-kind-clash",
)
case(
    "activity-takes-a-reasoning-id",
    [rs(), rm_s("rm"), rm_c("rm"), rm_e("rm"), act_s("rm"), rf()],
    strict="message-id-kind-clash",
)
case(
    "text-takes-an-activity-id",
    [rs(), act_s("a"), *text("a"), rf()],
    strict="message-id-kind-clash",
)
case(
    "text-chunk-takes-an-activity-id",
    [rs(), act_s("a"), chunk("a"), rf()],
    strict="message-id-kind-clash",
)
case(
    "reasoning-takes-an-activity-id",
    [rs(), act_s("a"), rm_s("a"), rm_c("a"), rm_e("a"), rf()],
    strict="message-id-kind-clash",
)
case(
    "activity-seeded-by-snapshot",
    [
        rs(),
        snapshot(msg("a", "activity", "s1")),
        act_s("a", "s2", replace=False),
        act_d("a", "s2"),
    ],
    "owner-mismatch",
)

# --------------------------------------------------------------------------- snapshots, seeding

case(
    "snapshot-overwrites-owner",
    [rs(), *text("m", "s1"), snapshot(msg("m", sub="s2")), *text("m", "s2"), rf()],
)
case(
    "snapshot-seeds-tool-calls",
    [rs(), snapshot(with_calls("a", "c", sub="s1")), tool_s("c", "s2")],
    "owner-mismatch",
)
case(
    "snapshot-reasoning-bucket",
    [rs(), snapshot(msg("r", "reasoning", "s1")), span_s("r", "s2")],
    "owner-mismatch",
)
case(
    "snapshot-message-owner-is-not-reasoning",
    [rs(), snapshot(msg("r", "user", "s1")), span_s("r", "s2"), span_e("r"), rf()],
)
case(
    "input-seeds-owners",
    [rs(input={"threadId": "t", "runId": "r", "messages": [msg("m", sub="s1")]}), ts("m", "s2")],
    "owner-mismatch",
)
case(
    "input-seeds-first-writer",
    [
        rs(input={"threadId": "t", "runId": "r", "messages": [msg("m", sub="s1"), msg("m")]}),
        ts("m", "s2"),
    ],
    "owner-mismatch",
)
case(
    "snapshot-last-writer",
    [rs(), snapshot(msg("m", sub="s1"), msg("m")), tc("m", "s1")],
    "text-not-open",
)
case(
    "snapshot-last-writer-owner",
    [rs(), snapshot(msg("m", sub="s1"), msg("m", sub="s2")), ts("m", "s1")],
    "owner-mismatch",
)
case(
    "snapshot-null-subagent",
    [rs(), snapshot(msg("m", sub=None) | {"subagentRunId": None})],
    "parse",
)
case(
    "snapshot-unknown-role",
    [rs(), snapshot({"id": "w", "role": "wizard", "content": "x"}), rf()],
    "parse",
    divergence="The client strips a message of unknown role from the snapshot; from_wire "
    "refuses the snapshot.",
)
case(
    "input-tools-null",
    [rs(input={"threadId": "t", "runId": "r", "messages": [], "tools": None}), rf()],
    divergence="from_wire reads RUN_STARTED.input with parse_input's leniency for request "
    "bodies (null tools read as absent); zod refuses null there. to_wire never emits it.",
)

# --------------------------------------------------------------------------- nulls, unknowns

case("null-subagent-run-id", [rs(), ts("m", subagentRunId=None)], "parse")
case("null-name", [rs(), ts("m", name=None)], "parse")
case("float-timestamp", [rs(), {**custom(), "timestamp": 1.5}], "parse")
case("null-metadata", [rs(), {**custom(), "metadata": None}], "parse")
case("null-raw-event-tolerated", [rs(), {**custom(), "rawEvent": None}, rf()])
case("null-outcome-tolerated", [rs(), rf(outcome=None)])
case("null-result-tolerated", [rs(), rf(result=None)])
case("null-custom-value", [rs(), custom(), rf()])
case("unknown-event-type-dropped", [rs(), {"type": "NOT_AN_EVENT", "x": 1}, rf()])
case("unknown-event-type-first", [{"type": "NOT_AN_EVENT"}, rs(), rf()])
case("event-without-type-dropped", [rs(), {"messageId": "m"}, rf()])
case("unknown-keys-stripped", [rs(), {**ts("m"), "subagentRunID": "typo"}, te("m"), rf()])
case("state-events-attributed", [rs(), state("s1"), state_d("s2"), raw("s3"), custom("s4"), rf()])

# --------------------------------------------------------------------------- chunks

case("text-chunks", [rs(), chunk("m"), chunk(), chunk(), rf()])
case("text-chunk-without-id", [rs(), chunk()], "chunk-missing-id")
case("tool-chunk-without-name", [rs(), tchunk("c")], "chunk-missing-name")
case("tool-chunk-without-id", [rs(), tchunk(name="search")], "chunk-missing-id")
case("tool-chunks", [rs(), tchunk("c", "search"), tchunk(delta="}"), rf()])
case("reasoning-chunks", [rs(), rchunk("r"), rchunk(), rf()])
case("chunk-new-id-closes-previous", [rs(), chunk("a"), chunk("b"), chunk(), rf()])
case("chunk-first-without-delta", [rs(), chunk("m", delta=None), chunk(), rf()])
case(
    "chunk-then-explicit-content",
    [rs(), chunk("m"), tc("m")],
    "text-not-open",
)
case(
    "chunk-then-explicit-end-same-lane",
    [rs(), chunk("m"), te("m")],
    "text-not-open",
)
case(
    "chunk-role-mismatch",
    [rs(), chunk("m", role="user"), chunk(role="assistant")],
    "chunk-field-mismatch",
)
case("chunk-role-default-assistant", [rs(), chunk("m"), chunk(role="assistant"), rf()])
case("chunk-name-mismatch", [rs(), chunk("m"), chunk(name="bob")], "chunk-field-mismatch")
case(
    "tool-chunk-name-mismatch",
    [rs(), tchunk("c", "search"), tchunk(name="fetch")],
    "chunk-field-mismatch",
)
case(
    "tool-chunk-parent-mismatch",
    [rs(), tchunk("c", "search", parentMessageId="m1"), tchunk(parentMessageId="m2")],
    "chunk-field-mismatch",
)
case(
    "chunk-lanes-in-parallel",
    [
        rs(),
        chunk("a", sub="s1"),
        chunk("b", sub="s2"),
        chunk(sub="s1"),
        chunk(sub="s2"),
        chunk("a"),
        rf(),
    ],
)
case(
    "chunk-ambiguous",
    [rs(), chunk("a", sub="s1"), chunk("b", sub="s2"), chunk()],
    "chunk-ambiguous",
)
case("chunk-sole-lane-fallback", [rs(), chunk("a", sub="s1"), chunk(), rf()])
case(
    "chunk-parent-lane-preferred",
    [rs(), chunk("a"), chunk("b", sub="s1"), chunk(sub="s2", mid="c"), chunk(), rf()],
)
case(
    "chunk-lane-mismatch",
    [rs(), chunk("a", sub="s1"), chunk("a", sub="s2")],
    "chunk-lane-mismatch",
)
case(
    "chunk-over-open-explicit-message",
    [rs(), ts("m", "s1"), chunk("m")],
    "text-already-open",
)
case(
    "chunk-reopens-other-owners-message",
    [rs(), *text("m", "s1"), chunk("m", sub="s2")],
    "owner-mismatch",
)
case(
    "chunk-closed-from-other-lane-blocks-finish",
    [rs(), chunk("m", sub="s1"), te("m"), rf()],
    "text-not-open",
)
case(
    "chunk-closed-from-other-lane-blocks-run-error",
    [rs(), chunk("m", sub="s1"), te("m"), rerr()],
    "text-not-open",
)
case(
    "chunk-metadata-only-after-foreign-close",
    [rs(), chunk("m", sub="s1"), te("m"), chunk(sub="s1", delta=None, metadata={"k": 1})],
    "text-not-open",
)
case(
    "chunk-empty-continuation-after-foreign-close",
    [rs(), chunk("m", sub="s1"), te("m"), chunk(sub="s1", delta=None)],
)
case(
    "chunk-lane-closed-by-subagent-finish",
    [rs(), sa_s("s1"), chunk("m", sub="s1"), sa_f("s1"), chunk(sub="s1")],
    "chunk-missing-id",
)
case(
    "chunk-lane-survives-raw-activity-subagent-start",
    [
        rs(),
        chunk("m", sub="s1"),
        raw("s1"),
        act_s("a", "s1"),
        enc("message", "m", "s1"),
        sa_s("s1"),
        chunk(sub="s1"),
        sa_f("s1"),
        rf(),
    ],
)
case("chunk-lane-closed-by-custom", [rs(), chunk("m"), custom(), chunk()], "chunk-missing-id")
case("chunk-lane-closed-by-snapshot", [rs(), chunk("m"), snapshot(), chunk()], "chunk-missing-id")
case("chunk-other-lane-not-closed", [rs(), chunk("m", sub="s1"), custom(), chunk(sub="s1"), rf()])
case(
    "chunk-kind-switch-closes-tool",
    [rs(), tchunk("c", "search"), chunk("m"), rf()],
)
case(
    "tool-chunk-result-closes-lane",
    [rs(), tchunk("c", "search"), result("tm", "c"), rf()],
)
case(
    "tool-chunk-result-other-lane",
    [rs(), tchunk("c", "search", sub="s1"), result("tm", "c"), rf()],
    strict="tool-result-open-call",
)
case(
    "reasoning-chunk-ambiguous",
    [rs(), rchunk("a", sub="s1"), rchunk("b", sub="s2"), rchunk()],
    "chunk-ambiguous",
)
case(
    "chunk-run-finished-with-open-chunk-in-subagent",
    [rs(), sa_s("s1"), chunk("m", sub="s1"), rf()],
    "open-at-run-finished",
)
case(
    "chunk-after-run-finished",
    [rs(), rf(), chunk("m")],
    "after-run-finished",
)
case("chunk-first-event", [chunk("m"), rs(), rf()], "first-event")
case(
    "chunk-tool-inherits-parent-owner",
    [rs(), *text("m", "s1"), tchunk("c", "search", parentMessageId="m", sub="s2")],
    "tool-call-parent-owner",
)
