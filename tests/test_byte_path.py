"""
The byte path has one semantics: that of the object path, encoded afterwards.

When an `ambient_runs.stream` is consumed by `sse.frames` (what `AgentApp` and
the README's Starlette route do) and no transformer or tap wants objects, a
message's deltas go to the stream as finished SSE frames (``Pipeline.frames``),
verified by construction. Each random program here runs twice: once through
that byte path, once with the stream iterated as objects and every event
encoded with `sse.encode` afterwards. The bytes must be identical, what the
program saw raised must be identical, and the object stream must pass the
strict `Verifier`.

The programs are `tests/support/programs.py`'s (nesting, subagents that fail or are
left open, tool calls, reasoning, state, steps, activities), interleaved with
steps aimed at the byte path's refusals: deltas JSON must escape or cannot
carry (a lone surrogate), a TEXT_MESSAGE_END sent by hand for a handle's
message, a chunk lane opened on the message's owner, explicit message ids, a
tap added and removed mid-run (the path switches off and on), and writes from
a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.programs import INPUT, _drive, programs

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs.verify import Verifier

#: Deltas: plain, non-ASCII, escapes, empty, and ones UTF-8 cannot carry.
_DELTAS = st.sampled_from(
    ["x", "", "café", '"q"', "tab\t", "line\n", "\\", "\u2028", "東京", "\ud800", "a\udfffb"]
) | st.text(max_size=6)

#: A byte-path step: (operation, a choice among the open messages, a delta).
_steps = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 100), _DELTAS), max_size=25)


def _write_seen(message: ar.MessageHandle, delta: str, seen: list[str]) -> None:
    """A worker thread's write: what it raised is recorded like the rest."""
    try:
        message.write(delta)
    except Exception as error:
        seen.append(f"thread:{type(error).__name__}:{getattr(error, 'rule', None)}")


def _message_step(
    op: int,
    pick: int,
    delta: str,
    messages: list[ar.MessageHandle],
    open_message: Callable[..., ar.MessageHandle],
    explicit_id: str,
) -> bool:
    """Steps 0 to 3 of each program: open a message (every third: *explicit_id*), write, end."""
    message = messages[pick % len(messages)] if messages else None
    if op == 0:
        explicit = {"id": explicit_id} if pick % 3 == 0 else {}
        messages.append(open_message(**explicit))
    elif op in (1, 2) and message is not None:
        message.write(delta)
    elif op == 3 and message is not None:
        message.end()
    else:
        return False
    return True


async def _byte_steps(run: ar.Run, steps: list[tuple[int, int, str]], seen: list[str]) -> None:
    owners: list[Any] = [run]
    messages: list[ar.MessageHandle] = []
    tapped: list[ev.BaseEvent] = []
    taps: list[Any] = []
    for op, pick, delta in steps:
        owners = [o for o in owners if o is run or not o.ended]
        owner = owners[pick % len(owners)]
        message = messages[pick % len(messages)] if messages else None
        try:
            if _message_step(op, pick, delta, messages, owner.message, f"explicit-{pick}"):
                continue
            if op == 4 and message is not None:
                end = ev.TextMessageEndEvent(message_id=message.id, subagent_run_id=message.owner)
                ar.emit(end)
                others = [o.id for o in owners if o is not run and o.id != message.owner]
                if pick % 2 and (message.owner is not None or others):
                    # The same id reopened by hand under another owner.
                    other = None if message.owner is not None else others[0]
                    ar.emit(ev.TextMessageStartEvent(message_id=message.id, subagent_run_id=other))
                message.write(delta)  # its handle is open, its message is not (or not its)
            elif op == 5 and message is not None:
                ar.emit(
                    ev.TextMessageChunkEvent(
                        message_id=f"chunk-{pick}", delta="c", subagent_run_id=message.owner
                    )
                )
                message.write(delta)  # a chunk lane is open on its owner
                ar.emit(ev.TextMessageChunkEvent(delta="d", subagent_run_id=message.owner))
            elif op == 6:
                if taps:
                    run.remove_tap(taps.pop())
                else:
                    taps.append(tapped.append)
                    run.add_tap(taps[-1])
            elif op == 7 and message is not None:
                worker = threading.Thread(target=_write_seen, args=(message, delta, seen))
                worker.start()
                worker.join()
            elif op == 7:
                owners.append(owner.subagent(f"bytes{pick % 3}").start())
            elif op == 8:
                await asyncio.sleep(0)  # the consumer takes what is buffered, and waits again
        except Exception as error:  # what the program saw raised is compared too
            seen.append(f"{op}:{type(error).__name__}:{getattr(error, 'rule', None)}")


