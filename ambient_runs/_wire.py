"""
The wire form: the one place that knows how AG-UI objects look as JSON.

One cattrs converter does all of it, through hook factories rather than
per-class code:

- keys are camelCase (``from_`` is ``from``);
- an optional field without a value is omitted, never sent as ``null``; required
  payloads that may be null (``CUSTOM.value``, ``STATE_SNAPSHOT.snapshot``,
  ``RAW.event``, patch values) keep their null, and free-form JSON (metadata,
  state, results) passes through untouched, nulls inside included;
- discriminators (``type``, ``role``, ``op``) are written from the class and
  read to pick it;
- JSON text matches the official Python ``EventEncoder`` byte for byte: compact,
  UTF-8, non-ASCII unescaped, and floats spelled the way pydantic spells them.

Reading is strict about types (no ``"1"`` for ``1``, no ``null`` for a required
string) and tolerant of unknown keys, and gathers every problem into one
`InvalidInputError` that names each bad field by its JSON path.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import json
import math
import re
import threading
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar, cast, get_args, get_origin

import attrs

from ambient_runs import events as ev
from ambient_runs._codegen import compile_function
from ambient_runs._diff import escape_pointer
from ambient_runs.errors import InvalidEventError, InvalidInputError, InvalidJSONError

if TYPE_CHECKING:
    from cattrs import Converter

__all__ = (
    "ENCODABLE",
    "check_encodable",
    "check_json",
    "encode_json",
    "frame_pieces",
    "frame_template",
    "framed",
    "framed_encoder",
    "from_wire",
    "is_state_type",
    "json_form",
    "json_verbatim",
    "lone_surrogate",
    "parse_input",
    "parse_input_json",
    "problem_count",
    "refuse_reserved_metadata",
    "register_json_form",
    "safe_scalar",
    "structure_state",
    "text_writer",
    "to_wire",
    "wire_form",
    "wire_name",
)

T = TypeVar("T")


class _Deferred:
    """
    A cattrs ``Converter`` made on first use, with the registrations made before replayed.

    Importing cattrs and building the two converters was a tenth of ``import
    ambient_runs``, and a program that only streams text never structures anything.
    Until first used, this stand-in records the module's ``register_*`` calls; the
    first other attribute makes the converter, replays them in order, and rebinds
    the module global (*name*) to it, so every later use is the converter itself.
    """

    def __init__(self, name: str, **options: Any) -> None:
        self._name, self._options = name, options
        self._calls: list[tuple[str, tuple[Any, ...]]] = []
        self._lock = threading.Lock()
        self._made: Converter | None = None

    def __getattr__(self, attr: str) -> Any:
        with self._lock:
            if self._made is None and attr.startswith("register_"):
                return functools.partial(self._record, attr)
            if self._made is None:
                import cattrs

                made = cattrs.Converter(**self._options)
                for method, args in self._calls:
                    getattr(made, method)(*args)
                globals()[self._name] = self._made = made
        return getattr(self._made, attr)

    def _record(self, method: str, *args: Any) -> None:
        with self._lock:
            if self._made is None:
                self._calls.append((method, args))
                return
        getattr(self._made, method)(*args)


_CONVERTER = cast("Converter", _Deferred("_CONVERTER", detailed_validation=True))


def wire_name(name: str) -> str:
    """
    Return the wire spelling of field *name*: camelCase, and ``from`` for ``from_``.

    .. versionadded:: 0.1.0
    """
    if name == "from_":
        return "from"
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _identity(value: T) -> T:
    return value


# --------------------------------------------------------------------------- classes

# The object model's annotations are strings (``from __future__ import annotations``):
# each class has them resolved where its fields are first read (`_fields`,
# `_structure_factory`), not all at import, which is an import-time cost.


def _built_on_first_use(
    table: dict[type[Any], Callable[..., Any]],
    cls: type[Any],
    factory: Callable[[type[Any]], Callable[..., Any] | None],
) -> Callable[..., Any]:
    """
    Return a stand-in for ``factory(cls)`` in *table*: on its first call it builds the function.

    Generating and compiling one function per event class at import was a tenth of
    ``import ambient_runs``; a program uses a few classes. The stand-in puts the
    built function in its place (or removes the entry, when *factory* makes none,
    and returns None: "no fast path", as a missing entry says) and runs it, so
    callers that look the table up per call pay nothing after the first.
    """

    def first_use(*args: Any) -> Any:
        made = factory(cls)
        if made is None:
            table.pop(cls, None)
            return None
        table[cls] = made
        return made(*args)

    first_use.__name__ = first_use.__qualname__ = f"first_use_{cls.__name__}"
    return first_use


# --------------------------------------------------------------------------- unstructure


def _unstructure_factory(cls: type[Any]) -> Callable[[Any], dict[str, Any]]:
    """
    Generate ``cls``'s unstructure function.

    cattrs' own ``make_dict_unstructure_fn`` writes required keys before optional
    ones; the official encoder keeps declaration order, and byte-identical JSON
    needs the same order. So the code is generated here: one straight-line
    function per class, discriminators as literals, ``None`` optionals skipped,
    and plain values (strings, numbers, free-form JSON) copied without a call.
    """
    lines = [f"def unstructure_{cls.__name__}(o):", "    res = {}"]
    namespace: dict[str, Any] = {}
    for a in _fields(cls):
        key = wire_name(a.name)
        if not a.init:  # a discriminator: the same for every instance
            tag = a.default.value if isinstance(a.default, ev.EventType) else a.default
            lines.append(f"    res[{key!r}] = {tag!r}")
            continue
        value_type = _strip_none(a.type)
        if _is_plain(value_type):
            value = "v"
        else:
            namespace[f"h_{a.name}"] = _CONVERTER.get_unstructure_hook(value_type)
            value = f"h_{a.name}(v)"
        lines.append(f"    v = o.{a.name}")
        if a.default is None:
            lines.append(f"    if v is not None: res[{key!r}] = {value}")
        else:
            lines.append(f"    res[{key!r}] = {value}")
    lines.append("    return res")
    write = compile_function(f"unstructure_{cls.__name__}", lines, namespace, module=__name__)
    return cast(Callable[[Any], dict[str, Any]], write)


class _Field:
    """The parts of an attrs or dataclass field that the wire form needs."""

    __slots__ = ("default", "init", "name", "type")

    def __init__(self, name: str, tp: Any, default: Any, *, init: bool) -> None:
        self.name, self.type, self.default, self.init = name, tp, default, init


def _fields(cls: type[Any]) -> list[_Field]:
    if attrs.has(cls):
        attrs.resolve_types(cls)
        return [_Field(a.name, a.type, a.default, init=a.init) for a in attrs.fields(cls)]
    hints = typing.get_type_hints(cls)
    return [
        _Field(f.name, hints.get(f.name, Any), f.default, init=f.init)
        for f in dataclasses.fields(cls)
    ]


def _has_fields(cls: Any) -> bool:
    return attrs.has(cls) or (isinstance(cls, type) and dataclasses.is_dataclass(cls))


def _strip_none(tp: Any) -> Any:
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = tuple(a for a in get_args(tp) if a is not type(None))
        if len(args) == 1:
            return args[0]
    return tp


def _is_plain(tp: Any) -> bool:
    """Whether values of type *tp* are already their own wire form."""
    return tp in (str, int, float, bool) or _is_json(tp) or get_origin(tp) is Literal


def _is_json_object(tp: Any) -> bool:
    origin: Any = get_origin(tp)
    return origin is dict and get_args(tp) == (str, Any)


def _is_json(tp: Any) -> bool:
    return tp is Any or _is_json_object(tp)


def _is_tuple(tp: Any) -> bool:
    return get_origin(tp) is tuple


def _unstructure_tuple_factory(tp: Any) -> Callable[[Any], list[Any]]:
    (item_type, _) = get_args(tp)
    hook = _CONVERTER.get_unstructure_hook(item_type)
    return lambda value: [hook(item) for item in value]


_CONVERTER.register_unstructure_hook_factory(_has_fields, _unstructure_factory)
_CONVERTER.register_unstructure_hook_func(_is_json, _identity)
_CONVERTER.register_unstructure_hook_factory(_is_tuple, _unstructure_tuple_factory)
_CONVERTER.register_unstructure_hook(ev.EventType, lambda kind: kind.value)
_CONVERTER.register_unstructure_hook(str, _identity)


def _unstructure_content(value: Any) -> Any:
    return value if isinstance(value, str) else [_CONVERTER.unstructure(p) for p in value]


def _unstructure_by_class(value: Any) -> Any:
    return _CONVERTER.unstructure(value, type(value))


def to_wire(obj: Any) -> Any:
    """
    Return the wire form of an AG-UI object: a dict with camelCase keys.

    Optional fields without a value are left out; required payloads keep their
    ``null``. Free-form JSON (metadata, state, results) is passed through as is,
    not copied.

    .. versionadded:: 0.1.0
    """
    try:
        return _HOOKS[type(obj)](obj)
    except KeyError:
        hook = _HOOKS[type(obj)] = _CONVERTER.get_unstructure_hook(type(obj))
        return hook(obj)


#: Unstructure hooks by exact class: one dict lookup instead of cattrs' dispatch.
_HOOKS: dict[type[Any], Callable[[Any], Any]] = {}


# --------------------------------------------------------------------------- JSON text


def _not_json(value: object) -> NoReturn:
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def _make_dumps() -> Callable[[Any], str]:
    """
    Return the fastest compact, non-ASCII-preserving, NaN-rejecting JSON writer.

    ``json.JSONEncoder.encode`` builds a new C encoder on every call; building it
    once halves the cost of a small event. Where the C accelerator is missing
    (not CPython), the plain encoder does the same job.
    """
    import json.encoder as stdlib_encoder

    make = getattr(stdlib_encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover  (CPython always has it)
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
    iterencode = make(
        None, _not_json, stdlib_encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return lambda value: "".join(iterencode(value, 0))


_dumps = _make_dumps()

# A JSON string token, or a float in exponent form with a one-digit negative
# exponent (Python writes 1e-07, pydantic 1e-7; Python 1e-05, pydantic 0.00001).
_SMALL_FLOAT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?)(\d)(?:\.(\d+))?e-0(\d)')


def _pydantic_float(match: re.Match[str]) -> str:
    sign, lead, fraction, exponent = match.groups()
    if lead is None:  # a string token: leave it alone
        return match.group(0)
    digits = lead + (fraction or "")
    if exponent == "5":
        return f"{sign}0.0000{digits}"
    mantissa = lead + (f".{fraction}" if fraction else "")
    return f"{sign}{mantissa}e-{exponent}"


def _is_text(tp: Any) -> bool:
    """Whether values of type *tp* are strings (``str``, or a ``Literal`` of strings)."""
    if tp is str:
        return True
    return get_origin(tp) is Literal and all(type(arg) is str for arg in get_args(tp))


def _text_factory(cls: type[Any]) -> Callable[[Any, str, str], str | None] | None:
    """
    Generate the JSON text writer of an event class whose values are strings.

    The hot events (deltas, starts, ends) hold nothing but strings and optional
    strings. Their text is written directly, in `_unstructure_factory`'s key
    order, each value through the string encoder `_dumps` uses: the same bytes,
    without building the wire dict or re-encoding its keys (about half of
    `encode_json`'s time for a delta). The writer is ``write(o, before, after)``
    and returns ``before + JSON + after`` as one f-string, so a framed encoder
    (SSE) builds a single string. Every other field (``timestamp``,
    ``metadata``, …) is optional and must be absent: when one is set the writer
    returns None and `encode_json` takes the general path. A class with a
    required field that is not a string gets no writer (None).
    """
    fields = _fields(cls)
    if not fields or fields[0].init:  # an event opens with its discriminator
        return None
    encode_str = json.encoder.encode_basestring
    guards: list[str] = []
    optional: list[str] = []  # statements computing the optional fields' pieces
    pieces: list[str] = ["{before}"]  # the f-string, in wire order
    for index, a in enumerate(fields):
        key = ("{" if index == 0 else ",") + encode_str(wire_name(a.name)) + ":"
        value_type = _strip_none(a.type)
        if not a.init:  # a discriminator: the same for every instance
            tag = a.default.value if isinstance(a.default, ev.EventType) else a.default
            if type(tag) is not str:
                return None
            pieces.append(_fstring_literal(key + encode_str(tag)))
        elif _is_text(value_type) and a.default is None:
            optional += [
                f"    v = o.{a.name}",
                f"    p{index} = '' if v is None else {key!r} + encode_str(v)",
            ]
            pieces.append(f"{{p{index}}}")
        elif _is_text(value_type):
            pieces += [_fstring_literal(key), f"{{encode_str(o.{a.name})}}"]
        elif a.default is None:
            guards.append(f"o.{a.name} is not None")
        else:
            return None
    pieces += ["}}", "{after}"]
    lines = [f"def text_{cls.__name__}(o, before, after):"]
    if guards:
        lines.append(f"    if {' or '.join(guards)}: return None")
    lines += [*optional, "    return f" + repr("".join(pieces))]
    namespace: dict[str, Any] = {"encode_str": encode_str}
    write = compile_function(f"text_{cls.__name__}", lines, namespace, module=__name__)
    return cast("Callable[[Any, str, str], str | None]", write)


_TEMPLATE_MARK = "\x00ambient_runs frame template\x00"


def frame_template(event: Any, field: str, before: str, after: str) -> tuple[str, str] | None:
    """
    Split the frame of *event* around its string *field*: ``(head, tail)``, or None.

    For the library's byte path (`MessageHandle.write` on a stream consumed as
    SSE): with ``head, tail = frame_template(e, "delta", "data: ", "\\n\\n")``,
    ``head + json.encoder.encode_basestring(text) + tail`` is, character for
    character, what the framed encoder writes for *e* with *field* set to
    *text*: both come from the class's one text writer (`_TEXT`). None when the
    class has no text writer, or *event* needs the general path.
    """
    pieces = frame_pieces(event, (field,), before, after)
    return None if pieces is None else (pieces[0], pieces[1])


def frame_pieces(
    event: Any, fields: Sequence[str], before: str, after: str
) -> tuple[str, ...] | None:
    """
    Split the frame of *event* around its string *fields*, in wire order: one piece more.

    `frame_template` for several fields (a subagent's ``SUBAGENT_STARTED``
    around its id and its parent's): the frame of *event* with each field set
    to a JSON string ``s`` is ``pieces[0] + s[0] + pieces[1] + … + pieces[-1]``,
    character for character. None when the class has no text writer, *event*
    needs the general path, or *fields* are not in the order the wire writes them.
    """
    write = _TEXT.get(type(event))
    if write is None:
        return None
    marks = [_TEMPLATE_MARK if not i else f"{_TEMPLATE_MARK}{i}\x00" for i in range(len(fields))]
    text = write(attrs.evolve(event, **dict(zip(fields, marks, strict=True))), before, after)
    if text is None:
        return None
    pieces: list[str] = []
    for mark in map(json.encoder.encode_basestring, marks):
        if text.count(mark) != 1:
            return None
        head, text = text.split(mark)
        pieces.append(head)
    return (*pieces, text)


def _fstring_literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


#: JSON text writers by exact event class (see `_text_factory`), each built on first use.
_TEXT: dict[type[Any], Callable[[Any, str, str], str | None]] = {}
_TEXT.update(
    (cls, _built_on_first_use(_TEXT, cls, _text_factory)) for cls in ev.EVENT_CLASSES.values()
)


def text_writer(cls: type[Any]) -> Callable[[Any, str, str], str | None] | None:
    """The JSON text writer of event class *cls* (built now if it was not yet), or None."""
    write = _TEXT.get(cls)
    if write is not None and write.__name__.startswith("first_use_"):
        write = _TEXT[cls] = _text_factory(cls)  # type: ignore[assignment]
        if write is None:
            del _TEXT[cls]
    return write


def _encodable_factory(cls: type[Any]) -> Callable[[Any], object]:
    """
    Generate the check that an event of *cls* can be encoded, as cheaply as it can be told.

    The hot events hold only strings: an ASCII string (one flag in CPython) is
    always fine, any other is searched for a lone surrogate (a C-speed regex),
    the one thing that stops a Python string from becoming UTF-8 JSON. Whenever
    something else is set (metadata, a raw event, any non-string payload), or a
    string field holds a non-``str``, or a surrogate turns up, the check is the
    encoder itself (`_encode_bare`), which raises `InvalidEventError` naming the
    problem. A class with a required payload that is not a string is always
    checked by encoding.
    """
    texts: list[tuple[str, bool]] = []
    others: list[str] = []
    for a in _fields(cls):
        if not a.init:
            continue
        value_type = _strip_none(a.type)
        if _is_text(value_type):
            texts.append((a.name, a.default is None))
        elif a.default is None:
            others.append(a.name)
        else:
            return _encode_bare
    lines = [f"def encodable_{cls.__name__}(o):"]
    if others:
        lines.append(f"    if {' or '.join(f'o.{n} is not None' for n in others)}: return full(o)")
    for name, optional in texts:
        bad = "type(v) is not str or (not v.isascii() and surrogate(v) is not None)"
        lines.append(f"    v = o.{name}")
        lines.append(f"    if {f'v is not None and ({bad})' if optional else bad}: return full(o)")
    lines.append("    return None")
    namespace: dict[str, Any] = {"full": _encode_bare, "surrogate": _SURROGATE.search}
    check = compile_function(f"encodable_{cls.__name__}", lines, namespace, module=__name__)
    return cast("Callable[[Any], object]", check)


def encode_json(obj: Any) -> bytes:
    """
    Return *obj*'s wire form as compact UTF-8 JSON, exactly as the official encoder writes it.

    Raises:
        InvalidEventError: The object holds something JSON cannot carry: ``NaN`` or
            an infinity, a value that is not JSON (a set, a datetime, …), nesting
            deeper than the recursion limit, or a lone surrogate in a string.

    .. versionadded:: 0.1.0
    """
    return _encode_bare(obj)


def framed_encoder(before: str, after: str) -> Callable[[Any], bytes]:
    """
    Return ``encode(obj)``: ``before + JSON + after`` as UTF-8 (`encode_json`, framed).

    One string, encoded once: a frame costs no extra bytes copy, and binding the
    frame here spares every call a layer (the SSE encoder is this function's
    result, called once per event).

    The encoder raises `InvalidEventError` as `encode_json` does.
    """

    def encode(obj: Any) -> bytes:
        fast = _TEXT.get(type(obj))
        if fast is not None:
            try:
                framed = fast(obj, before, after)
            except TypeError:  # a non-string where a string belongs: the general path decides
                framed = None
            if framed is not None:
                try:
                    return framed.encode()
                except UnicodeEncodeError:
                    _bad_json(obj, "a string holds a lone surrogate, which UTF-8 cannot encode")
        try:
            text = _dumps(to_wire(obj))
            if "e-0" in text:
                text = _SMALL_FLOAT.sub(_pydantic_float, text)
            return (before + text + after).encode()
        except UnicodeEncodeError:
            _bad_json(obj, "a string holds a lone surrogate, which UTF-8 cannot encode")
        except (TypeError, ValueError, RecursionError) as exc:
            _bad_json(obj, str(exc))

    return encode


_encode_bare = framed_encoder("", "")

_SURROGATE = re.compile("[\ud800-\udfff]")

#: ``lone_surrogate(text)``: the first lone surrogate of *text* (a match), or None.
lone_surrogate = _SURROGATE.search


def refuse_reserved_metadata(metadata: object, what: str) -> None:
    """
    Refuse user metadata that holds the key the protocol reserves (``ag-ui``).

    The official SDKs keep ``metadata["ag-ui"]`` for the protocol's own data, so
    what an agent puts there could be misread, or overwritten, by the client.

    Raises:
        InvalidEventError: *metadata* is a dict with the ``ag-ui`` key.
    """
    if type(metadata) is dict and ev.AGUI_METADATA_KEY in metadata:
        msg = (
            f"{what}.metadata holds the key {ev.AGUI_METADATA_KEY!r}, which AG-UI reserves "
            "for the protocol; put your data under a key of your own"
        )
        raise InvalidEventError(msg)


#: A run of digits as long as the shortest integer past JavaScript's safe range.
_LONG_DIGITS = re.compile(rb"[0-9]{%d,}" % len(str(ev.MAX_SAFE_INTEGER + 1)))


def _unsafe_integer(value: Any, path: str = "") -> tuple[str, int] | None:
    """The JSON pointer and value of the first int in *value* beyond ±(2^53-1), or None."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        kind = type(item)
        if kind is int:
            if not -ev.MAX_SAFE_INTEGER <= item <= ev.MAX_SAFE_INTEGER:
                return where or "/", item
        elif kind is dict:
            escape = escape_pointer
            stack.extend((f"{where}/{escape(str(k))}", v) for k, v in reversed(item.items()))
        elif kind is list:
            stack.extend((f"{where}/{i}", v) for i, v in reversed(list(enumerate(item))))
    return None


def _safe_integers_factory(cls: type[Any]) -> Callable[[Any], object]:
    """
    The encodability check of a state or activity event: `_encode_bare`, and safe integers.

    A JavaScript client parses every number as a double, so an integer beyond
    ±(2^53-1) in state or activity content arrives silently rounded. The encoded
    text is searched for a run of 16 digits (C speed); only then is the payload
    walked, to tell an integer from digits inside a string or a float.
    """
    name = cls.__name__

    def encodable(obj: Any) -> None:
        if _LONG_DIGITS.search(_encode_bare(obj)) is None:
            return
        found = _unsafe_integer(to_wire(obj))
        if found is not None:
            where, value = found
            msg = (
                f"{name} holds the integer {value} at {where}, beyond JavaScript's safe "
                f"integers (±{ev.MAX_SAFE_INTEGER}): a JavaScript client would round it "
                "silently. Send it as a string (or as a float, if rounding is acceptable)."
            )
            raise InvalidEventError(msg)

    encodable.__name__ = encodable.__qualname__ = f"encodable_{name}"
    return encodable


def json_verbatim(text: str) -> bool:
    """Whether *text* is its own escaped text in a JSON string: no quote, backslash or control."""
    return json.encoder.encode_basestring(text) == f'"{text}"'


def _plain_text(value: str) -> bool:
    """Whether a ``str`` encodes as UTF-8 JSON: ASCII (one flag), or no lone surrogate."""
    return value.isascii() or _SURROGATE.search(value) is None


def safe_scalar(value: object) -> bool:
    """
    Whether *value* is a JSON scalar that encodes as a client keeps it, checked cheaply.

    A ``str`` without a lone surrogate, a finite ``float``, a ``bool``, None, or an
    ``int`` within ±(2^53-1), each of its exact type. False means only "not
    told here": the encoder decides (and names the problem, if there is one).
    """
    kind = type(value)
    if kind is str:
        return _plain_text(cast("str", value))
    if kind is int:
        return -ev.MAX_SAFE_INTEGER <= cast("int", value) <= ev.MAX_SAFE_INTEGER
    if kind is float:
        return cast("float", value) - cast("float", value) == 0.0  # finite
    return kind is bool or value is None


def _state_delta_factory() -> Callable[[Any], object]:
    """
    The encodability check of a ``STATE_DELTA``: the common one told without encoding.

    A delta with no timestamp, raw event or metadata whose operations are the
    differ's own (``add``, ``replace``, ``remove``) with plain-text paths and
    `safe_scalar` values encodes, safe integers included; anything else goes
    to the full check (`_safe_integers_factory`), which raises as it always has.
    """
    full = _safe_integers_factory(ev.StateDeltaEvent)
    with_value = (ev.ReplaceOperation, ev.AddOperation)
    remove = ev.RemoveOperation

    def encodable_StateDeltaEvent(obj: Any) -> object:
        if obj.timestamp is not None or obj.raw_event is not None or obj.metadata is not None:
            return full(obj)
        owner = obj.subagent_run_id
        if owner is not None and (type(owner) is not str or not _plain_text(owner)):
            return full(obj)
        for op in obj.delta:
            kind = type(op)
            path = op.path
            if type(path) is not str or not _plain_text(path):
                return full(obj)
            if kind in with_value:
                if not safe_scalar(op.value):
                    return full(obj)
            elif kind is not remove:
                return full(obj)
        return None

    return encodable_StateDeltaEvent


#: The events whose JSON payload a client keeps as data: state and activity content.
_SAFE_INTEGERS = (
    ev.StateSnapshotEvent,
    ev.StateDeltaEvent,
    ev.ActivitySnapshotEvent,
    ev.ActivityDeltaEvent,
)

#: The encodability check of every event class (see `check_encodable`), by exact class.
#: The string-only checks are generated, each on its first use.
ENCODABLE: dict[type[Any], Callable[[Any], object]] = {}
ENCODABLE.update(
    (
        cls,
        _safe_integers_factory(cls)
        if cls in _SAFE_INTEGERS
        else _built_on_first_use(ENCODABLE, cls, _encodable_factory),
    )
    for cls in ev.EVENT_CLASSES.values()
)
ENCODABLE[ev.StateDeltaEvent] = _state_delta_factory()


def check_encodable(obj: Any) -> None:
    """
    Raise `InvalidEventError` if *obj* cannot be encoded, as `encode_json` would.

    The run's pipeline calls this for every event before the verifier sees it,
    so a value JSON cannot carry (a lone surrogate in any string, ``NaN`` or an
    infinity, a set or any other object in ``CUSTOM.value``, ``RAW.event`` or
    metadata) is refused at the emitting call and never enters the stream.
    For string-only events it costs a few flag checks (see `ENCODABLE`); any
    other event is encoded once and the text dropped. State and activity events
    must also hold no integer beyond ±(2^53-1), which a JavaScript client rounds.
    """
    ENCODABLE.get(type(obj), _encode_bare)(obj)


def framed(before: str, after: str) -> Callable[[Callable[[T], bytes]], Callable[[T], bytes]]:
    """
    Replace a reference framing encoder with its fast equivalent, `framed_encoder`'s.

    Decorates ``def encode(obj): return before_bytes + encode_json(obj) + after_bytes``:
    the def (its name, docstring, signature and home module) is what readers,
    ``help()`` and "go to definition" find; the function that runs is
    ``framed_encoder(before, after)``, which gives the same bytes and raises the
    same errors with one string built and encoded once. The reference stays
    reachable as ``__wrapped__`` (the tests compare the two).
    """

    def decorate(reference: Callable[[T], bytes]) -> Callable[[T], bytes]:
        return functools.update_wrapper(framed_encoder(before, after), reference)

    return decorate


def _bad_json(obj: Any, why: str) -> NoReturn:
    msg = f"{type(obj).__name__} has no JSON form: {why}. Pass only JSON values (dict, list, str, int, finite float, bool, None)."  # noqa: E501
    raise InvalidEventError(msg) from None


def json_form(value: Any) -> Any:
    """
    Return *value*'s JSON form: what every payload the library takes becomes on the wire.

    ``call.args``, ``call.result``, ``finish_with``, ``set_state``, a subagent's
    return value and activity content all go through it. The forms, recursively:

    ============================================  ==========================================
    ``dict``, ``list``, ``str``, ``int``,         themselves (a finite ``float`` only)
    ``float``, ``bool``, ``None``
    ``tuple`` (and other sequences' subclasses)   an array
    other mappings                                an object; keys ``str``, or an enum, int,
                                                  float, bool or None key spelled as
                                                  ``json.dumps`` spells it
    attrs classes, dataclasses                    an object of their fields: camelCase keys,
                                                  a None field with a None default left out
    pydantic models (duck-typed)                  ``model_dump(mode="json")``
    ``enum.Enum``                                 its value's form
    ``datetime``, ``date``, ``time``              ISO 8601 text (``isoformat()``)
    ``uuid.UUID``, ``decimal.Decimal``            text (``str()``): no precision lost
    a type given to `register_json_form`          the form of what its *dump* returns
    ============================================  ==========================================

    Sets, bytes and every other type have none (register one). A registered type
    wins over the built-in forms, through the class's MRO. A value that is JSON
    already is returned as it is, not copied.

    Raises:
        InvalidEventError: Something in *value* has no JSON form; the message names
            its path (``$.tasks[2].due``) and the fix.

    .. versionadded:: 0.1.0
    """
    tv = type(value)
    if tv is str or tv is int or tv is bool or value is None:
        return value
    try:
        return _form(value)
    except _NoForm as problem:
        path = "$" + "".join(reversed(problem.path))
        msg = f"{tv.__name__} has no JSON form: {path} {problem.why}"
        raise InvalidEventError(msg) from None
    except RecursionError:
        msg = f"{tv.__name__} has no JSON form: it nests deeper than the recursion limit"
        raise InvalidEventError(msg) from None


def register_json_form(
    cls: type[T], dump: Callable[[T], Any], *, load: Callable[[Any], T] | None = None
) -> None:
    """
    Give *cls* (and its subclasses) a JSON form: ``dump(value)``, itself made JSON by `json_form`.

    Register at import time, before the type is used: a state type holding *cls*
    is converted with the hooks registered when it was first converted. With
    *load*, a client's state converts back (``load(json)``; whatever it raises
    refuses the state, 422 under `AgentApp`), so *cls* can be a field of a run's
    state type::

        ar.register_json_form(Money, lambda m: {"amount": str(m.amount), "ccy": m.ccy},
                              load=lambda j: Money(Decimal(j["amount"]), j["ccy"]))

    Registering *cls* again replaces its form; a registration overrides a built-in
    one (``register_json_form(Decimal, float)`` writes decimals as numbers).

    Raises:
        TypeError: *cls* is not a class, or *dump* or *load* is not callable.

    .. versionadded:: 0.1.0
    """
    if not isinstance(cls, type):
        msg = f"register_json_form needs a class, not {cls!r}"
        raise TypeError(msg)
    if not callable(dump) or (load is not None and not callable(load)):
        msg = "register_json_form(cls, dump, load=None): dump and load must be callables"
        raise TypeError(msg)
    _DUMPERS[cls] = dump
    _FORMS.clear()
    if load is not None:
        _LOADERS[cls] = load

        def structure(value: Any, _: Any) -> Any:
            try:
                return load(value)
            except Exception as exc:
                msg = f"not a {cls.__name__}: {type(exc).__name__}: {exc}"
                raise _Problem(msg) from None

        _STATE.register_structure_hook(cls, structure)


#: The dump functions `register_json_form` was given, by class.
_DUMPERS: dict[type[Any], Callable[[Any], Any]] = {}
#: The load functions `register_json_form` was given, by class.
_LOADERS: dict[type[Any], Callable[[Any], Any]] = {}


class _NoForm(Exception):
    """A value with no JSON form; *path* collects the steps to it, innermost first."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
        self.path: list[str] = []


def _key_form(key: Any) -> str:
    tk = type(key)
    if tk is str:
        return cast(str, key)
    if isinstance(key, enum.Enum):
        return _key_form(key.value)
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, bool | int | float):
        return _dumps(key) if not isinstance(key, float) else _float_key(key)
    msg = f"is a {tk.__name__} key; JSON object keys are strings"
    raise _NoForm(msg)


def _float_key(key: float) -> str:
    if not math.isfinite(key):
        msg = f"is a {key!r} key, which JSON cannot write"
        raise _NoForm(msg)
    return float.__repr__(key)


def _at(path_step: str, problem: _NoForm) -> _NoForm:
    problem.path.append(path_step)
    return problem


def _form(value: Any) -> Any:
    """*value*'s JSON form (see `json_form`); the same object when nothing needed converting."""
    tv = type(value)
    if tv is str or tv is int or tv is bool or value is None:
        return value
    if tv is float:
        if value - value == 0.0:
            return value
        msg = f"is {value!r}, which is not a JSON number"
        raise _NoForm(msg)
    if tv is dict:
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if type(key) is str else _key_form(key)
            try:
                new = _form(item)
            except _NoForm as problem:
                raise _at("." + name, problem) from None
            changed = changed or new is not item or name is not key
            out[name] = new
        return out if changed else value
    if tv is list or tv is tuple:
        items: list[Any] = []
        changed = tv is tuple
        for index, item in enumerate(value):
            try:
                new = _form(item)
            except _NoForm as problem:
                raise _at("[" + str(index) + "]", problem) from None
            changed = changed or new is not item
            items.append(new)
        return items if changed else value
    convert = _FORMS.get(tv)
    if convert is None:
        convert = _FORMS[tv] = _form_of_type(tv)
    return _form(convert(value))


def _form_of_type(tv: type[Any]) -> Callable[[Any], Any]:
    """How values of class *tv* (not a JSON type itself) become something `_form` takes."""
    for base in tv.__mro__:
        dump = _DUMPERS.get(base)
        if dump is not None:
            return dump
    if _has_fields(tv):
        return to_wire
    if _is_pydantic_model(tv):
        return lambda v: v.model_dump(mode="json")
    if issubclass(tv, enum.Enum):
        return lambda v: v.value
    if issubclass(tv, datetime.date | datetime.time):  # datetime is a date
        return lambda v: v.isoformat()
    if issubclass(tv, uuid.UUID | decimal.Decimal):
        return str
    for base in (bool, int, float, str):  # subclasses of the JSON types: their base value
        if issubclass(tv, base):
            return base
    if issubclass(tv, Mapping):
        return dict
    if issubclass(tv, list | tuple):
        return list

    def refuse(value: Any) -> Any:
        msg = (
            f"is {_article(tv.__name__)} {tv.__name__}, which has no JSON form; convert it, "
            f"or give {tv.__name__} one with ambient_runs.register_json_form"
        )
        raise _NoForm(msg)

    return refuse


#: How each non-JSON class becomes JSON, worked out once per class (cleared on registration).
_FORMS: dict[type[Any], Callable[[Any], Any]] = {}


def wire_form(value: Any) -> Any:
    """
    Return *value*'s JSON form like `json_form`; JSON containers are passed through unchecked.

    A dict or list is returned as it is, however deep, so that a large state costs
    nothing here; a caller that finds a non-JSON value inside falls back to
    `json_form`, which converts it (or names it).
    """
    return value if type(value) in _JSON_TYPES else json_form(value)


def check_json(wire: Any, source: Any = None) -> None:
    """
    Raise `InvalidEventError` unless *wire* can be written as JSON.

    *source* names the value in the message (default: *wire* itself).
    """
    try:
        text = _dumps(wire)
    except (TypeError, ValueError, RecursionError) as exc:
        _bad_json(wire if source is None else source, str(exc))
    if not text.isascii() and _SURROGATE.search(text):
        _bad_json(
            wire if source is None else source,
            "a string holds a lone surrogate, which UTF-8 cannot encode",
        )


_JSON_TYPES = frozenset({dict, list, str, int, float, bool, type(None)})


# --------------------------------------------------------------------------- structure


_MAX_ITEM_PROBLEMS = 100
"""The most bad items of one array a parse reports; the rest are counted in one problem."""


_UNLISTED = "more invalid items, not listed"


def problem_count(problems: Sequence[str]) -> int:
    """
    How many problems *problems* stand for: a line saying ``"<n> more invalid
    items, not listed"`` (past `_MAX_ITEM_PROBLEMS` in one array) counts as *n*.
    """
    total = 0
    for problem in problems:
        count, _, rest = problem.rpartition(": ")[2].partition(" ")
        total += int(count) if rest == _UNLISTED and count.isdigit() else 1
    return total


class _Problem(ValueError):
    """A structuring failure whose message is already what the user should read."""


def _expect(what: str, value: object) -> NoReturn:
    shown = "null" if value is None else type(value).__name__
    msg = f"expected {what}, got {shown}"
    raise _Problem(msg)


def _structure_str(value: object, _: object) -> str:
    if not isinstance(value, str):
        _expect("a string", value)
    return value


def _structure_int(value: object, _: object) -> int:
    if type(value) is not int:
        _expect("an integer", value)
    return value


def _structure_bool(value: object, _: object) -> bool:
    if not isinstance(value, bool):
        _expect("a boolean", value)
    return value


def _structure_object(value: object, _: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        _expect("an object", value)
    return value


def _structure_tuple_factory(tp: Any) -> Callable[[Any, Any], tuple[Any, ...]]:
    (item_type, _) = get_args(tp)

    def structure(value: Any, _: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            _expect("an array", value)
        hook = _CONVERTER.get_structure_hook(item_type)
        items: list[Any] = []
        errors: list[Exception] = []
        unlisted = 0
        for index, item in enumerate(value):
            try:
                items.append(hook(item, item_type))
            except Exception as exc:
                from cattrs.errors import IterableValidationNote

                if len(errors) < _MAX_ITEM_PROBLEMS:
                    exc.add_note(IterableValidationNote(f"@ index {index}", index, item_type))
                    errors.append(exc)
                else:  # counted, not kept: 300,000 kept errors cost seconds of GC
                    unlisted += 1
        if errors:
            from cattrs.errors import IterableValidationError

            if unlisted:
                errors.append(_Problem(f"{unlisted} {_UNLISTED}"))
            msg = "invalid items"
            raise IterableValidationError(msg, errors, tp)
        return tuple(items)

    return structure


def _tagged(tag: str, classes: Mapping[str, type[Any]], what: str) -> Any:
    names = ", ".join(repr(k) for k in classes)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            _expect(f"{what} (an object)", value)
        kind = value.get(tag)
        cls = classes.get(kind) if isinstance(kind, str) else None
        if cls is None:
            msg = f"unknown {what} {tag} {kind!r}; expected one of {names}"
            raise _Problem(msg)
        return _CONVERTER.structure(value, cls)

    return structure


def _optional(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda value, tp: None if value is None else hook(value, tp)


def _structure_content(value: Any, _: Any) -> Any:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        _expect("a string or an array of content parts", value)
    return _CONVERTER.structure(value, tuple[ev.ContentPart, ...])


#: Optional fields where ``null`` is read as "absent". The official client converts
#: exactly these legacy nulls (with a warning) and rejects a null anywhere else, so
#: `from_wire` does the same; a request body's own top-level fields are read as
#: leniently as the official Python server reads them.
_NULL_MEANS_ABSENT: frozenset[tuple[type[Any], str]] = frozenset(
    {
        (ev.ToolCallStartEvent, "parent_message_id"),
        (ev.ToolCallChunkEvent, "parent_message_id"),
        (ev.RunFinishedEvent, "outcome"),
        (ev.RunAgentInput, "protocol_version"),
        (ev.RunAgentInput, "parent_run_id"),
        (ev.RunAgentInput, "tools"),
        (ev.RunAgentInput, "context"),
        (ev.RunAgentInput, "resume"),
    }
)


def _strict_optional(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, tp: Any) -> Any:
        if value is None:
            msg = "null is not allowed here; omit the key instead (AG-UI optional fields are never null)"  # noqa: E501
            raise _Problem(msg)
        return hook(value, tp)

    return structure


def _structure_factory(cls: type[Any]) -> Any:
    from cattrs.gen import make_dict_structure_fn, override

    attrs.resolve_types(cls)
    overrides: dict[str, Any] = {}
    for a in attrs.fields(cls):
        if not a.init:
            continue
        kwargs: dict[str, Any] = {"rename": wire_name(a.name)}
        value_type = _strip_none(a.type)
        if a.default is None and value_type is not Any:
            # JSON-typed optionals (rawEvent, result, state, …) read null as absent.
            wrap = _optional if (cls, a.name) in _NULL_MEANS_ABSENT else _strict_optional
            kwargs["struct_hook"] = wrap(_CONVERTER.get_structure_hook(value_type))
        overrides[a.name] = override(**kwargs)
    inner = make_dict_structure_fn(cls, _CONVERTER, _cattrs_forbid_extra_keys=False, **overrides)
    # Discriminators are required on the wire, as zod's z.literal makes them:
    # REASONING_MESSAGE_START without role "reasoning", or a ToolCall without type
    # "function", is refused by the client. (Union members picked by their tag
    # match it already; this catches the tags nothing dispatches on.)
    tags = [
        (a, wire_name(a.name), a.default.value if isinstance(a.default, enum.Enum) else a.default)
        for a in attrs.fields(cls)
        if not a.init
    ]

    def structure(value: Any, tp: Any) -> Any:
        if not isinstance(value, dict):
            _expect("an object", value)
        for a, key, tag in tags:
            if value.get(key) != tag:
                shown = "missing" if key not in value else repr(value[key])
                problem = _Problem(f"expected {tag!r}, got {shown}")
                from cattrs.errors import AttributeValidationNote, ClassValidationError

                problem.add_note(AttributeValidationNote(f"@ attribute {a.name}", a.name, a.type))
                msg = f"While structuring {cls.__name__}"
                raise ClassValidationError(msg, [problem], cls)
        return inner(value, tp)

    return structure


_TAGGED_UNIONS: dict[Any, Any] = {
    ev.Message: _tagged("role", ev.MESSAGE_CLASSES, "message"),
    ev.ContentPart: _tagged("type", ev.PART_CLASSES, "content part"),
    ev.PartSource: _tagged("type", ev.SOURCE_CLASSES, "source"),
    ev.JsonPatchOperation: _tagged("op", ev.OPERATION_CLASSES, "patch operation"),
    ev.RunFinishedOutcome: _tagged("type", ev.RUN_OUTCOME_CLASSES, "run outcome"),
    ev.SubagentFinishedOutcome: _tagged("type", ev.SUBAGENT_OUTCOME_CLASSES, "subagent outcome"),
    str | tuple[ev.ContentPart, ...]: _structure_content,
}

_CONVERTER.register_structure_hook(str, _structure_str)
_CONVERTER.register_structure_hook(int, _structure_int)
_CONVERTER.register_structure_hook(bool, _structure_bool)
_CONVERTER.register_structure_hook_func(lambda tp: tp is Any, lambda value, _: value)
_CONVERTER.register_structure_hook_func(_is_json_object, _structure_object)
_CONVERTER.register_structure_hook_factory(_is_tuple, _structure_tuple_factory)
_CONVERTER.register_structure_hook_factory(attrs.has, _structure_factory)
for _union, _hook in _TAGGED_UNIONS.items():
    _CONVERTER.register_unstructure_hook(
        _union,
        _unstructure_content if _hook is _structure_content else _unstructure_by_class,
    )
    _CONVERTER.register_structure_hook(_union, _hook)
    _CONVERTER.register_structure_hook(_union | None, _optional(_hook))


def _is_optional(tp: Any) -> bool:
    if get_origin(tp) not in (typing.Union, types.UnionType):
        return False
    args = get_args(tp)
    return type(None) in args and len(args) == 2


def _optional_factory(tp: Any) -> Any:
    (inner,) = (a for a in get_args(tp) if a is not type(None))
    return _optional(_CONVERTER.get_structure_hook(inner))


_CONVERTER.register_structure_hook_factory(_is_optional, _optional_factory)


def _literal_factory(tp: Any) -> Any:
    allowed = get_args(tp)
    names = " or ".join(repr(a) for a in allowed)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, str):
            _expect(names, value)
        if value not in allowed:
            msg = f"expected {names}, got {value!r}"
            raise _Problem(msg)
        return value

    return structure


def _is_literal(tp: Any) -> bool:
    origin: Any = get_origin(tp)
    return origin is Literal


_CONVERTER.register_structure_hook_factory(_is_literal, _literal_factory)


# --------------------------------------------------------------------------- state types

#: Structures a client's JSON state into the run's state type: the inverse of
#: `json_form` (camelCase keys back to field names, ISO 8601 text back to dates, …).
#: Strict about JSON types, as the input's own fields are; tolerant of unknown keys.
_STATE = cast("Converter", _Deferred("_STATE", detailed_validation=True, forbid_extra_keys=False))


def _structure_float(value: object, _: object) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    _expect("a number", value)


def _parsed(what: str, parse: Callable[[str], Any]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, str):
            _expect(what, value)
        try:
            return parse(value)
        except ValueError:
            msg = f"expected {what}, got {value[:60]!r}"
            raise _Problem(msg) from None

    return structure


def _structure_decimal(value: Any, _: Any) -> decimal.Decimal:
    if type(value) is bool or not isinstance(value, str | int | float):
        _expect("a decimal number (a string or a number)", value)
    try:
        return decimal.Decimal(value if isinstance(value, str) else str(value))
    except decimal.InvalidOperation:
        msg = f"expected a decimal number, got {value!r}"
        raise _Problem(msg) from None


def _is_pydantic_model(tp: Any) -> bool:
    """Duck-typed: a class with pydantic v2's ``model_validate`` and ``model_dump``."""
    return (
        isinstance(tp, type)
        and callable(getattr(tp, "model_validate", None))
        and callable(getattr(tp, "model_dump", None))
    )


class _KeyNote(str):
    """The note on a problem under key *key* of a mapping: the path names the key as it is."""

    key: str

    def __new__(cls, key: str) -> _KeyNote:
        note = super().__new__(cls, f"@ key {key}")
        note.key = key
        return note


class _Located(ValueError):
    """Problems already located below the value being structured: ``(json path, problem)``."""

    def __init__(self, located: Sequence[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{where}: {what}" for where, what in located))
        self.located = tuple(located)


def _structure_pydantic(value: Any, tp: Any) -> Any:
    try:
        return tp.model_validate(value)
    except Exception as exc:
        errors = getattr(exc, "errors", None)
        if not callable(errors):
            raise
        located = []
        for error in errors():
            where = "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
            )
            located.append((where, str(error.get("msg", "invalid"))))
        raise _Located(located) from None


def _structure_state_class_factory(cls: type[Any]) -> Any:
    from cattrs.gen import make_dict_structure_fn, override

    names = [f.name for f in _fields(cls) if f.init]
    overrides: dict[str, Any] = {name: override(rename=wire_name(name)) for name in names}
    inner = make_dict_structure_fn(cls, _STATE, _cattrs_forbid_extra_keys=False, **overrides)

    def structure(value: Any, tp: Any) -> Any:
        if not isinstance(value, dict):
            _expect("an object", value)
        return inner(value, tp)

    return structure


def _is_sequence_type(tp: Any) -> bool:
    origin = get_origin(tp) or tp
    return origin in (list, tuple, set, frozenset, Sequence) and tp is not tuple


def _structure_sequence_factory(tp: Any) -> Any:
    origin = get_origin(tp) or tp
    args = get_args(tp)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        inner = _STATE.get_structure_hook(tp)  # a fixed-length tuple: cattrs' own

        def fixed(value: Any, _: Any) -> Any:
            if not isinstance(value, list):
                _expect("an array", value)
            return inner(value, tp)

        return fixed
    item = args[0] if args else Any
    hook = _STATE.get_structure_hook(item)
    build: Any = list if origin is Sequence else origin

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list):
            _expect("an array", value)
        items, errors = [], []
        for index, element in enumerate(value):
            try:
                items.append(hook(element, item))
            except Exception as exc:
                from cattrs.errors import IterableValidationNote

                exc.add_note(IterableValidationNote(f"@ index {index}", index, item))
                errors.append(exc)
        if errors:
            from cattrs.errors import IterableValidationError

            msg = "invalid items"
            raise IterableValidationError(msg, errors, tp)
        return build(items)

    return structure


def _is_mapping_type(tp: Any) -> bool:
    origin = get_origin(tp) or tp
    return origin in (dict, Mapping) and not _is_json_object(tp)


def _structure_mapping_factory(tp: Any) -> Any:
    args = get_args(tp)
    value_type = args[1] if len(args) == 2 else Any
    hook = _STATE.get_structure_hook(value_type)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            _expect("an object", value)
        out, errors = {}, []
        for key, element in value.items():
            try:
                out[key] = hook(element, value_type)
            except Exception as exc:
                exc.add_note(_KeyNote(key))
                errors.append(exc)
        if errors:
            from cattrs.errors import ClassValidationError

            msg = "invalid values"
            raise ClassValidationError(msg, errors, dict)
        return out

    return structure


def _structure_typeddict_factory(tp: Any) -> Any:
    hints = typing.get_type_hints(tp)
    required = tp.__required_keys__
    hooks = {key: (_STATE.get_structure_hook(hint), hint) for key, hint in hints.items()}

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            _expect("an object", value)
        out, errors = {}, []
        for key, (hook, hint) in hooks.items():
            problem: Exception
            if key not in value:
                if key not in required:
                    continue
                problem = KeyError(key)
            else:
                try:
                    out[key] = hook(value[key], hint)
                    continue
                except Exception as exc:
                    problem = exc
            problem.add_note(_KeyNote(key))
            errors.append(problem)
        if errors:
            from cattrs.errors import ClassValidationError

            msg = f"While structuring {tp.__name__}"
            raise ClassValidationError(msg, errors, tp)
        return out

    return structure


_STATE.register_structure_hook(str, _structure_str)
_STATE.register_structure_hook(int, _structure_int)
_STATE.register_structure_hook(float, _structure_float)
_STATE.register_structure_hook(bool, _structure_bool)
_STATE.register_structure_hook_func(lambda tp: tp is Any, lambda value, _: value)
_STATE.register_structure_hook_func(_is_json_object, _structure_object)
_ISO = datetime.datetime.fromisoformat
_STATE.register_structure_hook(datetime.datetime, _parsed("an ISO 8601 date and time", _ISO))
_STATE.register_structure_hook(
    datetime.date, _parsed("an ISO 8601 date", datetime.date.fromisoformat)
)
_STATE.register_structure_hook(
    datetime.time, _parsed("an ISO 8601 time", datetime.time.fromisoformat)
)
_STATE.register_structure_hook(uuid.UUID, _parsed("a UUID", uuid.UUID))
_STATE.register_structure_hook(decimal.Decimal, _structure_decimal)
_STATE.register_structure_hook_factory(_is_sequence_type, _structure_sequence_factory)
_STATE.register_structure_hook_factory(_is_mapping_type, _structure_mapping_factory)
_STATE.register_structure_hook_factory(_has_fields, _structure_state_class_factory)
_STATE.register_structure_hook_func(_is_pydantic_model, _structure_pydantic)
_STATE.register_structure_hook_factory(typing.is_typeddict, _structure_typeddict_factory)


def is_state_type(tp: Any) -> bool:
    """Whether *tp* is a type `structure_state` converts a client's state into."""
    return (
        tp is Any
        or tp is dict
        or _is_mapping_type(tp)
        or _is_json_object(tp)
        or _has_fields(tp)
        or _is_pydantic_model(tp)
        or typing.is_typeddict(tp)
        or tp in _LOADERS
    )


def structure_state(data: Any, tp: Any) -> Any:
    """
    Convert *data*, a client's JSON state, into the state type *tp*.

    The inverse of `json_form`: an attrs class or dataclass from an object with its
    fields' wire names (camelCase), a TypedDict from its keys, a pydantic model
    through its ``model_validate``, a dict as it is; ``datetime``/``date``/``time``
    from ISO 8601 text, ``UUID`` and ``Decimal`` from text, enums from their value,
    tuples and lists from arrays, a `register_json_form` type through its *load*.
    Keys the type does not know are dropped.

    Raises:
        InvalidInputError: *data* does not convert; every bad field is named by its
            path under ``$.state``.
    """
    if tp is Any or tp is dict:
        return data
    try:
        return _STATE.structure(data, tp)
    except RecursionError:
        msg = "invalid state"
        raise InvalidInputError(msg, ["$.state: nesting exceeds the recursion limit"]) from None
    except Exception as exc:
        name = getattr(tp, "__name__", repr(tp))
        problems = _problems(exc, "$.state") or [f"$.state: {exc}"]
        msg = f"the client's state is not a {name}"
        raise InvalidInputError(msg, problems) from None


# --------------------------------------------------------------------------- errors


def _problems(exc: BaseException, path: str) -> list[str]:
    """Flatten a cattrs exception tree into ``"<json path>: <problem>"`` lines."""
    from cattrs.errors import ClassValidationError, IterableValidationError

    if isinstance(exc, ClassValidationError | IterableValidationError):
        found: list[str] = []
        for sub in exc.exceptions:
            found.extend(_problems(sub, _step(sub, path)))
        return found
    if isinstance(exc, KeyError):
        return [f"{path}: required, missing"]
    if isinstance(exc, _Located):
        return [f"{path}{where}: {what}" for where, what in exc.located]
    if isinstance(exc, InvalidEventError):
        # A constructor's validator: "Class.field must be …, got …".
        where, _, detail = str(exc).partition(" must be ")
        _, _, field = where.partition(".")
        if detail and field:
            return [f"{path}.{wire_name(field)}: must be {detail}"]
    return [f"{path}: {exc}"]


def _step(exc: BaseException, path: str) -> str:
    from cattrs.errors import AttributeValidationNote, IterableValidationNote

    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, _KeyNote):
            return f"{path}.{note.key}"
        if isinstance(note, AttributeValidationNote):
            return f"{path}.{wire_name(note.name)}"
        if isinstance(note, IterableValidationNote):
            return f"{path}[{note.index}]"
    return path


def _raise_input_error(what: str, exc: BaseException) -> NoReturn:
    problems = _problems(exc, "$") or [f"$: {exc}"]
    raise InvalidInputError(what, problems) from None


def _structure(data: object, cls: type[T], what: str) -> T:
    try:
        return _CONVERTER.structure(data, cls)
    except RecursionError:
        msg = f"{what}: nested too deeply"
        raise InvalidInputError(msg, ["$: nesting exceeds the recursion limit"]) from None
    except Exception as exc:
        _raise_input_error(what, exc)


def parse_input(data: object) -> ev.RunAgentInput:
    """
    Build a `RunAgentInput` from its wire form.

    Raises:
        InvalidInputError: Lists every bad field by JSON path.

    .. versionadded:: 0.1.0
    """
    if not isinstance(data, dict):
        msg = "invalid RunAgentInput"
        raise InvalidInputError(msg, [f"$: expected a JSON object, got {_json_kind(data)}"])
    if "messages" in data:
        return _structure(data, ev.RunAgentInput, "invalid RunAgentInput")
    # Required on the wire, though the class defaults it for convenience: report it
    # along with whatever else is wrong.
    missing = "$.messages: required, missing"
    what = "invalid RunAgentInput"
    try:
        _structure({**data, "messages": []}, ev.RunAgentInput, what)
    except InvalidInputError as exc:
        raise InvalidInputError(what, [missing, *exc.problems]) from None
    raise InvalidInputError(what, [missing])


def parse_input_json(data: bytes | bytearray | str) -> ev.RunAgentInput:
    """
    Parse a request body into a `RunAgentInput`.

    Raises:
        InvalidJSONError: The body is not UTF-8 JSON (a subclass of InvalidInputError).
        InvalidInputError: The JSON does not fit the schema.

    .. versionadded:: 0.1.0
    """
    try:
        # Decoded here, strictly: json.loads would also take UTF-16/32 and a BOM.
        text = data.decode() if isinstance(data, bytes | bytearray) else data
        value = json.loads(text)
    except RecursionError:
        msg = "invalid JSON"
        raise InvalidJSONError(msg, ["$: nesting exceeds the recursion limit"]) from None
    except (ValueError, TypeError) as exc:
        msg = "invalid JSON"
        raise InvalidJSONError(msg, [f"$: {exc}"]) from None
    why = _unwritable(value)
    if why is not None:
        msg = "invalid JSON"
        raise InvalidJSONError(msg, [f"$: {why}"])
    return parse_input(value)


def _unwritable(value: object) -> str | None:
    """
    Say why parsed JSON *value* could not be written back as JSON, or return None.

    json.loads accepts ``NaN`` and ``Infinity``, reads ``1e400`` as infinity and
    ``"\\ud800"`` as a lone surrogate; none of them can go back on the wire (the
    input is echoed in RUN_STARTED), and the official models reject surrogates.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return "a string holds a lone surrogate, which UTF-8 cannot encode"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{item!r} is not a JSON number (NaN, Infinity or out of range)"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    for kind, name in kinds.items():
        if isinstance(value, kind):
            return name
    return "a number" if isinstance(value, int | float) else type(value).__name__


def from_wire(data: object) -> Any:
    """
    Build an event from its wire form, picking the class by ``type``.

    Unknown keys are ignored.

    Raises:
        InvalidInputError: The dict is not an event, names an unknown type, or has
            bad fields (each listed by JSON path).

    .. versionadded:: 0.1.0
    """
    if not isinstance(data, dict):
        msg = "invalid event"
        raise InvalidInputError(msg, [f"$: expected a JSON object, got {_json_kind(data)}"])
    kind = data.get("type")
    cls = ev.EVENT_CLASSES.get(kind) if isinstance(kind, str) else None  # type: ignore[call-overload]
    if cls is None:
        msg = "invalid event"
        raise InvalidInputError(
            msg, [f"$.type: expected one of the 31 AG-UI event types, got {kind!r}"]
        )
    return _structure(data, cls, f"invalid {kind} event")


def _article(noun: str) -> str:
    """The indefinite article for *noun*: ``an Opaque``, ``a set``."""
    return "an" if noun[:1] in tuple("aeiouAEIOU") else "a"
