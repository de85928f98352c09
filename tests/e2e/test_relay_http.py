"""
`ambient_runs.adapters.http.relay`: a remote AG-UI endpoint relayed as a subagent, end to end.

A remote `AgentApp` and the calling `AgentApp` both run under real uvicorn servers on
127.0.0.1; the official client (`@ag-ui/client` under Node) drives the caller, so every relayed
stream passes its whole pipeline.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
from support.node import aclient_run, assert_clean
from support.servers import E2E, serving

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.adapters import http
from ambient_runs.asgi import AgentApp
from ambient_runs.testing import assert_valid, make_input, wire

pytestmark = E2E

JsonDict = dict[str, Any]


class Remote:
    """The remote agent: what it does depends on the user's text; it records what it saw."""

    def __init__(self) -> None:
        self.inputs: list[ar.RunAgentInput] = []
        self.cancelled = asyncio.Event()
        self.streaming = asyncio.Event()

    async def __call__(self, run: ar.Run) -> Any:
        self.inputs.append(run.input)
        command = run.last_user_text()
        if command == "fail":
            ar.say("about to fail")
            raise ValueError("the remote broke")
        if command == "slow":
            try:
                with ar.message() as m:
                    while True:
                        m.write("tick ")
                        self.streaming.set()
                        await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if command == "pause":
            with ar.subagent("approver") as approver:
                entry = run.resume_for("approve-1")
                if entry is None:
                    with ar.tool_call("pay", id="call-1") as call:
                        call.args({"amount": 5})
                    raise ar.Interrupted(
                        ar.Interrupt(id="approve-1", reason="confirmation", tool_call_id="call-1")
                    )
                with ar.tool_call("pay", id="call-1") as call:  # reopened to answer it
                    call.result({"paid": entry.status == "resolved"})
                return {"approved": entry.payload, "subagent": approver.id}
        ar.say(f"remote says {command}")
        with ar.tool_call("lookup") as call:
            call.args({"q": command})
            call.result("found")
        with ar.subagent("helper"):
            ar.think("thinking")
        run.set_state({"remote": command})
        return {"echo": command}


def remote_input(run_id: str, text: str) -> ev.RunAgentInput:
    return make_input("remote-thread", run_id, user=text)


@pytest.fixture
async def remote() -> AsyncIterator[tuple[Remote, str]]:
    agent = Remote()
    async with serving(AgentApp(agent, expose_errors=True)) as url:
        yield agent, url


async def drive(caller: Any, runs: Sequence[Mapping[str, Any]], **kw: Any) -> Any:
    async with serving(AgentApp(caller)) as url, asyncio.timeout(60):
        return await aclient_run(url, runs, **kw)


def client_input(run_id: str, text: str = "go", **extra: Any) -> JsonDict:
    return {
        "input": {
            "threadId": "t",
            "runId": run_id,
            "messages": [{"id": f"{run_id}-u", "role": "user", "content": text}],
            **extra,
        }
    }


def under(sid: str, events: Sequence[JsonDict]) -> list[JsonDict]:
    return [
        e
        for e in events
        if (o := e.get("subagentRunId")) is not None and (o == sid or o.startswith(sid + "/"))
    ]


