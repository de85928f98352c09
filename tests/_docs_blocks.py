"""
The Python blocks of README.md and docs/**/*.md, with what each says about how it runs.

A block is a fenced ```` ```python ```` block. How the test suite runs it is said by an HTML
comment (invisible on the rendered page) on the line right before its fence:

- no comment: the block runs as a script and must not raise;
- ``<!-- test: serve -->``: it runs, then its ``app`` (an ASGI application) is sent a
  ``RunAgentInput`` and must answer a valid AG-UI stream that finishes. Options:
  ``app=NAME`` (another variable), ``path=/agent/`` (where the agent is mounted);
- ``<!-- test: serve remote=http://127.0.0.1:8001 -->``: as ``serve``, and the block calls
  another AG-UI server at that address: the test serves one there (a FastAPI app with an
  agent mounted at ``/agent``, as the serving guide shows) on a free port, and the block's
  address is rewritten to it;
- ``<!-- test: not-run REASON -->``: not run, for the reason given. The test counts these
  against a fixed number, so none is skipped silently.

A block that only includes a file of ``examples/`` (``--8<-- "examples/NAME.py"``, the
snippets extension) is of kind ``include``: ``tests/test_examples.py`` runs those files.

What a block needs beyond the core is said in the block itself, where the reader sees it, by
a line ``# pip install 'ambient-runs[EXTRA,...]' OTHER-PACKAGE ...``. The test checks that
those extras and packages provide every module the block imports (and each one provides
one), by following the installed distributions' requirements: ``[otel]`` brings
``opentelemetry-api``, and a block importing ``opentelemetry.sdk`` must name
``opentelemetry-sdk`` too.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = ["ADAPTER_EXTRAS", "ROOT", "Block", "blocks", "missing_modules", "pages"]

ROOT = Path(__file__).resolve().parent.parent

#: The modules of the package that need an extra, and which.
ADAPTER_EXTRAS = {
    "ambient_runs.adapters.http": "http",
    "ambient_runs.adapters.otel": "otel",
    "ambient_runs.adapters.pydantic_ai": "pydantic-ai",
    "ambient_runs.adapters.langgraph": "langgraph",
    "ambient_runs.adapters.openai_agents": "openai-agents",
    "ambient_runs.adapters.starlette": "starlette",
    "ambient_runs.stores.redis": "redis",
    "ambient_runs.stores.redis_continuations": "redis",
}

_FENCE = re.compile(
    r"(?:<!-- test: (?P<marker>[^\n]*?) -->\n)?^```python\n(?P<code>.*?)^```", re.S | re.M
)
_INSTALL = re.compile(r"^# pip install (?P<args>.+?)(?:\s+#.*)?$", re.M)


@dataclass(frozen=True)
class Block:
    """One ```python block of a page."""

    page: str
    line: int
    code: str
    kind: str = "run"
    options: dict[str, str] = field(default_factory=dict)
    reason: str = ""

    @property
    def id(self) -> str:
        """``page:line``, the block's name in test ids and messages."""
        return f"{self.page}:{self.line}"

    def installs(self) -> list[str]:
        """The requirements its ``# pip install`` lines name (none: the core only)."""
        return [arg for m in _INSTALL.finditer(self.code) for arg in shlex.split(m["args"])]

    def imports(self) -> set[str]:
        """Every module it imports (absolute imports, at any depth)."""
        found: set[str] = set()
        for node in ast.walk(ast.parse(self.code)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        return found


def pages() -> list[Path]:
    """README.md and every page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _parse_marker(text: str) -> tuple[str, dict[str, str], str]:
    kind, _, rest = text.partition(" ")
    if kind == "include":
        return kind, {}, ""
    if kind == "not-run":
        return kind, {}, rest.strip()
    if kind != "serve":
        msg = f"unknown test marker {text!r}: use serve [app=… path=… remote=…] or not-run REASON"
        raise ValueError(msg)
    options = dict(item.split("=", 1) for item in rest.split())
    return kind, options, ""


def blocks() -> list[Block]:
    """Every ```python block of every page, in page order."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            marker = match["marker"]
            if re.fullmatch(r'(?:--8<-- "examples/\w+\.py"\n)+', match["code"]):
                marker = marker or "include"
            kind, options, reason = _parse_marker(marker) if marker else ("run", {}, "")
            found.append(
                Block(
                    page=str(page.relative_to(ROOT)),
                    line=line,
                    code=match["code"],
                    kind=kind,
                    options=options,
                    reason=reason,
                )
            )
    return found


