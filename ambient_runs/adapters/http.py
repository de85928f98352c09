"""
A remote AG-UI endpoint, as an attributed subagent: ``await relay(url, input, name="remote")``.

Install with ``pip install 'ambient-runs[http]'`` (httpx).

`relay` POSTs a ``RunAgentInput`` to *url* (``Accept: text/event-stream``, the
body as `ambient_runs.encode_json` writes it), parses the SSE response as it
arrives and replays it through `ambient_runs.relay`: one subagent called
*name*, every remote id namespaced under it, the remote ``RUN_FINISHED.result``
returned. Agents as tools across services, with nothing but HTTP between them.

=========================================  ==========================================
what happens                               what the subagent does
=========================================  ==========================================
the remote run finishes                    ``SUBAGENT_FINISHED`` with its result
the remote run fails (``RUN_ERROR``)       ``SUBAGENT_ERROR``, `RelayError` raised
the remote pauses on interrupts            suspended; `Interrupted` raised (the run
                                           ends with an interrupt outcome)
an HTTP error status (4xx, 5xx)            ``SUBAGENT_ERROR`` code ``http_<status>``
                                           (with ``expose_errors``, the URL and the
                                           body's first 64 KiB in the message)
the endpoint cannot be reached             ``SUBAGENT_ERROR`` code ``unreachable``
the connection breaks, or the stream ends  ``SUBAGENT_ERROR`` code ``truncated``
without a terminal event
a response that is not an event stream     ``SUBAGENT_ERROR`` code ``invalid_stream``
=========================================  ==========================================

**Cancellation, both ways.** When the caller is cancelled (the client of *this*
run went away, or a task was cancelled) or the run is cancelled cooperatively
(`Run.cancel`), the HTTP response is closed: the remote server sees its client
disconnect and cancels its run (an `ambient_runs.asgi.AgentApp` does at once).
The subagent ends with code ``cancelled`` and, for `Run.cancel`, `RunCancelledError`
propagates, so the run finishes with a ``cancelled`` outcome. A remote that
cancels its own run (a ``cancelled`` outcome) fails the subagent with code
``cancelled`` and `RelayError`.

**Resuming.** When the remote pauses, each of its interrupts is kept in the
run's continuation store (`ambient_runs.continuations`) under the namespaced
id the client sees: which relay (*name*), which invocation, and the remote's
own interrupt id. When the ambient run resumes them (with the entries
``buildResumeArray`` builds: ``{interruptId, status, payload}``), the
remote gets its own answers: ``input.resume`` is filled with them (the
remote's ids, from the store; ``status`` and ``payload`` as the client sent
them, its ``metadata`` not forwarded) unless the input already has some, the
remote's part of the conversation (`ambient_runs.relay_messages`) is added to
``input.messages``, and the invocation continues under its old subagent id.
An answer the store cannot continue ends the run with ``RUN_ERROR``
(``interrupt_unknown``, ``interrupt_expired``, ``interrupt_answered``); when
the remote refuses an answer's payload (``interrupt_payload``, its interrupt
kept answerable), the relay keeps its own continuations answerable too.
``input.parentRunId`` names the calling run unless given.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ambient_runs.errors import needs_extra

with needs_extra("ambient_runs.adapters.http", extra="http", needs="httpx", name="httpx"):
    import httpx

import attrs

import ambient_runs as ar
from ambient_runs import Run, RunAgentInput, RunCancelledError
from ambient_runs import events as ev
from ambient_runs._relay import _decode_interrupt_id
from ambient_runs.continuations import Answer, claim, keep
from ambient_runs.errors import InterruptPayloadError

__all__ = ("DEFAULT_TIMEOUT", "relay")

_log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = httpx.Timeout(10.0, read=300.0)
"""
10 s to connect, write and get a connection; 300 s of silence while reading.

An agent that thinks longer between two events than the read timeout should
send keep-alive comments (`ambient_runs.asgi.AgentApp` ``keep_alive=``).

