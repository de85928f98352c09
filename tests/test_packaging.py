"""Tests for the package's public surface and its dependencies."""

from __future__ import annotations

import email
import importlib
import json
import pkgutil
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import ambient_runs
import ambient_runs.viewer

ROOT = Path(__file__).parent.parent


class TestPublicSurface:
    def test_all_is_sorted_and_complete(self) -> None:
        """Every public name of the package is exported in a sorted __all__, and nothing else."""
        public = {n for n in vars(ambient_runs) if not n.startswith("_")} - {
            # submodules are importable, not exported names
            m.name
            for m in pkgutil.iter_modules(ambient_runs.__path__)
        }
        exported = [n for n in ambient_runs.__all__ if n != "__version__"]

        assert sorted(public) == sorted(exported)
        assert sorted(ambient_runs.__all__) == list(ambient_runs.__all__)

    def test_every_module_declares_all(self) -> None:
        """Each module of the package says what it exports, and exports only what exists."""
        for info in pkgutil.iter_modules(ambient_runs.__path__):
            if info.name == "__main__":
                continue
            module = importlib.import_module(f"ambient_runs.{info.name}")
            names = getattr(module, "__all__", None)

            assert names is not None, info.name
            assert [] == [n for n in names if not hasattr(module, n)], info.name

    def test_public_names_have_one_home(self) -> None:
        """
        Each exported class or function is declared by exactly one module of the package.

        Its ``__module__`` is ``ambient_runs`` (the path users import it from), so
        the home is found where the name is declared: the one module whose
        ``__all__`` names that very object. A function's code lives in that file.
        """
        modules = [
            importlib.import_module(f"ambient_runs.{m.name}")
            for m in pkgutil.iter_modules(ambient_runs.__path__)
            if m.name != "__main__"
        ]
        objects = {
            name: obj
            for name in ambient_runs.__all__
            if isinstance(obj := getattr(ambient_runs, name), type)
            or (callable(obj) and hasattr(obj, "__code__"))
        }

        homes = {
            name: [m for m in modules if name in m.__all__ and getattr(m, name) is obj]
            for name, obj in objects.items()
        }

        assert {} == {n: [m.__name__ for m in ms] for n, ms in homes.items() if len(ms) != 1}
        misplaced = [
            name
            for name, obj in objects.items()
            if hasattr(obj, "__code__") and obj.__code__.co_filename != homes[name][0].__file__
        ]
        assert [] == misplaced

    def test_version_is_a_string(self) -> None:
        """The package has a version string."""
        assert isinstance(ambient_runs.__version__, str)

    def test_python_m_prints_the_version(self) -> None:
        """``python -m ambient_runs --version`` prints the package's version and exits 0."""
        out = subprocess.run(
            [sys.executable, "-m", "ambient_runs", "--version"],
            capture_output=True,
            text=True,
            check=True,
        )

        assert f"ambient-runs {ambient_runs.__version__}\n" == out.stdout


