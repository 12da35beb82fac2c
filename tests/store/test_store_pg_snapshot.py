"""A PostgreSQL search that takes several statements reads one moment of the database.

A large scope's keyword side is pruned first (:mod:`actormem.store._pg_keyword`:
statistics, one or a few pruning statements) and the search's statement follows.
Another worker's commit between two of those statements must not mix two
moments: a row deleted meanwhile returned as a deleted record, or a threshold
learnt from rows that are gone pruning rows that still count.  The races are
made deterministic by committing the other worker's write from a hook between
two statements (no sleeps).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, _pg_gather, _pg_keyword, _postgres
from actormem.store._index import tokenize
from actormem.store._pg_search import FirstStageQuery, collect
from actormem.store._postgres import PostgresStore

psycopg = pytest.importorskip("psycopg")


def _open(dsn: str) -> PostgresStore:
    return PostgresStore(
        dsn,
        embedder=HashEmbedder(16),
        near_duplicate_threshold=None,
        touch_flush_interval=None,
        hnsw_min_rows=None,
    )


@pytest.fixture
def workers(pg_dsn: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    a, b = _open(pg_dsn), _open(pg_dsn)
    yield a, b
    a.close()
    b.close()


def test_a_delete_between_a_large_scope_searchs_statements_returns_no_deleted_record(
    workers: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = workers
    ns = Namespace(user_id="u")
    ids = {r.id for r in a.add_many(ns, [f"zebra note {i}" for i in range(20)], dedup=False)}
    monkeypatch.setattr(_postgres, "SMALL_SCOPE", 5)  # a test-sized "large" scope
    a.search("zebra", ns, 5, mode="keyword")  # worker a learns the scope is large
    real = _pg_keyword.keyword_top
    gone: list[str] = []

    def racing(conn: Any, *args: Any) -> Any:
        out = real(conn, *args)
        gone.append(out[0][0])
        b.delete(ns, out[0][0])  # worker b deletes the best row meanwhile (commits)
        return out

    monkeypatch.setattr(_pg_gather, "keyword_top", racing)
    hits = a.search("zebra", ns, 20, mode="keyword", touch=False)
    assert gone, "the pruned path ran"
    # the answer of one moment: the one before the delete (all 20 live rows), every
    # record as it was then -- never a row marked deleted
    assert {h.memory.id for h in hits} == ids
    assert all(h.memory.deleted_at is None for h in hits)
    monkeypatch.setattr(_pg_gather, "keyword_top", real)
    after = a.search("zebra", ns, 20, mode="keyword", touch=False)
    assert {h.memory.id for h in after} == ids - {gone[0]}


def test_the_search_statement_returns_only_live_rows_of_the_scope_given_to_it(
    workers: tuple[PostgresStore, PostgresStore],
) -> None:
    # the keyword side found beforehand names a row deleted since and a row of another
    # namespace: the statement's own fetch leaves both out
    a, _ = workers
    ns, other = Namespace(user_id="u"), Namespace(user_id="v")
    mine = [r.id for r in a.add_many(ns, ["walrus one", "walrus two", "walrus three"])]
    theirs = a.add(other, "walrus elsewhere").id
    a.delete(ns, mine[0])
    given = ([mine[0], theirs, mine[1], mine[2]], [4.0, 3.0, 2.0, 1.0])
    with psycopg.connect(a.dsn, autocommit=True) as conn:
        q = FirstStageQuery(ns, None, ["walrus"], None, 10, False, True, 1.2, 0.75)
        out = collect(conn, q, kw_given=given)
    assert [r[0] for r in out.rows] and {r[0] for r in out.rows} == {mine[1], mine[2]}
    assert all(r[16] is None for r in out.rows)  # deleted_at


def _reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make keyword_top skip nothing: the full BM25 computation."""
    real = _pg_keyword._attempt

    def full(c: Any, s: Any, read: Any, skip: Any, known: Any, *rest: Any, **kw: Any) -> Any:
        return real(c, s, [*read, *[(t, w) for t, w, _ in skip]], [], 0.0, *rest, **kw)

    monkeypatch.setattr(_pg_keyword, "_attempt", full)


