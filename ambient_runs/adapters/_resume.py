"""
Continuations: how an adapter that paused on a framework's approval continues in a later run.

An adapter that pauses on a framework's approval or deferred call keeps
everything it needs to continue (`continuation`: the history or serialised
state, the framework's call id, which invocation paused, and which adapter
call made it: *adapter*, *name* and a digest of the prompt) in the run's
continuation store under the interrupt's id (`ambient_runs.continuations.keep`);
the interrupt's ``metadata`` carries only what a UI shows (`ui_metadata`).
The next run's adapter call with the same *name* and prompt claims the
answers to its suspended invocation (`claim_resume`), from the entries the
client sent (``interruptId``, ``status``, ``payload``; ``metadata`` is never
read).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

import attrs

from ambient_runs import Run
from ambient_runs import events as ev
from ambient_runs.adapters._common import jsonable
from ambient_runs.continuations import Answer, claim
from ambient_runs.errors import InterruptMismatchError, InterruptPayloadError

__all__ = (
    "APPROVAL",
    "Approval",
    "METADATA_KEY",
    "QUESTION",
    "ResumeToken",
    "approval_message",
    "approval_schema",
    "claim_resume",
    "continuation",
    "prompt_key",
    "read_approval",
    "restore",
    "ui_metadata",
)

#: The key under ``Interrupt.metadata`` that adapters own.
METADATA_KEY = "ambient_runs"


def prompt_key(prompt: Any) -> str:
    """A short digest of a prompt: how a resuming call recognises its own suspended invocation."""
    text = json.dumps(jsonable(prompt), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ResumeToken:
    """
    One answered interrupt an adapter raised in an earlier run.

    *data* is what the adapter kept on the server (`continuation`); *entry* is
    the client's answer.
    """

    __slots__ = ("data", "entry", "index")

    def __init__(self, entry: ev.ResumeEntry, data: dict[str, Any], index: int = 0) -> None:
        self.entry = entry
        self.data = data
        #: Where the entry is in the run's ``resume``.
        self.index = index

    def text(self, key: str) -> str:
        """The string *key* of the continuation (a server-side record: a bug if absent)."""
        value = self.data.get(key)
        if not isinstance(value, str):
            msg = (
                f"the continuation of interrupt {self.entry.interrupt_id!r} has no string "
                f"{key!r} (got {type(value).__name__}): was it kept by another version?"
            )
            raise TypeError(msg)
        return value

    @property
    def subagent_run_id(self) -> str | None:
        """The suspended invocation the interrupt belongs to (None: no subagent)."""
        value = self.data.get("subagentRunId")
        return value if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"<ResumeToken {self.entry.interrupt_id} {self.entry.status}>"


def continuation(
    adapter: str, name: str | None, prompt: str, subagent_run_id: str | None, **data: Any
) -> dict[str, Any]:
    """What an adapter keeps on the server so that a later run can continue an interrupt."""
    return {
        "adapter": adapter,
        "name": name,
        "prompt": prompt,
        "subagentRunId": subagent_run_id,
        **data,
    }


def ui_metadata(tool_name: str, arguments: Any, value: Any = None) -> dict[str, Any]:
    """
    ``Interrupt.metadata`` of a tool's interrupt: what a UI shows, nothing to continue from.

    ``{"ambient_runs": {"toolName": …, "arguments": …}}``: the call's arguments
    as JSON (parsed when they are JSON text), and *value* (a question's own
    data) as ``value`` when given.
    """
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON text: shown as the text it is
            arguments = json.loads(arguments) if arguments else {}
    shown: dict[str, Any] = {"toolName": tool_name, "arguments": jsonable(arguments)}
    if value is not None:
        shown["value"] = value
    return {METADATA_KEY: shown}


async def claim_resume(run: Run, adapter: str, name: str | None, prompt: str) -> list[ResumeToken]:
    """
    Claim the answers meant for the adapter call (*adapter*, *name*, *prompt*) in *run*.

    Returns the answers to one suspended invocation (all its interrupts), or
    an empty list when the run answers none of this call's. Each answer is
    claimed once per run, so two identical calls continue two different
    invocations, in the order of their ids.

    Raises:
        InterruptError: The run's ``resume`` holds an entry the continuation
            store cannot continue (``interrupt_unknown``, ``interrupt_expired``,
            ``interrupt_answered``), or answers only interrupts this *adapter*
            and *name* raised for another prompt (``interrupt_mismatch``: the
            call asks something else now).
    """
    if not run.resume:
        return []
    mismatched: list[Answer] = []

    def select(free: list[Answer]) -> list[Answer]:
        ours = [a for a in free if a.data.get("adapter") == adapter and a.data.get("name") == name]
        fits = [a for a in ours if a.data.get("prompt") == prompt]
        if not fits:
            mismatched.extend(ours)
            return []
        invocation = min(_sid(a) for a in fits)
        return [a for a in fits if _sid(a) == invocation]

    mine = await claim(run, select)
    if not mine and mismatched:
        raise InterruptMismatchError(
            mismatched[0].interrupt_id,
            f"paused a call of {name or adapter!r} that the agent no longer makes (it asks "
            "with another prompt now); start a new turn",
        )
    return [ResumeToken(a.entry, a.data, a.index) for a in mine]


def _sid(answer: Answer) -> str:
    value = answer.data.get("subagentRunId")
    return value if isinstance(value, str) else ""


#: The ``reason`` of every approval interrupt, whichever framework asks.
APPROVAL = "tool_call"
#: The ``reason`` of a framework's own question (LangGraph's ``interrupt(value)``, deferred calls).
QUESTION = "input_required"


def approval_schema(*, override: bool) -> dict[str, Any]:
    """
    The ``responseSchema`` of an approval: ``{"approved": bool, "message"?, "overrideArgs"?}``.

    *override*: the framework can run an approved call with other arguments
    (``overrideArgs`` is offered only then).
    """
    properties: dict[str, Any] = {
        "approved": {"type": "boolean", "description": "true runs the call; false denies it."},
        "message": {"type": "string", "description": "Why; the model reads it when denied."},
    }
    if override:
        properties["overrideArgs"] = {
            "type": "object",
            "description": "Run the call with these arguments instead.",
        }
    return {"type": "object", "properties": properties, "required": ["approved"]}


def approval_message(tool_name: str, arguments: str) -> str:
    """The human-readable question of an approval: ``Approve delete({"path": "/tmp"})?``."""
    shown = arguments if len(arguments) <= 200 else arguments[:199] + "…"
    return f"Approve {tool_name}({shown})?"


@attrs.frozen
class Approval:
    """An approval's answer, read off its payload: the same meaning in every adapter."""

    approved: bool
    message: str | None = None
    override_args: dict[str, Any] | None = None


