"""Tests for the package's public surface and its dependencies."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import ambient_runs

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
            "bad = {'starlette', 'fastapi', 'uvicorn', 'anyio', 'pydantic', 'ag_ui', 'httpx'}\n"
            "print(sorted(bad & {k.split('.')[0] for k in sys.modules}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )

        assert "[]" == out.stdout.strip()

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
