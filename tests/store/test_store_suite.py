"""The backend-independent store suite (runs once per backend in ``BACKENDS``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actormem.recorder import facts_namespace
from actormem.store import (
    EmbeddingError,
    InvalidMemoryError,
    MemoryNotFoundError,
    Namespace,
    NamespaceError,
    NewMemory,
    SearchConfig,
    SearchFilters,
    relevance,
)
from tests.store.conftest import FakeClock, StoreFactory

DAY = 86_400.0


# -- writes and read-your-writes -------------------------------------------------------


def test_add_then_get_and_list(store: Any, ns: Namespace) -> None:
    res = store.add(ns, "Alice prefers green tea", tags=("drink",), importance=0.7)
    assert res.op == "ADD"
    rec = store.get(ns, res.id)
    assert rec is not None
    assert rec.content == "Alice prefers green tea"
    assert rec.tags == ("drink",)
    assert rec.importance == pytest.approx(0.7)
    assert rec.namespace == ns
    assert rec.kind == "fact"
    assert [r.id for r in store.list(ns)] == [res.id]
    assert store.count(ns) == 1


def test_read_your_writes_every_add_is_found_by_the_next_search(store: Any, ns: Namespace) -> None:
    for i in range(60):
        text = f"note number {i} mentions code zx{i}q"
        res = store.add(ns, text)
        hits = store.search(f"zx{i}q", ns, limit=3)
        assert hits and hits[0].memory.id == res.id, i


def test_add_many_is_one_batch_with_results_in_order(store: Any, ns: Namespace) -> None:
    items = [f"fact {i} about topic {i % 7}" for i in range(200)]
    results = store.add_many(ns, items)
    assert [r.op for r in results] == ["ADD"] * 200
    assert store.count(ns) == 200
    for i in (0, 57, 199):
        assert store.get(ns, results[i].id).content == items[i]


def test_written_memories_survive_reopen(make_store: StoreFactory, ns: Namespace) -> None:
    s1 = make_store("durable")
    ids = [r.id for r in s1.add_many(ns, ["one fact", "two facts", "three"])]
    s1.close()
    s2 = make_store("durable")
    assert {r.id for r in s2.list(ns)} == set(ids)
    assert s2.search("three", ns)[0].memory.id == ids[2]


def test_new_memory_fields_are_kept(store: Any, ns: Namespace) -> None:
    item = NewMemory(
        content="Meeting moved to Friday",
        kind="episode",
        importance=0.9,
        tags=("calendar", "work"),
        source_ids=("m1", "m2"),
        metadata={"speaker": "Bob", "n": 3},
        created_at=1_600_000_000.0,
        id="custom-id-1",
    )
    res = store.add(ns, item)
    assert res.id == "custom-id-1"
    rec = store.get(ns, "custom-id-1")
    assert rec.kind == "episode"
    assert rec.source_ids == ("m1", "m2")
    assert rec.metadata == {"speaker": "Bob", "n": 3}
    assert rec.created_at == pytest.approx(1_600_000_000.0)
    with pytest.raises(InvalidMemoryError, match="already exists"):
        store.add(ns, NewMemory(content="something else", id="custom-id-1"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"content": ""}, "empty"),
        ({"content": 42}, "str"),
        ({"content": "x", "importance": 1.5}, "importance"),
        ({"content": "x", "importance": float("nan")}, "importance"),
        ({"content": "x", "tags": "notatuple"}, "tags"),
        ({"content": "x", "kind": ""}, "kind"),
        ({"content": "x", "metadata": {"bad": object()}}, "JSON"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(
    store: Any, ns: Namespace, kwargs: dict[str, Any], match: str
) -> None:
    kwargs = dict(kwargs)  # the parameter is shared by every backend's run
    content = kwargs.pop("content")
    with pytest.raises(InvalidMemoryError, match=match):
        store.add(ns, content, **kwargs)
    assert store.count(ns) == 0


def test_bad_namespaces_are_refused(store: Any) -> None:
    with pytest.raises(NamespaceError):
        Namespace()
    with pytest.raises(NamespaceError):
        Namespace(user_id="")
    with pytest.raises(NamespaceError):
        Namespace(user_id="a\x00b")
    with pytest.raises(NamespaceError):
        store.add("alice", "text")  # type: ignore[arg-type]
    with pytest.raises(NamespaceError):
        store.search("text", {"user_id": "alice"})  # type: ignore[arg-type]


# -- dedup and merge -------------------------------------------------------------------


def test_exact_duplicate_is_merged_not_inserted(store: Any, ns: Namespace) -> None:
    first = store.add(ns, "Alice prefers green tea", tags=("a",), importance=0.3)
    second = store.add(ns, "  alice PREFERS green   tea ", tags=("b",), importance=0.8)
    assert second.op == "MERGE"
    assert second.id == first.id
    assert second.similarity == 1.0
    rec = store.get(ns, first.id)
    assert rec.tags == ("a", "b")
    assert rec.importance == pytest.approx(0.8)
    assert store.count(ns) == 1
    ops = [h.op for h in store.history(ns, first.id)]
    assert ops == ["ADD", "MERGE"]


def test_same_content_in_other_namespace_is_not_a_duplicate(store: Any, ns: Namespace) -> None:
    a = store.add(ns, "shared sentence")
    b = store.add(Namespace(user_id="bob"), "shared sentence")
    assert b.op == "ADD" and b.id != a.id


def test_duplicates_inside_one_batch_are_merged(store: Any, ns: Namespace) -> None:
    res = store.add_many(ns, ["same text", "other text", "Same  text"])
    assert [r.op for r in res] == ["ADD", "ADD", "MERGE"]
    assert res[2].id == res[0].id
    assert store.count(ns) == 2


def test_dedup_false_inserts_everything(store: Any, ns: Namespace) -> None:
    res = store.add_many(ns, ["same text", "same text"], dedup=False)
    assert [r.op for r in res] == ["ADD", "ADD"]
    assert store.count(ns) == 2


def test_near_duplicate_merges_into_the_more_relevant(
    make_store: StoreFactory, ns: Namespace, clock: FakeClock
) -> None:
    store = make_store(near_duplicate_threshold=0.8)
    old = store.add(ns, "the cat sat on the red mat", importance=0.9, tags=("pets",))
    for _ in range(5):
        store.search("cat mat", ns)
    clock.advance(seconds=10)
    new = store.add(ns, "the cat sat on the red mat today", importance=0.2, tags=("today",))
    assert new.op == "MERGE"
    assert new.id == old.id
    assert new.similarity is not None and 0.8 <= new.similarity < 1.0
    rec = store.get(ns, old.id)
    assert set(rec.tags) == {"pets", "today"}
    assert rec.importance == pytest.approx(0.9)
    assert store.count(ns) == 1


def test_near_duplicate_new_survivor_absorbs_old(
    make_store: StoreFactory, ns: Namespace, clock: FakeClock
) -> None:
    store = make_store(near_duplicate_threshold=0.8)
    old = store.add(ns, "the cat sat on the red mat", importance=0.1, tags=("old",))
    store.search("cat", ns)
    store.search("cat", ns)
    clock.advance(days=40)  # the old memory has faded
    new = store.add(ns, "the cat sat on the red mat today", importance=0.6, tags=("new",))
    assert new.op == "MERGE"
    assert new.merged_from == old.id
    assert new.id != old.id
    survivor = store.get(ns, new.id)
    assert set(survivor.tags) == {"old", "new"}
    assert survivor.access_count == 2  # absorbed the loser's retrievals
    loser = store.get(ns, old.id, include_deleted=True)
    assert loser.superseded_by == new.id
    assert store.get(ns, old.id) is None
    assert [h.memory.id for h in store.search("cat mat", ns)] == [new.id]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Ada ran 5 km along the river on Monday", "Ada ran 12 km along the river on Monday"),
        ("User lives in Lisbon since last year", "User lives in Porto since last year"),
    ],
)
def test_similar_texts_that_differ_in_a_name_or_number_are_never_merged(
    make_store: StoreFactory, ns: Namespace, first: str, second: str
) -> None:
    """Regression: near-duplicate merging folded "5 km" into "12 km" (a lost fact)."""
    store = make_store(near_duplicate_threshold=0.3)
    store.add(ns, first)
    assert store.add(ns, second).op == "ADD"
    other = Namespace(user_id="batch")
    assert [r.op for r in store.add_many(other, [first, second])] == ["ADD", "ADD"]
    assert store.consolidate(ns, threshold=0.3).merged == ()
    assert store.prune_duplicates(ns, threshold=0.5).merged == ()
    assert store.count(ns) == 2 and store.count(other) == 2
    # texts that differ only in common words still merge
    assert store.add(ns, first + " indeed").op == "MERGE"


def test_near_duplicates_off(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=None)
    store.add(ns, "the cat sat on the red mat")
    assert store.add(ns, "the cat sat on the red mat today").op == "ADD"


# -- update, delete, history -----------------------------------------------------------------


@pytest.mark.parametrize("dedup", [True, False])
def test_every_added_memory_has_an_add_history_row(store: Any, ns: Namespace, dedup: bool) -> None:
    results = store.add_many(ns, ["Ada lives in Paris", "Ada likes tea"], dedup=dedup)
    for res in results:
        rows = store.history(ns, res.id)
        assert [(h.op, h.old_content) for h in rows] == [("ADD", None)], dedup
        assert rows[0].new_content == store.get(ns, res.id).content


def test_update_changes_content_and_search(store: Any, ns: Namespace) -> None:
    res = store.add(ns, "Bob lives in Paris")
    up = store.update(ns, res.id, content="Bob lives in Berlin", importance=0.9, reason="moved")
    assert up.op == "UPDATE"
    rec = store.get(ns, res.id)
    assert rec.content == "Bob lives in Berlin"
    assert store.search("Berlin", ns, mode="keyword")[0].memory.id == res.id
    assert store.search("Paris", ns, mode="keyword") == []
    hist = store.history(ns, res.id)
    assert [(h.op, h.old_content, h.new_content) for h in hist] == [
        ("ADD", None, "Bob lives in Paris"),
        ("UPDATE", "Bob lives in Paris", "Bob lives in Berlin"),
    ]
    assert hist[1].reason == "moved"
    assert store.update(ns, res.id, importance=0.9).op == "NOOP"


def test_update_tags_and_metadata(store: Any, ns: Namespace) -> None:
    res = store.add(ns, "likes jazz", tags=("music",))
    store.update(ns, res.id, tags=["music", "jazz"], metadata={"src": "chat"})
    rec = store.get(ns, res.id)
    assert rec.tags == ("music", "jazz")
    assert rec.metadata == {"src": "chat"}
    hits = store.search("jazz", ns, filters=SearchFilters(tags_all=("jazz",)))
    assert [h.memory.id for h in hits] == [res.id]


def test_delete_is_soft_and_recorded(store: Any, ns: Namespace) -> None:
    res = store.add(ns, "temporary note")
    assert store.delete(ns, res.id, reason="user asked").op == "DELETE"
    assert store.get(ns, res.id) is None
    rec = store.get(ns, res.id, include_deleted=True)
    assert rec is not None and rec.deleted_at is not None
    assert store.search("temporary", ns) == []
    assert store.history(ns, res.id)[-1].op == "DELETE"
    with pytest.raises(MemoryNotFoundError):
        store.delete(ns, res.id)


def test_update_and_delete_are_scoped(store: Any, ns: Namespace) -> None:
    res = store.add(ns, "private to alice")
    other = Namespace(user_id="mallory")
    with pytest.raises(MemoryNotFoundError):
        store.update(other, res.id, content="hijacked")
    with pytest.raises(MemoryNotFoundError):
        store.delete(other, res.id)
    assert store.get(other, res.id) is None
    assert store.get(ns, res.id).content == "private to alice"


# -- search ----------------------------------------------------------------------------


def test_search_components_and_keyword_digits(store: Any, ns: Namespace) -> None:
    store.add_many(ns, ["item4242 is in the red box", "item4243 is in the blue box", "unrelated"])
    hits = store.search("item4242", ns, mode="keyword")
    assert len(hits) == 1
    hit = hits[0]
    assert hit.memory.content.startswith("item4242")
    assert hit.bm25 > 0
    assert 0 <= hit.fused <= 1
    assert 0 <= hit.relevance <= 1
    assert hit.score == pytest.approx(0.9 * hit.fused + 0.1 * hit.relevance)


def test_search_modes(store: Any, ns: Namespace) -> None:
    store.add_many(ns, ["apples and pears", "cars and trucks"])
    vec = store.search("apple pear", ns, mode="vector", limit=2)
    assert len(vec) == 2 and all(h.bm25 == 0 for h in vec)
    kw = store.search("apples", ns, mode="keyword")
    assert [h.memory.content for h in kw] == ["apples and pears"]
    assert all(h.cosine == 0 for h in kw)
    with pytest.raises(InvalidMemoryError):
        store.search("x", ns, mode="fuzzy")


def test_weighted_fusion_formula(store: Any, ns: Namespace) -> None:
    store.add_many(ns, ["red apple pie recipe", "green apple", "blue sky"])
    cfg = SearchConfig(vector_weight=0.3, keyword_weight=0.7, relevance_weight=0.0)
    hits = store.search("apple pie", ns, config=cfg, touch=False)
    best_bm25 = max(h.bm25 for h in hits)
    for h in hits:
        expected = (0.3 * max(h.cosine, 0.0) + 0.7 * h.bm25 / best_bm25) / 1.0
        assert h.fused == pytest.approx(expected, rel=1e-5)
        assert h.score == pytest.approx(h.fused, rel=1e-6)
    assert hits[0].memory.content == "red apple pie recipe"


def test_rrf_fusion_formula(store: Any, ns: Namespace) -> None:
    store.add_many(ns, ["red apple pie recipe", "green apple", "blue sky"])
    cfg = SearchConfig(method="rrf", rrf_k=60, relevance_weight=0.0)
    hits = store.search("apple pie", ns, config=cfg, touch=False)
    by_vec = sorted(hits, key=lambda h: -h.cosine)
    by_kw = [h for h in sorted(hits, key=lambda h: -h.bm25) if h.bm25 > 0]
    for h in hits:
        rv = next(i for i, x in enumerate(by_vec, 1) if x.memory.id == h.memory.id)
        parts = 0.5 / (60 + rv)
        kws = [i for i, x in enumerate(by_kw, 1) if x.memory.id == h.memory.id]
        if kws:
            parts += 0.5 / (60 + kws[0])
        assert h.fused == pytest.approx(parts / (1.0 / 61), rel=1e-6)
    assert hits[0].memory.content == "red apple pie recipe"


def test_relevance_blend_prefers_important_memory_on_a_tie(store: Any, ns: Namespace) -> None:
    a = store.add(ns, "project deadline alpha", importance=0.1)
    b = store.add(ns, "project deadline beta", importance=1.0)
    cfg = SearchConfig(relevance_weight=0.5)
    hits = store.search("project deadline", ns, config=cfg, mode="keyword")
    assert [h.memory.id for h in hits] == [b.id, a.id]


def test_filters(store: Any, clock: FakeClock) -> None:
    u = Namespace(user_id="u")
    store.add(Namespace(user_id="u", agent_id="a1", run_id="r1"), "alpha note one", kind="fact")
    clock.advance(days=2)
    store.add(
        Namespace(user_id="u", agent_id="a2", run_id="r2"),
        "alpha note two",
        kind="episode",
        tags=("t1",),
        importance=0.9,
    )
    t_mid = clock.now - DAY

    def contents(filters: SearchFilters) -> set[str]:
        return {h.memory.content for h in store.search("alpha note", u, filters=filters)}

    assert contents(SearchFilters(kinds=("episode",))) == {"alpha note two"}
    assert contents(SearchFilters(tags_any=("t1", "zz"))) == {"alpha note two"}
    assert contents(SearchFilters(tags_all=("t1", "zz"))) == set()
    assert contents(SearchFilters(created_before=t_mid)) == {"alpha note one"}
    assert contents(SearchFilters(created_after=t_mid)) == {"alpha note two"}
    assert contents(SearchFilters(agent_id="a1")) == {"alpha note one"}
    assert contents(SearchFilters(run_id="r2")) == {"alpha note two"}
    assert contents(SearchFilters(min_importance=0.8)) == {"alpha note two"}
    assert contents(SearchFilters(kinds=("summary",))) == set()
    # a filter never widens the scope
    scoped = Namespace(user_id="u", agent_id="a1")
    assert store.search("alpha", scoped, filters=SearchFilters(agent_id="a2")) == []


def test_search_counts_retrievals(store: Any, ns: Namespace, clock: FakeClock) -> None:
    res = store.add(ns, "count me")
    clock.advance(seconds=30)
    hit = store.search("count me", ns)[0]
    assert hit.memory.access_count == 1
    assert hit.memory.last_accessed == pytest.approx(clock.now)
    store.search("count me", ns)
    store.search("count me", ns, touch=False)
    assert store.get(ns, res.id).access_count == 2
    store.flush()
    assert store.get(ns, res.id).access_count == 2


def test_touches_are_flushed_to_disk_on_close(make_store: StoreFactory, ns: Namespace) -> None:
    s1 = make_store("touch")
    mid = s1.add(ns, "remember to flush").id
    for _ in range(3):
        s1.search("flush", ns)
    s1.close()
    s2 = make_store("touch")
    assert s2.get(ns, mid).access_count == 3


def test_search_bad_arguments(store: Any, ns: Namespace) -> None:
    with pytest.raises(InvalidMemoryError):
        store.search(123, ns)
    with pytest.raises(InvalidMemoryError):
        store.search("x", ns, limit=0)
    with pytest.raises(InvalidMemoryError):
        store.search("x", ns, filters={"kinds": ["fact"]})
    with pytest.raises(InvalidMemoryError):
        SearchConfig(method="max")
    assert store.search("", ns) == []


# -- namespaces ------------------------------------------------------------------------


def test_scope_semantics(store: Any) -> None:
    store.add(Namespace(user_id="u1", agent_id="a"), "tea note")
    store.add(Namespace(user_id="u1", agent_id="b"), "tea note too")
    store.add(Namespace(user_id="u2", agent_id="a"), "tea note as well")
    assert len(store.search("tea", Namespace(user_id="u1"))) == 2
    assert len(store.search("tea", Namespace(agent_id="a"))) == 2
    assert len(store.search("tea", Namespace(user_id="u1", agent_id="b"))) == 1
    assert store.search("tea", Namespace(user_id="u3")) == []


def test_forget_removes_memories_and_history_for_good(
    make_store: StoreFactory, ns: Namespace
) -> None:
    store = make_store("forget")
    ids = [r.id for r in store.add_many(ns, ["secret one", "secret two"])]
    store.update(ns, ids[0], content="secret one, changed")
    store.delete(ns, ids[1])
    keep = store.add(Namespace(user_id="bob"), "bob keeps this").id
    report = store.forget(Namespace(user_id="alice"))
    assert report.memories == 2
    assert report.history == 4
    assert store.count(ns, include_deleted=True) == 0
    assert store.history(ns) == []
    assert store.search("secret", ns) == []
    assert store.get(Namespace(user_id="bob"), keep) is not None
    store.close()
    again = make_store("forget")
    assert again.count(ns, include_deleted=True) == 0
    assert again.search("secret", Namespace(user_id="alice")) == []


# -- maintenance -----------------------------------------------------------------------


def test_decay_arithmetic_and_pruning(store: Any, ns: Namespace, clock: FakeClock) -> None:
    t0 = clock.now
    keep = store.add(ns, "important rule", importance=1.0)
    drop = store.add(ns, "passing remark", importance=0.0)
    clock.advance(days=10)
    rel_keep = float(relevance(1.0, 0, t0, t0, clock.now))
    expected_keep = rel_keep * 0.95**10
    assert rel_keep == pytest.approx(0.3 / 11 + 0.4 + 0.1 * 0.95**10)
    rel_drop = float(relevance(0.0, 0, t0, t0, clock.now))
    assert rel_drop == pytest.approx(0.3 / 11 + 0.1 * 0.95**10)
    assert rel_drop * 0.95**10 < 0.10 < expected_keep
    report = store.decay(ns, rate=0.95, threshold=0.10)
    assert report.action == "decay"
    assert report.examined == 2
    assert report.removed == (drop.id,)
    assert report.details["min_decayed"] == pytest.approx(rel_drop * 0.95**10)
    assert store.get(ns, keep.id) is not None
    assert store.get(ns, drop.id) is None
    assert "decay" in store.history(ns, drop.id)[-1].reason


def test_auto_forget_and_prune_stale(store: Any, ns: Namespace, clock: FakeClock) -> None:
    low = store.add(ns, "low value", importance=0.0)
    high = store.add(ns, "high value", importance=1.0)
    clock.advance(days=10)
    fresh = store.add(ns, "fresh value", importance=0.0)
    rep = store.auto_forget(ns, threshold=0.15)
    assert rep.removed == (low.id,)
    rep = store.prune_stale(ns, max_age_days=5)
    assert rep.removed == (high.id,)
    assert [r.id for r in store.list(ns)] == [fresh.id]


def test_consolidate_merges_similar(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=None)
    a = store.add(ns, "the cat sat on the red mat", importance=0.9, tags=("x",))
    b = store.add(ns, "the cat sat on the red mat today", importance=0.2, tags=("y",))
    c = store.add(ns, "quantum chromodynamics lecture notes")
    store.search("cat today", ns, mode="keyword")  # b: one access
    rep = store.consolidate(ns, threshold=0.8)
    assert rep.merged == ((a.id, b.id),)
    survivor = store.get(ns, a.id)
    assert set(survivor.tags) == {"x", "y"}
    assert survivor.access_count >= 1
    assert store.get(ns, b.id, include_deleted=True).superseded_by == a.id
    assert {r.id for r in store.list(ns)} == {a.id, c.id}


def test_prune_duplicates_uses_jaccard(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=None)
    store.add(ns, "user likes dark mode in the editor")
    store.add(ns, "user likes dark mode in the editor!")
    store.add(ns, "user dislikes light themes entirely")
    rep = store.prune_duplicates(ns, threshold=0.7)
    assert len(rep.merged) == 1
    assert store.count(ns) == 2


def test_enforce_cap_evicts_least_relevant(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(max_memories=3)
    res = store.add_many(
        ns,
        [NewMemory(content=f"memory {w}", importance=i / 10) for i, w in enumerate("abcde")],
    )
    assert store.count(ns) == 3
    kept = {r.content for r in store.list(ns)}
    assert kept == {"memory c", "memory d", "memory e"}
    assert len(res) == 5
    rep = store.enforce_cap(ns, 1)
    assert len(rep.removed) == 2
    assert [r.content for r in store.list(ns)] == ["memory e"]


# -- analytics -------------------------------------------------------------------------


def test_analytics(store: Any, clock: FakeClock) -> None:
    u = Namespace(user_id="u")
    store.add(Namespace(user_id="u", agent_id="a1", run_id="r1"), "x one", tags=("t1", "t2"))
    store.add(Namespace(user_id="u", agent_id="a1", run_id="r2"), "x two", tags=("t1",))
    clock.advance(days=1)
    store.add(Namespace(user_id="u", agent_id="a2", session_id="s1"), "x three", kind="episode")
    store.add(Namespace(user_id="other"), "x four")
    assert store.counts_by(u, "agent_id") == {"a1": 2, "a2": 1}
    assert store.counts_by(u, "run_id") == {"r1": 1, "r2": 1, "": 1}
    assert store.counts_by(u, "kind") == {"fact": 2, "episode": 1}
    assert store.counts_by(u, "session_id")["s1"] == 1
    assert [c for _, c in store.timeline(u)] == [2, 1]
    assert store.top_tags(u) == [("t1", 2), ("t2", 1)]
    for _ in range(3):
        store.search("three", u, mode="keyword")
    assert store.most_accessed(u, 1)[0].content == "x three"
    stats = store.stats(u)
    assert sum(s.live for s in stats) == 3
    assert {s.namespace.agent_id for s in stats} == {"a1", "a2"}
    with pytest.raises(InvalidMemoryError):
        store.counts_by(u, "content; DROP TABLE memories")


# -- export / import -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_export_import_round_trip(
    make_store: StoreFactory, ns: Namespace, tmp_path: Path, suffix: str
) -> None:
    src = make_store("src")
    items = [
        NewMemory(content=f"fact {i}", importance=0.1 * i, tags=(f"t{i}",), metadata={"i": i})
        for i in range(5)
    ]
    ids = [r.id for r in src.add_many(ns, items)]
    src.delete(ns, ids[4])
    src.search("fact 1", ns)
    progress: list[tuple[int, int]] = []
    out = tmp_path / f"export{suffix}"
    rep = src.export(Namespace(user_id="alice"), out, progress=lambda d, t: progress.append((d, t)))
    assert rep.memories == 5
    assert progress[-1] == (5, 5)
    with pytest.raises(InvalidMemoryError, match="exists"):
        src.export(ns, out)
    dst = make_store("dst")
    imp = dst.import_(out)
    assert imp.read == 5 and imp.added == 5
    for mid in ids[:4]:
        a, b = src.get(ns, mid), dst.get(ns, mid)
        assert a is not None and b is not None
        assert (a.content, a.tags, a.metadata, a.access_count) == (
            b.content,
            b.tags,
            b.metadata,
            b.access_count,
        )
        assert a.importance == pytest.approx(b.importance)
        assert a.created_at == pytest.approx(b.created_at)
    assert dst.get(ns, ids[4]) is None
    assert dst.get(ns, ids[4], include_deleted=True) is not None
    assert dst.search("fact 3", ns, mode="keyword")[0].memory.id == ids[3]
    again = dst.import_(out)
    assert again.added == 0
    other = Namespace(user_id="carol")
    moved = dst.import_(out, namespace=other)
    assert moved.added == 0  # ids exist already
    assert dst.count(other) == 0


def test_export_paths_are_validated(store: Any, ns: Namespace, tmp_path: Path) -> None:
    with pytest.raises(InvalidMemoryError, match=r"parquet or \.jsonl"):
        store.export(ns, tmp_path / "x.csv")
    with pytest.raises(InvalidMemoryError, match="does not exist"):
        store.export(ns, tmp_path / "missing" / "x.parquet")
    with pytest.raises(InvalidMemoryError, match="does not exist"):
        store.import_(tmp_path / "nothing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\nnot json\n')
    with pytest.raises(InvalidMemoryError):
        store.import_(bad)


def test_jsonl_export_is_readable_json(store: Any, ns: Namespace, tmp_path: Path) -> None:
    store.add(ns, "line one", metadata={"k": "v"})
    out = tmp_path / "x.jsonl"
    store.export(ns, out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["content"] == "line one"
    assert rows[0]["metadata"] == {"k": "v"}
    assert len(rows[0]["embedding"]) == 64


# -- embedder failures -----------------------------------------------------------------


class _BadEmbedder:
    name = "bad"

    def __init__(self, mode: str, dim: int = 64) -> None:
        self.mode = mode
        self.dim = dim

    def embed(self, texts: Any) -> Any:
        n = len(texts)
        if self.mode == "nan":
            out = np.ones((n, self.dim), dtype=np.float32)
            out[-1, 0] = math.nan
            return out
        if self.mode == "dim":
            return np.ones((n, self.dim + 1), dtype=np.float32)
        if self.mode == "list":
            return [[1.0] * self.dim for _ in texts]
        raise RuntimeError("model server down")


@pytest.mark.parametrize(
    ("mode", "match"),
    [("nan", "NaN"), ("dim", "shape"), ("list", "numpy"), ("raise", "server down")],
)
def test_bad_embeddings_store_nothing(
    make_store: StoreFactory, ns: Namespace, mode: str, match: str
) -> None:
    bad = make_store("emb", embedder=_BadEmbedder(mode))
    with pytest.raises(EmbeddingError, match=match):
        bad.add_many(ns, ["first", "second"])
    assert bad.count(ns, include_deleted=True) == 0
    assert bad.history(ns) == []


# -- what maintenance may touch: keyed facts never, events never merge ----------------------

_LEVELS = (
    Namespace(user_id="ada"),
    Namespace(user_id="ada", agent_id="bot"),
    Namespace(user_id="ada", agent_id="bot", run_id="r1"),
    Namespace(user_id="ada", agent_id="bot", run_id="r1", session_id="s1"),
)


def _maintain_everything(store: Any, scope: Namespace) -> list[Any]:
    return [
        store.decay(scope, rate=0.5, threshold=0.99),
        store.auto_forget(scope, threshold=0.99),
        store.prune_stale(scope, max_age_days=0),
        store.prune_duplicates(scope, threshold=0.1),
        store.consolidate(scope, threshold=0.01),
        store.enforce_cap(scope, 0),
    ]


@pytest.mark.parametrize("level", range(len(_LEVELS)))
def test_maintenance_never_touches_keyed_facts_at_any_level(
    make_store: StoreFactory, clock: FakeClock, level: int
) -> None:
    """Regression: an agent-level on_idle pruned and merged a run's keyed facts."""
    store = make_store(max_memories=2)
    owner = _LEVELS[level]
    fns = facts_namespace(owner)
    facts = [
        store.add_many(
            fns,
            [
                NewMemory(
                    content=f"phone: 555-000{i}",
                    kind="keyed_fact",
                    importance=0.0,
                    metadata={"key": f"phone{i}", "value": f"555-000{i}"},
                )
            ],
            dedup=False,
        )[0].id
        for i in range(6)
    ]
    plain = store.add_many(fns, [NewMemory(content=f"note {w}", importance=0.0) for w in "abc"])
    clock.advance(days=400)
    before = {mid: store.get(fns, mid) for mid in facts}
    # every scope that contains the facts' namespace, from the user down to it
    scopes = [s for s in (*_LEVELS, fns) if s.contains(fns)]
    assert len(scopes) == level + 1
    for scope in scopes:
        for report in _maintain_everything(store, scope):
            assert not set(report.removed) & set(facts), report
            assert not {m for pair in report.merged for m in pair} & set(facts), report
    for mid in facts:
        assert store.get(fns, mid) == before[mid]  # alive and unchanged, field by field
    assert [h.op for h in store.history(fns, facts[0])] == ["ADD"]
    # the other memories of that namespace were maintained (the test can fail)
    assert all(store.get(fns, r.id) is None for r in plain)


