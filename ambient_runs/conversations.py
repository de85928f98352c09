"""
Conversation threads: where a server keeps a thread's messages between its runs.

`ambient_runs.asgi.AgentApp` (``threads=``) uses a `ThreadStore` so that every
run of a thread starts from the whole conversation, whatever the client sends:

Under a store every run records its messages (``record_messages=True``):

1. before the run, it **loads** the thread (``await threads.load(thread_id)``)
   and merges what the client sent into it (`merge_history`); the run starts
   from that (`Run`'s *history*), and sends a ``MESSAGES_SNAPSHOT`` when
   the client's messages were not already all of it (a new device, a client
   that sends only its new message), so the client holds the same
   conversation: just before the agent's first event (or its ``RUN_FINISHED``
   when it emits none), never for a run that fails or is cancelled first;
2. when the agent is done (returned, raised, paused on an interrupt or was
   cancelled), before the run's terminal event, it **saves** the run's whole
   history (`Run.messages`: the conversation before the run and the run's own
   messages, each with its ``subagentRunId``), unless the run failed or was
   cancelled before its first event: an agent that refuses its caller (reads
   `Run.request` and raises) neither shows the stored conversation nor keeps
   the caller's messages. A save that fails ends a run
   that would have succeeded with ``RUN_ERROR`` (code ``thread_store_error``),
   so the client knows its thread was not kept; after a failed agent the
   agent's error stands and the save's is logged.

Who may use a thread is the app's *authorize* hook's to decide
(`ambient_runs.asgi.AgentApp`): bind each thread id to the user who owns it.

A load that fails is answered ``503`` before any stream opens. Two runs of one
thread at once each save their own history; the last to finish wins.

`MemoryThreadStore` is the in-memory default (one process; bounded, oldest
thread evicted first). Anything with the two async methods of `ThreadStore` is
a store: a database, Redis, a file. Messages are frozen `ambient_runs.events`
objects; ``ambient_runs.to_wire(message)`` and
``ambient_runs.events.RunAgentInput``'s reader give their JSON form and back.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ambient_runs import events as ev

__all__ = ("MemoryThreadStore", "ThreadStore", "merge_history")


@runtime_checkable
class ThreadStore(Protocol):
    """
    Where a server keeps each thread's conversation between runs.

    .. versionadded:: 0.1.0
    """

    async def load(self, thread_id: str) -> Sequence[ev.Message]:
        """Return thread *thread_id*'s messages, oldest first; empty for an unknown thread."""
        ...

    async def save(self, thread_id: str, messages: Sequence[ev.Message]) -> None:
        """Replace thread *thread_id*'s messages with *messages* (the whole conversation)."""
        ...


class MemoryThreadStore:
    """
    The in-memory `ThreadStore`: each thread's messages in this process, as frozen tuples.

    Bounded: past *max_threads* threads, the one least recently loaded or saved
    is forgotten. Nothing survives a restart, and several worker processes
    each have their own: use a store of your own (a database) for those.

    Args:
        max_threads: The most threads kept.

    Raises:
        ValueError: *max_threads* is less than 1.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_threads", "max_threads")

    def __init__(self, *, max_threads: int = 10_000) -> None:
        if max_threads < 1:
            msg = f"max_threads must be >= 1, not {max_threads}"
            raise ValueError(msg)
        self.max_threads = max_threads
        self._threads: OrderedDict[str, tuple[ev.Message, ...]] = OrderedDict()

    async def load(self, thread_id: str) -> tuple[ev.Message, ...]:
        """Return thread *thread_id*'s messages (empty when unknown)."""
        messages = self._threads.get(thread_id)
        if messages is None:
            return ()
        self._threads.move_to_end(thread_id)
        return messages

    async def save(self, thread_id: str, messages: Sequence[ev.Message]) -> None:
        """Keep *messages* as thread *thread_id*'s conversation."""
        self._threads[thread_id] = tuple(messages)
        self._threads.move_to_end(thread_id)
        while len(self._threads) > self.max_threads:
            self._threads.popitem(last=False)

    def forget(self, thread_id: str) -> None:
        """Drop thread *thread_id* (nothing happens when it is unknown)."""
        self._threads.pop(thread_id, None)

    def __len__(self) -> int:
        return len(self._threads)

    def __contains__(self, thread_id: object) -> bool:
        return thread_id in self._threads

    def __repr__(self) -> str:
        return f"<MemoryThreadStore {len(self._threads)} threads>"


def merge_history(
    stored: Sequence[ev.Message], sent: Sequence[ev.Message]
) -> tuple[ev.Message, ...]:
    """
    Merge what a client *sent* into the *stored* conversation of its thread.

    The stored messages come first, in their order; a sent message with the id
    of a stored one replaces it in place (the client's copy wins: it may carry
    what the client changed, such as an ``encryptedValue`` or its own tool's
    result); sent messages the store does not have follow, in the client's
    order. So a client that sends its whole history gets it back as it sent it
    (plus stored messages it never sends, such as activity messages), and a
    client that sends only its new message gets the whole thread.

    A message the client deleted is still in the store, and comes back: delete
    it from the store to drop it for good.

    .. versionadded:: 0.1.0
    """
    by_id = {m.id: m for m in sent}
    merged = [by_id.pop(m.id, m) for m in stored]
    merged.extend(m for m in sent if m.id in by_id)
    return tuple(merged)
