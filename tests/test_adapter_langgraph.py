"""
`ambient_runs.adapters.langgraph.run_graph`: a compiled LangGraph graph, streamed and attributed.

The graphs run offline: a fake chat model (langchain-core's ``BaseChatModel`` with scripted
responses that stream their text and tool call chunks), LangGraph's ``ToolNode`` and its
``InMemorySaver`` checkpointer. Every stream goes through our strict verifier and the official
client.
"""

from __future__ import annotations

import asyncio
import json
import operator
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Send, interrupt
from support.events import types_of
from support.node import client_verify

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs._outcomes import GENERIC_MESSAGE
from ambient_runs.adapters.langgraph import run_graph
from ambient_runs.testing import assert_valid, make_input, wire


class ScriptedChat(BaseChatModel):
    """A chat model that answers from a script, streaming text by words and tool calls by parts."""

    script: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _next(self) -> AIMessage:
        return self.script.pop(0)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next())])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kw: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._next()
        pieces: list[AIMessageChunk] = [
            AIMessageChunk(content=word) for word in str(message.content).split(" ") if word
        ]
        pieces = [
            AIMessageChunk(content=p.content + (" " if i < len(pieces) - 1 else ""))
            for i, p in enumerate(pieces)
        ]
        for index, call in enumerate(message.tool_calls):
            args = ar.encode_json(call["args"]).decode()
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


def calling(*calls: tuple[str, dict[str, Any]], text: str = "") -> AIMessage:
    """A model turn that says *text* and calls tools (ids collide across graphs on purpose)."""
    return AIMessage(
        content=text,
        tool_calls=[
            {"id": f"call_{n}", "name": name, "args": args} for n, (name, args) in enumerate(calls)
        ],
    )


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def explode(q: str) -> str:
    """A tool that fails."""
    raise ValueError(f"cannot {q}")


def react_graph(script: list[AIMessage], *, handle_errors: bool = True) -> Any:
    model = ScriptedChat(script=script)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup, explode], handle_tool_errors=handle_errors))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def question(text: str = "hi") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def verified(*runs: Sequence[ev.BaseEvent], known: Sequence[str] = ()) -> None:
    """Valid for our verifier and the official client (runs after the first: one agent)."""
    from ambient_runs.verify import Verifier

    for events in runs:
        assert () == Verifier(known_tool_call_ids=known).verify(list(events))
    stream = [e for r in runs for e in wire(list(r))]
    [verdict] = client_verify([{"events": stream}])
    assert (True, None) == (verdict["ok"], verdict["error"])


def under(sid: str, events: Sequence[ev.BaseEvent]) -> list[ev.BaseEvent]:
    return [
        e
        for e in events
        if (o := getattr(e, "subagent_run_id", None)) is not None
        and (o == sid or o.startswith(sid + "/"))
    ]


