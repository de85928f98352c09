"""Tests for the JSON differ and the snapshot/delta policy (``ambient_runs._diff``).

Patches must rebuild the new value *type-exactly* (``true`` is not ``1``, ``1`` is not
``1.0``), so values are compared through ``json.dumps(sort_keys=True)``, which tells
all of those apart.  Patches must also apply under fast-json-patch
``applyPatch(doc, patch, validate=true, mutate=false)``, what the official client runs.
"""

from __future__ import annotations

import collections
import copy
import enum
import json
import pickle
import random
import shutil
import subprocess
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from support.node import NODE_DIR, ensure_node_modules

from ambient_runs._diff import StateTracker, deep_copy_json, diff, escape_pointer

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRICKY_KEYS = (
    "a",
    "b",
    "",
    "a/b",
    "~",
    "~1",
    "~01",
    "/",
    "x~/y",
    "é",
    "日本語",
    "\U0001f600",
    '"q"',
    "__proto__",
    "constructor",
    "prototype",
    "toString",
    "0",
    "-",
)
NUMBERS = (0, 1, -1, 0.0, -0.0, 1.0, 0.5, 1e16, 2**53, True, False)


def canonical(value: Any) -> str:
    """A text that differs whenever two JSON values differ, types included."""
    return json.dumps(value, sort_keys=True)


def compact(value: Any) -> str:
    """The wire form whose length the size rule compares."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def apply(value: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply *ops* to a copy of *value* with the Python jsonpatch library."""
    return jsonpatch.apply_patch(value, ops)


def confuse(value: Any) -> Any:
    """Another JSON type for *value*: Python's == mostly calls the two equal, JSON does not."""
    if type(value) is bool:
        return int(value)
    if type(value) is int:
        return float(value)
    if type(value) is float:
        return -value if value == 0.0 else value == 1.0
    return value


