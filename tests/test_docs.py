"""
The README's and the docs site's Python examples run as written, with exactly the extras they name.

`_docs_blocks` says how a block declares what it needs (a ``# pip install`` line) and how it
runs (a ``<!-- test: … -->`` comment before it). Every block runs here, in the dev environment
where every extra is installed, and its ``# pip install`` line is checked against its imports
by the installed distributions' requirements, so "runs with exactly the extras it names" holds
without a virtualenv per block.
"""

from __future__ import annotations

import asyncio
import json
import re
import runpy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _docs_blocks import ROOT, Block, blocks, missing_modules, pages
from ag_ui.core import Event as OfficialEvent
from pydantic import TypeAdapter

import ambient_runs as ar
from ambient_runs import events as ev
from ambient_runs.testing import assert_valid

BLOCKS = blocks()
RUN = [b for b in BLOCKS if b.kind not in {"not-run", "include"}]

#: How many blocks are marked not-run. Raising it is a decision: say why in the marker.
NOT_RUN = 0

OFFICIAL = TypeAdapter(OfficialEvent)


def _input(run_id: str = "docs-run") -> dict[str, Any]:
    return {
        "threadId": "docs-thread",
        "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": "Heat pump or boiler?"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def _frames(body: str) -> list[dict[str, Any]]:
    """The JSON of every ``data:`` frame of an SSE body."""
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


async def _post(app: Any, path: str) -> list[dict[str, Any]]:
    """POST a RunAgentInput to *app* in-process and return its events as wire dicts."""
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://docs.test") as client,
        asyncio.timeout(60),
    ):
        response = await client.post(path, json=_input(), headers={"accept": "text/event-stream"})
        assert (200, "text/event-stream") == (
            response.status_code,
            response.headers["content-type"].split(";")[0],
        ), response.text
        return _frames(response.text)


def _judge(events: list[dict[str, Any]]) -> None:
    """Both the official models and our verifier accept the stream, and it finished."""
    for event in events:
        OFFICIAL.validate_python(event)
    assert_valid([ar.from_wire(event) for event in events])
    assert "RUN_FINISHED" == events[-1]["type"], events[-1]


async def _remote_agent(run: ar.Run) -> str:
    with ar.subagent("searcher"):
        ar.say(f"Found it for {run.last_user_text()}.")
    return "found"


@pytest.fixture
async def remote() -> AsyncIterator[str]:
    """The serving guide's FastAPI app (an agent mounted at /agent) on a real uvicorn."""
    from fastapi import FastAPI
    from support.servers import serving

    from ambient_runs.asgi import AgentApp

    api = FastAPI()
    api.mount("/agent", AgentApp(_remote_agent))
    async with serving(api, path="") as base:
        yield base


def _execute(
    block: Block, tmp_path: Path, replace: dict[str, str] | None = None
) -> dict[str, Any]:
    code = block.code
    for old, new in (replace or {}).items():
        assert old in code, f"{block.id}: the marker's {old} is not in the block"
        code = code.replace(old, new)
    script = tmp_path / f"{Path(block.page).stem}_{block.line}.py"
    script.write_text(code)
    return runpy.run_path(str(script), run_name="__main__")


