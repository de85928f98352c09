"""
``python -m ambient_runs``: the command line: ``demo``, ``dev`` and ``tail``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import sys

from ambient_runs._demo import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
