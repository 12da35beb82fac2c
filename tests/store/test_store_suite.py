"""The backend-independent store suite (runs once per backend in ``BACKENDS``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from actormem.store import (
    EmbeddingError,
    InvalidMemoryError,
    MemoryNotFoundError,
    Namespace,
    NamespaceError,
    NewMemory,
    SearchConfig,
    SearchFilters,
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


def test_history_of_a_batch_keeps_its_order_adds_then_merges(store: Any, ns: Namespace) -> None:
    # PostgreSQL writes a batch's ADD rows from the copied memories and the rest after
    # them: the trail must read as one batch written in order, with distinct row ids
    first = store.add_many(ns, ["Ada lives in Paris", "Ada likes green tea", "Ada lives in Paris"])
    assert [r.op for r in first] == ["ADD", "ADD", "MERGE"]
    second = store.add_many(ns, ["Bob rides a red bike", "Ada likes green tea"])
    assert [r.op for r in second] == ["ADD", "MERGE"]
    trail = store.history(ns)
    # a duplicate inside one batch is folded into its first copy (no row); one of a
    # stored memory is a MERGE, logged after the batch's ADD rows
    assert [(h.op, h.memory_id) for h in trail] == [
        ("ADD", first[0].id),
        ("ADD", first[1].id),
        ("ADD", second[0].id),
        ("MERGE", first[1].id),
    ]
    assert [h.new_content for h in trail] == [
        "Ada lives in Paris",
        "Ada likes green tea",
        "Bob rides a red bike",
        "Ada likes green tea",
    ]
    assert all(h.old_content is None and h.reason == "" for h in trail if h.op == "ADD")
    assert all(h.namespace == ns for h in trail)
    assert len({h.id for h in trail}) == len(trail)
    assert trail[0].ts == trail[1].ts <= trail[2].ts == trail[3].ts


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


# -- embedder failures -----------------------------------------------------------------


class _BadEmbedder:
    name = "bad"

    def __init__(self, mode: str, dim: int = 64) -> None:
        self.mode = mode
        self.dim = dim

    def embed(self, texts: Any) -> Any:
        n = len(texts)
        if self.mode in ("nan", "inf"):
            out = np.ones((n, self.dim), dtype=np.float32)
            out[-1, 0] = math.nan if self.mode == "nan" else -math.inf
            return out
        if self.mode == "dim":
            return np.ones((n, self.dim + 1), dtype=np.float32)
        if self.mode == "list":
            return [[1.0] * self.dim for _ in texts]
        raise RuntimeError("model server down")


@pytest.mark.parametrize(
    ("mode", "match"),
    [
        ("nan", "NaN"),
        ("inf", "infinite"),
        ("dim", "shape"),
        ("list", "numpy"),
        ("raise", "server down"),
    ],
)
def test_bad_embeddings_store_nothing(
    make_store: StoreFactory, ns: Namespace, mode: str, match: str
) -> None:
    bad = make_store("emb", embedder=_BadEmbedder(mode))
    with pytest.raises(EmbeddingError, match=match):
        bad.add_many(ns, ["first", "second"])
    with pytest.raises(EmbeddingError, match=match):  # one text: the single-row path
        bad.add(ns, "third")
    assert bad.count(ns, include_deleted=True) == 0
    assert bad.history(ns) == []
