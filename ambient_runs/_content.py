"""
Content handles: open messages, reasoning blocks, tool calls and activities.

A handle captures its *owner* (the ``subagentRunId`` of the scope that opened
it) when it is opened, and every continuation it emits carries that owner,
wherever it is called from: another task, a thread, a callback. Each handle is
a context manager and also works by explicit calls; ending one twice is
harmless and warns. `Handle` is also the base of `Step`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ambient_runs import events as ev
from ambient_runs._diff import StateTracker
from ambient_runs._reads import Reads
from ambient_runs._state import operations, send_tracked, tracked_change
from ambient_runs._wire import check_encodable, frame_template, json_form, lone_surrogate
from ambient_runs.errors import HandleClosedError, HandleWarning
from ambient_runs.proto import (
    _ENVELOPE_BYTES,
    _ENVELOPES,
    _LENGTHS,
    _PREFIX,
    _SMALL,
    _delta_template,
    _varint,
)

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._outcomes import ExcInfo
    from ambient_runs._pipeline import Registry
    from ambient_runs._scopes import Frame

__all__ = ("ActivityHandle", "Handle", "MessageHandle", "ReasoningHandle", "ToolCallHandle")


class Handle:
    """
    Base of every handle: its pipeline's `send`, its owner, and the registry it is open in.

    The registry is the open-handles list of the scope the handle was opened
    in (`Pipeline.scopes`); a scope that ends closes what is left in it.
    """

    __slots__ = ("_ended", "_owner", "_pipeline", "_registry", "_send")

    _what: str = "handle"

    def __init__(self, frame: Frame) -> None:
        pipeline = self._pipeline = frame.pipeline
        self._send = pipeline.send
        self._owner = frame.owner
        subagent = frame.host
        # An orphan (opened in a subagent that has ended) joins the nearest open scope.
        self._registry: Registry = (
            frame.registry if subagent is None or not subagent.ended else frame.open_registry()
        )
        self._ended = False

    owner: Reads[str | None] = Reads(
        "_owner",
        "The ``subagentRunId`` the handle's events carry (None: the parent agent).",
    )
    ended: Reads[bool] = Reads("_ended", "Whether the handle has been ended.")

    def _open(self, kind: Callable[..., ev.BaseEvent], **fields: Any) -> None:
        """Send the handle's opening event, a *kind* of *fields* and the handle's owner."""
        event = kind(**fields, subagent_run_id=self._owner)
        with self._pipeline.lock:
            self._send(event)
            self._registry[self] = self

    def _closing(self) -> bool:
        """Mark the handle ended; False (after a warning) when it already was."""
        if self._ended:
            warnings.warn(
                f"{self._what} already ended; this end() did nothing", HandleWarning, stacklevel=3
            )
            return False
        self._ended = True
        self._registry.pop(self, None)
        return True

    def _check_open(self) -> None:
        if self._ended:
            msg = f"{self._what} has ended; open a new one to send more"
            raise HandleClosedError(msg)

    def end(self) -> None:
        """End the handle, emitting its closing event(s)."""
        raise NotImplementedError

    def _label(self) -> str:
        """What the handle is, for messages: its kind, then its name and id where it has them."""
        ident = getattr(self, "id", None)
        return f"{self._what} {ident!r}" if ident is not None else self._what

    def _abandon(self) -> None:
        """Close the handle on behalf of a scope that ended with it still open."""
        self.end()

    def _left_open(self) -> str:
        """What the `LeftOpenWarning` says of this handle, left open and closed for it."""
        return (
            f"{self._label()} was still open when its scope ended; ambient_runs closed it. "
            f"End it before its scope ends: open it in a `with` block, or call its end()"
        )

    def _orphan(self) -> None:
        """The run is over: mark the handle ended, sending nothing."""
        self._ended = True

    def _open_children(self) -> Registry | None:
        """Handles hold no other handles (a `Subagent` does)."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: *ExcInfo) -> None:
        if not self._ended:
            self.end()


#: The stdlib's C string encoder, the one the framed encoders use for every string.
_encode_str = json.encoder.encode_basestring

#: What `MessageHandle.write` finds for a message the verifier does not hold open.
_NOT_OPEN = object()

