"""
Over HTTP: events per second from uvicorn to an httpx client reading the SSE stream.

One uvicorn server (127.0.0.1, an ephemeral port, a background thread, h11 or
whatever uvicorn picks, access log off) serves two endpoints; the client, an
``httpx.Client`` in the main thread, POSTs the same RunAgentInput to each in
turn and reads the whole response body. Both streams carry the same events:
RUN_STARTED, SUBAGENT_STARTED, TEXT_MESSAGE_START, *n_events* deltas,
TEXT_MESSAGE_END, SUBAGENT_FINISHED, RUN_FINISHED.

- ``ambient_runs``: ``ambient_runs.asgi.AgentApp`` serving an agent that writes
  the deltas in a subagent, awaiting ``ambient_runs.drain()`` after each
  (verification on);
- ``official``: a minimal Starlette endpoint that validates the input with
  ``ag_ui.core.RunAgentInput`` and returns a ``StreamingResponse`` over a
  generator building each ``ag_ui.core`` event and yielding
  ``EventEncoder().encode(event)``.

Server and client share the process (and its GIL), as the brief requires; both
candidates pay that equally. The figure is the per-round ratio of events per
second, ambient_runs over official (above 1 means faster). No target.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import ambient_runs as ar
from benchmarks import INPUT, figure, interleave

TITLE = "over HTTP (uvicorn + httpx, SSE events per second)"

_DELTA = "token "

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def _ours(n_events: int) -> ASGIApp:
    from ambient_runs.asgi import AgentApp

    async def agent(run: Any) -> None:
        async with ar.subagent("writer"):
            with ar.message() as handle:
                write = handle.write
                for _ in range(n_events):
                    write(_DELTA)
                    await ar.drain()

    return AgentApp(agent, verify=True)


def _official(n_events: int) -> ASGIApp:
    from ag_ui import core
    from ag_ui.encoder import EventEncoder
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    encoder = EventEncoder()

    async def endpoint(request: Request) -> StreamingResponse:
        body = core.RunAgentInput.model_validate(await request.json())
        thread_id, run_id = body.thread_id, body.run_id

        async def frames() -> Any:
            sub, mid = f"{run_id}-sub-1", f"{run_id}-msg-1"
            encode = encoder.encode
            yield encode(
                core.RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version="1.0")
            )
            yield encode(core.SubagentStartedEvent(subagent_run_id=sub, name="writer"))
            yield encode(
                core.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=sub)
            )
            for _ in range(n_events):
                yield encode(
                    core.TextMessageContentEvent(message_id=mid, delta=_DELTA, subagent_run_id=sub)
                )
            yield encode(core.TextMessageEndEvent(message_id=mid, subagent_run_id=sub))
            yield encode(core.SubagentFinishedEvent(subagent_run_id=sub))
            yield encode(core.RunFinishedEvent(thread_id=thread_id, run_id=run_id))

        return StreamingResponse(frames(), media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def _dispatch(apps: dict[str, ASGIApp]) -> ASGIApp:
    """Route by the first path segment: ``/ours/`` and ``/official/``."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        name = scope["path"].strip("/").split("/")[0]
        await apps[name]({**scope, "path": "/", "raw_path": b"/"}, receive, send)

    return app


class _Server:
    """uvicorn on 127.0.0.1, an ephemeral port, in a daemon thread."""

    def __init__(self, app: ASGIApp) -> None:
        import uvicorn

        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def run(n_events: int = 20_000, rounds: int = 6) -> dict[str, Any]:
    """Time one full SSE response per candidate per round, *n_events* deltas each."""
    import httpx

    total = n_events + 6
    apps = {"ours": _ours(n_events), "official": _official(n_events)}
    bodies: dict[str, bytes] = {}
    with _Server(_dispatch(apps)) as base, httpx.Client(base_url=base, timeout=120) as client:

        def candidate(name: str) -> Callable[[], float]:
            def fetch() -> float:
                chunks: list[bytes] = []
                start = time.perf_counter()
                with client.stream("POST", f"/{name}/", json=INPUT) as response:
                    response.raise_for_status()
                    for chunk in response.iter_raw():
                        chunks.append(chunk)
                elapsed = time.perf_counter() - start
                bodies[name] = b"".join(chunks)
                return elapsed / total

            return fetch

        candidates = {"ambient_runs": candidate("ours"), "official": candidate("official")}
        for fetch in candidates.values():  # warm up (and the bodies to check), untimed
            fetch()
        frames = {name: body.count(b"data: ") for name, body in bodies.items()}
        identical = bodies["ours"] == bodies["official"]
        samples = interleave(candidates, rounds)
    speed = [o / a for a, o in zip(samples["ambient_runs"], samples["official"], strict=True)]
    return {
        "title": TITLE,
        "params": {"n_events": n_events, "rounds": rounds, "events_per_response": total},
        "unit": "event",
        "samples": samples,
        "figures": [
            figure(
                "http: ambient_runs / official (events per second)",
                speed,
                note="above 1: ambient_runs streams faster",
            )
        ],
        "absolute": {
            f"{name} events/s (median)": f"{1 / sorted(v)[len(v) // 2]:,.0f}"
            for name, v in samples.items()
        },
        "checks": {
            "frames_per_response": frames,
            "all_frames_received": set(frames.values()) == {total},
            "identical_bodies": identical,
        },
    }
