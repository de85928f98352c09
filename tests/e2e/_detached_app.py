"""The demo agent served detached on a RedisStore: one uvicorn worker of the two-worker tests.

Configured by the environment: ``AR_REDIS_URL``, ``AR_PREFIX``, ``AR_LEASE``, ``AR_PACE``.
"""

from __future__ import annotations

import os

from ambient_runs._demo import research_agent
from ambient_runs.asgi import AgentApp
from ambient_runs.stores.redis import RedisStore

app = AgentApp(
    research_agent(float(os.environ["AR_PACE"])),
    store=RedisStore(os.environ["AR_REDIS_URL"], prefix=os.environ["AR_PREFIX"], retention=60),
    lease=float(os.environ["AR_LEASE"]),
    keep_alive=0.5,
)