def _agent(
    program: list[tuple[int, int, int]], steps: list[tuple[int, int, str]], seen: list[str]
) -> Callable[[ar.Run], Awaitable[None]]:
    async def agent(run: ar.Run) -> None:
        await _byte_steps(run, steps, seen)
        _drive(run, program, "success")
        await _byte_steps(run, steps, seen)

    return agent


async def _through_bytes(agent: Any, **options: Any) -> list[bytes]:
    """The frames of *agent*'s stream read by `sse.frames`: the byte path where it applies."""
    return [frame async for frame in sse.frames(ar.stream(agent, INPUT, **options))]


async def _through_objects(agent: Any, **options: Any) -> tuple[bytes, list[ev.BaseEvent]]:
    """The events of *agent*'s stream read as objects, and their frames encoded afterwards."""
    events = [event async for event in ar.stream(agent, INPUT, **options)]
    return b"".join(sse.encode(event) for event in events), events


@settings(max_examples=60, deadline=None)
@given(programs, _steps)
def test_the_byte_path_writes_the_object_paths_bytes(
    program: list[tuple[int, int, int]], steps: list[tuple[int, int, str]]
) -> None:
    seen_bytes: list[str] = []
    seen_objects: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ar.LeftOpenWarning)  # part of the point
        warnings.simplefilter("ignore", ar.HandleWarning)
        data = b"".join(asyncio.run(_through_bytes(_agent(program, steps, seen_bytes))))
        expected, events = asyncio.run(_through_objects(_agent(program, steps, seen_objects)))
    assert data == expected
    assert seen_bytes == seen_objects
    assert Verifier(strict=True).verify(events) == ()


def test_deltas_go_out_as_frames_only_where_nobody_asks_for_objects() -> None:
    """The byte path is taken (frames in the buffer), and not once a tap wants objects."""
    kinds: list[list[str]] = []

    async def agent(run: ar.Run) -> None:
        buffer = stream._channel.buffer
        with ar.message() as message:
            message.write("one")
            kinds.append([type(item).__name__ for item in buffer])
            run.add_tap(lambda event: None)
            message.write("two")
            kinds.append([type(item).__name__ for item in buffer])

    stream = ar.stream(agent, INPUT)

    async def consume() -> list[bytes]:
        return [frame async for frame in sse.frames(stream)]

    frames = asyncio.run(consume())
    assert kinds[0][-1] == "bytes"
    assert kinds[1][-1] == "TextMessageContentEvent"
    assert frames[2] == sse.encode(
        ev.TextMessageContentEvent(message_id=stream.run.run_id + "-msg-1", delta="one")
    )


def test_a_recorded_history_holds_the_deltas_the_byte_path_sent() -> None:
    """record_messages=True: deltas that became frames directly are in run.messages too."""
    kinds: list[str] = []

    async def agent(run: ar.Run) -> None:
        buffer = stream._channel.buffer
        with ar.message() as message:
            for word in ("byte ", "path ", "text"):
                message.write(word)
            kinds.append(type(buffer[-1]).__name__)

    stream = ar.stream(agent, INPUT, record_messages=True)

    async def consume() -> list[bytes]:
        return [frame async for frame in sse.frames(stream)]

    asyncio.run(consume())
    assert kinds == ["bytes"]  # the deltas took the byte path
    [said] = [m for m in stream.run.messages if isinstance(m, ev.AssistantMessage)]
    assert said.content == "byte path text"


def test_a_thread_writing_while_the_consumer_waits_wakes_it() -> None:
    """
    Frames that went straight into the buffer stop doing so once the consumer waits.

    A plain agent runs in a worker thread and, after each delta, waits until
    the consumer has seen it: the consumer takes everything and waits again
    each time, and the next delta must wake it (through the stream's sink, not
    the buffer's ``append``). A missed wake-up shows as a delta the consumer
    did not see within seconds.
    """
    words = [f"w{n}" for n in range(6)]
    seen = {word: threading.Event() for word in words}
    missed: list[str] = []

    def agent(run: ar.Run) -> None:
        with ar.message() as message:
            for word in words:
                message.write(word)
                if not seen[word].wait(timeout=10):
                    missed.append(word)

    async def consume() -> list[bytes]:
        frames = []
        async for frame in sse.frames(ar.stream(agent, INPUT)):
            frames.append(frame)
            if b'"TEXT_MESSAGE_CONTENT"' in frame:
                seen[json.loads(frame[6:])["delta"]].set()
        return frames

    frames = asyncio.run(consume())
    assert missed == []
    deltas = [json.loads(f[6:])["delta"] for f in frames if b'"TEXT_MESSAGE_CONTENT"' in f]
    assert deltas == words
    assert json.loads(frames[-1][6:])["type"] == "RUN_FINISHED"


