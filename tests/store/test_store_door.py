"""The store's own door (issue 12 points 2 and 8), on every backend.

Whatever reaches a store directly -- ``add()``, ``add_many()``, a keyed
fact's ``save()``, an imported row -- is checked against what the store's
readers accept: a bad value is refused with ``InvalidMemoryError`` (or the
keyed facts' ``ValueError``) naming the field, nothing of the call is
stored, and the store still opens and lists everything it held before.
Values at the edge of each range are accepted and read back equal after
a reopen.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from actormem._door import MAX_DEPTH
from actormem.recorder import KeyedFacts
from actormem.store import InvalidMemoryError, Namespace, NewMemory

from .conftest import StoreFactory

NS = Namespace(user_id="ada", agent_id="bot")


def nested(depth: int, leaf: object = 1) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_list(depth: int) -> Any:
    """``depth`` lists, one inside the other."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


# Each: the fields of a NewMemory a store used to meet from callers, the field the error names.
BAD_FIELDS: list[tuple[str, dict[str, Any], str]] = [
    ("created_at nan", {"created_at": math.nan}, r"created_at .*got nan"),
    ("created_at inf", {"created_at": math.inf}, r"created_at .*got inf"),
    ("created_at -inf", {"created_at": -math.inf}, r"created_at .*got -inf"),
    ("created_at str", {"created_at": "2024-01-01"}, r"created_at .*got str"),
    ("created_at bool", {"created_at": True}, r"created_at .*got bool"),
    ("created_at 1e30", {"created_at": 1e30}, r"created_at .*got 1e\+30"),
    ("created_at before 1970", {"created_at": -1.0}, r"created_at .*got -1"),
    ("kind int", {"kind": 5}, r"kind must be"),
    ("kind None", {"kind": None}, r"kind must be"),
    ("kind empty", {"kind": ""}, r"kind must be"),
    ("kind too long", {"kind": "k" * 65}, r"kind must be"),
    ("tag int", {"tags": ("ok", 5)}, r"tags holds an invalid item 5"),
    ("tag list", {"tags": (["a"],)}, r"tags holds an invalid item"),
    ("source id None", {"source_ids": (None,)}, r"source_ids holds an invalid item"),
    ("importance nan", {"importance": math.nan}, r"importance .*nan"),
    ("importance 2", {"importance": 2.0}, r"importance .*2"),
    ("importance str", {"importance": "0.5"}, r"importance .*'0.5'"),
    ("metadata list", {"metadata": [1, 2]}, r"metadata must be a dict"),
    ("metadata int key", {"metadata": {1: "x"}}, r"metadata: key 1 is a int"),
    ("metadata tuple key", {"metadata": {(1,): "x"}}, r"metadata: key \(1,\) is a tuple"),
    ("metadata nan", {"metadata": {"x": math.nan}}, r"metadata\.x: nan"),
    ("metadata inf in list", {"metadata": {"x": [0, math.inf]}}, r"metadata\.x\[1\]: inf"),
    ("metadata set", {"metadata": {"x": {1}}}, r"metadata\.x: a set"),
    ("metadata bytes", {"metadata": {"x": b"x"}}, r"metadata\.x: a bytes"),
    ("metadata object", {"metadata": {"x": object()}}, r"metadata\.x: a object"),
    (
        "metadata one past the depth limit",
        {"metadata": nested(MAX_DEPTH + 1)},
        rf"metadata(\.a)+: nested deeper than {MAX_DEPTH}",
    ),
    (
        "metadata lists past the depth limit",
        {"metadata": {"l": nested_list(MAX_DEPTH)}},
        rf"metadata\.l(\[0\])+: nested deeper than {MAX_DEPTH}",
    ),
    # 994 levels used to pass and then make every encode raise RecursionError.
    ("metadata 994 deep", {"metadata": nested(994)}, r"metadata(\.a)+: nested deeper"),
    ("metadata 5,000 deep", {"metadata": nested(5_000)}, r"metadata(\.a)+: nested deeper"),
    ("metadata lone surrogate", {"metadata": {"x": "\ud800"}}, r"metadata"),
    ("content too long", {"content": "x" * 1_000_001}, r"content has 1000001 characters"),
    ("content None", {"content": None}, r"content must be a str"),
    ("content bytes", {"content": b"text"}, r"content must be a str"),
    ("content blank", {"content": " \n\t"}, r"content must not be empty"),
    ("content lone surrogate", {"content": "a\udc80b"}, r"content is not valid Unicode"),
]


