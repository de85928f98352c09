"""
Import cost: ``import ambient_runs`` against ``import httpx``, each in a fresh interpreter.

Per round, each candidate runs once in a new ``python -X importtime -c "import X"``
(rotating order): the figure is the ratio of the two modules' cumulative import
times as the interpreter reports them, so the interpreter's own start-up is not
on either clock. Bytecode caches are written and used (``PYTHONDONTWRITEBYTECODE``
is removed from the children's environment), as an installed package has them;
the first round warms them and is not counted. The wall-clock time of each whole
process is recorded beside it, for reading.

Candidates:

- ``ambient_runs``: the checkout's package (the parent of ``benchmarks/``);
- ``httpx``: the installed httpx, a library of comparable reach for comparison.

Reported, not judged: issue 32 asks for ``import ambient_runs`` no slower than
``import httpx``; this row says where it stands.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import figure, ratios

TITLE = "import cost (import ambient_runs vs import httpx, fresh interpreters)"

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("ambient_runs", "httpx")


def import_time(module: str) -> tuple[float, float]:
    """Seconds ``import module`` takes in a fresh interpreter (``-X importtime``), and wall."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    # The line of the module itself: "import time: self | cumulative | module".
    [line] = [row for row in done.stderr.splitlines() if row.split("|")[-1].strip() == module]
    return int(line.split("|")[1]) / 1e6, wall


def run(rounds: int = 20) -> dict[str, Any]:
    """Time both imports in *rounds* interleaved rounds, after one uncounted warm-up round."""
    for module in MODULES:
        import_time(module)
    samples: dict[str, list[float]] = {m: [] for m in MODULES}
    walls: dict[str, list[float]] = {m: [] for m in MODULES}
    for r in range(rounds):
        for module in MODULES[r % 2 :] + MODULES[: r % 2]:
            seconds, wall = import_time(module)
            samples[module].append(seconds)
            walls[module].append(wall)
    return {
        "title": TITLE,
        "params": {"rounds": rounds},
        "unit": "import",
        "samples": samples,
        "figures": [
            figure(
                "import: ambient_runs / httpx",
                ratios(samples, "ambient_runs", "httpx"),
                note="cumulative -X importtime of each top-level module, per round",
            ),
            figure(
                "import: ambient_runs / httpx (process wall)",
                ratios(walls, "ambient_runs", "httpx"),
                note="wall-clock of the whole interpreter, per round",
            ),
        ],
        "absolute": {
            f"{m} process wall median": f"{sorted(walls[m])[len(walls[m]) // 2] * 1e3:.1f} ms"
            for m in MODULES
        },
        "checks": {"both_imported": all(samples[m] for m in MODULES)},
    }
