"""
Decode binary AG-UI streams with the official client: ``parseProtoStream`` of
``@ag-ui/client`` 1.0.4 (over ``@ag-ui/proto`` 1.0.4), in ``tests/node_proto``.

The pinned packages are installed on first use (``npm ci`` from the committed
lockfile; ``scripts/install`` does it too). Many streams go to one Node process.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["NODE_PROTO_DIR", "proto_decode", "require_node_proto"]

NODE_PROTO_DIR = Path(__file__).resolve().parent.parent / "node_proto"
"""The npm project holding decode.mjs, package.json and package-lock.json."""


def require_node_proto() -> None:
    """Install the pinned packages if they are missing; skip when Node or npm is absent."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are needed to run the official client")
    if not (NODE_PROTO_DIR / "node_modules" / "@ag-ui" / "proto").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_PROTO_DIR,
            check=True,
            timeout=300,
        )


def proto_decode(bodies: Sequence[bytes], *, piece: int = 0) -> list[dict[str, Any]]:
    """
    What the official client decodes from each response body: ``{"events": [...]}``,
    with ``"error"`` when it failed. *piece*: feed it that many bytes at a time.
    """
    require_node_proto()
    request = {"piece": piece, "streams": [base64.b64encode(b).decode() for b in bodies]}
    done = subprocess.run(
        ["node", "decode.mjs"],
        cwd=NODE_PROTO_DIR,
        input=json.dumps(request).encode(),
        capture_output=True,
        check=True,
        timeout=300,
    )
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result
