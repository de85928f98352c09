"""
The live run viewer: one HTML page that talks AG-UI to an endpoint and shows its runs.

The page is plain HTML, CSS and JavaScript shipped inside the package (no CDN,
no build step, works offline). It is never served unless asked:

- ``AgentApp(agent, viewer=True)`` answers a ``GET`` of its own path whose
  ``Accept`` admits ``text/html`` (what a browser sends) with the page, set to
  talk to that same path;
- `ViewerApp` serves the page anywhere else (mount it beside the agent), set to
  talk to the endpoint you name;
- ``python -m ambient_runs dev`` mounts it for you.

What the page shows, and the ``data-`` attributes tests can rely on, is
documented in the guide "See your agent run".

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import html
import importlib.resources
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

__all__ = ("ViewerApp", "viewer_page")

_Message: TypeAlias = MutableMapping[str, Any]
_Receive: TypeAlias = Callable[[], Awaitable[_Message]]
_Send: TypeAlias = Callable[[_Message], Awaitable[None]]

_HEADERS = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    # The page loads nothing from elsewhere: say so, so nothing injected could.
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        b"img-src 'self' data:; connect-src *; frame-ancestors 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
]


def _asset(name: str) -> str:
    return (importlib.resources.files("ambient_runs") / "_viewer" / name).read_text("utf-8")


def viewer_page(endpoint: str = "", *, title: str = "ambient_runs viewer") -> bytes:
    """
    Return the viewer's HTML page, set to talk to *endpoint*, as UTF-8 bytes.

    The page is self-contained: its CSS and JavaScript are inlined, so it can
    be served from any path, or saved to a file and opened.

    Args:
        endpoint: The AG-UI endpoint's URL or path (``"/agent"``,
            ``"http://127.0.0.1:8000/agent"``); empty: the page's own path
            (what ``AgentApp(viewer=True)`` serves). A ``?endpoint=`` in the
            page's address overrides it.
        title: The page's title.

    .. versionadded:: 0.1.0
    """
    page = _asset("index.html")
    # One pass per placeholder, the inlined assets last: nothing they contain is replaced.
    page = page.replace("{{ENDPOINT}}", html.escape(endpoint, quote=True))
    page = page.replace("{{TITLE}}", html.escape(title))
    css = _asset("viewer.css")
    # A "</script>" inside the script would end it early; the script never writes one.
    js = _asset("viewer.js").replace("</", "<\\/")
    head, _, tail = page.partition("{{CSS}}")
    page = head + css + tail
    head, _, tail = page.partition("{{JS}}")
    return (head + js + tail).encode("utf-8")


class ViewerApp:
    """
    Serve the viewer page: a bare ASGI 3 application, to mount beside an agent.

    Every ``GET`` (and ``HEAD``) answers the page, whatever the path below the
    mount; other methods answer 405. Mount it where you want the page, and
    name the agent's endpoint::

        api.mount("/agent", AgentApp(agent))
        api.mount("/viewer", ViewerApp("/agent"))

    The page calls the endpoint from the browser: serve both from one origin,
    or give the `AgentApp` *allow_origins* naming the viewer's.

    Args:
        endpoint: The AG-UI endpoint's URL or path, as for `viewer_page`.
        title: The page's title.

    .. versionadded:: 0.1.0
    """

    def __init__(self, endpoint: str, *, title: str = "ambient_runs viewer") -> None:
        self.endpoint = endpoint
        self._page = viewer_page(endpoint, title=title)

    def __repr__(self) -> str:
        return f"ViewerApp({self.endpoint!r})"

    async def __call__(self, scope: _Message, receive: _Receive, send: _Send) -> None:
        """Answer one ASGI connection: the page for GET and HEAD; 405 otherwise."""
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1003})
            return
        await _send_page(self._page, scope, send)


async def _send_page(page: bytes, scope: _Message, send: _Send) -> None:
    """Answer *page* to GET or HEAD, 405 (allow: GET, HEAD) to anything else."""
    method = scope.get("method", "GET")
    if method not in ("GET", "HEAD"):
        body = json.dumps(
            {"error": "method not allowed", "detail": [f"{method} is not allowed; GET the page"]}
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"allow", b"GET, HEAD"),
        ]
        await send({"type": "http.response.start", "status": 405, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    headers = [*_HEADERS, (b"content-length", str(len(page)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else page})


def _wants_html(accept: str | None) -> bool:
    """Whether an ``Accept`` header admits ``text/html`` (a browser's navigation does)."""
    if not accept:
        return False
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media.lower() in ("text/html", "application/xhtml+xml"):
            q = next((p[2:] for p in params if p.lower().startswith("q=")), "1")
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False