def _new(fields: dict[str, Any]) -> NewMemory:
    fields = dict(fields)
    return NewMemory(content=fields.pop("content", "a memory with a bad field"), **fields)


def _listing(store: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return sorted((m.id, m.content, m.metadata) for m in store.list(NS, limit=1_000))


@pytest.fixture
def seeded(make_store: StoreFactory) -> Any:
    """A store holding two memories the refusals must leave alone."""
    store = make_store("door")
    store.add(NS, "Ada prefers tea", metadata={"k": [1, {"v": "x"}]})
    store.add_many(NS, ["Ada lives in Paris"])
    return store


@pytest.mark.parametrize(("case", "fields", "error"), BAD_FIELDS, ids=[c[0] for c in BAD_FIELDS])
def test_a_bad_field_is_refused_by_every_write_naming_it_and_nothing_is_stored(
    make_store: StoreFactory, seeded: Any, case: str, fields: dict[str, Any], error: str
) -> None:
    before = _listing(seeded)
    with pytest.raises(InvalidMemoryError, match=error):
        seeded.add(NS, _new(fields))
    # add_many: the bad item is second, after a good one -- neither is stored.
    with pytest.raises(InvalidMemoryError, match=error):
        seeded.add_many(NS, [NewMemory(content="a good memory beside it"), _new(fields)])
    if set(fields) - {"content"} <= {"created_at", "kind", "importance", "tags", "source_ids"}:
        # The keyword form of add() takes the same fields.
        kwargs = {k: v for k, v in fields.items() if k != "content"}
        content = fields.get("content", "a memory with a bad field")
        with pytest.raises(InvalidMemoryError, match=error):
            seeded.add(NS, content, **kwargs)
    assert _listing(seeded) == before
    seeded.close()
    reopened = make_store("door")
    assert _listing(reopened) == before


def test_add_refuses_metadata_that_is_not_a_mapping_naming_it(seeded: Any) -> None:
    # ``dict(metadata)`` used to raise a raw TypeError (or, for a list of pairs, store it).
    for bad in ([1, 2], [("a", 1)], "text", 5):
        with pytest.raises(InvalidMemoryError, match=r"metadata must be a dict, got"):
            seeded.add(NS, "Ada has a cat", metadata=bad)
    assert seeded.count(NS) == 2


def test_values_at_the_edges_are_stored_and_read_back_equal(make_store: StoreFactory) -> None:
    edges: dict[str, dict[str, Any]] = {
        "depth limit": nested(MAX_DEPTH),
        "lists at the limit": {"l": nested_list(MAX_DEPTH - 1)},  # + the object
        "large ints": {"a": 2**63 - 1, "b": -(2**63), "c": 2**64 - 1},
        "extreme floats": {"a": 1e308, "b": 5e-324, "c": -0.5, "d": 1e20, "e": [-1.5e17]},
        "tool-call input as a list": {"input": [1, [2, {"b": None}], "x"]},
        "unicode keys": {"clé 中文 🙂": "é", "": "empty key"},
        "a long string": {"s": "y" * 200_000},
    }
    store = make_store("edges")
    ids: dict[str, str] = {}
    for name, meta in edges.items():
        ids[name] = store.add(NS, f"memory with {name}", metadata=meta).id
    first = store.add(NS, "the earliest memory", created_at=0.0)
    last = store.add(NS, "the latest memory", created_at=253_402_300_799.0)
    store.close()
    store = make_store("edges")
    for name, meta in edges.items():
        got = store.get(NS, ids[name])
        assert got is not None and got.metadata == meta, name
    assert store.get(NS, first.id).created_at == 0.0
    assert store.get(NS, last.id).created_at == 253_402_300_799.0
    # The timeline (one row per day, from 1970 to 9999) still reads for the user.
    assert sum(n for _day, n in store.timeline(NS)) == len(edges) + 2


@pytest.mark.parametrize(
    ("key", "value", "category", "error"),
    [
        (5, "v", "general", r"key must be a str, got int"),
        ("k", None, "general", r"value must be a str, got NoneType"),
        ("k", ["a"], "general", r"value must be a str, got list"),
        ("k", "v", 3.5, r"category must be a str, got float"),
        ("", "v", "general", r"key must not be empty"),
        ("k", "x" * 2_000_000, "general", r"value has 2000000 characters"),
        ("k\ud800", "v", "general", r"key"),
    ],
)
def test_a_keyed_fact_with_a_bad_argument_is_refused_and_nothing_is_stored(
    make_store: StoreFactory, key: Any, value: Any, category: Any, error: str
) -> None:
    store = make_store("facts")
    facts = KeyedFacts(store, NS)
    facts.save("diet", "vegetarian")
    with pytest.raises(ValueError, match=error):
        facts.save(key, value, category)
    assert dict(facts.items()) == {"diet": "vegetarian"}
    store.close()
    facts = KeyedFacts(make_store("facts"), NS)
    assert facts.get("diet") == "vegetarian"
    assert dict(facts.items()) == {"diet": "vegetarian"}


# Each: the column an exported row gets, the value, what the error names besides the row.
BAD_ROWS: list[tuple[str, Any, str]] = [
    ("created_at", 1e30, "created_at"),
    ("created_at", None, "created_at"),
    ("created_at", "2024-01-01", "created_at"),
    ("updated_at", -5, "updated_at"),
    ("last_accessed", 1e300, "last_accessed"),
    ("deleted_at", 1e30, "deleted_at"),
    ("importance", 7, "importance"),
    ("access_count", -1, "access_count"),
    ("access_count", 2.5, "access_count"),
    ("kind", 5, "kind"),
    ("content", None, "content"),
    ("content", "x" * 1_000_001, "content"),
    ("tags", "notalist", "tags"),
    ("tags", [1], "tags"),
    ("metadata", [1, 2], "metadata"),
    ("metadata", nested(MAX_DEPTH + 1), "metadata"),
    ("id", 17, "id"),
    ("id", "", "id"),
    # The check of an id used to name "id" when the bad one was superseded_by.
    ("superseded_by", "", "superseded_by"),
    ("superseded_by", "x" * 300, "superseded_by"),
    ("superseded_by", 5, "superseded_by"),
    ("user_id", 5, "user_id"),
]


@pytest.mark.parametrize(
    ("column", "value", "named"), BAD_ROWS, ids=[f"{c[0]}={str(c[1])[:12]}" for c in BAD_ROWS]
)
def test_an_imported_row_with_a_bad_value_is_refused_naming_row_and_column(
    make_store: StoreFactory, tmp_path: Path, column: str, value: Any, named: str
) -> None:
    source = make_store("source")
    source.add_many(NS, [f"exported memory {i}" for i in range(3)])
    exported = tmp_path / "rows.jsonl"
    source.export(NS, exported)
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    rows[2][column] = value
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))

    target = make_store("target")
    target.add(Namespace(user_id="ada"), "already there")
    with pytest.raises(InvalidMemoryError) as info:
        target.import_(bad)
    message = str(info.value)
    assert "import row 3" in message and named in message, message
    assert re.search(r"\S", message)
    # Nothing of the file is stored, not even its good first rows.
    assert target.count(Namespace(user_id="ada"), include_deleted=True) == 1
    target.close()
    again = make_store("target")
    assert [m.content for m in again.list(Namespace(user_id="ada"), limit=10)] == ["already there"]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"user_id": 5}, r"user_id must be a str, got int"),
        ({"user_id": ["ada"]}, r"user_id must be a str, got list"),
        ({"user_id": "ada", "agent_id": math.nan}, r"agent_id must be a str, got float"),
        ({"user_id": ""}, r"user_id '' must be 1-256 characters"),
        ({"user_id": "a\x00b"}, r"user_id .* no control characters"),
        ({"user_id": "x" * 257}, r"user_id .* must be 1-256 characters"),
        ({"user_id": None}, r"needs at least one of"),
    ],
)
def test_a_namespace_with_a_bad_name_is_refused_naming_it(
    seeded: Any, fields: dict[str, Any], error: str
) -> None:
    from actormem.store import NamespaceError

    before = _listing(seeded)
    with pytest.raises(NamespaceError, match=error):
        seeded.add(Namespace(**fields), "Ada has a cat")
    with pytest.raises(NamespaceError, match=error):
        seeded.add_many(Namespace(**fields), ["Ada has a cat"])
    assert _listing(seeded) == before


