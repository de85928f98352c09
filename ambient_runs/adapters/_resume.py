"""
Resume tokens: how an adapter that paused on a framework's approval continues in a later run.

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

from ambient_runs import Run
from ambient_runs import events as ev
from ambient_runs.adapters._common import jsonable
from ambient_runs.continuations import Answer, claim
from ambient_runs.errors import InterruptMismatchError

__all__ = (
    "METADATA_KEY",
    "ResumeToken",
    "approval_schema",
    "claim_resume",
    "continuation",
    "prompt_key",
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


def ui_metadata(tool_name: str, arguments: Any) -> dict[str, Any]:
    """
    ``Interrupt.metadata`` of an approval: what a UI shows, nothing to continue from.

    ``{"ambient_runs": {"toolName": …, "arguments": …}}``: the call's arguments
    as JSON (parsed when they are JSON text).
    """
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON text: shown as the text it is
            arguments = json.loads(arguments) if arguments else {}
    return {METADATA_KEY: {"toolName": tool_name, "arguments": jsonable(arguments)}}


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


def approval_schema(refuses: str, refused: str, **extra: dict[str, Any]) -> dict[str, Any]:
    """
    The ``Interrupt.responseSchema`` of an approval: ``approved`` and a ``message``.

    *refuses* and *refused* are the framework's word for a refusal ("rejects",
    "rejected"; "denies", "denied"); *extra*
    adds properties of its own (pydantic-ai's ``overrideArgs``).
    """
    return {
        "type": "object",
        "description": f"Or a bare boolean: true approves, false {refuses}.",
        "properties": {
            "approved": {"type": "boolean"},
            "message": {"type": "string", "description": f"Told to the model when {refused}."},
            **extra,
        },
    }
