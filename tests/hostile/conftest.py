"""The hostile suite: `AgentApp` and `stream` under attack, against a real uvicorn."""

from __future__ import annotations

import sys
from pathlib import Path

# This folder's apps and server, and tests/support, are importable from here.
_HERE = Path(__file__).resolve().parent
for _path in (_HERE, _HERE.parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
