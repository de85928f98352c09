"""
Against the peers: the same agent and scripted model served by ambient_runs and by the
framework's own AG-UI server, server CPU per run and bytes on the wire per turn.

Two pairs, each the same agent with the same scripted model (no network, no sleeps):

- **pydantic-ai**: an ``Agent`` on a ``FunctionModel`` that streams a sentence, then a
  ``weather`` tool call (its arguments in two pieces); the tool answers; the model then
  streams an answer of *answer_words* words. Served by ``AgentApp`` over
  ``ambient_runs.adapters.pydantic_ai.run_agent`` (ours), and by pydantic-ai's own
  ``AGUIAdapter.dispatch_request`` in a Starlette route (theirs, ``pydantic-ai-slim[ag-ui]``).
- **LangGraph**: a ``StateGraph(MessagesState)`` whose ``agent`` node calls a scripted
  LangChain chat model (streaming its text word by word and its tool call in two pieces),
  a ``ToolNode`` running the same ``weather`` tool, an ``InMemorySaver``: the same turn.
  Served by ``AgentApp`` over ``ambient_runs.adapters.langgraph.run_graph`` (ours), and by
  ``ag-ui-langgraph``'s ``LangGraphAgent`` behind ``add_langgraph_fastapi_endpoint``
  (theirs, its defaults).

Each pair also has a **floor**: an ASGI app that runs the framework alone (every event
consumed and dropped) and answers a 2-byte body, what any AG-UI server of that agent
costs before it turns one event into bytes.

Every candidate is served by one uvicorn in a **process of its own** (127.0.0.1, an
ephemeral port, the asyncio loop, h11), so that the server's CPU time can be read from
the child itself (``time.process_time()``, asked over HTTP: ``benchmarks._child``)
around a batch of *runs* requests to one candidate, the client (this process, one
persistent connection, raw sockets) waiting for each response's last chunk before the
next request. A fresh
``threadId`` and ``runId`` every request: no candidate's checkpointer grows.

Figures (per round, the candidates interleaved in rotating order):

- **server CPU per run, ours / theirs**, for each pair (target: <= 0.5x each);
- **bytes on the wire per turn, ours / theirs**: the whole HTTP response (status line,
  headers, chunked framing, SSE body), for each pair (target: <= 0.5x each). Bytes are
  deterministic up to ids and timestamps; the figure is still one value per round;
- the floor over theirs (server CPU), for each pair, reported: how far below theirs any
  server of the agent can go; and, from the medians, what ours adds above the floor over
  what theirs adds.

Checks: every candidate's stream, parsed back to events, is run through the official
``@ag-ui/client`` 1.0.0 (``tests/node/verify.mjs`` via ``tests/support/node.py``), and the
result has to be accepted with no warning; the answer text arrives whole.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

from benchmarks import INPUT, figure, interleave
from benchmarks._child import Child

TITLE = "against the peers (server CPU per run, bytes per turn; pydantic-ai, ag-ui-langgraph)"

_ROOT = Path(__file__).resolve().parent.parent

QUESTION = "What is the weather in Paris?"
OPENING = "Let me check the weather in Paris."
WORD = "mild "

#: path segment -> (pair, side)
CANDIDATES: dict[str, tuple[str, str]] = {
    "ours-pydantic-ai": ("pydantic-ai", "ours"),
    "pydantic-ai": ("pydantic-ai", "theirs"),
    "ours-langgraph": ("langgraph", "ours"),
    "ag-ui-langgraph": ("langgraph", "theirs"),
    "pydantic-ai-floor": ("pydantic-ai", "floor"),
    "langgraph-floor": ("langgraph", "floor"),
}

Scope = MutableMapping[str, Any]


def answer(words: int) -> str:
    """The scripted model's final answer: *words* words."""
    return (WORD * words).rstrip()


def weather(city: str) -> str:
    """Report the weather in *city* (the tool both frameworks call)."""
    return f"21.5 C and mild in {city}"


# ---------------------------------------------------------------- pydantic-ai


