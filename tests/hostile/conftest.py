"""The hostile suite: `AgentApp` and `stream` under attack, against a real uvicorn."""

from __future__ import annotations

import sys
from pathlib import Path

# The helpers of tests/ and tests/e2e are importable from here (no packages in tests/).
_HERE = Path(__file__).resolve().parent
for _path in (_HERE, _HERE.parent, _HERE.parent / "e2e"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
