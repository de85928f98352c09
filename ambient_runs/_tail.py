"""
``python -m ambient_runs tail URL``: follow a served run in the terminal, as a tree.

Two ways in, told apart by the URL:

- ``…/threads/<threadId>/runs/<runId>`` (an `AgentApp` with a store): *join*
  the run, stored or still running: what happened so far, folded, then the
  rest live; with ``--replay``, every event from the first (``?after=0``);
- the endpoint itself, with ``--message TEXT``: start a run (POST a
  `RunAgentInput` holding that user message, on ``--thread`` or a new thread)
  and follow it.

Only the standard library speaks HTTP here (no extra needed). Each event goes
to `ambient_runs.console.TreePrinter`: colour on a terminal unless NO_COLOR,
subagent ids as on the wire. The exit status is 0 when the run finished (its
outcome printed: success, interrupts to answer, calls pending), 1 when it
failed, the stream broke or the server refused.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import IO, TextIO

from ambient_runs import events as ev
from ambient_runs._wire import encode_json, from_wire
from ambient_runs.console import TreePrinter
from ambient_runs.errors import InvalidInputError

__all__ = ("TailUsageError", "run_url", "tail")

_RUN_PATH = re.compile(r"/threads/([^/]+)/runs/([^/]+?)/?$")


class TailUsageError(ValueError):
    """The URL names no run and no ``--message`` starts one; the message says what to give."""


def run_url(url: str) -> tuple[str, str] | None:
    """``(thread id, run id)`` when *url* names a run (``…/threads/T/runs/R``), else None."""
    path = urllib.parse.urlsplit(url).path
    match = _RUN_PATH.search(path)
    if match is None:
        return None
    return urllib.parse.unquote(match[1]), urllib.parse.unquote(match[2])


def _request(
    url: str, message: str | None, thread_id: str | None, replay: bool
) -> urllib.request.Request:
    if run_url(url) is not None:
        if message is not None:
            msg = "--message starts a run on an endpoint; this URL names a stored run: drop one"
            raise TailUsageError(msg)
        if replay:
            parts = urllib.parse.urlsplit(url)
            query = "&".join(q for q in (parts.query, "after=0") if q)
            url = urllib.parse.urlunsplit(parts._replace(query=query))
        return urllib.request.Request(url, headers={"accept": "text/event-stream"})
    if message is None:
        msg = (
            f"{url} names no run: give the run's URL (…/threads/<threadId>/runs/<runId>, "
            "an app with a store) or --message TEXT to start one on this endpoint"
        )
        raise TailUsageError(msg)
    if replay:
        msg = "--replay applies to a stored run's URL (…/threads/<threadId>/runs/<runId>)"
        raise TailUsageError(msg)
    run_input = ev.RunAgentInput(
        thread_id=thread_id or str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        messages=(ev.UserMessage(id=str(uuid.uuid4()), content=message),),
    )
    return urllib.request.Request(
        url,
        data=encode_json(run_input),
        method="POST",
        headers={"content-type": "application/json", "accept": "text/event-stream"},
    )


def _events(body: IO[bytes]) -> Iterator[ev.BaseEvent | str]:
    """The events of an SSE body, as they arrive; a frame that is no event: its problem."""
    data: list[bytes] = []
    for raw in body:
        line = raw.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
        elif not line and data:
            text = b"\n".join(data)
            data = []
            try:
                yield from_wire(json.loads(text))
            except (ValueError, InvalidInputError) as error:
                yield f"not an AG-UI event ({error}): {text[:120]!r}"


def tail(
    url: str,
    *,
    message: str | None = None,
    thread_id: str | None = None,
    replay: bool = False,
    out: TextIO | None = None,
    timeout: float | None = None,
) -> int:
    """
    Follow the run at *url* (or start one with *message*) and print it as a tree.

    Returns:
        0 when the run finished, 1 when it failed, broke off or was refused.

    Raises:
        TailUsageError: The URL and the options do not name one run.
    """
    out = sys.stdout if out is None else out
    request = _request(url, message, thread_id, replay)
    printer = TreePrinter(out)
    ended: ev.BaseEvent | None = None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for event in _events(response):
                if isinstance(event, str):
                    print(f"warning: {event}", file=sys.stderr)
                    continue
                printer(event)
                if isinstance(event, ev.RunFinishedEvent | ev.RunErrorEvent):
                    ended = event
    except BrokenPipeError:
        raise  # our reader went away (`tail … | head`): the command line stops quietly
    except urllib.error.HTTPError as error:
        detail = error.read().decode("utf-8", "replace")[:500]
        print(f"error: {url} answered HTTP {error.code}: {detail}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        print(f"error: cannot follow {url}: {reason}", file=sys.stderr)
        return 1
    if ended is None:
        print("error: the stream ended before the run did (no terminal event)", file=sys.stderr)
        return 1
    return 0 if isinstance(ended, ev.RunFinishedEvent) else 1
