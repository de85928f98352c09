"""
Module-level emitters: they act on whatever run and subagent are ambient.

Each is the ambient twin of a method of `Run` and `Subagent` (one
implementation, in ``_emitters``), and each raises `NoActiveRunError`, naming the
fix, when called outside any run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Unpack

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._content import ActivityHandle, MessageHandle, ReasoningHandle, ToolCallHandle
from ambient_runs._emitters import (
    activity_in,
    emit_in,
    message_in,
    publish_messages_in,
    reasoning_in,
    say_in,
    think_in,
    tool_call_in,
)
from ambient_runs._frontend import call_frontend_tool_in
from ambient_runs._scopes import current as _current
from ambient_runs._scopes import require
from ambient_runs._state import publish_state_in, set_state_in, update_state_in
from ambient_runs._step import Step
from ambient_runs._subagent import Subagent, SubagentOptions, SubagentSpec
from ambient_runs._usage import TokenCounts, usage_in

__all__ = (
    "activity",
    "call_frontend_tool",
    "current_step",
    "current_subagent",
    "current_subagent_id",
    "drain",
    "emit",
    "message",
    "publish_messages",
    "publish_state",
    "reasoning",
    "say",
    "set_state",
    "state",
    "step",
    "subagent",
    "subagent_with",
    "think",
    "tool_call",
    "update_state",
    "usage",
    "use",
)


def say(text: str, *, id: str | None = None) -> str:
    """
    Emit a whole assistant message (start, content, end) attributed to the ambient scope.

    Returns:
        The message id.

    Raises:
        NoActiveRunError: No run is ambient.

    .. versionadded:: 0.1.0
    """
    frame = _scopes.current() or require("say")
    return say_in(frame, text, id)


def usage(
    *, provider: str | None = None, model: str | None = None, **counts: Unpack[TokenCounts]
) -> ev.TokenUsage:
    """
    Record one model call's token usage in the ambient scope; return the `TokenUsage`.

    The run sums every report per provider and model, its subagents' included, into
    its terminal event's ``usage`` (``RUN_FINISHED``, ``RUN_ERROR``, a cancelled
    finish). Each report also goes out at once as a ``CUSTOM`` event named
    ``ambient_runs.usage``, attributed to the scope (its value the report's wire
    form), which the OpenTelemetry adapter puts on that scope's span. Counts are
    non-negative integers; a count left out is "not reported", never zero.

    Args:
        provider: The model provider, e.g. ``"openai"``.
        model: The model's name.
        counts: `TokenCounts`: ``input_tokens``, ``output_tokens``, ``total_tokens``,
            ``reasoning_tokens``, ``cached_input_tokens``, ``cache_write_input_tokens``.

    Raises:
        NoActiveRunError: No run is ambient.
        InvalidEventError: A count is not a non-negative int (a float, a bool, …).
        TypeError: A keyword is not one of the counts.

    .. versionadded:: 0.1.0
    """
    return usage_in(require("usage"), provider, model, counts)


def think(text: str, *, id: str | None = None) -> str:
    """
    Emit a whole reasoning block in one call; return its id.

    .. versionadded:: 0.1.0
    """
    return think_in(require("think"), text, id)


def message(
    role: ev.TextMessageRole = "assistant",
    *,
    id: str | None = None,
    name: str | None = None,
) -> MessageHandle:
    """
    Open a text message (``TEXT_MESSAGE_START``) owned by the ambient scope.

    .. versionadded:: 0.1.0
    """
    return message_in(require("message"), role, id, name)


def reasoning(*, id: str | None = None) -> ReasoningHandle:
    """
    Open a reasoning block (``REASONING_START``) owned by the ambient scope.

    .. versionadded:: 0.1.0
    """
    return reasoning_in(require("reasoning"), id)


def tool_call(
    name: str,
    *,
    id: str | None = None,
    parent_message_id: str | None = None,
    frontend: bool = False,
) -> ToolCallHandle:
    """
    Open a call to tool *name* (``TOOL_CALL_START``) owned by the ambient scope.

    With *parent_message_id* naming a message of this run, the call takes that
    message's owner: a tool call belongs to the message that carries it.

    With *frontend*, *name* is one of the client's tools (`Run.tools`) and the
    client answers the call: the handle (a `FrontendToolCall`) streams the
    arguments, refuses `ToolCallHandle.result` (`ProtocolError`), and the run,
    when it ends as success, names the call in ``pendingToolCallIds``. The
    agent goes on after it; `call_frontend_tool` is the face that stops it.

    Raises:
        UnknownToolError: *frontend* and the client did not offer *name*.

    .. versionadded:: 0.1.0
    """
    return tool_call_in(require("tool_call"), name, id, parent_message_id, frontend)


def call_frontend_tool(
    name: str,
    args: Any = None,
    *,
    id: str | None = None,
    parent_message_id: str | None = None,
) -> NoReturn:
    """
    Call the client's tool *name* with *args*, and end the agent here.

    Sends the whole call, attributed to the ambient scope (``TOOL_CALL_START``,
    ``TOOL_CALL_ARGS`` with *args* as JSON text, ``{}`` when None, and
    ``TOOL_CALL_END``), never a ``TOOL_CALL_RESULT``, then raises
    `FrontendToolCalled`. Let it propagate: leaving a subagent it finishes the
    invocation (success), leaving the run it ends the run as success with
    ``outcome.pendingToolCallIds`` naming the call. Concurrent work is ended the
    way any exception ends it: a ``TaskGroup`` cancels the sibling tasks (their
    subagents end ``SUBAGENT_ERROR`` ``cancelled``); to let them finish first,
    open the call with ``tool_call(name, frontend=True)`` and return after the
    group. The client runs the tool and sends its result as a tool message in
    the next run, where ``run.tool_result(call_id)`` (or ``run.tool_results(name)``)
    reads it. The arguments are not checked against the tool's ``parameters``.

    Raises:
        UnknownToolError: The client did not offer a tool called *name*.
        FrontendToolCalled: Always, once the call has gone out.
        NoActiveRunError: No run is ambient.

    .. versionadded:: 0.1.0
    """
    call_frontend_tool_in(require("call_frontend_tool"), name, args, id, parent_message_id)


def activity(
    activity_type: str,
    content: Any,
    *,
    id: str | None = None,
) -> ActivityHandle:
    """
    Publish an activity message owned by the ambient scope (snapshot now, deltas later).

    .. versionadded:: 0.1.0
    """
    return activity_in(require("activity"), activity_type, content, id)


def step(name: str) -> Step:
    """
    Return a step invocation, not started: a context manager, a handle (`Step.start`),
    or a decorator (each call of the decorated function runs in a fresh step).

    The step belongs to the scope ambient when it starts.

    .. versionadded:: 0.1.0
    """
    return Step(name)


def subagent(name: str, **options: Unpack[SubagentOptions]) -> Subagent:
    """
    Return a subagent invocation, not started: a context manager and an explicit handle.

    As a decorator it decorates with its frozen `SubagentSpec` (`Subagent.spec`):
    each call of the decorated function is a fresh invocation.

    Args:
        name: The subagent's reusable name, for display.
        description: What it does, for display.
        id: An explicit invocation id: how a resuming run continues a suspended
            invocation. A fresh ``<run id>-sub-<n>`` otherwise. Ids are per
            invocation, so a decorator with a fixed *id* serves one call per run.
        parent_tool_call_id: The tool call that spawned it (agents as tools).
        parent_message_id: The message holding that tool call.

    .. versionadded:: 0.1.0
    """
    return Subagent(name, **options)


def subagent_with(started: ev.SubagentStartedEvent) -> Subagent:
    """
    Return a subagent from an announcement you built (the seed's ``subagent_with``).

    A ``parent_subagent_run_id`` left absent is filled from the enclosing scope.

    .. versionadded:: 0.1.0
    """
    return SubagentSpec.from_started(started).invocation()


def emit(event: object) -> None:
    """
    Emit *event* as is (transformed and verified like any other).

    *event* is an `ambient_runs` event, an official ``ag_ui.core`` event object
    (read through its ``model_dump``; nothing of ``ag_ui`` is imported) or a wire
    dict.

    An attributable event without ``subagent_run_id`` is attributed to the
    ambient subagent.

    An event object you built is rebuilt through its constructor first, so an
    event altered after construction (``object.__setattr__``, ``object.__new__``)
    is checked like a new one.

    Raises:
        ProtocolError: *event* is ``RUN_STARTED``, ``RUN_FINISHED`` or ``RUN_ERROR``
            (rule ``run-lifecycle``): the run sends those itself, once; return,
            raise, or raise `Interrupted` instead. Or *event* breaks the AG-UI
            sequence rules.
        InvalidEventError: A field of *event* is invalid or missing, or holds a
            value with no JSON form.

    .. versionadded:: 0.1.0
    """
    emit_in(require("emit"), event)


def current_subagent_id() -> str | None:
    """
    Return the ``subagentRunId`` events emitted here carry; None for the parent agent.

    .. versionadded:: 0.1.0
    """
    frame = _scopes.current()
    return None if frame is None else frame.owner


def current_subagent() -> Subagent | None:
    """
    Return the ambient subagent invocation, if any.

    .. versionadded:: 0.1.0
    """
    frame = _scopes.current()
    return None if frame is None else frame.host


def current_step() -> str | None:
    """
    Return the name of the ambient step, if any.

    .. versionadded:: 0.1.0
    """
    frame = _scopes.current()
    return None if frame is None else frame.step_name


def state() -> Any:
    """
    Return the ambient run's state.

    .. versionadded:: 0.1.0
    """
    return require("state").run.state()


def set_state(value: Any) -> None:
    """
    Replace the ambient run's state and publish the change.

    .. versionadded:: 0.1.0
    """
    set_state_in(require("set_state"), value)


def update_state(update: Callable[[Any], Any]) -> None:
    """
    Change the ambient run's state with *update* (mutate, or return a new one); publish.

    .. versionadded:: 0.1.0
    """
    update_state_in(require("update_state"), update)


def publish_state() -> None:
    """
    Publish the ambient run's state changes (snapshot first, then deltas).

    .. versionadded:: 0.1.0
    """
    publish_state_in(require("publish_state"))


def publish_messages() -> None:
    """
    Send the ambient run's whole conversation as one ``MESSAGES_SNAPSHOT``.

    The snapshot is `Run.messages`: the messages before the run and every
    message the run has made so far (open ones with their text so far), each
    with its ``subagentRunId``. The client replaces its messages with it
    (same ids in place; those it omits are dropped, but for activity and
    reasoning messages when it holds none of that role). Send it after
    changing the conversation behind the client's back (a loaded thread, an
    edited or summarised history), or before pausing on an interrupt, so a
    client that reconnects later starts from it. ``MESSAGES_SNAPSHOT`` is not
    attributable: called inside a subagent, it is the same run-wide event.

    Raises:
        MessagesNotRecordedError: The run records no messages (it was made
            without ``record_messages=True``, outside ``AgentApp(threads=...)``).
        NoActiveRunError: No run is ambient.

    .. versionadded:: 0.1.0
    """
    publish_messages_in(require("publish_messages"))


async def drain() -> None:
    """
    Wait until the ambient run's consumer has caught up (backpressure).

    .. versionadded:: 0.1.0
    """
    # `Pipeline.drain` inline, and `require`'s lookup too: one coroutine and no call,
    # not four coroutines, when there is nothing to wait for (agents call this per token).
    frame = _current()
    hook = (frame or require("drain")).pipeline.drain_hook
    if hook is not None and len(hook.buffer) >= hook.due:
        wait = hook.gate()
        if wait is not None:
            await wait


def use(handle: Subagent) -> Callable[..., Any]:
    """
    Return a function running ``fn(*args, **kwargs)`` with *handle* ambient.

    For code that holds a handle where contextvars do not reach (callbacks,
    foreign threads): ``use(researcher)(fn, *args)``.

    .. versionadded:: 0.1.0
    """
    frame = handle._emit_frame()

    def run_with(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return _scopes.within(frame, fn, *args, **kwargs)

    return run_with
