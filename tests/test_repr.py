"""Tests for the public homes of exported names: reprs, pickling and type hints."""

from __future__ import annotations

import copy
import enum
import importlib
import inspect
import pickle
import pkgutil
import types
import typing
from typing import Any

import pytest

import ambient_runs
from ambient_runs import events as ev
from ambient_runs.testing import make_input

EXPORTED = {name: getattr(ambient_runs, name) for name in ambient_runs.__all__}
CLASSES = {name: obj for name, obj in EXPORTED.items() if isinstance(obj, type)}
FUNCTIONS = {name: obj for name, obj in EXPORTED.items() if isinstance(obj, types.FunctionType)}
PUBLIC_MODULES = [
    importlib.import_module(f"ambient_runs.{m.name}")
    for m in pkgutil.iter_modules(ambient_runs.__path__)
    if not m.name.startswith("_")
]


def path(cls: type[Any]) -> str:
    """The dotted path a class's repr shows (enums show only the name, so read it directly)."""
    if issubclass(cls, enum.Enum):
        return f"{cls.__module__}.{cls.__qualname__}"
    text = repr(cls)
    assert text.startswith("<class '"), text
    return text.removeprefix("<class '").removesuffix("'>")


class TestReprs:
    @pytest.mark.parametrize("name", sorted(CLASSES))
    def test_every_exported_class_names_the_package(self, name: str) -> None:
        """``repr()`` of each class exported by the package is ``ambient_runs.<Name>``."""
        cls = CLASSES[name]

        assert f"ambient_runs.{name}" == path(cls)
        if not issubclass(cls, enum.Enum):  # an enum's repr is "<enum 'Name'>"
            assert f"<class 'ambient_runs.{name}'>" == repr(cls)

    @pytest.mark.parametrize("name", sorted(FUNCTIONS))
    def test_every_exported_function_names_the_package(self, name: str) -> None:
        """Each exported function's ``__module__`` is ``ambient_runs``, under its own name."""
        fn = FUNCTIONS[name]

        assert ("ambient_runs", name) == (fn.__module__, fn.__qualname__)

    @pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
    def test_no_public_class_shows_a_private_module(self, module: types.ModuleType) -> None:
        """Classes of the public modules show a public path: the package's or their module's."""
        shown = {
            name: path(obj)
            for name in module.__all__
            if isinstance(obj := getattr(module, name), type)
        }

        wrong = {
            name: text
            for name, text in shown.items()
            if text not in (f"ambient_runs.{name}", f"{module.__name__}.{name}")
        }

        assert {} == wrong

    def test_a_raised_error_shows_the_public_path(self) -> None:
        """A traceback names an error by the path users catch it under."""
        import traceback

        try:
            ev.TextMessageContentEvent(message_id=1, delta="x")  # type: ignore[arg-type]
        except ambient_runs.InvalidEventError as exc:
            last = traceback.format_exception_only(exc)[-1]

        assert last.startswith("ambient_runs.InvalidEventError: ")


class TestWhatReliesOnTheModule:
    @pytest.mark.parametrize(
        "obj",
        [
            make_input(user="hi"),
            ambient_runs.Interrupt(id="i", reason="confirm"),
            ambient_runs.EventType.RUN_STARTED,
            ambient_runs.InvalidEventError("bad"),
            ambient_runs.ProtocolError("bad"),
            ambient_runs.LeftOpenWarning("left"),
        ],
        ids=lambda o: type(o).__name__,
    )
    def test_instances_pickle_and_copy(self, obj: Any) -> None:
        """Instances of re-homed classes survive pickle, copy and deepcopy."""
        for clone in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
            assert type(obj) is type(clone)
            assert repr(obj) == repr(clone)

    @pytest.mark.parametrize("name", sorted(CLASSES))
    def test_classes_pickle_by_reference(self, name: str) -> None:
        """A class pickles as a reference to ``ambient_runs.<Name>`` and comes back as itself."""
        cls = CLASSES[name]

        assert cls is pickle.loads(pickle.dumps(cls))
        assert f"ambient_runs\n{name}".encode() in pickle.dumps(cls, protocol=0)

    @pytest.mark.parametrize("name", sorted(FUNCTIONS))
    def test_functions_pickle_by_reference(self, name: str) -> None:
        """An exported function pickles by reference and comes back as itself."""
        assert FUNCTIONS[name] is pickle.loads(pickle.dumps(FUNCTIONS[name]))

    @pytest.mark.parametrize(
        ("cls", "field", "expected"),
        [
            (ambient_runs.RunAgentInput, "messages", tuple[ev.Message, ...]),
            (ambient_runs.RunAgentInput, "state", typing.Any),
            (ambient_runs.Interrupt, "response_schema", dict[str, typing.Any] | None),
            (ambient_runs.StreamStatistics, "buffered", int),
        ],
    )
    def test_type_hints_still_resolve(self, cls: type[Any], field: str, expected: Any) -> None:
        """``typing.get_type_hints`` resolves names from the module that defined the class."""
        assert expected == typing.get_type_hints(cls)[field]

    def test_type_hints_of_an_events_subclass(self) -> None:
        """A user's subclass of a re-homed attrs class resolves its inherited hints."""

        class Mine(ambient_runs.RunAgentInput):
            pass

        assert tuple[ev.Message, ...] == typing.get_type_hints(Mine)["messages"]

    def test_methods_keep_their_source(self) -> None:
        """inspect finds the source of functions and methods (under their defining file)."""
        assert "def say(" in inspect.getsource(ambient_runs.say)
        assert "def from_json(" in inspect.getsource(ambient_runs.RunAgentInput.from_json)