def containers(value: Any) -> list[Any]:
    """Every dict and list inside *value*, *value* included."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


keys = st.sampled_from(TRICKY_KEYS) | st.text(max_size=3)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(NUMBERS),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=16,
)


class Chooser:
    """Random choices from Hypothesis (shrinkable) or from a seeded Random (for batches)."""

    def __init__(self, data: st.DataObject | None = None, rng: random.Random | None = None):
        self.data = data
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        if self.data is not None:
            return self.data.draw(st.integers(low, high))
        assert self.rng is not None
        return self.rng.randint(low, high)

    def choice(self, options: Any) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def value(self, depth: int = 0) -> Any:
        if self.data is not None:
            return self.data.draw(json_values)
        roll = self.integer(0, 9)
        if depth > 3 or roll < 4:
            return self.choice([None, "s", "", "é", *NUMBERS, self.integer(-5, 5)])
        if roll < 7:
            return {
                self.choice(TRICKY_KEYS): self.value(depth + 1) for _ in range(self.integer(0, 4))
            }
        return [self.value(depth + 1) for _ in range(self.integer(0, 5))]


def mutate(chooser: Chooser, root: Any) -> Any:
    """Change *root* in place the way agents do (or replace it); return the new root."""
    targets = containers(root)
    if not targets or chooser.integer(0, 19) == 0:
        return chooser.value()
    target = chooser.choice(targets)
    kind = chooser.integer(0, 9)
    if isinstance(target, dict):
        if kind < 4 or not target:
            target[chooser.choice(TRICKY_KEYS)] = chooser.value()
        elif kind < 6:
            del target[chooser.choice(list(target))]
        elif kind < 8:
            key = chooser.choice(list(target))
            target[key] = confuse(target[key])
        else:
            key = chooser.choice(list(target))
            target[key] = chooser.value()
        return root
    if kind == 0:
        target.append(chooser.value())
    elif kind == 1:
        target.insert(0, chooser.value())
    elif kind == 2 and target:
        target.pop()
    elif kind == 3 and target:
        target.pop(chooser.integer(0, len(target) - 1))
    elif kind == 4:
        target.reverse()
    elif kind == 5 and target:
        last = len(target) - 1
        i, j = chooser.integer(0, last), chooser.integer(0, last)
        target[i], target[j] = target[j], target[i]
    elif kind == 6 and target:
        i = chooser.integer(0, len(target) - 1)
        target[i] = confuse(target[i])
    elif kind == 7:
        target.insert(chooser.integer(0, len(target)), chooser.value())
    elif kind == 8:
        del target[: chooser.integer(0, len(target))]
    else:
        target.extend(chooser.value() for _ in range(chooser.integer(1, 3)))
    return root


def documents(count: int) -> dict[str, Any]:
    """A state shaped like a real one: a list of documents with nested fields."""
    return {
        "title": "run",
        "documents": [
            {
                "id": f"doc-{i}",
                "score": i / 2,
                "rank": i,
                "ok": i % 2 == 0,
                "meta": {"author": {"name": "Ann", "id": i % 13}, "tags": ["a", "b"]},
            }
            for i in range(count)
        ],
    }


def edit_documents(chooser: Chooser, state: dict[str, Any]) -> None:
    """Edit a document-list state in place the way an agent would (several chunks long)."""
    docs = state["documents"]
    for _ in range(chooser.integer(1, 3)):
        kind = chooser.integer(0, 9)
        i = chooser.integer(0, len(docs) - 1) if docs else 0
        if kind == 0 and docs:
            docs[i]["meta"]["author"]["id"] = chooser.choice(NUMBERS)
        elif kind == 1 and docs:
            field = chooser.choice(["rank", "ok", "score"])
            docs[i][field] = confuse(docs[i][field])
        elif kind == 2:
            docs.insert(i, documents(1)["documents"][0])
        elif kind == 3 and docs:
            del docs[i]
        elif kind == 4:
            docs.append(documents(1)["documents"][0])
        elif kind == 5 and docs:
            j = chooser.integer(0, len(docs) - 1)
            docs[i], docs[j] = docs[j], docs[i]
        elif kind == 6 and docs:
            docs[i] = dict(reversed(list(docs[i].items())))
        elif kind == 7 and docs:
            docs[i]["meta"] = {"author": {"id": 0}, "tags": [chooser.value()]}
        elif kind == 8:
            state["title"] = chooser.choice(["run", "walk", 1, True])
        elif kind == 9 and docs:  # flips back and forth: a later publish reverts an earlier
            docs[i]["rank"] = 0 if docs[i].get("rank") else 1


class TestEscapePointer:
    def test_escapes_tilde_before_slash(self) -> None:
        """~ becomes ~0 and / becomes ~1, with ~ escaped first so "~1" stays distinct."""
        assert "a~1b~0c" == escape_pointer("a/b~c")
        assert "~01" == escape_pointer("~1")
        assert "~0~1" == escape_pointer("~/")

    def test_leaves_other_text_alone(self) -> None:
        """Empty, unicode and quote characters pass through unchanged."""
        assert ["", "é日本", '"'] == [escape_pointer(t) for t in ("", "é日本", '"')]


class TestDiff:
    def test_identical_object_is_no_operations(self) -> None:
        """diff(x, x) is empty without looking inside x."""
        value = documents(50)

        assert [] == diff(value, value)

    def test_equal_copies_are_no_operations(self) -> None:
        """Type-exactly equal values produce no operations, whatever their identity."""
        value = documents(200)

        assert [] == diff(value, copy.deepcopy(value))

    def test_key_order_alone_is_no_change(self) -> None:
        """JSON objects are unordered: reordering keys produces no operations."""
        assert [] == diff(
            {"a": 1, "b": [1, {"c": 2, "d": 3}]}, {"b": [1, {"d": 3, "c": 2}], "a": 1}
        )

    def test_dict_add_remove_replace(self) -> None:
        """Added, removed and changed keys become add, remove and replace."""
        ops = diff({"keep": 1, "gone": 2, "change": 3}, {"keep": 1, "change": 4, "new": 5})

        assert sorted(
            [
                {"op": "add", "path": "/new", "value": 5},
                {"op": "remove", "path": "/gone"},
                {"op": "replace", "path": "/change", "value": 4},
            ],
            key=canonical,
        ) == sorted(ops, key=canonical)

    def test_nested_change_has_a_deep_path(self) -> None:
        """A leaf deep inside produces one replace at its full path."""
        old: Any = {"a": {"b": [1, {"c": "x"}]}}
        new: Any = {"a": {"b": [1, {"c": "y"}]}}

        assert [{"op": "replace", "path": "/a/b/1/c", "value": "y"}] == diff(old, new)

    @pytest.mark.parametrize(
        ("old", "new"),
        [
            (1, True),
            (True, 1),
            (0, False),
            (False, 0.0),
            (1, 1.0),
            (1.0, 1),
            (0.0, -0.0),
            (1.0, True),
            (2**53, float(2**53)),
        ],
    )
    def test_type_changes_that_python_calls_equal_are_replaced(self, old: Any, new: Any) -> None:
        """bool vs int, int vs float and 0.0 vs -0.0 are changes even though == says equal."""
        assert [{"op": "replace", "path": "/x/0", "value": new}] == diff(
            {"x": [old]}, {"x": [new]}
        )
        assert canonical(new) == canonical(diff(old, new)[0]["value"])

    def test_type_change_deep_in_a_large_list_is_found(self) -> None:
        """The batched fast path finds 1 → True and 7 → 7.0 among hundreds of equal documents."""
        old = documents(500)
        new = copy.deepcopy(old)
        new["documents"][321]["meta"]["author"]["id"] = bool(
            new["documents"][321]["meta"]["author"]["id"]
        )
        new["documents"][7]["rank"] = 7.0

        assert sorted(
            [
                {"op": "replace", "path": "/documents/321/meta/author/id", "value": True},
                {"op": "replace", "path": "/documents/7/rank", "value": 7.0},
            ],
            key=canonical,
        ) == sorted(diff(old, new), key=canonical)

    def test_type_change_in_a_large_dict_is_found(self) -> None:
        """Among many equal keys, a False → 0 change is still reported."""
        old = {f"k{i}": {"v": i, "f": False} for i in range(300)}
        new = copy.deepcopy(old)
        new["k123"]["f"] = 0

        assert [{"op": "replace", "path": "/k123/f", "value": 0}] == diff(old, new)

    def test_append_is_one_add_at_the_end(self) -> None:
        """Appending to a list is one add at "-"."""
        assert [{"op": "add", "path": "/l/-", "value": 4}] == diff(
            {"l": [1, 2, 3]}, {"l": [1, 2, 3, 4]}
        )

    def test_pop_is_one_remove(self) -> None:
        """Dropping the last element is one remove of its index."""
        assert [{"op": "remove", "path": "/2"}] == diff([1, 2, 3], [1, 2])

    def test_insert_at_front_is_one_add(self) -> None:
        """Inserting at the front is one add at index 0, not a rewrite of the list."""
        old = [{"id": i} for i in range(100)]

        assert [{"op": "add", "path": "/0", "value": {"id": -1}}] == diff(old, [{"id": -1}, *old])

    def test_single_element_change_is_local(self) -> None:
        """Changing one element of a long list touches only that element."""
        old = list(range(1000))
        new: list[Any] = [*old[:500], "x", *old[501:]]

        assert [{"op": "replace", "path": "/500", "value": "x"}] == diff(old, new)

    def test_insert_plus_in_place_change_stays_small(self) -> None:
        """Insert at the front plus a change further down is two operations, not a rewrite."""
        old = [{"id": i, "v": 0} for i in range(100)]
        new = [{"id": -1}, *copy.deepcopy(old)]
        new[61]["v"] = 1

        assert sorted(
            [
                {"op": "add", "path": "/0", "value": {"id": -1}},
                {"op": "replace", "path": "/61/v", "value": 1},
            ],
            key=canonical,
        ) == sorted(diff(old, new), key=canonical)
        assert canonical(new) == canonical(apply(old, diff(old, new)))

    def test_removes_go_from_the_highest_index_down(self) -> None:
        """Several removals go highest index first, so earlier ones do not shift later ones."""
        assert [
            {"op": "remove", "path": "/3"},
            {"op": "remove", "path": "/2"},
            {"op": "remove", "path": "/1"},
        ] == diff([1, 2, 3, 4, 5], [1, 5])

    def test_insert_in_the_middle_uses_the_index(self) -> None:
        """Inserting before a common suffix adds at the index, not at "-"."""
        assert [{"op": "add", "path": "/1", "value": 9}] == diff([1, 2, 3], [1, 9, 2, 3])

    def test_keys_are_escaped_in_paths(self) -> None:
        """Keys with / and ~ are escaped per RFC 6901; unicode and empty keys pass through."""
        old: Any = {"a/b": 1, "~": {"": 1}, "é": 1}
        new: Any = {"a/b": 2, "~": {"": 2}, "é": 2}

        assert sorted(["/a~1b", "/~0/", "/é"]) == sorted(op["path"] for op in diff(old, new))
        assert canonical(new) == canonical(apply(old, diff(old, new)))

    @pytest.mark.parametrize(
        ("old", "new"),
        [({"a": 1}, [1]), ([1], {"0": 1}), (1, "1"), (None, {}), ({}, None), ("x", 1.5)],
    )
    def test_root_type_change_replaces_the_root(self, old: Any, new: Any) -> None:
        """A different type at the root is one replace of path ""."""
        assert [{"op": "replace", "path": "", "value": new}] == diff(old, new)

    def test_proto_keys_are_replaced_through_a_safe_parent(self) -> None:
        """fast-json-patch bans paths through __proto__, so the enclosing object is replaced."""
        old: Any = {"x": {"__proto__": {"a": 1}, "b": 1}, "y": 1}
        new: Any = {"x": {"__proto__": {"a": 2}, "b": 1}, "y": 1}

        assert [{"op": "replace", "path": "/x", "value": new["x"]}] == diff(old, new)
        assert [{"op": "replace", "path": "", "value": {"__proto__": 2}}] == diff(
            {"__proto__": 1}, {"__proto__": 2}
        )

    def test_constructor_prototype_is_replaced_through_constructor(self) -> None:
        """A path constructor/prototype is banned by fast-json-patch too; other uses are fine."""
        old: Any = {"constructor": {"prototype": 1, "x": 1}, "prototype": 1}
        new: Any = {"constructor": {"prototype": 2, "x": 1}, "prototype": 2}

        assert sorted(
            [
                {"op": "replace", "path": "/constructor", "value": new["constructor"]},
                {"op": "replace", "path": "/prototype", "value": 2},
            ],
            key=canonical,
        ) == sorted(diff(old, new), key=canonical)

    def test_nan_is_not_a_change(self) -> None:
        """A NaN replaced by another NaN object is unchanged (json.dumps writes both as NaN)."""
        assert [] == diff({"x": [float("nan")]}, {"x": [float("nan")]})

    def test_inputs_are_not_mutated(self) -> None:
        """diff leaves both inputs exactly as they were."""
        old, new = documents(80), documents(81)
        new["documents"][3]["meta"]["tags"].append("c")
        before = (canonical(old), canonical(new))

        diff(old, new)

        assert before == (canonical(old), canonical(new))

    def test_operation_values_do_not_alias_the_new_value(self) -> None:
        """Mutating the new value after diff leaves the operations' values as they were."""
        old: dict[str, Any] = {"l": []}
        new: dict[str, Any] = {"l": [{"deep": [1]}], "d": {"x": {"y": 1}}}
        ops = diff(old, new)
        before = canonical(ops)

        new["l"][0]["deep"].append(2)
        new["d"]["x"]["y"] = 2

        assert before == canonical(ops)

    def test_opaque_values_are_replaced_whole(self) -> None:
        """Tuples and dict subclasses are compared as wholes and replaced when they differ."""
        ops = diff({"t": (1, 2), "o": collections.OrderedDict(a=1)}, {"t": (1, 3), "o": {"a": 2}})

        assert sorted(["/o", "/t"]) == sorted(op["path"] for op in ops)
        assert ["replace", "replace"] == [op["op"] for op in ops]

    def test_non_string_key_in_a_change_raises(self) -> None:
        """A non-str key that has to appear in a path is refused with TypeError."""
        with pytest.raises(TypeError, match="keys must be str"):
            diff({}, {1: "x"})  # type: ignore[dict-item]

    @PROPERTY
    @given(old=json_values, new=json_values)
    def test_patch_turns_any_value_into_any_other(self, old: Any, new: Any) -> None:
        """For unrelated values, applying the patch yields the new value, types included."""
        assert canonical(new) == canonical(apply(old, diff(old, new)))

    @PROPERTY
    @given(data=st.data())
    def test_patch_follows_a_sequence_of_mutations(self, data: st.DataObject) -> None:
        """After each in-place mutation, the patch from the previous value rebuilds the new one."""
        chooser = Chooser(data=data)
        value = data.draw(json_values)
        for _ in range(data.draw(st.integers(1, 5))):
            previous = copy.deepcopy(value)
            value = mutate(chooser, value)
            ops = diff(previous, value)

            assert canonical(value) == canonical(apply(previous, ops))
            assert (canonical(previous) == canonical(value)) == (ops == [])

    @settings(PROPERTY, max_examples=20)
    @given(data=st.data())
    def test_patch_follows_edits_of_a_long_document_list(self, data: st.DataObject) -> None:
        """On a list of hundreds of documents (many batches), each patch rebuilds the edit."""
        chooser = Chooser(data=data)
        value = documents(data.draw(st.integers(60, 260)))
        for _ in range(3):
            previous = copy.deepcopy(value)
            edit_documents(chooser, value)

            assert canonical(value) == canonical(apply(previous, diff(previous, value)))

    def test_patches_apply_under_fast_json_patch(self) -> None:
        """fast-json-patch applyPatch(validate=true, mutate=false) brings each old to its new."""
        ensure_node_modules()
        chooser = Chooser(rng=random.Random(20240601))
        cases = []
        for _ in range(200):
            value = chooser.value()
            for _ in range(3):
                previous = copy.deepcopy(value)
                value = mutate(chooser, value)
                ops = diff(previous, value)
                cases.append({"old": previous, "new": copy.deepcopy(value), "ops": ops})
        cases.append({"old": {"__proto__": {"a": 1}}, "new": {"__proto__": {"a": 2}}})
        cases[-1]["ops"] = diff(cases[-1]["old"], cases[-1]["new"])
        script = r"""
const jsonpatch = require('fast-json-patch');
const canon = v => Array.isArray(v) ? v.map(canon) : (v && typeof v === 'object')
  ? Object.fromEntries(Object.keys(v).sort().map(k => [k, canon(v[k])])) : v;
let text = '';
process.stdin.on('data', c => { text += c; });
process.stdin.on('end', () => {
  const failures = [];
  JSON.parse(text).forEach((c, i) => {
    try {
      const out = jsonpatch.applyPatch(c.old, c.ops, true, false).newDocument;
      const same = JSON.stringify(canon(out)) === JSON.stringify(canon(c.new));
      if (!same) failures.push([i, 'differs']);
    } catch (e) { failures.push([i, String(e && e.message)]); }
  });
  process.stdout.write(JSON.stringify(failures));
});
"""
        proc = subprocess.run(
            [str(shutil.which("node")), "-e", script],
            cwd=NODE_DIR,
            input=json.dumps(cases, allow_nan=False).encode(),
            capture_output=True,
            timeout=120,
            check=True,
        )

        assert [] == json.loads(proc.stdout)


