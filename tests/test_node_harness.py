"""Smoke tests for the Node harness: streams go through the real @ag-ui/client 1.0.0."""

from __future__ import annotations

from typing import Any

import pytest
from support.node import client_verify, ensure_node_modules

Event = dict[str, Any]

RUN_STARTED: Event = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
RUN_FINISHED: Event = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


def text_message(message_id: str, text: str) -> list[Event]:
    """Return START/CONTENT/END for one assistant text message."""
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


@pytest.fixture(scope="module", autouse=True)
def _node_modules() -> None:
    """Install the pinned npm packages once for this module."""
    ensure_node_modules()


class TestClientVerify:
    def test_minimal_valid_stream_is_accepted_with_message_text(self) -> None:
        """A minimal well-formed run resolves and leaves the assistant text in agent.messages."""
        [verdict] = client_verify([[RUN_STARTED, *text_message("m1", "Hello"), RUN_FINISHED]])
        assert verdict["ok"], verdict["error"]
        assert verdict["error"] is None
        assert verdict["messages"] == [{"id": "m1", "role": "assistant", "content": "Hello"}]
        assert verdict["warnings"] == []

    def test_content_for_unknown_message_is_rejected(self) -> None:
        """TEXT_MESSAGE_CONTENT naming a message that is not open fails the run."""
        stream = [
            RUN_STARTED,
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"},
            RUN_FINISHED,
        ]
        [verdict] = client_verify([stream])
        assert not verdict["ok"]
        assert verdict["error"] is not None
        assert "No active text message" in verdict["error"]

    def test_null_subagent_run_id_is_rejected(self) -> None:
        """subagentRunId: null on an event is fatal (optional fields must be omitted, not null)."""
        events = text_message("m1", "Hello")
        events[0] = {**events[0], "subagentRunId": None}
        [verdict] = client_verify([[RUN_STARTED, *events, RUN_FINISHED]])
        assert not verdict["ok"]
        assert verdict["error"] is not None
        assert "subagentRunId" in verdict["error"]

    def test_event_before_run_started_is_rejected(self) -> None:
        """Any event other than RUN_STARTED/RUN_ERROR as the first event fails the run."""
        [verdict] = client_verify([[*text_message("m1", "Hello"), RUN_STARTED, RUN_FINISHED]])
        assert not verdict["ok"]
        assert verdict["error"] == "First event must be 'RUN_STARTED'"

    def test_batch_keeps_one_verdict_per_stream_in_order(self) -> None:
        """One call over many streams answers each stream independently and in order."""
        good = [RUN_STARTED, *text_message("m1", "Hello"), RUN_FINISHED]
        bad = [*text_message("m1", "Hello"), RUN_STARTED, RUN_FINISHED]
        verdicts = client_verify([good, bad, good], mode="full")
        assert [v["ok"] for v in verdicts] == [True, False, True]

    def test_verify_only_mode_agrees_on_acceptance(self) -> None:
        """The verifier-only pipeline accepts and rejects the same streams as runAgent."""
        good = [RUN_STARTED, *text_message("m1", "Hello"), RUN_FINISHED]
        bad = [RUN_STARTED, {"type": "TEXT_MESSAGE_END", "messageId": "m9"}]
        verdicts = client_verify([good, bad], mode="verify-only")
        assert [v["ok"] for v in verdicts] == [True, False]
        assert verdicts[0].get("events") is not None
