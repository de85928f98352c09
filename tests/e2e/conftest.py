"""Fixtures for the end-to-end tests: the real @ag-ui/client under Node, a real uvicorn."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# `support` lives in tests/, which is on sys.path only when a module there was collected first.
_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from support.node import ensure_node_modules  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _node_modules() -> None:
    """Install the pinned npm packages once, before any client runs (fails without Node)."""
    ensure_node_modules()
