"""
The faces `Step` and `Subagent` invocations share: ``with``, ``async with`` and decorator.

A class that mixes in `Faces` provides the lifecycle hooks it names; the faces
turn them into context-manager and decorator behaviour, so both invocation
kinds enter, re-enter, leave and decorate the same way. Decorating goes
through the invocation's frozen spec: each call of the decorated function runs
in a fresh invocation of it, never in the one that decorated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from ambient_runs import _scopes
from ambient_runs._decorators import decorate
from ambient_runs._outcomes import safely

if TYPE_CHECKING:
    from typing import Self

    from ambient_runs._outcomes import ExcInfo
    from ambient_runs._reads import Reads
    from ambient_runs._scopes import Frame

__all__ = ("Faces", "SpecFaces")

P = ParamSpec("P")
R = TypeVar("R")

_new = object.__new__


class Faces:
    """
    The context-manager and decorator faces that `Step` and `Subagent` share.

    An invocation provides `_begin` (announce it in a parent frame, return the
    frame to make ambient; warn and return the same frame when already
    started), `_finish` (end it the way the body ended), `spec` (its frozen
    template, which decorates), and the two frame hooks below.
    """

    _what: str

    if TYPE_CHECKING:
        # Slots of each invocation class (mypy would reject them against an empty
        # __slots__ here, which the runtime needs: a slotted class with two
        # slotted bases cannot have both lay out instance fields).
        _depth: int
        _token: Any

        name: Reads[str]

        def start(self) -> Self: ...

        def _setup(self, spec: Any) -> None: ...  # fill a fresh invocation of *spec*

        ended: Reads[bool]  # each invocation class has its own

        @property
        def spec(self) -> Callable[[Any], Any]: ...  # decorates: a fresh invocation per call

    else:
        __slots__ = ()

    @classmethod
    def _of(cls, spec: Any) -> Self:
        """A fresh invocation of *spec* (checked already: no `__init__`)."""
        invocation = _new(cls)
        invocation._setup(spec)
        return invocation

    def _parent_frame(self) -> Frame:
        """The frame a new scope starts in: a bound one, or the ambient one."""
        raise NotImplementedError

    def _started_frame(self) -> Frame | None:
        """The frame `_begin` made, or None before the scope starts."""
        raise NotImplementedError

    def _begin(self, parent: Frame) -> Frame:
        raise NotImplementedError

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        """Drop references the ended scope no longer needs (a hook; nothing by default)."""

    def __enter__(self) -> Self:
        started = self._started_frame()
        if started is not None:  # re-entered (or entered after start()): warn, no re-announce
            self._begin(started)
            self._depth += 1
            return self
        self._token = _scopes.enter(self._begin(self._parent_frame()))
        self._depth = 1
        return self

    def __exit__(self, *exc_info: *ExcInfo) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        if self._token is not None:
            _scopes.leave(self._token, self._started_frame(), f"{self._what} {self.name!r}")
            self._token = None
        exc = exc_info[1]
        if exc is not None:
            safely(self._finish, exc)
        else:
            self._finish(None)
        if self.ended:
            self._release()

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(self, *exc_info: *ExcInfo) -> None:
        self.__exit__(*exc_info)

    # One signature, not an overload with an ``Any`` fallback: mypy answers ``Any`` for an
    # overloaded call whose argument mentions ``Any`` (``-> dict[str, Any]``) when two
    # overloads match, which erased every such decorated function's signature.
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Decorate *fn* with this invocation's `spec`: each call runs in a fresh invocation."""
        decorated: Callable[P, R] = self.spec(fn)
        return decorated


Invocation = TypeVar("Invocation", bound=Faces)


class SpecFaces(Generic[Invocation]):
    """
    What `SubagentSpec` and `StepSpec` share: a fresh invocation, started or decorating.

    A spec provides `invocation` (a fresh invocation of itself, not started).
    """

    __slots__ = ()

    def invocation(self) -> Invocation:
        """A fresh invocation of this spec, not started yet."""
        raise NotImplementedError

    def start(self) -> Invocation:
        """Start a fresh invocation and return it (see the invocation's ``start``)."""
        return self.invocation().start()

    def _start(self, parent: Frame) -> Frame:
        """
        Start a fresh invocation in *parent*, for one decorated call: its frame.

        The frame's ``handle`` is the invocation. A spec may do it faster.
        """
        return self.invocation()._begin(parent)

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Decorate *fn*: each call runs inside a fresh invocation of this spec."""
        decorated: Callable[P, R] = decorate(fn, self._start)
        return decorated