def test_max_buffered_counts_frames_that_went_straight_into_the_buffer() -> None:
    """`statistics().max_buffered` sees a burst that bypassed the stream's sink."""

    async def agent(run: ar.Run) -> None:
        with ar.message() as message:
            for n in range(100):
                message.write(f"{n} ")
            await asyncio.sleep(0)  # the consumer takes the burst; nothing pushed after it

    async def consume() -> tuple[int, int]:
        stream = ar.stream(agent, INPUT)
        count = 0
        async for _ in sse.frames(stream):
            count += 1
        return count, stream.statistics().max_buffered

    count, most = asyncio.run(consume())
    assert count == 104
    # RUN_STARTED went out alone, before the agent ran; the start and the 100 deltas
    # waited together.
    assert most == 101


class _Boom(Exception):
    """A task's subagent failing on purpose."""


#: Per task, its steps: (operation, a pick, a delta); 1 to 4 tasks run at once.
_task_steps = st.lists(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 100), _DELTAS), max_size=14),
    min_size=1,
    max_size=4,
)


async def _task(index: int, steps: list[tuple[int, int, str]], seen: list[str]) -> None:
    """One concurrent task: a subagent of its own, messages, awaits, failures, interrupts."""
    with ar.subagent(f"task{index}"):
        messages: list[ar.MessageHandle] = []
        for op, pick, delta in steps:
            try:
                # Explicit ids may clash between tasks: the refusal is compared too.
                if _message_step(op, pick, delta, messages, ar.message, f"shared-{pick % 4}"):
                    continue
                if op == 4:
                    await asyncio.sleep(0)  # the other tasks, and the consumer, run
                elif op == 5 and pick % 4 == 0:
                    raise _Boom(delta)
                elif op == 6 and pick % 4 == 0:
                    raise ar.Interrupted(ar.interrupt("approval", message=f"task {index}?"))
            except (ar.ProtocolError, ar.InvalidEventError, ar.HandleClosedError) as error:
                seen.append(f"{index}:{op}:{type(error).__name__}:{getattr(error, 'rule', None)}")


def _concurrent_agent(
    programs_: list[list[tuple[int, int, str]]], seen: list[str]
) -> Callable[[ar.Run], Awaitable[None]]:
    async def agent(run: ar.Run) -> None:
        tasks = [_task(index, steps, seen) for index, steps in enumerate(programs_)]
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        seen.extend(type(outcome).__name__ for outcome in outcomes)

    return agent


@settings(max_examples=60, deadline=None)
@given(_task_steps)
def test_concurrent_tasks_write_the_same_bytes_both_ways(
    programs_: list[list[tuple[int, int, str]]],
) -> None:
    """Concurrent subagent tasks (awaits, failures, interrupts, clashing ids): one semantics."""
    seen_bytes: list[str] = []
    seen_objects: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ar.LeftOpenWarning)
        data = b"".join(asyncio.run(_through_bytes(_concurrent_agent(programs_, seen_bytes))))
        expected, events = asyncio.run(
            _through_objects(_concurrent_agent(programs_, seen_objects))
        )
    assert data == expected
    assert seen_bytes == seen_objects
    assert Verifier(strict=True).verify(events) == ()


# ---------------------------------------------------------------------- decorated subagent calls
#
# A decorated call's SUBAGENT_STARTED and plain SUBAGENT_FINISHED are frames built by
# construction on the byte path. These programs are trees of calls: decorated
# coroutines, functions, generators and async generators nested in each other and in
# `with` blocks, bodies that return (nothing, a JSON value, a value with no JSON
# form), raise, or end their own invocation; explicit ids, of the minted shape
# (``run-sub-<n>``, which collide with minted ones) and not; decorated specs with a
# fixed id or parent; gathered and spawned tasks (which may start after their
# parent ended), calls from threads, messages left open, and taps and transformers
# switching the path on and off mid-run.

