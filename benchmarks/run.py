"""
Run every ambient_runs benchmark and report median ratios with their spread.

    python benchmarks/run.py [--quick] [--check] [--json PATH] [--only NAME ...]

Each benchmark interleaves its candidates in rounds within this one process
and reports, per comparison, the median of the per-round ratios with their
quartiles and extremes; absolute medians are printed for reading only. Raw
numbers go to ``benchmarks/results.json`` (or ``--json PATH``). ``--check``
exits with status 1 when a figure misses its target (judged on the median).
``--quick`` runs small sizes and few rounds: a smoke test, not a measurement.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the package and the checkout importable
    sys.path.insert(0, str(ROOT))

from benchmarks import meets, summarize  # noqa: E402

#: name -> (module, keyword arguments for a full run, for --quick)
PLANS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "pipeline": (
        "benchmarks.bench_pipeline",
        {"n_events": 500, "rounds": 200},
        {"n_events": 300, "rounds": 5},
    ),
    "bytes": (
        "benchmarks.bench_bytes",
        {"n_events": 2000, "n_calls": 500, "rounds": 60},
        {"n_events": 300, "n_calls": 100, "rounds": 5},
    ),
    "await": (
        "benchmarks.bench_await",
        {"n_events": 2000, "n_calls": 500, "rounds": 60},
        {"n_events": 300, "n_calls": 100, "rounds": 5},
    ),
    "proto": (
        "benchmarks.bench_proto",
        {"n_events": 2000, "rounds": 30},
        {"n_events": 300, "rounds": 3},
    ),
    "scope": (
        "benchmarks.bench_scope",
        {"n_calls": 200, "rounds": 150},
        {"n_calls": 200, "rounds": 5},
    ),
    "state": (
        "benchmarks.bench_state",
        {"rounds": 12},
        {"rounds": 2},
    ),
    "concurrency": (
        "benchmarks.bench_concurrency",
        {"tasks": 1000, "events": 100, "rounds": 5, "open_counts": (1, 100, 1000, 10000)},
        {"tasks": 100, "events": 20, "rounds": 2, "open_counts": (1, 100, 1000)},
    ),
    "memory": (
        "benchmarks.bench_memory",
        {"n_events": 1_000_000, "n_calls": 1_000_000},
        {"n_events": 100_000, "n_calls": 20_000, "n_runs": 200},
    ),
    "otel": (
        "benchmarks.bench_otel",
        {"n_calls": 500, "n_events": 20000, "rounds": 40},
        {"n_calls": 100, "n_events": 300, "rounds": 3},
    ),
    "http": (
        "benchmarks.bench_http",
        {"n_events": 20_000, "rounds": 6, "concurrent_rounds": 10},
        {"n_events": 2_000, "rounds": 2, "stream_events": 200, "ttfb_requests": 10},
    ),
    "import": ("benchmarks.bench_import", {"rounds": 20}, {"rounds": 2}),
    "store": (
        "benchmarks.bench_store",
        {"n_events": 10_000, "rounds": 8, "append_events": 200_000, "replay_events": 10_000},
        {"n_events": 1_000, "rounds": 2, "append_events": 20_000, "replay_events": 1_000},
    ),
    "peers": (
        "benchmarks.bench_peers",
        {"runs": 20, "rounds": 10, "answer_words": 40},
        {"runs": 3, "rounds": 2, "answer_words": 40},
    ),
    "streams": (
        "benchmarks.bench_streams",
        {"events": 200, "counts": (1000, 2000), "rounds": 3},
        {"events": 200, "counts": (200,), "rounds": 1},
    ),
    "followers": (
        "benchmarks.bench_followers",
        {"events": 1000, "followers": 1000, "single_runs": 20, "rounds": 3},
        {"events": 200, "followers": 50, "single_runs": 2, "rounds": 1},
    ),
}


def plan(names: list[str] | None = None, *, quick: bool = False) -> dict[str, dict[str, Any]]:
    """The keyword arguments each benchmark in *names* (default: all) runs with."""
    return {name: dict(PLANS[name][2] if quick else PLANS[name][1]) for name in names or PLANS}


def run_all(
    plan: dict[str, dict[str, Any]], *, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run each benchmark of *plan* (name -> keyword arguments); return ``{name: result}``."""
    import importlib

    results: dict[str, Any] = {}
    for name, kwargs in plan.items():
        log(f"running {name} {kwargs} ...")
        start = time.perf_counter()
        try:
            module = importlib.import_module(PLANS[name][0])
            result = module.run(**kwargs)
        except Exception as exc:  # one broken benchmark must not lose the others' numbers
            log(traceback.format_exc())
            result = {"skipped": f"{type(exc).__name__}: {exc}"}
        result["elapsed_s"] = time.perf_counter() - start
        results[name] = result
    return results