def test_keyed_facts_change_only_through_their_own_namespace(store: Any) -> None:
    fns = Namespace(user_id="ada", agent_id="bot", run_id="r1#facts")
    mid = store.add(fns, "plan: gold", kind="keyed_fact", metadata={"key": "plan"}).id
    wide = Namespace(user_id="ada", agent_id="bot")
    with pytest.raises(InvalidMemoryError, match="keyed fact"):
        store.update(wide, mid, content="plan: silver")
    with pytest.raises(InvalidMemoryError, match="keyed fact"):
        store.delete(wide, mid)
    assert store.get(fns, mid).content == "plan: gold"
    assert store.update(fns, mid, content="plan: silver").op == "UPDATE"
    assert store.delete(fns, mid).op == "DELETE"


@pytest.mark.parametrize("kind", ["episode", "summary", "offload", "keyed_fact", "my_event"])
def test_events_never_merge_at_write_time_or_in_maintenance(
    make_store: StoreFactory, ns: Namespace, kind: str
) -> None:
    """Regression: near-duplicate merging left 22% of distinct recorded turns without an episode."""
    store = make_store(near_duplicate_threshold=0.5)
    turns = [f"user: I walked the dog at {h} o'clock. assistant: nice walk" for h in range(40)]
    turns += ["user: ok. assistant: ok"] * 5  # exactly equal turns are still five turns
    first = store.add_many(ns, [NewMemory(content=t, kind=kind) for t in turns[:20]])
    rest = store.add_many(ns, [NewMemory(content=t, kind=kind) for t in turns[20:]])
    one = [store.add(ns, turns[0], kind=kind), store.add(ns, turns[-1], kind=kind)]
    results = first + rest + one
    assert [r.op for r in results] == ["ADD"] * len(results)
    assert len({r.id for r in results}) == len(turns) + 2
    for scope in (ns, Namespace(user_id=ns.user_id)):
        assert store.consolidate(scope, threshold=0.01).merged == ()
        assert store.prune_duplicates(scope, threshold=0.01).merged == ()
    assert store.count(ns) == len(turns) + 2


