"""A zero vector is never a near duplicate, and no search score is NaN.

An embedder may answer all zeros for text without letters or digits
(``HashEmbedder`` does for "👍" or "..."). pgvector's cosine distance to a
zero vector is NaN; read as a similarity, NaN passed the PostgreSQL store's
``sim < threshold`` test as "not below", so unrelated memories were merged
into the zero-vector one and the older were lost (pgprobe finding 1).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from actormem.store import Namespace

ZERO = ("👍", "...", "!!")  # all-zero vectors under HashEmbedder
TEXTS = ("likes green tea", "works at the bakery", "has two cats", "lives in a small flat")


def test_the_zero_texts_embed_to_zero(make_store: Any) -> None:
    store = make_store()
    assert not store.embedder.embed(list(ZERO)).any()


def test_a_zero_vector_memory_is_never_a_near_duplicate(make_store: Any) -> None:
    store = make_store(near_duplicate_threshold=0.95)
    ns = Namespace(user_id="z")
    ops = [store.add(ns, t).op for t in ("likes green tea", "👍", "works at the bakery")]
    assert ops == ["ADD", "ADD", "ADD"]
    ns2 = Namespace(user_id="z2")  # the zero vector first: it must not swallow later adds
    ops = [store.add(ns2, t).op for t in ("...", *TEXTS)]
    assert ops == ["ADD"] * 5
    assert sorted(m.content for m in store.list(ns2)) == sorted(("...", *TEXTS))


@pytest.mark.parametrize("n", [3, 40])  # one exact query per vector; the batch path past 16
def test_a_batch_with_zero_vectors_merges_nothing(make_store: Any, n: int) -> None:
    store = make_store(near_duplicate_threshold=0.95)
    ns = Namespace(user_id="b")
    store.add(ns, "👍")
    texts = [f"fact number {i} about topic {i * 7}" for i in range(n)] + list(ZERO[1:])
    results = store.add_many(ns, texts)
    assert [r.op for r in results] == ["ADD"] * len(texts)
    assert len(store.list(ns, limit=1000)) == len(texts) + 1


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
@pytest.mark.parametrize("query", ["👍", "tea", "cats 👍"])
def test_search_scores_are_never_nan(make_store: Any, cached: bool, mode: str, query: str) -> None:
    kwargs: dict[str, Any] = {}
    if not cached:
        kwargs["search_cache_bytes"] = None
    try:
        store = make_store(**kwargs)
    except TypeError:  # DuckDB has no search cache to switch off
        if not cached:
            pytest.skip("PostgreSQL's search cache only")
        raise
    ns = Namespace(user_id="q")
    for t in ("likes green tea", "👍", "works at the bakery", "has two cats"):
        store.add(ns, t)
    if cached and hasattr(store, "warm_cache"):
        store.warm_cache(ns)  # the copy answers the first stage
    hits = store.search(query, ns, limit=4, mode=mode, touch=False)
    assert len(hits) == 4
    for h in hits:
        assert math.isfinite(h.score) and math.isfinite(h.cosine), h
        if h.memory.content == "👍" or query == "👍":
            assert h.cosine == 0.0
