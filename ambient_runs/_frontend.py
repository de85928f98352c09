"""
Frontend tools: calls to the tools the client offers, and the client's answers.

The client sends its tools with the request (``RunAgentInput.tools``,
`Run.tools`) and runs them itself. A call to one is streamed like any tool
call (``TOOL_CALL_START`` / ``…_ARGS`` / ``…_END``, attributed to the ambient
scope) but never answered by the agent: no ``TOOL_CALL_RESULT`` goes out for
it. The run ends as success with ``outcome.pendingToolCallIds`` naming every
such call, in the order they were made; the client runs the tools, appends a
tool message per call to the conversation and starts the next run, where
`Run.tool_result` and `Run.tool_results` read the answers back.

Two faces, one record (`Pipeline.frontend_calls`, appended when the call's
``TOOL_CALL_START`` has gone out):

- `call_frontend_tool` sends the whole call and raises `FrontendToolCalled`,
  which ends the agent there, as `Interrupted` does: code after it does not run;
- ``tool_call(name, frontend=True)`` opens a `FrontendToolCall` handle (stream
  its arguments as a model writes them) and returns: the agent goes on, and
  the run ends with the call pending whenever it ends as success.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import attrs

from ambient_runs import events as ev
from ambient_runs._content import ToolCallHandle
from ambient_runs._outcomes import FrontendToolCalled
from ambient_runs.errors import InvalidInputError, ProtocolError, UnknownToolError

if TYPE_CHECKING:
    from ambient_runs._scopes import Frame

__all__ = (
    "FrontendToolCall",
    "ToolResult",
    "call_frontend_tool_in",
    "frontend_call_in",
    "tool_result_in",
    "tool_results_in",
)


class FrontendToolCall(ToolCallHandle):
    """
    An open call to one of the client's tools: the client, not the agent, answers it.

    A `ToolCallHandle` (``args``, ``end``) whose `result` refuses: the call is
    pending from the moment it opens, and the run ends as success with its id in
    ``pendingToolCallIds``.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()
    _what = "frontend tool call"

    def __init__(
        self, frame: Frame, call_id: str, name: str, parent_message_id: str | None
    ) -> None:
        super().__init__(frame, call_id, name, parent_message_id)
        pipeline = self._pipeline
        with pipeline.lock:
            pipeline.frontend_calls = (*pipeline.frontend_calls, call_id)

    def result(self, content: Any) -> str:
        """
        Refuse: the client runs a frontend tool and sends its result in the next run.

        Raises:
            ProtocolError: Always (rule ``frontend-tool-result``); nothing is sent.
        """
        msg = (
            f"tool call {self.name!r} ({self.id}) is a frontend call: the client runs it and "
            "sends its result in the next run's messages, so the agent must not send "
            f"TOOL_CALL_RESULT for it. Read the answer then with run.tool_result({self.id!r}); "
            f"to run the tool on the server instead, open it with tool_call({self.name!r})."
        )
        raise ProtocolError(msg, rule="frontend-tool-result")


def offered_tool(frame: Frame, name: str) -> ev.Tool:
    """
    The client's tool called *name*.

    Raises:
        UnknownToolError: The client did not offer it.
    """
    tools = frame.run.tools
    for tool in tools:
        if tool.name == name:
            return tool
    offered = ", ".join(repr(t.name) for t in tools) or "none"
    msg = (
        f"the client did not offer a tool called {name!r} for this run (its tools: {offered}); "
        "call one of run.tools, or run the tool on the server with tool_call(name) and send "
        "its result()."
    )
    raise UnknownToolError(msg)


def frontend_call_in(
    frame: Frame, name: str, call_id: str | None, parent_message_id: str | None
) -> FrontendToolCall:
    """Open a call to the client's tool *name* in *frame* (`UnknownToolError` if not offered)."""
    offered_tool(frame, name)
    return FrontendToolCall(
        frame, call_id or frame.pipeline.new_tool_call_id(), name, parent_message_id
    )


