"""PostgreSQL schema v11: a namespace filled one add at a time shares posting groups.

An agent records memories one ``add`` at a time; up to v10 each add got
posting groups of its own, and a search summed a term's statistics over one
group row per add.  Here: single adds join their namespace's open group (at
most ``OPEN_GROUP_ROWS`` rows, then a new one), larger batches keep their own;
the postings, each group's ``df`` and the BM25 statistics stay equal to the
live rows' (recounted from the rows, and compared with DuckDB's scores) after
every kind of write; two writers adding to one namespace at once lose
nothing; a filled v10 store with single-add groups migrates and is regrouped.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace
from actormem.store import _pg_open_groups as open_groups
from actormem.store import _pg_schema as schema
from tests.store.test_store_pg_keyword import (
    DIM,
    EVERYTHING,
    LIVE,
    NS_COLS,
    _corpus,
    _open,
    _postings_match_the_live_rows,
    _recount,
    _same_ranking,
)

psycopg = pytest.importorskip("psycopg")

STAMPS = "SELECT id, chg::text FROM memories ORDER BY id"
QUERIES = ["w0", "w1 w2", "w3 w17 tag5", "w5 w9 w40 tag11", "w2 w60 w61"]


def _stats(conn: Any) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT term, {NS_COLS}, df FROM term_stats ORDER BY 1, 2, 3, 4, 5"
    ).fetchall()


def _groups(conn: Any, term: str, user: str) -> list[int]:
    """The sizes of ``term``'s group rows in the namespaces of ``user``."""
    rows = conn.execute(
        "SELECT df FROM posting_groups WHERE term = %s AND user_id = %s ORDER BY pgrp",
        (term, user),
    ).fetchall()
    return [int(r[0]) for r in rows]


def _exact(conn: Any) -> None:
    """Postings, group df and bounds, and the statistics all equal the live rows'."""
    _postings_match_the_live_rows(conn)
    assert _stats(conn) == _recount(conn)


def _ranks_like_the_rows(store: Any, ns: Namespace, queries: list[str]) -> None:
    for query in queries:
        hits = store.search(query, ns, 15, mode="keyword", touch=False)
        full = store.search(query, ns, 15, mode="keyword", touch=False, filters=EVERYTHING)
        _same_ranking(hits, full, query)


def test_single_adds_share_their_namespace_groups_and_stay_exact(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(open_groups, "OPEN_GROUP_ROWS", 16)
    monkeypatch.setattr(open_groups, "SMALL_BATCH", 4)
    ns, other = Namespace(user_id="a", agent_id="x"), Namespace(user_id="b")
    texts = _corpus(120, seed=3)
    store = _open(pg_dsn)
    duck = DuckDBStore(
        tmp_path / "m.duckdb",
        embedder=HashEmbedder(DIM),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
    )
    try:
        both = (store, duck)
        ids: dict[Any, list[str]] = {store: [], duck: []}
        for i, text in enumerate(texts[:40]):
            for s in both:
                ids[s].append(s.add(ns, "every " + text).id)
            if i % 10 == 0:  # interleaved with another namespace's adds
                store.add(other, "every other " + text)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # 40 adds, 16 a group: three groups of 'every' instead of forty
            assert _groups(conn, "every", "a") == [16, 16, 8]
            assert _groups(conn, "every", "b") == [4]
            open_rows = conn.execute(
                f"SELECT {NS_COLS}, taken FROM posting_open ORDER BY 1"
            ).fetchall()
            assert open_rows == [("a", "x", "", "", 8), ("b", "", "", "", 4)]
            _exact(conn)
        # a batch of SMALL_BATCH rows or more keeps a group of its own; a smaller one
        # joins the open group
        big = {
            s: [r.id for r in s.add_many(ns, ["every big " + t for t in texts[40:50]])]
            for s in both
        }
        for s in both:
            s.add_many(ns, ["every small " + t for t in texts[50:53]])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert _groups(conn, "every", "a") == [16, 16, 11, 10]
            _exact(conn)
        # every kind of write to rows of shared groups: rewrite, delete, merge, supersede,
        # decay, a move by hand-written SQL
        for s in both:
            s.update(ns, ids[s][0], content="w7 w7 rewritten every")
            s.update(ns, ids[s][17], importance=0.9)
            s.delete(ns, ids[s][1])
            s.delete(ns, ids[s][20])
            s.delete(ns, big[s][0])
            assert s.add(ns, "every " + texts[5]).op == "MERGE"
        store.flush()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _exact(conn)
        _ranks_like_the_rows(store, ns, [*QUERIES, "rewritten every", "big small"])
        # the same BM25 scores as DuckDB's, which counts its statistics itself
        for query in [*QUERIES, "every w7", "small big w3"]:
            pg_hits = store.search(query, ns, 10, mode="keyword", touch=False)
            dk_hits = duck.search(query, ns, 10, mode="keyword", touch=False)
            want = [h.bm25 for h in dk_hits]
            # (DuckDB scores in float32: equal to its precision; a df off by one is not)
            assert [h.bm25 for h in pg_hits] == pytest.approx(want, rel=1e-6), query
            # the same memories in the same score order; exact ties go by id, and the two
            # stores' ids differ, so within a tie (and the tie the limit cuts) only the set
            # (the count) must agree
            assert _by_score(pg_hits) == _by_score(dk_hits), query
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT set_config(%s, %s, false)",
                (schema.WRITER_SETTING, str(schema.PG_SCHEMA_VERSION)),
            )
            conn.execute(
                "UPDATE memories SET user_id = 'b', agent_id = '' WHERE id = %s", (ids[store][3],)
            )
            _exact(conn)
        store.forget(other)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _exact(conn)
            # forgotten for good: not even its open group's row names it
            assert conn.execute(
                "SELECT count(*) FROM posting_open WHERE user_id = 'b'"
            ).fetchone() == (0,)
        # a namespace forgotten (the moved row with it) and written again: a new
        # open group
        store.add(other, "every after forget")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _exact(conn)
            assert _groups(conn, "every", "b") == [1]
    finally:
        store.close()
        duck.close()


