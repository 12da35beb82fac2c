"""The keyword side of PostgreSQL searches: postings kept by triggers, the pruned top rows
of a large scope equal full BM25, neighbouring-episode context, and the v3 -> v4 migration.

The references are the rows themselves: the same search with a filter that
matches everything (``min_importance=0``) scores BM25 from each row's stored
terms, the path the postings replace, and ``keyword_top`` is compared with
skipping nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import DuckDBStore, Namespace, NewMemory, SearchFilters, _pg_keyword
from actormem.store import _pg_schema as schema
from actormem.store._index import tokenize
from actormem.store._postgres import PostgresStore
from tests.store._pg_old_writers import as_old_writer, insert_rows_v3, insert_rows_v7

psycopg = pytest.importorskip("psycopg")

DIM = 32
EVERYTHING = SearchFilters(min_importance=0.0)  # forces BM25 from the rows themselves
LIVE = "deleted_at IS NULL AND superseded_by IS NULL"
NS_COLS = "user_id, agent_id, run_id, session_id"


def _open(dsn: str, **kwargs: Any) -> PostgresStore:
    kwargs.setdefault("search_cache_bytes", None)  # the SQL path is what is tested
    kwargs.setdefault("embedder", HashEmbedder(DIM))
    kwargs.setdefault("near_duplicate_threshold", None)
    kwargs.setdefault("touch_flush_interval", None)
    return PostgresStore(dsn, **kwargs)


def _corpus(n: int, seed: int = 5) -> list[str]:
    """Zipf-like words: a few held by most rows, many rare ones, varied lengths and repeats."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(600)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    out = []
    for i in range(n):
        words = list(rng.choice(vocab, size=int(rng.integers(3, 14)), p=p))
        out.append(" ".join([*words, f"tag{i % 97}"]))
    return out


def _same_ranking(got: list[Any], want: list[Any], query: str) -> None:
    """The same BM25 scores in the same order, and the same rows but where rows tie.

    Rows of equal BM25 (same terms, counts and length: frequent in these short
    texts) are interchangeable: which of them fill the candidate pool's last
    places, and so their fused scores, may differ between two exact paths.
    """
    assert [h.bm25 for h in got] == pytest.approx([h.bm25 for h in want], rel=1e-9), query
    tied = Counter(round(h.bm25, 9) for h in [*got, *want])
    a = [h.memory.id for h in got if tied[round(h.bm25, 9)] == 2]
    b = [h.memory.id for h in want if tied[round(h.bm25, 9)] == 2]
    assert a == b, query


def _recount(conn: Any) -> list[tuple[Any, ...]]:
    """Per (term, concrete namespace): how many live rows hold it, from the rows
    (what the statistics of every schema version must equal)."""
    return conn.execute(
        f"SELECT t, {NS_COLS}, count(*) FROM memories, unnest(terms) AS t WHERE {LIVE} "
        f"GROUP BY t, {NS_COLS} ORDER BY 1, 2, 3, 4, 5"
    ).fetchall()