#: Explicit subagent ids: the minted shape of this run (some collide), and others.
_IDS = st.sampled_from(["run-sub-1", "run-sub-2", "run-sub-3", "run-sub-6", "run-sub-01", "x-1"])
#: How a body ends.
_ENDINGS = st.sampled_from(["none", "value", "opaque", "raise", "finish", "fail"])

_leaf = st.one_of(
    st.tuples(st.just("say"), _DELTAS),
    st.tuples(st.just("open")),  # a message left open: the invocation's end closes it
    st.tuples(st.just("sleep")),
    st.tuples(st.just("tap")),
    st.tuples(st.just("transformer")),
    # Raw events about the ambient subagent, which its plain end must notice: a
    # message it owns left open, its own SUBAGENT_FINISHED, a chunk lane on it.
    st.tuples(st.just("raw_open")),
    st.tuples(st.just("raw_finish")),
    st.tuples(st.just("chunk")),
    # A transformer hiding `with` blocks' SUBAGENT_STARTED from the verifier: once it is
    # removed, a call inside such a block names a parent the verifier does not know.
    st.tuples(st.just("hider")),
)


def _calls(body: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    kinds = st.sampled_from(["coroutine", "function", "generator", "agen", "fixed", "linked"])
    return st.one_of(
        st.tuples(st.just("call"), kinds, body, _ENDINGS),
        st.tuples(st.just("with"), st.none() | _IDS, body, _ENDINGS),
        st.tuples(st.just("gather"), st.lists(body, max_size=3)),
        st.tuples(st.just("spawn"), body),
        st.tuples(st.just("thread"), body, _ENDINGS),
    )


_bodies = st.recursive(
    st.lists(_leaf, max_size=3),
    lambda body: st.lists(_calls(body) | _leaf, max_size=6),
    max_leaves=40,
)
#: A whole agent: calls first of all.
_trees = st.lists(_calls(_bodies), min_size=1, max_size=8)


class _Raised(Exception):
    """A body failing on purpose; its caller records it and goes on."""


class _Opaque:
    """A return value with no JSON form (a `ResultWarning`, no result)."""


class _Program:
    """What one run of a call tree shares: the run, what was seen raised, spawned tasks."""

    def __init__(self, run: ar.Run) -> None:
        self.run = run
        self.seen: list[str] = []
        self.tasks: list[asyncio.Future[Any]] = []
        self.taps: list[Callable[[ev.BaseEvent], object]] = []
        self.transformers: list[Callable[[ev.BaseEvent], ev.BaseEvent]] = []
        self.hiders: list[Callable[[ev.BaseEvent], ev.BaseEvent | None]] = []
        self.raw = 0

    def record(self, where: str, error: BaseException) -> None:
        self.seen.append(f"{where}:{type(error).__name__}:{getattr(error, 'rule', None)}")

    def toggle_tap(self) -> None:
        _toggle(self.taps, self.run.add_tap, self.run.remove_tap, lambda event: None)

    def toggle_transformer(self) -> None:
        run = self.run
        _toggle(self.transformers, run.add_transformer, run.remove_transformer, lambda e: e)

    def toggle_hider(self) -> None:
        run = self.run
        _toggle(self.hiders, run.add_transformer, run.remove_transformer, _hide_blocks)


def _toggle(
    held: list[Any], add: Callable[[Any], None], remove: Callable[[Any], None], item: Any
) -> None:
    """Remove the last of *held* (the path switches back), or add *item* when none is held."""
    if held:
        remove(held.pop())
    else:
        held.append(item)
        add(item)


def _hide_blocks(event: ev.BaseEvent) -> ev.BaseEvent | None:
    hidden = isinstance(event, ev.SubagentStartedEvent) and event.name == "block"
    return None if hidden else event


def _ending(ending: str, n: int) -> Any:
    """End a body as *ending* says: its return value, or what it raises or does itself."""
    me = ar.current_subagent()
    if ending == "value":
        return {"n": n, "s": "é"}
    if ending == "opaque":
        return _Opaque()
    if ending == "raise":
        raise _Raised(n)
    if ending == "finish" and me is not None:
        me.finish()
    elif ending == "fail" and me is not None:
        me.fail(f"failed {n}", code="boom")
    return None


def _leaf_step(step: tuple[Any, ...], program: _Program) -> None:
    if step[0] == "say":
        ar.say(step[1])
    elif step[0] == "open":
        ar.message().write("left open")
    elif step[0] == "tap":
        program.toggle_tap()
    elif step[0] == "transformer":
        program.toggle_transformer()
    elif step[0] == "hider":
        program.toggle_hider()
    elif (me := ar.current_subagent()) is not None:
        program.raw += 1
        if step[0] == "raw_open":
            ar.emit(
                ev.TextMessageStartEvent(message_id=f"raw{program.raw}", subagent_run_id=me.id)
            )
        elif step[0] == "raw_finish":
            ar.emit(ev.SubagentFinishedEvent(subagent_run_id=me.id or ""))
        else:
            ar.emit(
                ev.TextMessageChunkEvent(
                    message_id=f"raw{program.raw}", delta="c", subagent_run_id=me.id
                )
            )


def _sync_body(body: list[Any], program: _Program) -> None:
    """A body run in a sync scope: no awaiting (gathers and spawns are skipped)."""
    for step in body:
        try:
            if step[0] == "call":
                _call_sync(step[1], step[2], step[3], program)
            elif step[0] == "with":
                _with_block(step[1], step[2], step[3], program)
            elif step[0] == "thread":
                _in_thread(step[1], step[2], program)
            else:
                _leaf_step(step, program)
        except Exception as error:
            program.record(step[0], error)


async def _async_body(body: list[Any], program: _Program) -> None:
    for step in body:
        try:
            if step[0] == "call":
                await _call_async(step[1], step[2], step[3], program)
            elif step[0] == "with":
                _with_block(step[1], step[2], step[3], program)
            elif step[0] == "thread":
                _in_thread(step[1], step[2], program)
            elif step[0] == "gather":
                calls = [_coroutine(inner, "none", program, len(inner)) for inner in step[1]]
                for outcome in await asyncio.gather(*calls, return_exceptions=True):
                    if isinstance(outcome, BaseException):
                        program.record("gather", outcome)
            elif step[0] == "spawn":
                program.tasks.append(
                    asyncio.ensure_future(_coroutine(step[1], "none", program, 0))
                )
            elif step[0] == "sleep":
                await asyncio.sleep(0)
            else:
                _leaf_step(step, program)
        except Exception as error:
            program.record(step[0], error)


@ar.subagent("coroutine", description="a coroutine")
async def _coroutine(body: list[Any], ending: str, program: _Program, n: int) -> Any:
    await _async_body(body, program)
    return _ending(ending, n)


@ar.subagent("function")
def _function(body: list[Any], ending: str, program: _Program, n: int) -> Any:
    _sync_body(body, program)
    return _ending(ending, n)


@ar.subagent('generator "quoted"\n')
def _generator(body: list[Any], ending: str, program: _Program, n: int) -> Any:
    yield 1
    _sync_body(body, program)
    yield 2
    return _ending(ending, n)


@ar.subagent("agen", parent_tool_call_id="call-1", parent_message_id="msg-1")
async def _agen(body: list[Any], ending: str, program: _Program, n: int) -> Any:
    yield 1
    await _async_body(body, program)
    _ending(ending, n)
    yield 2


#: A spec with a fixed id (of the minted shape): its second call is refused.
_fixed = ar.subagent("fixed", id="run-sub-4")(_function.__wrapped__)  # type: ignore[attr-defined]
#: A spec with an explicit parent: never the byte path's to check.
_linked = ar.subagent_with(
    ev.SubagentStartedEvent(subagent_run_id="run-sub-9", name="linked")
).spec


def _call_sync(kind: str, body: list[Any], ending: str, program: _Program) -> None:
    n = len(body)
    if kind in ("generator", "agen"):
        kind = "function" if kind == "agen" else kind
    if kind == "generator":
        try:
            for _ in _generator(body, ending, program, n):
                pass
        except _Raised as error:
            program.record("generator", error)
        return
    fn = {"function": _function, "fixed": _fixed, "coroutine": _function}.get(kind, _function)
    try:
        fn(body, ending, program, n)
    except _Raised as error:
        program.record(kind, error)


async def _call_async(kind: str, body: list[Any], ending: str, program: _Program) -> None:
    n = len(body)
    try:
        if kind == "coroutine":
            await _coroutine(body, ending, program, n)
        elif kind == "agen":
            async for _ in _agen(body, ending, program, n):
                pass
        elif kind == "linked":
            await _linked(_coroutine.__wrapped__)(body, ending, program, n)  # type: ignore[attr-defined]
        else:
            _call_sync(kind, body, ending, program)
    except _Raised as error:
        program.record(kind, error)


def _with_block(sid: str | None, body: list[Any], ending: str, program: _Program) -> None:
    try:
        with ar.subagent("block", id=sid):
            _sync_body(body, program)
            _ending(ending, len(body))
    except _Raised as error:
        program.record("with", error)


def _in_thread(body: list[Any], ending: str, program: _Program) -> None:
    """A decorated call from a worker thread (started and joined: a deterministic order)."""

    def work() -> None:
        try:
            _function(body, ending, program, len(body))
        except Exception as error:
            program.record("thread", error)

    worker = ar.Thread(target=work)
    worker.start()
    worker.join()


#: A plain decorated call.
_CALL = ("call", "coroutine", [], "none")


def _tree_agent(
    body: list[Any], seen: list[str], runs: list[ar.Run]
) -> Callable[[ar.Run], Awaitable[None]]:
    async def agent(run: ar.Run) -> None:
        runs.append(run)
        program = _Program(run)
        await _async_body(body, program)
        while program.tasks:
            tasks, program.tasks = program.tasks, []
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, BaseException):
                    program.record("spawned", outcome)
        seen.extend(program.seen)

    return agent


