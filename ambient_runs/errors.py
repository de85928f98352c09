"""
The errors ambient_runs raises.

Every error subclasses `AmbientRunsError` *and* the builtin it specialises, so a
plain ``except ValueError`` or ``except LookupError`` still catches it::

    AmbientRunsError
    ├── AgentError (RuntimeError)           raised by an agent to tell its client why it failed
    │   └── InterruptError (+ LookupError)  a resume entry the server cannot continue from
    │       ├── InterruptUnknownError       ``interrupt_unknown``: never issued (or forgotten)
    │       ├── InterruptExpiredError       ``interrupt_expired``: answered too late
    │       ├── InterruptAnsweredError      ``interrupt_answered``: answered already
    │       ├── InterruptMismatchError      ``interrupt_mismatch``: the agent asks otherwise now
    │       └── InterruptPayloadError       ``interrupt_payload``: an answer off its responseSchema
    ├── InvalidInputError (ValueError)      malformed RunAgentInput or wire event
    │   └── InvalidJSONError                a request body that is not JSON at all
    ├── InvalidEventError (ValueError)      an event that cannot be put on the wire
    ├── ProtocolError (ValueError)          an event that breaks AG-UI 1.0 sequencing
    ├── NoActiveRunError (LookupError)      an emitter called outside any run
    ├── UnknownToolError (LookupError)      a frontend call to a tool the client did not offer
    ├── HandleClosedError (RuntimeError)    a continuation on a handle already ended
    ├── MissingExtraError (ImportError)     an optional integration imported without its extra
    ├── RelayError (RuntimeError)           a relayed agent's run failed, or its stream broke
    └── RunCancelledError (RuntimeError)    raised by Run.check_cancelled() once cancelled

    AmbientRunsWarning (UserWarning)
    ├── LeftOpenWarning     a scope ended with handles open; ambient_runs closed them
    ├── HandleWarning       a handle ended (or entered) twice; the second call did nothing
    └── ResultWarning       a subagent's return value has no JSON form
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from types import FrameType

__all__ = (
    "AgentError",
    "AmbientRunsError",
    "AmbientRunsWarning",
    "HandleClosedError",
    "HandleWarning",
    "InvalidEventError",
    "InvalidInputError",
    "InterruptAnsweredError",
    "InterruptError",
    "InterruptExpiredError",
    "InterruptMismatchError",
    "InterruptPayloadError",
    "InterruptUnknownError",
    "InvalidJSONError",
    "LeftOpenWarning",
    "MessagesNotRecordedError",
    "MissingExtraError",
    "NoActiveRunError",
    "ProtocolError",
    "RelayError",
    "ResultWarning",
    "RunCancelledError",
    "UnknownToolError",
)


class AmbientRunsError(Exception):
    """
    Base class of every error ambient_runs raises on purpose.

    .. versionadded:: 0.1.0
    """


class AgentError(AmbientRunsError, RuntimeError):
    """
    Raise to end the run (or the subagent it leaves) with *message* shown to the client.

    An unexpected exception reaches the client as a generic message by default:
    its text may hold anything (a password in a connection string, a file path).
    An ``AgentError`` is the agent telling the client something on purpose, so
    ``RUN_ERROR`` (or ``SUBAGENT_ERROR``) carries its *message* and *code* as
    they are, whatever the run's *expose_errors* says::

        raise ar.AgentError("The search service is down; try again later", code="search_down")

    Args:
        message: What the client shows.
        code: A machine-readable code for the client to branch on.

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str, *, code: str = "agent_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class InterruptError(AgentError, LookupError):
    """
    A ``resume`` entry answers an interrupt the server cannot continue from.

    The run ends with ``RUN_ERROR`` carrying the message (the interrupt id the
    client sent, and what to do) and the subclass's *code*; never with a
    silent new turn. An `AgentError`, so the client reads the message whatever
    the run's *expose_errors* says, and a `LookupError`: the id was looked up
    in the continuation store (`ambient_runs.continuations`) and not found
    usable there.

    Attributes:
        interrupt_id: The id the client answered.

    .. versionadded:: 0.1.0
    """

    #: The ``RUN_ERROR`` code (each subclass has its own).
    CODE = "interrupt_error"

    def __init__(self, interrupt_id: str, why: str) -> None:
        super().__init__(f"interrupt {interrupt_id!r} {why}", code=self.CODE)
        self.interrupt_id = interrupt_id