def read_approval(token: ResumeToken, *, override: bool) -> Approval:
    """
    The answer to an approval: ``cancelled`` denies; else the payload, by `approval_schema`.

    Deny by default: only ``{"approved": true}`` runs the call, and a payload
    off the schema is refused, not guessed at.

    Raises:
        InterruptPayloadError: The payload is not ``{"approved": bool, ...}``,
            or carries ``overrideArgs`` where *override* is off.
    """
    entry = token.entry
    if entry.status == "cancelled":
        return Approval(approved=False)
    payload = entry.payload
    problems: list[str] = []
    if not isinstance(payload, dict):
        problems.append(f"the payload is {type(payload).__name__}, not an object")
        payload = {}
    approved = payload.get("approved")
    message = payload.get("message")
    args = payload.get("overrideArgs")
    if not isinstance(approved, bool):
        problems.append("approved must be true or false")
    if message is not None and not isinstance(message, str):
        problems.append("message must be a string")
    if args is not None and not isinstance(args, dict):
        problems.append("overrideArgs must be an object")
    if args is not None and not override:
        problems.append("overrideArgs is not offered here (its responseSchema has none)")
    if problems:
        raise InterruptPayloadError(
            entry.interrupt_id,
            "has an answer off its responseSchema ("
            + "; ".join(problems)
            + '): send {"approved": true|false, "message"?: string'
            + (', "overrideArgs"?: object' if override else "")
            + "}; the interrupt stays answerable",
        )
    assert isinstance(approved, bool)
    return Approval(approved, message, args if approved else None)


async def restore(run: Run, tokens: list[ResumeToken]) -> None:
    """Put *tokens*' continuations back: none was acted on, so each stays answerable."""
    for token in tokens:
        await run.continuations.put(token.entry.interrupt_id, token.data)