@settings(max_examples=150, deadline=None)
@given(_trees, st.booleans(), st.booleans())
# A call whose parent the verifier never saw start (a transformer hid it, then left).
@example(
    [("call", "coroutine", [("hider",), ("with", "x-1", [("hider",), _CALL], "none")], "none")],
    False,
    True,
)
# Explicit ids of the minted shape ahead of the counter: minted ones collide with them.
@example(
    [("with", "run-sub-2", [], "none"), ("with", "run-sub-6", [_CALL, _CALL], "none")]
    + [_CALL] * 6,
    False,
    True,
)
def test_decorated_subagent_calls_write_the_object_paths_bytes(
    body: list[Any], record: bool, verify: bool
) -> None:
    options = {"record_messages": record, "verify": verify}
    seen_bytes: list[str] = []
    seen_objects: list[str] = []
    runs: list[ar.Run] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ar.LeftOpenWarning)
        warnings.simplefilter("ignore", ar.HandleWarning)
        warnings.simplefilter("ignore", ar.ResultWarning)
        frames = asyncio.run(_through_bytes(_tree_agent(body, seen_bytes, runs), **options))
        expected, events = asyncio.run(
            _through_objects(_tree_agent(body, seen_objects, runs), **options)
        )
    assert b"".join(frames) == expected
    assert len(frames) == len(events)
    assert seen_bytes == seen_objects
    assert runs[0].messages == runs[1].messages
    if verify:
        assert Verifier(strict=True).verify(events) == ()


