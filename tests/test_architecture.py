"""
The package's house plan, checked on its source: the import graph and who owns what.

Every module of ``ambient_runs`` is parsed (not imported), and each ``import``
it contains, at module level or inside a function, becomes an edge of the
import graph. Imports under ``if TYPE_CHECKING:`` are for the type checker
only and do not count. The graph must be acyclic but for one documented edge:
the event model (``events``) parses wire input through ``_wire``, which builds
on the event classes, so ``events`` imports ``_wire`` inside its parse helpers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ambient_runs"

#: The one edge allowed to close a cycle, and only as an import inside a function.
DEFERRED_EDGES = {("ambient_runs.events", "ambient_runs._wire")}


def module_names() -> dict[str, Path]:
    """Every module of the package, by dotted name (the package itself as ``ambient_runs``)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = module_names()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of every node under an ``if TYPE_CHECKING:`` block."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                hidden.update(id(n) for n in ast.walk(inner))
    return hidden


def _function_nodes(tree: ast.AST) -> set[int]:
    """The ids of every node inside a function body."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def imports_of(name: str, path: Path) -> Iterator[tuple[str, bool]]:
    """Yield ``(imported module, inside a function)`` for every runtime import in *path*."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    hidden = _type_checking_nodes(tree)
    deferred = _function_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        in_function = id(node) in deferred
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in MODULES:
                    target = target.rpartition(".")[0]
                if target:
                    yield target, in_function
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base not in MODULES:
                continue
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            yield from ((sub, in_function) for sub in submodules)
            if len(submodules) < len(node.names):  # a name defined in *base* itself
                yield base, in_function


def import_graph(*, allow_deferred: bool) -> dict[str, set[str]]:
    """The package's import graph; *allow_deferred* drops the documented deferred edges."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, in_function in imports_of(name, path):
            if target == name:
                continue
            if allow_deferred and in_function and (name, target) in DEFERRED_EDGES:
                continue
            graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one cycle of *graph* as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


class TestImportGraph:
    def test_the_graph_covers_the_core(self) -> None:
        """The walk sees the modules and the edges it is meant to judge (it can fail)."""
        graph = import_graph(allow_deferred=True)

        assert {"ambient_runs._run", "ambient_runs._scopes", "ambient_runs.events"} <= set(graph)
        assert "ambient_runs._scopes" in graph["ambient_runs._run"]
        assert "ambient_runs._subagent" in graph["ambient_runs"]

    def test_no_import_cycle(self) -> None:
        """No module imports, directly or through others, a module that imports it."""
        assert None is find_cycle(import_graph(allow_deferred=True))

    @pytest.mark.parametrize(("source", "target"), sorted(DEFERRED_EDGES))
    def test_the_documented_exception_stays_inside_functions(
        self, source: str, target: str
    ) -> None:
        """The one allowed back edge is never a module-level import."""
        module_level = [
            t
            for t, in_function in imports_of(source, MODULES[source])
            if t == target and not in_function
        ]

        assert [] == module_level

    def test_find_cycle_finds_one(self) -> None:
        """The cycle finder itself reports a cycle, including one through a function import."""
        assert ["a", "b", "c", "a"] == find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}})
        assert None is find_cycle({"a": {"b"}, "b": set()})

    def test_function_imports_count(self, tmp_path: Path) -> None:
        """An import inside a function is an edge; one under TYPE_CHECKING is not."""
        source = tmp_path / "probe.py"
        source.write_text(
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from ambient_runs._run import Run\n"
            "def f():\n"
            "    from ambient_runs import _scopes\n"
        )

        assert [("ambient_runs._scopes", True)] == list(imports_of("ambient_runs.probe", source))


class TestOwnership:
    @pytest.mark.parametrize("name", sorted(MODULES))
    def test_only_scopes_touches_contextvars(self, name: str) -> None:
        """`_scopes` is the one module that imports contextvars."""
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        uses = [
            node
            for node in ast.walk(tree)
            if (isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names))
            or (isinstance(node, ast.ImportFrom) and node.module == "contextvars")
        ]

        assert (name == "ambient_runs._scopes") == bool(uses)


#: Issue 10: no class over about 500 lines (the biggest, `Run`, was 547 before the split).
MAX_CLASS_LINES = 500


class TestSize:
    def test_no_class_is_over_about_500_lines(self) -> None:
        """Every class body, counted from its ``class`` line to its last line."""
        too_big = []
        for name, path in MODULES.items():
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    if size > MAX_CLASS_LINES:
                        too_big.append(f"{name}.{node.name}: {size} lines")
        assert [] == too_big


#: The page that maps every module to what it owns (it was the README's Architecture section).
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _module_map() -> dict[str, str]:
    """The architecture page's module table: each row's first cell -> the whole row."""
    rows = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            rows[first] = line
    return rows


class TestModuleMap:
    @pytest.mark.parametrize("name", sorted(MODULES))
    def test_every_module_is_on_the_architecture_page(self, name: str) -> None:
        """docs/architecture.md's table names each module: a new one must be placed there."""
        rows = _module_map()
        short = name.removeprefix("ambient_runs").removeprefix(".") or "__init__"
        package, _, leaf = short.rpartition(".")
        if package:  # a subpackage's module: named in its package's row
            row = " ".join(r for first, r in rows.items() if f"`{package}/" in first)
            assert f"`{leaf}`" in row or f"`{package}/{leaf}`" in row, name
        else:
            assert any(f"`{short}`" in first or f"`{short}/`" in first for first in rows), name

    def test_the_map_names_no_module_that_is_gone(self) -> None:
        """Each module the table's first column names still exists."""
        named = {
            cell.strip("`/ ")
            for first in _module_map()
            for cell in first.split("/ ")
            if cell.strip().startswith("`")
        }
        known = {n.removeprefix("ambient_runs.") for n in MODULES} | {"__init__"}

        assert set() == {n for n in named if n not in known and n.replace("/", ".") not in known}