class TestBlocks:
    def test_there_are_blocks_to_run(self) -> None:
        """The README and the docs hold Python examples at all, and most of them run."""
        assert len(RUN) >= 20
        assert any(b.page == "README.md" for b in RUN)

    def test_not_run_blocks_are_counted(self) -> None:
        """Every block not run is marked so with a reason, and their number is fixed here."""
        skipped = [b for b in BLOCKS if b.kind == "not-run"]

        assert NOT_RUN == len(skipped), [b.id for b in skipped]
        assert [] == [b.id for b in skipped if not b.reason]

    @pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
    def test_install_line_names_exactly_what_it_imports(self, block: Block) -> None:
        """A block's ``# pip install`` line provides each module it imports, and nothing idle."""
        assert ([], []) == missing_modules(block)

    @pytest.mark.parametrize(
        "block", [b for b in RUN if b.kind == "run"], ids=[b.id for b in RUN if b.kind == "run"]
    )
    def test_block_runs(
        self, block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each plain block runs as a script without error."""
        _execute(block, tmp_path)

        assert "Traceback" not in capsys.readouterr().err

    @pytest.mark.parametrize(
        "block",
        [b for b in RUN if b.kind == "serve" and "remote" not in b.options],
        ids=[b.id for b in RUN if b.kind == "serve" and "remote" not in b.options],
    )
    def test_served_block_answers_a_run(self, block: Block, tmp_path: Path) -> None:
        """A serving block's app answers a POSTed RunAgentInput with a valid, finished stream."""
        app = _execute(block, tmp_path)[block.options.get("app", "app")]

        events = asyncio.run(_post(app, block.options.get("path", "/")))

        _judge(events)

    @pytest.mark.parametrize(
        "block",
        [b for b in RUN if "remote" in b.options],
        ids=[b.id for b in RUN if "remote" in b.options],
    )
    async def test_relaying_block_reaches_its_remote(
        self, block: Block, tmp_path: Path, remote: str
    ) -> None:
        """A relaying block, pointed at a real server, relays that server's run as a subagent."""
        app = _execute(block, tmp_path, {block.options["remote"]: remote})

        events = await _post(app["app"], block.options.get("path", "/"))

        _judge(events)
        started = [e for e in events if e["type"] == "SUBAGENT_STARTED"]
        said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert ["researcher", "searcher"] == [e["name"] for e in started]
        assert "Found it for Heat pump or boiler?." == said
        assert "found" == events[-1]["result"]

    async def test_the_remote_without_its_slash_is_a_307(self, remote: str) -> None:
        """What the frameworks guide warns of: the mount's URL without ``/`` fails ``http_307``."""
        from ambient_runs.adapters import http

        async def agent(run: ar.Run) -> None:
            remote_input = ar.RunAgentInput(thread_id="t", run_id="r-r")
            try:
                await http.relay(f"{remote}/agent", remote_input, name="researcher")
            except ar.RelayError as error:
                ar.say(f"failed: {error.code}")

        events = [e async for e in ar.stream(agent, _input())]

        errors = [e for e in events if isinstance(e, ev.SubagentErrorEvent)]
        assert ["http_307"] == [e.code for e in errors]


class TestInstallCheck:
    """The ``# pip install`` check itself can fail, on the cases issue 34 found."""

    def _block(self, code: str) -> Block:
        return Block(page="probe.md", line=1, code=code)

    def test_otel_without_the_sdk_is_missing_it(self) -> None:
        """``[otel]`` alone does not bring ``opentelemetry.sdk``."""
        block = self._block(
            "# pip install 'ambient-runs[otel]'\n"
            "from ambient_runs.adapters.otel import AmbientRunsInstrumentor\n"
            "from opentelemetry.sdk.trace import TracerProvider\n"
        )

        assert ["opentelemetry.sdk.trace", "opentelemetry.sdk.trace.TracerProvider"] == (
            missing_modules(block)[0]
        )

    def test_ag_ui_is_in_no_extra(self) -> None:
        """``[http]`` does not bring the official ``ag_ui`` models."""
        block = self._block("# pip install 'ambient-runs[http]'\nfrom ag_ui.core import Tool\n")

        missing, unused = missing_modules(block)

        assert ["ag_ui.core", "ag_ui.core.Tool"] == missing
        assert ["ambient-runs[http]"] == unused

    def test_an_adapter_needs_its_extra(self) -> None:
        """Importing an adapter module without naming its extra is caught."""
        block = self._block("from ambient_runs.stores.redis import RedisStore\n")

        assert (["ambient_runs.stores.redis"], []) == missing_modules(block)


class TestLinks:
    @pytest.mark.parametrize("page", ["README.md"])
    def test_readme_links_exist(self, page: str) -> None:
        """Every relative link of the README names a file or folder of the repository."""
        text = (ROOT / page).read_text()
        targets = re.findall(r"\]\((?!https?:|#)([^)#]+)", text)

        assert [] == [t for t in targets if not (ROOT / t).exists()]
        assert targets

    def test_readme_is_short(self) -> None:
        """The README holds what a visitor needs and links the rest: at most 250 lines."""
        assert len((ROOT / "README.md").read_text().splitlines()) <= 250

    def test_readme_starts_with_the_two_commands(self) -> None:
        """The two commands for a fresh machine come before any section."""
        opening = (ROOT / "README.md").read_text().split("\n## ", 1)[0]

        assert "bash scripts/install && .venv/bin/python -m ambient_runs demo" in opening
        assert "bash scripts/test" in opening

    def test_readme_first_example_needs_no_testing_helpers(self) -> None:
        """The README's example is what a user writes: no ``ambient_runs.testing``."""
        first = next(b for b in BLOCKS if b.page == "README.md")

        assert "ambient_runs.testing" not in first.code

    def test_every_page_is_in_the_site(self) -> None:
        """Each Markdown page under docs/ is in mkdocs.yml's nav (mkdocs --strict says so too)."""
        nav = (ROOT / "mkdocs.yml").read_text()
        docs = [
            p.relative_to(ROOT / "docs").as_posix()
            for p in pages()
            if p.is_relative_to(ROOT / "docs")
        ]

        assert [] == [d for d in docs if f": {d}" not in nav]


class TestApiReference:
    """The API pages document every public module and every top-level name (a new one too)."""

    def _directives(self) -> set[str]:
        return {
            m
            for page in (ROOT / "docs" / "api").glob("*.md")
            for m in re.findall(r"^::: (\S+)", page.read_text(), re.M)
        }

    def test_every_public_module_has_its_page(self) -> None:
        """Each module without a leading underscore (adapters and stores too) is documented."""
        package = ROOT / "ambient_runs"
        public = {
            "ambient_runs." + ".".join(p.relative_to(package).with_suffix("").parts)
            for p in package.rglob("*.py")
            if not any(part.startswith("_") for part in p.relative_to(package).parts)
        } | {"ambient_runs", "ambient_runs.stores", "ambient_runs.adapters"}
        public -= {"ambient_runs.adapters"}  # a namespace of modules, each documented

        assert set() == public - self._directives()

    def test_every_top_level_name_is_documented(self) -> None:
        """Each name of ``ambient_runs.__all__`` is on the API index or its home module's page."""
        import importlib

        homes = {
            name
            for module in ("errors", "events", "conversations", "threads")
            for name in importlib.import_module(f"ambient_runs.{module}").__all__
        }
        documented = self._directives()

        assert [] == [
            name
            for name in ar.__all__
            if name != "__version__"
            and name not in homes
            and f"ambient_runs.{name}" not in documented
        ]


class TestDocstringRendering:
    """``docs/_griffe.py`` turns the docstrings' reST habits into Markdown for the API pages."""

    def _render(self, text: str) -> str:
        import importlib.util

        spec = importlib.util.spec_from_file_location("_griffe", ROOT / "docs" / "_griffe.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        rendered: str = module.render(text)
        return rendered

    def test_version_directives(self) -> None:
        """versionadded becomes an italic line; versionchanged keeps its indented reason."""
        text = "Do it.\n\n.. versionadded:: 0.1.0\n.. versionchanged:: 0.2.0\n   *x*; y.\n"

        assert "Do it.\n\n*Added in version 0.1.0.*\n*Changed in version 0.2.0:* *x*; y.\n" == (
            self._render(text)
        )

    def test_one_line_docstring_and_roles(self) -> None:
        """A directive closing a one-line docstring, and :class: roles, render too."""
        assert "A URL, see `Run`. *Added in version 0.1.0.*" == self._render(
            "A URL, see :class:`Run`. .. versionadded:: 0.1.0"
        )

    def test_literal_block_marker(self) -> None:
        """A paragraph's closing ``::`` before an indented block becomes ``:``."""
        assert "catches it:\n\n    Error\n" == self._render("catches it::\n\n    Error\n")