#: Trusted constructors for the hot paths (see `events.unchecked`).
_content_event = ev.unchecked(ev.TextMessageContentEvent, "message_id", "delta", "subagent_run_id")


class MessageHandle(Handle):
    """
    An open text message: ``TEXT_MESSAGE_START`` has been sent.

    Write deltas with `write`, consume an iterable with `stream` (or an async one
    with `astream`), and `end` it (or leave the ``with`` block).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_head", "_lanes", "_opened", "_record", "_tail", "id", "role")
    _what = "message"

    def __init__(
        self, frame: Frame, message_id: str, role: ev.TextMessageRole, name: str | None
    ) -> None:
        super().__init__(frame)
        self.id = message_id
        self.role = role
        #: The byte path's frame around a delta (`_template`), made at its first use:
        #: SSE's text before the delta, or the binary transport's bytes (`_delta_template`):
        #: then `_tail` is those bytes as text when they are all ASCII, else "".
        self._head: str | bytes | None = None
        self._tail = ""
        #: The verifier's open text messages and open chunk lanes, by owner (`_template`).
        self._opened: dict[str, str | None] | None = None
        self._lanes: dict[str | None, object] | None = None
        self._open(ev.TextMessageStartEvent, message_id=message_id, role=role, name=name)
        history = self._pipeline.history
        #: Where the history keeps this message's text (None: not recorded).
        self._record = None if history is None else history.text_of(message_id)

    def write(self, delta: str) -> None:
        """
        Send *delta*, the next piece of the message's text.

        Raises:
            HandleClosedError: The message has ended.
        """
        if self._ended:
            self._check_open()
        pipeline = self._pipeline
        if pipeline.frames is not None and type(delta) is str:
            # The byte path (`Pipeline.frames`): the frame is one string, the delta
            # its only new part. Verified by construction: the run is active and the
            # verifier would accept the event (`Entities.on_continue`'s fast case,
            # read from its state; it keeps no state for a CONTENT). Anything else
            # (a lone surrogate, a refusal) takes the object path below, which says why.
            head = self._head
            if head is None:
                head = self._template()
            if head:
                try:
                    if isinstance(head, str):
                        data = f"{head}{_encode_str(delta)}{self._tail}".encode()
                    else:  # the binary transport's frame (`proto._delta_template`)
                        text_head = self._tail  # the template as text, when it is ASCII
                        size = len(delta)
                        inner = len(text_head) + 1 + size
                        if text_head and inner < 0x7E and delta.isascii():
                            # Every byte below 0x80: built as text and encoded once, as
                            # the SSE frame is (its lengths are one byte each).
                            data = (
                                f"{_ENVELOPES[inner]}{text_head}{_LENGTHS[size]}{delta}".encode()
                            )
                        else:
                            text = delta.encode()
                            size = len(text)
                            inner = len(head) + 1 + size
                            if inner < 0x7E:  # both lengths one byte (size < inner)
                                data = b"".join((_ENVELOPE_BYTES[inner], head, _SMALL[size], text))
                            else:
                                whole = b"".join((head, _varint(size), text))
                                body = b"\x12" + _varint(len(whole)) + whole
                                data = _PREFIX(len(body)) + body
                except UnicodeEncodeError:
                    pass  # a lone surrogate: the object path says so
                else:
                    lock = pipeline.lock  # by hand, not `with`: half the cost
                    lock.acquire()
                    try:
                        frames = pipeline.frames  # None once the run has finished
                        opened = self._opened
                        # The verifier's `opened` maps a message to its owner on record; a
                        # chunk lane open anywhere sends the delta the object path (rare).
                        if (
                            frames is not None
                            and not self._ended
                            and (
                                opened is None
                                or (
                                    opened.get(self.id, _NOT_OPEN) == self._owner
                                    and not self._lanes
                                )
                            )
                        ):
                            frames(data)
                            record = self._record  # the run's history, when it records
                            if record is not None:
                                record.write(delta)
                            return
                    finally:
                        lock.release()
        message_id = self.id
        if type(delta) is str and type(message_id) is str:  # the hot path: _content_event
            # The id and owner passed the encodability check in TEXT_MESSAGE_START; only
            # the delta is new, and ASCII (one flag) cannot hold a lone surrogate.
            event = _content_event(message_id, delta, self._owner)
            if not delta.isascii() and lone_surrogate(delta) is not None:
                check_encodable(event)  # raises InvalidEventError, naming the problem
            self._send(event, self._record)
        else:  # the constructor validates (a str subclass passes, anything else raises)
            self._send(
                ev.TextMessageContentEvent(
                    message_id=message_id, delta=delta, subagent_run_id=self._owner
                )
            )

    def _template(self) -> str | bytes:
        """
        Make the byte path's frame around a delta; "" when this message cannot use it.

        Also binds the verifier's state the byte path reads (``content_view``:
        its open messages with their owners, and the owners with an open chunk
        lane; None when nothing verifies). Both are the verifier's own dicts,
        kept for the run's life.
        """
        model = _content_event(self.id, "-", self._owner)
        head: str | bytes
        if self._pipeline.binary_frames:
            head = _delta_template(model)
            self._tail = head.decode() if head.isascii() else ""
        else:
            found = frame_template(model, "delta", "data: ", "\n\n")
            head, self._tail = found if found is not None else ("", "")
        self._head = head
        view = self._pipeline.content_view
        if view is not None:
            self._opened, self._lanes = view.opened, view.lane_owners
        return head

    def stream(self, chunks: Iterable[str]) -> str:
        """Write every chunk of *chunks*; return the whole text."""
        parts = []
        for chunk in chunks:
            self.write(chunk)
            parts.append(chunk)
        return "".join(parts)

    async def astream(self, chunks: AsyncIterable[str]) -> str:
        """
        Write every chunk of the async iterable *chunks*; return the whole text.

        Waits for the consumer (`Run.drain`) after each chunk, so a slow client
        applies backpressure to the model stream.
        """
        parts: list[str] = []
        write, keep, pipeline = self.write, parts.append, self._pipeline
        async for chunk in chunks:
            write(chunk)
            keep(chunk)
            # `Pipeline.drain` inline: most chunks have nothing to wait for, and then
            # no coroutine is made and nothing is called (`DrainHook.due`).
            hook = pipeline.drain_hook
            if hook is not None and len(hook.buffer) >= hook.due:
                wait = hook.gate()
                if wait is not None:
                    await wait
        return "".join(parts)

    def end(self) -> None:
        """Send ``TEXT_MESSAGE_END``. A second call warns and does nothing."""
        if self._closing():
            self._send(ev.TextMessageEndEvent(message_id=self.id, subagent_run_id=self._owner))


class ReasoningHandle(Handle):
    """
    An open reasoning block: ``REASONING_START`` has been sent.

    The first `write` opens a reasoning message under the same id; `end` closes
    the message (if open) and the block.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_message_open", "id")
    _what = "reasoning block"

    def __init__(self, frame: Frame, message_id: str) -> None:
        super().__init__(frame)
        self.id = message_id
        self._message_open = False
        self._open(ev.ReasoningStartEvent, message_id=message_id)

    def write(self, delta: str) -> None:
        """
        Send *delta*, the next piece of reasoning text.

        Raises:
            HandleClosedError: The block has ended.
        """
        self._check_open()
        send, owner = self._send, self._owner
        content = ev.ReasoningMessageContentEvent(
            message_id=self.id, delta=delta, subagent_run_id=owner
        )
        if not self._message_open:
            check_encodable(content)  # refused before the message opens for it
            send(ev.ReasoningMessageStartEvent(message_id=self.id, subagent_run_id=owner))
            self._message_open = True
        send(content)

    def encrypted(self, value: str) -> None:
        """Attach an opaque encrypted value to this reasoning message."""
        self._send(
            ev.ReasoningEncryptedValueEvent(
                subtype="message",
                entity_id=self.id,
                encrypted_value=value,
                subagent_run_id=self._owner,
            )
        )

    def end(self) -> None:
        """Close the reasoning message (if one is open) and the block."""
        if self._closing():
            send, owner = self._send, self._owner
            with self._pipeline.lock:
                if self._message_open:
                    send(ev.ReasoningMessageEndEvent(message_id=self.id, subagent_run_id=owner))
                send(ev.ReasoningEndEvent(message_id=self.id, subagent_run_id=owner))


