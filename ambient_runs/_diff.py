"""JSON differ and snapshot/delta policy for AG-UI state and activity content.

AG-UI publishes state as a ``STATE_SNAPSHOT`` and then RFC 6902 ``STATE_DELTA``
patches (activity content the same way).  The official client applies every delta
with ``fast-json-patch`` ``applyPatch(doc, delta, validate=true, mutate=false)``;
a patch that fails to apply is warned about and *dropped*, so the client silently
diverges.  This module therefore produces patches that apply under both
``jsonpatch.apply_patch`` (Python) and fast-json-patch, and reproduce the new value
exactly, types included (``true`` is not ``1``, and ``1`` is not ``1.0``).

Equality.  Python's ``==`` is C-speed but type-lax (``1 == 1.0 == True`` and
``0.0 == -0.0``), so it is only used to *locate* differences.  Type-exact
equality of subtrees is decided by comparing pickles (protocol 5 in "fast" mode:
no memo, so the bytes depend on values, types and order only, not on identity):
still C-speed, and different for every pair that ``json.dumps`` tells apart.
Siblings are compared in batches of :data:`_CHUNK` (one pickle per side per
batch).  A batch that differs is re-examined element by element, and a pair
that ``==`` calls equal but whose pickles differ (a type change, a NaN payload,
a different key order) is descended into, which is exact.  In a bare
:func:`diff`, identical objects (``old is new``, at any depth) are never examined.

Tracker caching.  A :class:`StateTracker`'s private copy is never mutated, so
the pickles of its subtrees are cached by object identity (each cache entry
holds its objects, so ids cannot be reused while it lives): per publish only
the caller's value is pickled, about one C-speed pass over it.  Containers that
were rebuilt on the path to a change ("spine" containers) are descended into on
the next publish instead of being pickled whole, so their unchanged children
keep hitting the cache.  The cache costs about one pickle of the state in memory.
A leaf that changes alone, publish after publish, is checked with one pickle of
the caller's value and no walk (``_KnownLeaf``); once that has held a few times,
the pickler's memo is seeded with the value's strings, so it writes each as a
reference to the object instead of its text.

Lists.  Trim the longest common prefix and suffix, then pair the middle
elements positionally (recursing into pairs), then ``remove`` the extra old ones
from the highest index down or ``add`` the extra new ones in ascending order
(``/-`` when appending at the end).  While trimming, a single differing element
whose neighbour matches again is taken as changed in place (patched where it
is) instead of ending the trim, so an insert at the front plus an edit further
down stays two operations.  Append, pop, a single change and an insert at the
front each cost one operation.  No ``move``/``copy``: a reordering is patched
element by element (and the tracker falls back to a snapshot when that is
bigger).

fast-json-patch refuses (TypeError) any path through a ``__proto__`` token or a
``constructor/prototype`` pair.  A change under such a key is expressed as a
``replace`` of the nearest safe enclosing object (``""`` at the root).

Aliasing.  Operation values are always fresh deep copies: they share nothing
with ``old``, ``new`` or a tracker's private state.  :class:`StateTracker`
snapshots are fresh deep copies too.  Callers may mutate their inputs and
outputs freely afterwards.

Inputs are JSON data (:data:`JSONLike` for type checkers): ``dict`` with ``str``
keys, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``.  Other values
(tuples, subclasses of the containers) are treated as opaque leaves: compared as
wholes and replaced wholesale when they differ.  Nesting depth is bounded by
the interpreter's recursion limit (about 300 levels), as for ``json.dumps``.
"""

from __future__ import annotations

import copy
import json
import marshal
import math
import pickle
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import is_, is_not, ne
from typing import Any, Final, Literal, TypeAlias, TypeVar, cast

import jsonpatch

__all__ = (
    "JSONLike",
    "JSONValue",
    "StateTracker",
    "deep_copy_json",
    "diff",
    "escape_pointer",
    "patched",
)

JSONValue: TypeAlias = dict[str, "JSONValue"] | list["JSONValue"] | str | int | float | bool | None
"""A JSON document as Python data: what ``json.loads`` returns."""

JSONLike: TypeAlias = (
    Mapping[str, "JSONLike"] | Sequence["JSONLike"] | str | int | float | bool | None
)
"""What the functions accept: like :data:`JSONValue`, but covariant, so that a
``dict[str, int]`` or a ``list[dict[str, str]]`` type-checks.  At runtime the
containers are expected to be ``dict`` and ``list`` (anything else is an opaque
value, see the module docstring)."""

_J = TypeVar("_J", bound=JSONLike)

Operation: TypeAlias = dict[str, Any]
"""One RFC 6902 operation in wire form, e.g. ``{"op": "add", "path": "/a", "value": 1}``."""

Publication: TypeAlias = (
    tuple[Literal["snapshot"], JSONValue] | tuple[Literal["delta"], list[Operation]] | None
)
"""What :meth:`StateTracker.publish` returns."""

_CHUNK: Final = 64
"""Siblings per batched type-exact comparison; also the length from which a
container that ``==`` finds equal is descended into rather than pickled whole."""

_SCALARS: Final = frozenset((str, int, float, bool, type(None)))
_MISSING: Final[Any] = object()

_encode: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
"""``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, prebuilt."""

_encode_str: Final = json.encoder.encode_basestring  # what _encode uses for strings


def _json_len(value: Any) -> int:
    """``len(_encode(value))``, without building an encoder for scalars."""
    tv = type(value)
    if tv is str:
        return len(_encode_str(value))
    if tv is int:
        return len(int.__repr__(value))
    if tv is float and value - value == 0.0:  # finite
        return len(float.__repr__(value))
    if tv is bool:
        return 4 if value else 5
    if value is None:
        return 4
    return len(_encode(value))


def _op_overhead(op: str, with_value: bool) -> int:
    """Characters an operation's compact JSON adds beyond its path and value JSON."""
    if with_value:
        return len(_encode({"op": op, "path": "", "value": 0})) - len('""') - len("0")
    return len(_encode({"op": op, "path": ""})) - len('""')