def _postings_match_the_live_rows(conn: Any) -> None:
    want = conn.execute(
        f"SELECT u.term, {NS_COLS}, id, u.tf, doclen FROM memories, "
        f"unnest(terms, tfs) AS u(term, tf) WHERE {LIVE} ORDER BY 1, 2, 3, 4, 5, 6"
    ).fetchall()
    got = conn.execute(
        f"SELECT term, {NS_COLS}, id, tf, doclen FROM postings ORDER BY 1, 2, 3, 4, 5, 6"
    ).fetchall()
    assert got == want
    # the bounds bound: no live row holds a term more often or is shorter
    loose = conn.execute(
        "SELECT count(*) FROM memories m CROSS JOIN LATERAL unnest(m.terms, m.tfs) AS u(term, tf) "
        f"LEFT JOIN term_bounds b ON b.term = u.term AND b.user_id = m.user_id "
        "AND b.agent_id = m.agent_id AND b.run_id = m.run_id AND b.session_id = m.session_id "
        f"WHERE m.{LIVE.replace(' AND ', ' AND m.')} AND (b.term IS NULL OR u.tf > b.max_tf "
        "OR m.doclen < b.min_doclen)"
    ).fetchone()[0]
    assert loose == 0
    if conn.execute("SELECT to_regclass('posting_groups') IS NOT NULL").fetchone()[0]:
        # schema v8: no group is left empty, and each row's postings are in its group
        empty = conn.execute("SELECT count(*) FROM posting_groups WHERE cardinality(ids) = 0")
        assert empty.fetchone() == (0,)
        astray = conn.execute(
            "SELECT count(*) FROM posting_groups g CROSS JOIN LATERAL unnest(g.ids) AS e(id) "
            "JOIN memories m ON m.id = e.id WHERE m.pgrp <> g.pgrp"
        )
        assert astray.fetchone() == (0,)
    has_df = conn.execute(
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'posting_groups' AND column_name = 'df'"
    ).fetchone()
    if has_df == (1,):
        # schema v9: each group's document frequency is how many live rows it holds
        off = conn.execute("SELECT count(*) FROM posting_groups WHERE df <> cardinality(ids)")
        assert off.fetchone() == (0,)


def test_postings_kept_by_triggers_match_the_live_rows(pg_dsn: str) -> None:
    store = _open(pg_dsn, near_duplicate_threshold=0.95)
    try:
        a, b = Namespace(user_id="a"), Namespace(user_id="b", agent_id="x")
        ids = [r.id for r in store.add_many(a, [f"alpha beta note {i}" for i in range(30)])]
        store.add_many(b, [NewMemory(content=f"gamma talk {i}", kind="episode") for i in range(9)])
        store.add(a, "alpha beta note 3")  # an exact duplicate: merged
        store.update(a, ids[0], content="rewritten delta delta words")
        store.update(a, ids[2], importance=0.9)  # no term changes
        store.delete(a, ids[1])
        store.flush()
        store.decay(a, rate=0.5, threshold=0.0)
        store.forget(Namespace(user_id="b"))
        store.add(b, "after forget gamma")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _postings_match_the_live_rows(conn)
            row = conn.execute(
                "SELECT tf FROM postings WHERE term = 'delta' AND id = %s", (ids[0],)
            ).fetchone()
            assert row == (2,)
        hits = store.search("delta", a, limit=5, mode="keyword")
        assert [h.memory.id for h in hits] == [ids[0]]
        assert ids[1] not in {h.memory.id for h in store.search("note 1", a, 50, mode="keyword")}
    finally:
        store.close()


def test_posting_groups_follow_updates_deletes_and_moves(pg_dsn: str) -> None:
    # schema v8 keeps a batch's postings as one row per term and namespace; rows taken
    # out of a group (by the store or by hand-written SQL), rewritten or moved to
    # another namespace leave the postings equal to the live rows
    store = _open(pg_dsn)
    try:
        a, b = Namespace(user_id="a"), Namespace(user_id="b")
        ids = [r.id for r in store.add_many(a, [f"kiwi plum {i} pie" for i in range(40)])]
        lone = [r.id for r in store.add_many(b, ["kiwi jam", "plum jam"])]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # one group row per term of the batch: 'kiwi' holds the 40 rows of a
            groups = conn.execute(
                "SELECT cardinality(ids) FROM posting_groups WHERE term = 'kiwi' AND user_id = 'a'"
            ).fetchall()
            assert groups == [(40,)]
        store.update(a, ids[0], content="rewritten kiwi kiwi tart")
        store.delete(a, ids[1])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT set_config(%s, %s, false)",
                (schema.WRITER_SETTING, str(schema.PG_SCHEMA_VERSION)),
            )
            # by hand: delete some rows, move others to another namespace
            conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (ids[2:12],))
            conn.execute("UPDATE memories SET user_id = 'b' WHERE id = ANY(%s)", (ids[12:15],))
            # every row of b's batch deleted: its groups go
            conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (lone,))
            _postings_match_the_live_rows(conn)
            assert conn.execute(
                "SELECT count(*) FROM posting_groups WHERE term = 'jam'"
            ).fetchone() == (0,)
        moved = store.search("kiwi", b, 10, mode="keyword", touch=False)
        assert sorted(h.memory.id for h in moved) == sorted(ids[12:15])
        hits = store.search("kiwi tart", a, 5, mode="keyword", touch=False)
        full = store.search("kiwi tart", a, 5, mode="keyword", touch=False, filters=EVERYTHING)
        assert hits[0].memory.id == ids[0]
        _same_ranking(hits, full, "kiwi tart")
    finally:
        store.close()


