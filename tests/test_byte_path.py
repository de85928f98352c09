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

The programs are `tests/_programs.py`'s (nesting, subagents that fail or are
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

from hypothesis import given, settings
from hypothesis import strategies as st

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs import sse
from ambient_runs.verify import Verifier
from tests._programs import INPUT, _drive, programs

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
            if op == 0:
                explicit = {"id": f"explicit-{pick}"} if pick % 3 == 0 else {}
                messages.append(owner.message(**explicit))
            elif op in (1, 2) and message is not None:
                message.write(delta)
            elif op == 3 and message is not None:
                message.end()
            elif op == 4 and message is not None:
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


async def _through_bytes(agent: Any) -> bytes:
    return b"".join([frame async for frame in sse.frames(ar.stream(agent, INPUT))])


async def _through_objects(agent: Any) -> tuple[bytes, list[ev.BaseEvent]]:
    events = [event async for event in ar.stream(agent, INPUT)]
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
        data = asyncio.run(_through_bytes(_agent(program, steps, seen_bytes)))
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
    # RUN_STARTED woke the consumer; it, the start and the 100 deltas waited together.
    assert most == 102


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
            message = messages[pick % len(messages)] if messages else None
            try:
                if op == 0:
                    # Explicit ids may clash between tasks: the refusal is compared too.
                    explicit = {"id": f"shared-{pick % 4}"} if pick % 3 == 0 else {}
                    messages.append(ar.message(**explicit))
                elif op in (1, 2) and message is not None:
                    message.write(delta)
                elif op == 3 and message is not None:
                    message.end()
                elif op == 4:
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
        data = asyncio.run(_through_bytes(_concurrent_agent(programs_, seen_bytes)))
        expected, events = asyncio.run(
            _through_objects(_concurrent_agent(programs_, seen_objects))
        )
    assert data == expected
    assert seen_bytes == seen_objects
    assert Verifier(strict=True).verify(events) == ()