def pydantic_agent(words: int) -> Any:
    """A pydantic-ai Agent on a FunctionModel: a sentence and a tool call, then the answer."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    final = [w + " " for w in answer(words).split(" ")]
    final[-1] = final[-1].rstrip()

    async def model(messages: list[Any], info: AgentInfo) -> Any:
        last = messages[-1]
        answered = isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in last.parts
        )
        if not answered:
            for word in OPENING.split(" "):
                yield word + " "
            yield {1: DeltaToolCall(name="weather", json_args='{"city": ', tool_call_id="call_1")}
            yield {1: DeltaToolCall(json_args='"Paris"}')}
        else:
            for piece in final:
                yield piece

    agent = Agent(FunctionModel(stream_function=model), name="forecaster")
    agent.tool_plain(weather)
    return agent


def _ours_pydantic(words: int) -> Any:
    import ambient_runs as ar
    from ambient_runs.adapters.pydantic_ai import run_agent
    from ambient_runs.asgi import AgentApp

    agent = pydantic_agent(words)

    async def serve(run: ar.Run) -> None:
        await run_agent(agent, _prompt(run))

    return AgentApp(serve)


def _theirs_pydantic(words: int) -> Any:
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    agent = pydantic_agent(words)

    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def _prompt(run: Any) -> str:
    """The last user message's text (what pydantic-ai's own adapter sends the model too)."""
    for message in reversed(run.input.messages):
        if getattr(message, "role", None) == "user":
            return str(message.content)
    return QUESTION


# ---------------------------------------------------------------- LangGraph


def langgraph_graph(words: int) -> Any:
    """The same turn as a LangGraph ReAct loop over a scripted, streaming chat model."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    final = answer(words)

    def reply(messages: list[Any]) -> AIMessage:
        if messages and isinstance(messages[-1], ToolMessage):
            return AIMessage(content=final)
        return AIMessage(
            content=OPENING,
            tool_calls=[{"id": "call_1", "name": "weather", "args": {"city": "Paris"}}],
        )

    class ScriptedChat(BaseChatModel):
        """Answers by the turn's position; streams text word by word, a call in two pieces."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=reply(messages))])

        def _stream(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Iterator[ChatGenerationChunk]:
            message = reply(messages)
            words_ = str(message.content).split(" ")
            pieces = [
                AIMessageChunk(content=w + (" " if i < len(words_) - 1 else ""))
                for i, w in enumerate(words_)
            ]
            for index, call in enumerate(message.tool_calls):
                args = json.dumps(call["args"])
                half = len(args) // 2
                pieces.append(
                    AIMessageChunk(
                        content="",
                        tool_call_chunks=[
                            {
                                "index": index,
                                "id": call["id"],
                                "name": call["name"],
                                "args": args[:half],
                            }
                        ],
                    )
                )
                pieces.append(
                    AIMessageChunk(
                        content="",
                        tool_call_chunks=[
                            {"index": index, "id": None, "name": None, "args": args[half:]}
                        ],
                    )
                )
            for piece in pieces:
                chunk = ChatGenerationChunk(message=piece)
                if run_manager is not None:
                    run_manager.on_llm_new_token(str(piece.content), chunk=chunk)
                yield chunk

    model = ScriptedChat()
    weather_tool = tool(weather)

    async def agent(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([weather_tool]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def _ours_langgraph(words: int) -> Any:
    from langchain_core.messages import HumanMessage

    import ambient_runs as ar
    from ambient_runs.adapters.langgraph import run_graph
    from ambient_runs.asgi import AgentApp

    graph = langgraph_graph(words)

    async def serve(run: ar.Run) -> None:
        await run_graph(graph, {"messages": [HumanMessage(_prompt(run))]})

    return AgentApp(serve)


def _theirs_langgraph(words: int) -> Any:
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    agent = LangGraphAgent(name="forecaster", graph=langgraph_graph(words))
    add_langgraph_fastapi_endpoint(app, agent, "/")
    return app


# ---------------------------------------------------------------- the floors


def _floor(consume: Callable[[str], Any]) -> Any:
    """
    An ASGI app that runs the framework alone and answers 200 with no stream: the floor.

    It reads the request, runs *consume* on the question (the framework's own run, every
    event consumed and dropped) and sends a two-byte body: what any AG-UI server of this
    agent costs before it turns a single event into bytes.
    """

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await consume(QUESTION)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


def _floor_pydantic(words: int) -> Any:
    agent = pydantic_agent(words)

    async def consume(prompt: str) -> None:
        async with agent.run_stream_events(prompt) as events:
            async for _ in events:
                pass

    return _floor(consume)


def _floor_langgraph(words: int) -> Any:
    from langchain_core.messages import HumanMessage

    graph = langgraph_graph(words)

    async def consume(prompt: str) -> None:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        async for _ in graph.astream(
            {"messages": [HumanMessage(prompt)]},
            config,
            stream_mode=["messages", "updates", "values"],
        ):
            pass

    return _floor(consume)


# ---------------------------------------------------------------- the server process


def apps(words: int) -> dict[str, Any]:
    """Every candidate's ASGI application, by its path segment."""
    return {
        "ours-pydantic-ai": _ours_pydantic(words),
        "pydantic-ai": _theirs_pydantic(words),
        "ours-langgraph": _ours_langgraph(words),
        "ag-ui-langgraph": _theirs_langgraph(words),
        "pydantic-ai-floor": _floor_pydantic(words),
        "langgraph-floor": _floor_langgraph(words),
    }


