"""
The viewer in a real browser: headless Chromium against ``python -m ambient_runs dev``.

The dev server runs tests/viewer/tea_agent.py: three concurrent researcher subagents,
a tool call each, state changes, and an approval (an interrupt) before the answer.
The page must show three lanes with the wire's subagent ids, overlapping in time, the
state and, once approved from the page, the answer, the run finished. A screenshot of
each stage is kept in ``test-artifacts/`` (or ``$AMBIENT_RUNS_ARTIFACTS``).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); where
they are missing, the test is skipped saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _devserver import dev_server

sys.path.insert(0, str(Path(__file__).resolve().parent / "viewer"))

ROOT = Path(__file__).resolve().parent.parent
AGENT = Path(__file__).resolve().parent / "viewer" / "tea_agent.py"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WAIT = 30  # seconds any one stage may take

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason=(
        "no Chromium here: `apt-get install -y chromium chromium-driver` "
        "(Debian; .ci/run installs them) to run the viewer's browser test"
    ),
)


def artifacts() -> Path:
    """Where screenshots are kept: $AMBIENT_RUNS_ARTIFACTS, or test-artifacts/ at the root."""
    where = Path(os.environ.get("AMBIENT_RUNS_ARTIFACTS") or ROOT / "test-artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, driven by chromedriver; quit after the test."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1600,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def run_status(driver: Any) -> str:
    """The page's run status: the data-run-status of its status element."""
    return str(driver.find_element("css selector", "#run-status").get_attribute("data-run-status"))


def wait_status(driver: Any, wanted: str) -> None:
    """Wait (bounded) until the run status is *wanted*; fail with what the page shows."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT, poll_frequency=0.05).until(
        lambda d: run_status(d) in (wanted, "error"),
        message=f"run status never became {wanted!r}",
    )
    assert wanted == run_status(driver), driver.find_element(
        "css selector", "#run-status"
    ).get_attribute("title")


def bar_span(lane: Any) -> tuple[float, float]:
    """A lane's bar on the time axis, as (start %, end %)."""
    style = lane.find_element("css selector", ":scope > .lane-head .bar").get_attribute("style")
    left = float(re.search(r"left:\s*([\d.]+)%", style)[1])  # type: ignore[index]
    width = float(re.search(r"width:\s*([\d.]+)%", style)[1])  # type: ignore[index]
    return left, left + width


class TestViewerInChromium:
    def test_three_lanes_state_approval_and_answer(self, browser: Any, tmp_path: Path) -> None:
        """The page shows the run live, and approving from it finishes the run with the answer."""
        from tea_agent import ANSWER

        shutil.copy(AGENT, tmp_path / "tea_agent.py")
        with dev_server(tmp_path, "tea_agent:agent", "--no-reload") as server:
            browser.get(server.url + "/")
            assert "idle" == run_status(browser)
            browser.find_element("css selector", "[data-chat-input]").send_keys("Tea or coffee?")
            browser.find_element("css selector", "[data-chat-send]").click()

            wait_status(browser, "interrupted")
            lanes = browser.find_elements("css selector", "[data-subagent-id]")
            ids = [lane.get_attribute("data-subagent-id") for lane in lanes]
            parents = {lane.get_attribute("data-parent-subagent-id") for lane in lanes}
            statuses = {lane.get_attribute("data-lane-status") for lane in lanes}
            spans = [bar_span(lane) for lane in lanes]
            searches = [
                lane.find_element("css selector", "[data-tool-call-id] .fn").text for lane in lanes
            ]
            state = browser.find_element("css selector", "[data-state]").text
            interrupt = browser.find_element("css selector", "[data-interrupt-id]")
            browser.save_screenshot(str(artifacts() / "viewer-interrupted.png"))

            assert ["research-tea", "research-coffee", "research-cocoa"] == ids
            assert {""} == parents  # each nested under the run itself
            assert {"finished"} == statuses
            assert max(s for s, _ in spans) < min(e for _, e in spans)  # they overlap in time
            assert ["search"] * 3 == searches
            assert '"coffee": "fine"' in state
            assert '"awaiting approval"' in state
            assert "approval" == interrupt.get_attribute("data-reason")

            interrupt.find_element("css selector", "[data-action=approve]").click()
            wait_status(browser, "finished")
            said = [
                m.text
                for m in browser.find_elements(
                    "css selector", "[data-chat-message][data-role=assistant]"
                )
            ]
            state = browser.find_element("css selector", "[data-state]").text
            still = len(browser.find_elements("css selector", "[data-subagent-id]"))
            browser.save_screenshot(str(artifacts() / "viewer.png"))
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]

        assert [ANSWER] == said
        assert '"status": "published"' in state
        assert 3 == still  # the thread's earlier run keeps its lanes above the resumed one
        assert [] == errors  # no script error, no failed request