class TestStreaming:
    async def test_tokens_tool_calls_results_and_steps(self) -> None:
        """A react loop: steps per node, streamed text, streamed args, results on our ids."""
        graph = react_graph(
            [calling(("lookup", {"q": "ants"}), text="Let me look."), calling(text="Ants win.")]
        )
        async with ar.Run(make_input(run_id="r")) as run:
            final = await run_graph(graph, question(), name="researcher")
        events = list(run.events)
        assert "Ants win." == final["messages"][-1].content
        body = events[2:-2]
        assert body == under("r-sub-1", body)
        steps = [(e.TYPE.value, e.step_name) for e in events if "STEP" in e.TYPE.value]
        assert [
            ("STEP_STARTED", "agent"),
            ("STEP_FINISHED", "agent"),
            ("STEP_STARTED", "tools"),
            ("STEP_FINISHED", "tools"),
            ("STEP_STARTED", "agent"),
            ("STEP_FINISHED", "agent"),
        ] == steps
        texts = [e.delta for e in events if isinstance(e, ev.TextMessageContentEvent)]
        assert ["Let ", "me ", "look.", "Ants ", "win."] == texts
        start = next(e for e in events if isinstance(e, ev.ToolCallStartEvent))
        args = [e.delta for e in events if isinstance(e, ev.ToolCallArgsEvent)]
        assert ("r-tool-1", "lookup", "r-msg-1") == (
            start.tool_call_id,
            start.tool_call_name,
            start.parent_message_id,
        )
        assert '{"q":"ants"}' == "".join(args)
        assert len(args) == 2
        [result] = [e for e in events if isinstance(e, ev.ToolCallResultEvent)]
        assert ("r-tool-1", "found ants") == (result.tool_call_id, result.content)
        finished = events[-2]
        assert isinstance(finished, ev.SubagentFinishedEvent)
        assert "Ants win." == finished.result["messages"][-1]["content"]
        verified(events)

    async def test_the_final_state_can_be_the_runs_result(self) -> None:
        """An agent returning run_graph's state (LangChain messages) ends with its JSON form."""
        graph = react_graph([calling(text="Done.")])

        async def agent(run: ar.Run) -> Any:
            return await run_graph(graph, question())

        events = [e async for e in ar.stream(agent, make_input(run_id="r"))]
        finished = events[-1]
        assert isinstance(finished, ev.RunFinishedEvent)
        assert ["hi", "Done."] == [m["content"] for m in finished.result["messages"]]

    async def test_without_a_name_the_graph_streams_in_the_ambient_scope(self) -> None:
        """No name: the graph's events are the enclosing scope's own."""
        graph = react_graph([calling(text="Hello there.")])
        async with ar.Run(make_input(run_id="r")) as run:
            with ar.subagent("outer"):
                await run_graph(graph, question())
        assert {"r-sub-1"} == {
            e.subagent_run_id for e in run.events if isinstance(e, ev.TextMessageContentEvent)
        }
        verified(list(run.events))

    async def test_a_decorated_node_is_a_subagent(self) -> None:
        """@subagent on a node: what its model streams is that invocation's, inside the step."""
        model = ScriptedChat(script=[calling(text="from the critic")])

        @ar.subagent("critic")
        async def critic(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("critic", critic)
        builder.add_edge(START, "critic")
        graph = builder.compile()
        async with ar.Run(make_input(run_id="r")) as run:
            await run_graph(graph, question(), name="graph")
        events = list(run.events)
        assert [
            "SUBAGENT_STARTED",
            "STEP_STARTED",
            "SUBAGENT_STARTED",
            "TEXT_MESSAGE_START",
        ] == types_of(events)[1:5]
        started = [e for e in events if isinstance(e, ev.SubagentStartedEvent)]
        assert [("r-sub-1", None), ("r-sub-2", "r-sub-1")] == [
            (s.subagent_run_id, s.parent_subagent_run_id) for s in started
        ]
        assert {"r-sub-2"} == {
            e.subagent_run_id for e in events if isinstance(e, ev.TextMessageContentEvent)
        }
        verified(events)

    async def test_node_messages_that_no_model_streamed_are_said(self) -> None:
        """An AIMessage a node returns without a model is sent as a whole message."""

        def fixed(state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage(content="a canned answer", id="canned")]}

        builder = StateGraph(MessagesState)
        builder.add_node("fixed", fixed)
        builder.add_edge(START, "fixed")
        async with ar.Run(make_input(run_id="r")) as run:
            await run_graph(builder.compile(), question())
        assert ["a canned answer"] == [
            e.delta for e in run.events if isinstance(e, ev.TextMessageContentEvent)
        ]
        verified(list(run.events))


class TestConcurrency:
    async def test_two_graphs_with_colliding_tool_call_ids(self) -> None:
        """Two graphs whose models both call call_0, streaming at once, stay apart."""
        graphs = [
            react_graph([calling(("lookup", {"q": q})), calling(text=f"done {q}")])
            for q in ("a", "b")
        ]
        async with ar.Run(make_input(run_id="r")) as run, asyncio.TaskGroup() as tg:
            for n, graph in enumerate(graphs):
                tg.create_task(run_graph(graph, question(), name=f"g{n}"))
        events = list(run.events)
        body = events[1:-1]
        assert len(body) == len(under("r-sub-1", body)) + len(under("r-sub-2", body))
        calls = {
            e.tool_call_id: e.subagent_run_id
            for e in events
            if isinstance(e, ev.ToolCallStartEvent)
        }
        results = {
            e.tool_call_id: (e.subagent_run_id, e.content)
            for e in events
            if isinstance(e, ev.ToolCallResultEvent)
        }
        assert 2 == len(calls)
        assert {cid: (calls[cid], content) for cid, (_, content) in results.items()} == results
        assert {"found a", "found b"} == {c for _, c in results.values()}
        verified(events)


class FanOutState(TypedDict):
    topics: list[str]
    notes: Annotated[list[str], operator.add]


