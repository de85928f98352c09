"""
ambient_runs: stream AG-UI 1.0 events from Python agents, with ambient attribution.

The current run, subagent and step live in contextvars, so ``@subagent("researcher")``
on a function and a bare ``say("…")`` inside it produce correctly attributed
events, and concurrent asyncio tasks each carry their own scope.

Everything public is importable from here; each name has one home module.

As httpx does, every class and function exported here has its ``__module__``
set to ``ambient_runs``, the path users import it from, so reprs, tracebacks
and documentation show ``ambient_runs.Run`` rather than the private module
that defines it (``ambient_runs._run``). Pickling and ``copy`` find them under
that path. ``inspect.getsource`` still works for their functions and methods,
but not for the classes themselves (it looks for the class in this file).
"""

import inspect as _inspect
import types as _types
import typing as _typing

from ambient_runs._content import ActivityHandle, MessageHandle, ReasoningHandle, ToolCallHandle
from ambient_runs._emit import (
    activity,
    call_frontend_tool,
    current_step,
    current_subagent,
    current_subagent_id,
    drain,
    emit,
    message,
    publish_messages,
    publish_state,
    reasoning,
    say,
    set_state,
    state,
    step,
    subagent,
    subagent_with,
    think,
    tool_call,
    update_state,
    usage,
    use,
)
from ambient_runs._frontend import FrontendToolCall, ToolResult
from ambient_runs._outcomes import FrontendToolCalled, Interrupted, Resumption, interrupt
from ambient_runs._relay import RelayOptions, relay, relay_messages, relay_resume
from ambient_runs._run import EventLog, Run, current_run
from ambient_runs._step import Step, StepSpec
from ambient_runs._stream import EventStream, StreamStatistics, stream
from ambient_runs._subagent import Subagent, SubagentOptions, SubagentSpec
from ambient_runs._usage import TokenCounts
from ambient_runs._version import __version__
from ambient_runs._wire import encode_json, from_wire, json_form, register_json_form, to_wire
from ambient_runs.conversations import MemoryThreadStore, ThreadStore, merge_history
from ambient_runs.errors import (
    AgentError,
    AmbientRunsError,
    AmbientRunsWarning,
    HandleClosedError,
    HandleWarning,
    InterruptAnsweredError,
    InterruptError,
    InterruptExpiredError,
    InterruptMismatchError,
    InterruptPayloadError,
    InterruptUnknownError,
    InvalidEventError,
    InvalidInputError,
    InvalidJSONError,
    LeftOpenWarning,
    MessagesNotRecordedError,
    MissingExtraError,
    NoActiveRunError,
    ProtocolError,
    RelayError,
    ResultWarning,
    RunCancelledError,
    UnknownToolError,
)
from ambient_runs.events import Event, EventType, Interrupt, RunAgentInput
from ambient_runs.threads import ContextThreadPoolExecutor, Thread, run_in_executor, wrap

__all__ = [
    "ActivityHandle",
    "AgentError",
    "AmbientRunsError",
    "AmbientRunsWarning",
    "ContextThreadPoolExecutor",
    "Event",
    "EventLog",
    "EventStream",
    "EventType",
    "FrontendToolCall",
    "FrontendToolCalled",
    "HandleClosedError",
    "HandleWarning",
    "Interrupt",
    "InterruptAnsweredError",
    "InterruptError",
    "InterruptExpiredError",
    "InterruptMismatchError",
    "InterruptPayloadError",
    "InterruptUnknownError",
    "Interrupted",
    "InvalidEventError",
    "InvalidInputError",
    "InvalidJSONError",
    "LeftOpenWarning",
    "MemoryThreadStore",
    "MessageHandle",
    "MessagesNotRecordedError",
    "MissingExtraError",
    "NoActiveRunError",
    "ProtocolError",
    "ReasoningHandle",
    "RelayError",
    "RelayOptions",
    "ResultWarning",
    "Resumption",
    "Run",
    "RunAgentInput",
    "RunCancelledError",
    "Step",
    "StepSpec",
    "StreamStatistics",
    "Subagent",
    "SubagentOptions",
    "SubagentSpec",
    "Thread",
    "ThreadStore",
    "TokenCounts",
    "ToolCallHandle",
    "ToolResult",
    "UnknownToolError",
    "__version__",
    "activity",
    "call_frontend_tool",
    "current_run",
    "current_step",
    "current_subagent",
    "current_subagent_id",
    "drain",
    "emit",
    "encode_json",
    "from_wire",
    "interrupt",
    "json_form",
    "merge_history",
    "message",
    "publish_messages",
    "publish_state",
    "reasoning",
    "register_json_form",
    "relay",
    "relay_messages",
    "relay_resume",
    "run_in_executor",
    "say",
    "set_state",
    "state",
    "step",
    "stream",
    "subagent",
    "subagent_with",
    "think",
    "to_wire",
    "tool_call",
    "update_state",
    "usage",
    "use",
    "wrap",
]


def _rehome(exported: dict[str, object]) -> None:
    """
    Give every exported class and function the ``__module__`` ``ambient_runs``.

    A class's own string annotations are resolved first, in the module that
    defined it, because `typing.get_type_hints` looks names up in the module
    ``__module__`` names: without that, it would search this one and fail.
    """
    for obj in exported.values():
        if isinstance(obj, type):
            own = _inspect.get_annotations(obj)
            if any(isinstance(hint, str) for hint in own.values()):
                try:
                    hints = _typing.get_type_hints(obj, include_extras=True)
                except NameError:  # a name imported only for type checking: leave them as text
                    pass
                else:
                    obj.__annotations__ = {name: hints.get(name, own[name]) for name in own}
        elif not isinstance(obj, _types.FunctionType):
            continue  # the Event alias, __version__
        obj.__module__ = __name__


_rehome({name: globals()[name] for name in __all__})