def post(url: str, thread_id: str, run_id: str, text: str) -> str:
    """POST a one-message run to *url* and read its whole reply."""
    import json
    import urllib.request

    body = {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": f"{run_id}-u", "role": "user", "content": text}],
    }
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return str(response.read().decode())


def state_of(driver: Any) -> Any:
    """The page's state panel, parsed."""
    import json

    return json.loads(driver.find_element("css selector", "[data-state]").text)


class TestFrontendToolsAndTurns:
    def test_a_declared_tool_answered_from_the_form_and_a_second_turn(
        self, browser: Any, tmp_path: Path
    ) -> None:
        """The page offers `confirm`, answers the demo's call from its form; turns carry state."""
        import json

        from ambient_runs._demo import CONFIRM_TOOL
        from ambient_runs._wire import to_wire

        shutil.copy(AGENT.parent / "demo_agent.py", tmp_path / "demo_agent.py")
        with dev_server(tmp_path, "demo_agent:agent", "--no-reload") as server:
            browser.get(server.url + "/")
            browser.find_element("css selector", "[data-tab=tools]").click()
            tools = browser.find_element("css selector", "[data-tools]")
            tools.clear()
            tools.send_keys(json.dumps([to_wire(CONFIRM_TOOL)]))
            browser.find_element("css selector", "#tools-save").click()
            browser.find_element("css selector", "[data-tab=state]").click()
            browser.find_element("css selector", "[data-chat-input]").send_keys("Tea or coffee?")
            browser.find_element("css selector", "[data-chat-send]").click()

            wait_status(browser, "waiting")  # the run ended with the page's tool to answer
            form = browser.find_element("css selector", "[data-pending-tools] [data-tool-call-id]")
            form.find_element("css selector", "[data-tool-result]").send_keys(
                '{"confirmed": true}'
            )
            form.find_element("css selector", "[data-action=result]").click()
            wait_status(browser, "finished")
            saved = state_of(browser)
            said = browser.find_elements(
                "css selector", "[data-chat-message][data-role=assistant]"
            )
            last = said[-1].text

            browser.find_element("css selector", "[data-chat-input]").send_keys("And cocoa?")
            browser.find_element("css selector", "[data-chat-send]").click()
            wait_status(browser, "waiting")
            asked = state_of(browser)["asked"]

        assert True is saved["saved"]
        assert "Saved to your notes." == last
        assert ["Tea or coffee?", "And cocoa?"] == asked  # the state went back with the turn