def test_a_decorated_call_goes_out_as_two_frames() -> None:
    """On the byte path a decorated call's SUBAGENT_STARTED and _FINISHED are bytes."""
    kinds: list[str] = []

    @ar.subagent("worker")
    async def worker() -> None:
        kinds.append(type(stream._channel.buffer[-1]).__name__)

    @ar.subagent("outer")
    async def outer() -> None:
        await worker()
        kinds.append(type(stream._channel.buffer[-1]).__name__)

    async def agent(run: ar.Run) -> None:
        await outer()
        kinds.append(type(stream._channel.buffer[-1]).__name__)

    stream = ar.stream(agent, INPUT)

    async def consume() -> list[bytes]:
        return [frame async for frame in sse.frames(stream)]

    frames = asyncio.run(consume())
    assert kinds == ["bytes", "bytes", "bytes"]
    assert frames[1:5] == [
        sse.encode(ev.SubagentStartedEvent(subagent_run_id="run-sub-1", name="outer")),
        sse.encode(
            ev.SubagentStartedEvent(
                subagent_run_id="run-sub-2", name="worker", parent_subagent_run_id="run-sub-1"
            )
        ),
        sse.encode(ev.SubagentFinishedEvent(subagent_run_id="run-sub-2")),
        sse.encode(ev.SubagentFinishedEvent(subagent_run_id="run-sub-1")),
    ]


