"""The partial HNSW index of a large scope (PostgreSQL): used, accurate, harmless elsewhere.

The issue's trap: once an HNSW index exists, a scope-filtered ``ORDER BY
embedding <=> q`` can return 0.04 of the scope's true neighbours.  These
tests build a scope's own index and check that its searches use it and find
at least 0.9 of the exact top 10, and that other scopes stay exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, NewMemory
from actormem.store._index import tokenize
from actormem.store._postgres import PostgresStore
from actormem.store._records import query_text

psycopg = pytest.importorskip("psycopg")
register_vector = pytest.importorskip("pgvector.psycopg").register_vector

BIG = Namespace(user_id="big")
DIM = 64


def _text(rng: np.random.Generator, vocab: list[str]) -> str:
    return " ".join(rng.choice(vocab, size=6, replace=False))


@pytest.fixture
def loaded(pg_dsn: str) -> Iterator[tuple[PostgresStore, dict[str, Any]]]:
    store = PostgresStore(
        pg_dsn,
        embedder=HashEmbedder(DIM),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
        hnsw_min_rows=1500,
    )
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(400)]
    vecs: dict[str, np.ndarray] = {}
    owner: dict[str, str] = {}
    batches = [(Namespace(user_id="big", agent_id="a"), 2000)]
    batches += [(Namespace(user_id=f"t{i}"), 50) for i in range(20)]
    for ns, n in batches:
        items = [NewMemory(content=_text(rng, vocab)) for _ in range(n)]
        for res, item in zip(store.add_many(ns, items, dedup=False), items, strict=True):
            vecs[res.id] = store._embed([item.content])[0]
            owner[res.id] = str(ns.user_id)
    yield store, {"vecs": vecs, "owner": owner, "rng": rng, "vocab": vocab}
    store.close()


def _exact(data: dict[str, Any], user: str, qvec: np.ndarray) -> list[str]:
    own = [m for m, u in data["owner"].items() if u == user]
    return sorted(own, key=lambda m: -float(data["vecs"][m] @ qvec))[:10]


def test_a_large_scope_gets_its_own_index_its_searches_use_it_and_find_the_neighbours(
    loaded: tuple[PostgresStore, dict[str, Any]], pg_dsn: str
) -> None:
    store, data = loaded
    assert store._ann.predicate(BIG) is None
    assert store.build_vector_index(BIG) == "ready"
    assert store.build_vector_index(BIG) == "ready"  # idempotent
    pred = store._ann.predicate(BIG)
    assert pred is not None and "user_id = 'big'" in pred
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'memories_ann_%%' "
            "AND indexdef LIKE '%%hnsw%%'"
        ).fetchone()
        assert n == 1

    # the statement the store runs is served by the partial index
    from actormem.store._pg_search import FirstStageQuery, collect

    class Explain:
        def __init__(self, conn: Any) -> None:
            self.conn, self.plan = conn, ""

        def execute(self, sql: str, params: Any) -> Any:
            rows = self.conn.execute("EXPLAIN " + sql, params).fetchall()
            self.plan = "\n".join(r[0] for r in rows)
            return self.conn.execute(sql, params)

    query = _text(data["rng"], data["vocab"])
    qvec = store._embed([query_text(query)])[0]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        ex = Explain(conn)
        q = FirstStageQuery(BIG, None, tokenize(query), qvec, 100, True, True, 1.2, 0.3)
        collect(ex, q, ann=pred)
        assert "memories_ann_" in ex.plan, ex.plan

    found = 0
    for _ in range(20):
        query = _text(data["rng"], data["vocab"])
        qvec = store._embed([query_text(query)])[0]
        hits = store.search(query, BIG, limit=10, mode="vector", touch=False)
        found += len({h.memory.id for h in hits} & set(_exact(data, "big", qvec)))
    assert found / 200 >= 0.9, found / 200


def test_other_scopes_stay_exact_beside_a_partial_index(
    loaded: tuple[PostgresStore, dict[str, Any]],
) -> None:
    store, data = loaded
    store.build_vector_index(BIG)
    for user in ("t3", "t11"):
        for _ in range(5):
            query = _text(data["rng"], data["vocab"])
            qvec = store._embed([query_text(query)])[0]
            hits = store.search(query, Namespace(user_id=user), limit=10, mode="vector")
            assert [h.memory.id for h in hits] == _exact(data, user, qvec)
    # a narrower scope inside the indexed one is searched exactly too
    narrow = Namespace(user_id="big", agent_id="a")
    assert store._ann.predicate(narrow) is None


def test_a_search_of_a_large_scope_builds_its_index_in_the_background(
    loaded: tuple[PostgresStore, dict[str, Any]], pg_dsn: str
) -> None:
    store, _ = loaded
    store.search("w1 w2", BIG, limit=5)  # 2000 live rows >= 1500: a build starts
    for thread in list(store._ann._threads):
        thread.join(120)
    assert store._ann.predicate(BIG) is not None
    small = Namespace(user_id="t0")
    store.search("w1 w2", small, limit=5)  # 50 rows: no index
    assert not [t for t in store._ann._threads if t.is_alive()]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT scope, state FROM vector_indexes").fetchall()
    assert rows == [("user_id=big", "ready")]
    # another worker learns of it on open and searches through it
    other = PostgresStore(pg_dsn, embedder=HashEmbedder(DIM), touch_flush_interval=None)
    try:
        assert other._ann.predicate(BIG) is not None
        assert len(other.search("w1 w2", BIG, limit=10, mode="vector")) == 10
    finally:
        other.close()