class TestOpenByIds:
    def test_join_replay_and_answer_a_run_started_elsewhere(
        self, browser: Any, tmp_path: Path
    ) -> None:
        """A stored run is joined by URL, replayed from the form, and approved from the page."""
        from tea_agent import ANSWER

        shutil.copy(AGENT, tmp_path / "tea_agent.py")
        with dev_server(tmp_path, "tea_agent:agent", "--no-reload", "--store", "memory") as server:
            post(f"{server.url}/agent", "elsewhere", "run-1", "Tea?")  # another client's run

            browser.get(f"{server.url}/?thread=elsewhere&run=run-1")
            wait_status(browser, "interrupted")
            joined = state_of(browser)

            browser.find_element("css selector", "[data-tab=open]").click()
            browser.find_element("css selector", "[data-open-thread]").send_keys("elsewhere")
            browser.find_element("css selector", "[data-open-run]").send_keys("run-1")
            browser.find_element("css selector", "[data-open-replay]").click()
            from selenium.webdriver.support.ui import WebDriverWait

            WebDriverWait(browser, WAIT).until(
                lambda d: len(d.find_elements("css selector", "[data-subagent-id]")) == 3
            )
            wait_status(browser, "interrupted")
            lanes = browser.find_elements("css selector", "[data-subagent-id]")
            ids = [lane.get_attribute("data-subagent-id") for lane in lanes]
            spans = [bar_span(lane) for lane in lanes]

            browser.find_element(
                "css selector", "[data-interrupt-id] [data-action=approve]"
            ).click()
            wait_status(browser, "finished")
            said = browser.find_elements(
                "css selector", "[data-chat-message][data-role=assistant]"
            )[-1].text

        assert {"tea": "fine", "coffee": "fine", "cocoa": "fine"} == joined["findings"]
        assert ["research-tea", "research-coffee", "research-cocoa"] == ids
        # Replayed at once, yet drawn on the run's own time axis (dev stamps the events).
        assert max(s for s, _ in spans) < min(e for _, e in spans)
        assert all(e - s > 20 for s, e in spans)
        assert ANSWER == said


class TestAnswers:
    def test_deny_then_input_on_the_same_thread(self, browser: Any, tmp_path: Path) -> None:
        """Deny resumes with approved false; a later turn's typed input is sent as JSON."""
        from tea_agent import ANSWER

        shutil.copy(AGENT, tmp_path / "tea_agent.py")
        with dev_server(tmp_path, "tea_agent:agent", "--no-reload") as server:
            browser.get(server.url + "/")
            browser.find_element("css selector", "[data-chat-input]").send_keys("Tea?")
            browser.find_element("css selector", "[data-chat-send]").click()
            wait_status(browser, "interrupted")
            browser.find_element("css selector", "[data-interrupt-id] [data-action=deny]").click()
            wait_status(browser, "finished")
            denied = state_of(browser)["status"]

            browser.find_element("css selector", "[data-chat-input]").send_keys("Coffee?")
            browser.find_element("css selector", "[data-chat-send]").click()
            wait_status(browser, "interrupted")
            card = browser.find_elements("css selector", "[data-interrupt-id]")[-1]
            card.find_element("css selector", "[data-interrupt-input]").send_keys(
                '{"approved": true}'
            )
            card.find_element("css selector", "[data-action=input]").click()
            wait_status(browser, "finished")
            said = [
                m.text
                for m in browser.find_elements(
                    "css selector", "[data-chat-message][data-role=assistant]"
                )
            ]
            notes = [n.text for n in browser.find_elements("css selector", "[data-chat-note]")]

        assert "held" == denied
        assert ["Not published.", ANSWER] == said
        assert ["approval: denied", "approval: approved"] == [
            n for n in notes if n.startswith("approval: ")
        ]


SLOW_AGENT = """
import asyncio
import ambient_runs as ar


async def agent(run: ar.Run) -> None:
    async with ar.subagent("sleeper", id="sleeper-1"):
        ar.say("Going to sleep.")
        await asyncio.sleep(60)
"""

BAD_ENDPOINT = """
import json


async def bad(scope, receive, send):
    # A hand-made stream with a content event for a message never started.
    if scope["type"] != "http":
        return
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-none", "delta": "orphan"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\\n\\n" for e in events)
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
"""


