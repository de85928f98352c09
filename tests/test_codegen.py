"""Tests for `ambient_runs._codegen`: generated code that tracebacks and debuggers can show."""

from __future__ import annotations

import inspect
import linecache
import traceback
from typing import Any

import pytest

from ambient_runs import events as ev
from ambient_runs._codegen import compile_function
from ambient_runs._wire import text_writer, to_wire


class TestCompileFunction:
    def test_returns_the_function_the_source_defines(self) -> None:
        """The compiled function runs, with the namespace as its globals and the given module."""
        add = compile_function(
            "add_k", ["def add_k(x):", "    return x + k"], {"k": 2}, module="somewhere"
        )

        assert (5, "add_k", "somewhere") == (add(3), add.__name__, add.__module__)

    def test_source_is_registered_under_a_name_of_its_own(self) -> None:
        """The code's file name names the function, and linecache holds its source."""
        fn = compile_function("fn_a", ["def fn_a():", "    return 1"], {}, module=__name__)
        filename = fn.__code__.co_filename

        assert filename.startswith("<ambient_runs generated fn_a")
        assert ["def fn_a():\n", "    return 1\n"] == linecache.getlines(filename)

    def test_different_sources_under_one_name_get_different_files(self) -> None:
        """Two functions of the same name but other source do not overwrite each other."""
        one = compile_function("dup", ["def dup():", "    return 1"], {}, module=__name__)
        two = compile_function("dup", ["def dup():", "    return 2"], {}, module=__name__)

        assert one.__code__.co_filename != two.__code__.co_filename
        assert ("    return 1", "    return 2") == (
            linecache.getline(one.__code__.co_filename, 2).rstrip("\n"),
            linecache.getline(two.__code__.co_filename, 2).rstrip("\n"),
        )

    def test_survives_checkcache(self) -> None:
        """linecache.checkcache (run by traceback printing) keeps the generated source."""
        fn = compile_function("kept", ["def kept():", "    return 1"], {}, module=__name__)
        linecache.checkcache()

        assert "def kept():\n" == linecache.getline(fn.__code__.co_filename, 1)

    def test_traceback_shows_the_generated_line(self) -> None:
        """A traceback through generated code shows the line that failed, not ``<string>``."""
        fn = compile_function(
            "fails", ["def fails(x):", "    y = x + 1", "    return 1 / y"], {}, module=__name__
        )
        with pytest.raises(ZeroDivisionError) as caught:
            fn(-1)
        text = "".join(traceback.format_exception(caught.value))

        assert "<ambient_runs generated fails" in text
        assert "return 1 / y" in text
        assert "<string>" not in text


class TestTheLibrarysGeneratedCode:
    def test_unchecked_constructor_has_source(self) -> None:
        """`ev.unchecked`'s constructor can be read with inspect.getsource."""
        make = ev.unchecked(ev.TextMessageContentEvent, "message_id", "delta")

        source = inspect.getsource(make)

        assert source.startswith("def make_TextMessageContentEvent(message_id, delta):")
        assert ev.TextMessageContentEvent(message_id="m", delta="d") == make("m", "d")

    def test_text_writer_has_source(self) -> None:
        """The JSON text writer of an event class can be read with inspect.getsource."""
        source = inspect.getsource(text_writer(ev.TextMessageContentEvent))  # type: ignore[arg-type]

        assert source.startswith("def text_TextMessageContentEvent(o, before, after):")

    def test_unstructure_function_shows_in_a_traceback(self) -> None:
        """A failure inside a generated wire-form writer is shown at its generated line."""
        broken: Any = object.__new__(ev.ToolCallStartEvent)  # no fields set at all
        with pytest.raises(AttributeError) as caught:
            to_wire(broken)
        text = "".join(traceback.format_exception(caught.value))

        assert "<ambient_runs generated unstructure_ToolCallStartEvent" in text
        assert "v = o." in text
