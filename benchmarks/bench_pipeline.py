"""
Per-event pipeline: one ``TEXT_MESSAGE_CONTENT`` from ``handle.write`` to SSE bytes.

Candidates, each producing the same frames for the same deltas into a list:

- ``ambient_runs``: ``handle.write(delta)`` on a message opened inside a
  subagent scope of an active run, verification on, the run's sink encoding
  each event to SSE bytes (``ambient_runs.sse.encode``; the plain framing
  ``b"data: " + encode_json(e) + b"\\n\\n"`` when that module is missing);
- ``official``: ``ag_ui.core.TextMessageContentEvent(...)`` plus
  ``EventEncoder().encode(...)``, encoded to bytes as well;
- ``floor``: a plain dict, ``json.dumps(d, separators=(",", ":"),
  ensure_ascii=False)``, the framing and ``.encode()``;
- ``floor_orjson`` (only when orjson is installed): a dict and ``orjson.dumps``;
- ``recorded``: ``ambient_runs`` again, on a second run made with
  ``record_messages=True``: what recording the run's history (each delta
  appended to the open message's text) costs on this path.

Targets: ambient_runs ≤ 0.33x official and ≤ 1.5x the json floor; recorded /
ambient_runs ≤ 1.10x.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import time
from collections.abc import Callable
from typing import Any

import ambient_runs as ar
from ambient_runs._wire import encode_json
from benchmarks import INPUT, figure, floor_writes, interleave, official_writes, ratios

TITLE = "per-event pipeline (TEXT_MESSAGE_CONTENT -> SSE bytes)"

# Token-sized deltas, some with non-ASCII text and characters JSON must escape.
_WORDS: tuple[str, ...] = (
    *("Hello", " world", ",", " the", " quick", " brown", " fox", " café", " naïve", " —"),
    *(" 東京", ' "quoted"', " tab\there", " line\n", " ok", " 42", " π≈3.14", "!"),
)


def deltas(n: int) -> list[str]:
    """*n* token-like deltas, the same for every candidate."""
    return [_WORDS[i % len(_WORDS)] for i in range(n)]


def _sse_encoder() -> tuple[Callable[[Any], bytes], str]:
    try:
        from ambient_runs import sse
    except ImportError:
        return (lambda e: b"data: " + encode_json(e) + b"\n\n"), "b'data: ' + encode_json(e)"
    return sse.encode, "ambient_runs.sse.encode"


def run(n_events: int = 2000, rounds: int = 30) -> dict[str, Any]:
    """Time the candidates on *n_events* deltas per batch, *rounds* interleaved rounds."""

    texts = deltas(n_events)
    encode, encoder_name = _sse_encoder()
    out: list[bytes] = []
    sink: Callable[[Any], object] = lambda e: out.append(encode(e))  # noqa: E731

    with contextlib.ExitStack() as scopes:
        run_ = scopes.enter_context(ar.Run(INPUT, sink=sink, verify=True))
        scopes.enter_context(ar.subagent("bench"))
        handle = scopes.enter_context(ar.message())
        message_id, owner = handle.id, handle.owner
        assert owner is not None, "the message must be attributed to the subagent"
        assert run_._verifier is not None, "verification must be on"
        assert run_.pipeline.history is None, "the history is not recorded by default"
        bare_out: list[bytes] = []
        bare_sink: Callable[[Any], object] = lambda e: bare_out.append(encode(e))  # noqa: E731
        bare_run = scopes.enter_context(
            ar.Run(INPUT, sink=bare_sink, verify=True, record_messages=True)
        )
        scopes.enter_context(ar.subagent("bench"))
        bare = scopes.enter_context(ar.message())
        assert bare_run.pipeline.history is not None

        def recorded() -> float:
            bare_out.clear()
            write = bare.write
            start = time.perf_counter()
            for delta in texts:
                write(delta)
            return (time.perf_counter() - start) / n_events

        def ours() -> float:
            out.clear()
            write = handle.write
            start = time.perf_counter()
            for delta in texts:
                write(delta)
            return (time.perf_counter() - start) / n_events

        official_out: list[bytes] = []
        official = official_writes(texts, message_id, owner, official_out)
        floor_out: list[bytes] = []
        floor = floor_writes(texts, message_id, owner, floor_out)

        candidates: dict[str, Callable[[], float]] = {
            "ambient_runs": ours,
            "official": official,
            "floor": floor,
            "recorded": recorded,
        }
        try:
            orjson: Any = importlib.import_module("orjson")
        except ImportError:
            orjson = None
        orjson_out: list[bytes] = []
        if orjson is not None:
            dumps_b = orjson.dumps

            def floor_orjson() -> float:
                orjson_out.clear()
                append = orjson_out.append
                start = time.perf_counter()
                for delta in texts:
                    d = {
                        "type": "TEXT_MESSAGE_CONTENT",
                        "subagentRunId": owner,
                        "messageId": message_id,
                        "delta": delta,
                    }
                    append(b"data: " + dumps_b(d) + b"\n\n")
                return (time.perf_counter() - start) / n_events

            candidates["floor_orjson"] = floor_orjson

        # One untimed batch each: warms caches and gives the frames to compare.
        for candidate in candidates.values():
            candidate()
        identical = out == official_out == floor_out
        same_json = [json.loads(f[6:]) for f in out] == [json.loads(f[6:]) for f in official_out]
        samples = interleave(candidates, rounds)
        checks = {
            "frames_identical_to_official_and_floor": identical,
            "json_equal_to_official": same_json,
            "frames_per_batch": len(out),
            "verify": True,
            "sse_encoder": encoder_name,
            "orjson_floor": "measured" if orjson is not None else "orjson not installed",
        }
        checks["history_text_chars"] = len(bare_run.messages[-1].content or "")
        handle.end()
        bare.end()

    figures = [
        figure(
            "pipeline: ambient_runs / official",
            ratios(samples, "ambient_runs", "official"),
            target=("<=", 0.33),
        ),
        figure(
            "pipeline: ambient_runs / json floor",
            ratios(samples, "ambient_runs", "floor"),
            target=("<=", 1.5),
        ),
    ]
    figures.append(
        figure(
            "pipeline: record_messages=True / the default (not recorded)",
            ratios(samples, "recorded", "ambient_runs"),
            target=("<=", 1.10),
        )
    )
    if "floor_orjson" in samples:
        figures.append(
            figure(
                "pipeline: ambient_runs / orjson floor",
                ratios(samples, "ambient_runs", "floor_orjson"),
            )
        )
    return {
        "title": TITLE,
        "params": {"n_events": n_events, "rounds": rounds},
        "unit": "event",
        "samples": samples,
        "figures": figures,
        "checks": checks,
    }
