"""
pydantic-ai, as an attributed subagent: ``await run_agent(agent, prompt, name="researcher")``.

Install with ``pip install 'ambient-runs[pydantic-ai]'``.

`run_agent` runs a pydantic-ai ``Agent`` through ``run_stream_events`` and
streams what it does into the ambient scope (a new subagent called *name*
when given), then returns the run's output:

=====================================  ==============================================
pydantic-ai                            AG-UI
=====================================  ==============================================
``TextPart`` and its deltas            ``TEXT_MESSAGE_START/CONTENT/END`` (assistant)
``ThinkingPart`` and its deltas        ``REASONING_START``, ``REASONING_MESSAGE_*``,
                                       ``REASONING_END``
``ToolCallPart`` (function and output  ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` as the
tools, built-in tools)                 arguments stream, ``TOOL_CALL_END`` at the
                                       part's end; ``parentMessageId`` is the text
                                       message of the same model response
``FunctionToolResultEvent``,           ``TOOL_CALL_RESULT`` (a string as is, any other
``OutputToolResultEvent``, built-in    value as JSON text; pydantic values by
tool returns, retry prompts            ``model_dump(mode="json")``)
the run's output                       returned; with *name*, ``SUBAGENT_FINISHED``
                                       carrying its JSON form as ``result``
an exception (a tool that raises,      ``SUBAGENT_ERROR`` (with *name*), and the
a model error)                         exception propagates unchanged; calls it left
                                       without a result get a ``TOOL_CALL_RESULT``
                                       ``{"error": …, "type": …}``
``DeferredToolRequests`` output        one `Interrupt` per call, raised as
(``requires_approval``,                `Interrupted`: a ``suspended`` subagent and a
``ApprovalRequired``, ``CallDeferred``)  run that finishes with an ``interrupt`` outcome
=====================================  ==============================================

Ids: every tool call gets a fresh ``<run id>-tool-<n>`` (``TestModel`` names
every call ``pyd_ai_tool_call_id__<tool>``, in every agent), and messages and
reasoning blocks get the run's own ids, so any number of agents can stream at
once.

**Deferred calls and resume.** An approval (``requires_approval``,
``ApprovalRequired``) is an interrupt with ``reason: "tool_call"``, the
``toolCallId`` of the call as streamed, a ``message`` (``Approve
delete({"path": "/tmp"})?``) and the ``responseSchema`` every adapter's
approvals share: ``{"approved": bool, "message"?: str, "overrideArgs"?:
object}``. An external call or a question (``CallDeferred``) is ``reason:
"input_required"`` with its ``toolCallId``; its answer's payload is the
tool's result. Each carries an ``expiresAt``, and in
``metadata["ambient_runs"]`` only what a UI shows (``toolName``,
``arguments``, and a deferred call's own metadata as ``value``). What the
adapter needs to continue (the run's message history in pydantic-ai's JSON
form, the framework's call id, which invocation paused) stays on the server,
in the run's continuation store (`ambient_runs.continuations`) under the
interrupt's id. The client answers each interrupt in the next run's
``resume`` with the entry the official client's ``buildResumeArray`` builds,
``{interruptId, status, payload}``; anything it sends in ``metadata`` is
ignored.

The next run's ``run_agent`` call with the same *name* and prompt then
continues the suspended invocation under its old ``subagentRunId`` with
``deferred_tool_results`` built from the answers:

- an approval: ``{"approved": true}`` runs it (with ``overrideArgs``, with
  those arguments instead); ``{"approved": false, "message": "…"}`` denies it
  (the model reads the message); ``status: "cancelled"`` denies it. Any other
  payload is refused (deny by default) with ``RUN_ERROR interrupt_payload``,
  and the interrupt stays answerable;
- an external call: the payload is the tool's result; ``"cancelled"`` makes it
  a failed call (``ToolFailed``) the model sees.

The tools' results then answer the original ``toolCallId`` with
``TOOL_CALL_RESULT`` and the agent carries on. An answer the store cannot
continue (unknown, expired, answered already, or meant for a call the agent
now makes with another prompt) ends the run with ``RUN_ERROR``
(``interrupt_unknown``, ``interrupt_expired``, ``interrupt_answered``,
``interrupt_mismatch``).

**Agent delegation.** ``run_agent`` called inside a tool nests that agent's
invocation under the calling agent's (``parentSubagentRunId``); it has no
``parentToolCallId``: pydantic-ai does not make the running call's id ambient,
and with parallel tool calls the call cannot be told from the scope alone.

What AG-UI cannot express, so it is not sent: file, speech and compaction parts
(a file the model made, audio), thinking signatures (provider-verification
blobs, not encrypted reasoning), usage (the run's ``usage`` belongs to the
run, not to one of its agents), and the replacement of a part the model
restarted (text already streamed stays; the new part is a new message).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

from ambient_runs.errors import needs_extra

with needs_extra(
    "ambient_runs.adapters.pydantic_ai",
    extra="pydantic-ai",
    needs="pydantic-ai",
    name="pydantic_ai",
):
    from pydantic_ai import messages as _pm
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.run import AgentRunResultEvent
    from pydantic_ai.tools import (
        DeferredToolRequests,
        DeferredToolResults,
        ToolApproved,
        ToolDenied,
    )

import ambient_runs as ar
from ambient_runs import (
    Interrupted,
    MessageHandle,
    ReasoningHandle,
    ToolCallHandle,
    current_run,
)
from ambient_runs import events as ev
from ambient_runs.adapters import _resume
from ambient_runs.adapters._common import OpenParts, ToolCalls, cancel_guard, jsonable
from ambient_runs.adapters._resume import (
    APPROVAL,
    QUESTION,
    ResumeToken,
    approval_message,
    claim_resume,
    continuation,
    prompt_key,
    read_approval,
    restore,
    ui_metadata,
)
from ambient_runs.continuations import keep
from ambient_runs.errors import InterruptPayloadError

__all__ = ("run_agent",)

_log = logging.getLogger("ambient_runs.adapters.pydantic_ai")

ADAPTER = "pydantic-ai"


async def run_agent(
    agent: Any,
    user_prompt: Any = None,
    *,
    name: str | None = None,
    **run_kwargs: Any,
) -> Any:
    """
    Run the pydantic-ai *agent* on *user_prompt*, streaming it into the ambient scope.

    Args:
        agent: A pydantic-ai ``Agent`` (any ``AbstractAgent``).
        user_prompt: What to ask it, as for ``Agent.run``.
        name: Run it as a new subagent invocation called *name* (``SUBAGENT_STARTED``
            ... ``SUBAGENT_FINISHED`` with the output as ``result``); without it,
            its events belong to whatever scope is ambient.
        run_kwargs: Passed to ``agent.run_stream_events`` (``deps``,
            ``message_history``, ``model``, ``usage_limits``…). Unless you pass
            ``output_type``, ``DeferredToolRequests`` is added to the agent's own,
            so approvals and deferred calls become interrupts.

    Returns:
        The run's output.

    Raises:
        Interrupted: The agent paused on deferred calls or approvals (one
            `Interrupt` each; see the module docstring for the resume).
        InterruptError: The run answers an interrupt the continuation store
            cannot continue (``interrupt_unknown``, ``interrupt_expired``,
            ``interrupt_answered``, ``interrupt_mismatch``).
        NoActiveRunError: No run is ambient.
        RunCancelledError: The run was cancelled (`Run.cancel`) while the agent ran.

    Any exception of the agent run (a tool that raises, a model error)
    propagates unchanged.

    .. versionadded:: 0.1.0
    """
    run = current_run()
    key = prompt_key(user_prompt)
    tokens: list[ResumeToken] = []
    if "deferred_tool_results" not in run_kwargs:
        tokens = await claim_resume(run, ADAPTER, name, key)
    resumed_id = tokens[0].subagent_run_id if tokens else None
    if tokens:
        try:
            _resume_kwargs(tokens, run_kwargs)
        except InterruptPayloadError:
            await restore(run, tokens)  # nothing was acted on: the client may answer again
            raise
        user_prompt = None  # the prompt is in the history already
    if "output_type" not in run_kwargs:
        output_type = getattr(agent, "output_type", str)
        if not _includes_deferred(output_type):
            if isinstance(output_type, Sequence) and not isinstance(output_type, str):
                run_kwargs["output_type"] = [*output_type, DeferredToolRequests]
            else:
                run_kwargs["output_type"] = [output_type, DeferredToolRequests]
    known = {t.text("call"): t.text("toolCallId") for t in tokens}

    async with AsyncExitStack() as stack:
        scope = None
        if name is not None:
            scope = await stack.enter_async_context(
                ar.subagent(name, id=resumed_id if resumed_id else None)
            )
        await stack.enter_async_context(cancel_guard(run))
        stream = _Stream(ToolCalls(known))
        try:
            result = await stream.consume(agent, user_prompt, run_kwargs)
        except BaseException as exc:
            stream.parts.end_all()
            if not isinstance(exc, Interrupted):
                stream.calls.fail_unanswered(exc)
            raise
        output = result.output
        if isinstance(output, DeferredToolRequests):
            owner = scope.id if scope is not None else ar.current_subagent_id()
            interrupts = _interrupts(output, result, stream.calls, name, key, owner)
            raise Interrupted([await keep(run, i, data) for i, data in interrupts])
        if scope is not None:
            scope.finish_with(jsonable(output))
        return output


def _includes_deferred(output_type: Any) -> bool:
    if output_type is DeferredToolRequests:
        return True
    if isinstance(output_type, Sequence) and not isinstance(output_type, str):
        return any(_includes_deferred(t) for t in output_type)
    return False


class _Stream:
    """One agent run's events, mapped onto the ambient scope."""

    def __init__(self, calls: ToolCalls) -> None:
        self.calls = calls
        self.parts: OpenParts[int] = OpenParts()
        self.response_message: str | None = None  # the text message of the current response

    async def consume(self, agent: Any, user_prompt: Any, run_kwargs: dict[str, Any]) -> Any:
        result = None
        async with agent.run_stream_events(user_prompt, **run_kwargs) as events:
            async for event in events:
                if isinstance(event, _pm.PartStartEvent):
                    self.start(event.index, event.part)
                elif isinstance(event, _pm.PartDeltaEvent):
                    self.delta(event.index, event.delta)
                elif isinstance(event, _pm.PartEndEvent):
                    self.end(event.index, event.part)
                elif isinstance(event, _pm.FinalResultEvent):
                    continue
                else:
                    self.parts.end_all()  # the model response is over
                    self.response_message = None
                    if isinstance(event, _pm.ToolCallEvent):
                        self.tool_called(event.part)
                    elif isinstance(event, _pm.ToolResultEvent):
                        part = event.part
                        self.calls.result(part.tool_call_id, part.tool_name, part.content)
                    elif isinstance(event, AgentRunResultEvent):
                        result = event.result
        if result is None:  # pragma: no cover - pydantic-ai always ends with its result
            msg = "the pydantic-ai run ended without a result"
            raise RuntimeError(msg)
        return result

    # ------------------------------------------------------------------ parts

    def start(self, index: int, part: Any) -> None:
        self.parts.end(index)  # a new part at an open index replaces the old one
        kind = getattr(part, "part_kind", None)
        if kind == "text":
            message = ar.message()
            self.parts.add(index, message)
            self.response_message = message.id
            if part.content:
                message.write(part.content)
        elif kind == "thinking":
            block = ar.reasoning()
            self.parts.add(index, block)
            if part.content:
                block.write(part.content)
        elif kind in ("tool-call", "builtin-tool-call"):
            call = self.calls.start(
                part.tool_call_id, part.tool_name, parent_message_id=self.response_message
            )
            self.parts.add(index, call)
            if isinstance(part.args, str) and part.args:
                self.parts.args(index, call, part.args)
        elif kind == "builtin-tool-return":
            self.calls.result(part.tool_call_id, part.tool_name, part.content)
        else:
            _log.debug("pydantic-ai part %r has no AG-UI form; not sent", kind)

    def delta(self, index: int, delta: Any) -> None:
        handle = self.parts.get(index)
        if handle is None:
            return
        kind = getattr(delta, "part_delta_kind", None)
        if kind in ("text", "thinking") and isinstance(handle, MessageHandle | ReasoningHandle):
            if delta.content_delta:
                handle.write(delta.content_delta)
        elif kind == "tool_call" and isinstance(handle, ToolCallHandle):
            # Text fragments stream as they come; a dict delta is sent whole at the end.
            if not (isinstance(delta.args_delta, str) and delta.args_delta):
                return
            self.parts.args(index, handle, delta.args_delta)

    def end(self, index: int, part: Any) -> None:
        handle = self.parts.get(index)
        if isinstance(handle, ToolCallHandle) and not handle.ended:
            whole = part.args_as_json_str() if hasattr(part, "args_as_json_str") else ""
            if not self.parts.finish_args(index, handle, whole):
                _log.debug("tool call %s: final arguments differ from those streamed", handle.id)
        self.parts.end(index)

    # ------------------------------------------------------------------ tools

    def tool_called(self, part: Any) -> None:
        """A call about to run: open it if it was never streamed (a resumed deferred call)."""
        foreign = part.tool_call_id
        if self.calls.get(foreign) is not None or foreign in self.calls.known:
            return
        call = self.calls.start(foreign, part.tool_name)
        call.args(part.args_as_json_str())
        call.end()


