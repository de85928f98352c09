"""Smoke test of the benchmarks: every module runs on tiny sizes and reports well-formed results.

No timing is asserted here: the numbers only have to exist and be positive.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

TINY: dict[str, dict[str, Any]] = {
    "pipeline": {"n_events": 40, "rounds": 2},
    "bytes": {"n_events": 40, "n_calls": 10, "rounds": 2},
    "await": {"n_events": 40, "n_calls": 10, "rounds": 2},
    "proto": {"n_events": 40, "rounds": 2},
    "scope": {"n_calls": 20, "rounds": 2},
    "state": {"rounds": 1, "sizes": {"1KB": 2, "10KB": 30}},
    "concurrency": {
        "tasks": 8,
        "events": 5,
        "rounds": 1,
        "open_counts": (1, 10),
        "feed_events": 200,
        "feed_rounds": 2,
    },
    "memory": {"n_events": 3000, "n_calls": 300, "n_runs": 20},
    "http": {"n_events": 30, "rounds": 1, "stream_events": 20, "streams": 3, "ttfb_requests": 2},
    "otel": {"n_calls": 10, "n_events": 20, "rounds": 2},
    "store": {"n_events": 30, "rounds": 1, "append_events": 512, "replay_events": 100},
    "import": {"rounds": 1},
    "peers": {"runs": 1, "rounds": 1, "answer_words": 5},
    "streams": {"events": 10, "counts": (5,), "rounds": 1},
    "followers": {"events": 20, "followers": 3, "single_runs": 1, "rounds": 1},
}


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_every_benchmark_runs_on_tiny_sizes(tmp_path: Path) -> None:
    """run.py's pipeline (run_all, evaluate, report, write_json) on tiny sizes: the structure."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    runner = importlib.import_module("benchmarks.run")
    assert set(TINY) == set(runner.PLANS)

    results = runner.run_all(TINY, log=lambda _: None)

    assert set(results) == set(TINY)
    for name, result in results.items():
        assert "skipped" not in result, f"{name}: {result.get('skipped')}"
        assert {"title", "params", "unit", "samples", "figures", "checks"} <= set(result), name
        for candidate, values in result["samples"].items():
            assert values, f"{name}/{candidate}: no samples"
            assert all(_positive(v) for v in values), f"{name}/{candidate}: {values}"
        assert result["figures"], name
        for fig in result["figures"]:
            assert {"name", "values", "unit", "target", "note"} <= set(fig)
            assert fig["values"], fig["name"]
            assert all(isinstance(v, int | float) and v >= 0 for v in fig["values"]), fig
            assert fig["target"] is None or fig["target"]["op"] in {"<=", "<", ">=", ">"}
        # Correctness facts established outside the timed regions all hold.
        for key, value in result["checks"].items():
            assert value is not False, f"{name}: check {key} failed"
    # Only the memory figures may be zero (no growth at all); ratios are positive.
    for fig in (f for r in results.values() for f in r["figures"] if f["unit"] == "x"):
        assert all(_positive(v) for v in fig["values"]), fig

    rows = runner.evaluate(results)
    assert len(rows) == sum(len(r["figures"]) for r in results.values())
    for row in rows:
        assert set(row["summary"]) == {"median", "p25", "p75", "min", "max", "n"}
        assert row["summary"]["min"] <= row["summary"]["median"] <= row["summary"]["max"]
        assert row["ok"] in {True, False, None}
        assert (row["ok"] is None) == (row["target"] is None)
    text = runner.report(results, rows)
    assert all(row["name"] in text for row in rows)

    path = tmp_path / "results.json"
    runner.write_json(path, runner.environment(), results, rows, quick=True)
    written = json.loads(path.read_text())
    assert set(written) == {"environment", "quick", "results", "verdicts"}
    assert set(written["results"]) == set(TINY)
    assert len(written["verdicts"]) == len(rows)
