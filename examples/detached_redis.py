"""
Detached runs on Redis: a run started on one worker is resumed, joined or cancelled on another.

    pip install 'ambient-runs[redis]' uvicorn
    python examples/detached_redis.py --port 8000 --redis redis://127.0.0.1:6379/0 &
    python examples/detached_redis.py --port 8001 --redis redis://127.0.0.1:6379/0 &

Start a run on the first worker, drop the connection half way (the run goes on), and follow
it from the second one:

    curl -N -H 'content-type: application/json' http://127.0.0.1:8000/ \\
         -d '{"threadId": "t", "runId": "r1", "messages": []}'          # ^C half way
    curl -N -H 'Last-Event-ID: 12' http://127.0.0.1:8001/threads/t/runs/r1   # the rest
    curl -N http://127.0.0.1:8001/threads/t/runs/r1                          # or join
    curl -X POST http://127.0.0.1:8001/threads/t/runs/r1/cancel              # or cancel

Every event is appended to Redis before any client sees it, and every frame carries its
number as the SSE ``id:``, so a client resumes after the last one it holds, on any worker.
"""

from __future__ import annotations

import argparse
import asyncio

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.stores.redis import RedisStore

WORDS = "A heat pump, if the house is insulated; a boiler, if it is not and never will be."


@ar.subagent("writer")
async def write(words: list[str]) -> int:
    """Stream the answer slowly, as a model would, so there is time to drop and resume."""
    with ar.message() as answer:
        for word in words:
            await asyncio.sleep(0.05)
            answer.write(word + " ")
    return len(words)


async def agent(run: ar.Run) -> dict[str, int]:
    """Write a long answer in a subagent."""
    return {"words": await write(WORDS.split(" "))}


def make_app(redis_url: str) -> AgentApp:
    """The agent on a Redis store shared by every worker; a worker's lease lapses in 10 s."""
    return AgentApp(agent, store=RedisStore(redis_url), lease=10)


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    uvicorn.run(make_app(args.redis), host="127.0.0.1", port=args.port)