def test_only_facts_of_one_kind_merge(make_store: StoreFactory, ns: Namespace) -> None:
    store = make_store(near_duplicate_threshold=0.8)
    fact = store.add(ns, "the cat sat on the red mat")
    assert store.add(ns, "the cat sat on the red mat", kind="episode").op == "ADD"
    assert store.add(ns, "the cat sat on the red mat", kind="preference").op == "ADD"
    assert store.add(ns, "the cat sat on the red mat").id == fact.id  # same kind: merged
    assert store.add(ns, "the cat sat on the red mat today").id == fact.id
    assert store.consolidate(ns, threshold=0.5).merged == ()
    assert store.count(ns) == 3


# -- imports: streamed in batches, every column checked ------------------------------------


def _export_rows(store: Any, ns: Namespace, tmp_path: Path, n: int) -> list[dict[str, Any]]:
    """``n`` memories exported to JSONL and read back as the rows of the file."""
    store.add_many(ns, [NewMemory(content=f"imported fact number {i}") for i in range(n)])
    out = tmp_path / f"rows-{n}.jsonl"
    store.export(ns, out)
    return [json.loads(line) for line in out.read_text().splitlines()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_import_streams_in_batches(
    make_store: StoreFactory,
    ns: Namespace,
    tmp_path: Path,
    suffix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: an import read the whole file into Python first (200k rows: 1.7 GB)."""
    import actormem.store._base as base
    import actormem.store._files as files

    src = make_store("src")
    src.add_many(ns, [NewMemory(content=f"streamed memory number {i}") for i in range(1_234)])
    out = tmp_path / f"big{suffix}"
    src.export(ns, out)
    monkeypatch.setattr(files, "IMPORT_BATCH", 500)
    held: list[int] = []
    decode = base.records_from_rows

    def spy(rows: Any, *args: Any, **kwargs: Any) -> Any:
        held.append(len(rows))
        return decode(rows, *args, **kwargs)

    monkeypatch.setattr(base, "records_from_rows", spy)
    progress: list[tuple[int, int]] = []
    dst = make_store("dst")
    rep = dst.import_(out, progress=lambda d, t: progress.append((d, t)))
    assert rep.read == rep.added == 1_234
    assert max(held) <= 500 and sum(held) == 2 * 1_234  # checked, then written, by batches
    assert progress == [(500, 1_234), (1_000, 1_234), (1_234, 1_234)]
    assert dst.count(ns) == 1_234


_BAD_COLUMNS: list[tuple[str, object]] = [
    ("created_at", 10**30),  # microseconds: far past year 9999
    ("created_at", -1),
    ("created_at", "2024-01-01"),
    ("created_at", None),
    ("updated_at", 10**30),
    ("last_accessed", -5_000_000),
    ("deleted_at", 10**25),
    ("importance", 2.0),
    ("importance", -0.1),
    ("importance", "0.5"),
    ("access_count", -1),
    ("access_count", 1.5),
    ("access_count", 2**64),
    ("access_count", True),
    ("content", 5),
    ("content", ""),
    ("id", 7),
    ("kind", 3),
    ("tags", "abc"),
    ("metadata", [1, 2]),
    ("metadata", "not json"),
    ("superseded_by", 5),
    ("user_id", 9),
]


@pytest.mark.parametrize(("column", "value"), _BAD_COLUMNS)
def test_import_refuses_a_bad_value_naming_the_row_and_column(
    make_store: StoreFactory, ns: Namespace, tmp_path: Path, column: str, value: object
) -> None:
    """Regression: an imported created_at of 1e30 was stored clamped and timeline() failed."""
    rows = _export_rows(make_store("src"), ns, tmp_path, 4)
    rows[2][column] = value
    path = _write_jsonl(tmp_path / "bad.jsonl", rows)
    dst = make_store("dst")
    with pytest.raises(InvalidMemoryError, match=rf"import row 3 .*{column}"):
        dst.import_(path)
    assert dst.count(Namespace(user_id=ns.user_id), include_deleted=True) == 0  # nothing stored
    assert dst.timeline(Namespace(user_id=ns.user_id)) == []


def test_import_refuses_non_finite_numbers(
    make_store: StoreFactory, ns: Namespace, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _export_rows(make_store("src"), ns, tmp_path, 3)
    for column, value in (("importance", float("nan")), ("created_at", float("inf"))):
        bad = [dict(r) for r in rows]
        for r in bad:
            r[column] = float(r[column])
            r["metadata"] = json.dumps(r["metadata"])  # JSON text, as in a Parquet export
        bad[1][column] = value
        path = tmp_path / f"bad-{column}.parquet"
        pq.write_table(pa.Table.from_pylist(bad), path)
        dst = make_store(f"dst-{column}")
        with pytest.raises(InvalidMemoryError, match=rf"import row 2 .*{column}"):
            dst.import_(path)
        assert dst.count(Namespace(user_id=ns.user_id)) == 0


def test_imported_episodes_are_never_merged(
    make_store: StoreFactory, ns: Namespace, tmp_path: Path
) -> None:
    src = make_store("src")
    src.add_many(ns, [NewMemory(content="user: ok. assistant: ok", kind="episode")] * 3)
    src.add(ns, "a fact")
    out = tmp_path / "ep.jsonl"
    src.export(ns, out)
    dst = make_store("dst")
    dst.add(ns, "user: ok. assistant: ok", kind="episode")
    dst.add(ns, "a fact")
    rep = dst.import_(out)
    assert (rep.added, rep.merged) == (3, 1)  # the three turns stay three; the fact merges
    assert dst.count(ns) == 5