def test_a_filled_v7_store_migrates_to_grouped_postings(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the previous version: one postings row per memory and term, bounds in their own
    # table, rows inserted by the writer of that version
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 7)
    old = as_old_writer(_open(pg_dsn), insert_rows_v7)
    ns = Namespace(user_id="m", agent_id="a")
    texts = _corpus(1500, seed=13)
    ids = [r.id for r in old.add_many(ns, texts, dedup=False)]
    old.add_many(Namespace(user_id="n"), texts[:200], dedup=False)
    old.update(ns, ids[0], content="w5 w5 w5 changed before the migration")
    old.delete(ns, ids[1])
    old.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (7,)
        before = conn.execute(
            f"SELECT term, {NS_COLS}, df FROM term_stats ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()
        bounds = conn.execute(
            f"SELECT term, {NS_COLS}, max_tf, min_doclen FROM term_bounds ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()
    monkeypatch.undo()
    store = _open(pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
                schema.PG_SCHEMA_VERSION,
            )
            _postings_match_the_live_rows(conn)
            # the statistics are carried over (since schema v9 a term no live row holds
            # has no statistics row left, where v7 kept one with df 0)
            assert conn.execute(
                f"SELECT term, {NS_COLS}, df FROM term_stats ORDER BY 1, 2, 3, 4, 5"
            ).fetchall() == [r for r in before if r[-1] != 0]
            # and the bounds are those or tighter (v9: each group's own, from its rows;
            # that they still bound every live row is checked above)
            old_bounds = {r[:5]: r[5:] for r in bounds}
            for *key, max_tf, min_doclen in conn.execute(
                f"SELECT term, {NS_COLS}, max_tf, min_doclen FROM term_bounds"
            ).fetchall():
                was_tf, was_len = old_bounds[tuple(key)]
                assert max_tf <= was_tf and min_doclen >= was_len, key
            # the migrated rows are grouped by 1,024 consecutive seq numbers
            sizes = conn.execute(
                "SELECT max(cardinality(ids)) FROM posting_groups WHERE pgrp < 0"
            ).fetchone()
            assert sizes is not None and 0 < sizes[0] <= 1024
        for query in ["w5", "w0 w1", "w3 w17 tag5", "changed migration"]:
            hits = store.search(query, ns, 15, mode="keyword", touch=False)
            full = store.search(query, ns, 15, mode="keyword", touch=False, filters=EVERYTHING)
            _same_ranking(hits, full, query)
        assert store.search("changed migration", ns, 1, mode="keyword")[0].memory.id == ids[0]
        # writes after the migration keep the postings in step
        store.add_many(ns, ["fresh words after w5", "more w5 words"], dedup=False)
        store.update(ns, ids[3], content="w7 rewritten after the migration")
        store.delete(ns, ids[2])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _postings_match_the_live_rows(conn)
    finally:
        store.close()


@pytest.fixture
def big(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[PostgresStore]:
    # "large" from 300 rows here, so that the pruned path runs on a test-sized scope
    monkeypatch.setattr("actormem.store._postgres.SMALL_SCOPE", 300)
    store = _open(pg_dsn, hnsw_min_rows=None)
    texts = _corpus(3000)
    for t in range(3):
        ns = Namespace(user_id=f"u{t}", agent_id="bench")
        store.add_many(ns, texts[t * 1000 : (t + 1) * 1000], dedup=False)
    store.add_many(Namespace(user_id="other"), _corpus(200, seed=9), dedup=False)
    yield store
    store.close()


def _queries(k: int) -> list[str]:
    rng = np.random.default_rng(8)
    texts = _corpus(3000)
    out = []
    for i in rng.choice(len(texts), size=k, replace=False):
        words = texts[int(i)].split()
        n = int(rng.integers(1, 5))
        start = int(rng.integers(0, max(1, len(words) - n)))
        out.append(" ".join(words[start : start + n]))
    return [*out, "w0 w1", "w0 w1 w2 w3", "w0", "w599 w0", "nothing-matches w0"]


def test_a_large_scope_keyword_search_equals_bm25_from_the_rows(
    big: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[tuple[int, int]] = []  # (terms read, terms skipped)
    real = _pg_keyword._attempt

    def spy(conn: Any, scope: Any, read: Any, skip: Any, *rest: Any, **kw: Any) -> Any:
        attempts.append((len(read), len(skip)))
        return real(conn, scope, read, skip, *rest, **kw)

    monkeypatch.setattr(_pg_keyword, "_attempt", spy)
    scope = Namespace(agent_id="bench")
    big.search("w0", scope, 10, mode="keyword")  # the store learns the scope is large
    for query in _queries(40):
        attempts.clear()
        pruned = big.search(query, scope, 20, mode="keyword", touch=False)
        assert attempts, query  # the pruned path ran
        full = big.search(query, scope, 20, mode="keyword", touch=False, filters=EVERYTHING)
        _same_ranking(pruned, full, query)
        assert all(h.memory.namespace.agent_id == "bench" for h in pruned)


def test_keyword_top_skips_common_terms_and_stays_exact(
    big: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = Namespace(agent_id="bench")
    real = _pg_keyword._attempt
    state: dict[str, Any] = {"full": False, "skips": []}

    def spy(c: Any, s: Any, read: Any, skip: Any, known: Any, *rest: Any, **kw: Any) -> Any:
        if state["full"]:  # the reference: skip nothing (read: (term, weight))
            return real(c, s, [*read, *[(t, w) for t, w, _ in skip]], [], 0.0, *rest, **kw)
        state["skips"].append(len(skip))
        return real(c, s, read, skip, known, *rest, **kw)

    monkeypatch.setattr(_pg_keyword, "_attempt", spy)
    skipped = 0
    with psycopg.connect(big.dsn, autocommit=True) as conn:
        for query in _queries(40):
            terms = tokenize(query)
            state.update(full=False, skips=[])
            ids, scores, _ = _pg_keyword.keyword_top(conn, scope, terms, 30, 1.2, 0.75)
            skipped += bool(state["skips"] and state["skips"][-1])
            state["full"] = True
            ids2, scores2, _ = _pg_keyword.keyword_top(conn, scope, terms, 30, 1.2, 0.75)
            # the same scores; the same rows, but for the order of rows whose sums differ
            # only by rounding (the terms are added in another order) and which of those
            # tied at the last place made the cut
            assert scores == pytest.approx(scores2, rel=1e-12), query
            assert len(ids) == len(ids2)
            if scores:
                above = scores[-1] * (1 + 1e-12)
                a = {i for i, x in zip(ids, scores, strict=True) if x > above}
                b = {i for i, x in zip(ids2, scores2, strict=True) if x > above}
                assert a == b, query
    assert skipped >= 5  # the pruning is exercised, not only the full computation


def test_keyword_top_leaves_the_planner_settings_of_the_callers_transaction(
    big: PostgresStore,
) -> None:
    # the attempts hash their postings by id (sorts disabled inside the transaction);
    # the search's own statement, planned next in the same transaction, must not be
    scope = Namespace(agent_id="bench")
    with psycopg.connect(big.dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            ids, _, statements = _pg_keyword.keyword_top(conn, scope, ["w0", "w1"], 30, 1.2, 0.75)
            assert ids and statements >= 1
            assert conn.execute("SHOW enable_sort").fetchone()[0] == "on"
        ids2, _, _ = _pg_keyword.keyword_top(conn, scope, ["w0", "w1"], 30, 1.2, 0.75)
        assert ids2 == ids
        assert conn.execute("SHOW enable_sort").fetchone()[0] == "on"
        # a session that chose otherwise gets its own value back
        conn.execute("SET enable_sort = off")
        with conn.transaction():
            _pg_keyword.keyword_top(conn, scope, ["w0", "w1"], 30, 1.2, 0.75)
            assert conn.execute("SHOW enable_sort").fetchone()[0] == "off"


def test_context_blends_neighbours_of_the_candidates_like_duckdb(
    pg_dsn: str, tmp_path: Any
) -> None:
    # DuckDB blends every episode of the scope; PostgreSQL only the neighbourhoods
    # of each retriever's candidates.  On conversations where the answer is the turn
    # after the one matching the question, both return the same top rows.
    rng = np.random.default_rng(4)
    vocab = [f"v{i}" for i in range(300)]
    convs = []
    for c in range(6):
        convs.append(
            (
                Namespace(user_id="u", session_id=f"s{c}"),
                [" ".join(rng.choice(vocab, size=8)) for _ in range(120)],
            )
        )
    pg = _open(pg_dsn)
    dk = DuckDBStore(
        tmp_path / "m.duckdb",
        embedder=HashEmbedder(DIM),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
    )
    try:
        for store in (pg, dk):
            for ns, turns in convs:
                store.add_many(ns, [NewMemory(content=t, kind="episode") for t in turns])
        scope = Namespace(user_id="u")
        same = total = 0
        for _ in range(30):
            ns, turns = convs[int(rng.integers(len(convs)))]
            query = " ".join(turns[int(rng.integers(len(turns)))].split()[:4])
            a = [h.memory.content for h in pg.search(query, scope, 10, touch=False)]
            b = [h.memory.content for h in dk.search(query, scope, 10, touch=False)]
            same += len(set(a) & set(b))
            total += len(b)
            assert a[:3] == b[:3], query
        assert same / total >= 0.9, same / total
    finally:
        pg.close()
        dk.close()


def test_a_filled_v3_store_migrates_to_v4_with_its_postings(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "PG_SCHEMA_VERSION", 3)
    # the code of version 3 left new rows' statistics to its triggers (since version 5
    # the writer adds them itself): write the old store as that code did
    old = as_old_writer(_open(pg_dsn, hnsw_min_rows=None), insert_rows_v3)
    ns = Namespace(user_id="m", agent_id="a")
    texts = _corpus(1500, seed=11)
    ids = [r.id for r in old.add_many(ns, texts, dedup=False)]
    old.add_many(Namespace(user_id="n"), texts[:200], dedup=False)
    old.update(ns, ids[0], content="w5 w5 w5 changed before the migration")
    old.delete(ns, ids[1])
    old.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (3,)
        assert conn.execute("SELECT to_regclass('postings')").fetchone() == (None,)
    monkeypatch.undo()
    store = _open(pg_dsn, hnsw_min_rows=None)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
                schema.PG_SCHEMA_VERSION,
            )
            _postings_match_the_live_rows(conn)
        for query in ["w5", "w0 w1", "w3 w17 tag5", "changed migration"]:
            hits = store.search(query, ns, 15, mode="keyword", touch=False)
            full = store.search(query, ns, 15, mode="keyword", touch=False, filters=EVERYTHING)
            _same_ranking(hits, full, query)
        assert store.search("changed migration", ns, 1, mode="keyword")[0].memory.id == ids[0]
        # writes after the migration keep the postings in step
        store.add(ns, "fresh words after w5")
        store.delete(ns, ids[2])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            _postings_match_the_live_rows(conn)
    finally:
        store.close()