class TestDeepCopyJson:
    def test_copy_is_equal_and_shares_no_container(self) -> None:
        """The copy is type-exactly equal and none of its dicts or lists is an original's."""
        value: Any = {"a": [1, True, 1.0, -0.0, None, "s", {"b": [[]]}], "c": {}}
        copied = deep_copy_json(value)
        originals = {id(c) for c in containers(value)}

        assert canonical(value) == canonical(copied)
        assert set() == originals & {id(c) for c in containers(copied)}

    def test_subclasses_become_base_types(self) -> None:
        """OrderedDict, str and int enums come back as dict, str and int, JSON-equal."""

        class Mode(enum.StrEnum):
            FAST = "fast"

        class Level(enum.IntEnum):
            HIGH = 3

        value: Any = collections.OrderedDict(mode=Mode.FAST, level=Level.HIGH, nested=[Mode.FAST])
        copied = deep_copy_json(value)

        assert {"mode": "fast", "level": 3, "nested": ["fast"]} == copied
        assert [dict, str, int, str] == [
            type(copied),
            type(copied["mode"]),
            type(copied["level"]),
            type(copied["nested"][0]),
        ]
        assert compact(value) == compact(copied)

    def test_scalars_are_returned_as_is(self) -> None:
        """Immutable scalars need no copy."""
        text = "x" * 100

        assert text is deep_copy_json(text)

    def test_faster_than_copy_deepcopy(self) -> None:
        """The marshal round trip beats copy.deepcopy on a document-shaped state."""
        import timeit

        value = documents(300)
        ours = min(timeit.repeat(lambda: deep_copy_json(value), number=3, repeat=3))
        theirs = min(timeit.repeat(lambda: copy.deepcopy(value), number=3, repeat=3))

        assert ours < theirs