# --------------------------------------------------------------------------- what installs what


@cache
def _project() -> dict[str, list[str]]:
    """This project's requirements: ``""`` the core, else each extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"": project["dependencies"], **project["optional-dependencies"]}


@cache
def _module_owners() -> dict[str, frozenset[str]]:
    """
    Dotted module path -> the (canonical) distributions whose files hold it.

    Read from every installed distribution's file list rather than from top-level names
    alone, because a namespace package (``opentelemetry``) is shared: ``opentelemetry.sdk``
    comes from ``opentelemetry-sdk``, not from ``opentelemetry-api``.
    """
    owners: dict[str, set[str]] = {}
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or ():
            parts = file.parts
            if not parts or ".." in parts or parts[0].endswith((".dist-info", ".data")):
                continue
            if parts[-1].endswith(".py"):
                stem = parts[-1][:-3]
                dotted = [*parts[:-1]] if stem == "__init__" else [*parts[:-1], stem]
            elif parts[-1].endswith((".so", ".pyd")):
                dotted = [*parts[:-1], parts[-1].split(".")[0]]
            else:
                continue
            for depth in range(1, len(dotted) + 1):
                owners.setdefault(".".join(dotted[:depth]), set()).add(name)
    return {module: frozenset(names) for module, names in owners.items()}


def _closure(requirements: list[str]) -> set[str]:
    """The canonical names of *requirements* and everything they require, installed."""
    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # an optional dependency not installed here: it provides nothing here
        for text in requires:
            inner = Requirement(text)
            wanted = ["", *sorted(requirement.extras)]
            for want in wanted:
                if inner.marker is None or inner.marker.evaluate({"extra": want}):
                    todo.append((Requirement(str(inner).split(";")[0]), ""))
                    break
    return {key.split("[")[0] for key in seen}


def _requirements_of(install: str) -> list[str]:
    """What one ``pip install`` argument asks for, this project's extras expanded."""
    requirement = Requirement(install)
    if canonicalize_name(requirement.name) != "ambient-runs":
        return [install]
    unknown = requirement.extras - set(_project())
    if unknown:
        msg = f"ambient-runs has no extra {sorted(unknown)}"
        raise ValueError(msg)
    return [r for key in ["", *sorted(requirement.extras)] for r in _project()[key]]


def _provides(dists: set[str], module: str) -> bool:
    """Whether *dists* (or the standard library, or this package) provide *module*."""
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names or (top == "ambient_runs" and module not in ADAPTER_EXTRAS):
        return True
    if module in ADAPTER_EXTRAS:
        return False  # decided by the extras named, in missing_modules
    owners = _module_owners()
    path = module
    while path not in owners and "." in path:  # an attribute imported from a module
        path = path.rpartition(".")[0]
    return bool(owners.get(path, frozenset()) & dists)


def missing_modules(block: Block) -> tuple[list[str], list[str]]:
    """
    Check a block's ``# pip install`` line against its imports.

    Returns:
        The modules no named requirement provides, and the named requirements that provide
        none of its modules (both empty when the line says exactly what the block needs).
    """
    installs = block.installs()
    extras = {
        extra
        for install in installs
        if canonicalize_name(Requirement(install).name) == "ambient-runs"
        for extra in Requirement(install).extras
    }
    everything = _closure([r for i in installs for r in _requirements_of(i)] or _project()[""])
    core = _closure(_project()[""])
    modules = sorted(block.imports())
    missing = [
        m
        for m in modules
        if (m in ADAPTER_EXTRAS and ADAPTER_EXTRAS[m] not in extras)
        or (m not in ADAPTER_EXTRAS and not _provides(everything | core, m))
    ]
    # Each thing named must be needed: an extra for an adapter module imported, or a
    # requirement that provides a module the core does not.
    named = [
        (f"ambient-runs[{extra}]", _project()[extra], extra)
        if canonicalize_name(Requirement(install).name) == "ambient-runs"
        else (install, [install], None)
        for install in installs
        for extra in (sorted(Requirement(install).extras) or [None])
        if canonicalize_name(Requirement(install).name) != "ambient-runs" or extra is not None
    ]
    unused = [
        label
        for label, requirements, extra in named
        if not any(ADAPTER_EXTRAS.get(m) == extra for m in modules if extra is not None)
        and not any(
            m not in ADAPTER_EXTRAS
            and not _provides(core, m)
            and _provides(_closure(requirements), m)
            for m in modules
        )
    ]
    return missing, unused