def _fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.3f}x" if value < 10 else f"{value:.1f}x"
    return f"{value:.2f} {unit}"


def _time_fmt(seconds: float) -> str:
    for scale, label in ((1e9, "ns"), (1e6, "µs"), (1e3, "ms")):
        if seconds * scale < 1000:
            return f"{seconds * scale:.3f} {label}"
    return f"{seconds:.3f} s"


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure with its summary and verdict (``ok``: True, False, or None without target)."""
    rows = []
    for bench, result in results.items():
        for fig in result.get("figures", ()):
            summary = summarize(fig["values"])
            target = fig["target"]
            ok = None if target is None else meets(summary["median"], target)
            rows.append({"bench": bench, **fig, "summary": summary, "ok": ok})
    return rows


def report(results: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = []
    header = (
        f"{'figure':<52} {'median':>10} {'p25-p75':>19} {'min-max':>19} {'target':>10}  verdict"
    )
    lines += [header, "-" * len(header)]
    for row in rows:
        s, unit = row["summary"], row["unit"]
        target = row["target"]
        target_text = "" if target is None else f"{target['op']} {_fmt(target['value'], unit)}"
        verdict = {True: "PASS", False: "FAIL", None: "-"}[row["ok"]]
        spread = f"{_fmt(s['p25'], unit)}-{_fmt(s['p75'], unit)}"
        extremes = f"{_fmt(s['min'], unit)}-{_fmt(s['max'], unit)}"
        lines.append(
            f"{row['name']:<52} {_fmt(s['median'], unit):>10} {spread:>19} {extremes:>19} "
            f"{target_text:>10}  {verdict}"
        )
    skipped = [f"{name}: {r['skipped']}" for name, r in results.items() if "skipped" in r]
    if skipped:
        lines += ["", "skipped: " + "; ".join(skipped)]
    lines += ["", "absolute medians (for reading only; never judged)"]
    for bench, result in results.items():
        for candidate, values in result.get("samples", {}).items():
            if not values:
                continue
            s = summarize(values)
            lines.append(
                f"  {bench:<12} {candidate:<34} {_time_fmt(s['median']):>12} "
                f"per {result['unit']}  (n={s['n']})"
            )
        for key, value in result.get("absolute", {}).items():
            lines.append(f"  {bench:<12} {key:<34} {value}")
    lines += ["", "checks"]
    for bench, result in results.items():
        for key, value in result.get("checks", {}).items():
            lines.append(f"  {bench:<12} {key}: {value}")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": sys.version,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "argv": sys.argv,
    }


def write_json(
    path: Path,
    env: dict[str, Any],
    results: dict[str, Any],
    rows: list[dict[str, Any]],
    *,
    quick: bool,
) -> None:
    """Write the raw numbers, the environment and the verdicts to *path*."""
    payload = {
        "environment": env,
        "quick": quick,
        "results": results,
        "verdicts": [
            {k: row[k] for k in ("bench", "name", "unit", "target", "summary", "ok")}
            for row in rows
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--json",
        type=Path,
        default=Path(__file__).resolve().parent / "results.json",
        help="where to write the raw numbers (default: benchmarks/results.json)",
    )
    parser.add_argument("--only", nargs="+", choices=list(PLANS), help="run just these")
    args = parser.parse_args(argv)

    env = environment()
    results = run_all(
        plan(args.only, quick=args.quick), log=lambda m: print(m, file=sys.stderr, flush=True)
    )
    rows = evaluate(results)
    print(f"ambient_runs benchmarks, {env['date']}, {env['cpu_count']} CPUs, {env['platform']}")
    load = env["load_average"]
    load_text = f", load average {load[0]:.2f} at start" if load else ""
    print(f"python {env['python'].split()[0]}{load_text}{' (--quick)' if args.quick else ''}")
    print()
    print(report(results, rows))

    write_json(args.json, env, results, rows, quick=args.quick)
    print(f"\nraw numbers: {args.json}")

    missed = [row["name"] for row in rows if row["ok"] is False]
    if args.check:
        skipped = [name for name, r in results.items() if "skipped" in r]
        if missed or skipped:
            print(
                f"check: FAILED ({len(missed)} missed: {', '.join(missed) or '-'}; "
                f"skipped: {', '.join(skipped) or '-'})"
            )
            return 1
        print("check: every target met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