class TestStateTracker:
    def test_first_publish_is_a_snapshot_copy(self) -> None:
        """The first publish is a snapshot of an independent copy of the value."""
        value = {"a": [1, 2]}
        tracker = StateTracker()

        kind, snapshot = tracker.publish(value)  # type: ignore[misc]
        value["a"].append(3)

        assert ("snapshot", {"a": [1, 2]}) == (kind, snapshot)

    def test_unchanged_publish_is_none(self) -> None:
        """Publishing an equal value (same object or a copy) returns None."""
        value = documents(100)
        tracker = StateTracker()
        tracker.publish(value)

        assert [None, None] == [tracker.publish(value), tracker.publish(copy.deepcopy(value))]

    def test_in_place_mutation_is_detected(self) -> None:
        """Mutating the published dict in place is seen at the next publish, as a delta."""
        value = documents(100)
        tracker = StateTracker()
        tracker.publish(value)

        value["documents"][42]["meta"]["author"]["name"] = "Bo"

        assert (
            "delta",
            [{"op": "replace", "path": "/documents/42/meta/author/name", "value": "Bo"}],
        ) == tracker.publish(value)

    def test_in_place_type_change_is_detected(self) -> None:
        """An in-place change from 1 to True (equal for Python) is published."""
        value = documents(100)
        tracker = StateTracker()
        tracker.publish(value)
        for _ in range(2):  # the second round runs with warm caches
            tracker.publish(value)

        value["documents"][1]["meta"]["author"]["id"] = True

        assert (
            "delta",
            [{"op": "replace", "path": "/documents/1/meta/author/id", "value": True}],
        ) == tracker.publish(value)

    def test_list_edits_stay_small_after_nested_changes(self) -> None:
        """After nested changes, insert-at-front plus an edit is two operations, a pop one."""
        value = documents(200)
        tracker = StateTracker()
        tracker.publish(value)
        for i in (3, 5, 150, 198):
            value["documents"][i]["meta"]["author"]["id"] = -i
            tracker.publish(value)

        value["documents"].insert(0, {"id": "first"})
        value["documents"][199]["meta"]["author"]["id"] = 0
        inserted = tracker.publish(value)
        value["documents"].pop(0)
        popped = tracker.publish(value)

        assert (
            "delta",
            [
                {"op": "add", "path": "/documents/0", "value": {"id": "first"}},
                {"op": "replace", "path": "/documents/199/meta/author/id", "value": 0},
            ],
        ) == inserted
        assert ("delta", [{"op": "remove", "path": "/documents/0"}]) == popped

    @pytest.mark.parametrize("shape", ["list", "dict"])
    def test_reverting_a_change_is_published(self, shape: str) -> None:
        """A change and its reversal are both published (warm caches, list or dict of docs)."""
        docs = documents(300)["documents"]
        value: Any = {"docs": docs} if shape == "list" else {"docs": {d["id"]: d for d in docs}}
        tracker = StateTracker()
        for _ in range(3):
            tracker.publish(value)
        doc = docs[130]
        base = "/docs/130" if shape == "list" else "/docs/doc-130"
        results = []
        for rank in (-1, 130, -1, 130):
            doc["rank"] = rank
            results.append(tracker.publish(value))

        assert [
            ("delta", [{"op": "replace", "path": f"{base}/rank", "value": rank}])
            for rank in (-1, 130, -1, 130)
        ] == results

    @pytest.mark.parametrize("shape", ["list", "dict"])
    def test_type_only_change_after_a_nested_change_is_published(self, shape: str) -> None:
        """Type-only changes (1 → True → 1.0) to an already-changed leaf are each published."""
        docs = documents(300)["documents"]
        value: Any = {"docs": docs} if shape == "list" else {"docs": {d["id"]: d for d in docs}}
        tracker = StateTracker()
        tracker.publish(value)
        author = docs[77]["meta"]["author"]
        base = "/docs/77" if shape == "list" else "/docs/doc-77"
        results: list[Any] = []
        for new in (1, True, 1.0, 1, 1):
            author["id"] = new
            results.append(tracker.publish(value))

        assert [
            ("delta", [{"op": "replace", "path": f"{base}/meta/author/id", "value": new}])
            for new in (1, True, 1.0, 1)
        ] + [None] == results
        assert [int, bool, float, int] == [type(r[1][0]["value"]) for r in results[:4]]

    def test_repeated_changes_stay_deltas(self) -> None:
        """Many successive small changes are each published as a one-operation delta."""
        value = documents(300)
        tracker = StateTracker()
        tracker.publish(value)
        results = []
        for step in range(20):
            value["documents"][(step * 37) % 300]["rank"] = -step - 1
            results.append(tracker.publish(value))

        assert [
            (
                "delta",
                [{"op": "replace", "path": f"/documents/{s * 37 % 300}/rank", "value": -s - 1}],
            )
            for s in range(20)
        ] == results

    def test_size_rule_is_exact_at_the_boundary(self) -> None:
        """A delta is chosen iff its compact JSON is strictly shorter than the snapshot's."""
        kinds = []
        for padding in range(60):
            old = {"a": "", "pad": "p" * padding}
            new = {"a": "z", "pad": "p" * padding}
            tracker = StateTracker()
            tracker.baseline(old)

            result = tracker.publish(new)

            assert result is not None
            expected = "delta" if len(compact(diff(old, new))) < len(compact(new)) else "snapshot"
            assert expected == result[0]
            kinds.append(result[0])
        assert {"delta", "snapshot"} == set(kinds)

    @pytest.mark.parametrize(
        ("before", "after"),
        [
            pytest.param({"k": {}}, {"k": {"a": 1}}, id="add-to-empty-object"),
            pytest.param({"k": {"a": 1}}, {"k": {"a": 1, "b": 2}}, id="add-key"),
            pytest.param({"k": {"a": 1, "b": 2}}, {"k": {"a": 1}}, id="remove-key"),
            pytest.param({"k": {"a": 1}}, {"k": {}}, id="remove-last-key"),
            pytest.param({"k": []}, {"k": [1]}, id="append-to-empty"),
            pytest.param({"k": [1]}, {"k": [1, 2]}, id="append"),
            pytest.param({"k": [1, 2]}, {"k": [0, 1, 2]}, id="insert-front"),
            pytest.param({"k": [1, 2, 3]}, {"k": [1, 3]}, id="remove-middle"),
            pytest.param({"k": [1]}, {"k": []}, id="pop-last"),
            pytest.param({"k": [1, {"é/~": "x"}]}, {"k": [1, {"é/~": 'y"'}]}, id="escapes"),
            pytest.param({"k": [True]}, {"k": [1.0]}, id="type-change"),
        ],
    )
    def test_size_rule_is_exact_for_every_kind_of_change(
        self, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        """Across the delta/snapshot boundary, the choice matches the exact compact lengths."""
        kinds = set()
        for padding in range(70):
            old = {**copy.deepcopy(before), "pad": "p" * padding}
            new = {**copy.deepcopy(after), "pad": "p" * padding}
            tracker = StateTracker()
            tracker.publish(old)
            tracker.publish({**old, "warm": 1})  # the size is now tracked incrementally
            tracker.publish(old)

            result = tracker.publish(new)

            assert result is not None
            expected = "delta" if len(compact(diff(old, new))) < len(compact(new)) else "snapshot"
            assert expected == result[0], padding
            kinds.add(result[0])
        assert {"delta", "snapshot"} == kinds

    def test_large_change_falls_back_to_a_snapshot(self) -> None:
        """When the patch is not smaller than the state, the snapshot is sent instead."""
        tracker = StateTracker()
        tracker.publish({"l": [1, 2, 3]})

        assert ("snapshot", {"l": ["x", "y", "z"]}) == tracker.publish({"l": ["x", "y", "z"]})

    def test_reset_makes_the_next_publish_a_snapshot(self) -> None:
        """After reset(), even an unchanged value is published again as a snapshot."""
        tracker = StateTracker()
        tracker.publish({"a": 1})
        tracker.reset()

        assert ("snapshot", {"a": 1}) == tracker.publish({"a": 1})

    def test_baseline_is_diffed_against_without_emitting(self) -> None:
        """baseline(v) emits nothing; the next publish is a delta against v (or None)."""
        state = documents(20)
        tracker = StateTracker()
        tracker.baseline(state)
        changed = copy.deepcopy(state)
        changed["title"] = "next"

        assert None is tracker.publish(state)
        assert (
            "delta",
            [{"op": "replace", "path": "/title", "value": "next"}],
        ) == tracker.publish(changed)

    def test_baseline_keeps_a_private_copy(self) -> None:
        """Mutating the value given to baseline() afterwards is a change at the next publish."""
        state = documents(20)
        tracker = StateTracker()
        tracker.baseline(state)

        state["title"] = "mutated"

        assert ("delta", [{"op": "replace", "path": "/title", "value": "mutated"}]) == (
            tracker.publish(state)
        )

    def test_returned_values_are_independent_of_the_tracker(self) -> None:
        """Mutating a returned snapshot or operation value does not corrupt later deltas."""
        state = documents(30)
        tracker = StateTracker()
        _, snapshot = tracker.publish(state)  # type: ignore[misc]
        snapshot["documents"].clear()  # type: ignore[call-overload,index,union-attr]
        state["documents"][0]["extra"] = {"tags": ["z" * 5]}
        delta: Any = tracker.publish(state)
        delta[1][0]["value"]["tags"].append("mutated")
        state["title"] = "t2"

        assert ("delta", [{"op": "replace", "path": "/title", "value": "t2"}]) == tracker.publish(
            state
        )

    def test_publish_does_not_mutate_its_argument(self) -> None:
        """publish leaves the caller's value exactly as it was."""
        state = documents(30)
        tracker = StateTracker()
        tracker.publish(copy.deepcopy(state))
        state["documents"].insert(0, {"id": "new"})
        before = canonical(state)

        tracker.publish(state)

        assert before == canonical(state)

    def test_root_replacement_is_a_snapshot(self) -> None:
        """Changing the root's type always costs at least the snapshot: a snapshot is sent."""
        tracker = StateTracker()
        tracker.publish({"a": 1})

        assert ("snapshot", [1]) == tracker.publish([1])

    @settings(PROPERTY, max_examples=20)
    @given(data=st.data())
    def test_long_document_list_stays_in_sync(self, data: st.DataObject) -> None:
        """Over many in-place edits of hundreds of documents, the client stays equal to them."""
        chooser = Chooser(data=data)
        value = documents(data.draw(st.integers(60, 260)))
        tracker = StateTracker()
        first = tracker.publish(value)
        assert first is not None
        client = copy.deepcopy(first[1])
        for _ in range(6):
            previous = copy.deepcopy(value)
            edit_documents(chooser, value)

            result = tracker.publish(value)

            if result is None:
                assert canonical(previous) == canonical(value)
            elif result[0] == "delta":
                client = apply(client, result[1])
            else:
                client = copy.deepcopy(result[1])
            assert canonical(value) == canonical(client)
            assert tracker._length in (None, len(compact(value)))

    @PROPERTY
    @given(data=st.data())
    def test_publish_sequence_follows_the_size_rule_and_rebuilds_the_state(
        self, data: st.DataObject
    ) -> None:
        """Random in-place mutations: client stays equal, None iff unchanged, exact size rule."""
        chooser = Chooser(data=data)
        value = data.draw(json_values)
        tracker = StateTracker()
        first = tracker.publish(value)
        assert first is not None
        assert "snapshot" == first[0]
        client = copy.deepcopy(first[1])
        for _ in range(data.draw(st.integers(1, 6))):
            previous = copy.deepcopy(value)
            value = mutate(chooser, value)
            expected_ops = diff(previous, value)

            result = tracker.publish(value)

            if not expected_ops:
                assert None is result
                continue
            assert result is not None
            patch_length = len(compact(expected_ops))
            expected = "delta" if patch_length < len(compact(value)) else "snapshot"
            assert expected == result[0]
            # White-box: the incrementally tracked snapshot length is exact.
            assert tracker._length in (None, len(compact(value)))
            if result[0] == "delta":
                assert patch_length == len(compact(result[1]))
                client = apply(client, result[1])
            else:
                client = copy.deepcopy(result[1])
            assert canonical(value) == canonical(client)


def leaves(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) holding a scalar inside *value*."""
    found = []
    for item in containers(value):
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        found.extend((item, k) for k, v in pairs if not isinstance(v, dict | list))
    return found


class DifferOnly(StateTracker):
    """A tracker whose one-leaf path is off: every publish goes through the differ."""

    one_leaf_limit = -1


class SeededAtOnce(StateTracker):
    """A tracker that seeds its known leaf's reading at the first chance (`_KnownLeaf`)."""

    seed_after = 0


class TestOneLeafPath:
    """`StateTracker`'s one-leaf path publishes exactly what the differ publishes."""

    @staticmethod
    def same(expected: Any, actual: Any) -> bool:
        """Equal as published: the same kind, and operations equal in JSON and in order."""
        return pickle.dumps(expected) == pickle.dumps(actual)

    @pytest.mark.parametrize("tracker", [StateTracker, SeededAtOnce])
    @PROPERTY
    @given(data=st.data())
    def test_publishes_what_the_differ_publishes(
        self, tracker: type[StateTracker], data: st.DataObject
    ) -> None:
        """Random edits, mostly to one leaf again and again: the same publications, to the byte."""
        chooser = Chooser(data=data)
        value = data.draw(json_values)
        fast, slow = tracker(), DifferOnly()
        assert self.same(slow.publish(value), fast.publish(value))
        favourite = None
        for _ in range(data.draw(st.integers(1, 12))):
            roll = chooser.integer(0, 9)
            spots = leaves(value)
            texts = [spot for spot in spots if type(spot[0][spot[1]]) is str]
            if roll in (5, 6) and texts:  # a string swapped for an equal object, or a new text
                holder, key = chooser.choice(texts)
                holder[key] = "".join([*holder[key], "" if chooser.integer(0, 3) else "y"])
            if roll < 7 and spots:  # the same leaf again, when it is still there
                if favourite is None or favourite not in spots:
                    favourite = chooser.choice(spots)
                holder, key = favourite
                old = holder[key]
                if roll == 0:
                    holder[key] = confuse(old)
                elif roll == 1 and texts:  # a string object the value holds elsewhere
                    there, at = chooser.choice(texts)
                    holder[key] = there[at]
                else:
                    holder[key] = chooser.choice([*NUMBERS, "x", old])
            else:
                value = mutate(chooser, value)

            expected, actual = slow.publish(value), fast.publish(value)

            assert self.same(expected, actual)
            assert (slow._length, len(slow._spine)) == (fast._length, len(fast._spine))

    @PROPERTY
    @given(data=st.data())
    def test_a_seeded_reading_publishes_what_the_differ_publishes(
        self, data: st.DataObject
    ) -> None:
        """A long state's one leaf, over and over, among string swaps: the differ's output."""
        chooser = Chooser(data=data)
        value = documents(data.draw(st.integers(20, 60)))
        fast, slow = SeededAtOnce(), DifferOnly()
        assert self.same(slow.publish(value), fast.publish(value))
        docs = value["documents"]
        leaf = chooser.choice(docs)["meta"]["author"]
        seeded = 0
        for _ in range(data.draw(st.integers(4, 24))):
            roll = chooser.integer(0, 9)
            if roll == 4 or not docs:
                edit_documents(chooser, value)
                # The edit may delete the leaf's document or replace its author (with one
                # that has no name): follow a leaf the state still holds, or the rest of
                # the run would edit a detached dict and test nothing.
                if docs and not any(d["meta"]["author"] is leaf for d in docs):
                    leaf = chooser.choice(docs)["meta"]["author"]
                roll = 4
            else:
                doc = chooser.choice(docs)
            if roll == 0:  # an equal string object elsewhere: the seeded reading misses
                doc["id"] = "".join(list(doc["id"]))
            elif roll == 1:  # another text elsewhere: not the leaf's change alone
                doc["id"] += "!"
            elif roll == 2:  # the leaf takes a string object the state holds elsewhere
                holder, key = chooser.choice(
                    [spot for spot in leaves(doc) if type(spot[0][spot[1]]) is str]
                )
                leaf["id"] = holder[key]
            elif roll == 3:
                leaf["id"] = confuse(leaf["id"])
            if roll != 4:
                leaf["id"] = chooser.choice([*NUMBERS, leaf["id"], chooser.integer(0, 99)])

            expected, actual = slow.publish(value), fast.publish(value)

            assert self.same(expected, actual)
            assert (slow._length, len(slow._spine)) == (fast._length, len(fast._spine))
            known = fast._leaf
            seeded += known is not None and known.seeded is not None
        note(f"publishes with a seeded leaf: {seeded}")

    @staticmethod
    def leaf_changed(times: int) -> tuple[StateTracker, dict[str, Any], dict[str, Any], Any]:
        """
        A tracker that published a 200-document state, then *times* changes of one leaf.

        Returns the tracker, the state, the leaf's dict and the tracker's known leaf.
        The second delta at one path makes it the known leaf; its plain reading
        holding `StateTracker.seed_after` times seeds it.
        """
        state = documents(200)
        leaf = state["documents"][100]["meta"]["author"]
        tracker = StateTracker()
        tracker.publish(state)
        for n in range(1, 1 + times):
            leaf["id"] = 100 + n
            tracker.publish(state)
        known = tracker._leaf
        assert known is not None
        return tracker, state, leaf, known

    def test_a_value_mutated_in_place_is_read_with_its_strings_seeded(self) -> None:
        """The known leaf's seeded reading holds while the caller keeps its string objects."""
        tracker, state, leaf, known = self.leaf_changed(1 + StateTracker.seed_after)
        assert known.seeded is None
        leaf["id"] = 99
        assert ("delta", [{"op": "replace", "path": known.path, "value": 99}]) == tracker.publish(
            state
        )
        assert known is tracker._leaf
        assert known.seeded is not None
        # Its strings are memo references: the state around the leaf pickles much shorter.
        seeded = len(known.seeded.head) + len(known.seeded.tail)
        assert seeded < (len(known.plain.head) + len(known.plain.tail)) / 2

        leaf["id"] = 7
        published = tracker.publish(state)

        assert ("delta", [{"op": "replace", "path": known.path, "value": 7}]) == published
        assert known is tracker._leaf
        assert known.seeded is not None

    def test_an_equal_string_object_elsewhere_leaves_the_plain_reading(self) -> None:
        """A string swapped for an equal object: the seeded reading misses, the plain one holds."""
        tracker, state, leaf, known = self.leaf_changed(2 + StateTracker.seed_after)
        assert known.seeded is not None
        name = state["documents"][3]["meta"]["author"]["name"]
        state["documents"][3]["meta"]["author"]["name"] = "".join(list(name))
        assert name == state["documents"][3]["meta"]["author"]["name"]

        leaf["id"] = 7
        published = tracker.publish(state)

        assert ("delta", [{"op": "replace", "path": known.path, "value": 7}]) == published
        assert known is tracker._leaf
        assert known.seeded is None
        state["title"] = "".join(list(state["title"]))  # equal again: the plain reading holds
        leaf["id"] = 8
        assert ("delta", [{"op": "replace", "path": known.path, "value": 8}]) == tracker.publish(
            state
        )
        for n in range(StateTracker.seed_after + 1):  # the leaf is never seeded again
            leaf["id"] = 10 + n
            tracker.publish(state)
        assert known is tracker._leaf
        assert known.seeded is None
        state["title"] = "another"  # another text: not the known leaf's change alone
        leaf["id"] = 9
        ops = tracker.publish(state)
        assert ops is not None
        assert ops[0] == "delta"
        assert sorted([("/title", "another"), (known.path, 9)]) == sorted(
            (op["path"], op["value"]) for op in ops[1]
        )

    def test_a_long_run_of_one_field_takes_the_path(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A small state whose one field keeps changing is published without the differ."""
        state = {"a": {"b": [1, {"c": 0}]}, "d": "x"}
        tracker = StateTracker()
        tracker.publish(state)
        taken: list[bool] = []
        original = StateTracker._one_leaf

        def spy(self: StateTracker, *args: Any) -> Any:
            result = original(self, *args)
            taken.append(result is not None)
            return result

        monkeypatch.setattr(StateTracker, "_one_leaf", spy)
        for n in range(1, 6):  # the first delta measures the document: no path yet
            state["a"]["b"][1]["c"] = n
            tracker.publish(state)

        assert [True] * 4 == taken
