"""
`Cors`: which browser origins may call an `AgentApp`, and the headers that say so.

The policy is checked once, when the app is made (an origin that is not
``scheme://host[:port]`` is a `ValueError` then, not a silent mismatch per
request), and answers each request's ``Origin`` with the headers its response
carries. ``"*"`` allows any origin, without credentials only: echoing any
origin with credentials would let every site read a user's runs with the
user's cookies, so ``"*"`` with credentials is a `ValueError` (list the
origins). The opaque origin ``null`` (sandboxed frames, ``file:``, some
redirects) can never be listed, so it never gets credentials.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ("Cors",)


@attrs.frozen
class Cors:
    """A CORS policy: the allowed *origins* and whether browsers may send *credentials*."""

    #: The allowed origins (``scheme://host[:port]``, or ``"*"`` for any); empty: no CORS.
    origins: frozenset[str]
    #: Whether ``Access-Control-Allow-Credentials: true`` goes out (cookies, ``Authorization``).
    credentials: bool

    @classmethod
    def of(cls, allow_origins: Iterable[str], allow_credentials: bool) -> Cors:
        """
        The policy `AgentApp` takes as *allow_origins* and *allow_credentials*.

        Raises:
            ValueError: An origin is not ``scheme://host[:port]`` or ``"*"``, or
                ``"*"`` comes with *allow_credentials*.
        """
        if isinstance(allow_origins, str):
            allow_origins = (allow_origins,)
        origins = frozenset(allow_origins)
        if "*" in origins and allow_credentials:
            msg = (
                "allow_origins='*' with allow_credentials=True would let any site read "
                "responses with its visitors' cookies: list the origins instead, e.g. "
                "allow_origins=['https://app.example']"
            )
            raise ValueError(msg)
        for origin in origins:
            if origin != "*" and not _is_origin(origin):
                msg = (
                    f"allow_origins holds {origin!r}, which is not an origin: write "
                    "'scheme://host[:port]' with no path or trailing slash, or '*'"
                )
                raise ValueError(msg)
        return cls(origins, allow_credentials)

    def headers(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        """The CORS headers every response to *origin* carries (none if not allowed)."""
        if origin is None or not self.origins:
            return []
        if origin in self.origins and origin != "null":
            allowed = origin
        elif "*" in self.origins:
            allowed = "*"  # never with credentials (refused in `of`)
        else:
            return []
        headers = [(b"access-control-allow-origin", allowed.encode("latin-1"))]
        if allowed != "*":
            headers.append((b"vary", b"origin"))
        if self.credentials:
            headers.append((b"access-control-allow-credentials", b"true"))
        return headers


def _is_origin(value: str) -> bool:
    """Whether *value* is ``scheme://host[:port]`` and nothing more."""
    scheme, sep, rest = value.partition("://")
    return (
        bool(scheme and sep and rest)
        and not any(c in rest for c in "/?#")
        and rest == rest.strip()
    )
