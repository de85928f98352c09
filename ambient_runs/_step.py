"""
`Step`: one AG-UI step invocation; `StepSpec`: the template step invocations are made from.

A step is ``STEP_STARTED``/``STEP_FINISHED`` around part of the work of the
scope that opens it. `StepSpec` is frozen (a name, and optionally the frame to
open in); a decorated function keeps one and runs each call in a fresh `Step`.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import attrs

from ambient_runs import _scopes
from ambient_runs import events as ev
from ambient_runs._content import Handle
from ambient_runs._faces import Faces, SpecFaces
from ambient_runs._reads import Reads
from ambient_runs.errors import HandleClosedError, HandleWarning

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._scopes import Frame

__all__ = ("Step", "StepSpec")

P = ParamSpec("P")
R = TypeVar("R")


@attrs.frozen
class StepSpec(SpecFaces["Step"]):
    """
    What a step is, apart from any invocation of it: the decorator's template.

    ``frame`` binds invocations to a scope (a `Run`'s or `Subagent`'s
    ``step()`` method); None means whatever is ambient when one starts.

    .. versionadded:: 0.1.0
    """

    name: str
    frame: Frame | None = attrs.field(default=None, repr=False, eq=False)

    def invocation(self) -> Step:
        """A fresh invocation of this spec, not started yet."""
        return Step._of(self)


class Step(Faces, Handle):
    """
    A named step: ``STEP_STARTED`` on entry, ``STEP_FINISHED`` on exit.

    `step` returns one, not started yet; it is single use (an ended step cannot
    be started again). It is a decorator (for sync, async, generator and async
    generator functions: each call runs in a fresh step of the same `spec`), a
    context manager (``with`` and ``async with``) and an explicit handle
    (`start`, `end`). Steps are per owner: the step belongs to the scope that was
    ambient when it started.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("__weakref__", "_depth", "_entered", "_spec", "_token")
    _what = "step"

    def _label(self) -> str:
        return f"step {self.name!r}"

    def __init__(self, name: str, *, frame: Frame | None = None) -> None:
        self._setup(StepSpec(name, frame))

    def _setup(self, spec: StepSpec) -> None:
        # Not opened yet: `_begin` opens the handle part.
        self._spec = spec
        self._ended = False
        self._token: Any = None
        self._entered: Frame | None = None
        self._depth = 0

    spec: Reads[StepSpec] = Reads(
        "_spec", "The frozen template this step was made from (what decorating keeps)."
    )
    name: Reads[str] = Reads("_spec.name", "The step's name (``stepName``).")

    def start(self) -> Self:
        """Send ``STEP_STARTED`` for the ambient (or bound) owner and return the step."""
        self._begin(self._spec.frame or _scopes.require("step"))
        return self

    def _begin(self, parent: Frame) -> Frame:
        name = self._spec.name
        if self._ended:
            msg = f"step {name!r} has ended and cannot be started again; use a new step()"
            raise HandleClosedError(msg)
        if self._entered is not None:
            warnings.warn(
                f"step {name!r} was already started; it was not started again",
                HandleWarning,
                stacklevel=3,
            )
            return self._entered
        Handle.__init__(self, parent)
        self._open(ev.StepStartedEvent, step_name=name)
        self._entered = parent.with_step(name, self)
        return self._entered

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        if not self._ended:
            self.end()

    def end(self) -> None:
        """Send ``STEP_FINISHED``. A second call warns and does nothing."""
        if self._closing():
            self._send(
                ev.StepFinishedEvent(step_name=self._spec.name, subagent_run_id=self._owner)
            )
            if not self._depth:  # no `with` block still needs the frame to leave it
                self._release()

    def _release(self) -> None:
        """Drop the ended step's frame: the two point at each other, a cycle otherwise."""
        self._entered = None

    def _parent_frame(self) -> Frame:
        return self._spec.frame or _scopes.require("step")

    def _started_frame(self) -> Frame | None:
        return self._entered

    def __repr__(self) -> str:
        state = "ended" if self._ended else "open" if self._entered is not None else "not started"
        return f"<Step {self._spec.name!r} {state}>"