class TestFanOut:
    async def test_send_fan_out_gets_one_step_per_task(self) -> None:
        """Send runs one node three times at once: three steps, told apart by a number."""

        async def worker(state: dict[str, Any]) -> dict[str, Any]:
            ar.say(f"researching {state['topic']}")
            await asyncio.sleep(0)
            return {"notes": [state["topic"]]}

        builder = StateGraph(FanOutState)
        builder.add_node("worker", worker)
        builder.add_conditional_edges(
            START, lambda s: [Send("worker", {"topic": t}) for t in s["topics"]], ["worker"]
        )
        async with ar.Run(make_input(run_id="r")) as run:
            final = await run_graph(builder.compile(), {"topics": ["a", "b", "c"]}, name="g")
        assert ["a", "b", "c"] == sorted(final["notes"])
        started = [e.step_name for e in run.events if isinstance(e, ev.StepStartedEvent)]
        assert ["worker", "worker (2)", "worker (3)"] == sorted(started)
        verified(list(run.events))


class TestFailures:
    @pytest.mark.parametrize("expose", [False, True])
    async def test_a_tool_that_raises_is_answered_with_the_error(self, expose: bool) -> None:
        """ToolNode reports the error to the model; the call is answered under the policy."""
        graph = react_graph([calling(("explode", {"q": "fly"})), calling(text="It failed.")])
        async with ar.Run(make_input(run_id="r"), expose_errors=expose) as run:
            await run_graph(graph, question(), name="g")
        [result] = [e for e in run.events if isinstance(e, ev.ToolCallResultEvent)]
        told = "cannot fly" if expose else GENERIC_MESSAGE
        assert {"error": told, "type": "ValueError"} == json.loads(result.content)
        verified(list(run.events))

    async def test_a_failing_graph_fails_its_subagent_and_propagates(self) -> None:
        """Without error handling the graph fails: SUBAGENT_ERROR, the exception propagates."""
        graph = react_graph([calling(("explode", {"q": "fly"}))], handle_errors=False)
        async with ar.Run(make_input(run_id="r"), expose_errors=True) as run:
            with pytest.raises(ValueError, match="cannot fly"):
                await run_graph(graph, question(), name="g")
        out = wire(list(run.events))
        error = next(e for e in out if e["type"] == "SUBAGENT_ERROR")
        assert ("r-sub-1", "cannot fly", "ValueError") == (
            error["subagentRunId"],
            error["message"],
            error["code"],
        )
        [result] = [e for e in out if e["type"] == "TOOL_CALL_RESULT"]
        assert '{"error": "cannot fly", "type": "ValueError"}' == result["content"]
        verified(list(run.events))