_ADD_CHARS: Final = _op_overhead("add", True)
_REPLACE_CHARS: Final = _op_overhead("replace", True)
_REMOVE_CHARS: Final = _op_overhead("remove", False)


def escape_pointer(token: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901): ``~`` → ``~0``, ``/`` → ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def patched(document: Any, patch: list[Any], failed: Any) -> Any:
    """
    *document* with the RFC 6902 *patch* applied (a copy), or *failed* if it does not apply.

    What the client's reducer does with a patch it cannot apply: it warns and
    keeps what it had (state, an activity's content).
    """
    try:
        return jsonpatch.apply_patch(copy.deepcopy(document), patch)
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        TypeError,
        KeyError,
        IndexError,
        ValueError,
    ):
        return failed


def _key_token(key: object) -> str:
    if not isinstance(key, str):
        msg = f"JSON object keys must be str, not {type(key).__name__}: {key!r}"
        raise TypeError(msg)
    return key.replace("~", "~0").replace("/", "~1")


def _unsafe(token: str, parent_token: str | None) -> bool:
    """Whether fast-json-patch bans a path that steps through ``token`` (its prototype guard)."""
    return token == "__proto__" or (token == "prototype" and parent_token == "constructor")


def _copy_py(value: Any) -> Any:
    tv = type(value)
    if tv in _SCALARS:
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                msg = f"JSON object keys must be str, not {type(k).__name__}: {k!r}"
                raise TypeError(msg)
            out[str.__str__(k)] = _copy_py(v)
        return out
    if isinstance(value, list):
        return [_copy_py(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy_py(v) for v in value)
    if isinstance(value, bool):  # pragma: no cover - bool cannot be subclassed
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    msg = f"not JSON data: {type(value).__name__}"
    raise TypeError(msg)


def deep_copy_json(value: _J) -> _J:
    """Return a deep copy of JSON data that shares no mutable container with ``value``.

    Uses a ``marshal`` round trip (C speed, several times faster than
    ``copy.deepcopy``); types are kept exactly (``True`` stays a bool, ``1.0`` a
    float).  Like ``copy.deepcopy``, a container referenced twice inside ``value``
    is referenced twice inside the copy.  Subclasses of ``dict``/``list``/``str``/
    ``int``/``float`` (which marshal refuses) take a slower path that converts them
    to the base types, and a non-``str`` key or a non-JSON value raises TypeError
    there.  The marshal path trusts that ``value`` is JSON data.
    """
    data: Any = value
    if type(data) in _SCALARS:
        return value
    copied: _J
    try:
        copied = marshal.loads(marshal.dumps(data, 4))
    except ValueError:  # a subclass, or something marshal cannot write
        copied = _copy_py(data)
    return copied


def _two_copies(value: Any) -> tuple[Any, Any]:
    """Two independent deep copies, for the price of one marshal.dumps."""
    if type(value) in _SCALARS:
        return value, value
    try:
        data = marshal.dumps(value, 4)
    except ValueError:
        first = _copy_py(value)
        return first, _copy_py(first)
    return marshal.loads(data), marshal.loads(data)


def _copy(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    return deep_copy_json(value)


class _Sink:
    """A write-only file for the pickler that keeps the bytes objects it is given."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: Any) -> None:
        # The pickler hands over its own output buffer (no copy needed); copy anything
        # else, which may be a view of memory that is about to be reused.
        self.parts.append(data if type(data) is bytes else bytes(data))


def _make_dumper(
    protocol: int = 5, memo: dict[int, tuple[int, Any]] | None = None
) -> Callable[[object], bytes]:
    """
    A reusable pickler in fast mode: bytes depend on values, types and order only.

    *memo* (index → ``(index, obj)``) seeds its memo: each of those objects is
    written as a reference to its index. Fast mode adds nothing to the memo, so
    only immutable objects belong there (`_KnownLeaf`'s strings).
    """
    sink = _Sink()
    parts = sink.parts
    pickler = pickle.Pickler(sink, protocol=protocol)
    pickler.fast = True  # nothing memoised: only a seeded object's identity shows in the bytes
    if memo is not None:
        pickler.memo = memo

    def dump(obj: object) -> bytes:
        parts.clear()
        try:
            pickler.dump(obj)
        except (pickle.PicklingError, TypeError, ValueError, AttributeError, RecursionError):
            return b""  # a real pickle is never empty: callers treat b"" as "differs"
        return parts[0] if len(parts) == 1 else b"".join(parts)

    return dump


def _alike(a: Any, b: Any) -> bool:
    return a is b or a == b


class _PickleCache:
    """Pickles of a tracker's private subtrees, keyed by the identities of the objects.

    Private subtrees are never mutated, and each entry holds strong references to
    its objects so their ids cannot be reused while it lives: an identity hit is a
    content hit.  Entries not used during a publish are dropped after it.
    """

    __slots__ = ("_new", "_old")

    def __init__(self) -> None:
        self._old: dict[tuple[int, ...], tuple[list[Any], bytes]] = {}
        self._new: dict[tuple[int, ...], tuple[list[Any], bytes]] = {}

    def get(
        self,
        objs: list[Any],
        dump: Callable[[object], bytes],
        key: tuple[int, ...] | None = None,
    ) -> bytes:
        """The pickle of ``objs``; ``key``, when given, must be ``tuple(map(id, objs))``."""
        if key is None:
            key = tuple(map(id, objs))
        hit = self._new.get(key)
        if hit is None:
            hit = self._old.get(key)
            if hit is None:
                hit = (objs, dump(objs))
            self._new[key] = hit
        return hit[1]

    def rotate(self) -> None:
        self._old = self._new
        self._new = {}


class _Differ:
    """One diff computation: emits operations and builds the merged value.

    The merged value is ``new``'s content built from ``old``'s subtrees wherever
    they are type-exactly equal (structural sharing), and from copies of ``new``
    elsewhere.  ``measure`` also computes the patch's compact-JSON length and the
    change in the compact-JSON length of the document.
    """

    __slots__ = (
        "cache",
        "calls",
        "delta",
        "dump",
        "measure",
        "new_spine",
        "op_chars",
        "ops",
        "private",
        "spine",
    )

    def __init__(
        self,
        *,
        measure: bool = False,
        private: bool = False,
        cache: _PickleCache | None = None,
        spine: set[int] | None = None,
        dump: Callable[[object], bytes] | None = None,
    ) -> None:
        self.ops: list[Operation] = []
        self.measure = measure
        self.private = private  # the merged value must not share with the ops
        self.cache = cache
        self.spine: set[int] = spine if spine is not None else set()
        self.new_spine: set[int] = set()
        self.dump = dump if dump is not None else _make_dumper()
        self.calls = 0
        self.delta = 0  # change of len(_encode(document))
        self.op_chars = 0  # sum of len(_encode(op)) over self.ops

    # -- type-exact comparison -------------------------------------------------

    def _same_batch(self, olds: list[Any], news: list[Any]) -> bool:
        """Whether two equally long lists of values are type-exactly equal (pickles)."""
        if not news:
            return True
        dump = self.dump
        new_bytes = dump(news)
        if not new_bytes:
            return False
        cache = self.cache
        old_bytes = dump(olds) if cache is None else cache.get(olds, dump)
        return new_bytes == old_bytes

    def _differing(self, olds: list[Any], news: list[Any]) -> list[int]:
        """Positions where two lists whose batch comparison failed differ type-exactly:
        ``==`` finds the plain changes, one more batch clears the rest, and only if
        that fails too are they compared one by one."""
        alike: list[int] = []
        differ: list[int] = []
        for i in range(len(olds)):
            (alike if _alike(olds[i], news[i]) else differ).append(i)
        if not self._same_batch([olds[i] for i in alike], [news[i] for i in alike]):
            differ.extend(i for i in alike if not self._same_one(olds[i], news[i]))
            differ.sort()
        return differ

    def _same_one(self, a: Any, b: Any) -> bool:
        """Type-exact equality of ``a`` and ``b``, knowing that ``a == b``."""
        ta = type(a)
        if ta is not type(b):
            return False
        if ta is float:
            return a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b)
        if ta is str or ta is int or ta is bool or a is None:
            return True
        return self._same_batch([a], [b])

    def _descend_first(self, a: Any, b: Any) -> bool:
        """Whether to compare ``a`` and ``b`` by descending rather than by one pickle."""
        ta = type(a)
        return (
            (ta is dict or ta is list)
            and type(b) is ta
            and (len(a) >= _CHUNK or id(a) in self.spine)
        )

    # -- operations ------------------------------------------------------------

    def _new_value(self, value: Any, op_value: Any) -> Any:
        """The value to keep in the merged document for ``value`` put into an op."""
        if self.private and type(value) not in _SCALARS:
            return deep_copy_json(value)
        return op_value

    def _replace(self, path: str, old: Any, new: Any) -> Any:
        value = _copy(new)
        self.ops.append({"op": "replace", "path": path, "value": value})
        if self.measure:
            size = _json_len(value)
            self.op_chars += _REPLACE_CHARS + _json_len(path) + size
            self.delta += size - _json_len(old)
        return self._new_value(new, value)

    def _add(self, path: str, new: Any, key: str | None) -> Any:
        value = _copy(new)
        self.ops.append({"op": "add", "path": path, "value": value})
        if self.measure:
            size = _json_len(value)
            self.op_chars += _ADD_CHARS + _json_len(path) + size
            self.delta += size if key is None else size + _json_len(key) + 1
        return self._new_value(new, value)

    def _remove(self, path: str, old: Any, key: str | None) -> None:
        self.ops.append({"op": "remove", "path": path})
        if self.measure:
            self.op_chars += _REMOVE_CHARS + _json_len(path)
            size = _json_len(old)
            self.delta -= size if key is None else size + _json_len(key) + 1

    # -- structure ---------------------------------------------------------------

    def value(self, old: Any, new: Any, path: str, token: str | None) -> Any:
        """Emit operations turning ``old`` at ``path`` into ``new``; return the merged value."""
        if old is new:
            return old
        to = type(old)
        if to is type(new):
            if to is dict:
                return self._dict(old, new, path, token)
            if to is list:
                return self._list(old, new, path)
        if old == new:
            if self._same_one(old, new):
                return old
        elif to is float and type(new) is float and old != old and new != new:
            return old  # NaN is NaN (json.dumps writes "NaN" for every NaN)
        return self._replace(path, old, new)

    def _dict(self, old: dict[str, Any], new: dict[str, Any], path: str, token: str | None) -> Any:
        self.calls += 1
        calls = self.calls
        ops = self.ops
        mark, delta_mark, chars_mark = len(ops), self.delta, self.op_chars
        prefix = path + "/"
        changed: dict[str, Any] = {}
        unit_keys: list[str] = []
        unit_old: list[Any] = []
        unit_new: list[Any] = []
        added = 0
        descend_first = self._descend_first
        for key, b in new.items():
            a = old.get(key, _MISSING)
            if a is b:
                continue
            if a is _MISSING:
                tok = _key_token(key)
                if _unsafe(tok, token):
                    return self._rollback(path, old, new, mark, delta_mark, chars_mark)
                changed[key] = self._add(prefix + tok, b, key)
                added += 1
            elif descend_first(a, b):
                tok = _key_token(key)
                merged = self.value(a, b, prefix + tok, tok)
                if merged is not a:
                    if _unsafe(tok, token):
                        return self._rollback(path, old, new, mark, delta_mark, chars_mark)
                    changed[key] = merged
            else:
                unit_keys.append(key)
                unit_old.append(a)
                unit_new.append(b)
        removed = len(old) - (len(new) - added)
        if removed:
            for key, a in old.items():
                if key not in new:
                    tok = _key_token(key)
                    if _unsafe(tok, token):
                        return self._rollback(path, old, new, mark, delta_mark, chars_mark)
                    self._remove(prefix + tok, a, key)
        for start in range(0, len(unit_keys), _CHUNK):
            olds = unit_old[start : start + _CHUNK]
            news = unit_new[start : start + _CHUNK]
            if self._same_batch(olds, news):
                continue
            for i in self._differing(olds, news):
                a, b = olds[i], news[i]
                key = unit_keys[start + i]
                tok = _key_token(key)
                if _unsafe(tok, token):
                    return self._rollback(path, old, new, mark, delta_mark, chars_mark)
                merged = self.value(a, b, prefix + tok, tok)
                if merged is not a:
                    changed[key] = merged
        if self.measure and (added or removed):
            self.delta += max(len(new) - 1, 0) - max(len(old) - 1, 0)
        if not changed and not removed and list(old) == list(new):
            result: Any = old
        else:
            get = changed.get
            result = {key: get(key, old.get(key)) for key in new}
        if self.calls > calls:  # a child was descended into: keep descending next time
            self.new_spine.add(id(result))
        return result

    def _rollback(
        self,
        path: str,
        old: Any,
        new: Any,
        mark: int,
        delta_mark: int,
        chars_mark: int,
    ) -> Any:
        """Drop this object's operations and replace it whole (fast-json-patch's key ban)."""
        del self.ops[mark:]
        self.delta = delta_mark
        self.op_chars = chars_mark
        return self._replace(path, old, new)

    def _run(
        self,
        old: list[Any],
        new: list[Any],
        lo: int,
        hi: int,
        shift: int,
        fixes: list[tuple[int, int]],
        backwards: bool,
    ) -> int:
        """Match ``old[lo:hi]`` against ``new[lo+shift:hi+shift]``; return how many
        elements match from the start of the run (from its end when ``backwards``).

        One batched pickle comparison settles the run in the common case; spine
        elements are left out of the batch and matched by ``==`` (then descended into
        as fixes).  When the batch differs, the run is matched element by element.
        """
        olds = old[lo:hi]
        news = new[lo + shift : hi + shift]
        count = hi - lo
        cache = self.cache
        if cache is None:  # a bare diff: skip what the two values share
            keep = list(map(is_not, olds, news))
            if any(keep) and not self._same_batch(
                list(compress(olds, keep)), list(compress(news, keep))
            ):
                return self._elementwise(olds, news, lo, shift, fixes, backwards)
            return count
        # A tracker: its private copy never shares a container with the caller's
        # value, so there is nothing to skip; the ids key the cache.
        ids = tuple(map(id, olds))
        spine = self.spine
        if spine.isdisjoint(ids):
            new_bytes = self.dump(news)
            if new_bytes and new_bytes == cache.get(olds, self.dump, ids):
                return count
            return self._elementwise(olds, news, lo, shift, fixes, backwards)
        loose = [k for k, i in enumerate(ids) if i in spine]
        keep = [True] * count
        for k in loose:
            keep[k] = False
        batch = list(compress(olds, keep))
        if batch:
            new_bytes = self.dump(list(compress(news, keep)))
            if not new_bytes or new_bytes != cache.get(
                batch, self.dump, tuple(compress(ids, keep))
            ):
                return self._elementwise(olds, news, lo, shift, fixes, backwards)
        if backwards:
            loose.reverse()
        for k in loose:
            a, b = olds[k], news[k]
            if type(a) is not type(b) or a != b:
                return count - 1 - k if backwards else k
            fixes.append((lo + k, lo + k + shift))
        return count

    def _elementwise(
        self,
        olds: list[Any],
        news: list[Any],
        lo: int,
        shift: int,
        fixes: list[tuple[int, int]],
        backwards: bool,
    ) -> int:
        """Match a run whose batch comparison failed: find where ``==`` first fails,
        confirm the ``==``-equal elements before it in one batch, and only if that
        fails too, go one element at a time (recording the fixes)."""
        count = len(olds)
        if backwards:
            k = count - 1
            while k >= 0 and _alike(olds[k], news[k]):
                k -= 1
            if self._same_batch(olds[k + 1 :], news[k + 1 :]):
                return count - 1 - k
        else:
            k = 0
            while k < count and _alike(olds[k], news[k]):
                k += 1
            if self._same_batch(olds[:k], news[:k]):
                return k
        match = self._match
        if backwards:
            k = count - 1
            while k >= 0 and match(olds[k], news[k], fixes, lo + k, lo + k + shift):
                k -= 1
            return count - 1 - k
        k = 0
        while k < count and match(olds[k], news[k], fixes, lo + k, lo + k + shift):
            k += 1
        return k

    def _match(self, a: Any, b: Any, fixes: list[tuple[int, int]], i: int, j: int) -> bool:
        """Whether old element ``i`` can stay at new index ``j``; records the ones that
        ``==`` matches but that need descending into (or operations inside them)."""
        if a is b:
            return True
        if self._descend_first(a, b):
            if a == b:
                fixes.append((i, j))
                return True
            return False
        if a == b:
            if not self._same_one(a, b):
                fixes.append((i, j))
            return True
        return False

    def _list(self, old: list[Any], new: list[Any], path: str) -> Any:
        self.calls += 1
        calls = self.calls
        n_old, n_new = len(old), len(new)
        limit = min(n_old, n_new)
        fixes: list[tuple[int, int]] = []
        run = self._run
        # Common prefix: type-exact, or equal by == and patched in place (the fixes).
        # A lone differing element whose successor matches is taken as changed in
        # place (a fix) rather than ending the prefix.  Chunks stay aligned to
        # multiples of _CHUNK so that the tracker's cached pickles keep matching.
        p = 0
        while p < limit:
            stop = min((p // _CHUNK + 1) * _CHUNK, limit)
            p += run(old, new, p, stop, 0, fixes, False)
            if p < stop:
                if p + 1 < limit and _alike(old[p + 1], new[p + 1]):
                    fixes.append((p, p))
                    p += 1
                    continue
                break
        # Common suffix of what is left, likewise (chunks aligned from the end).
        shift = n_new - n_old
        s = 0
        left = limit - p
        while s < left:
            count = min((s // _CHUNK + 1) * _CHUNK - s, left - s)
            hi = n_old - s
            got = run(old, new, hi - count, hi, shift, fixes, True)
            s += got
            if got < count:
                if s + 1 < left and _alike(old[n_old - 2 - s], new[n_new - 2 - s]):
                    fixes.append((n_old - 1 - s, n_new - 1 - s))
                    s += 1
                    continue
                break
        prefix = path + "/"
        # The middle: pair positionally, then remove or add the rest.
        mid_old, mid_new = n_old - s - p, n_new - s - p
        paired = min(mid_old, mid_new)
        middle = [
            self.value(old[p + k], new[p + k], prefix + str(p + k), None) for k in range(paired)
        ]
        if mid_old > mid_new:
            for i in range(p + mid_old - 1, p + paired - 1, -1):
                self._remove(prefix + str(i), old[i], None)
        elif mid_new > mid_old:
            for i in range(p + paired, p + mid_new):
                token = "-" if s == 0 else str(i)
                middle.append(self._add(prefix + token, new[i], None))
        # The fixes, at their final indices (the prefix's are unaffected by the middle).
        fixed: list[tuple[int, Any]] = []
        for i, j in fixes:
            a = old[i]
            merged = self.value(a, new[j], prefix + str(j), None)
            if merged is not a:
                fixed.append((j, merged))
        if self.measure and n_old != n_new:
            self.delta += max(n_new - 1, 0) - max(n_old - 1, 0)
        if not fixed and mid_old == 0 and mid_new == 0:
            result = old
        else:
            result = old[:p] + middle + old[n_old - s :]
            for j, merged in fixed:
                result[j] = merged
        if self.calls > calls:
            self.new_spine.add(id(result))
        return result


def diff(old: JSONLike, new: JSONLike) -> list[Operation]:
    """Return RFC 6902 operations that turn ``old`` into ``new``.

    Applied in order, with ``jsonpatch.apply_patch`` or with fast-json-patch
    (``validate=true``), they yield a value type-exactly equal to ``new``.  Only
    ``add``, ``remove`` and ``replace`` are emitted; the root is ``""``.  Nothing is
    emitted when ``old is new`` or when the two are type-exactly equal.  Subtrees
    shared by identity cost nothing.  Neither input is mutated, and each operation's
    ``value`` is a fresh deep copy.
    """
    differ = _Differ()
    differ.value(old, new, "", None)
    return differ.ops


_MARKER: Final = "\x00ambient_runs: the known leaf\x00"
"""What `StateTracker._locate` pickles in the leaf's place, to find its bytes."""


class _LeafBytes:
    """One pickler's protocol 3 bytes of the state around the known leaf."""

    __slots__ = ("dump", "dump_scalar", "head", "tail")

    def __init__(
        self,
        dump: Callable[[object], bytes],
        dump_scalar: Callable[[object], bytes],
        head: bytes,
        tail: bytes,
    ) -> None:
        self.dump = dump
        self.dump_scalar = dump_scalar
        self.head = head
        self.tail = tail

    def holds(self, value: Any, body: bytes) -> bool:
        """Whether *value* pickles as the head, then *body* (the leaf's bytes), then the tail."""
        data = self.dump(value)
        head = self.head
        return (
            len(data) == len(head) + len(body) + len(self.tail)
            and data.startswith(head)
            and data.endswith(self.tail)
            and data.startswith(body, len(head))
        )


class _KnownLeaf:
    """
    A leaf that changed alone: its keys and path, and the state's pickle around it.

    Two readings of the state around it (`_LeafBytes`):

    - *plain*: the private value's protocol 3 pickle, which any type-exactly
      equal value matches, whatever its objects.
    - *seeded*, once the plain reading has held `StateTracker.seed_after` times in a row:
      the caller's value pickled with its strings in the pickler's memo
      (`_seeded`), so that each is written as a reference to the very object (2
      or 5 bytes) instead of its text. The memo holds those objects and a
      string cannot change, so equal bytes still mean a type-exactly equal
      value. For the benchmarks' documents the pickle is a quarter as long and
      takes 20-40% less time to write. It holds only while the caller keeps the
      same string objects, as a value mutated in place does; once it misses,
      the plain reading decides and is the only one for this leaf. Its memo
      keeps those strings alive until then: at most the strings of one state
      the caller has let go of since.
    """

    __slots__ = ("keys", "old", "path", "path_chars", "plain", "seeded", "streak")

    def __init__(
        self, keys: list[Any], path: str, old: bytes, plain: _LeafBytes, *, seed: bool
    ) -> None:
        self.keys = keys
        self.path = path
        self.path_chars = _json_len(path)
        #: The leaf's own bytes in a plain pickle (a protocol 3 item).
        self.old = old
        self.plain = plain
        self.seeded: _LeafBytes | None = None
        #: The plain reading's successes in a row; -1: never seed (*seed* False, the
        #: seeded reading missed once, or the value holds no string).
        self.streak = 0 if seed else -1


class StateTracker:
    """Chooses between a snapshot and a delta for each published value.

    The first :meth:`publish` (and the first after :meth:`reset`) is a snapshot.
    Later ones are a delta of RFC 6902 operations against the last published
    value, unless the delta's compact JSON is not shorter than the snapshot's,
    in which case a snapshot; ``None`` when nothing changed.  Lengths are those of
    ``json.dumps(x, separators=(",", ":"), ensure_ascii=False)`` in characters, and
    the choice is exact: a delta iff ``len(patch_json) < len(snapshot_json)``.  The
    snapshot's length is tracked incrementally from the operations (one full
    encoding after each snapshot or baseline, on the first publish that changes
    something), never by encoding the whole document on every publish.

    The tracker keeps a private deep copy of the last published value, so callers
    may mutate their data in place between publishes; returned snapshots and
    operation values are fresh copies, safe to keep or mutate.  Not thread-safe.
    """

    __slots__ = (
        "_cache",
        "_dump",
        "_dump_flat",
        "_dump_scalar",
        "_has_value",
        "_last_path",
        "_leaf",
        "_length",
        "_short",
        "_spine",
        "_value",
    )

    #: The longest document (compact JSON characters) `_one_leaf` is tried on; above it
    #: the differ's cached pickles beat pickling the whole document twice. Negative:
    #: no one-leaf path at all (neither `_one_leaf` nor `_known_leaf`), the differ alone.
    one_leaf_limit: int = 16_384

    #: How many times in a row a known leaf's plain reading holds before its seeded
    #: one is built (`_KnownLeaf`). Building it costs about four plain pickles (the
    #: walk that collects the strings, the seeded pickle) and saves a third of one
    #: per publish, so a leaf that changes a few times and then moves on is never
    #: seeded. Negative: never.
    seed_after: int = 8

    def __init__(self) -> None:
        self._value: Any = None  # private: never mutated, never handed out
        self._has_value = False
        self._length: int | None = None
        self._cache = _PickleCache()
        self._spine: set[int] = set()
        self._dump = _make_dumper()
        #: Protocol 3 (no frames): a pickle is its items' pickles end to end (`_KnownLeaf`).
        self._dump_flat = _make_dumper(3)
        #: The same for the leaf's scalars, on a pickler of its own: a C pickler keeps the
        #: size of its largest output as its next buffer, so a scalar pickled after the
        #: whole state would allocate (and give back) a buffer that large every time.
        self._dump_scalar = _make_dumper(3)
        #: The path of the last publish when it was one scalar's replace, else None.
        self._last_path: str | None = None
        #: The leaf that changed alone in the last two publishes (`_known_leaf`), or None.
        self._leaf: _KnownLeaf | None = None
        #: Whether no dict or list in the private value has `_CHUNK` items or more
        #: (None: not known; False may be stale, which only keeps `_one_leaf` off).
        self._short: bool | None = None

    def reset(self) -> None:
        """Forget the last published value: the next publish is a snapshot."""
        self._value = None
        self._has_value = False
        self._length = None
        self._cache = _PickleCache()
        self._spine = set()
        self._short = None
        self._last_path = None
        self._leaf = None

    def baseline(self, value: JSONLike) -> None:
        """Take ``value`` as what the client already holds, without emitting anything.

        A run's input state is the client's baseline, so the run's first publish
        can be a delta against it.
        """
        self.reset()
        self._value = deep_copy_json(value)
        self._has_value = True

    def publish(self, value: JSONLike) -> Publication:
        """Return ``("snapshot", copy)``, ``("delta", operations)`` or ``None``."""
        if not self._has_value:
            snapshot, self._value = _two_copies(value)
            self._has_value = True
            self._length = None
            self._last_path = self._leaf = None
            return ("snapshot", snapshot)
        current = self._value
        length = self._length
        if self._leaf is not None:
            known = self._known_leaf(self._leaf, current, value)
            if known is not _MISSING:
                return cast("Publication", known)
        if length is not None and length <= self.one_leaf_limit:
            one = self._one_leaf(current, value, length)
            if one is not None:
                self._learn(one)
                return one
        differ = _Differ(
            measure=True, private=True, cache=self._cache, spine=self._spine, dump=self._dump
        )
        merged = differ.value(current, value, "", None)
        ops = differ.ops
        if not ops:
            self._commit(merged, self._length, differ)
            self._last_path = None
            return None
        length = self._length
        if length is None:
            length = len(_encode(current))
        length += differ.delta
        patch_length = 2 + differ.op_chars + len(ops) - 1
        self._commit(merged, length, differ)
        published: Publication = ("delta", ops)
        if patch_length >= length:
            published = ("snapshot", deep_copy_json(merged))
        self._learn(published, ops)
        return published

    def _commit(self, merged: JSONValue, length: int | None, differ: _Differ) -> None:
        self._value = merged
        self._length = length
        self._spine = differ.new_spine
        self._cache.rotate()
        self._leaf = None
        if self._short:  # the differ may have made a long container; a False may go stale
            self._short = None  # and only keeps `_one_leaf` off until the next reset

    def _learn(self, published: Publication, ops: list[Operation] | None = None) -> None:
        """
        After a publish that changed something: note a lone scalar replace's path.

        The same path twice in a row makes it the known leaf (`_locate`), which
        the next publishes try first (`_known_leaf`). *ops* are the operations
        when *published* is a snapshot chosen by the size rule.
        """
        if ops is None:
            ops = published[1] if published is not None and published[0] == "delta" else []
        if len(ops) != 1 or self.one_leaf_limit < 0:
            self._last_path = None
            return
        op = ops[0]
        if op["op"] != "replace" or type(op["value"]) not in _SCALARS:
            self._last_path = None
            return
        path = op["path"]
        if path == self._last_path:
            self._leaf = self._locate(path)
        self._last_path = path

    def _locate(self, path: str) -> _KnownLeaf | None:
        """
        The private value's scalar at *path* as a `_KnownLeaf`, or None.

        Only when the spine is exactly the path's containers above the leaf's
        parent, as the differ leaves it after changing that leaf alone (and then
        after every further change of it alone, so `_known_leaf` keeps it so).
        Costs one pickle of the private value, with a marker at the leaf.
        """
        node: Any = self._value
        containers: list[Any] = []
        keys: list[Any] = []
        for raw in path.split("/")[1:]:
            kind = type(node)
            if kind is dict:
                key: Any = raw.replace("~1", "/").replace("~0", "~")
                if key not in node or escape_pointer(key) != raw:
                    return None
            elif kind is list:
                if not (raw.isascii() and raw.isdigit()) or str(int(raw)) != raw:
                    return None
                key = int(raw)
                if key >= len(node):
                    return None
            else:
                return None
            containers.append(node)
            keys.append(key)
            node = node[key]
        if not containers or type(node) not in _SCALARS:
            return None
        if self._spine != set(map(id, containers[:-1])):
            return None
        old = self._flat(node)
        plain = _around(self._dump_flat, self._dump_scalar, containers, keys)
        if not old or plain is None:
            return None
        return _KnownLeaf(keys, path, old, plain, seed=self.seed_after >= 0)

    def _flat(self, scalar: Any) -> bytes:
        """A scalar's pickle as an item of a protocol 3 pickle (no header, no STOP)."""
        return _item(self._dump_scalar(scalar))

    def _known_leaf(self, leaf: _KnownLeaf, current: Any, value: Any) -> Any:
        """
        The publication when *value* differs from the private value at the known leaf
        only; `_MISSING` when not (then the other paths run, as if this one had not).

        *value*'s protocol 3 pickle must be the private value's with the leaf's
        bytes replaced: the bytes before and after it are kept from `_locate`
        (the private value changes only there), so one pickle of *value* and
        three byte comparisons prove it, with no walk. A pickle is its items'
        pickles end to end in protocol 3's fast mode (no frames, no memo
        entries added), so the comparison is exact, and what is published is
        what the differ publishes for a change at one leaf, spine and length
        included. The pickle is the seeded reading's while it holds, else the
        plain one's (`_KnownLeaf`).
        """
        length = self._length
        if length is None:
            return _MISSING
        a, b = current, value
        containers: list[Any] = []
        # Down to the caller's scalar: the pickle below proves everything else (lengths,
        # keys, the containers' types), so the walk only keeps *b* a plain dict or list
        # (no user code runs) and gives up where a key is gone.
        try:
            for key in leaf.keys:  # the private value's containers: the same as at `_locate`
                if type(b) is not type(a):
                    return _MISSING
                containers.append(a)
                a = a[key]
                b = b[key]
        except LookupError:
            return _MISSING
        if type(b) not in _SCALARS:
            return _MISSING
        exact = self._flat(b)
        if not exact or exact == leaf.old:
            return _MISSING  # the same scalar: something else changed, or nothing
        seeded = leaf.seeded
        if seeded is not None:
            body = exact if type(b) is not str else _item(seeded.dump_scalar(b))
            if not seeded.holds(value, body):
                # Another string object (an equal one, or another text): the plain
                # reading decides, and is the only one from now on.
                leaf.seeded = seeded = None
                leaf.streak = -1
        if seeded is None:
            if not leaf.plain.holds(value, exact):
                return _MISSING
            if leaf.streak >= 0:
                leaf.streak += 1
                if leaf.streak >= self.seed_after:
                    leaf.seeded = _seeded(value, leaf.keys)
                    if leaf.seeded is None:
                        leaf.streak = -1
        ops, op_chars, grown = _scalar_replace(leaf.path, leaf.path_chars, a, b)
        merged, new_spine = _rebuilt(containers, leaf.keys, b)
        leaf.old = exact
        return self._changed_at_one_leaf(merged, new_spine, length + grown, ops, op_chars)

    def _changed_at_one_leaf(
        self,
        merged: Any,
        spine: set[int],
        length: int,
        ops: list[Operation],
        op_chars: int,
    ) -> Publication:
        """Take *merged* as the private value after one operation; publish as the differ does."""
        self._value = merged
        self._length = length
        self._spine = spine
        if 2 + op_chars < length:  # one operation: the patch is "[" op "]"
            return ("delta", ops)
        return ("snapshot", deep_copy_json(merged))

    def _one_leaf(self, current: Any, value: Any, length: int) -> Publication | None:
        """
        The publication of a small document that changed at one leaf, or None to diff.

        The common publish of a small state changes one field, and there the
        differ's work per level (batched pickles of the siblings, cache lookups)
        costs several times a plain walk. So: walk down where ``!=`` (mapped over
        the siblings in order, at C speed) says the two differ, requiring exactly
        one differing child at every level and the same lengths; make the leaf's
        operation as the differ does (`_Differ.value`, written out for two
        scalars); rebuild the containers on the path (a copy of each, one item
        replaced, so the old key order stays); and accept only if
        the result pickles exactly as *value* does (so the walk missed no
        difference that ``==`` hides: a type, a key order). The outcome is then
        the differ's to the byte, operations and their order, the size rule, and
        the spine the next publish descends: that holds because the spine is
        required to be exactly this path's containers above the leaf's parent,
        and no container has `_CHUNK` items (the differ descends into those
        whatever changed). Anything else returns None, and the differ runs.
        """
        # Siblings are compared positionally, at C speed (`operator.ne` mapped over
        # the values); a dict whose keys are in another order then pairs the wrong
        # values, which the final pickle comparison refuses (the differ runs).
        olds: list[Any] = []  # the old containers on the path, outermost first
        keys: list[Any] = []  # the key or index taken in each
        tokens: list[str] = []
        a, b = current, value
        token: str | None = None
        while True:
            ta = type(a)
            if ta is dict and type(b) is dict:
                if len(a) != len(b):
                    return None
                found_keys = list(compress(b, map(ne, a.values(), b.values())))
                if len(found_keys) != 1:
                    return None
                found: Any = found_keys[0]
                if type(found) is not str or found not in a:
                    return None
                tok = escape_pointer(found)
                if _unsafe(tok, token):
                    return None
                token = tok
            elif ta is list and type(b) is list:
                if len(a) != len(b):
                    return None
                unequal = list(map(ne, a, b))
                if unequal.count(True) != 1:
                    return None
                found = unequal.index(True)
                tok = str(found)
                token = None
            else:
                break
            olds.append(a)
            keys.append(found)
            tokens.append(tok)
            a, b = a[found], b[found]
        if not olds or self._spine != set(map(id, olds[:-1])):
            return None
        if self._short is None:
            self._short = _short(current)
        if not self._short:
            return None
        path = "/" + "/".join(tokens)
        tb = type(b)
        if tb in _SCALARS and type(a) in _SCALARS:
            # What `_Differ.value` does with two scalars the walk found unequal: a
            # replace (a NaN for a NaN is no change, which the differ decides).
            if tb is float and b != b and type(a) is float and a != a:
                return None
            ops, op_chars, grown = _scalar_replace(path, _json_len(path), a, b)
            length += grown
            merged: Any = b
            short = True
        else:
            differ = _Differ(measure=True, private=True, dump=self._dump)
            merged = differ.value(a, b, path, token)
            ops = differ.ops
            if not ops:
                return None  # a NaN for a NaN: the differ decides
            op_chars = differ.op_chars
            length += differ.delta
            short = _short(b)
        # The containers on the path, rebuilt around the new leaf: a copy keeps the
        # old key order, which the pickle comparison below checks against *value*'s.
        merged, new_spine = _rebuilt(olds, keys, merged)
        dump = self._dump
        new_bytes = dump(value)
        if not new_bytes or new_bytes != dump(merged):
            return None
        self._short = short
        self._leaf = None
        return self._changed_at_one_leaf(merged, new_spine, length, ops, op_chars)


def _scalar_replace(
    path: str, path_chars: int, old: Any, new: Any
) -> tuple[list[Operation], int, int]:
    """
    What `_Differ.value` makes of two unequal scalars at *path*: one replace.

    Returns the operations, their JSON characters (*path_chars*: the path's)
    and how much longer the document's JSON gets.
    """
    size = _json_len(new)
    ops: list[Operation] = [{"op": "replace", "path": path, "value": new}]
    return ops, _REPLACE_CHARS + path_chars + size, size - _json_len(old)


def _rebuilt(containers: Sequence[Any], keys: Sequence[Any], leaf: Any) -> tuple[Any, set[int]]:
    """
    The path's *containers* (root first) copied, with *leaf* set at the end of *keys*.

    Returns the new root and the ids of the copies below it (the new spine);
    each copy keeps its original's key order.
    """
    merged = leaf
    spine: set[int] = set()
    last = len(containers) - 1
    for i in range(last, -1, -1):
        container = containers[i].copy()
        container[keys[i]] = merged
        merged = container
        if i < last:
            spine.add(id(merged))
    return merged, spine


def _item(data: bytes) -> bytes:
    """A protocol 3 pickle of one scalar as an item of a larger one (no header, no STOP)."""
    return data[2:-1] if data else b""


def _around(
    dump: Callable[[object], bytes],
    dump_scalar: Callable[[object], bytes],
    containers: Sequence[Any],
    keys: Sequence[Any],
) -> _LeafBytes | None:
    """
    *dump*'s bytes of the value whose path is *containers* / *keys*, around the leaf.

    The path's containers are copied with `_MARKER` at the leaf (`_rebuilt`):
    fast mode writes a copy as it writes its original. None when the marker's
    bytes do not stand once in the pickle.
    """
    data = dump(_rebuilt(containers, keys, _MARKER)[0])
    marker = _item(dump_scalar(_MARKER))
    at = data.find(marker)
    if not marker or at < 0 or data.find(marker, at + 1) >= 0:
        return None
    return _LeafBytes(dump, dump_scalar, data[:at], data[at + len(marker) :])


def _seeded(value: Any, keys: Sequence[Any]) -> _LeafBytes | None:
    """
    The seeded reading of the caller's *value* around the leaf at *keys* (`_KnownLeaf`).

    Two picklers (the value's and the leaf's, which must not share a buffer)
    whose memo holds every string in *value*, in fast mode, so that no
    container is ever memoised and each is read again on every dump. None
    when *value* holds no string, or is not plain JSON containers down to the
    leaf.
    """
    containers: list[Any] = []
    node = value
    try:
        for key in keys:
            if type(node) is not dict and type(node) is not list:
                return None
            containers.append(node)
            node = node[key]
    except LookupError:
        return None
    strings = _strings(value)
    if not strings:
        return None
    memo = {i: (i, text) for i, text in enumerate(strings)}
    dump, dump_scalar = _make_dumper(3, memo), _make_dumper(3, memo)
    return _around(dump, dump_scalar, containers, keys)


def _strings(value: Any) -> list[str]:
    """
    Every ``str`` object in *value*'s dicts and lists (keys and items), each once.

    A level of containers at a time, each step one C-speed pass over the level
    (a walk of one item at a time took two to three times as long at 1 MB).
    """
    found: list[str] = []
    level = [value]
    while level:
        kinds = list(map(type, level))
        dicts = list(compress(level, map(is_, kinds, repeat(dict))))
        lists = compress(level, map(is_, kinds, repeat(list)))
        found.extend(chain.from_iterable(dicts))  # keys
        items = list(
            chain(chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(lists))
        )
        kinds = list(map(type, items))
        found.extend(compress(items, map(is_, kinds, repeat(str))))
        level = list(compress(items, map(_CONTAINERS.__contains__, kinds)))
    return list(dict(zip(map(id, found), found, strict=True)).values())


_CONTAINERS: Final = frozenset((dict, list))


def _short(value: Any) -> bool:
    """Whether no dict or list in *value* has `_CHUNK` items or more."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if len(item) >= _CHUNK:
                return False
            stack.extend(item.values())
        elif kind is list:
            if len(item) >= _CHUNK:
                return False
            stack.extend(item)
    return True