def test_two_writers_adding_to_one_namespace_at_once_lose_nothing(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(open_groups, "OPEN_GROUP_ROWS", 8)
    ns = Namespace(user_id="u", agent_id="race")
    texts = _corpus(160, seed=11)
    stores = [_open(pg_dsn, pool_size=2), _open(pg_dsn, pool_size=2)]
    go = threading.Barrier(2)
    added: list[list[str]] = [[], []]
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            go.wait(timeout=60)
            for text in texts[i::2]:
                added[i].append(stores[i].add(ns, f"mango {text} by{i}").id)
                if len(added[i]) % 20 == 0:  # updates append to the same groups
                    stores[i].update(ns, added[i][-3], content=f"mango rewritten by{i}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in (0, 1)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors
        assert all(not t.is_alive() for t in threads)
        assert len(set(added[0]) | set(added[1])) == 160
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _exact(conn)
            live = conn.execute(f"SELECT count(*) FROM memories WHERE {LIVE}").fetchone()
            assert live == (160,)
            # 160 adds into groups of 8: at most a group per 8 adds (a group is closed
            # when the next add would pass 8; updates do not change groups)
            assert len(_groups(conn, "mango", "u")) == 20
        _ranks_like_the_rows(stores[0], ns, [*QUERIES, "mango by1", "rewritten by0"])
    finally:
        for s in stores:
            s.close()


def test_a_filled_v10_store_with_single_add_groups_migrates_and_is_regrouped(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # version 10's insert path is the current one with no open groups
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 10)
    monkeypatch.setattr(open_groups, "SMALL_BATCH", 0)
    ns, other = Namespace(user_id="m", agent_id="a"), Namespace(user_id="n")
    texts = _corpus(800, seed=19)
    old = _open(pg_dsn)
    ids = [r.id for r in old.add_many(ns, texts[:200], dedup=False)]  # a group of its own
    ids += [old.add(ns, "plum " + t).id for t in texts[200:500]]  # a group per add
    old.add_many(other, texts[700:780], dedup=False)  # not small
    lone = old.add(other, "plum lone w1").id  # one small group only: left as it is
    old.update(ns, ids[210], content="w5 w5 changed before the migration")
    old.delete(ns, ids[1])
    old.delete(ns, ids[305])  # a single add's group emptied
    old.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (10,)
        assert conn.execute("SELECT to_regclass('posting_open')").fetchone() == (None,)
        # 300 single adds, one deleted, one rewritten without the word
        assert len(_groups(conn, "plum", "m")) == 298
        before = _stats(conn)
        assert before == _recount(conn)
        stamps = conn.execute(STAMPS).fetchall()
        gone = conn.execute("SELECT count(*) FROM memory_gone").fetchone()
        groups_before = conn.execute(
            "SELECT id, pgrp FROM memories WHERE user_id = 'n' ORDER BY id"
        ).fetchall()
    monkeypatch.undo()
    store = _open(pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
                schema.PG_SCHEMA_VERSION,
            )
            # the 299 live single adds of m, in seq order, into groups of 128 (the
            # rewritten one is in the first, without the word)
            assert sorted(_groups(conn, "plum", "m")) == [43, 127, 128]
            assert _stats(conn) == before
            _exact(conn)
            # the other namespace had one small group: not rewritten
            assert (
                conn.execute(
                    "SELECT id, pgrp FROM memories WHERE user_id = 'n' ORDER BY id"
                ).fetchall()
                == groups_before
            )
            assert conn.execute(
                f"SELECT {NS_COLS}, taken FROM posting_open ORDER BY 1"
            ).fetchall() == [("m", "a", "", "", 43)]
            # the feed: nothing a search cache reads changed, no row was stamped again
            assert conn.execute(STAMPS).fetchall() == stamps
            assert conn.execute("SELECT count(*) FROM memory_gone").fetchone() == gone
        _ranks_like_the_rows(store, ns, [*QUERIES, "plum w5 changed", "plum w1"])
        # writes after it: single adds join the migrated open group (43 + 85 rows),
        # then a new one (115)
        more = [store.add(ns, "plum new " + t).id for t in texts[500:700]]
        store.update(ns, ids[300], content="plum rewritten after")
        store.delete(ns, more[0])
        store.delete(other, lone)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert sorted(_groups(conn, "plum", "m")) == [115, 127, 127, 128]
            _exact(conn)
        _ranks_like_the_rows(store, ns, [*QUERIES, "plum new", "rewritten after"])
    finally:
        store.close()


def _by_score(hits: list[Any]) -> list[list[str] | int]:
    """Hits in runs of equal score (equal to float32 precision, rel 1e-5): each run's
    contents sorted, the last run (which the limit may cut) only counted."""
    runs: list[list[str]] = []
    first = 0.0
    for h in hits:
        if not runs or abs(h.bm25 - first) > 1e-5 * max(1.0, abs(first)):
            runs.append([])
            first = h.bm25
        runs[-1].append(h.memory.content)
    out: list[list[str] | int] = [sorted(run) for run in runs[:-1]]
    if runs:
        out.append(len(runs[-1]))
    return out