class TestDependencies:
    def test_runtime_dependencies_are_exactly_the_design_card(self) -> None:
        """pyproject declares attrs, cattrs and jsonpatch as the only runtime dependencies."""
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        names = sorted(d.split(">")[0].split("=")[0].strip() for d in project["dependencies"])

        assert ["attrs", "cattrs", "jsonpatch"] == names

    def test_importing_pulls_in_no_framework(self) -> None:
        """Importing every module loads no test-only or framework dependency."""
        code = (
            "import sys, pkgutil, importlib, ambient_runs\n"
            "for m in pkgutil.iter_modules(ambient_runs.__path__):\n"
            "    if m.name != '__main__': importlib.import_module('ambient_runs.' + m.name)\n"
            "bad = {'starlette', 'fastapi', 'uvicorn', 'anyio', 'pydantic', 'ag_ui', 'httpx',\n"
            "       'redis', 'opentelemetry', 'pydantic_ai', 'langgraph', 'agents', 'trio'}\n"
            "print(sorted(bad & {k.split('.')[0] for k in sys.modules}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )

        assert "[]" == out.stdout.strip()

    def test_import_loads_no_extra(self) -> None:
        """
        ``import ambient_runs`` loads attrs and jsonpatch and nothing else from outside.

        No optional dependency (installed here), no cattrs (loaded on first use of the
        wire form), no adapter or store: what a plain import costs is the core's.
        """
        code = (
            "import sys, json\n"
            "before = set(sys.modules)\n"
            "import ambient_runs\n"
            "ours = set(sys.stdlib_module_names) | {'ambient_runs'}\n"
            "new = set(sys.modules) - before\n"
            "extras = ('ambient_runs.adapters', 'ambient_runs.stores')\n"
            "print(json.dumps([sorted({k.split('.')[0] for k in new} - ours),\n"
            "                  sorted(k for k in new if k.startswith(extras))]))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )

        assert [["attr", "attrs", "jsonpatch", "jsonpointer"], []] == json.loads(out.stdout)

    def test_the_adapters_package_pulls_in_no_framework(self) -> None:
        """``ambient_runs.adapters`` and its shared helpers import no framework (adapters do)."""
        code = (
            "import sys, ambient_runs.adapters, ambient_runs.adapters._common\n"
            "bad = {'pydantic', 'pydantic_core', 'pydantic_ai', 'agents', 'openai', 'langgraph',\n"
            "       'langchain_core', 'httpx', 'opentelemetry', 'redis', 'ag_ui'}\n"
            "print(sorted(bad & {k.split('.')[0] for k in sys.modules}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )

        assert "[]" == out.stdout.strip()

    def test_every_adapter_declares_all_and_an_extra(self) -> None:
        """Each adapter module says what it exports; its framework is an extra of the package."""
        import ambient_runs.adapters as adapters

        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]
        for info in pkgutil.iter_modules(adapters.__path__):
            module = importlib.import_module(f"ambient_runs.adapters.{info.name}")
            names = getattr(module, "__all__", None)

            assert names is not None, info.name
            assert [] == [n for n in names if not hasattr(module, n)], info.name
            assert sorted(names) == list(names), info.name
            if not info.name.startswith("_"):
                assert info.name.replace("_", "-") in extras, info.name


class TestMissingExtras:
    """Each optional module, imported without its package, says which extra installs it."""

    @pytest.mark.parametrize(
        ("module", "blocked", "extra"),
        [
            ("ambient_runs.adapters.http", "httpx", "http"),
            ("ambient_runs.adapters.langgraph", "langgraph", "langgraph"),
            ("ambient_runs.adapters.openai_agents", "agents", "openai-agents"),
            ("ambient_runs.adapters.otel", "opentelemetry", "otel"),
            ("ambient_runs.adapters.pydantic_ai", "pydantic_ai", "pydantic-ai"),
            ("ambient_runs.adapters.starlette", "starlette", "starlette"),
            ("ambient_runs.stores.redis", "redis", "redis"),
        ],
    )
    def test_import_raises_missing_extra_error(
        self, module: str, blocked: str, extra: str
    ) -> None:
        code = (
            f"import sys; sys.modules[{blocked!r}] = None\n"
            "import ambient_runs\n"
            f"try:\n    import {module}\n"
            "except ambient_runs.MissingExtraError as e:\n"
            "    print(isinstance(e, ImportError), e.name, e.extra, e, sep='|')\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()

        ok, name, got_extra, message = out.split("|")
        assert ("True", blocked, extra) == (ok, name, got_extra)
        assert message.startswith(f"{module} needs ")
        assert message.endswith(f"pip install 'ambient-runs[{extra}]'")


# What a module that needs an extra says when it is imported without it.
_NEEDS_EXTRA = re.compile(r"pip install 'ambient-runs\[([a-z-]+)\]'")

_FRESH_CHECK = """
import importlib, json, pkgutil, sys
import ambient_runs
ours = set(sys.stdlib_module_names) | {"__main__", "ambient_runs"}
third = lambda: sorted({k.split('.')[0] for k in sys.modules} - ours)
report = {"plain": third(), "modules": {}}
for info in pkgutil.walk_packages(ambient_runs.__path__, "ambient_runs."):
    if info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
        report["modules"][info.name] = None
    except ImportError as error:
        report["modules"][info.name] = str(error)
report["after"] = third()
ambient_runs.from_wire({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
report["used"] = third()
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Build the wheel with pip and install it, with its dependencies only, into a new venv."""
    where = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(where), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = where.glob("ambient_runs-*.whl")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    return wheel, python


class TestWheel:
    def test_metadata_names_licence_urls_classifiers_and_every_extra(
        self, fresh_install: tuple[Path, Path]
    ) -> None:
        """The built wheel carries the MIT licence file, the URLs, classifiers and extras."""
        wheel, _ = fresh_install
        version = ambient_runs.__version__
        with zipfile.ZipFile(wheel) as archive:
            info = f"ambient_runs-{version}.dist-info"
            metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
            licence = archive.read(f"{info}/licenses/LICENSE").decode()
        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]

        assert "MIT" == metadata["License-Expression"]
        assert licence.startswith("MIT License\n")
        assert (ROOT / "LICENSE").read_text() == licence
        assert "text/markdown" == metadata["Description-Content-Type"]
        assert metadata.get_all("Project-URL")
        assert "Programming Language :: Python :: 3.11" in metadata.get_all("Classifier")
        assert "Typing :: Typed" in metadata.get_all("Classifier")
        assert sorted(extras) == sorted(metadata.get_all("Provides-Extra"))
        assert metadata.get_payload().startswith("# ambient_runs")

    def test_installed_wheel_prints_its_version(self, fresh_install: tuple[Path, Path]) -> None:
        """In a fresh venv, ``python -m ambient_runs --version`` works from the wheel."""
        _, python = fresh_install
        out = subprocess.run(
            [str(python), "-m", "ambient_runs", "--version"],
            capture_output=True,
            text=True,
            check=True,
            cwd=python.parent,
        )

        assert f"ambient-runs {ambient_runs.__version__}\n" == out.stdout

    def test_the_viewer_ships_in_the_wheel_and_serves_from_it(
        self, fresh_install: tuple[Path, Path]
    ) -> None:
        """The viewer's HTML, CSS and JS are package data of the wheel, and load from it."""
        wheel, python = fresh_install
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
        page = subprocess.run(
            [str(python), "-c", "import ambient_runs.viewer as v; print(len(v.viewer_page()))"],
            capture_output=True,
            text=True,
            check=True,
            cwd=python.parent,
        )

        assert {
            "ambient_runs/_viewer/index.html",
            "ambient_runs/_viewer/viewer.css",
            "ambient_runs/_viewer/viewer.js",
        } <= names
        assert len(ambient_runs.viewer.viewer_page()) == int(page.stdout)

    def test_import_needs_only_the_runtime_dependencies(
        self, fresh_install: tuple[Path, Path]
    ) -> None:
        """
        In a venv holding the wheel and its three dependencies, every module imports.

        ``import ambient_runs`` loads attrs and jsonpatch (and what they need) and
        nothing else; cattrs follows on first use (reading the wire form); the
        modules that need an extra raise ImportError naming an extra that pyproject
        declares, and only those.
        """
        _, python = fresh_install
        out = subprocess.run(
            [str(python), "-c", _FRESH_CHECK],
            capture_output=True,
            text=True,
            check=True,
            cwd=python.parent,
        )
        report = json.loads(out.stdout)
        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]
        failed = {name: error for name, error in report["modules"].items() if error is not None}
        named = {name: _NEEDS_EXTRA.search(error) for name, error in failed.items()}

        runtime = {"attr", "attrs", "cattrs", "jsonpatch", "jsonpointer", "typing_extensions"}
        assert set(report["plain"]) <= runtime
        assert set(report["after"]) <= runtime
        assert set(report["used"]) <= runtime
        assert {"attrs", "jsonpatch"} <= set(report["plain"])
        assert "cattrs" in set(report["used"])
        assert {} == {name: failed[name] for name, match in named.items() if match is None}
        assert set() == {m.group(1) for m in named.values() if m} - set(extras)
        assert all(
            name.startswith(("ambient_runs.adapters.", "ambient_runs.stores.")) for name in failed
        )
        assert "ambient_runs.adapters.http" in failed


class TestReadme:
    def test_install_section_lists_every_extra(self) -> None:
        """The README's opening tells a user how to install the library and each extra."""
        readme = (ROOT / "README.md").read_text()
        opening = readme.split("\n## ", 1)[0]
        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]

        assert "pip install ambient-runs " in opening
        assert [] == [extra for extra in extras if f"| `[{extra}]` |" not in opening]
