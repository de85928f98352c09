"""The viewer page as served: never unless asked, self-contained, where it says it is."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from ambient_runs.asgi import AgentApp
from ambient_runs.viewer import ViewerApp, viewer_page

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


async def agent(run: object) -> None:
    """An agent that does nothing."""


async def get(app: Any, path: str, accept: str = BROWSER, method: str = "GET") -> httpx.Response:
    """One request to *app*, in process."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.request(method, path, headers={"accept": accept})


class TestPage:
    def test_is_self_contained(self) -> None:
        """The page loads nothing from elsewhere: no external script, style, font or image."""
        page = viewer_page("/agent").decode()

        assert [] == re.findall(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", page)
        assert "@import" not in page
        assert "url(http" not in page
        assert page.count("<script>") == 1
        assert page.count("</script>") == 1

    def test_names_its_endpoint_escaped(self) -> None:
        """The endpoint goes into a meta tag, HTML-escaped."""
        page = viewer_page('/a"b<c>').decode()

        assert '<meta name="ambient-runs-endpoint" content="/a&quot;b&lt;c&gt;">' in page

    @pytest.mark.parametrize(
        "attribute",
        [
            "data-run-status",
            "data-chat",
            "data-chat-input",
            "data-chat-send",
            "data-state",
            "data-events",
            "data-interrupts",
            "data-pending-tools",
            "data-tools",
            "data-lanes",
        ],
    )
    def test_carries_the_documented_attributes(self, attribute: str) -> None:
        """Each documented data- attribute of the page's frame is in the page."""
        assert attribute in viewer_page().decode()

    def test_lanes_get_their_subagent_attributes(self) -> None:
        """The script renders lanes with data-subagent-id, parent and status attributes."""
        page = viewer_page().decode()

        for attribute in ("data-subagent-id", "data-parent-subagent-id", "data-lane-status"):
            assert f'{attribute}="' in page


class TestAgentAppViewer:
    async def test_off_by_default(self) -> None:
        """Without viewer=True a browser's GET is refused as before (405)."""
        assert 405 == (await get(AgentApp(agent), "/")).status_code

    async def test_on_a_browser_gets_the_page(self) -> None:
        """With viewer=True a GET accepting HTML answers the page, talking to its own path."""
        response = await get(AgentApp(agent, viewer=True), "/agent")

        assert 200 == response.status_code
        assert response.headers["content-type"].startswith("text/html")
        assert '<meta name="ambient-runs-endpoint" content="">' in response.text

    @pytest.mark.parametrize(
        ("accept", "method"),
        [("text/event-stream", "GET"), ("application/json", "GET"), ("text/html", "DELETE")],
    )
    async def test_only_a_browser_get(self, accept: str, method: str) -> None:
        """A GET not asking for HTML, or another method, is answered as before (405)."""
        assert 405 == (await get(AgentApp(agent, viewer=True), "/", accept, method)).status_code

    async def test_capabilities_stay_json(self) -> None:
        """GET …/capabilities is still JSON, even from a browser."""
        response = await get(AgentApp(agent, viewer=True), "/capabilities")

        assert "application/json" == response.headers["content-type"]


class TestViewerApp:
    async def test_serves_the_page_for_its_endpoint(self) -> None:
        """GET anywhere under it: the page, set to the endpoint given; HEAD has no body."""
        app = ViewerApp("/agent")
        page = await get(app, "/viewer", accept="*/*")
        head = await get(app, "/", method="HEAD")

        assert (200, 200) == (page.status_code, head.status_code)
        assert 'content="/agent"' in page.text
        assert (b"", page.headers["content-length"]) == (
            head.content,
            head.headers["content-length"],
        )

    async def test_other_methods_are_405(self) -> None:
        """POST to the viewer is refused with allow: GET, HEAD."""
        response = await get(ViewerApp("/agent"), "/", method="POST")

        assert (405, "GET, HEAD") == (response.status_code, response.headers["allow"])