class InterruptUnknownError(InterruptError):
    """
    ``interrupt_unknown``: the continuation store never held this interrupt, or forgot it.

    A forged or mistyped id, an id from another deployment (another store), or
    one older than the store keeps expired and answered interrupts. Start a new
    turn without ``resume``.

    .. versionadded:: 0.1.0
    """

    CODE = "interrupt_unknown"


class InterruptExpiredError(InterruptError):
    """
    ``interrupt_expired``: the interrupt's time to answer (its ``expiresAt``) has passed.

    Only a ``cancelled`` answer is still taken (the official client allows no
    other); start a new turn to ask again.

    .. versionadded:: 0.1.0
    """

    CODE = "interrupt_expired"


class InterruptAnsweredError(InterruptError):
    """
    ``interrupt_answered``: the interrupt was answered already (each is answered once).

    A retried request, a second tab, or a replayed ``resume``: the first answer
    continued the run; read that run's outcome instead of answering again.

    .. versionadded:: 0.1.0
    """

    CODE = "interrupt_answered"


class InterruptMismatchError(InterruptError):
    """
    ``interrupt_mismatch``: the agent's call that would continue the interrupt asks otherwise now.

    The server's code called the framework with another prompt (or under
    another name) than the call that paused, so continuing would answer a
    question it no longer asks. The answer is used up; start a new turn.

    .. versionadded:: 0.1.0
    """

    CODE = "interrupt_mismatch"


class InterruptPayloadError(InterruptError):
    """
    ``interrupt_payload``: an answer's ``payload`` is off the interrupt's ``responseSchema``.

    An approval is answered ``{"approved": true|false, "message"?: str,
    "overrideArgs"?: object}`` (``overrideArgs`` only where the schema offers
    it); anything else is refused rather than guessed at, so a malformed answer
    never runs a call that needs approval. The interrupt stays answerable:
    send a corrected answer.

    .. versionadded:: 0.1.0
    """

    CODE = "interrupt_payload"


class InvalidInputError(AmbientRunsError, ValueError):
    """
    Input (a ``RunAgentInput`` body or a wire event) does not fit the AG-UI 1.0 schema.

    *problems* lists every bad field as ``"<json path>: <what was expected>"``,
    all at once, so a client can fix its request in one go.

    .. versionadded:: 0.1.0
    """

    def __init__(self, what: str, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{what}:\n{listing}" if listing else what)


class InvalidJSONError(InvalidInputError):
    """
    A request body is not UTF-8 JSON (or holds NaN, Infinity or a lone surrogate).

    A transport answers it with 400 rather than 422.

    .. versionadded:: 0.1.0
    """


class InvalidEventError(AmbientRunsError, ValueError):
    """
    An event holds a value that AG-UI forbids or that has no JSON form.

    Raised by the event constructors (a float timestamp, a ``tool`` text role, an
    interrupt outcome with no interrupts, …) and by the encoder (``NaN``, a lone
    surrogate, an object that is not JSON). The message names the field.

    .. versionadded:: 0.1.0
    """


class ProtocolError(AmbientRunsError, ValueError):
    """
    An event would break the AG-UI 1.0 sequence rules; it was not sent.

    *rule* is the short name of the rule, *violations* every violation found.

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str, *, rule: str = "", violations: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.rule = rule
        self.violations: tuple[object, ...] = tuple(violations)


class NoActiveRunError(AmbientRunsError, LookupError):
    """
    An emitter such as `ambient_runs.say` was called outside any run.

    The message says how to call it inside one; raised in a thread other than
    the main one, it also names the helpers that carry the run's context into
    threads (`ContextThreadPoolExecutor`, `run_in_executor`, `Thread`, `wrap`),
    since a plain pool or ``loop.run_in_executor`` is the usual cause.

    .. versionadded:: 0.1.0
    """


class UnknownToolError(AmbientRunsError, LookupError):
    """
    A frontend tool call named a tool the client did not offer in ``input.tools``.

    The client can only run the tools it sent with the request (`Run.tools`);
    the message lists them, and says how to call a tool of your own instead.

    .. versionadded:: 0.1.0
    """


class HandleClosedError(AmbientRunsError, RuntimeError):
    """
    Content was sent through a message, reasoning or tool-call handle after it ended.

    .. versionadded:: 0.1.0
    """


class MessagesNotRecordedError(AmbientRunsError, RuntimeError):
    """
    `publish_messages` was called on a run that records no messages.

    A run records its messages with ``record_messages=True`` (off by default)
    or under ``AgentApp(threads=...)``; without, it keeps no history of its own
    messages, and a ``MESSAGES_SNAPSHOT`` of only the messages before it would
    make the client drop the run's.

    .. versionadded:: 0.1.0
    """


class MissingExtraError(AmbientRunsError, ImportError):
    """
    An optional integration was imported without the extra that installs what it needs.

    Raised by importing ``ambient_runs.adapters.*`` or ``ambient_runs.stores.redis``
    when their third-party package is absent; the message names the extra to
    install. ``name`` is the missing top-level module, as for any ImportError.

    .. versionadded:: 0.1.0
    """

    def __init__(self, *, module: str, needs: str, extra: str, name: str) -> None:
        super().__init__(
            f"{module} needs {needs}, which is not installed: pip install 'ambient-runs[{extra}]'",
            name=name,
        )
        self.extra = extra


class RelayError(AmbientRunsError, RuntimeError):
    """
    The agent `ambient_runs.relay` replayed did not finish: its run failed or its stream broke.

    The relayed subagent has already ended with ``SUBAGENT_ERROR`` (same message
    and *code*), and the run goes on: catch the error around ``relay()`` to
    recover, or let it propagate to fail the run.

    Attributes:
        name: The relayed subagent's name.
        subagent_run_id: Its invocation id.
        code: The relayed ``RUN_ERROR``'s code, or ours: ``truncated`` (the stream
            ended without a terminal event), ``invalid_stream`` (an event that is
            not valid AG-UI 1.0), ``cancelled`` (the relayed run was cancelled).
        reason: The relayed error message, or what was wrong with the stream.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, reason: str, *, name: str, subagent_run_id: str, code: str | None = None
    ) -> None:
        self.name = name
        self.subagent_run_id = subagent_run_id
        self.reason = reason
        self.code = code
        shown = f" (code {code!r})" if code else ""
        super().__init__(
            f"relayed agent {name!r} ({subagent_run_id}) failed{shown}: {reason}. Its subagent "
            "ended with SUBAGENT_ERROR and the run goes on: catch RelayError around relay() to "
            "recover, or let it propagate to fail the run."
        )


