"""CORS: a browser on another origin gets its preflight answered when origins are configured."""

from __future__ import annotations

import httpx
import pytest
from _server import served
from support.servers import serving
from support.sse import BODY, assert_one_terminal, events_of

import ambient_runs as ar
from ambient_runs.asgi import AgentApp

APP = "https://app.example"
PREFLIGHT = {
    "origin": APP,
    "access-control-request-method": "POST",
    "access-control-request-headers": "content-type, authorization",
}


class TestPreflight:
    async def test_an_allowed_origin_gets_204_and_its_post_is_readable(self) -> None:
        """The preflight says POST and the asked headers; the stream and a 422 carry the origin."""
        async with served("varied") as server, httpx.AsyncClient(timeout=20) as client:
            preflight = await client.options(server.url, headers=PREFLIGHT)
            post = await client.post(server.url, json=BODY, headers={"origin": APP})
            bad = await client.post(server.url, json={"threadId": 1}, headers={"origin": APP})

        assert (204, APP, "POST", "content-type, authorization", "origin") == (
            preflight.status_code,
            preflight.headers["access-control-allow-origin"],
            preflight.headers["access-control-allow-methods"],
            preflight.headers["access-control-allow-headers"],
            preflight.headers["vary"],
        )
        assert_one_terminal(events_of(post.content))
        assert (APP, 422, APP) == (
            post.headers["access-control-allow-origin"],
            bad.status_code,
            bad.headers["access-control-allow-origin"],
        )

    async def test_another_origin_is_refused_with_no_cors_headers(self) -> None:
        """A preflight from an unlisted origin is 403, without Access-Control-Allow-Origin."""
        async with served("varied") as server, httpx.AsyncClient(timeout=20) as client:
            refused = await client.options(
                server.url, headers={**PREFLIGHT, "origin": "https://evil.example"}
            )
            wrong_method = await client.options(
                server.url, headers={**PREFLIGHT, "access-control-request-method": "DELETE"}
            )

        assert (403, 403) == (refused.status_code, wrong_method.status_code)
        assert "access-control-allow-origin" not in refused.headers

    async def test_without_allow_origins_options_stays_405(self) -> None:
        """No origins configured: a preflight is refused as any other method."""

        async def agent(run: ar.Run) -> None:
            ar.say("hi")

        async with serving(AgentApp(agent)) as url, httpx.AsyncClient(timeout=20) as client:
            response = await client.options(url, headers=PREFLIGHT)

        assert (405, "POST") == (response.status_code, response.headers["allow"])

    def test_any_origin_with_credentials_is_refused_at_construction(self) -> None:
        """'*' with credentials would echo any origin with cookies: a ValueError naming the fix."""
        with pytest.raises(ValueError, match=r"list the origins instead"):
            AgentApp(lambda run: None, allow_origins="*", allow_credentials=True)

    async def test_the_null_origin_never_gets_credentials(self) -> None:
        """Origin 'null' is not echoed with credentials: '*' answers it only without them."""

        async def agent(run: ar.Run) -> None:
            ar.say("hi")

        with_credentials = AgentApp(agent, allow_origins=APP, allow_credentials=True)
        any_origin = AgentApp(agent, allow_origins="*")
        null = {**PREFLIGHT, "origin": "null"}
        async with httpx.AsyncClient(timeout=20) as client:
            async with serving(with_credentials) as url:
                refused = await client.options(url, headers=null)
                post = await client.post(url, json=BODY, headers={"origin": "null"})
            async with serving(any_origin) as url:
                anyone = await client.options(url, headers=null)

        assert (403, None, None) == (
            refused.status_code,
            refused.headers.get("access-control-allow-origin"),
            post.headers.get("access-control-allow-credentials"),
        )
        assert "access-control-allow-origin" not in post.headers
        assert (204, "*", None) == (
            anyone.status_code,
            anyone.headers["access-control-allow-origin"],
            anyone.headers.get("access-control-allow-credentials"),
        )
        with pytest.raises(ValueError, match="not an origin"):
            AgentApp(agent, allow_origins=["null"], allow_credentials=True)

    @pytest.mark.parametrize("origin", ["https://app.example/", "app.example", "https://a/b"])
    def test_an_origin_with_a_path_is_refused_at_construction(self, origin: str) -> None:
        """'https://app.example/' would never match a browser's Origin: say so at once."""
        with pytest.raises(ValueError, match="not an origin"):
            AgentApp(lambda run: None, allow_origins=[origin])

    def test_the_policy_reads_back_and_cannot_be_changed_after_construction(self) -> None:
        """One string is one origin; the checked policy is what every request is judged by."""
        app = AgentApp(lambda run: None, allow_origins=APP, allow_credentials=True)
        assert (app.allow_origins, app.allow_credentials) == (frozenset({APP}), True)
        with pytest.raises(AttributeError):
            app.allow_origins = frozenset({"*"})
        assert AgentApp(lambda run: None).allow_origins == frozenset()