@pytest.mark.parametrize("run_id", ['say "hi"\\now', "tab\there", "plain-é"])
def test_decorated_calls_under_a_run_id_json_escapes_write_the_object_paths_bytes(
    run_id: str,
) -> None:
    """A minted id is written as is only when the run id needs no escaping; else escaped."""
    kinds: list[str] = []

    @ar.subagent("worker")
    async def worker() -> None:
        if streams:  # the byte path's SUBAGENT_STARTED is the last thing buffered
            kinds.append(type(streams[-1]._channel.buffer[-1]).__name__)

    @ar.subagent("outer")
    async def outer() -> None:
        await worker()

    async def agent(run: ar.Run) -> None:
        await outer()
        await worker()

    given = attrs.evolve(INPUT, run_id=run_id)
    streams = [ar.stream(agent, given)]
    frames = asyncio.run(_collect(sse.frames(streams[0])))
    streams.clear()
    events = asyncio.run(_collect(ar.stream(agent, given)))
    assert kinds == ["bytes", "bytes"]
    assert frames == [sse.encode(event) for event in events]
    assert [run_id + "-sub-1", run_id + "-sub-2", run_id + "-sub-3"] == [
        e.subagent_run_id for e in events if isinstance(e, ev.SubagentStartedEvent)
    ]
    assert Verifier(strict=True).verify(events) == ()


async def _collect(items: Any) -> list[Any]:
    return [item async for item in items]


def test_decorated_calls_racing_in_threads_stay_verified() -> None:
    """Threads calling decorated functions at once: every frame is its event's, verified."""

    @ar.subagent("racer")
    def racer(depth: int) -> None:
        ar.say("x")
        if depth:
            racer(depth - 1)

    async def agent(run: ar.Run) -> None:
        with ar.ContextThreadPoolExecutor(max_workers=4) as pool:
            for future in [pool.submit(racer, n % 3) for n in range(200)]:
                future.result()

    async def consume() -> list[bytes]:
        return [frame async for frame in sse.frames(ar.stream(agent, INPUT))]

    frames = asyncio.run(consume())
    events = [ar.from_wire(json.loads(frame[len(b"data: ") : -2])) for frame in frames]
    assert [sse.encode(event) for event in events] == frames
    assert Verifier(strict=True).verify(events) == ()
    started = [e.subagent_run_id for e in events if isinstance(e, ev.SubagentStartedEvent)]
    assert sorted(started) == sorted(f"run-sub-{n}" for n in range(1, 400))  # 67·1 + 67·2 + 66·3


def test_the_verifiers_subagent_state_does_not_grow_per_call() -> None:
    """Ended minted ids are implied by the counter: nothing is kept per finished call."""
    views: list[Any] = []

    @ar.subagent("inner")
    def inner() -> None:
        ar.say("x")

    @ar.subagent("outer")
    async def outer() -> None:
        inner()

    async def agent(run: ar.Run) -> None:
        for _ in range(300):
            await outer()
        view = run.pipeline.subagent_view
        views.append((dict(view.active), view.started, view.above, dict(view.owned), view.upto))

    async def consume() -> list[bytes]:
        return [frame async for frame in sse.frames(ar.stream(agent, INPUT))]

    asyncio.run(consume())
    assert views == [({}, None, None, {}, 600)]


def test_a_run_id_the_verifier_was_told_differently_takes_the_object_path() -> None:
    """Minted ids are the verifier's minted shape only under the runId RUN_STARTED carried."""

    def renamed(event: ev.BaseEvent) -> ev.BaseEvent:
        if isinstance(event, ev.RunStartedEvent | ev.RunFinishedEvent):
            return attrs.evolve(event, run_id="renamed")
        return event

    @ar.subagent("worker")
    async def worker() -> None:
        return None

    async def agent(run: ar.Run) -> None:
        run.remove_transformer(renamed)
        for _ in range(3):
            await worker()
        with ar.subagent("explicit", id="renamed-sub-2"):  # not one the run minted
            await worker()
        run.add_transformer(renamed)

    async def through_bytes() -> bytes:
        stream = ar.stream(agent, INPUT, transformers=[renamed])
        return b"".join([frame async for frame in sse.frames(stream)])

    async def through_objects() -> list[ev.BaseEvent]:
        return [event async for event in ar.stream(agent, INPUT, transformers=[renamed])]

    events = asyncio.run(through_objects())
    assert asyncio.run(through_bytes()) == b"".join(sse.encode(event) for event in events)
    assert Verifier(strict=True).verify(events) == ()
    assert sum(isinstance(e, ev.SubagentStartedEvent) for e in events) == 5
