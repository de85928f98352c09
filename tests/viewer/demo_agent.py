"""The demo's research agent at a brisk pace, for the viewer's browser tests."""

from __future__ import annotations

from ambient_runs._demo import research_agent

__all__ = ["agent"]

agent = research_agent(pace=0.2)
