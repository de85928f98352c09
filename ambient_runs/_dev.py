"""
``python -m ambient_runs dev MODULE:ATTR``: serve an agent with the live run viewer, reloading.

*ATTR* names an agent function, an `AgentApp`, or an ASGI application (FastAPI,
Starlette, …) that mounts one. The development server binds 127.0.0.1 only, runs
uvicorn (the ``[dev]`` extra) with its reloader (polling when watchfiles is not
installed), and lays the app out so that one address shows everything:

- an agent function or an `AgentApp`: the agent at ``/agent``, the viewer at
  ``/`` (and ``/_viewer``); an agent function's events are stamped
  (`ambient_runs.transform.Timestamps`), so a replayed run keeps its time axis;
- an ASGI application: served as it is, the viewer added at ``/_viewer``, set
  to the path where the application mounts its `AgentApp` (found by walking
  Starlette-style ``routes``; the page's endpoint field changes it).

The reloader re-imports the target in a fresh worker process; the parent
imports it once first, so a wrong ``MODULE:ATTR`` fails at once, with the reason.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, TypeAlias

import attrs

from ambient_runs.asgi import AgentApp
from ambient_runs.errors import MissingExtraError
from ambient_runs.transform import Timestamps
from ambient_runs.viewer import _send_page, viewer_page

__all__ = (
    "AGENT_PATH",
    "VIEWER_PATH",
    "DevApp",
    "DevTargetError",
    "Layout",
    "app_factory",
    "layout",
    "load_target",
    "serve",
    "store",
)

_Message: TypeAlias = MutableMapping[str, Any]
_Receive: TypeAlias = Callable[[], Awaitable[_Message]]
_Send: TypeAlias = Callable[[_Message], Awaitable[None]]

# What the reloader's worker process reads to build the same app (it starts afresh).
_ENV_TARGET = "AMBIENT_RUNS_DEV_TARGET"
_ENV_STORE = "AMBIENT_RUNS_DEV_STORE"
_ENV_PATH = "AMBIENT_RUNS_DEV_PATH"

AGENT_PATH = "/agent"
VIEWER_PATH = "/_viewer"


class DevTargetError(ValueError):
    """``MODULE:ATTR`` does not name something the dev server can serve; the message says why."""


def load_target(spec: str, *, app_dir: str | None = None) -> Any:
    """
    Import ``MODULE:ATTR`` (*ATTR* may be dotted), *app_dir* (default: the cwd) first on the path.

    Raises:
        DevTargetError: The spec is malformed, the module or attribute is missing.
    """
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        msg = f"{spec!r} is not MODULE:ATTR; e.g. `python -m ambient_runs dev my_agent:agent`"
        raise DevTargetError(msg)
    where = str(Path(app_dir or os.getcwd()).resolve())
    if where not in sys.path:
        sys.path.insert(0, where)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            msg = f"no module {module_name!r} in {where} (run the command from its folder)"
            raise DevTargetError(msg) from None
        raise
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            msg = f"module {module_name!r} has no attribute {attr!r}"
            raise DevTargetError(msg) from None
    return target


def store(url: str | None) -> Any:
    """The run store a ``--store`` names: None, a MemoryStore (``memory``) or a RedisStore."""
    if url is None:
        return None
    if url == "memory":
        from ambient_runs.stores import MemoryStore

        return MemoryStore()
    if not url.startswith(("redis://", "rediss://", "unix://")):
        msg = f"--store takes redis://host:port/db or 'memory', not {url!r}"
        raise DevTargetError(msg)
    from ambient_runs.stores.redis import RedisStore

    return RedisStore(url)


def _is_asgi(target: Any) -> bool:
    """Whether *target* is called as an ASGI 3 application: ``(scope, receive, send)``."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) == 3


def _find_mount(app: Any, prefix: str = "", depth: int = 0) -> str | None:
    """The path where *app* (Starlette-style ``routes``) mounts an `AgentApp`, or None."""
    if depth > 8:
        return None
    routes = getattr(app, "routes", None)
    if routes is None:
        routes = getattr(getattr(app, "router", None), "routes", None)
    for route in routes or ():
        path = getattr(route, "path", None)
        inner = getattr(route, "app", None)
        if not isinstance(path, str) or inner is None:
            continue
        if isinstance(inner, AgentApp):
            # A mount answers below its path: "/agent/" (a POST to "/agent" gets a 307).
            return prefix + path + "/"
        found = _find_mount(inner, prefix + path, depth + 1)
        if found is not None:
            return found
    return None