# --------------------------------------------------------------------------- interrupts


_APPROVAL_SCHEMA = _resume.approval_schema(override=True)


def _interrupts(
    requests: Any,
    result: Any,
    calls: ToolCalls,
    name: str | None,
    key: str,
    owner: str | None,
) -> list[tuple[ev.Interrupt, dict[str, Any]]]:
    """One interrupt per deferred call, each with the continuation the server keeps for it."""
    run = current_run()
    history = _pm.ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
    pending: list[tuple[Any, str]] = [(p, "approval") for p in requests.approvals]
    pending += [(p, requests.kind(p.tool_call_id)) for p in requests.calls]
    interrupts = []
    for part, kind in pending:
        our_id = calls.our_id(part.tool_call_id)
        if our_id is None:  # never streamed: say what is waiting first
            call = calls.start(part.tool_call_id, part.tool_name)
            call.args(part.args_as_json_str())
            call.end()
            our_id = call.id
        extra = requests.metadata.get(part.tool_call_id)
        data = continuation(
            ADAPTER,
            name,
            key,
            owner,
            call=part.tool_call_id,
            kind=kind,
            toolCallId=our_id,
            toolName=part.tool_name,
            callMetadata=jsonable(extra) if extra else None,
            history=history,
        )
        interrupts.append(
            (
                ev.Interrupt(
                    id=run.new_interrupt_id(),
                    reason=APPROVAL if kind == "approval" else QUESTION,
                    message=(
                        approval_message(part.tool_name, part.args_as_json_str())
                        if kind == "approval"
                        else f"The call to {part.tool_name} waits for its result."
                    ),
                    tool_call_id=our_id,
                    subagent_run_id=owner,
                    response_schema=_APPROVAL_SCHEMA if kind == "approval" else None,
                    metadata=ui_metadata(
                        part.tool_name, part.args_as_json_str(), jsonable(extra) if extra else None
                    ),
                ),
                data,
            )
        )
    return interrupts


def _resume_kwargs(tokens: list[ResumeToken], run_kwargs: dict[str, Any]) -> None:
    """Fill *run_kwargs* with the history and ``deferred_tool_results`` the answers make."""
    results = DeferredToolResults()
    for token in tokens:
        foreign = token.text("call")
        token.text("toolCallId")
        entry = token.entry
        if token.data.get("kind") == "approval":
            results.approvals[foreign] = _approval(token)
        elif entry.status == "cancelled":
            results.calls[foreign] = ToolFailed("The user cancelled this call.")
        else:
            results.calls[foreign] = entry.payload
    if "message_history" not in run_kwargs:
        history = tokens[0].data.get("history")
        run_kwargs["message_history"] = _pm.ModelMessagesTypeAdapter.validate_python(history)
    run_kwargs["deferred_tool_results"] = results


def _approval(token: ResumeToken) -> ToolApproved | ToolDenied:
    answer = read_approval(token, override=True)
    if answer.approved:
        return ToolApproved(override_args=answer.override_args)
    return ToolDenied(answer.message or "The user denied this call.")
