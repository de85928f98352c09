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

        assert [ANSWER] == said
        assert '"status": "published"' in state
        assert 3 == still  # the thread's earlier run keeps its lanes above the resumed one
