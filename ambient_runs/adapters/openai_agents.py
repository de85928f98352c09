"""
The OpenAI Agents SDK, as attributed subagents: ``await run_agent(agent, input, name="support")``.

Install with ``pip install 'ambient-runs[openai-agents]'``.

`run_agent` runs ``Runner.run_streamed(agent, input)`` and streams it into the
ambient scope (a new subagent called *name* when given), then returns
``final_output``:

=======================================  ============================================
Agents SDK                               AG-UI
=======================================  ============================================
``response.output_text.delta`` (and      ``TEXT_MESSAGE_START/CONTENT/END`` per output
refusal deltas) of a ``message`` item    message item
``reasoning`` item, its summary and      ``REASONING_START``, ``REASONING_MESSAGE_*``,
text deltas, ``encrypted_content``       ``REASONING_ENCRYPTED_VALUE``, ``REASONING_END``
``function_call`` item and its           ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` as they
``function_call_arguments.delta``        stream, ``TOOL_CALL_END``; ``parentMessageId``
                                         is the message of the same response
``tool_output`` run item                 ``TOOL_CALL_RESULT`` (the tool's value: text as
                                         is, anything else as JSON text)
hosted tool items (web search, file      a tool call named after the item type, whose
search, code interpreter, …)             result is the finished item
a handoff (``transfer_to_…`` call,       the call and its result, then a nested subagent
``handoff_occured``,                     named after the new agent, with
``agent_updated_stream_event``)          ``parentToolCallId`` the transfer call,
                                         nested in the agent that handed off
``agent.as_tool()`` run by the agent     a nested subagent named after that agent, with
                                         ``parentToolCallId`` the tool call that ran it
``final_output``                         returned; ``SUBAGENT_FINISHED.result`` of the
                                         agent that produced it and of *name*'s subagent
tools that need approval                 one `Interrupt` per pending approval (reason
(``needs_approval``)                     ``tool_call``), raised as `Interrupted`
an exception                             ``SUBAGENT_ERROR`` for every open invocation;
                                         the exception propagates unchanged
=======================================  ============================================

A tool that raises does not fail the run: the SDK reports the error to the
model as the tool's output (its ``failure_error_function``), and that output is
the call's ``TOOL_CALL_RESULT``.

Ids: tool calls get fresh ``<run id>-tool-<n>`` ids and messages the run's
own ids, so concurrent agents never collide (``ScriptedModel`` names every
call ``call_1`` and every message ``scripted-message``).

**Approvals and resume.** Each pending approval is an interrupt with
``reason: "tool_call"``, the call's ``toolCallId``, a ``message`` (``Approve
delete({"path": "/tmp"})?``), the ``responseSchema`` every adapter's approvals
share (``{"approved": bool, "message"?: str}``; no ``overrideArgs``: the SDK
cannot run an approved call with other arguments), an ``expiresAt``, and in
``metadata["ambient_runs"]`` only what a UI shows (``toolName``,
``arguments``). The SDK's serialised ``RunState`` (``to_json()``) and the
invocations it paused (the handoff chain) stay on the server, in the run's
continuation store (`ambient_runs.continuations`) under the interrupt's id.
The client answers with the entry ``buildResumeArray`` builds
(``{interruptId, status, payload}``; ``metadata`` is ignored); the next run's
call with the same *name* and input restores the state with
``RunState.from_json``, approves (``{"approved": true}``) or rejects
(``{"approved": false, "message"?: …}``, or ``status: "cancelled"``) each
call, and continues the same invocations under their old ids. Any other
payload (``overrideArgs`` included) is refused with ``RUN_ERROR
interrupt_payload`` and the interrupts stay answerable; an answer the store
cannot continue ends the run with ``RUN_ERROR`` (``interrupt_unknown``,
``interrupt_expired``, ``interrupt_answered``, ``interrupt_mismatch``). The
run context is serialised with the SDK's defaults (``context_serializer`` /
``context_deserializer`` through *run_kwargs* are not supported: use a
JSON-able context or none).

**Agents as tools.** A nested run started by ``agent.as_tool()`` (through
``Runner.run``) is streamed as its own subagent: on first use the adapter
installs a delegating default runner (``set_default_agent_runner``) that
streams only runs started from a tool call of an agent this adapter is
running, and hands every other run to the runner that was the default before.
A tool made with ``as_tool(on_stream=…)`` keeps its own stream and is not
nested. Setting another default runner afterwards turns nesting off.

What AG-UI cannot express, so it is not sent: audio and image outputs,
annotations and logprobs, usage (the run's ``usage`` belongs to the run),
MCP approval requests (MCP servers are not run offline here), and guardrail
results (a tripped guardrail raises, which ends the invocation with
``SUBAGENT_ERROR``). Ambient ``say()`` inside a plain function tool of a
handed-off agent is attributed to the invocation ``run_agent`` opened, not to
the handoff's subagent: the SDK runs tools in tasks made before the handoff.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any

from ambient_runs.errors import needs_extra

with needs_extra(
    "ambient_runs.adapters.openai_agents",
    extra="openai-agents",
    needs="the OpenAI Agents SDK",
    name="agents",
):
    from agents import RunState
    from agents import run as _sdk_run
    from agents.stream_events import (
        AgentUpdatedStreamEvent,
        RawResponsesStreamEvent,
        RunItemStreamEvent,
    )
    from agents.tool_context import ToolContext

import ambient_runs as ar
from ambient_runs import (
    Interrupted,
    MessageHandle,
    ReasoningHandle,
    Run,
    Subagent,
    ToolCallHandle,
    current_run,
)
from ambient_runs import events as ev
from ambient_runs.adapters import _resume
from ambient_runs.adapters._common import OpenParts, ToolCalls, cancel_guard, jsonable, text_of
from ambient_runs.adapters._resume import (
    APPROVAL,
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
from ambient_runs.errors import InterruptPayloadError, RunCancelledError

__all__ = ("run_agent",)

_log = logging.getLogger("ambient_runs.adapters.openai_agents")

ADAPTER = "openai-agents"

#: How long a nested run waits for its parent's tool call to reach the stream.
_CALL_WAIT = 5.0


async def run_agent(
    agent: Any,
    input: Any,
    *,
    name: str | None = None,
    **run_kwargs: Any,
) -> Any:
    """
    Run the Agents SDK *agent* on *input* with ``Runner.run_streamed``, streaming it ambiently.

    Args:
        agent: The starting ``Agent``.
        input: A string or a list of input items, as for ``Runner.run_streamed``.
        name: Run it as a new subagent invocation called *name*; without it,
            the starting agent's events belong to whatever scope is ambient.
        run_kwargs: Passed to ``Runner.run_streamed`` (``context``,
            ``max_turns``, ``run_config``, ``hooks``…).

    Returns:
        The run's ``final_output``.

    Raises:
        Interrupted: Tool calls wait for approval (one `Interrupt` each; see the
            module docstring for the resume).
        InterruptError: The run answers an interrupt the continuation store
            cannot continue (``interrupt_unknown``, ``interrupt_expired``,
            ``interrupt_answered``, ``interrupt_mismatch``).
        NoActiveRunError: No run is ambient.
        RunCancelledError: The run was cancelled (`Run.cancel`) while the agent ran.

    Any exception of the agent run (a model error, a tripped guardrail,
    ``MaxTurnsExceeded``) propagates unchanged.

    .. versionadded:: 0.1.0
    """
    _install_runner()
    run = current_run()
    key = prompt_key(input)
    tokens = await claim_resume(run, ADAPTER, name, key)
    root_id = tokens[0].subagent_run_id if tokens else None
    start_input: Any = input
    calls = ToolCalls(_known_calls(tokens))
    if tokens:
        try:
            start_input = await _restored_state(agent, tokens)
        except InterruptPayloadError:
            await restore(run, tokens)  # nothing was acted on: the client may answer again
            raise

    root: Subagent | None = None
    if name is not None:
        root = ar.subagent(name, id=root_id).start()
    session = _Session(run, root, agent, calls)
    try:
        if tokens:
            session.reopen(tokens[0].data.get("chain") or [])
        async with cancel_guard(run):
            result = await session.stream(agent, start_input, run_kwargs)
    except BaseException as exc:
        session.abort(exc)
        raise
    return await session.conclude(result, name, key)


# --------------------------------------------------------------------------- the stream


class _Session:
    """One ``Runner.run_streamed``: its invocations (a stack of handoffs) and its items."""

    def __init__(self, run: Run, root: Subagent | None, agent: Any, calls: ToolCalls) -> None:
        self.run = run
        self.root = root
        self.calls = calls
        #: Handoffs: (agent name, its subagent), innermost last.
        self.chain: list[tuple[str, Subagent]] = []
        self.current_name: str = getattr(agent, "name", "")
        self.agents: list[Any] = [agent]
        self.items: OpenParts[str] = OpenParts()
        self.seen_items: set[str] = set()
        self.response_message: str | None = None
        self.handoff_call: str | None = None
        self.call_waiters: dict[str, asyncio.Future[None]] = {}
        self.owner = root.id if root is not None else ar.current_subagent_id()
        #: id(agent) -> its invocation (agents are unhashable dataclasses; they outlive us).
        self.handles_by_agent: dict[int, Subagent] = {}
        self.result: Any = None

    # ------------------------------------------------------------------ scopes

    @property
    def current(self) -> Subagent | None:
        """The invocation events go to now: the innermost handoff, else the root."""
        return self.chain[-1][1] if self.chain else self.root

    def emit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call *fn* with the current invocation ambient (or the caller's scope)."""
        handle = self.current
        if handle is None:
            return fn(*args, **kwargs)
        return ar.use(handle)(fn, *args, **kwargs)

    def handle_for(self, agent: Any) -> Subagent | None:
        """The invocation of *agent* in this session (a handoff's, else the root)."""
        found = self.handles_by_agent.get(id(agent))
        return found if found is not None else self.root

    def reopen(self, chain: list[Any]) -> None:
        """Continue the handoff invocations an interrupted run left suspended, same ids."""
        for link in chain:
            if isinstance(link, dict) and isinstance(link.get("id"), str):
                parent = link.get("parentToolCallId")
                self._open_handoff(
                    str(link.get("name") or "agent"),
                    link["id"],
                    parent if isinstance(parent, str) else None,
                )

    def _open_handoff(self, name: str, sid: str | None, parent_call: str | None) -> Subagent:
        handle = ar.subagent(name, id=sid, parent_tool_call_id=parent_call)
        self.emit(handle.start)
        self.chain.append((name, handle))
        self.current_name = name
        return handle

    # ------------------------------------------------------------------ events

    async def stream(self, agent: Any, start_input: Any, run_kwargs: dict[str, Any]) -> Any:
        # Started with the invocation ambient: the SDK's tasks (and the tools they run) copy it.
        result = self.emit(_inner_runner().run_streamed, agent, start_input, **run_kwargs)
        self.result = result
        _sessions.setdefault(self.run, []).append(self)
        try:
            async for event in result.stream_events():
                if isinstance(event, RawResponsesStreamEvent):
                    self.emit(self.raw, event.data)
                elif isinstance(event, RunItemStreamEvent):
                    self.emit(self.item, event.name, event.item)
                elif isinstance(event, AgentUpdatedStreamEvent):
                    self.agent_updated(event.new_agent)
        except BaseException:
            await _stopped(result)
            raise
        finally:
            sessions = _sessions.get(self.run, [])
            if self in sessions:
                sessions.remove(self)
        return result

    def raw(self, data: Any) -> None:
        kind = getattr(data, "type", "")
        if kind == "response.output_item.added":
            self.item_added(data.item)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            handle = self.items.get(data.item_id)
            if isinstance(handle, MessageHandle) and data.delta:
                handle.write(data.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            handle = self.items.get(data.item_id)
            if isinstance(handle, ReasoningHandle) and data.delta:
                handle.write(data.delta)
        elif kind == "response.function_call_arguments.delta":
            handle = self.items.get(data.item_id)
            if isinstance(handle, ToolCallHandle) and not handle.ended and data.delta:
                self.items.args(data.item_id, handle, data.delta)
        elif kind == "response.output_item.done":
            self.item_done(data.item)
        elif kind == "response.created":
            self.response_message = None

    def item_added(self, item: Any) -> None:
        item_id = getattr(item, "id", None) or ""
        self.items.end(item_id)
        kind = getattr(item, "type", "")
        if kind == "message":
            message = ar.message()
            self.items.add(item_id, message)
            self.response_message = message.id
        elif kind == "reasoning":
            self.items.add(item_id, ar.reasoning())
        elif kind in ("function_call", "custom_tool_call"):
            call = self.calls.start(
                item.call_id, item.name, parent_message_id=self.response_message
            )
            self.items.add(item_id, call)
            self._call_seen(item.call_id)
        else:
            return
        self.seen_items.add(item_id)

    def item_done(self, item: Any) -> None:
        item_id = getattr(item, "id", None) or ""
        kind = getattr(item, "type", "")
        handle = self.items.get(item_id)
        if kind == "reasoning" and isinstance(handle, ReasoningHandle):
            encrypted = getattr(item, "encrypted_content", None)
            if isinstance(encrypted, str) and encrypted:
                handle.encrypted(encrypted)
        elif isinstance(handle, ToolCallHandle) and not handle.ended:
            whole = getattr(item, "arguments", None) or getattr(item, "input", None) or ""
            self.items.finish_args(item_id, handle, whole)
        elif handle is None and kind not in ("message", "reasoning", "function_call"):
            self._hosted(item)
        self.items.end(item_id)

    def _hosted(self, item: Any) -> None:
        """A hosted tool's item (web search, code interpreter…): one call with its result."""
        kind = str(getattr(item, "type", "tool"))
        item_id = str(getattr(item, "id", "") or kind)
        if item_id in self.seen_items:
            return
        self.seen_items.add(item_id)
        data = jsonable(item)
        args = {k: v for k, v in data.items() if k not in ("id", "type", "status", "output")}
        call = self.calls.start(item_id, kind, parent_message_id=self.response_message)
        call.args(text_of(args))
        self.calls.result(item_id, kind, data.get("output", data.get("status", data)))

    def item(self, name: str, item: Any) -> None:
        raw = getattr(item, "raw_item", None)
        if name in ("tool_called", "handoff_requested"):
            call_id = _field(raw, "call_id")
            if isinstance(call_id, str) and self.calls.our_id(call_id) is None:
                call = self.calls.start(call_id, str(_field(raw, "name") or "tool"))
                call.args(str(_field(raw, "arguments") or ""))
                call.end()
            if isinstance(call_id, str):
                self._call_seen(call_id)
            if name == "handoff_requested" and isinstance(call_id, str):
                self.handoff_call = self.calls.our_id(call_id)
        elif name in ("tool_output", "handoff_occured"):
            call_id = _field(raw, "call_id")
            if isinstance(call_id, str):
                output = getattr(item, "output", None)
                if output is None:
                    output = _field(raw, "output")
                self.calls.result(call_id, str(_field(raw, "name") or "tool"), output)
                if name == "handoff_occured":
                    self.handoff_call = self.calls.our_id(call_id)
        elif name == "message_output_created":
            item_id = _field(raw, "id")
            if isinstance(item_id, str) and item_id not in self.seen_items:
                self.seen_items.add(item_id)
                text = _message_text(raw)
                if text:
                    ar.say(text)
        elif name == "reasoning_item_created":
            item_id = _field(raw, "id")
            if isinstance(item_id, str) and item_id not in self.seen_items:
                self.seen_items.add(item_id)
                summary = " ".join(
                    str(_field(part, "text") or "") for part in _field(raw, "summary") or ()
                )
                if summary:
                    ar.think(summary)
        else:
            _log.debug("Agents SDK run item %r has no AG-UI form; not sent", name)

    def agent_updated(self, agent: Any) -> None:
        name = str(getattr(agent, "name", "agent"))
        self.agents.append(agent)
        if name == self.current_name:  # the starting agent, or the one a resume restored
            self._bind(agent)
            return
        self.emit(self.items.end_all)
        self._open_handoff(name, None, self.handoff_call)
        self.handoff_call = None
        self._bind(agent)

    def _bind(self, agent: Any) -> None:
        handle = self.current
        if handle is not None:
            self.handles_by_agent[id(agent)] = handle

    # ------------------------------------------------------------------ nested runs

    def _call_seen(self, call_id: str) -> None:
        waiter = self.call_waiters.pop(call_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def call_known(self, call_id: str) -> str | None:
        """Our id for *call_id*, waiting (bounded) until the stream has reached it."""
        our = self.calls.our_id(call_id)
        if our is not None:
            return our
        waiter = self.call_waiters.setdefault(call_id, asyncio.get_running_loop().create_future())
        try:
            async with asyncio.timeout(_CALL_WAIT):
                await asyncio.shield(waiter)
        except TimeoutError:
            _log.debug("tool call %s never reached the stream", call_id)
        return self.calls.our_id(call_id)

    # ------------------------------------------------------------------ endings

    async def conclude(self, result: Any, name: str | None, key: str) -> Any:
        """Finish the invocations with the output, or suspend them on the approvals."""
        self.emit(self.items.end_all)
        interruptions = list(getattr(result, "interruptions", None) or ())
        if interruptions:
            made = self._interrupts(result, interruptions, name, key)
            interrupts = [await keep(self.run, i, data) for i, data in made]
            for _, handle in reversed(self.chain):
                mine = [i.id for i in interrupts if i.subagent_run_id == handle.id]
                handle.suspend(mine)
            if self.root is not None:
                self.root.suspend([i.id for i in interrupts if i.subagent_run_id == self.root.id])
            raise Interrupted(interrupts)
        output = result.final_output
        self.finish(output)
        return output

    def finish(self, output: Any) -> None:
        """Finish with *output*: the innermost agent and the root carry it; the rest just end."""
        payload = jsonable(output)
        for index, (_, handle) in enumerate(reversed(self.chain)):
            if index == 0:
                handle.finish_with(payload)
            else:
                handle.finish()
        if self.root is not None:
            self.root.finish_with(payload)

    def abort(self, exc: BaseException) -> None:
        """End everything this session opened, after *exc* (the exception is the news)."""
        try:
            self.emit(self.items.end_all)
            self.emit(self.calls.fail_unanswered, exc)
        except Exception:
            _log.debug("closing the Agents SDK stream after an exception failed", exc_info=True)
        handles = [h for _, h in reversed(self.chain)]
        if self.root is not None:
            handles.append(self.root)
        cancelled = isinstance(exc, asyncio.CancelledError | RunCancelledError)
        for handle in handles:
            if handle.ended:
                continue
            try:
                if cancelled:
                    handle.fail("cancelled", code="cancelled")
                else:  # what the run's error policy lets the client read of it
                    message, code = ar.current_run().error_policy.report(exc)
                    handle.fail(message, code=code)
            except Exception:
                _log.debug("failing %r after an exception failed", handle, exc_info=True)

    def _interrupts(
        self, result: Any, interruptions: list[Any], name: str | None, key: str
    ) -> list[tuple[ev.Interrupt, dict[str, Any]]]:
        """One interrupt per approval, each with the continuation the server keeps for it."""
        state = result.to_state().to_json()
        chain = [
            {"name": n, "id": h.id, "parentToolCallId": h.parent_tool_call_id}
            for n, h in self.chain
        ]
        interrupts = []
        for item in interruptions:
            raw = getattr(item, "raw_item", None)
            call_id = str(_field(raw, "call_id") or _field(raw, "id") or "")
            tool_name = str(getattr(item, "tool_name", None) or _field(raw, "name") or "tool")
            our_id = self.calls.our_id(call_id) or _nested_call_id(self.run, call_id)
            if our_id is None:  # never streamed: say what is waiting first
                call = self.emit(self.calls.start, call_id, tool_name)
                call.args(str(_field(raw, "arguments") or ""))
                call.end()
                our_id = call.id
            owner = self.handle_for(getattr(item, "agent", None))
            data = continuation(
                ADAPTER,
                name,
                key,
                self.root.id if self.root is not None else self.owner,
                call=call_id,
                toolCallId=our_id,
                toolName=tool_name,
                chain=chain,
                state=state,
            )
            arguments = str(_field(raw, "arguments") or "")
            interrupt = ev.Interrupt(
                id=self.run.new_interrupt_id(),
                reason=APPROVAL,
                message=approval_message(tool_name, arguments),
                tool_call_id=our_id,
                subagent_run_id=owner.id if owner is not None else self.owner,
                response_schema=_APPROVAL_SCHEMA,
                metadata=ui_metadata(tool_name, arguments),
            )
            interrupts.append((interrupt, data))
        return interrupts


_APPROVAL_SCHEMA = _resume.approval_schema(override=False)


async def _stopped(result: Any) -> None:
    """Cancel the SDK's run and wait (bounded) until its tasks, tools included, have ended."""
    result.cancel()
    task = getattr(result, "run_loop_task", None)
    if isinstance(task, asyncio.Future) and not task.done():
        try:
            async with asyncio.timeout(_CALL_WAIT):
                await asyncio.wait({task})
        except BaseException:
            _log.debug("the Agents SDK run did not stop in time", exc_info=True)


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _message_text(raw: Any) -> str:
    parts = _field(raw, "content") or ()
    return "".join(str(_field(p, "text") or _field(p, "refusal") or "") for p in parts)


def _known_calls(tokens: list[ResumeToken]) -> dict[str, str]:
    return {t.text("call"): t.text("toolCallId") for t in tokens}


async def _restored_state(agent: Any, tokens: list[ResumeToken]) -> Any:
    """The ``RunState`` the interrupts carried, with every approval answered."""
    decisions = {t.text("call"): read_approval(t, override=False) for t in tokens}
    data: dict[str, Any] = tokens[0].data["state"]  # kept by this adapter on the server
    state = await RunState.from_json(agent, data)
    for item in state.get_interruptions():
        raw = getattr(item, "raw_item", None)
        call_id = str(_field(raw, "call_id") or _field(raw, "id") or "")
        answer = decisions.get(call_id)
        if answer is None:
            continue  # unanswered: the SDK asks again, and the run pauses again
        if answer.approved:
            state.approve(item)
        elif answer.message is not None:
            state.reject(item, rejection_message=answer.message)
        else:
            state.reject(item)
    return state


# --------------------------------------------------------------------------- agents as tools

_sessions: weakref.WeakKeyDictionary[Run, list[_Session]] = weakref.WeakKeyDictionary()


def _nested_call_id(run: Run, call_id: str) -> str | None:
    for session in _sessions.get(run, ()):
        our = session.calls.our_id(call_id)
        if our is not None:
            return our
    return None


def _parent_session(context: Any) -> _Session | None:
    """The session whose agent's tool call is starting a nested run, if any."""
    if not isinstance(context, ToolContext):
        return None
    frame_run = ar.current_run() if _has_run() else None
    if frame_run is None:
        return None
    owner = ar.current_subagent_id()
    agent = getattr(context, "agent", None)
    candidates = [s for s in _sessions.get(frame_run, ()) if s.owner == owner]
    if not candidates:
        candidates = list(_sessions.get(frame_run, ()))
    with_agent = [s for s in candidates if any(a is agent for a in s.agents)]
    chosen = with_agent or candidates
    return chosen[-1] if chosen else None


def _has_run() -> bool:
    try:
        ar.current_run()
    except LookupError:
        return False
    return True


class _NestingRunner(_sdk_run.AgentRunner):
    """The default runner once the adapter is used: nests ``as_tool`` runs, delegates the rest."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        context = kwargs.get("context")
        parent = _parent_session(context)
        if parent is None or not isinstance(context, ToolContext):
            return await self.inner.run(starting_agent, input, **kwargs)
        our_call = await parent.call_known(context.tool_call_id)
        owner = parent.handle_for(getattr(context, "agent", None))
        name = str(getattr(starting_agent, "name", "agent"))
        handle = ar.subagent(name, parent_tool_call_id=our_call)
        if owner is not None:
            ar.use(owner)(handle.start)
        else:
            handle.start()
        session = _Session(parent.run, handle, starting_agent, ToolCalls())
        try:
            result = await session.stream(starting_agent, input, kwargs)
        except BaseException as exc:
            session.abort(exc)
            raise
        session.emit(session.items.end_all)
        if getattr(result, "interruptions", None):
            handle.suspend()  # the parent run surfaces the approvals
            return result
        session.finish(result.final_output)
        return result

    def run_sync(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.run_sync(*args, **kwargs)

    def run_streamed(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.run_streamed(*args, **kwargs)


def _install_runner() -> None:
    current = _sdk_run.get_default_agent_runner()
    if not isinstance(current, _NestingRunner):
        _sdk_run.set_default_agent_runner(_NestingRunner(current))


def _inner_runner() -> Any:
    current = _sdk_run.get_default_agent_runner()
    return current.inner if isinstance(current, _NestingRunner) else current
