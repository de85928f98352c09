"""Run AG-UI streams through the official TypeScript client (`@ag-ui/client@1.0.0`) under Node.

Two Node programs live in ``tests/node``:

* ``verify.mjs`` replays recorded event streams through ``AbstractAgent.runAgent`` (the client's
  whole inbound pipeline: compatibility boundary, zod enforcement, chunk expansion,
  ``verifyEvents`` and the reducer) and reports, per stream, whether the client accepted it and
  what ``agent.messages`` / ``agent.state`` ended up as.
* ``run_agent.mjs`` drives a live endpoint with ``HttpAgent`` over real HTTP + SSE.

The helpers here install the pinned npm packages on first use (``npm ci`` from the committed
lockfile) and talk to those programs over stdin/stdout JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

__all__ = [
    "NODE_DIR",
    "ClientRun",
    "ClientRunResult",
    "ClientVerdict",
    "NodeHarnessError",
    "aclient_run",
    "assert_clean",
    "client_run",
    "client_verify",
    "ensure_node_modules",
    "node_available",
]

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
"""The npm project holding the harness scripts, package.json and package-lock.json."""

_MIN_NODE_MAJOR = 18  # global fetch, ReadableStream, structuredClone
_CLIENT_VERSION = "1.0.0"
_MAX_STREAMS_PER_PROCESS = 2_000
_MAX_BYTES_PER_PROCESS = 16 * 1024 * 1024

JsonDict = dict[str, Any]


class NodeHarnessError(RuntimeError):
    """Node, npm or one of the harness scripts failed (not: the client rejected a stream)."""


class ClientVerdict(TypedDict):
    """What the official client made of one stream (one entry of :func:`client_verify`)."""

    ok: bool
    """``runAgent()`` resolved. A stream carrying RUN_ERROR is ok (the error is in runErrors)."""
    error: str | None
    """The rejection message: a verifier sentence, or a ZodError's JSON issue list."""
    errorName: str | None
    messages: list[JsonDict] | None
    state: Any
    pendingInterrupts: NotRequired[list[JsonDict]]
    runFinished: NotRequired[list[JsonDict]]
    runErrors: list[JsonDict]
    warnings: list[str]
    """console.warn output (enforcement strips, compatibility conversions, reducer warnings)."""
    consoleErrors: list[str]
    events: NotRequired[list[JsonDict] | None]
    """Only in ``verify-only`` mode: the expanded, verified event stream."""


class ClientRun(TypedDict, total=False):
    """One run for :func:`client_run`."""

    input: JsonDict
    """Partial RunAgentInput: threadId, runId, messages, state, tools, context,
    forwardedProps, resume."""
    abortAfterEvents: int | None
    headers: dict[str, str]
    answerTools: dict[str, Any]
    """The application's frontend tools: after the run, each pending tool call whose tool is
    named here gets a tool message (``<toolCallId>-result``) with this content (a string, or
    any JSON value sent as its JSON text), appended to the agent's messages for the next run;
    the run's entry lists them as ``executedTools``."""
    url: str
    """This run only: POST it to another server (a second worker); the agent is the same."""
    answerInterrupts: dict[str, Any]
    """Answer every interrupt the agent holds with this response (``{status, payload?}``)
    through the client's own ``buildResumeArray``: the run's ``resume`` is what it builds."""


class ClientRunResult(TypedDict):
    """What :func:`client_run` returns: one entry per run, plus the agent's final view."""

    runs: list[JsonDict]
    messages: list[JsonDict]
    state: Any
    pendingInterrupts: list[JsonDict]


@functools.cache
def _node_major() -> int | None:
    node = shutil.which("node")
    if node is None:
        return None
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


def node_available() -> bool:
    """Return True when ``node`` (>= 18) and ``npm`` are on PATH, so the harness can run."""
    major = _node_major()
    return major is not None and major >= _MIN_NODE_MAJOR and shutil.which("npm") is not None


def _installed() -> bool:
    manifest = NODE_DIR / "node_modules" / "@ag-ui" / "client" / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        return False
    return bool(version == _CLIENT_VERSION)


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    # Outside the repo so it never shows up in `git status`; keyed by the checkout's path.
    tag = re.sub(r"[^A-Za-z0-9]+", "_", str(NODE_DIR))[-80:]
    lock_path = Path(tempfile.gettempdir()) / f"ambient_runs_npm_ci{tag}.lock"
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_node_modules() -> None:
    """Install the pinned npm packages with ``npm ci`` unless they are already present.

    Idempotent and safe under concurrent callers (an exclusive file lock serialises the
    install). Raises :class:`NodeHarnessError` if Node/npm is missing or ``npm ci`` fails.
    """
    if _installed():
        return
    if not node_available():
        raise NodeHarnessError("node >= 18 and npm are required on PATH for the client harness")
    with _install_lock():
        if _installed():  # another process finished the install while we waited
            return
        npm = cast(str, shutil.which("npm"))
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0 or not _installed():
            raise NodeHarnessError(
                f"`npm ci` in {NODE_DIR} failed (exit {proc.returncode}):\n"
                f"{proc.stdout}\n{proc.stderr}"
            )


def _node_env() -> dict[str, str]:
    env = dict(os.environ)
    # The client's warnings are part of what we observe; NODE_ENV=development/test would make
    # it deep-freeze subscriber arguments, which production clients do not do.
    env.pop("SUPPRESS_TRANSFORMATION_WARNINGS", None)
    env.pop("NODE_ENV", None)
    return env