class TestRemoteRelay:
    async def test_two_concurrent_relays_of_colliding_remote_runs(
        self, remote: tuple[Remote, str]
    ) -> None:
        """Two relays of the remote under one remote runId (the same ids): both attributed."""
        agent, url = remote

        async def caller(run: ar.Run) -> Any:
            ar.say("asking twice")
            async with asyncio.TaskGroup() as tg:
                a = tg.create_task(http.relay(url, remote_input("same", "a"), name="remote a"))
                b = tg.create_task(http.relay(url, remote_input("same", "b"), name="remote b"))
            return [a.result(), b.result()]

        result = await drive(caller, [client_input("r1")])
        [run] = result["runs"]
        assert_clean(run)
        events = run["events"]
        assert [{"echo": "a"}, {"echo": "b"}] == run["runFinished"][0]["result"]
        started = [e for e in events if e["type"] == "SUBAGENT_STARTED"]
        assert [
            ("r1-sub-1", "remote a", None),
            ("r1-sub-1/same-sub-1", "helper", "r1-sub-1"),
            ("r1-sub-2", "remote b", None),
            ("r1-sub-2/same-sub-1", "helper", "r1-sub-2"),
        ] == sorted((e["subagentRunId"], e["name"], e.get("parentSubagentRunId")) for e in started)
        body = events[1:-1]
        own = [e for e in body if "subagentRunId" not in e]
        assert len(body) == len(own) + len(under("r1-sub-1", body)) + len(under("r1-sub-2", body))
        texts = {m["id"]: m.get("content") for m in result["messages"]}
        assert "remote says a" == texts["r1-sub-1/same-msg-1"]
        assert "remote says b" == texts["r1-sub-2/same-msg-1"]
        assert {"remote": "b"} == result["state"] or {"remote": "a"} == result["state"]
        assert ["r1", "r1"] == [i.parent_run_id for i in agent.inputs]

    async def test_a_failing_remote_fails_its_subagent_and_the_caller_goes_on(
        self, remote: tuple[Remote, str]
    ) -> None:
        """The remote's RUN_ERROR: SUBAGENT_ERROR, RelayError, and the calling run finishes."""
        _, url = remote

        async def caller(run: ar.Run) -> str:
            try:
                await http.relay(url, remote_input("f", "fail"), name="remote")
            except ar.RelayError as error:
                ar.say(f"the remote failed: {error.reason}")
                return error.code or ""
            return "no error"

        [run] = (await drive(caller, [client_input("r1")]))["runs"]
        assert_clean(run)
        errors = [e for e in run["events"] if e["type"] == "SUBAGENT_ERROR"]
        assert [("r1-sub-1", "the remote broke", "ValueError")] == [
            (e["subagentRunId"], e["message"], e["code"]) for e in errors
        ]
        assert "ValueError" == run["runFinished"][0]["result"]

    async def test_an_interrupt_and_its_resume_in_a_fresh_client_and_server(
        self, remote: tuple[Remote, str]
    ) -> None:
        """The remote pauses; a new client and a new caller server resume it from the ids."""
        agent, url = remote

        async def caller(run: ar.Run) -> Any:
            return await http.relay(url, remote_input(f"{run.run_id}-x", "pause"), name="payer")

        first = await drive(caller, [client_input("r1", "pause")])
        [run1] = first["runs"]
        assert_clean(run1)
        [pending] = first["pendingInterrupts"]
        assert {
            "id": "relay:payer:r1-sub-1:approve-1",
            "reason": "confirmation",
            "subagentRunId": "r1-sub-1/r1-x-sub-1",
            "toolCallId": "r1-sub-1/call-1",
        } == {k: v for k, v in pending.items() if k != "expiresAt"}
        assert pending["expiresAt"].endswith("Z")  # its continuation is kept server-side

        # Nothing survives but the client's conversation, its answer (buildResumeArray's
        # entry) and the process's continuation store.
        second = await drive(
            caller,
            [
                client_input(
                    "r2",
                    "pause",
                    resume=[
                        {"interruptId": pending["id"], "status": "resolved", "payload": "yes"}
                    ],
                )
            ],
            initial_messages=first["messages"],
        )
        [run2] = second["runs"]
        assert_clean(run2)
        assert [] == second["pendingInterrupts"]
        assert {"approved": "yes", "subagent": "r2-x-sub-1"} == run2["runFinished"][0]["result"]
        resumed = agent.inputs[-1]
        assert [("approve-1", "resolved", "yes")] == [
            (e.interrupt_id, e.status, e.payload) for e in resumed.resume or ()
        ]
        assert "call-1" in {
            c.id
            for m in resumed.messages
            if isinstance(m, ev.AssistantMessage)
            for c in m.tool_calls or ()
        }
        events = run2["events"]
        assert {"type": "SUBAGENT_STARTED", "subagentRunId": "r1-sub-1", "name": "payer"} == (
            events[1]
        )
        [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert "r1-sub-1/call-1" == result["toolCallId"]

    async def test_a_client_abort_cancels_the_remote_run(self, remote: tuple[Remote, str]) -> None:
        """The caller's client goes away mid-stream: the caller, then the remote, are cancelled."""
        agent, url = remote

        async def caller(run: ar.Run) -> Any:
            return await http.relay(url, remote_input("s", "slow"), name="slow one")

        [run] = (await drive(caller, [{**client_input("r1"), "abortAfterEvents": 8}]))["runs"]
        assert run["aborted"]
        async with asyncio.timeout(10):
            await agent.cancelled.wait()

    async def test_run_cancel_closes_the_remote_stream(self, remote: tuple[Remote, str]) -> None:
        """Run.cancel() mid-relay: the subagent ends cancelled, the run too, the remote stops."""
        agent, url = remote
        outcome: list[BaseException] = []

        async def caller(run: ar.Run) -> Any:
            async def stop_soon() -> None:
                await agent.streaming.wait()
                run.cancel()

            stopper = asyncio.create_task(stop_soon())
            try:
                return await http.relay(url, remote_input("s", "slow"), name="slow one")
            except BaseException as exc:
                outcome.append(exc)
                raise
            finally:
                await stopper

        async with asyncio.timeout(30):
            events = [e async for e in ar.stream(caller, make_input(run_id="r1"))]
            await agent.cancelled.wait()
        assert [ar.RunCancelledError] == [type(e) for e in outcome]
        out = wire(events)
        assert {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "r1-sub-1",
            "message": "cancelled",
            "code": "cancelled",
        } == out[-2]
        assert {"type": "cancelled"} == out[-1]["outcome"]
        assert_valid(events)


async def cut_stream(scope: Any, receive: Any, send: Any) -> None:
    """A broken endpoint: RUN_STARTED and an open message, then the body just ends."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/html":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"<html></html>"})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
    frames = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"x"}\n\n'
        b'data: {"type":"TEXT_MESSAGE_START","messageId":"m"}\n\n'
    )
    await send({"type": "http.response.body", "body": frames})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class TestTransportFailures:
    async def relayed(self, url: str) -> tuple[ar.RelayError, list[ev.BaseEvent]]:
        async with ar.Run(make_input(run_id="r1")) as run:
            with pytest.raises(ar.RelayError) as caught:
                await http.relay(url, remote_input("x", "hi"), name="remote")
        assert_valid(list(run.events))
        return caught.value, list(run.events)

    async def test_a_stream_cut_without_a_terminal_event(self) -> None:
        """The open message is closed and the subagent fails with code truncated."""
        async with serving(cut_stream) as url:
            error, events = await self.relayed(url)
        assert "truncated" == error.code
        assert ["TEXT_MESSAGE_END", "SUBAGENT_ERROR"] == [e.TYPE.value for e in events[-3:-1]]

    async def test_not_an_event_stream(self) -> None:
        """A 200 that is not text/event-stream is refused before anything is relayed."""
        async with serving(cut_stream, "/html") as url:
            error, _ = await self.relayed(url)
        assert ("invalid_stream", True) == (error.code, "text/html" in error.reason)

    async def test_an_http_error_status(self, remote: tuple[Remote, str]) -> None:
        """A 422 (an input the remote refuses) fails the subagent with code http_422."""
        _, url = remote
        async with ar.Run(make_input(run_id="r1")):
            with pytest.raises(ar.RelayError) as caught:
                await http.relay(url, {"threadId": "t", "runId": "x", "messages": []}, name="r",
                                 headers={"content-type": "text/plain"})  # fmt: skip
        assert "http_415" == caught.value.code
        assert "HTTP 415" in caught.value.reason

    async def test_an_unreachable_endpoint(self) -> None:
        """Nothing listens: code unreachable."""
        error, _ = await self.relayed(f"http://127.0.0.1:{free_port()}/agent")
        assert "unreachable" == error.code

    @pytest.mark.parametrize("expose", [False, True])
    async def test_the_url_and_the_error_body_stay_on_the_server(
        self, remote: tuple[Remote, str], expose: bool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The client reads the status only, unless expose_errors; the log keeps the detail."""
        _, url = remote
        async with ar.Run(make_input(run_id="r1"), expose_errors=expose) as run:
            with pytest.raises(ar.RelayError):
                await http.relay(url, {"threadId": "t", "runId": "x", "messages": []}, name="r",
                                 headers={"content-type": "text/plain"})  # fmt: skip
        (failed,) = [e for e in run.events if isinstance(e, ev.SubagentErrorEvent)]
        assert failed.message.startswith("HTTP 415 from ")
        assert (url in failed.message) is expose
        assert any(url in record.getMessage() for record in caplog.records)

    async def test_an_unreachable_endpoints_address_stays_on_the_server(self) -> None:
        url = f"http://127.0.0.1:{free_port()}/agent"
        error, events = await self.relayed(url)
        (failed,) = [e for e in events if isinstance(e, ev.SubagentErrorEvent)]
        assert (failed.message, failed.code) == ("cannot reach the remote agent (ConnectError)",
                                                 "unreachable")  # fmt: skip
        assert "127.0.0.1" not in error.reason

    def test_importing_without_httpx_names_the_extra(self) -> None:
        """Without httpx, importing the adapter raises ImportError naming the extra."""
        code = (
            "import sys; sys.modules['httpx'] = None\n"
            "try:\n    import ambient_runs.adapters.http\n"
            "except ImportError as e:\n    print(e)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert "pip install 'ambient-runs[http]'" in out


class TestClientOption:
    async def test_a_given_client_is_used_with_its_own_timeouts(self) -> None:
        """client=: the request goes through it, with its timeouts unless timeouts= is given."""
        import httpx

        seen: list[dict[str, Any]] = []
        stream = b"".join(
            b"data: " + ar.encode_json(e) + b"\n\n"
            for e in (
                ev.RunStartedEvent(thread_id="t", run_id="x"),
                ev.RunFinishedEvent(thread_id="t", run_id="x", result="ok"),
            )
        )

        def handler(request: httpx.Request) -> httpx.Response:
            seen.append(request.extensions["timeout"])
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=stream
            )

        own = httpx.Timeout(3.0)
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler), timeout=own)
        url = "http://remote/agent"
        timeouts = httpx.Timeout(1.0, read=2.0)
        async with client, ar.Run(make_input(run_id="r1")):
            result = await http.relay(url, remote_input("x", "hi"), name="a", client=client)
            await http.relay(
                url, remote_input("y", "hi"), name="b", client=client, timeouts=timeouts
            )
        assert "ok" == result
        assert [own.as_dict(), httpx.Timeout(1.0, read=2.0).as_dict()] == seen
