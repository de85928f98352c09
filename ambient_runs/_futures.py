"""
The one asyncio helper the run's cancellation and the stream's channel share.
"""

from __future__ import annotations

import asyncio

__all__ = ("resolve",)


def resolve(future: asyncio.Future[None]) -> None:
    """Complete *future* with None unless it is done (a waiter may have given up)."""
    if not future.done():
        future.set_result(None)