class RunCancelledError(AmbientRunsError, RuntimeError):
    """
    Raised by `Run.check_cancelled` once the run has been cancelled.

    Leaving the run's ``with`` block with it ends the run with a ``cancelled``
    outcome, and the error goes no further.

    .. versionadded:: 0.1.0
    """


class AmbientRunsWarning(UserWarning):
    """
    Base class of the warnings ambient_runs issues.

    .. versionadded:: 0.1.0
    """


class LeftOpenWarning(AmbientRunsWarning):
    """
    A scope or run ended with a message, tool call, step or subagent still open.

    ambient_runs closed it (end events in reverse order of opening) so the
    stream stays valid. The warning names what was left open (its kind, and
    its name and id: ``tool call 'search' (r-tool-1)``), says how to end it,
    and is attributed to the user's line, not to the library's.

    .. versionadded:: 0.1.0
    """


class HandleWarning(AmbientRunsWarning):
    """
    A handle was ended (or a subagent entered) a second time; the call did nothing.

    .. versionadded:: 0.1.0
    """


class ResultWarning(AmbientRunsWarning):
    """
    A decorated subagent returned a value with no JSON form; no result was sent.

    The message names the first part JSON cannot hold (``result['sources'][1]
    is an Opaque``) and the fix, and is attributed to the user's line.

    .. versionadded:: 0.1.0
    """


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_user(message: str, category: type[Warning]) -> None:
    """
    Issue *category* with *message*, attributed to the first frame outside ambient_runs.

    A fixed ``stacklevel`` points at the library whenever the path to the
    warning is one call longer or shorter (a decorator, a ``with`` block, the
    run's end); walking out of the package's own frames (generated code
    included) always lands on the user's line.
    """
    frame: FrameType | None = sys._getframe(0)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE)
        or frame.f_code.co_filename.startswith("<ambient_runs")
    ):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


@contextlib.contextmanager
def needs_extra(module: str, *, extra: str, needs: str, name: str) -> Iterator[None]:
    """
    Around an optional module's third-party imports: an ImportError becomes `MissingExtraError`.

    *module* needs *needs*, which *extra* installs; *name* is the missing top-level module.
    """
    try:
        yield
    except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
        raise MissingExtraError(module=module, needs=needs, extra=extra, name=name) from exc