@attrs.frozen
class Layout:
    """What the dev server serves: the app, where the agent answers, where the viewer is."""

    app: Any
    endpoint: str
    viewer: str
    owns_root: bool


def layout(target: Any, store_url: str | None = None) -> Layout:
    """
    Lay out *target* for the dev server (see the module's docstring).

    Raises:
        DevTargetError: *store_url* given for an `AgentApp` or an ASGI app (they
            own their store), or *target* is none of the three kinds.
    """
    if isinstance(target, AgentApp) or _is_asgi(target):
        if store_url is not None:
            msg = (
                "--store applies to an agent function; an AgentApp has its own (pass store= to it)"
            )
            raise DevTargetError(msg)
        if isinstance(target, AgentApp):
            return Layout(target, AGENT_PATH, "/", owns_root=True)
        endpoint = _find_mount(target) or "/"
        return Layout(target, endpoint, VIEWER_PATH, owns_root=False)
    if not callable(target):
        msg = (
            f"{target!r} is not an agent function, an AgentApp or an ASGI app; "
            "name one of those (MODULE:ATTR)"
        )
        raise DevTargetError(msg)
    # Timestamps: a replayed run (all its events at once) keeps its time axis in the viewer.
    app = AgentApp(target, store=store(store_url), transformers=[Timestamps()])
    return Layout(app, AGENT_PATH, "/", owns_root=True)


class DevApp:
    """The dev server's ASGI app: the viewer at its paths, everything else to the app."""

    def __init__(self, chosen: Layout) -> None:
        self.layout = chosen
        self._page = viewer_page(chosen.endpoint, title="ambient_runs dev")
        self._viewer_paths = {VIEWER_PATH, VIEWER_PATH + "/"}
        if chosen.owns_root:
            self._viewer_paths.add("/")

    async def __call__(self, scope: _Message, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http" and scope.get("path") in self._viewer_paths:
            await _send_page(self._page, scope, send)
            return
        await self.layout.app(scope, receive, send)


def app_factory() -> DevApp:
    """Build the app the environment names: what each reloaded worker process serves."""
    spec = os.environ[_ENV_TARGET]
    target = load_target(spec, app_dir=os.environ.get(_ENV_PATH))
    return DevApp(layout(target, os.environ.get(_ENV_STORE) or None))


def serve(
    spec: str,
    *,
    port: int = 8000,
    store_url: str | None = None,
    reload: bool = True,
    out: Any = None,
) -> int:
    """
    Run the dev server for ``MODULE:ATTR`` on 127.0.0.1:*port* until interrupted.

    Raises:
        MissingExtraError: uvicorn (the ``[dev]`` extra) is not installed.
        DevTargetError: *spec* or *store_url* is wrong (see `load_target`, `layout`).
    """
    out = sys.stderr if out is None else out
    try:
        uvicorn = importlib.import_module("uvicorn")
    except ImportError:
        raise MissingExtraError(
            module="python -m ambient_runs dev", needs="uvicorn", extra="dev", name="uvicorn"
        ) from None
    app_dir = os.getcwd()
    target = load_target(spec, app_dir=app_dir)  # fail now, with the reason, not in a worker
    chosen = layout(target, store_url)
    os.environ[_ENV_TARGET] = spec
    os.environ[_ENV_PATH] = app_dir
    os.environ[_ENV_STORE] = store_url or ""
    root = f"http://127.0.0.1:{port}"
    module_file = getattr(sys.modules.get(spec.partition(":")[0]), "__file__", None)
    watched = str(Path(module_file).parent) if module_file else app_dir
    print(f"ambient_runs dev: serving {spec}", file=out)
    print(f"  viewer    {root}{chosen.viewer}    <- open this in a browser", file=out)
    print(f"  endpoint  {root}{chosen.endpoint}  (POST a RunAgentInput)", file=out)
    if store_url:
        print(f"  store     {store_url}: runs open by id in the viewer", file=out)
    if reload:
        print(f"  reload    on changes to *.py in {watched}", file=out)
    out.flush()
    uvicorn.run(
        "ambient_runs._dev:app_factory",
        factory=True,
        host="127.0.0.1",
        port=port,
        reload=reload,
        reload_dirs=[watched] if reload else None,
        log_level="info",
    )
    return 0
