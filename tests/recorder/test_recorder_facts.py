from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.recorder import FleetingMemory, KeyedFacts, facts_namespace
from actormem.state import StateError
from actormem.store import DuckDBStore, Namespace


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore(tmp_path / "f.duckdb", embedder=HashEmbedder(64)) as s:
        yield s


def test_facts_namespace_is_a_narrow_sibling() -> None:
    ns = Namespace(user_id="u", agent_id="a")
    fns = facts_namespace(ns)
    assert fns == Namespace(user_id="u", agent_id="a#facts")
    assert not ns.contains(fns) and Namespace(user_id="u").contains(fns)
    assert facts_namespace(Namespace(user_id="u")) == Namespace(user_id="u#facts")
    run = Namespace(user_id="u", run_id="r")
    assert facts_namespace(run) == Namespace(user_id="u", run_id="r#facts")


def test_keyed_facts_survive_a_new_instance(store: DuckDBStore) -> None:
    ns = Namespace(user_id="u", agent_id="a")
    facts = KeyedFacts(store, ns)
    assert facts.save("phone_home", "555-1234").op == "ADD"
    assert facts.save("phone_work", "555-1234").op == "ADD"  # similar content, never merged
    assert facts.save("phone_home", "555-9999", "contact").op == "UPDATE"
    assert facts.save("phone_home", "555-9999", "contact").op == "NOOP"
    again = KeyedFacts(store, ns)
    assert again.get("phone_home") == "555-9999" and again.get("phone_work") == "555-1234"
    assert again.items() == {"phone_home": "555-9999", "phone_work": "555-1234"}
    assert again.delete("phone_work") and not again.delete("phone_work")
    assert again.get("phone_work") is None and again.history("nope") == []
    ops = [h.op for h in again.history("phone_home")]
    assert "UPDATE" in ops
    other = KeyedFacts(store, Namespace(user_id="v", agent_id="a"))
    assert other.get("phone_home") is None


def test_keyed_fact_deleted_elsewhere_is_forgotten(store: DuckDBStore) -> None:
    facts = KeyedFacts(store, Namespace(user_id="u"))
    mid = facts.save("k", "v").id
    store.delete(facts.namespace, mid)
    assert facts.get("k") is None
    assert facts.save("k", "w").op == "ADD" and facts.get("k") == "w"


@pytest.mark.parametrize(
    ("key", "value", "category", "message"),
    [
        ("", "v", "c", "key must not be empty"),
        (3, "v", "c", "key must be a str"),
        ("k" * 201, "v", "c", "limit is 200"),
        ("k", "", "c", "value must not be empty"),
        ("k", None, "c", "value must be a str"),
        ("k", "v", "", "category must not be empty"),
    ],
)
def test_keyed_fact_arguments_are_checked(
    store: DuckDBStore, key: object, value: object, category: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        KeyedFacts(store, Namespace(user_id="u")).save(key, value, category)  # type: ignore[arg-type]


def test_fleeting_memory_is_a_dict_that_saves() -> None:
    f = FleetingMemory()
    f["a"] = 1
    f["b"] = [1, 2]
    f["obj"] = object()
    assert len(f) == 3 and "a" in f and f.get("zz") is None
    assert f.state_dict() == {"items": {"a": 1, "b": [1, 2]}}
    del f["a"]
    assert sorted(f) == ["b", "obj"] and "FleetingMemory(" in repr(f)
    f.load_state_json(b'{"items": {"x": "y"}}')
    assert f.snapshot() == {"x": "y"}
    f.clear()
    assert dict(f) == {}
    with pytest.raises(TypeError, match="keys must be str"):
        f[1] = 2  # type: ignore[index]
    with pytest.raises(StateError):
        f.load_state_dict({"items": 3})
    with pytest.raises(StateError):
        f.load_state_json(b"[")


def test_get_fact_reads_the_index_and_a_miss_asks_the_store_only_after_a_commit(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = Namespace(user_id="u")
    facts = KeyedFacts(store, ns)
    other = KeyedFacts(store, ns)  # e.g. a second runtime sharing the store
    facts.save("city", "Lisbon")
    assert facts.get("nope") is None  # loads the key index once
    assert other.get("city") == "Lisbon"  # and the other instance's
    lists: list[object] = []
    real_list = store.list

    def counted(*args: object, **kwargs: object) -> object:
        lists.append(args)
        return real_list(*args, **kwargs)  # type: ignore[arg-type]

    def no_sql() -> object:
        raise AssertionError("get_fact ran a query")

    real_reader = store._reader
    monkeypatch.setattr(store, "list", counted)
    monkeypatch.setattr(store, "_reader", no_sql)
    for _ in range(3):
        assert facts.get("city") == "Lisbon"
        assert facts.get("nope") is None
    assert lists == []  # nothing committed since the key index was read
    monkeypatch.setattr(store, "_reader", real_reader)
    other.save("nope", "now set")  # a commit through another instance
    monkeypatch.setattr(store, "_reader", no_sql)
    assert facts.get("nope") == "now set"  # the miss asked the store again ...
    # ... its live memories (the index), not its file: no list, no query, so no
    # pending write applied on the caller's path (that was save_fact's p99)
    assert lists == []
    assert facts.save("city", "Porto").op == "UPDATE" and other.get("city") == "Porto"
    assert other.save("town", "Braga").op == "ADD"  # a new key: a miss, then an add
    assert facts.save("town", "Faro").op == "UPDATE"  # found through the other's add
    assert facts.delete("town") and other.get("town") is None
    assert lists == []
    monkeypatch.setattr(store, "_reader", real_reader)
    assert sorted(r.metadata["value"] for r in store.list(facts.namespace)) == ["Porto", "now set"]


def test_get_of_a_live_memory_is_scoped_and_needs_no_query(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = Namespace(user_id="u", agent_id="a")
    mid = store.add(ns, "kept in the index").id
    gone = store.add(ns, "deleted later").id
    store.delete(ns, gone)

    def no_sql() -> object:
        raise AssertionError("a live get ran a query")

    monkeypatch.setattr(store, "_reader", no_sql)
    rec = store.get(Namespace(user_id="u"), mid)
    assert rec is not None and rec.content == "kept in the index"
    assert store.get(Namespace(user_id="other"), mid) is None
    assert store.get(Namespace(user_id="u", agent_id="b"), mid) is None
    assert store.get(ns, gone) is None
    monkeypatch.undo()
    dead = store.get(ns, gone, include_deleted=True)
    assert dead is not None and dead.deleted_at is not None
