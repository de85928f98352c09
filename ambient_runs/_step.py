"""
`Step`: a named AG-UI step (``STEP_STARTED``/``STEP_FINISHED``) of the scope that opens it.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._content import Handle
from ambient_runs._faces import Faces
from ambient_runs.errors import HandleClosedError, HandleWarning

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._scopes import Frame

__all__ = ("Step",)


class Step(Faces, Handle):
    """
    A named step: ``STEP_STARTED`` on entry, ``STEP_FINISHED`` on exit.

    One object is a decorator (for sync, async, generator and async generator
    functions), a context manager (``with`` and ``async with``) and an explicit
    handle (`start`, `end`). Steps are per owner: the step belongs to the scope
    that was ambient when it started.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_depth", "_entered", "_frame_override", "_token", "name")
    _what = "step"

    def __init__(self, name: str, *, frame: Frame | None = None) -> None:
        # Not opened yet: a Step is also a decorator, created at import time.
        self.name = name
        self._frame_override = frame
        self._ended = False
        self._token: Any = None
        self._entered: Frame | None = None
        self._depth = 0

    def start(self) -> Self:
        """Send ``STEP_STARTED`` for the ambient (or bound) owner and return the step."""
        self._begin(self._frame_override or _scopes.require("step"))
        return self

    def _begin(self, parent: Frame) -> Frame:
        if self._ended:
            msg = f"step {self.name!r} has ended and cannot be started again; use a new step()"
            raise HandleClosedError(msg)
        if self._entered is not None:
            warnings.warn(
                f"step {self.name!r} was already started; it was not started again",
                HandleWarning,
                stacklevel=3,
            )
            return self._entered
        Handle.__init__(self, parent)
        self._open(ev.StepStartedEvent(step_name=self.name, subagent_run_id=self._owner))
        self._entered = parent.with_step(self.name, self)
        return self._entered

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        if not self._ended:
            self.end()

    def end(self) -> None:
        """Send ``STEP_FINISHED``. A second call warns and does nothing."""
        if self._closing():
            self._send(ev.StepFinishedEvent(step_name=self.name, subagent_run_id=self._owner))
            if not self._depth:  # no `with` block still needs the frame to leave it
                self._release()

    def _release(self) -> None:
        """Drop the ended step's frame: the two point at each other (see `Subagent._release`)."""
        self._entered = None

    def _fresh(self) -> Step:
        return Step(self.name, frame=self._frame_override)

    def _parent_frame(self) -> Frame:
        return self._frame_override or _scopes.require("step")

    def _started_frame(self) -> Frame | None:
        return self._entered