class ToolCallHandle(Handle):
    """
    An open tool call: ``TOOL_CALL_START`` has been sent.

    Send the arguments with `args`, close them with `end`, and report the
    outcome with `result` (``TOOL_CALL_RESULT``, as a new tool message whose id
    `result_message_id` is fixed when the call opens).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("id", "name", "parent_message_id", "result_message_id")
    _what = "tool call"

    def _label(self) -> str:
        return f"tool call {self.name!r} ({self.id})"

    def __init__(
        self, frame: Frame, call_id: str, name: str, parent_message_id: str | None
    ) -> None:
        super().__init__(frame)
        # A tool call belongs to the message that carries it: take that message's
        # owner, and let that owner's scope close it if it is left open.
        pipeline = self._pipeline
        if parent_message_id is not None:
            owner = pipeline.message_owners.get(parent_message_id, self._owner)
            if owner != self._owner:
                self._owner = owner
                self._registry = pipeline.scopes.get(owner, self._registry)
        self.id = call_id
        self.name = name
        self.parent_message_id = parent_message_id
        self.result_message_id = pipeline.new_message_id()
        self._open(
            ev.ToolCallStartEvent,
            tool_call_id=call_id,
            tool_call_name=name,
            parent_message_id=parent_message_id,
        )

    def args(self, delta: Any) -> None:
        """
        Send a piece of the arguments: text as is, any other JSON value as JSON text.

        Raises:
            HandleClosedError: The arguments were already closed with `end`.
        """
        self._check_open()
        text = (
            delta if isinstance(delta, str) else json.dumps(json_form(delta), ensure_ascii=False)
        )
        self._send(
            ev.ToolCallArgsEvent(tool_call_id=self.id, delta=text, subagent_run_id=self._owner)
        )

    def end(self) -> None:
        """Send ``TOOL_CALL_END``: the arguments are complete."""
        if self._closing():
            self._send(ev.ToolCallEndEvent(tool_call_id=self.id, subagent_run_id=self._owner))

    def result(self, content: Any) -> str:
        """
        Send the call's result as ``TOOL_CALL_RESULT``; end the call first if needed.

        Args:
            content: A string, a sequence of content parts, or any JSON value
                (sent as JSON text).

        Returns:
            The id of the tool message the result creates.
        """
        if not isinstance(content, str) and not (
            isinstance(content, Sequence) and all(isinstance(p, ev._PARTS) for p in content)
        ):
            content = json.dumps(json_form(content), ensure_ascii=False)
        result = ev.ToolCallResultEvent(
            message_id=self.result_message_id,
            tool_call_id=self.id,
            content=content,
            subagent_run_id=self._owner,
        )
        check_encodable(result)  # refused before the call's arguments are closed for it
        if not self._ended:
            self.end()
        self._send(result)
        return self.result_message_id


class ActivityHandle(Handle):
    """
    An activity message: ``ACTIVITY_SNAPSHOT`` first, then ``ACTIVITY_DELTA`` patches.

    `update` replaces the content and publishes the change with the same differ
    as run state. An activity stays until the conversation drops it, so ending
    the handle sends nothing.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("activity_type", "id", "tracker")
    _what = "activity"

    def _label(self) -> str:
        return f"activity {self.id!r} ({self.activity_type})"

    def __init__(self, frame: Frame, message_id: str, activity_type: str, content: Any) -> None:
        super().__init__(frame)
        self.id = message_id
        self.activity_type = activity_type
        self.tracker = StateTracker()
        self.update(content)

    def update(self, content: Any) -> None:
        """Publish *content* (a JSON object, attrs instance or dataclass) as the new content."""
        self._check_open()
        send, owner = self._send, self._owner
        with self._pipeline.lock:
            change = tracked_change(self.tracker, content)
            if change is None:
                return
            kind, payload, _ = change  # (an activity's own strings get the full check)
            event: ev.BaseEvent
            if kind == "snapshot":
                event = ev.ActivitySnapshotEvent(
                    message_id=self.id,
                    activity_type=self.activity_type,
                    content=payload,
                    subagent_run_id=owner,
                )
            else:
                event = ev.ActivityDeltaEvent(
                    message_id=self.id,
                    activity_type=self.activity_type,
                    patch=operations(payload),
                    subagent_run_id=owner,
                )
            send_tracked(self.tracker, send, event)

    def end(self) -> None:
        """Stop updating the activity (nothing is sent)."""
        self._closing()
