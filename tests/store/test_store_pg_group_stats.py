"""PostgreSQL schema v9: a term's document frequency and bounds live in its posting groups.

A filled version-8 store (written by that version's insert path: ``term_stats``
upserted per term and batch) migrates: the statistics read through the new
``term_stats`` view equal the old table's non-zero rows, every search ranks
exactly like BM25 from the rows, and writes after it keep each group's
``df`` equal to its rows (a recount from the live rows is the reference).
"""

from __future__ import annotations

from typing import Any

import pytest

from actormem.store import Namespace
from actormem.store import _pg_schema as schema
from tests.store._pg_old_writers import as_old_writer, insert_rows_v8
from tests.store.test_store_pg_keyword import (
    EVERYTHING,
    NS_COLS,
    _corpus,
    _open,
    _postings_match_the_live_rows,
    _recount,
    _same_ranking,
)

psycopg = pytest.importorskip("psycopg")

QUERIES = ["w5", "w0 w1", "w3 w17 tag5", "changed migration", "w2 w9 w40 tag11"]


def _stats(conn: Any) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT term, {NS_COLS}, df FROM term_stats WHERE df <> 0 ORDER BY 1, 2, 3, 4, 5"
    ).fetchall()


def test_a_filled_v8_store_migrates_to_statistics_in_the_groups(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 8)
    old = as_old_writer(_open(pg_dsn), insert_rows_v8)
    ns, other = Namespace(user_id="m", agent_id="a"), Namespace(user_id="n")
    texts = _corpus(1200, seed=17)
    # a large batch, then single adds (a group each) into the same namespace
    ids = [r.id for r in old.add_many(ns, texts[:1000], dedup=False)]
    ids += [old.add(ns, t).id for t in texts[1000:1040]]
    old.add_many(other, texts[:150], dedup=False)
    old.update(ns, ids[0], content="w5 w5 w5 changed before the migration")
    old.delete(ns, ids[1])
    old.delete(ns, ids[1005])  # a single add's group emptied
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (8,)
            kind = conn.execute("SELECT relkind FROM pg_class WHERE relname = 'term_stats'")
            assert kind.fetchone() == ("r",)  # the table version 8 writes
            before = _stats(conn)
            assert before == _recount(conn)
    finally:
        old.close()
    monkeypatch.undo()
    store = _open(pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
                schema.PG_SCHEMA_VERSION,
            )
            kind = conn.execute("SELECT relkind FROM pg_class WHERE relname = 'term_stats'")
            assert kind.fetchone() == ("v",)  # now a view of the groups
            assert _stats(conn) == before
            _postings_match_the_live_rows(conn)  # postings, bounds and each group's df
        # (the version-8 store cannot search with this code: its statistics are compared
        # above, and the pruned search ranks like BM25 from the rows)
        for query in QUERIES:
            hits = store.search(query, ns, 15, mode="keyword", touch=False)
            full = store.search(query, ns, 15, mode="keyword", touch=False, filters=EVERYTHING)
            _same_ranking(hits, full, query)
        # writes after the migration: a batch, single adds, a rewrite, deletes, a merge
        added = [r.id for r in store.add_many(ns, ["fresh w5 words", "more w5 w7"], dedup=False)]
        store.add(ns, "one more w5 alone")
        store.update(ns, ids[3], content="w7 rewritten after the migration")
        store.update(ns, added[0], content="fresh w5 words rewritten")
        store.delete(ns, ids[2])
        store.delete(ns, added[1])
        assert store.add(ns, texts[500]).op == "MERGE"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _postings_match_the_live_rows(conn)
            assert _stats(conn) == _recount(conn)
        for query in [*QUERIES, "fresh rewritten", "w7 alone"]:
            hits = store.search(query, ns, 15, mode="keyword", touch=False)
            full = store.search(query, ns, 15, mode="keyword", touch=False, filters=EVERYTHING)
            _same_ranking(hits, full, query)
        # forgetting a namespace drops its groups and with them its statistics
        store.forget(other)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            left = conn.execute("SELECT count(*) FROM posting_groups WHERE user_id = 'n'")
            assert left.fetchone() == (0,)
            assert _stats(conn) == _recount(conn)
    finally:
        store.close()
