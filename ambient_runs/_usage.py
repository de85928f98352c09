"""
Token usage: what `usage` records, and the run's sums per provider and model.

`usage_in` checks one report (a `TokenUsage`), adds it to the run's totals and
sends it, attributed to the scope that made the call, as a ``CUSTOM`` event
named `USAGE_EVENT` (its value the report's wire form), so a tap such as the
OpenTelemetry adapter can put it on that scope's span. The run's terminal event
(``RUN_FINISHED``, ``RUN_ERROR``, a cancelled finish) carries the totals:
one `TokenUsage` per (provider, model), in the order first reported, every
count summed over the reports that gave it (a count no report gave stays absent).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, TypedDict

import attrs

from ambient_runs import events as ev
from ambient_runs._wire import to_wire

if TYPE_CHECKING:
    from ambient_runs._scopes import Frame

__all__ = ("COUNTS", "USAGE_EVENT", "TokenCounts", "UsageTotals", "usage_in")

#: The ``CUSTOM`` event name a usage report goes out under.
USAGE_EVENT = "ambient_runs.usage"


class TokenCounts(TypedDict, total=False):
    """
    The counts ``usage(**counts)`` takes: the count fields of a `TokenUsage`.

    Each is a non-negative int; one left out (or None) is "not reported", never
    zero. `ambient_runs.usage` and the ``usage`` method of `Run` and `Subagent`
    take them as keywords (PEP 692), so both faces name them once, here.

    .. versionadded:: 0.1.0
    """

    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    reasoning_tokens: int | None
    cached_input_tokens: int | None
    cache_write_input_tokens: int | None


#: The count fields of a `TokenUsage`, in declaration order.
COUNTS: tuple[str, ...] = tuple(
    a.name for a in attrs.fields(ev.TokenUsage) if a.name not in ("provider", "model")
)
_COUNT_NAMES = frozenset(COUNTS)


class UsageTotals:
    """A run's token counts, summed per (provider, model); thread-safe under the run's lock."""

    __slots__ = ("_lock", "_sums")

    def __init__(self, lock: threading.RLock) -> None:
        #: The run's lock (``Pipeline.lock``): `usage_in` holds it around `add` already, and
        #: re-entering it costs little; `totals` is also read without it (`Run`'s finish).
        self._lock = lock
        #: Made at the first report: most runs report none, and an idle run stays small.
        self._sums: dict[tuple[str | None, str | None], dict[str, int]] | None = None

    def add(self, usage: ev.TokenUsage) -> None:
        """Add one report to its (provider, model)'s sums."""
        with self._lock:
            every = self._sums
            if every is None:
                every = self._sums = {}
            sums = every.setdefault((usage.provider, usage.model), {})
            for name in COUNTS:
                count = getattr(usage, name)
                if count is not None:
                    sums[name] = sums.get(name, 0) + count

    def totals(self) -> tuple[ev.TokenUsage, ...] | None:
        """One `TokenUsage` per (provider, model), first reported first; None before any."""
        with self._lock:
            every = self._sums
            if not every:
                return None
            return tuple(
                ev.TokenUsage(provider=provider, model=model, **sums)
                for (provider, model), sums in every.items()
            )


def usage_in(
    frame: Frame,
    provider: str | None,
    model: str | None,
    counts: TokenCounts,
) -> ev.TokenUsage:
    """
    Record a usage report in *frame*'s scope (see the module docstring) and return it.

    Raises:
        TypeError: A keyword of *counts* is not one of `COUNTS` (a typo).
    """
    if not counts.keys() <= _COUNT_NAMES:
        unknown = ", ".join(sorted(counts.keys() - _COUNT_NAMES))
        msg = f"usage() takes the counts {', '.join(COUNTS)}; not {unknown}"
        raise TypeError(msg)
    report = ev.TokenUsage(provider=provider, model=model, **counts)
    pipeline = frame.pipeline
    with pipeline.lock:
        pipeline.send(
            ev.CustomEvent(name=USAGE_EVENT, value=to_wire(report), subagent_run_id=frame.owner)
        )
        pipeline.usage.add(report)
    return report
