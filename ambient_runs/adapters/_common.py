"""
What the framework adapters share: re-minted tool calls, JSON forms, cancellation.

- **Foreign ids are never used on the wire.** Frameworks' test models (and some
  real ones) reuse tool call ids across agents and even across turns of one
  agent, so every foreign call gets a fresh ``<run id>-tool-<n>`` (`ToolCalls`),
  and messages and reasoning blocks get the run's own ids.
- **Continuations** stay on the server, keyed by the interrupt's id
  (`ambient_runs.adapters._resume`).
- **Cancellation.** `cancel_guard` turns `Run.cancel` into the cancellation of
  the task running the framework, and that into `RunCancelledError`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

import ambient_runs as ar
from ambient_runs import MessageHandle, ReasoningHandle, Run, ToolCallHandle, current_run
from ambient_runs import events as ev
from ambient_runs._wire import json_form
from ambient_runs.errors import RunCancelledError

__all__ = (
    "OpenParts",
    "Part",
    "ToolCalls",
    "cancel_guard",
    "error_content",
    "jsonable",
    "text_of",
)


def jsonable(value: Any) -> Any:
    """
    Return *value*'s JSON form: pydantic models by ``model_dump(mode="json")``,
    JSON values, attrs classes and dataclasses by `json_form`, anything else
    pydantic can serialise by ``to_jsonable_python``; ``str(value)`` as a last resort.
    """
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):
        return dump(mode="json")
    try:
        return json_form(value)
    except ValueError:
        pass
    try:
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value)
    except Exception:
        return str(value)


def text_of(value: Any) -> str:
    """Return *value* as tool-call text: a string as is, anything else as JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(jsonable(value), ensure_ascii=False)


class ToolCalls:
    """
    One invocation's tool calls, keyed by the framework's (foreign) ids.

    Each foreign call gets a fresh id from the run. A foreign id seen again
    (a test model reusing ``call_1``) opens a new call: the latest call with
    that id is the one its result answers.
    """

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self._open: dict[str, ToolCallHandle] = {}
        self._answered: set[str] = set()
        #: Foreign id -> our id of calls made in an earlier run (resumed deferred calls).
        self.known: dict[str, str] = dict(known or {})

    def start(
        self, foreign_id: str, name: str, *, parent_message_id: str | None = None
    ) -> ToolCallHandle:
        """Open a call (``TOOL_CALL_START``) for *foreign_id* in the ambient scope."""
        handle = ar.tool_call(name, parent_message_id=parent_message_id)
        self._open[foreign_id] = handle
        self.known.pop(foreign_id, None)
        return handle

    def get(self, foreign_id: str) -> ToolCallHandle | None:
        """The latest call opened for *foreign_id*, if any."""
        return self._open.get(foreign_id)

    def our_id(self, foreign_id: str) -> str | None:
        """Our id for *foreign_id*: a call of this run, or one of an earlier run."""
        handle = self._open.get(foreign_id)
        return handle.id if handle is not None else self.known.get(foreign_id)

    def result(self, foreign_id: str, name: str, content: Any) -> None:
        """
        Send the result of *foreign_id*'s call (``TOOL_CALL_RESULT``).

        A call of an earlier run gets its result against its original id, without
        re-streaming it, when the client's history holds it (else it is restated
        first); a call never seen is opened first.
        """
        text = text_of(content)
        handle = self._open.get(foreign_id)
        if handle is None:
            earlier = self.known.pop(foreign_id, None)
            run = current_run()
            if earlier is not None and earlier in _client_tool_call_ids(run):
                ar.emit(
                    ev.ToolCallResultEvent(
                        message_id=run.new_message_id(), tool_call_id=earlier, content=text
                    )
                )
                self._answered.add(earlier)
                return
            handle = ar.tool_call(name, id=earlier)
            self._open[foreign_id] = handle
        if handle.id in self._answered:
            return
        handle.result(text)
        self._answered.add(handle.id)

    def end_args(self) -> None:
        """Close the arguments of every call still streaming them."""
        for handle in self._open.values():
            if not handle.ended:
                handle.end()

    def unanswered(self) -> list[ToolCallHandle]:
        """Calls of this run that have no result yet, in the order they were opened."""
        return [h for h in self._open.values() if h.id not in self._answered]

    def fail_unanswered(self, exc: BaseException) -> None:
        """
        Answer every call left without a result because *exc* ended the agent.

        Without a result, a client treats a call as a pending frontend tool call;
        the result says what happened instead (`error_content`).
        """
        content = error_content(exc)
        for handle in self.unanswered():
            handle.result(json.dumps(content, ensure_ascii=False))
            self._answered.add(handle.id)