def approval_graph(saver: InMemorySaver, seen: list[Any]) -> Any:
    """ask -> approve (a decorated node that interrupts) -> done; built afresh each time."""

    def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="May I pay?", id="ask-1")]}

    @ar.subagent("approver")
    def approve(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "pay 5?"})
        seen.append(answer)
        return {"messages": [AIMessage(content=f"answer: {answer}", id="answer-1")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_node("approve", approve)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=saver)


class TestInterrupts:
    async def test_interrupt_suspends_and_the_clients_resume_continues(self) -> None:
        """interrupt(): suspended subagents and an interrupt; a fresh graph and run resume it."""
        saver = InMemorySaver()
        seen: list[Any] = []

        async def agent(run: ar.Run) -> Any:
            graph = approval_graph(saver, seen)  # fresh objects each run: only the saver stays
            final = await run_graph(graph, question(), name="payments")
            return final["messages"][-1].content

        first = [e async for e in ar.stream(agent, make_input("thread-1", "r1"))]
        out = wire(first)
        outcome = out[-1]["outcome"]
        [interrupt_] = outcome["interrupts"]
        assert interrupt_["id"].startswith("langgraph:r1-sub-1:")
        assert {
            "reason": "input_required",
            "subagentRunId": "r1-sub-1",
            "metadata": {"ambient_runs": {"value": {"question": "pay 5?"}}},
        } == {k: v for k, v in interrupt_.items() if k not in ("id", "expiresAt")}
        assert interrupt_["expiresAt"].endswith("Z")  # its continuation expires server-side
        endings = [e for e in out if e["type"] in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR")]
        assert [
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r1-sub-2",
                "outcome": {"type": "suspended"},
            },
            {
                "type": "SUBAGENT_FINISHED",
                "subagentRunId": "r1-sub-1",
                "outcome": {"type": "suspended", "interruptIds": [interrupt_["id"]]},
            },
        ] == endings
        assert [] == seen

        resume = [ev.ResumeEntry(interrupt_id=interrupt_["id"], status="resolved", payload="yes")]
        second = [e async for e in ar.stream(agent, make_input("thread-1", "r2", resume=resume))]
        assert ["yes"] == seen
        out2 = wire(second)
        assert {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": "r1-sub-1",
            "name": "payments",
        } == out2[1]
        assert "answer: yes" == out2[-1]["result"]
        verified(first, second)

    async def test_a_cancelled_answer_resumes_with_the_status(self) -> None:
        """status cancelled resumes interrupt() with {"status": "cancelled", "payload": …}."""
        saver = InMemorySaver()
        seen: list[Any] = []

        async def agent(run: ar.Run) -> Any:
            return await run_graph(approval_graph(saver, seen), question(), name="payments")

        first = [e async for e in ar.stream(agent, make_input("thread-2", "r1"))]
        iid = wire(first)[-1]["outcome"]["interrupts"][0]["id"]
        resume = [ev.ResumeEntry(interrupt_id=iid, status="cancelled")]
        [e async for e in ar.stream(agent, make_input("thread-2", "r2", resume=resume))]
        assert [{"status": "cancelled", "payload": None}] == seen

    async def test_an_answer_to_an_interrupt_never_issued_is_a_named_error(self) -> None:
        """
        An id in the old ``langgraph:…`` form that no store issued: ``interrupt_unknown``.

        (It used to run the input afresh: a silent new turn.)
        """
        graph = react_graph([calling(text="fresh")])
        resume = [ev.ResumeEntry(interrupt_id="langgraph::not-pending", status="resolved")]
        with pytest.raises(ar.InterruptUnknownError):
            async with ar.Run(make_input(run_id="r", resume=resume)) as run:
                await run_graph(graph, question(), name="g")
        assert "interrupt_unknown" == wire(run.events)[-1]["code"]

    async def test_without_a_checkpointer_an_unknown_answer_is_still_a_named_error(
        self,
    ) -> None:
        """No checkpointer (nothing to continue): an answer no store issued is still refused."""
        builder = StateGraph(MessagesState)
        builder.add_node("noop", lambda state: {})
        builder.add_edge(START, "noop")
        graph = builder.compile()
        resume = [ev.ResumeEntry(interrupt_id="r0-int-1", status="resolved")]
        with pytest.raises(ar.InterruptUnknownError):
            async with ar.Run(make_input(run_id="r", resume=resume)):
                await run_graph(graph, question(), name="g")


WORKER = """
import asyncio, json, sys
import ambient_runs as ar
from ambient_runs.adapters.langgraph import run_graph
from ambient_runs.testing import make_input
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from test_adapter_langgraph import approval_graph, question

from ambient_runs.stores.redis_continuations import RedisContinuations

async def main(db, run_id, resume, redis_url, prefix):
    seen = []
    continuations = RedisContinuations(redis_url, prefix=prefix)
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        async def agent(run):
            final = await run_graph(approval_graph(saver, seen), question(), name="payments")
            return final["messages"][-1].content
        run_input = make_input("thread-p", run_id, resume=[entry(r) for r in resume])
        stream = ar.stream(agent, run_input, continuations=continuations)
        events = [ar.to_wire(e) async for e in stream]
    await continuations.aclose()
    print(json.dumps({"events": events, "seen": seen}))

def entry(r):
    return ar.events.ResumeEntry(
        interrupt_id=r["interruptId"], status=r["status"], payload=r.get("payload")
    )

asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), *sys.argv[4:6]))
"""


@tool
def pay(amount: int) -> str:
    """Pay, once a human approves."""
    answer = interrupt({"approve": amount})
    return "paid" if answer == "yes" else "not paid"


def paying_graph(saver: InMemorySaver, script: list[AIMessage]) -> Any:
    model = ScriptedChat(script=script)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([pay]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


class TestToolInterrupts:
    async def test_an_interrupt_in_a_tool_is_answered_on_the_original_call(self) -> None:
        """interrupt() in a tool: a tool_call interrupt; resumed, the result answers that call."""
        saver = InMemorySaver()
        scripts = [[calling(("pay", {"amount": 5}))], [calling(text="Paid.")]]

        async def agent(run: ar.Run) -> Any:
            graph = paying_graph(saver, scripts.pop(0))
            final = await run_graph(graph, question(), name="payer")
            return final["messages"][-1].content

        first = [e async for e in ar.stream(agent, make_input("thread-t", "r1"))]
        [interrupt_] = wire(first)[-1]["outcome"]["interrupts"]
        assert ("input_required", "r1-tool-1") == (interrupt_["reason"], interrupt_["toolCallId"])
        assert [] == [e for e in first if isinstance(e, ev.ToolCallResultEvent)]
        [verdict] = client_verify([wire(first)])
        history = ev.RunAgentInput.from_wire(
            {"threadId": "t", "runId": "x", "messages": verdict["messages"] or []}
        ).messages
        resume = [ev.ResumeEntry(interrupt_id=interrupt_["id"], status="resolved", payload="yes")]
        second = [
            e
            async for e in ar.stream(
                agent, make_input("thread-t", "r2", resume=resume, messages=history)
            )
        ]
        out = wire(second)
        assert [] == [e for e in out if e["type"] == "TOOL_CALL_START"]
        [result] = [e for e in out if e["type"] == "TOOL_CALL_RESULT"]
        assert ("r1-tool-1", "paid") == (result["toolCallId"], result["content"])
        assert "Paid." == out[-1]["result"]
        verified(first, second, known=["r1-tool-1"])


class TestResumeInAnotherProcess:
    def test_a_new_process_resumes_from_the_sqlite_checkpointer(
        self, tmp_path: Any, redis_url: str
    ) -> None:
        """
        Run 1 and run 2 in two processes: only the SQLite file, the continuations' Redis
        and the client's answer (``buildResumeArray``'s entry) between them.
        """
        import json
        import os
        import uuid
        from pathlib import Path

        script = tmp_path / "worker.py"
        script.write_text(WORKER)
        db = str(tmp_path / "checkpoints.sqlite")
        prefix = f"t-{uuid.uuid4().hex}:"
        # This checkout's package first, whatever the venv has installed.
        here = Path(__file__).parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}

        def process(run_id: str, resume: list[dict[str, Any]]) -> dict[str, Any]:
            out = subprocess.run(
                [sys.executable, "-W", "error", str(script), db, run_id, json.dumps(resume),
                 redis_url, prefix],
                capture_output=True, text=True, check=True, env=env, timeout=120,
            )  # fmt: skip
            result: dict[str, Any] = json.loads(out.stdout)
            return result

        first = process("r1", [])
        [pending] = first["events"][-1]["outcome"]["interrupts"]
        second = process(
            "r2", [{"interruptId": pending["id"], "status": "resolved", "payload": 7}]
        )
        assert ([], [7]) == (first["seen"], second["seen"])
        assert {"type": "SUBAGENT_STARTED", "subagentRunId": "r1-sub-1", "name": "payments"} == (
            second["events"][1]
        )
        assert "answer: 7" == second["events"][-1]["result"]
        [verdict] = client_verify([{"events": first["events"] + second["events"]}])
        assert (True, None) == (verdict["ok"], verdict["error"])


class TestCancellation:
    async def test_run_cancel_stops_the_graph(self) -> None:
        """Run.cancel(): the node is cancelled, the subagent ends cancelled, the run too."""
        started = asyncio.Event()
        stopped = asyncio.Event()

        async def slow(state: MessagesState) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                stopped.set()
                raise
            return {}

        builder = StateGraph(MessagesState)
        builder.add_node("slow", slow)
        builder.add_edge(START, "slow")
        graph = builder.compile()

        async def agent(run: ar.Run) -> Any:
            async def stop() -> None:
                await started.wait()
                run.cancel()

            stopper = asyncio.create_task(stop())
            try:
                return await run_graph(graph, question(), name="g")
            finally:
                await stopper

        async with asyncio.timeout(10):
            events = [e async for e in ar.stream(agent, make_input(run_id="r"))]
        assert stopped.is_set()
        out = wire(events)
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "r-sub-1",
            "message": "cancelled",
            "code": "cancelled",
        } == out[-2]
        assert {"type": "cancelled"} == out[-1]["outcome"]
        assert_valid(events)


def test_importing_without_langgraph_names_the_extra() -> None:
    """Without langgraph, importing the adapter raises ImportError naming the extra."""
    code = (
        "import sys; sys.modules['langgraph'] = None\n"
        "try:\n    import ambient_runs.adapters.langgraph\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'ambient-runs[langgraph]'" in out