def test_pruning_attempts_and_statistics_read_one_moment(
    workers: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # attempt 1 learns a threshold from session s1's rows, attempt 2 is pruned with it:
    # when another worker forgets s1 between them, the rows of s2 that are the best
    # ones afterwards fall under the threshold of rows that are gone
    a, b = workers
    scope = Namespace(user_id="u")
    s1, s2 = Namespace(user_id="u", session_id="s1"), Namespace(user_id="u", session_id="s2")
    longs = ["rare " + " ".join(f"f{j}w{i}" for i in range(150 + 3 * j)) for j in range(19)]
    a.add_many(
        s1,
        ["rare rare rare rare rare rare", "rare", *longs[:4], "common " * 9]
        + [f"common y{i}" for i in range(100)],
        dedup=False,
    )
    a.add_many(s2, [*longs[4:], *[f"z{i} q" for i in range(100)]], dedup=False)
    terms, pool = ["rare", "common"], 10
    with psycopg.connect(a.dsn, autocommit=True) as conn:
        with monkeypatch.context() as m:
            _reference(m)
            want_ids, want, _ = _pg_keyword.keyword_top(conn, scope, terms, pool, 1.2, 0.3)
        real = _pg_keyword._attempt
        seen: list[int] = []

        def racing(c: Any, s: Any, read: Any, skip: Any, *rest: Any, **kw: Any) -> Any:
            out = real(c, s, read, skip, *rest, **kw)
            seen.append(len(skip))
            if len(seen) == 1:
                b.forget(s1)  # another worker, between attempts 1 and 2
            return out

        monkeypatch.setattr(_pg_keyword, "_attempt", racing)
        ids, scores, statements = _pg_keyword.keyword_top(conn, scope, terms, pool, 1.2, 0.3)
        assert statements >= 2 and seen[0] > 0, "attempt 1 pruned, a second attempt ran"
        # the answer of the moment before the forget, exactly
        assert scores == pytest.approx(want, rel=1e-12)
        assert set(ids) == set(want_ids)
        # and after it, the search sees the forget
        monkeypatch.setattr(_pg_keyword, "_attempt", real)
        now_ids, now, _ = _pg_keyword.keyword_top(conn, scope, terms, pool, 1.2, 0.3)
        _reference(monkeypatch)
        _, ref, _ = _pg_keyword.keyword_top(conn, scope, terms, pool, 1.2, 0.3)
        assert now == pytest.approx(ref, rel=1e-12) and len(now) == pool
        assert not set(now_ids) & set(want_ids[:2])


def test_a_term_without_bounds_is_bounded_by_its_weight(
    workers: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a (term, namespace) with no term_bounds row (a database written around them):
    # the skipped term's bound must still bound the row holding it nine times
    a, _ = workers
    ns = Namespace(user_id="u")
    # 20 short rows hold "rare" (its postings fill attempt 1's pool); "common" is held by
    # over a fifth of the rows (skipped at first), nine times by one short row that
    # outscores every "rare" row -- but not the bound of a count 1 and length 0
    rows = [f"rare f{i}" for i in range(20)] + ["common " * 9]
    rows += [f"common y{i}" for i in range(44)] + [f"z{i} q" for i in range(135)]
    a.add_many(ns, rows, dedup=False)
    with psycopg.connect(a.dsn, autocommit=True) as conn:
        # (since schema v9 the bounds are columns of the posting groups: the loosest
        # values, those v8 gave a statistics row without bounds of its own)
        conn.execute(
            "UPDATE posting_groups SET max_tf = 2147483647, min_doclen = 0 WHERE term = 'common'"
        )
        terms = tokenize("rare common")
        # (with a bound as if its count were 1 and its length 0, "common" was skipped
        # and the pruned answer missed the best row)
        ids, scores, _ = _pg_keyword.keyword_top(conn, ns, terms, 10, 1.2, 0.3)
        _reference(monkeypatch)
        ref_ids, ref, _ = _pg_keyword.keyword_top(conn, ns, terms, 10, 1.2, 0.3)
    assert scores == pytest.approx(ref, rel=1e-12)
    assert ids[0] == ref_ids[0]
    row = a.get(ns, ids[0])
    assert row is not None and row.content.startswith("common common")
