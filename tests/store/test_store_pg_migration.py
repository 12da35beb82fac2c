"""PostgreSQL schema 2 -> current: a filled schema-2 database opens, migrates once and
reads, counts and searches exactly like one created by the current code.

The schema-2 database is built with the migration code's own v1 and v2 steps
(the DDL as it shipped) and filled by plain SQL, as an old actormem left it:
live, deleted and superseded rows, episodes, two namespaces, history.  The
statistics and keyword structures added by later versions must then equal a
recount of the live rows -- after the migration, and again after new writes
(a write counted twice, by a new code path and a left-over trigger, would show).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, NewMemory
from actormem.store._pg_schema import MIGRATIONS, PG_SCHEMA_VERSION
from actormem.store._pg_search import term_counts
from actormem.store._postgres import PostgresStore

psycopg = pytest.importorskip("psycopg")
register_vector = pytest.importorskip("pgvector.psycopg").register_vector

DIM = 64
N = 600
ALICE = Namespace(user_id="alice")
BOB = Namespace(user_id="bob", agent_id="helper")
_LIVE = "deleted_at IS NULL AND superseded_by IS NULL"
_NS = "user_id, agent_id, run_id, session_id"


def _content(i: int) -> str:
    return f"memory number {i} about topic t{i % 11} and word w{i % 7}"


def _make_v2(dsn: str) -> None:
    emb = HashEmbedder(DIM)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        with conn.transaction():
            conn.execute(
                "CREATE TABLE schema_version (version integer NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            MIGRATIONS[0](conn, DIM)
            MIGRATIONS[1](conn, DIM)
            conn.execute("INSERT INTO schema_version (version) VALUES (1), (2)")
            conn.execute(
                "INSERT INTO store_meta VALUES ('embedder_name', %s), ('embedder_dim', %s)",
                (emb.name, str(DIM)),
            )
            contents = [_content(i) for i in range(N)]
            vecs = emb.embed(contents).astype(np.float32)
            for i, text in enumerate(contents):
                user, agent = ("alice", "") if i % 3 else ("bob", "helper")
                kind = "episode" if i % 5 == 0 else "fact"
                terms, tfs, doclen = term_counts(text)
                ts = 1_700_000_000_000_000 + i
                conn.execute(
                    "INSERT INTO memories (id, user_id, agent_id, kind, content, content_hash, "
                    "embedding, importance, tags, created_at, updated_at, last_accessed, "
                    "access_count, metadata, terms, tfs, doclen) VALUES (%s, %s, %s, %s, %s, "
                    "%s, %s, 0.5, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        f"m{i}",
                        user,
                        agent,
                        kind,
                        text,
                        hashlib.sha256(text.encode()).hexdigest(),
                        vecs[i],
                        [f"t{i % 4}"],
                        ts,
                        ts,
                        ts,
                        i,
                        psycopg.types.json.Jsonb({"i": i}),
                        terms,
                        tfs,
                        doclen,
                    ),
                )
            conn.execute("UPDATE memories SET deleted_at = created_at WHERE id IN ('m1', 'm3')")
            conn.execute("UPDATE memories SET superseded_by = 'm2' WHERE id = 'm4'")
            conn.execute(
                "INSERT INTO history (id, memory_id, user_id, agent_id, op, new_content, ts) "
                "SELECT 'h' || id, id, user_id, agent_id, 'ADD', content, created_at FROM memories"
            )


def _assert_derived_tables_match_the_rows(conn: Any) -> None:
    """Every table later versions derive from the live rows equals a recount."""
    want = conn.execute(
        f"SELECT {_NS}, count(*), sum(doclen), count(*) FILTER (WHERE kind = 'episode') "
        f"FROM memories WHERE {_LIVE} GROUP BY {_NS} ORDER BY {_NS}"
    ).fetchall()
    got = conn.execute(
        f"SELECT {_NS}, docs, doclen, episodes FROM scope_stats WHERE docs <> 0 ORDER BY {_NS}"
    ).fetchall()
    assert got == want
    want_t = conn.execute(
        f"SELECT t, {_NS}, count(*) FROM memories, unnest(terms) AS t WHERE {_LIVE} "
        f"GROUP BY t, {_NS} ORDER BY t, {_NS}"
    ).fetchall()
    got_t = conn.execute(
        f"SELECT term, {_NS}, df FROM term_stats WHERE df <> 0 ORDER BY term, {_NS}"
    ).fetchall()
    assert got_t == want_t
    has_postings = conn.execute("SELECT to_regclass('postings') IS NOT NULL").fetchone()[0]
    if has_postings:  # the keyword side's index (a later version)
        want_p = conn.execute(
            f"SELECT u.term, {_NS}, id, u.tf, doclen FROM memories, "
            f"unnest(terms, tfs) AS u(term, tf) WHERE {_LIVE} ORDER BY 1, 2, 3, 4, 5, 6"
        ).fetchall()
        got_p = conn.execute(
            f"SELECT term, {_NS}, id, tf, doclen FROM postings ORDER BY 1, 2, 3, 4, 5, 6"
        ).fetchall()
        assert got_p == want_p
        # every live (term, namespace) has a bound that holds: count <= max_tf, len >= min
        broken = conn.execute(
            f"SELECT count(*) FROM (SELECT u.term, {_NS}, max(u.tf) AS tf, min(doclen) AS len "
            f"FROM memories, unnest(terms, tfs) AS u(term, tf) WHERE {_LIVE} "
            f"GROUP BY u.term, {_NS}) a LEFT JOIN term_bounds b USING (term, {_NS}) "
            "WHERE b.term IS NULL OR b.max_tf < a.tf OR b.min_doclen > a.len"
        ).fetchone()
        assert broken == (0,)


def test_a_filled_schema_2_database_migrates_to_the_current_schema(pg_dsn: str) -> None:
    _make_v2(pg_dsn)
    store = PostgresStore(
        pg_dsn,
        embedder=HashEmbedder(DIM),
        touch_flush_interval=None,
        near_duplicate_threshold=None,
    )
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_version")]
            assert versions == list(range(1, PG_SCHEMA_VERSION + 1))  # each step once
            _assert_derived_tables_match_the_rows(conn)
        alice_live = sum(1 for i in range(N) if i % 3 and i not in (1, 4))
        bob_live = sum(1 for i in range(N) if i % 3 == 0 and i != 3)
        assert store.count(ALICE) == alice_live
        assert store.count(BOB) == bob_live
        assert store.count(ALICE, include_deleted=True) == sum(1 for i in range(N) if i % 3)
        rec = store.get(ALICE, "m7")
        assert rec is not None
        assert (rec.content, rec.tags, rec.metadata, rec.access_count) == (
            _content(7),
            ("t3",),
            {"i": 7},
            7,
        )
        assert rec.created_at == pytest.approx(1_700_000_000.000007)
        gone = store.get(ALICE, "m4", include_deleted=True)
        assert gone is not None and gone.superseded_by == "m2"
        # searches: keyword ranks by the migrated statistics, vector by the old vectors
        hits = store.search("memory number 7 about", ALICE, limit=3, mode="keyword")
        assert hits[0].memory.id == "m7"
        hits = store.search(_content(10), ALICE, limit=3, mode="vector")
        assert hits[0].memory.id == "m10"
        hits = store.search(_content(9), BOB, limit=3)
        assert hits[0].memory.id == "m9"
        assert all(h.memory.namespace.user_id == "bob" for h in hits)
        assert [h.op for h in store.history(ALICE, "m7")] == ["ADD"]
        # new writes after the migration are counted once
        added = store.add_many(
            ALICE,
            [NewMemory(content=f"fresh note {i} about topic t1", kind="episode") for i in range(5)],
        )
        store.update(ALICE, "m7", content="rewritten seven with new words")
        assert store.delete(ALICE, "m8")
        merged = store.add(ALICE, _content(11))  # an exact duplicate of a migrated fact
        assert (merged.op, merged.id) == ("MERGE", "m11"), merged
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _assert_derived_tables_match_the_rows(conn)
        assert store.count(ALICE) == alice_live + 5 - 1
        hits = store.search("fresh note 3", ALICE, limit=1, mode="keyword")
        assert hits[0].memory.id == added[3].id
    finally:
        store.close()
    # a second open finds the current version and migrates nothing
    again = PostgresStore(pg_dsn, embedder=HashEmbedder(DIM), touch_flush_interval=None)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            n = conn.execute("SELECT count(*) FROM schema_version").fetchone()[0]
        assert n == PG_SCHEMA_VERSION
    finally:
        again.close()
