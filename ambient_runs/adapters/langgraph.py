"""
LangGraph, streamed with ambient attribution: ``await run_graph(graph, input, name="planner")``.

Install with ``pip install 'ambient-runs[langgraph]'``.

`run_graph` runs a compiled graph with ``astream`` and a callback handler that
LangChain calls inline, in the context of the code that triggered it, so what a
node does is attributed to the scope the node runs in: the graph's subagent
(*name*), or a subagent of the user's own where a node is decorated with
``@ambient_runs.subagent``.

=====================================  ==============================================
LangGraph / LangChain                  AG-UI
=====================================  ==============================================
a node (a task of a superstep)         ``STEP_STARTED``/``STEP_FINISHED`` named after
                                       the node (``name (2)``, … for concurrent tasks
                                       of one node, as ``Send`` fan-out makes)
a chat model's tokens                  ``TEXT_MESSAGE_START/CONTENT/END``; reasoning
                                       blocks as ``REASONING_*``
its tool calls (``tool_call_chunks``)  ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` as they
                                       stream, ``TOOL_CALL_END``; ``parentMessageId``
                                       is the model turn's message
a tool's result (``on_tool_end``)      ``TOOL_CALL_RESULT`` against that call
a tool that raises                     ``TOOL_CALL_RESULT`` ``{"error", "type"}``; if
                                       the graph fails, ``SUBAGENT_ERROR`` and the
                                       exception propagates
an ``AIMessage`` a node returns        a whole text message (unless it was streamed)
without a model
``interrupt(value)``                   an ``input_required`` `Interrupt` (the value
                                       in ``metadata.ambient_runs.value``), raised as
                                       `Interrupted`: the graph's subagent (and a
                                       decorated node's) ends ``suspended``, the run
                                       ends with an ``interrupt`` outcome
the final state                        returned; with *name*, its JSON form is
                                       ``SUBAGENT_FINISHED.result``
=====================================  ==============================================

**Interrupts and resume.** Each LangGraph interrupt becomes an AG-UI `Interrupt`
whose id is ``langgraph:<graph subagent id>:<LangGraph interrupt id>``, with
``reason: "input_required"`` (LangGraph's ``interrupt(value)`` is the
framework's own question, not an approval) and the interrupt's value in one
place, ``metadata["ambient_runs"]["value"]``. The ``message`` is the value
when it is a string, or a dict value's ``"message"``; the ``responseSchema`` is
a dict value's ``"responseSchema"`` (``interrupt({"message": "Pay 5 EUR?",
"responseSchema": {...}, ...})``). An ``interrupt()`` inside a tool also names
``toolCallId``, the paused call, and its id also
carries that call (``…:<LangChain call id>:<our call id>``), so that when the
tool runs again on resume its result answers the original call
(``TOOL_CALL_RESULT`` against it, not restreamed, when the client's history
holds it). Nothing is kept in memory: the graph's
checkpointer holds the paused state under ``thread_id`` (the run's
``threadId`` unless *config* names one), and the next run's ``resume`` names
the interrupts. Which graph interrupt an id stands for, and which tool call
it paused, is kept on the server too, in the run's continuation store
(`ambient_runs.continuations`): the id itself is never decoded, so an id the
server did not issue is ``RUN_ERROR interrupt_unknown`` (likewise
``interrupt_expired`` and ``interrupt_answered``); the entry
``buildResumeArray`` builds (``{interruptId, status, payload}``) is all the
client sends. When ``run_graph`` finds among the answers interrupts its graph
has pending, it runs ``Command(resume={<LangGraph id>: value, …})`` instead of
*input*, under the same subagent id; an answer of this graph's (same *name*)
that the graph no longer has pending (its checkpoint moved on) is
``RUN_ERROR interrupt_mismatch``. The value is the entry's ``payload`` for
``status: "resolved"``, and ``{"status": "cancelled", "payload": …}`` for
``"cancelled"``.

**Cancellation.** The client going away cancels the graph's task (LangGraph
cancels its nodes); `Run.cancel` does the same and raises `RunCancelledError`.
Tool calls left without a result get ``{"error": "cancelled"}``.

**What AG-UI cannot carry.** LangGraph's checkpoints, channels and per-node
state updates have no event (the final state is the result; use
``ambient_runs.set_state`` in a node to publish state); ``Send`` payloads and
edges are not shown; a decorated node that is re-run on resume starts a new
subagent invocation (LangGraph replays the node from its start), and its
suspended outcome lists no interrupt ids (the interrupt is attributed to the
graph's scope).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any
from urllib.parse import quote
from uuid import UUID

from ambient_runs.errors import needs_extra

with needs_extra(
    "ambient_runs.adapters.langgraph",
    extra="langgraph",
    needs="langgraph (and langchain-core)",
    name="langgraph",
):
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langgraph.errors import GraphBubbleUp, GraphInterrupt
    from langgraph.types import Command

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._outcomes import register_suspending
from ambient_runs.adapters._common import ToolCalls, cancel_guard, error_content, jsonable
from ambient_runs.adapters._resume import METADATA_KEY, QUESTION
from ambient_runs.continuations import Answer, answers, claim, keep
from ambient_runs.errors import InterruptMismatchError

__all__ = ("run_graph",)

_PREFIX = "langgraph:"


#: A tool call an interrupt paused: (LangChain's tool call id, ours).
ToolCallIds = tuple[str, str]


def _interrupt_id(owner: str | None, graph_interrupt_id: str, call: ToolCallIds | None) -> str:
    base = f"{_PREFIX}{quote(owner or '', safe='')}:{graph_interrupt_id}"
    if call is None:
        return base
    return f"{base}:{quote(call[0], safe='')}:{quote(call[1], safe='')}"


def _as_interrupt(
    graph_interrupt: Any, owner: str | None, call: ToolCallIds | None = None
) -> ev.Interrupt:
    value = jsonable(getattr(graph_interrupt, "value", None))
    # A dict value may say how to ask: its "message" and "responseSchema" (as
    # ag-ui-langgraph reads them); the value itself stays whole in the metadata.
    asks = value if isinstance(value, dict) else {}
    message = value if isinstance(value, str) else asks.get("message")
    schema = getattr(graph_interrupt, "response_schema", None) or asks.get("responseSchema")
    return ev.Interrupt(
        id=_interrupt_id(owner, str(graph_interrupt.id), call),
        reason=QUESTION,
        subagent_run_id=owner,
        message=message if isinstance(message, str) else None,
        tool_call_id=None if call is None else call[1],
        response_schema=schema if isinstance(schema, dict) else None,
        metadata={METADATA_KEY: {"value": value}},
    )


def _read_graph_interrupt(exc: BaseException) -> tuple[ev.Interrupt, ...]:
    """A GraphInterrupt leaving a decorated node: the interrupts, in the enclosing scope."""
    owner = ar.current_subagent_id()
    found = exc.args[0] if exc.args else ()
    if not isinstance(found, Sequence):
        return ()
    return tuple(_as_interrupt(i, owner) for i in found if hasattr(i, "id"))


register_suspending(GraphInterrupt, _read_graph_interrupt)

ADAPTER = "langgraph"


async def _resume_of(
    graph: Any, config: dict[str, Any], run: ar.Run, calls: ToolCalls, name: str | None
) -> tuple[Command[Any] | None, str | None]:
    """
    The ``Command(resume=...)`` for the interrupts of *graph* this run answers, if any.

    The answers are claimed from the continuations this adapter kept (never
    read off the ids). The tool calls those interrupts paused are made known to
    *calls*, so their results answer the original calls.

    Raises:
        InterruptError: An answer the store cannot continue, or one of this
            graph's (*name*) that the graph no longer has pending.
    """
    if not run.resume:
        return None, None
    if not getattr(graph, "checkpointer", None):
        await answers(run)  # no checkpoint to continue: still, never a silent new turn
        return None, None
    state = await graph.aget_state(config)
    pending = {str(i.id) for i in getattr(state, "interrupts", ()) or ()}
    stale: list[Answer] = []

    def select(free: list[Answer]) -> list[Answer]:
        ours = [a for a in free if a.data.get("adapter") == ADAPTER and a.data.get("name") == name]
        stale.extend(a for a in ours if a.data.get("graph") not in pending)
        return [a for a in ours if a.data.get("graph") in pending]

    mine = await claim(run, select)
    if stale:
        raise InterruptMismatchError(
            stale[0].interrupt_id,
            "is no longer pending in the graph's checkpoint (it moved on); start a new turn",
        )
    values: dict[str, Any] = {}
    owner: str | None = None
    for answer in mine:
        data, entry = answer.data, answer.entry
        who = data.get("owner")
        owner = owner or (who if isinstance(who, str) else None)
        call = data.get("call")
        if isinstance(call, list) and len(call) == 2:
            calls.known[str(call[0])] = str(call[1])
        values[str(data["graph"])] = (
            entry.payload
            if entry.status == "resolved"
            else {"status": "cancelled", "payload": entry.payload}
        )
    if not values:
        return None, None
    return Command(resume=values), owner


def _with_handler(config: Mapping[str, Any] | None, run: ar.Run, handler: Any) -> dict[str, Any]:
    merged = dict(config or {})
    configurable = dict(merged.get("configurable") or {})
    configurable.setdefault("thread_id", run.thread_id)
    merged["configurable"] = configurable
    callbacks = merged.get("callbacks")
    if callbacks is None or isinstance(callbacks, list | tuple):
        merged["callbacks"] = [*(callbacks or ()), handler]
    else:  # a callback manager
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        merged["callbacks"] = manager
    return merged


async def run_graph(
    graph: Any,
    input: Any,
    config: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
) -> Any:
    """
    Run the compiled LangGraph *graph* on *input* and stream what it does into the ambient scope.

    Args:
        graph: A compiled graph (``StateGraph(...).compile(checkpointer=...)``).
        input: The graph's input (its state's update). Not used when the run
            resumes interrupts this graph has pending: the answers are.
        config: The graph's ``RunnableConfig``; ``configurable.thread_id``
            defaults to the run's ``threadId``. Its callbacks are kept.
        name: Run the graph in a new subagent called *name* (its final state
            as ``SUBAGENT_FINISHED.result``); in the ambient scope without it.

    Returns:
        The graph's final state (its last ``values``).

    Raises:
        Interrupted: The graph paused on ``interrupt()``; let it propagate.
        InterruptError: The run answers an interrupt the continuation store
            cannot continue (``interrupt_unknown``, ``interrupt_expired``,
            ``interrupt_answered``), or one this graph no longer has pending
            (``interrupt_mismatch``).
        RunCancelledError: The run was cancelled (`Run.cancel`) meanwhile.
        NoActiveRunError: No run is ambient.

    .. versionadded:: 0.1.0
    """
    run = ar.current_run()
    handler = _Handler()
    merged = _with_handler(config, run, handler)
    command, owner = await _resume_of(graph, merged, run, handler.calls, name)
    scope: Any = (
        nullcontext() if name is None else ar.subagent(name, id=owner if command else None)
    )
    final: Any = None
    paused: list[Any] = []
    async with cancel_guard(run):
        with scope as sub:
            here = ar.current_subagent_id()
            try:
                async for mode, chunk in graph.astream(
                    command if command is not None else input,
                    merged,
                    stream_mode=["messages", "updates", "values"],
                ):
                    if mode == "values":
                        final = chunk
                    elif mode == "updates" and isinstance(chunk, Mapping):
                        found = chunk.get("__interrupt__")
                        if found:
                            paused.extend(found)
                        else:
                            handler.updates(chunk)
            except BaseException as exc:
                handler.close(exc)
                raise
            handler.close(None)
            if paused:
                kept = []
                for graph_interrupt in paused:
                    call = handler.paused_calls.get(str(graph_interrupt.id))
                    data = {
                        "adapter": ADAPTER,
                        "name": name,
                        "graph": str(graph_interrupt.id),
                        "owner": here,
                        "call": list(call) if call is not None else None,
                    }
                    kept.append(await keep(run, _as_interrupt(graph_interrupt, here, call), data))
                raise ar.Interrupted(kept)
            if sub is not None:
                sub.finish_with(jsonable(final))
    return final


class _Turn:
    """One chat model call: its message, reasoning and tool calls, as they stream."""

    __slots__ = ("calls", "message", "message_id", "reasoning", "streamed")

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self.message: ar.MessageHandle | None = None
        self.reasoning: ar.ReasoningHandle | None = None
        self.calls: dict[Any, ar.ToolCallHandle] = {}  # by chunk index (or id)
        self.streamed = False

    def text(self, delta: str) -> None:
        if not delta:
            return
        self.streamed = True
        if self.reasoning is not None:
            self.reasoning.end()
            self.reasoning = None
        if self.message is None:
            self.message = ar.message(id=self.message_id)
        self.message.write(delta)

    def think(self, delta: str) -> None:
        if not delta:
            return
        self.streamed = True
        if self.reasoning is None:
            self.reasoning = ar.reasoning()
        self.reasoning.write(delta)

    def end(self) -> None:
        if self.reasoning is not None and not self.reasoning.ended:
            self.reasoning.end()
        if self.message is not None and not self.message.ended:
            self.message.end()
        for call in self.calls.values():
            if not call.ended:
                call.end()


class _Handler(BaseCallbackHandler):
    """LangChain callbacks, run inline in the caller's context, as AG-UI events."""

    run_inline = True
    raise_error = True

    def __init__(self) -> None:
        self.calls = ToolCalls()
        self.turns: dict[UUID, _Turn] = {}
        self.steps: dict[UUID, ar.Step] = {}
        self.busy: dict[tuple[str | None, str], int] = {}
        self.tools: dict[UUID, tuple[str, str]] = {}  # tool run -> (foreign call id, name)
        self.streamed_messages: set[str] = set()
        #: LangGraph interrupt id -> the tool call it paused (an interrupt() in a tool).
        self.paused_calls: dict[str, ToolCallIds] = {}

    # ------------------------------------------------------------------ nodes as steps

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        node = (metadata or {}).get("langgraph_node")
        if not isinstance(node, str) or kwargs.get("name") != node or node.startswith("__"):
            return  # not a node, or LangGraph's own (__start__ routing)
        if not any(t.startswith("graph:step:") for t in tags or ()):
            return
        owner = ar.current_subagent_id()
        count = self.busy.get((owner, node), 0) + 1
        self.busy[owner, node] = count
        label = node if count == 1 else f"{node} ({count})"
        self.steps[run_id] = ar.step(label).start()

    def _end_step(self, run_id: UUID) -> None:
        step = self.steps.pop(run_id, None)
        if step is None:
            return
        if not step.ended:
            step.end()
        key = (step.owner, step.name.rsplit(" (", 1)[0])
        self.busy[key] = self.busy.get(key, 1) - 1
        if self.busy[key] <= 0:
            del self.busy[key]

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end_step(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end_step(run_id)

    # ------------------------------------------------------------------ chat models

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.turns[run_id] = _Turn(ar.current_run().new_message_id())
        self.streamed_messages.add(f"lc_run--{run_id}")

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.turns[run_id] = _Turn(ar.current_run().new_message_id())

    def on_llm_new_token(
        self, token: Any, *, chunk: Any = None, run_id: UUID, **kwargs: Any
    ) -> None:
        turn = self.turns.get(run_id)
        if turn is None:
            return
        message = getattr(chunk, "message", None)
        if message is None:
            self._content(turn, token)
            return
        if getattr(message, "id", None):
            self.streamed_messages.add(str(message.id))
        self._content(turn, message.content)
        for part in getattr(message, "tool_call_chunks", None) or ():
            self._tool_chunk(turn, part)

    def _content(self, turn: _Turn, content: Any) -> None:
        if isinstance(content, str):
            turn.text(content)
            return
        for block in content or ():
            if isinstance(block, str):
                turn.text(block)
            elif isinstance(block, Mapping):
                kind = block.get("type")
                if kind == "text":
                    turn.text(str(block.get("text") or ""))
                elif kind in ("reasoning", "thinking"):
                    turn.think(str(block.get("reasoning") or block.get("thinking") or ""))

    def _tool_chunk(self, turn: _Turn, part: Mapping[str, Any]) -> None:
        index, call_id = part.get("index"), part.get("id")
        key = index if index is not None else call_id
        handle = turn.calls.get(key)
        if handle is None:
            if call_id is None and part.get("name") is None:
                return  # a continuation of a call we never saw start
            handle = self.calls.start(
                str(call_id or f"{turn.message_id}:{key}"),
                str(part.get("name") or "tool"),
                parent_message_id=turn.message_id,
            )
            turn.calls[key] = handle
        args = part.get("args")
        if args:
            handle.args(args)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        turn = self.turns.pop(run_id, None)
        if turn is None:
            return
        if not turn.streamed and not turn.calls:  # a model that did not stream: say it whole
            for generations in getattr(response, "generations", None) or ():
                for generation in generations:
                    message = getattr(generation, "message", None)
                    if message is not None:
                        self._content(turn, message.content)
                        for call in getattr(message, "tool_calls", None) or ():
                            self._whole_call(turn, call)
                    else:
                        turn.text(getattr(generation, "text", "") or "")
        turn.end()

    def _whole_call(self, turn: _Turn, call: Mapping[str, Any]) -> None:
        handle = self.calls.start(
            str(call.get("id") or f"{turn.message_id}:{len(turn.calls)}"),
            str(call.get("name") or "tool"),
            parent_message_id=turn.message_id,
        )
        handle.args(call.get("args") or {})
        turn.calls[len(turn.calls)] = handle

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        turn = self.turns.pop(run_id, None)
        if turn is not None:
            turn.end()

    # ------------------------------------------------------------------ tools

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        inputs: Any = None,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        if tool_call_id is not None and tool_call_id in self.calls.known:
            pass  # a call an earlier run paused: its result answers it there
        elif tool_call_id is None or self.calls.get(tool_call_id) is None:
            # A tool no model asked for (called by a node itself): show the call too.
            foreign = tool_call_id or f"tool-run:{run_id}"
            handle = self.calls.start(foreign, name)
            handle.args(inputs if inputs is not None else input_str)
            handle.end()
            tool_call_id = foreign
        self.tools[run_id] = (tool_call_id, name)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        found = self.tools.pop(run_id, None)
        if found is None:
            return
        content = output.content if isinstance(output, ToolMessage) else output
        if isinstance(output, Command):
            content = {"command": jsonable(output.update)}
        self.calls.result(found[0], found[1], content)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        found = self.tools.pop(run_id, None)
        if found is None:
            return
        if isinstance(error, GraphBubbleUp):  # interrupt() in the tool: answered on resume
            ours = self.calls.our_id(found[0])
            if isinstance(error, GraphInterrupt) and ours is not None and error.args:
                for paused in error.args[0] or ():
                    self.paused_calls[str(paused.id)] = (found[0], ours)
            return
        self.calls.result(found[0], found[1], error_content(error))

    # ------------------------------------------------------------------ node outputs

    def updates(self, chunk: Mapping[str, Any]) -> None:
        """Messages a node returned that no model streamed (in the graph's scope)."""
        for update in chunk.values():
            messages = update.get("messages") if isinstance(update, Mapping) else None
            if isinstance(messages, BaseMessage):
                messages = [messages]
            for message in messages or ():
                if not isinstance(message, AIMessage) or not isinstance(message.content, str):
                    continue
                if message.id and str(message.id) in self.streamed_messages:
                    continue
                if message.content:
                    ar.say(message.content)
                if message.id:
                    self.streamed_messages.add(str(message.id))

    def close(self, exc: BaseException | None) -> None:
        """The graph stopped: end what is still streaming; answer calls a failure orphaned."""
        for turn in list(self.turns.values()):
            turn.end()
        self.turns.clear()
        for run_id in list(self.steps):
            self._end_step(run_id)
        if exc is not None and not isinstance(exc, GraphBubbleUp | ar.Interrupted):
            self.calls.fail_unanswered(exc)