def _exact_types(rec: Any) -> list[str]:
    """The fields of a record or history row whose text is not an exact ``str``."""
    wrong = []
    for name in ("id", "memory_id", "kind", "content", "content_hash", "reason", "op"):
        value = getattr(rec, name, None)
        if value is not None and type(value) is not str:
            wrong.append(f"{name}={type(value).__name__}")
    for name in ("tags", "source_ids"):
        wrong += [
            f"{name}={type(t).__name__}" for t in getattr(rec, name, ()) if type(t) is not str
        ]
    wrong += [
        f"namespace.{k}={type(v).__name__}" for k, v in rec.namespace.items() if type(v) is not str
    ]
    return wrong


def test_str_subclasses_given_to_any_write_are_stored_and_read_back_as_exact_str(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """A ``StrEnum`` or other ``str`` subclass passed as a namespace id, kind,
    content, tag, source id, id or reason is validated into its plain text:
    every record the store holds (and hands back, before and after a reopen)
    has exact ``str`` fields, on every write path."""
    import enum

    class E(enum.StrEnum):
        USER = "eve"
        KIND = "preference"
        TAG = "colour"
        WHY = "asked to"
        CATEGORY = "likes"

    class S(str):
        pass

    ns = Namespace(user_id=E.USER, agent_id=S("bot"))
    scope = Namespace(user_id="eve")
    store = make_store("sub")
    added = store.add(
        ns, S("Eve likes green"), kind=E.KIND, tags=[E.TAG, S("green")], source_ids=[S("m1")]
    ).id
    batch = store.add_many(
        ns,
        [
            S("Eve has a dog"),
            NewMemory(
                content=S("Eve lives in Oslo"),
                kind=S("fact"),  # equal to the default: the fast path must not keep the subclass
                tags=(S("place"),),
                source_ids=(E.TAG,),
                id=S("oslo-1"),
            ),
        ],
    )
    gone = batch[0].id
    store.update(ns, added, content=S("Eve likes blue"), kind=E.KIND, tags=[E.TAG], reason=E.WHY)
    store.delete(Namespace(user_id=E.USER), gone, reason=S("moved on"))
    KeyedFacts(store, ns).save(S("pet"), S("a dog named Rex"), E.CATEGORY)
    exported = tmp_path / "eve.jsonl"
    store.export(scope, exported)
    target = make_store("target")
    target.import_(exported, namespace=Namespace(user_id=E.USER, session_id=S("s1")))

    def check(s: Any) -> int:
        records = s.list(scope, limit=100, include_deleted=True)
        records += [
            r for r in (s.get(Namespace(user_id=E.USER), m.id) for m in records) if r is not None
        ]
        rows = s.history(Namespace(user_id=E.USER))
        problems = {r.id: _exact_types(r) for r in [*records, *rows] if _exact_types(r)}
        assert problems == {}
        return len(records)

    assert check(store) >= 4 and check(target) >= 3
    reasons = {h.reason for h in store.history(scope, added)}
    assert "asked to" in reasons
    store.close()
    target.close()
    assert check(make_store("sub")) >= 4 and check(make_store("target")) >= 3