def call_frontend_tool_in(
    frame: Frame,
    name: str,
    args: Any,
    call_id: str | None,
    parent_message_id: str | None,
) -> NoReturn:
    """Send a whole call to the client's tool *name* in *frame*; raise `FrontendToolCalled`."""
    with frontend_call_in(frame, name, call_id, parent_message_id) as call:
        call.args({} if args is None else args)
    raise FrontendToolCalled(call.id, name)


@attrs.frozen
class ToolResult:
    """
    The client's answer to a tool call, read from the input's messages.

    Attributes:
        message: The client's tool message (``role: "tool"``).
        call: The call it answers, from the assistant message holding it in the
            history; None when the history does not hold that call.
        subagent_run_id: Who made the call: the ``subagentRunId`` of the
            assistant message holding it (None: the parent agent, or unknown).

    .. versionadded:: 0.1.0
    """

    message: ev.ToolMessage
    call: ev.ToolCall | None = None
    subagent_run_id: str | None = None

    @property
    def call_id(self) -> str:
        """The call answered (``toolCallId``)."""
        return self.message.tool_call_id

    @property
    def name(self) -> str | None:
        """The tool called, when the history holds the call."""
        return None if self.call is None else self.call.function.name

    @property
    def content(self) -> str | tuple[ev.ContentPart, ...]:
        """What the tool returned, as the client sent it: text or content parts."""
        return self.message.content

    @property
    def error(self) -> str | None:
        """The error the client reported for the call, if any."""
        return self.message.error

    def text(self) -> str:
        """The content as text: the string, or its text parts joined by newlines."""
        content = self.message.content
        if isinstance(content, str):
            return content
        return "\n".join(p.text for p in content if isinstance(p, ev.TextPart))

    def value(self) -> Any:
        """
        The content parsed as JSON (what most tools return, as text).

        Raises:
            InvalidInputError: The content is not JSON text; use `text` for plain text.
        """
        return _json(self.text(), f"the result of tool call {self.call_id!r}")

    def arguments(self) -> Any:
        """
        The arguments the call was made with, parsed (None when the history lacks the call).

        Raises:
            InvalidInputError: The arguments are not JSON text.
        """
        if self.call is None:
            return None
        text = self.call.function.arguments
        return None if text == "" else _json(text, f"the arguments of tool call {self.call_id!r}")


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        msg = f"{what} is not JSON text ({text[:60]!r}); read it with .text() instead"
        raise InvalidInputError(msg, ()) from None


def _calls(messages: Sequence[ev.Message]) -> dict[str, tuple[ev.ToolCall, str | None]]:
    """Every tool call of the history, by id, with the owner of the message holding it."""
    calls: dict[str, tuple[ev.ToolCall, str | None]] = {}
    for message in messages:
        if isinstance(message, ev.AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                calls[call.id] = (call, message.subagent_run_id)
    return calls


def _answer(
    message: ev.ToolMessage, calls: dict[str, tuple[ev.ToolCall, str | None]]
) -> ToolResult:
    found = calls.get(message.tool_call_id)
    return ToolResult(message) if found is None else ToolResult(message, *found)


def tool_result_in(messages: Sequence[ev.Message], call_id: str) -> ToolResult | None:
    """The newest tool message of *messages* answering *call_id*, or None."""
    for message in reversed(messages):
        if isinstance(message, ev.ToolMessage) and message.tool_call_id == call_id:
            return _answer(message, _calls(messages))
    return None


def tool_results_in(messages: Sequence[ev.Message], name: str | None) -> tuple[ToolResult, ...]:
    """The tool messages after the last user message, oldest first; only *name*'s if given."""
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], ev.UserMessage):
            start = index + 1
            break
    recent = [m for m in messages[start:] if isinstance(m, ev.ToolMessage)]
    if not recent:
        return ()
    calls = _calls(messages)
    answers = (_answer(m, calls) for m in recent)
    return tuple(a for a in answers if name is None or a.name == name)
