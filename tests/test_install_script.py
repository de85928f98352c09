"""
``scripts/install`` says what it is doing, a line per step with its time, and stays quiet
otherwise; a failing step shows what it printed.

The script runs for real (bash), in a copy of the repository's layout, with ``python3`` and
``npm`` replaced on ``PATH`` by stubs that record how they were called: no package is
installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The venv's python, as the stub python3 makes it: records its arguments, chatters like pip,
# and fails when asked to (FAIL_PIP=1) on the editable install.
VENV_PYTHON = """#!/usr/bin/env bash
echo "$@" >> "$CALLS"
echo "Collecting everything... (pip's own chatter)"
if [ "${FAIL_PIP:-0}" = 1 ] && [[ "$*" == *"-e ."* ]]; then echo "ERROR: boom" >&2; exit 3; fi
"""
PYTHON3 = f"""#!/usr/bin/env bash
echo "python3 $@" >> "$CALLS"
mkdir -p .venv/bin
cat > .venv/bin/python <<'STUB'
{VENV_PYTHON}STUB
chmod +x .venv/bin/python
"""
NPM = """#!/usr/bin/env bash
echo "npm $@ in $(basename "$PWD")" >> "$CALLS"
"""


def _install(
    tmp_path: Path, *, fail: bool = False
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run a copy of scripts/install against the stubs; return its result and the calls."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "tests" / "node").mkdir(parents=True)
    (repo / "tests" / "node_proto").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "install", repo / "scripts" / "install")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in {"python3": PYTHON3, "npm": NPM}.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
        "CALLS": str(calls),
        "FAIL_PIP": "1" if fail else "0",
    }
    result = subprocess.run(
        ["bash", str(repo / "scripts" / "install")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return result, calls.read_text() if calls.exists() else ""


class TestInstallScript:
    def test_a_line_per_step_with_its_time(self, tmp_path: Path) -> None:
        """Each step is announced and timed; pip's own output does not show."""
        result, calls = _install(tmp_path)

        lines = result.stdout.splitlines()
        assert 0 == result.returncode, result.stderr
        assert [
            "install: creating .venv ... done",
            "install: upgrading pip ... done",
            "install: installing ambient_runs and the dev group (tests, frameworks, lint, bench,"
            " docs) ... done",
            "install: installing @ag-ui/client into tests/node (npm ci) ... done",
            "install: installing @ag-ui/proto 1.0.4 into tests/node_proto (npm ci) ... done",
        ] == [re.sub(r" \(\d+s\)$", "", line) for line in lines[:-1]]
        assert re.fullmatch(r"install: ready in \d+s", lines[-1])
        assert "chatter" not in result.stdout + result.stderr
        assert "-m pip install -q -e . --group dev" in calls
        assert "npm ci --no-audit --no-fund --loglevel=error in node" in calls
        assert "npm ci --no-audit --no-fund --loglevel=error in node_proto" in calls

    def test_a_failing_step_shows_its_output(self, tmp_path: Path) -> None:
        """A step that fails is named, its output shown, and the script exits with its status."""
        result, _ = _install(tmp_path, fail=True)

        assert 3 == result.returncode
        assert re.search(r"installing ambient_runs .* FAILED \(\d+s\)", result.stdout)
        assert "ERROR: boom" in result.stderr
        assert "npm" not in result.stdout
