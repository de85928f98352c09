"""``python -m ambient_runs dev``: what it serves, how it lays an app out, reload and stop."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _devserver import dev_server, post_run, stop

from ambient_runs import MissingExtraError
from ambient_runs._demo import main
from ambient_runs._dev import DevApp, DevTargetError, layout, load_target, serve
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore

AGENT = """
import ambient_runs as ar

REPLY = "{reply}"


async def agent(run: ar.Run) -> None:
    ar.say(REPLY)
"""


def write_agent(where: Path, reply: str) -> None:
    """Write app.py: an agent that says *reply*."""
    (where / "app.py").write_text(AGENT.format(reply=reply))


async def agent(run: object) -> None:
    """An agent for the layout tests (does nothing)."""


class TestLoadTarget:
    def test_imports_module_and_dotted_attribute(self, tmp_path: Path) -> None:
        """MODULE:ATTR imports from the given folder; ATTR may be dotted."""
        (tmp_path / "dev_probe_mod.py").write_text("class Box:\n    value = 42\n")

        assert 42 == load_target("dev_probe_mod:Box.value", app_dir=str(tmp_path))

    @pytest.mark.parametrize(
        ("spec", "says"),
        [
            ("no_colon", "is not MODULE:ATTR"),
            ("dev_missing_module_xyz:agent", "no module 'dev_missing_module_xyz'"),
            ("json:no_such_attr", "has no attribute 'no_such_attr'"),
        ],
    )
    def test_a_wrong_spec_says_why(self, spec: str, says: str, tmp_path: Path) -> None:
        """A malformed spec, a missing module or attribute: DevTargetError naming it."""
        with pytest.raises(DevTargetError, match=says):
            load_target(spec, app_dir=str(tmp_path))


class TestLayout:
    def test_an_agent_function_gets_an_app_the_viewer_at_the_root(self) -> None:
        """An agent function is served at /agent (with the store asked), the viewer at /."""
        chosen = layout(agent, "memory")

        assert isinstance(chosen.app, AgentApp)
        assert isinstance(chosen.app.store, MemoryStore)
        assert ("/agent", "/", True) == (chosen.endpoint, chosen.viewer, chosen.owns_root)

    def test_an_agent_app_is_served_as_it_is(self) -> None:
        """An AgentApp is served at /agent unchanged; a --store for it is refused."""
        app = AgentApp(agent)

        assert app is layout(app).app
        with pytest.raises(DevTargetError, match="store= to it"):
            layout(app, "memory")

    def test_an_asgi_app_keeps_its_paths_and_the_viewer_finds_the_mount(self) -> None:
        """A FastAPI app is served as is; the viewer, at /_viewer, talks to its mount."""
        from fastapi import FastAPI
        from starlette.routing import Mount, Router

        api = FastAPI()
        api.mount("/api", Router(routes=[Mount("/v1/agent", app=AgentApp(agent))]))

        chosen = layout(api)

        assert api is chosen.app
        assert ("/api/v1/agent/", "/_viewer", False) == (
            chosen.endpoint,
            chosen.viewer,
            chosen.owns_root,
        )

    def test_something_else_is_refused(self) -> None:
        """A value that is not callable is no agent: DevTargetError."""
        with pytest.raises(DevTargetError, match="not an agent function"):
            layout(42)

    async def test_the_dev_app_serves_the_page_where_it_said(self) -> None:
        """GET / answers the viewer page, set to the endpoint /agent."""
        sent: list[dict[str, object]] = []

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
        await DevApp(layout(agent))(scope, receive, send)

        assert 200 == sent[0]["status"]
        assert b'name="ambient-runs-endpoint" content="/agent"' in sent[1]["body"]  # type: ignore[operator]


class TestMissingExtra:
    def test_without_uvicorn_it_names_the_extra(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No uvicorn: MissingExtraError naming the [dev] extra's pip install; the CLI exits 2."""
        monkeypatch.setitem(sys.modules, "uvicorn", None)

        with pytest.raises(MissingExtraError) as raised:
            serve("app:agent")
        status = main(["dev", "app:agent"])

        assert raised.value.extra == "dev"
        assert str(raised.value).endswith("pip install 'ambient-runs[dev]'")
        assert 2 == status
        assert "pip install 'ambient-runs[dev]'" in capsys.readouterr().err

    def test_importing_the_package_never_imports_uvicorn(self) -> None:
        """`import ambient_runs` and its dev, viewer and console modules leave uvicorn alone."""
        code = (
            "import sys, ambient_runs, ambient_runs._dev, ambient_runs.viewer, "
            "ambient_runs.console, ambient_runs._tail\n"
            "print('uvicorn' in sys.modules)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

        assert "False" == out.stdout.strip(), out.stderr


class TestDevServer:
    def test_starts_reloads_on_a_change_and_stops_cleanly(self, tmp_path: Path) -> None:
        """The served agent answers; a changed file is served after a reload; SIGINT stops all."""
        write_agent(tmp_path, "version one")

        with dev_server(tmp_path, "app:agent") as server:
            assert "version one" in post_run(f"{server.url}/agent", "hi")
            assert f"viewer    {server.url}/" in server.output()

            write_agent(tmp_path, "version two")
            deadline = time.monotonic() + 30
            while "version two" not in post_run(f"{server.url}/agent", "hi", run_id="r2"):
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.2)
            workers = server.worker_pids()

            assert 2 <= len(workers)  # the first worker, then the reloaded one
            assert 0 == stop(server)

        for pid in workers:  # every worker is gone (reaped by the reloader), bounded
            deadline = time.monotonic() + 10
            while _alive(pid):
                assert time.monotonic() < deadline, f"worker {pid} outlived the server"
                time.sleep(0.05)
        port = int(server.url.rsplit(":", 1)[1])
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
            pass

    def test_serves_a_fastapi_app_as_it_is_with_the_viewer_beside_it(self, tmp_path: Path) -> None:
        """A FastAPI app keeps its routes; /_viewer is the page, set to the app's mount."""
        (tmp_path / "api.py").write_text(
            "from fastapi import FastAPI\n"
            "from ambient_runs.asgi import AgentApp\n"
            "from app import agent\n"
            "api = FastAPI()\n"
            "@api.get('/health')\n"
            "def health() -> dict[str, bool]:\n"
            "    return {'ok': True}\n"
            "api.mount('/agent', AgentApp(agent))\n"
        )
        write_agent(tmp_path, "from fastapi")

        with dev_server(tmp_path, "api:api", "--no-reload") as server:
            import urllib.request

            with urllib.request.urlopen(f"{server.url}/_viewer", timeout=10) as page:
                html = page.read().decode()
            with urllib.request.urlopen(f"{server.url}/health", timeout=10) as health:
                ok = health.read()
            said = post_run(f"{server.url}/agent/", "hi")

        assert 'name="ambient-runs-endpoint" content="/agent/"' in html
        assert b'{"ok":true}' == ok
        assert "from fastapi" in said
        assert f"viewer    {server.url}/_viewer" in server.output()

    def test_a_wrong_target_fails_at_once(self, tmp_path: Path) -> None:
        """A missing module is reported before any server starts, exit status 2."""
        done = subprocess.run(
            [sys.executable, "-m", "ambient_runs", "dev", "nothing_here:agent"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "NO_COLOR": "1"},
        )

        assert 2 == done.returncode
        assert "no module 'nothing_here'" in done.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