.. versionadded:: 0.1.0
"""

#: How much of an error response's body the subagent's error message quotes.
_ERROR_BODY = 64 * 1024


async def relay(
    url: str,
    input: RunAgentInput | Mapping[str, Any],
    *,
    name: str,
    headers: Mapping[str, str] | None = None,
    description: str | None = None,
    client: httpx.AsyncClient | None = None,
    timeouts: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
) -> Any:
    """
    Run the agent at *url* on *input* and relay its stream as a subagent called *name*.

    Args:
        url: The AG-UI endpoint (a POST route answering ``text/event-stream``).
        input: The remote run's ``RunAgentInput`` (or its wire form): its own
            ``threadId`` and ``runId``, the messages it should see.
        name: The subagent's name.
        headers: Extra request headers (authentication, tracing).
        description: The subagent's description, for display.
        client: An ``httpx.AsyncClient`` to send through (connection pooling,
            transports, proxies); a new one per call by default.
        timeouts: The request's timeouts, as httpx takes them (see `DEFAULT_TIMEOUT`);
            with *client* and no *timeouts*, the client's own.

    Returns:
        The remote ``RUN_FINISHED.result`` (None without one).

    Raises:
        RelayError: The remote run failed, or the request or its stream did
            (``http_<status>``, ``unreachable``, ``truncated``,
            ``invalid_stream``); the subagent has ended with ``SUBAGENT_ERROR``
            and the run goes on.
        Interrupted: The remote run paused on interrupts.
        InterruptError: The run answers an interrupt the continuation store
            cannot continue (``interrupt_unknown``, ``interrupt_expired``,
            ``interrupt_answered``).
        RunCancelledError: The run was cancelled (`Run.cancel`) meanwhile.
        NoActiveRunError: No run is ambient.
        InvalidInputError: *input* is a dict that is not a ``RunAgentInput``.

    .. versionadded:: 0.1.0
    """
    run = ar.current_run()
    remote = input if isinstance(input, RunAgentInput) else RunAgentInput.from_wire(input)
    answers = await _claimed(run, name)
    sid = answers[0].data["subagentRunId"] if answers else None
    remote = _resumed(remote, name, run, answers, sid)
    request_headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        **(headers or {}),
    }
    body = ar.encode_json(remote)
    stream = _stream(client, url, body, request_headers, timeouts, run)
    try:
        return await ar.relay(stream, name=name, description=description, id=sid)
    except ar.Interrupted as paused:
        kept = [await keep(run, i, _continuation(name, i)) for i in paused.interrupts]
        raise ar.Interrupted(kept) from None
    except ar.RelayError as failed:
        if failed.code == InterruptPayloadError.CODE:
            # The remote refused an answer and kept its interrupt answerable: so do we.
            for answer in answers:
                await run.continuations.put(answer.interrupt_id, answer.data)
        raise


ADAPTER = "relay"


def _continuation(name: str, interrupt: ev.Interrupt) -> dict[str, Any]:
    """What the server keeps of a relayed interrupt: which relay, invocation and remote id."""
    relayed, sid, foreign = _decode_interrupt_id(interrupt.id) or (name, "", interrupt.id)
    return {"adapter": ADAPTER, "name": relayed, "subagentRunId": sid, "foreign": foreign}


async def _claimed(run: Run, name: str) -> list[Answer]:
    """The answers to one suspended invocation of the relay called *name*, from the store."""

    def select(free: list[Answer]) -> list[Answer]:
        ours = [a for a in free if a.data.get("adapter") == ADAPTER and a.data.get("name") == name]
        first = min((a.data["subagentRunId"] for a in ours), default=None)
        return [a for a in ours if a.data["subagentRunId"] == first]

    if not run.resume:
        return []
    return await claim(run, select)


def _resumed(
    remote: RunAgentInput, name: str, run: Run, answers: list[Answer], sid: str | None
) -> RunAgentInput:
    """*remote* with what a resumed invocation needs: its answers, its history, its parent."""
    changes: dict[str, Any] = {}
    if remote.parent_run_id is None:
        changes["parent_run_id"] = run.run_id
    if answers and not remote.resume:
        changes["resume"] = tuple(
            ev.ResumeEntry(
                interrupt_id=a.data["foreign"], status=a.entry.status, payload=a.entry.payload
            )
            for a in answers
        )
    history = ar.relay_messages(name, id=sid) if sid is not None else ()
    if history:
        known = {m.id for m in remote.messages}
        changes["messages"] = (*remote.messages, *(m for m in history if m.id not in known))
    return attrs.evolve(remote, **changes) if changes else remote


def _run_error(message: str, code: str) -> dict[str, Any]:
    return {"type": "RUN_ERROR", "message": message, "code": code}


async def _stream(
    client: httpx.AsyncClient | None,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeouts: httpx.Timeout | float | None,
    run: Run,
) -> AsyncIterator[Any]:
    """The response's bytes as they arrive; failures as a RUN_ERROR the relay reports."""
    owned = client is None
    http = httpx.AsyncClient(timeout=timeouts) if client is None else client
    # A client of the caller's keeps its own timeouts unless some were asked for.
    chosen: Any = (
        httpx.USE_CLIENT_DEFAULT
        if client is not None and timeouts is DEFAULT_TIMEOUT
        else timeouts
    )
    watcher: asyncio.Task[None] | None = None
    responded = False
    try:
        try:
            async with http.stream(
                "POST", url, content=body, headers=headers, timeout=chosen
            ) as response:
                responded = True
                watcher = asyncio.create_task(_close_when_cancelled(run, response))
                if response.status_code >= 300:
                    text = await _some_of(response)
                    status = response.status_code
                    yield _run_error(
                        _told(
                            run,
                            f"HTTP {status} from the remote agent",
                            f"HTTP {status} from {url}: {text}",
                        ),
                        f"http_{status}",
                    )
                    return
                kind = response.headers.get("content-type", "")
                if kind.split(";")[0].strip().lower() != "text/event-stream":
                    answered = f"answered {kind or 'no content type'}, not text/event-stream"
                    yield _run_error(
                        _told(run, f"the remote agent {answered}", f"{url} {answered}"),
                        "invalid_stream",
                    )
                    return
                async for chunk in response.aiter_bytes():
                    yield chunk
        except (httpx.HTTPError, httpx.StreamError) as exc:
            if run.is_cancelled:
                raise _cancelled(run) from None
            what = str(exc) or type(exc).__name__
            kind = type(exc).__name__
            if not responded:
                public, detail = f"cannot reach the remote agent ({kind})", f"cannot reach {url}"
            else:
                public = f"the connection to the remote agent broke ({kind})"
                detail = f"the connection to {url} broke"
            yield _run_error(
                _told(run, public, f"{detail}: {what}"),
                "unreachable" if not responded else "truncated",
            )
            return
        if run.is_cancelled:
            raise _cancelled(run)
    finally:
        if watcher is not None:
            watcher.cancel()
        if owned:
            await asyncio.shield(http.aclose())


def _told(run: Run, public: str, detail: str) -> str:
    """
    What the client reads of a failure to relay: *detail* only with ``expose_errors``.

    The detail (the endpoint's URL, the transport's exception text, an error
    body) is what the error policy keeps on the server: it is logged here at
    WARNING, and the subagent's ``SUBAGENT_ERROR`` and `RelayError` carry
    *public* (the status, the content type, the exception's class) instead.
    """
    _log.warning("relay failed: %s", detail)
    return detail if run.error_policy.expose else public


def _cancelled(run: Run) -> RunCancelledError:
    return RunCancelledError(f"run {run.run_id!r} was cancelled")


async def _close_when_cancelled(run: Run, response: httpx.Response) -> None:
    """Close *response* once the run is cancelled: the remote sees its client go."""
    await run.cancelled()
    await response.aclose()


async def _some_of(response: httpx.Response) -> str:
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= _ERROR_BODY:
            break
    return bytes(data[:_ERROR_BODY]).decode("utf-8", "replace").strip() or "(no body)"