class TestStopAndChecks:
    def test_stop_cancels_a_stored_run(self, browser: Any, tmp_path: Path) -> None:
        """Stop asks the store's owner to cancel: the run ends with the cancelled outcome."""
        from selenium.webdriver.support.ui import WebDriverWait

        (tmp_path / "slow.py").write_text(SLOW_AGENT)
        with dev_server(tmp_path, "slow:agent", "--no-reload", "--store", "memory") as server:
            browser.get(server.url + "/")
            browser.find_element("css selector", "[data-chat-input]").send_keys("Sleep.")
            browser.find_element("css selector", "[data-chat-send]").click()
            WebDriverWait(browser, WAIT).until(
                lambda d: d.find_elements(
                    "css selector", "[data-subagent-id=sleeper-1][data-lane-status=running]"
                )
            )
            browser.find_element("css selector", "[data-chat-stop]").click()
            wait_status(browser, "cancelled")
            kinds = [
                e.get_attribute("data-event-type")
                for e in browser.find_elements("css selector", "[data-events] li")
            ]

        assert "RUN_FINISHED" == kinds[-1]  # the server's cancelled outcome, not a cut stream

    def test_the_events_panel_flags_a_broken_stream(self, browser: Any, tmp_path: Path) -> None:
        """Content for a message never started is flagged in the events panel."""
        (tmp_path / "bad.py").write_text(BAD_ENDPOINT)
        (tmp_path / "shop.py").write_text(
            "from starlette.applications import Starlette\n"
            "from starlette.routing import Mount\n"
            "from bad import bad\n"
            "app = Starlette(routes=[Mount('/bad', app=bad)])\n"
        )
        with dev_server(tmp_path, "shop:app", "--no-reload") as server:
            browser.get(server.url + "/_viewer?endpoint=/bad/")
            browser.find_element("css selector", "[data-chat-input]").send_keys("Go.")
            browser.find_element("css selector", "[data-chat-send]").click()
            wait_status(browser, "finished")
            browser.find_element("css selector", "[data-tab=events]").click()
            verdict = browser.find_element("css selector", "#verify")
            flagged = browser.find_elements("css selector", "[data-events] li.bad")

            assert "problems" == verdict.get_attribute("data-verify")
            assert ["TEXT_MESSAGE_CONTENT"] == [
                f.get_attribute("data-event-type") for f in flagged
            ]
            assert "m-none, which is not open" in flagged[0].text


CUT_APP = '''
import asyncio

from starlette.applications import Starlette
from starlette.routing import Mount

import ambient_runs as ar
from ambient_runs.asgi import AgentApp
from ambient_runs.stores import MemoryStore


async def agent(run: ar.Run) -> str:
    async with ar.subagent("slow", id="slow-1"):
        for n in range(6):
            ar.say(f"part {n}")
            await asyncio.sleep(0.15)
    ar.say("all done")
    return "done"


class CutFirstStream:
    """Ends the first POST's response after two body chunks; the run goes on (a store)."""

    def __init__(self, app):
        self.app = app
        self.cut = False

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or self.cut:
            await self.app(scope, receive, send)
            return
        self.cut = True
        chunks = 0

        async def cutting(message):
            nonlocal chunks
            if chunks >= 2:
                return  # swallowed: the browser's stream has ended
            if message["type"] == "http.response.body":
                chunks += 1
                if chunks == 2:
                    message = {**message, "more_body": False}
            await send(message)

        await self.app(scope, receive, cutting)


app = Starlette(routes=[Mount("/agent", app=CutFirstStream(AgentApp(agent, store=MemoryStore())))])
'''


class TestResume:
    def test_a_cut_stream_resumes_after_its_last_event(self, browser: Any, tmp_path: Path) -> None:
        """With a store, a stream cut mid-run continues from ?after=<last id> to the end."""
        (tmp_path / "cut.py").write_text(CUT_APP)
        with dev_server(tmp_path, "cut:app", "--no-reload") as server:
            browser.get(server.url + "/_viewer?endpoint=/agent/")
            browser.find_element("css selector", "[data-chat-input]").send_keys("Go.")
            browser.find_element("css selector", "[data-chat-send]").click()
            wait_status(browser, "finished")
            said = [
                m.text
                for m in browser.find_elements(
                    "css selector", "[data-chat-message][data-role=assistant]"
                )
            ]
            lane = browser.find_element("css selector", "[data-subagent-id=slow-1]").text
            kinds = [
                e.get_attribute("data-event-type")
                for e in browser.find_elements("css selector", "[data-events] li")
            ]
            problems = browser.find_element("css selector", "#verify").get_attribute("data-verify")

        assert ["all done"] == said
        assert all(f"part {n}" in lane for n in range(6))
        assert 1 <= kinds.count("(stream cut: resuming)")
        assert 1 == kinds.count("RUN_STARTED")  # no event seen twice
        assert "ok" == problems