def _dispatch(table: dict[str, Any]) -> Any:
    """Route by the first path segment (``/pydantic-ai/`` …), which is stripped."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        name = scope["path"].strip("/").split("/")[0]
        await table[name]({**scope, "path": "/", "raw_path": b"/"}, receive, send)

    return app


def _serve(words: int) -> None:
    from benchmarks._child import serve

    serve(_dispatch(apps(words)))


# ---------------------------------------------------------------- the client


def _request(port: int, path: str) -> bytes:
    """A POST of a fresh RunAgentInput (new thread and run ids) asking the question."""
    body = json.dumps(
        {
            **INPUT,
            "threadId": f"t-{uuid.uuid4().hex}",
            "runId": f"r-{uuid.uuid4().hex}",
            "messages": [{"id": "user-1", "role": "user", "content": QUESTION}],
        }
    ).encode()
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        "content-type: application/json\r\naccept: text/event-stream\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


class _Client:
    """One persistent HTTP/1.1 connection on a blocking socket; reads chunked responses."""

    def __init__(self, port: int) -> None:
        import socket

        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        self.sock.close()

    def post(self, path: str) -> bytes:
        """The whole raw response to one request to *path*."""
        self.sock.sendall(_request(self.port, path))
        data = bytearray()
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the server closed the connection mid-response")
            data += chunk
            if data.endswith(b"\r\n0\r\n\r\n"):
                return bytes(data)


def events_of(raw: bytes) -> list[dict[str, Any]]:
    """The events of a raw chunked SSE response."""
    from benchmarks.bench_http import _dechunk

    status, body = _dechunk(raw)
    if status != 200:
        raise RuntimeError(f"status {status}: {body[:300]!r}")
    found = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            found.append(json.loads(b"\n".join(data)))
    return found


def _accepted(streams: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each stream through the official client: ``{name: True | the verdict's complaint}``."""
    tests = str(_ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from support.node import client_verify  # type: ignore[import-not-found]

    names = list(streams)
    verdicts = client_verify(
        [
            {
                "events": streams[n],
                "initialMessages": [{"id": "user-1", "role": "user", "content": QUESTION}],
            }
            for n in names
        ]
    )
    out: dict[str, Any] = {}
    for name, verdict in zip(names, verdicts, strict=True):
        clean = verdict["ok"] and not verdict["warnings"] and not verdict["consoleErrors"]
        out[name] = (
            True
            if clean
            else {
                "error": verdict["error"],
                "warnings": verdict["warnings"][:3],
                "consoleErrors": verdict["consoleErrors"][:3],
            }
        )
    return out


def run(runs: int = 20, rounds: int = 10, answer_words: int = 40) -> dict[str, Any]:
    """Serve the four candidates from a child process; time their CPU, count their bytes."""
    raw: dict[str, bytes] = {}
    sizes: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    with Child("benchmarks.bench_peers", [str(answer_words)]) as server:
        client = _Client(server.port)
        try:

            def candidate(name: str) -> Callable[[], float]:
                path = f"/{name}/"

                def batch() -> float:
                    before = server.cpu()
                    total = 0
                    for _ in range(runs):
                        raw[name] = client.post(path)
                        total += len(raw[name])
                    sizes[name].append(total / runs)
                    return (server.cpu() - before) / runs

                return batch

            candidates = {name: candidate(name) for name in CANDIDATES}
            for fn in candidates.values():  # warm up (imports, first-call caches), untimed
                fn()
            for values in sizes.values():
                values.clear()
            streams = {
                name: events_of(body)
                for name, body in raw.items()
                if CANDIDATES[name][1] != "floor"
            }
            load_before = os.getloadavg()
            samples = interleave(candidates, rounds)
            load_after = os.getloadavg()
        finally:
            client.close()

    accepted = _accepted(streams)
    text = answer(answer_words)

    def says(events: list[dict[str, Any]]) -> bool:
        deltas = "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        return deltas.endswith(text)

    figures = []
    absolute: dict[str, Any] = {}
    for pair in ("pydantic-ai", "langgraph"):
        ours = next(n for n, (p, side) in CANDIDATES.items() if p == pair and side == "ours")
        theirs = next(n for n, (p, side) in CANDIDATES.items() if p == pair and side == "theirs")
        figures.append(
            figure(
                f"peers: server CPU per run, ours / {theirs}",
                [a / b for a, b in zip(samples[ours], samples[theirs], strict=True)],
                target=("<=", 0.5),
                note=f"the same {pair} agent and scripted model; server process CPU",
            )
        )
        figures.append(
            figure(
                f"peers: bytes on the wire per turn, ours / {theirs}",
                [a / b for a, b in zip(sizes[ours], sizes[theirs], strict=True)],
                target=("<=", 0.5),
                note="the whole HTTP response: status line, headers, chunked framing, SSE body",
            )
        )
        floor = next(n for n, (p, side) in CANDIDATES.items() if p == pair and side == "floor")
        figures.append(
            figure(
                f"peers: the framework's own run / {theirs}'s whole run (server CPU)",
                [a / b for a, b in zip(samples[floor], samples[theirs], strict=True)],
                note="the floor: the agent run alone, every event dropped, a 2-byte answer",
            )
        )
        # What each AG-UI server adds to the same framework run, from the medians: a
        # per-round difference of two noisy CPU times can come out at or below zero.
        med = {n: statistics.median(samples[n]) for n in (ours, theirs, floor)}
        absolute[f"serving cost above the {pair} floor, ours / {theirs} (medians)"] = (
            f"{(med[ours] - med[floor]) / (med[theirs] - med[floor]):.2f}x"
            if med[theirs] > med[floor]
            else "n/a (theirs at or below the floor)"
        )
    for name in CANDIDATES:
        absolute[f"{name} server CPU per run (median)"] = (
            f"{sorted(samples[name])[len(samples[name]) // 2] * 1e3:.2f} ms"
        )
        if name not in streams:
            continue
        absolute[f"{name} bytes per turn"] = f"{sizes[name][-1]:,.0f} B"
        absolute[f"{name} events per turn"] = len(streams[name])
        kinds: dict[str, int] = {}
        for e in streams[name]:
            kinds[e["type"]] = kinds.get(e["type"], 0) + 1
        absolute[f"{name} event types"] = kinds
    absolute["load average before, after"] = f"{load_before}, {load_after}"
    return {
        "title": TITLE,
        "params": {"runs": runs, "rounds": rounds, "answer_words": answer_words},
        "unit": "run",
        "samples": samples,
        "figures": figures,
        "absolute": absolute,
        "checks": {
            "official_client_accepts": accepted,
            "answer_arrives_whole": {name: says(s) for name, s in streams.items()},
        },
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        _serve(int(sys.argv[2]))
    else:  # a quick look: python -m benchmarks.bench_peers
        print(json.dumps(run(runs=5, rounds=3), indent=1, default=str))