def _run_script(script: str, args: Sequence[str], payload: bytes, timeout: float) -> Any:
    ensure_node_modules()
    node = cast(str, shutil.which("node"))
    try:
        proc = subprocess.run(
            [node, script, *args],
            cwd=NODE_DIR,
            input=payload,
            capture_output=True,
            timeout=timeout,
            env=_node_env(),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise NodeHarnessError(f"{script} timed out after {timeout}s") from exc
    return _parse_output(script, proc.returncode, proc.stdout, proc.stderr)


def _parse_output(script: str, returncode: int | None, stdout: bytes, stderr: bytes) -> Any:
    if returncode != 0:
        raise NodeHarnessError(
            f"{script} exited {returncode}:\n{stderr.decode('utf-8', 'replace')}"
        )
    try:
        return json.loads(stdout)
    except ValueError as exc:
        raise NodeHarnessError(
            f"{script} printed non-JSON output: {stdout[:500]!r}\n"
            f"{stderr.decode('utf-8', 'replace')}"
        ) from exc


def _dumps(value: Any) -> str:
    # allow_nan=False: NaN/Infinity are not JSON and would die in JSON.parse on the Node side.
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _batches(
    streams: Sequence[Sequence[Mapping[str, Any]] | Mapping[str, Any]],
) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for stream in streams:
        text = _dumps(stream)
        if batch and (
            len(batch) >= _MAX_STREAMS_PER_PROCESS or size + len(text) > _MAX_BYTES_PER_PROCESS
        ):
            yield batch
            batch, size = [], 0
        batch.append(text)
        size += len(text) + 1
    if batch:
        yield batch


def client_verify(
    streams: Sequence[Sequence[Mapping[str, Any]] | Mapping[str, Any]],
    *,
    mode: Literal["full", "verify-only"] = "full",
    sync: bool = False,
    timeout: float = 300,
) -> list[ClientVerdict]:
    """Run each stream through the official client and return one verdict per stream, in order.

    A stream is a list of wire-form events (camelCase dicts), or a dict
    ``{"events": [...], "threadId"?, "initialMessages"?, "initialState"?, "runAgent"?}`` when the
    client's starting messages/state matter. The default ``mode="full"`` is
    ``AbstractAgent.runAgent`` end to end; ``"verify-only"`` stops after ``verifyEvents`` and adds
    the expanded stream as ``events``. ``sync=True`` emits each stream synchronously instead of
    one event per macrotask. Big batches are split over several Node processes.
    """
    args: list[str] = []
    if mode == "verify-only":
        args.append("--verify-only")
    if sync:
        args.append("--sync")
    results: list[ClientVerdict] = []
    for batch in _batches(streams):
        payload = ("[" + ",".join(batch) + "]").encode("utf-8")
        out = _run_script("verify.mjs", args, payload, timeout)
        if not isinstance(out, list) or len(out) != len(batch):
            raise NodeHarnessError(
                f"verify.mjs did not answer one result per stream: {out!r:.500}"
            )
        results.extend(cast(list[ClientVerdict], out))
    return results


def _run_spec(
    url: str,
    runs: Sequence[ClientRun | Mapping[str, Any]],
    headers: Mapping[str, str] | None,
    thread_id: str | None,
    initial_messages: Sequence[Mapping[str, Any]] | None,
    initial_state: Any,
) -> bytes:
    spec: JsonDict = {"url": url, "runs": list(runs)}
    if headers is not None:
        spec["headers"] = dict(headers)
    if thread_id is not None:
        spec["threadId"] = thread_id
    if initial_messages is not None:
        spec["initialMessages"] = list(initial_messages)
    if initial_state is not None:
        spec["initialState"] = initial_state
    return _dumps(spec).encode("utf-8")


def assert_clean(run: Mapping[str, Any]) -> None:
    """The client accepted the run whole: it resolved, nothing failed, warned or was stripped."""
    assert (None, None, [], []) == (
        run["error"],
        run["runFailed"],
        run["warnings"],
        run["consoleErrors"],
    )


def client_run(
    url: str,
    runs: Sequence[ClientRun | Mapping[str, Any]],
    timeout: float = 60,
    *,
    headers: Mapping[str, str] | None = None,
    thread_id: str | None = None,
    initial_messages: Sequence[Mapping[str, Any]] | None = None,
    initial_state: Any = None,
) -> ClientRunResult:
    """Drive ``url`` with one official ``HttpAgent``, performing ``runs`` in order.

    Each run is ``{"input": {...partial RunAgentInput...}, "abortAfterEvents": N | None,
    "headers": {...}}``. The agent is built from ``thread_id``/``initial_messages``/
    ``initial_state`` (defaulting to the first run's input), so messages, state and pending
    interrupts carry over between runs. Blocking: from async tests whose server runs on the
    same event loop, use :func:`aclient_run`.
    """
    payload = _run_spec(url, runs, headers, thread_id, initial_messages, initial_state)
    return cast(ClientRunResult, _run_script("run_agent.mjs", [], payload, timeout))


async def aclient_run(
    url: str,
    runs: Sequence[ClientRun | Mapping[str, Any]],
    *,
    headers: Mapping[str, str] | None = None,
    thread_id: str | None = None,
    initial_messages: Sequence[Mapping[str, Any]] | None = None,
    initial_state: Any = None,
) -> ClientRunResult:
    """Async :func:`client_run`: the event loop keeps serving while the client talks to it.

    Bound it with ``asyncio.timeout(...)``; on cancellation the Node process is killed.
    """
    await asyncio.to_thread(ensure_node_modules)
    payload = _run_spec(url, runs, headers, thread_id, initial_messages, initial_state)
    proc = await asyncio.create_subprocess_exec(
        cast(str, shutil.which("node")),
        "run_agent.mjs",
        cwd=NODE_DIR,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_node_env(),
    )
    try:
        stdout, stderr = await proc.communicate(payload)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    return cast(ClientRunResult, _parse_output("run_agent.mjs", proc.returncode, stdout, stderr))
