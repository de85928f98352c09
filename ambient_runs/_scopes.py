"""
The only module that touches contextvars.

One `ContextVar` holds an immutable `Frame`: the ambient run, the subagent
invocation everything is attributed to, and the current step. A frame is never
mutated; entering a scope sets a new frame and leaving it resets the token.

Two rules keep the var honest where other libraries leak (see
``shared/reference/ambient-pitfalls.md``):

- Tokens are reset only in their own Context and only while the frame they set
  is still the current one (LIFO). Anything else (a scope entered in one task and
  left in another, closed out of order, or finalized by the garbage collector) is
  recorded in the event stream by the caller, leaves the contextvar alone, and
  logs one DEBUG line. Nothing is raised into user code.
- Generators never hold a token across ``yield``: their wrappers set the frame
  around each resumption (`within`), so the consumer never sees the generator's
  scope between items.
- Nothing the garbage collector can run sets or resets a var in the Context it
  interrupted: a sync generator's close path (which the collector runs when it
  finalizes an abandoned one) runs `isolated`, in a private copy of the
  Context. On CPython 3.11 the collector can run inside user code's own
  ``ContextVar.set``, and a second set of the same Context there frees the
  HAMT the first one is still copying (a segfault, CPython gh-148891).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ambient_runs.errors import NoActiveRunError

if TYPE_CHECKING:
    from ambient_runs._pipeline import Pipeline, Registry
    from ambient_runs._run import Run
    from ambient_runs._subagent import Subagent

__all__ = (
    "Frame",
    "PlainFrame",
    "add_run_hook",
    "add_tap",
    "bind",
    "capture",
    "current",
    "enter",
    "isolated",
    "leave",
    "remove_run_hook",
    "remove_tap",
    "require",
    "reset",
    "run_hooks",
    "taps",
    "within",
)

P = ParamSpec("P")
R = TypeVar("R")

_log = logging.getLogger("ambient_runs")


class Frame:
    """
    What is ambient at one point of the program: a run, a subagent, a step.

    Immutable by convention once entered (slots, no setters). A frame knows
    the frame it was entered from (*parent*) and the handle whose end ends it
    (*handle*: a subagent or a step invocation; None for the run's root
    frame), so `leave` can tell a live frame from a dead one. The one mutable
    bit, *orphaned*, records that the frame's scope was left without its token
    being reset (out of order, or in another Context): such a frame must never
    become current again by a later reset.

    Two kinds: a subagent invocation is its own frame (`Subagent` is a
    `Frame`: one object per decorated call, its *handle* and *host* itself),
    and a `PlainFrame` is the run's root or a step's (`with_step`).
    """

    __slots__ = ("orphaned", "owner", "parent", "pipeline", "registry", "step_name")

    # Declared for the type checker only: evaluated, these annotations would name
    # classes this module cannot import (`typing.get_type_hints` of a `Subagent`).
    if TYPE_CHECKING:
        #: The run's event pipeline (`Run.pipeline`): where this frame's events go.
        pipeline: Pipeline
        #: Where handles opened in this frame are registered: its scope's open handles.
        registry: Registry
        #: The ``subagentRunId`` events emitted in this frame carry (None: the parent agent).
        owner: str | None
        #: The current step's name (None: no step).
        step_name: str | None
        parent: Frame | None
        orphaned: bool
        #: The subagent invocation the frame's events are attributed to (None: the parent
        #: agent). A slot of `PlainFrame`; a `Subagent` is its own.
        host: Subagent | None
        #: The invocation whose end ends this frame (None: the root frame's run).
        handle: Any

    @property
    def run(self) -> Run:
        """The run this frame belongs to."""
        return self.pipeline.run

    def _finish(self, exc: BaseException | None, result: Any = None) -> None:
        """End the scope this frame stands for, the way its body ended (its handle's)."""
        self.handle._finish(exc, result)

    def _conclude(self, result: Any = None) -> None:
        """End the scope this frame stands for: its body returned *result*."""
        self.handle._finish(None, result)

    def with_step(self, step: str, handle: Any = None) -> Frame:
        """Return a frame entered from this one, in *step* (*handle*: the `Step` that ends it)."""
        child = _new_frame(PlainFrame)
        child.pipeline = self.pipeline
        child.registry = self.registry
        child.host = self.host
        child.owner = self.owner
        child.step_name = step
        child.parent = self
        child.handle = handle
        child.orphaned = False
        return child

    def open_registry(self) -> Registry:
        """
        Where a handle opened in this frame is registered: the nearest scope still open.

        This frame's own registry while its subagent is open. Once it has ended
        (a task that outlived it, a generator started after it ended), the
        registry of the nearest enclosing subagent still open, or the run's:
        that scope closes the orphan (with a `LeftOpenWarning`) when it ends, so
        the run can always finish. The orphan's events keep the ended
        subagent's id: attribution says who did the work.
        """
        frame: Frame | None = self
        while frame is not None:
            host = frame.host
            if host is None or not host.ended:
                return frame.registry
            frame = frame.parent
        return self.pipeline.root

    @property
    def ended(self) -> bool:
        """Whether the scope this frame stands for has ended (for the root frame: the run)."""
        handle = self.handle
        if handle is None:
            return bool(self.pipeline.finished)
        return bool(handle.ended)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(run={self.pipeline.run_id!r}, owner={self.owner!r}, "
            f"step={self.step_name!r})"
        )


class PlainFrame(Frame):
    """A frame that is not itself an invocation: the run's root, or a step's (`with_step`)."""

    __slots__ = ("handle", "host")

    if TYPE_CHECKING:
        host: Subagent | None
        handle: Any

    def __init__(self, run: Run) -> None:
        """The root frame of *run*: the parent agent, no step."""
        self.pipeline = run.pipeline
        self.registry = run.pipeline.root
        self.host = self.owner = self.step_name = self.parent = self.handle = None
        self.orphaned = False


_new_frame = object.__new__

_FRAME: contextvars.ContextVar[Frame | None] = contextvars.ContextVar(
    "ambient_runs.frame", default=None
)

#: Read the ambient frame (None outside any run): the hot path of every emitter.
current = _FRAME.get


def require(what: str) -> Frame:
    """
    Return the ambient frame, for emitter *what*.

    Raises:
        NoActiveRunError: No run is ambient; the message names the fix.
    """
    frame = _FRAME.get()
    if frame is None:
        msg = (
            f"{what}() needs an active run: call it inside `async with ambient_runs.Run(input):` "
            "(or a function that run calls), or use the run's own method, e.g. run.say()"
        )
        thread = threading.current_thread()
        if thread is not threading.main_thread():
            msg += (
                f". This is thread {thread.name!r}, and a plain thread, ThreadPoolExecutor or "
                "loop.run_in_executor does not carry the run's context into it: hand the work "
                "over with ambient_runs.ContextThreadPoolExecutor, ambient_runs.run_in_executor, "
                "ambient_runs.Thread or ambient_runs.wrap(fn) (asyncio.to_thread carries it)"
            )
        raise NoActiveRunError(msg)
    return frame


#: Make a frame ambient; hand the token to `leave` (the var's own ``set``: no wrapper).
enter: Callable[[Frame | None], contextvars.Token[Frame | None]] = _FRAME.set

#: `leave`'s common case (the var's own ``reset``), for a caller that has just seen its
#: frame current and the frame it restores not orphaned; `ValueError` in another Context,
#: and then `leave` says what to do.
reset: Callable[[contextvars.Token[Frame | None]], None] = _FRAME.reset


def leave(
    token: contextvars.Token[Frame | None], frame: Frame | None, what: str, *, final: bool = True
) -> bool:
    """
    Restore what was ambient before `enter` returned *token*, if that is still safe.

    Safe means: we are in the Context that set it, and *frame* is still the
    current frame, or every frame entered after it here has ended already.
    Otherwise the var is left alone and one DEBUG line says why; the caller has
    recorded the end of the scope in the event stream already.

    A reset never resurrects a dead scope: when the frame it restores was
    itself left out of order (*orphaned*), its nearest ancestor that was not
    becomes current instead (two scopes entered A then B and left A then B
    leave the outer scope current, not A).

    Args:
        final: The scope ends here (False: one resumption of a generator, entered again later).

    Returns:
        Whether the contextvar was reset.
    """
    current = _FRAME.get()
    if current is not frame:
        while current is not None and current is not frame and current.ended:
            current = current.parent
        if current is not frame:
            _log.debug("%s left out of order; the contextvar was not touched", what)
            if final and frame is not None:
                frame.orphaned = True
            return False
    try:
        _FRAME.reset(token)
    except ValueError:
        _log.debug("%s left in another Context; the contextvar was not touched", what)
        if final and frame is not None:
            frame.orphaned = True
        return False
    restored = _FRAME.get()
    if restored is not None and restored.orphaned:
        while restored is not None and restored.orphaned:
            restored = restored.parent
        _FRAME.set(restored)
    return True


def within(frame: Frame | None, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """
    Call *fn* with *frame* ambient, and restore the caller's frame.

    One resumption of a scoped generator (``send``/``throw``/``close``), or a
    callback run inside a handle's scope (`ambient_runs.use`).
    """
    token = _FRAME.set(frame)
    try:
        return fn(*args, **kwargs)
    finally:
        _FRAME.reset(token)


def isolated(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """
    Call *fn* in a private copy of the current Context (`Context.run`).

    What *fn* sets or resets (`within`, `enter`, a tap's own contextvars) changes
    the copy only: the Context that was current is never written, so *fn* is
    safe to run from a garbage-collector finalizer that may have interrupted a
    ``ContextVar.set`` of that Context (see the module docstring). Its sets are
    not visible to the caller, which is the point.
    """
    return contextvars.copy_context().run(fn, *args, **kwargs)


_TAPS: contextvars.ContextVar[tuple[Callable[[Any], object], ...]] = contextvars.ContextVar(
    "ambient_runs.taps", default=()
)

#: The taps (extra sinks) every run created here also delivers to (`testing.capture_events`).
taps = _TAPS.get


def add_tap(
    tap: Callable[[Any], object],
) -> contextvars.Token[tuple[Callable[[Any], object], ...]]:
    """Make every run created in this Context from now on also deliver to *tap*."""
    return _TAPS.set((*_TAPS.get(), tap))


def remove_tap(token: contextvars.Token[tuple[Callable[[Any], object], ...]]) -> None:
    """Undo `add_tap` (quietly when left in another Context)."""
    try:
        _TAPS.reset(token)
    except ValueError:
        _log.debug("capture left in another Context; the contextvar was not touched")


#: Process-wide hooks every new `Run` calls once, from its constructor (`add_run_hook`).
#: Not a contextvar on purpose: instrumentation (``adapters.otel``) must reach runs made
#: in any thread or task, whatever Context they start in.
_RUN_HOOKS: tuple[Callable[[Run], object], ...] = ()


def run_hooks() -> tuple[Callable[[Run], object], ...]:
    """The hooks every `Run` calls with itself when it is made (`add_run_hook`)."""
    return _RUN_HOOKS


def add_run_hook(hook: Callable[[Run], object]) -> None:
    """
    Make every `Run` created from now on, in any thread, call *hook* with itself.

    For instrumentation: the hook typically adds a tap (`Run.add_tap`) or a
    transformer (`Run.add_transformer`) to the run. It runs in the constructor,
    so it must be quick and must not raise. Adding a hook twice adds it once.
    """
    global _RUN_HOOKS
    if hook not in _RUN_HOOKS:
        _RUN_HOOKS = (*_RUN_HOOKS, hook)


def remove_run_hook(hook: Callable[[Run], object]) -> None:
    """Undo `add_run_hook` (runs already made keep what the hook gave them)."""
    global _RUN_HOOKS
    _RUN_HOOKS = tuple(h for h in _RUN_HOOKS if h != hook)


def capture() -> contextvars.Context:
    """Snapshot the whole current Context, for work that will run elsewhere."""
    return contextvars.copy_context()


def bind(fn: Callable[P, R]) -> Callable[P, R]:
    """
    Return *fn* bound to the Context of this moment, runnable from any thread.

    Each call runs in a fresh copy of the captured Context, so concurrent calls
    (a thread pool reusing the same wrapper) never share one, and a worker
    thread reused for another job carries nothing of this one.
    """
    context = contextvars.copy_context()

    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.copy().run(fn, *args, **kwargs)

    bound.__wrapped__ = fn  # type: ignore[attr-defined]
    return bound
