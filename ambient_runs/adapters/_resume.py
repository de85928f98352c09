"""
Resume tokens: how an adapter that paused on a framework's approval continues in a later run.

An adapter that pauses on a framework's approval or deferred call puts
everything it needs to continue into ``Interrupt.metadata["ambient_runs"]["resume"]``
(`resume_metadata`); nothing is kept in the process. The client sends that
metadata back in the ``ResumeEntry`` that answers the interrupt (``metadata:
interrupt.metadata``), and the next run's adapter call with the same *name*
and prompt (`prompt_key`) claims it (`claim_resume`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from typing import Any

from ambient_runs import Run
from ambient_runs import events as ev
from ambient_runs.adapters._common import jsonable
from ambient_runs.errors import InvalidInputError

__all__ = (
    "METADATA_KEY",
    "ResumeToken",
    "approval_schema",
    "claim_resume",
    "prompt_key",
    "resume_metadata",
)

#: The key under ``Interrupt.metadata`` (and ``ResumeEntry.metadata``) that adapters own.
METADATA_KEY = "ambient_runs"


def prompt_key(prompt: Any) -> str:
    """A short digest of a prompt: how a resuming call recognises its own suspended invocation."""
    text = json.dumps(jsonable(prompt), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ResumeToken:
    """
    One answered interrupt an adapter raised in an earlier run, as the client sent it back.

    *data* is what the adapter put into the interrupt's metadata; *entry* is the
    client's answer.
    """

    __slots__ = ("data", "entry", "index")

    def __init__(self, entry: ev.ResumeEntry, data: dict[str, Any], index: int = 0) -> None:
        self.entry = entry
        self.data = data
        #: Where the entry is in the run's ``resume``.
        self.index = index

    def text(self, key: str) -> str:
        """The string *key* of the token, or `InvalidInputError` naming the entry."""
        value = self.data.get(key)
        if not isinstance(value, str):
            problem = f"{key} must be a string, got {type(value).__name__}"
            raise self.error(problem)
        return value

    def error(self, problem: str) -> InvalidInputError:
        """The error for a token that cannot be continued from: *problem*, and the fix."""
        return InvalidInputError(
            "a resume entry the agent cannot continue from",
            [
                f"resume[{self.index}].metadata.{METADATA_KEY}.resume: {problem} "
                "(send the interrupt's metadata back unchanged)"
            ],
        )

    @property
    def subagent_run_id(self) -> str | None:
        """The suspended invocation the interrupt belongs to (None: no subagent)."""
        value = self.data.get("subagentRunId")
        return value if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"<ResumeToken {self.entry.interrupt_id} {self.entry.status}>"


def resume_metadata(
    adapter: str, name: str | None, prompt: str, subagent_run_id: str | None, **data: Any
) -> dict[str, Any]:
    """The ``Interrupt.metadata`` an adapter attaches so that a later run can continue."""
    token = {
        "adapter": adapter,
        "name": name,
        "prompt": prompt,
        "subagentRunId": subagent_run_id,
        **data,
    }
    return {METADATA_KEY: {"resume": token}}


_claimed: weakref.WeakKeyDictionary[Run, set[str]] = weakref.WeakKeyDictionary()
_claims_lock = threading.Lock()


def claim_resume(run: Run, adapter: str, name: str | None, prompt: str) -> list[ResumeToken]:
    """
    Claim the answers meant for the adapter call (*adapter*, *name*, *prompt*) in *run*.

    Returns the answers to one suspended invocation (all its interrupts), or
    an empty list when there is none. Each answer is claimed once per run, so
    two identical calls continue two different invocations, in the order of
    their ids.
    """
    tokens: list[ResumeToken] = []
    for index, entry in enumerate(run.resume):
        meta = entry.metadata or {}
        ours = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
        data = ours.get("resume") if isinstance(ours, dict) else None
        if (
            isinstance(data, dict)
            and data.get("adapter") == adapter
            and data.get("name") == name
            and data.get("prompt") == prompt
        ):
            tokens.append(ResumeToken(entry, data, index))
    if not tokens:
        return []
    with _claims_lock:
        claimed = _claimed.setdefault(run, set())
        free = [t for t in tokens if t.entry.interrupt_id not in claimed]
        if not free:
            return []
        invocation = min(t.subagent_run_id or "" for t in free)
        mine = [t for t in free if (t.subagent_run_id or "") == invocation]
        claimed.update(t.entry.interrupt_id for t in mine)
    return mine


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
