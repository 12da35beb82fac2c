"""HNSW builds of different scopes run one at a time (pgprobe finding 5).

Two ``CREATE INDEX CONCURRENTLY`` on ``memories`` wait for each other's
snapshots: partial indexes of several scopes built at once failed with
"deadlock detected", one scope stayed 'building' with an invalid index.
Builds of one table are now serialised by an advisory lock.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, NewMemory

pytest.importorskip("pgvector.psycopg")


def test_builds_of_four_scopes_at_once_all_end_ready(pg_dsn: str) -> None:
    from actormem.store._postgres import PostgresStore

    scopes = [Namespace(user_id=f"t{i}") for i in range(4)]
    with PostgresStore(
        pg_dsn,
        embedder=HashEmbedder(32),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
        search_cache_bytes=None,
        hnsw_min_rows=50,
    ) as store:
        for n, ns in enumerate(scopes):
            items = [NewMemory(content=f"w{i % 37} v{(i * n) % 53} n{i}") for i in range(300)]
            store.add_many(ns, items, dedup=False)
        start = threading.Barrier(len(scopes))
        out: dict[str, Any] = {}

        def build(ns: Namespace) -> None:
            start.wait()
            try:
                out[str(ns.user_id)] = store._ann.build(ns)
            except Exception as exc:  # reported below
                out[str(ns.user_id)] = exc

        threads = [threading.Thread(target=build, args=(ns,)) for ns in scopes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert out == {str(ns.user_id): "ready" for ns in scopes}
        with psycopg.connect(pg_dsn) as conn:
            rows = conn.execute(
                "SELECT v.state, i.indisvalid FROM vector_indexes v JOIN pg_index i "
                "ON i.indexrelid = to_regclass(quote_ident(v.index_name))"
            ).fetchall()
        assert rows == [("ready", True)] * 4
        for ns in scopes:
            assert store._ann.predicate(ns) is not None
            assert len(store.search("w3", ns, limit=5, mode="vector", touch=False)) == 5
