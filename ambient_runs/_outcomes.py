"""
Outcomes: how a run or a subagent ended, read off the exception that ended it.

`Interrupted` (the exception that pauses a run), and the pure helpers every
scope's exit uses: the interrupts an exception carries, whether it is a
cancellation, the error code it names, the JSON form of a return value, and
`safely`, which runs a closing step on an exception path without masking it.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeAlias

import attrs

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._wire import json_form, refuse_reserved_metadata
from ambient_runs.errors import AgentError, ResultWarning, RunCancelledError, warn_at_user

__all__ = (
    "DEFAULT_POLICY",
    "GENERIC_MESSAGE",
    "ErrorDescriber",
    "ErrorPolicy",
    "ExcInfo",
    "FrontendToolCalled",
    "Interrupted",
    "Resumption",
    "code_of",
    "frontend_calls_of",
    "interrupt",
    "interrupts_of",
    "is_cancellation",
    "register_suspending",
    "result_form",
    "result_json",
    "safely",
    "subagent_ending",
    "text_of",
    "wire_text",
)

ExcInfo: TypeAlias = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
"""
What ``__exit__`` and ``__aexit__`` receive: ``def __exit__(self, *exc_info: *ExcInfo)``.

One spelling for every context manager of the package (runs, scopes, handles);
``exc_info[1]`` is the exception, None on a normal exit.
"""

_log = logging.getLogger("ambient_runs")


class Interrupted(Exception):
    """
    Raise to pause the run on *interrupts* the client must answer.

    Leaving a subagent, it finishes the invocation as ``suspended`` (naming the
    interrupts raised in it); leaving the run, it ends the run with an
    ``interrupt`` outcome carrying every interrupt. An interrupt without a
    ``subagent_run_id`` gets the ambient subagent's id when raised.

    Args:
        interrupts: One or more `Interrupt` records (at least one).

    .. versionadded:: 0.1.0
    """

    def __init__(self, *interrupts: ev.Interrupt | Sequence[ev.Interrupt]) -> None:
        flat: list[ev.Interrupt] = []
        for item in interrupts:
            flat.extend([item] if isinstance(item, ev.Interrupt) else item)
        if not flat:
            msg = "Interrupted needs at least one Interrupt"
            raise ValueError(msg)
        frame = _scopes.current()
        owner = frame.owner if frame is not None else None
        if owner is not None:
            flat = [
                i if i.subagent_run_id is not None else attrs.evolve(i, subagent_run_id=owner)
                for i in flat
            ]
        self.interrupts: tuple[ev.Interrupt, ...] = tuple(flat)
        super().__init__(", ".join(i.id for i in flat))


class FrontendToolCalled(Exception):
    """
    Raised by `call_frontend_tool`: the run now waits for the client to run a tool.

    A control-flow exception, as `Interrupted` is: let it propagate. Leaving a
    subagent, it finishes the invocation (``SUBAGENT_FINISHED``, success: the
    work asked of it is done, and the client's answer arrives in a later run);
    leaving the run, it ends the run as success with
    ``outcome.pendingToolCallIds`` naming every frontend call the run made. The
    call was recorded when it was sent, so user code that catches this still
    ends the run with the call pending.

    Attributes:
        tool_call_id: The call made (``TOOL_CALL_START.toolCallId``).
        tool_name: The client's tool it calls.

    .. versionadded:: 0.1.0
    """

    def __init__(self, tool_call_id: str, tool_name: str) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        super().__init__(
            f"frontend tool {tool_name!r} called ({tool_call_id}); the client runs it"
        )


def frontend_calls_of(exc: BaseException) -> tuple[str, ...] | None:
    """The frontend call ids *exc* carries: a `FrontendToolCalled`, or a group of only those."""
    if isinstance(exc, FrontendToolCalled):
        return (exc.tool_call_id,)
    if isinstance(exc, BaseExceptionGroup):
        found: list[str] = []
        for sub in exc.exceptions:
            inner = frontend_calls_of(sub)
            if inner is None:
                return None
            found.extend(inner)
        return tuple(found)
    return None


_ID_SEPARATOR = "~"


def _quote(text: str) -> str:
    """Percent-encode *text* so that it holds no `_ID_SEPARATOR` (``~`` is unreserved)."""
    return urllib.parse.quote(text, safe="").replace("~", "%7E")


def interrupt(
    reason: str,
    *,
    message: str | None = None,
    tool_call_id: str | None = None,
    response_schema: dict[str, Any] | None = None,
    expires_at: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> ev.Interrupt:
    """
    Return a new `Interrupt` for the ambient scope, ready for ``raise Interrupted(...)``.

    Its id is fresh (``<run id>-int-<n>``) and, inside a subagent, also names the
    invocation: ``<run id>-int-<n>~<subagent id>~<subagent name>`` (the last two
    percent-encoded). The client sends that id back in ``resume``, so
    `Run.resume_for` tells any process, with no memory of this run, which
    invocation to continue and under which id.

    Raises:
        NoActiveRunError: No run is ambient.

    .. versionadded:: 0.1.0
    """
    frame = _scopes.require("interrupt")
    refuse_reserved_metadata(metadata, "Interrupt")
    base = frame.pipeline.new_interrupt_id()
    owner = frame.owner
    host = frame.host
    name = host.name if host is not None else None
    if owner is not None and isinstance(name, str):
        base = _ID_SEPARATOR.join((base, _quote(owner), _quote(name)))
    return ev.Interrupt(
        id=base,
        reason=reason,
        message=message,
        tool_call_id=tool_call_id,
        response_schema=response_schema,
        expires_at=expires_at,
        metadata=metadata,
        subagent_run_id=owner,
    )


@attrs.frozen
class Resumption:
    """
    The client's answer to one interrupt, and the suspended invocation it continues.

    Attributes:
        entry: The `ResumeEntry` as the client sent it.
        subagent_run_id: The suspended invocation's id, when the interrupt was
            made by `interrupt` inside a subagent (else None).
        subagent_name: That invocation's subagent name (else None).

    .. versionadded:: 0.1.0
    """

    entry: ev.ResumeEntry
    subagent_run_id: str | None = None
    subagent_name: str | None = None

    @classmethod
    def of(cls, entry: ev.ResumeEntry) -> Resumption:
        """Read the invocation off *entry*'s interrupt id (see `interrupt`)."""
        parts = entry.interrupt_id.rsplit(_ID_SEPARATOR, 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            return cls(entry)
        unquote = urllib.parse.unquote
        return cls(entry, unquote(parts[1]), unquote(parts[2]))

    @property
    def interrupt_id(self) -> str:
        """The interrupt answered."""
        return self.entry.interrupt_id

    @property
    def status(self) -> str:
        """``"resolved"`` or ``"cancelled"``."""
        return self.entry.status

    @property
    def payload(self) -> Any:
        """The answer itself (JSON)."""
        return self.entry.payload

    @property
    def metadata(self) -> dict[str, Any] | None:
        """The metadata the client sent back with the answer."""
        return self.entry.metadata


def safely(fn: Callable[..., None], *args: Any) -> None:
    """Run a scope's closing step on an exception path: never mask the user's exception."""
    try:
        fn(*args)
    except Exception:
        _log.debug("closing a scope after an exception failed", exc_info=True)


def is_cancellation(exc: BaseException) -> bool:
    """
    Whether *exc* cancels: asyncio's `CancelledError`, trio's ``Cancelled``, or
    `Run.check_cancelled`'s error. trio is recognised by name, never imported.
    """
    if isinstance(exc, asyncio.CancelledError | RunCancelledError):
        return True
    kind = type(exc)
    return kind.__name__ == "Cancelled" and kind.__module__.partition(".")[0] == "trio"


def code_of(exc: BaseException) -> str:
    """The error code *exc* names: its ``code`` attribute (a string), or its class name."""
    try:
        code = getattr(exc, "code", None)
    except Exception:  # a property that raises: the class name still names it
        return type(exc).__name__
    return code if isinstance(code, str) else type(exc).__name__


def text_of(exc: BaseException) -> str:
    """
    ``str(exc)``, or the class name when that is empty or ``__str__`` itself raises.

    An exception whose ``__str__`` raises must still end its run or subagent with
    the error event: asking for its text never raises.
    """
    try:
        text = str(exc)
    except Exception:
        return type(exc).__name__
    return text or type(exc).__name__


#: A framework's own pause exceptions, read as interrupts (`register_suspending`).
_SUSPENDING: dict[type[BaseException], Callable[[BaseException], tuple[ev.Interrupt, ...]]] = {}


def register_suspending(
    kind: type[BaseException], read: Callable[[BaseException], tuple[ev.Interrupt, ...]]
) -> None:
    """
    Make *kind* pause a scope as `Interrupted` does, on the interrupts ``read(exc)`` returns.

    For adapters whose framework pauses by raising its own exception through user
    code (LangGraph's ``GraphInterrupt``): a decorated subagent it leaves ends
    ``suspended`` instead of failing. *read* returning no interrupts leaves the
    exception an error.
    """
    _SUSPENDING[kind] = read


def interrupts_of(exc: BaseException) -> tuple[ev.Interrupt, ...] | None:
    """
    The interrupts *exc* carries, if it is `Interrupted` or a group of only those.

    A group may also hold `FrontendToolCalled` (a sibling task called a frontend
    tool): the interrupts win, since an ``interrupt`` outcome cannot carry
    pending tool calls; a group of frontend calls alone carries no interrupts.
    """
    if isinstance(exc, Interrupted):
        return exc.interrupts
    if _SUSPENDING:
        for kind, read in _SUSPENDING.items():
            if isinstance(exc, kind):
                return read(exc) or None
    if isinstance(exc, BaseExceptionGroup):
        found: list[ev.Interrupt] = []
        for sub in exc.exceptions:
            if isinstance(sub, FrontendToolCalled):
                continue
            inner = interrupts_of(sub)
            if inner is None:
                return None
            found.extend(inner)
        return tuple(found) or None
    return None


#: What a client reads of an unexpected exception, unless the run exposes errors.
GENERIC_MESSAGE = "The agent failed; the server's log has the details."

ErrorDescriber = Callable[[BaseException], "tuple[str, str | None] | None"]
"""Maps an exception to the ``(message, code)`` its client sees; None lets the default apply."""


@attrs.frozen
class ErrorPolicy:
    """
    What a client learns of an exception that ends a run or a subagent.

    The one path of every ``RUN_ERROR`` and ``SUBAGENT_ERROR`` made from an
    exception: a run's end, a subagent's end, `stream`'s fallback, `sse.frames`'
    closing frame, `relay`'s abandoned subagent. In order:

    1. *describe* (`Run`'s ``describe_error=``), when given, is asked first: the
       ``(message, code)`` it returns is used; None, a hook that raises (logged)
       or returns something else falls through;
    2. an `AgentError` shows its own message and code: what an agent raises on
       purpose to tell its client something;
    3. any other exception shows its text only with *expose* (``expose_errors=True``,
       for development), `GENERIC_MESSAGE` otherwise. Its code is always kept:
       the exception's ``code`` attribute when that is a string, else its class
       name (``"TimeoutError"``), enough to branch on and nothing of the text.

    Messages are made safe for the wire (`wire_text`), and an exception whose
    ``__str__`` raises shows its class name (`text_of`).
    """

    expose: bool = False
    describe: ErrorDescriber | None = attrs.field(default=None, repr=False)

    def report(self, exc: BaseException) -> tuple[str, str | None]:
        """The ``(message, code)`` that *exc* ends a run or a subagent with."""
        describe = self.describe
        if describe is not None:
            described = _described(describe, exc)
            if described is not None:
                return described
        if isinstance(exc, AgentError):
            return wire_text(exc.message), exc.code
        if self.expose:
            return wire_text(text_of(exc)), code_of(exc)
        return GENERIC_MESSAGE, code_of(exc)


#: The policy of a run made without one, and of a stream with no run behind it.
DEFAULT_POLICY = ErrorPolicy()


def _described(describe: ErrorDescriber, exc: BaseException) -> tuple[str, str | None] | None:
    try:
        described = describe(exc)
    except Exception:
        _log.error("describe_error raised; the default error policy applies", exc_info=True)
        return None
    if described is None:
        return None
    if (
        isinstance(described, tuple)
        and len(described) == 2
        and isinstance(described[0], str)
        and (described[1] is None or isinstance(described[1], str))
    ):
        return wire_text(described[0]), described[1]
    _log.error(
        "describe_error returned %r, not a (message, code) pair of strings; the default applies",
        described,
    )
    return None


def wire_text(text: str) -> str:
    """*text* with any lone surrogate (which UTF-8 cannot encode) replaced by ``?``."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def subagent_ending(
    sid: str, exc: BaseException, policy: ErrorPolicy = DEFAULT_POLICY
) -> ev.BaseEvent:
    """
    The event that ends subagent invocation *sid* whose body raised *exc*.

    `Interrupted` suspends it (naming the interrupts raised in it); a
    `FrontendToolCalled` (its work now waits on the client's tool), a generator
    closed early or ``SystemExit``/``KeyboardInterrupt`` finishes it (the
    latter named in metadata); a cancellation or any other exception fails it,
    with code ``cancelled``, or with what *policy* reports of *exc*.
    """
    interrupts = interrupts_of(exc)
    if interrupts is not None:
        mine = tuple(i.id for i in interrupts if i.subagent_run_id == sid)
        outcome = ev.SubagentFinishedSuspendedOutcome(interrupt_ids=mine or None)
        return ev.SubagentFinishedEvent(subagent_run_id=sid, outcome=outcome)
    if isinstance(exc, GeneratorExit) or frontend_calls_of(exc) is not None:
        return ev.SubagentFinishedEvent(subagent_run_id=sid)
    if isinstance(exc, SystemExit | KeyboardInterrupt):
        meta = {"ambient_runs": {"exit": type(exc).__name__}}
        return ev.SubagentFinishedEvent(subagent_run_id=sid, metadata=meta)
    if is_cancellation(exc):
        return ev.SubagentErrorEvent(subagent_run_id=sid, message="cancelled", code="cancelled")
    message, code = policy.report(exc)
    return ev.SubagentErrorEvent(subagent_run_id=sid, message=message, code=code)


def result_form(result: Any, name: str) -> Any:
    """
    The JSON form of subagent *name*'s return value, or None (with a `ResultWarning`).

    A value with no JSON form must not fail the invocation that returned it: it
    finishes without a result, and the warning names the bad value's path and the fix.
    """
    if result is None:
        return None
    try:
        return json_form(result)
    except ValueError as error:
        warn_at_user(
            f"subagent {name!r} returned a value with no JSON form, so SUBAGENT_FINISHED carries "
            f"no result ({error}). Return JSON values (dict with str keys, list, str, int, "
            "finite float, bool, None), attrs instances, dataclasses, pydantic models or a type "
            "given register_json_form(): convert that value, or call finish_with() with a JSON "
            "form yourself.",
            ResultWarning,
        )
        return None


def result_json(value: Any) -> Any:
    """
    *value*'s JSON form for a ``result`` field (`json_form`: pydantic models included).

    Raises:
        InvalidEventError: *value* has no JSON form.
    """
    return json_form(value)
