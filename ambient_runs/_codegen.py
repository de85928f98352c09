"""
Generated code that tracebacks, debuggers and `inspect` can show.

Three hot paths are compiled from source written at import time: the
unchecked event constructors (`ambient_runs.events.unchecked`), the wire-form
writers and the JSON text writers (`ambient_runs._wire`). Each goes through
`compile_function`, which, as attrs' ``_make.py`` does, registers the source
with `linecache` under a file name of its own, such as
``<ambient_runs generated text_TextMessageContentEvent>``. A traceback through
generated code then shows the generated line, ``inspect.getsource`` returns
it, and pdb can list and step through it, instead of ``<string>``.

The registered source stays in `linecache` for the life of the process (it is
small: a few lines per event class, written once per class).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import linecache
import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ("compile_function",)

_NAMES_LOCK = threading.Lock()


def compile_function(
    name: str, lines: Iterable[str], namespace: dict[str, Any], *, module: str
) -> Callable[..., Any]:
    """
    Compile the source *lines* defining function *name* and return the function.

    The source is registered with `linecache` under a unique file name naming
    *name*, so tracebacks and debuggers show it.

    Args:
        name: The name the source defines (``def name(...):``).
        lines: The source, one line per item, without newlines.
        namespace: The function's globals (the names its body uses). It is used
            as is, not copied; ``__name__`` is set to *module* unless present.
        module: The module the function belongs to (its ``__module__``).

    Returns:
        The function.
    """
    source = "\n".join(lines) + "\n"
    filename = _register(name, source)
    namespace.setdefault("__name__", module)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]  # type: ignore[no-any-return]


def _register(name: str, source: str) -> str:
    """Put *source* in `linecache` under a file name no other source has; return the name."""
    base = f"<ambient_runs generated {name}>"
    lines = source.splitlines(True)
    with _NAMES_LOCK:
        filename, count = base, 1
        while (entry := linecache.cache.get(filename)) is not None:
            if len(entry) == 4 and entry[2] == lines:
                return filename  # the same source again (a re-import): share its entry
            count += 1
            filename = f"{base[:-1]}-{count}>"
        # A None modification time tells linecache.checkcache the entry has no
        # file behind it, so it is kept rather than evicted.
        linecache.cache[filename] = (len(source), None, lines, filename)
    return filename