#: What a framework streams into the ambient scope: a message, a reasoning block, a tool call.
Part = MessageHandle | ReasoningHandle | ToolCallHandle

Key = TypeVar("Key")


class OpenParts(Generic[Key]):
    """
    The parts a framework is streaming, each under the framework's key for it.

    The key is the framework's (an output item's id, a response part's index).
    For a tool call, the arguments streamed so far are kept, so that
    `finish_args` sends only what the call's final arguments add to them.
    """

    __slots__ = ("_handles", "_sent")

    def __init__(self) -> None:
        self._handles: dict[Key, Part] = {}
        self._sent: dict[Key, str] = {}

    def get(self, key: Key) -> Part | None:
        """The part open under *key*, if any."""
        return self._handles.get(key)

    def add(self, key: Key, part: Part) -> None:
        """Keep *part* open under *key* (`end` what was there first)."""
        self._handles[key] = part

    def args(self, key: Key, call: ToolCallHandle, delta: str) -> None:
        """Stream *delta* of the arguments of *call*, open under *key*."""
        call.args(delta)
        self._sent[key] = self._sent.get(key, "") + delta

    def finish_args(self, key: Key, call: ToolCallHandle, whole: str) -> bool:
        """
        Send what *whole*, the final arguments of *call* (under *key*), adds to those streamed.

        Returns False, sending nothing, when *whole* does not extend what streamed.
        """
        sent = self._sent.get(key, "")
        if not whole.startswith(sent):
            return False
        if len(whole) > len(sent):
            call.args(whole[len(sent) :])
        return True

    def end(self, key: Key) -> None:
        """End the part under *key*, if one is open there, and forget it."""
        part = self._handles.pop(key, None)
        self._sent.pop(key, None)
        if part is not None and not part.ended:
            part.end()

    def end_all(self) -> None:
        """End every open part, oldest first."""
        for key in list(self._handles):
            self.end(key)


def error_content(exc: BaseException) -> dict[str, str]:
    """
    A tool result that reports *exc*: ``{"error": message, "type": class name}``.

    The message is what the ambient run's error policy lets a client read
    (`Run.error_policy`): the exception's text only with ``expose_errors=True``
    or an `AgentError`, the generic message otherwise. The framework's model
    still sees the framework's own error text; this is what reaches the client.
    A cancellation reads ``{"error": "cancelled", "type": "CancelledError"}``.
    """
    if isinstance(exc, asyncio.CancelledError | RunCancelledError):
        return {"error": "cancelled", "type": "CancelledError"}
    message, _ = current_run().error_policy.report(exc)
    return {"error": message, "type": type(exc).__name__}


def _client_tool_call_ids(run: Run) -> set[str]:
    ids: set[str] = set()
    for message in run.messages:
        if isinstance(message, ev.AssistantMessage):
            ids.update(call.id for call in message.tool_calls or ())
    return ids


# --------------------------------------------------------------------------- cancellation


@asynccontextmanager
async def cancel_guard(run: Run) -> AsyncIterator[None]:
    """
    Run the block so that `Run.cancel` cancels it, raising `RunCancelledError`.

    A cancellation from outside (the transport cancelling the agent task)
    propagates unchanged.
    """
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - always inside a task under asyncio
        yield
        return
    fired = False

    def _stop(_: object) -> None:
        nonlocal fired
        if not watcher.cancelled():
            fired = True
            task.cancel()

    watcher = asyncio.ensure_future(run.cancelled())
    watcher.add_done_callback(_stop)
    try:
        yield
    except asyncio.CancelledError as exc:
        if fired and task.uncancel() == 0:
            msg = f"run {run.run_id!r} was cancelled"
            raise RunCancelledError(msg) from exc
        raise
    finally:
        watcher.remove_done_callback(_stop)
        watcher.cancel()
