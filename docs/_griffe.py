"""
A griffe extension that renders the package's reST-isms in Markdown.

The docstrings are Google style (``Args:``, ``Returns:``) written for humans reading
the source, with two habits of Sphinx that Markdown would print as they are:
``.. versionadded:: X`` / ``.. versionchanged:: X`` (followed by an indented
paragraph), roles such as ``:class:`Run``` and the ``::`` that opens a literal block.
The first become an italic line ("*Added in version X.*"), the second plain code
spans, the third a colon (the indented block after it is already code in Markdown).
Single and double backticks need nothing: Markdown renders both as code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["RestToMarkdown"]

_ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|exc|obj):`~?([^`]+)`")
_DIRECTIVE = re.compile(
    r"^(?P<indent>[ \t]*)\.\. version(?P<kind>added|changed)::[ \t]*(?P<version>\S+)[ \t]*(?:\n|$)"
    r"(?P<body>(?:(?P=indent)[ \t]+\S.*\n?)*)",
    re.MULTILINE,
)
# The one-line docstrings end with the directive on the same line.
_INLINE = re.compile(r"(?<=\S)[ \t]+\.\. version(?P<kind>added|changed)::[ \t]*(?P<version>\S+)")
_KIND = {"added": "Added", "changed": "Changed"}
# A paragraph ending in "::" introduces a reST literal block: the indented lines after it,
# which Markdown already shows as code. Only the "::" needs to become ":".
_LITERAL = re.compile(r"(?<=\S)::(?=\n\n[ \t]+\S)")


def _directive(match: re.Match[str]) -> str:
    """One versionadded/versionchanged directive as an italic Markdown line."""
    indent = match["indent"]
    body = " ".join(line.strip() for line in match["body"].splitlines() if line.strip())
    head = f"*{_KIND[match['kind']]} in version {match['version']}"
    return f"{indent}{head}:* {body}\n" if body else f"{indent}{head}.*\n"


def render(text: str) -> str:
    """Return *text* with its reST directives and roles rewritten as Markdown."""
    text = _DIRECTIVE.sub(_directive, text)
    text = _INLINE.sub(lambda m: f" *{_KIND[m['kind']]} in version {m['version']}.*", text)
    text = _LITERAL.sub(":", text)
    return _ROLE.sub(r"`\1`", text)


class RestToMarkdown(griffe.Extension):
    """Rewrite every docstring once the object tree is built."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite *obj*'s own docstring (aliases share their target's)."""
        if obj.docstring is not None:
            obj.docstring.value = render(obj.docstring.value)
