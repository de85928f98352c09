"""Random agent programs driven through a real `Run`: valid, richly interleaved event logs."""

from __future__ import annotations

import warnings
from typing import Any

from hypothesis import strategies as st

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import make_input, wire

__all__ = ["INPUT", "log_of", "programs"]

INPUT = make_input(
    "thread",
    "run",
    user="go",
    messages=(ev.SystemMessage(id="sys", content="be brief"),),
    state={"seen": 0, "items": []},
)

#: One step of a program: (operation, a choice among its targets, a small payload number).
programs = st.lists(
    st.tuples(st.integers(0, 17), st.integers(0, 1_000), st.integers(0, 50)), max_size=70
)


def log_of(
    program: list[tuple[int, int, int]], *, finish: str = "success"
) -> list[dict[str, Any]]:
    """Run *program* and return the run's events in wire form, RUN_STARTED to the end."""
    run = ar.Run(INPUT)  # starts from the client's state, INPUT.state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # auto-closed leftovers are part of the point
        try:
            with run:
                _drive(run, program, finish)
        except _Failed:
            pass
    return wire(list(run.events))


class _Failed(Exception):
    """The program's agent failing on purpose: the run ends with RUN_ERROR."""


def _drive(run: ar.Run, program: list[tuple[int, int, int]], finish: str) -> None:
    owners: list[Any] = [run]  # emitters: the run and the open subagents
    handles: list[Any] = []  # open messages, reasoning blocks, tool calls, steps, activities
    messages: list[tuple[str, str | None]] = []
    closed_calls: list[Any] = []
    if True:
        if True:
            for op, pick, n in program:
                owners = [o for o in owners if o is run or not o.ended]
                handles = [h for h in handles if not h.ended]
                owner = owners[pick % len(owners)]
                handle = handles[pick % len(handles)] if handles else None
                if op == 0:
                    handle = owner.message(id=f"m{len(messages)}")
                    messages.append((handle.id, owner.current_subagent_id()))
                    handles.append(handle)
                elif op == 1 and isinstance(handle, ar.MessageHandle):
                    handle.write(f"w{n} ")
                elif op == 2 and handle is not None and not isinstance(handle, ar.Step):
                    handle.end()
                elif op == 3:
                    parent = None
                    mine = [m for m, who in messages if who == owner.current_subagent_id()]
                    if mine and n % 2:
                        parent = mine[n % len(mine)]
                    handles.append(owner.tool_call(f"tool{n % 3}", parent_message_id=parent))
                elif op == 4 and isinstance(handle, ar.ToolCallHandle):
                    handle.args(f'{{"q": {n}}}' if n % 3 == 0 else f"part{n}")
                elif op == 5 and isinstance(handle, ar.ToolCallHandle):
                    handle.end()
                    closed_calls.append(handle)
                elif op == 6 and closed_calls:
                    call = closed_calls.pop(pick % len(closed_calls))
                    call.result(f"result {n}")
                elif op == 7:
                    reasoning = owner.reasoning()
                    handles.append(reasoning)
                elif op == 8 and isinstance(handle, ar.ReasoningHandle):
                    handle.write(f"hmm{n} ")
                    if n % 5 == 0:
                        handle.encrypted(f"secret{n}")
                elif op == 9:
                    owners.append(owner.subagent(f"agent{n % 4}").start())
                elif op == 10 and owner is not run:
                    if n % 3 == 0:
                        owner.fail(f"failed {n}", code="boom")
                    else:
                        owner.finish_with({"n": n})
                elif op == 11:
                    run.update_state(lambda s, n=n: s["items"].append(n))
                elif op == 12:
                    run.set_state({"seen": n, "items": [n]})
                elif op == 13:
                    step = owner.step(f"step{n % 3}")
                    try:
                        step.start()
                    except Exception:
                        continue
                    handles.append(step)
                elif op == 14 and isinstance(handle, ar.Step):
                    handle.end()
                elif op == 15:
                    handles.append(owner.activity("progress", {"done": n}))
                elif op == 16 and isinstance(handle, ar.ActivityHandle):
                    handle.update({"done": n, "of": 50})
                elif op == 17:
                    owner.say(f"said {n}")
            if finish == "error":
                raise _Failed("the agent failed")
