"""
`RunAccessors`: what a run offers to read and wait on, for the run and its handles alike.

The request (ids, the conversation, the client's tools and their answers,
context, passthrough properties, resume answers), the state, backpressure and
cancellation read the same from a `Run` and from a subagent handle (the
reference SDK's handle reaches everything its run offers). Each class says
which run it reads (`RunAccessors._accessed_run`): a run itself, or the run an
invocation belongs to. Written once here, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from ambient_runs import events as ev
from ambient_runs._frontend import ToolResult, tool_result_in, tool_results_in
from ambient_runs._outcomes import Resumption
from ambient_runs.errors import RunCancelledError

if TYPE_CHECKING:
    from ambient_runs._run import Run

__all__ = ("RunAccessors",)

T = TypeVar("T")


class RunAccessors:
    """The read side of a run, shared by `Run` and the handles that belong to one."""

    __slots__ = ()

    def _accessed_run(self) -> Run:
        """The run read from: the run itself, or the one a handle belongs to."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the request

    @property
    def thread_id(self) -> str:
        """The conversation the run belongs to."""
        return self._accessed_run().input.thread_id

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._accessed_run().input.run_id

    @property
    def parent_run_id(self) -> str | None:
        """The run that spawned this one, for nested agents."""
        return self._accessed_run().input.parent_run_id

    @property
    def messages(self) -> tuple[ev.Message, ...]:
        """
        The conversation, oldest first: the messages before the run, then the run's own.

        The messages before the run are the client's ``input.messages`` (or the
        run's *history*); the run's own are every message it has delivered so
        far, as the official client builds them from the same events: assistant
        (and other roles') text, tool calls with their arguments on their
        assistant message, tool results right after the message holding their
        call, reasoning messages, activity messages, encrypted values and event
        metadata merged in, a ``MESSAGES_SNAPSHOT`` applied. A message still
        open has its text so far. **Attribution**: each message the run made
        carries the ``subagent_run_id`` of the scope that opened it (None: the
        parent agent), the protocol's own field, which the client keeps too and
        which round-trips through ``MESSAGES_SNAPSHOT`` and a thread store.

        What a transformer changed is what the history holds: it is built from
        the events as delivered. Without *record_messages* (the default) this
        is only the conversation before the run.
        """
        return self._accessed_run()._conversation()

    def last_user_text(self) -> str | None:
        """
        Return what the user said last, as text (non-text parts dropped).

        None when the history holds no user message at all, which is distinct
        from a user who sent an empty one.
        """
        for message in reversed(self.messages):
            if isinstance(message, ev.UserMessage):
                return message.text()
        return None

    @property
    def tools(self) -> tuple[ev.Tool, ...]:
        """Tools the client offers for this run."""
        return self._accessed_run().input.tools or ()

    def tool(self, name: str) -> ev.Tool | None:
        """Return the offered tool called *name*, if any."""
        return next((t for t in self.tools if t.name == name), None)

    def tool_result(self, call_id: str) -> ToolResult | None:
        """
        Return the client's answer to tool call *call_id*, read from the input's messages.

        The answer to a frontend call (`ambient_runs.call_frontend_tool`) arrives
        as a tool message in the next run's messages; the `ToolResult` holds it,
        the call it answers (name, ``arguments()``) and who made the call. The
        newest tool message wins when several answer one call.

        Returns None when no tool message in the input answers *call_id*: the
        client did not run the tool (or not yet), or sent the run without its
        result. Nothing is raised; the call stays unanswered in the history, so
        ask again (a new call) or tell the user.

        .. versionadded:: 0.1.0
        """
        return tool_result_in(self._accessed_run().input.messages, call_id)

    def tool_results(self, name: str | None = None) -> tuple[ToolResult, ...]:
        """
        Return the tool results the client sent since the user's last message, oldest first.

        The answers that concern the current turn: what a stateless agent checks
        first, to continue after the frontend calls it made (``name``: only
        calls to that tool). Results of earlier turns are left out; read any
        call's with `tool_result`. Empty when there are none.

        .. versionadded:: 0.1.0
        """
        return tool_results_in(self._accessed_run().input.messages, name)

    @property
    def context(self) -> tuple[ev.Context, ...]:
        """Ambient context entries."""
        return self._accessed_run().input.context or ()

    @property
    def forwarded_props(self) -> Any:
        """Arbitrary passthrough properties, opaque to the protocol."""
        return self._accessed_run().input.forwarded_props

    @property
    def resume(self) -> tuple[ev.ResumeEntry, ...]:
        """Answers to the interrupts a previous run paused on; empty unless resuming."""
        return self._accessed_run().input.resume or ()

    def resume_for(self, interrupt_id: str) -> Resumption | None:
        """
        Return the client's answer to interrupt *interrupt_id*, if it sent one.

        The `Resumption` is the `ResumeEntry` (``status``, ``payload``,
        ``metadata``) plus the suspended invocation it continues, read off an id
        made by `ambient_runs.interrupt`: ``subagent_run_id`` and
        ``subagent_name``, so that any process, with no memory of the paused
        run, continues it under the same id::

            answer = run.resume_for(interrupt_id)
            if answer is not None and answer.subagent_run_id is not None:
                with ar.subagent(answer.subagent_name, id=answer.subagent_run_id):
                    ...
        """
        entry = next((r for r in self.resume if r.interrupt_id == interrupt_id), None)
        return None if entry is None else Resumption.of(entry)

    @property
    def is_resume(self) -> bool:
        """Whether this request resumes a paused run."""
        return bool(self._accessed_run().input.resume)

    # ------------------------------------------------------------------ state, backpressure

    def state(self) -> Any:
        """Return the typed state (as last set or mutated; publishing does not copy it)."""
        return self._accessed_run().pipeline.state.value

    async def drain(self) -> None:
        """
        Wait until the consumer has caught up (backpressure), when there is one.

        Emitters never block; a streaming transport (`ambient_runs.stream`) makes
        this wait while its buffer is full. Without one it returns at once.
        """
        await self._accessed_run().pipeline.drain()

    # ------------------------------------------------------------------ cancellation

    @property
    def is_cancelled(self) -> bool:
        """Whether the run has been cancelled (`Run.cancel`)."""
        return self._accessed_run()._cancellation.cancelled

    def check_cancelled(self) -> None:
        """
        Raise `RunCancelledError` once the run is cancelled.

        Left to propagate, it ends the run with a ``cancelled`` outcome.
        """
        run = self._accessed_run()
        if run._cancellation.cancelled:
            msg = f"run {run.input.run_id!r} was cancelled"
            raise RunCancelledError(msg)

    async def cancelled(self) -> None:
        """
        Wait until the run is cancelled.

        The waiter is the run's only while it waits: returning, or being
        cancelled itself, removes it, so any number of calls keep the run's
        memory flat.
        """
        await self._accessed_run()._cancellation.wait()

    async def until_cancelled(self, awaitable: Awaitable[T]) -> T | None:
        """
        Race *awaitable* against cancellation; return its result, or None if cancellation won.

        The way to make a long model call interruptible. The loser is cancelled.
        """
        return await self._accessed_run()._cancellation.race(awaitable)
