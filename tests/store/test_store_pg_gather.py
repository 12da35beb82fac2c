"""How a PostgreSQL search runs its statements (:mod:`actormem.store._pg_gather`).

A large scope's vector side runs on a second pooled connection, in the
snapshot the first one exported, while the first connection prunes the
keyword side; a scope without episodes is searched without the context
branch, and the statement's own episode count catches episodes written
since.  Each test compares with the plain path (everything in one statement
on one connection, the context branch always present), and races are made
deterministic by events between the two connections, never by sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actormem.models.embedders import HashEmbedder
from actormem.store import Namespace, NewMemory, SearchConfig, _pg_gather, _postgres
from actormem.store._postgres import PostgresStore

psycopg = pytest.importorskip("psycopg")

DIM = 32
HANG = 60.0  # seconds: a guard against a hang, never a timing assertion


def _open(dsn: str, **kwargs: Any) -> PostgresStore:
    kwargs.setdefault("search_cache_bytes", None)  # the SQL path is what is tested
    kwargs.setdefault("embedder", HashEmbedder(DIM))
    kwargs.setdefault("near_duplicate_threshold", None)
    kwargs.setdefault("touch_flush_interval", None)
    kwargs.setdefault("hnsw_min_rows", None)
    kwargs.setdefault("clock", lambda: 1.8e9)  # scores do not drift with recency between runs
    return PostgresStore(dsn, **kwargs)


def _texts(n: int, offset: int = 0) -> list[str]:
    words = ["amber", "basil", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris"]
    return [f"{words[i % 9]} {words[(i * 7) % 9]} note {i % 37} item{i + offset}" for i in range(n)]


def _hits(store: PostgresStore, query: str, scope: Namespace, **kw: Any) -> list[Any]:
    return [
        (h.memory.id, round(h.score, 12), round(h.bm25, 12))
        for h in store.search(query, scope, 15, touch=False, **kw)
    ]


RRF = SearchConfig(method="rrf")


@pytest.fixture
def large(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[PostgresStore]:
    monkeypatch.setattr(_postgres, "SMALL_SCOPE", 50)  # a test-sized "large" scope
    store = _open(pg_dsn)
    for t in range(3):
        store.add_many(Namespace(user_id=f"u{t}", agent_id="bot"), _texts(120, 1000 * t))
    store.search("amber", Namespace(agent_id="bot"), 5)  # the store learns it is large
    yield store
    store.close()


QUERIES = ["amber basil", "cedar note 3", "item1005 grove", "harbor iris delta", "fjord"]


def test_the_vector_side_beside_the_keyword_side_gives_the_one_connection_answer(
    large: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = Namespace(agent_id="bot")
    threads: list[str] = []
    real = _pg_gather.vector_top

    def spy(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kw)

    monkeypatch.setattr(_pg_gather, "vector_top", spy)
    beside = {q: _hits(large, q, scope) for q in QUERIES}
    assert len(threads) == len(QUERIES)
    assert all(t.startswith("actormem-pg-aside") for t in threads)
    large._gatherer._aside = None  # everything in the statement, on one connection
    for q in QUERIES:
        assert _hits(large, q, scope) == beside[q], q
    assert len(threads) == len(QUERIES)


def test_the_vector_side_reads_the_snapshot_of_the_keyword_side(
    large: PostgresStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # another worker commits the query's own text (the nearest vector there is) after
    # the search's snapshot was taken and before its vector side runs: the vector side
    # must not see it (the statement, on the first connection, cannot), else the ranks
    # it hands over are those of another moment (rank fusion: every rank counts)
    scope, ns = Namespace(agent_id="bot"), Namespace(user_id="u1", agent_id="bot")
    query = "grove harbor newcomer"
    before = _hits(large, query, scope, config=RRF)
    other = _open(pg_dsn)
    committed = threading.Event()
    real_kw, real_vec = _pg_gather.keyword_top, _pg_gather.vector_top
    added: list[str] = []

    def racing_kw(*args: Any) -> Any:
        out = real_kw(*args)
        if not added:
            added.append(other.add(ns, query).id)  # commits
            committed.set()
        return out

    def late_vec(*args: Any, **kw: Any) -> Any:
        assert committed.wait(HANG), "the keyword side never ran"
        return real_vec(*args, **kw)

    monkeypatch.setattr(_pg_gather, "keyword_top", racing_kw)
    monkeypatch.setattr(_pg_gather, "vector_top", late_vec)
    try:
        during = _hits(large, query, scope, config=RRF)
        assert added, "the race ran"
        assert during == before  # the moment of the snapshot, ranks and scores included
        monkeypatch.setattr(_pg_gather, "keyword_top", real_kw)
        monkeypatch.setattr(_pg_gather, "vector_top", real_vec)
        after = large.search(query, scope, 15, touch=False)
        assert after[0].memory.id == added[0]  # and the next search sees the commit
    finally:
        other.close()


def test_with_no_connection_free_the_vector_side_runs_in_the_statement(
    large: PostgresStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = Namespace(agent_id="bot")
    beside = {q: _hits(large, q, scope) for q in QUERIES}
    store = _open(pg_dsn, pool_size=1)  # the search's own connection is the only one
    try:
        store.search("amber", scope, 5)
        called: list[int] = []
        real = _pg_gather.vector_top
        monkeypatch.setattr(_pg_gather, "vector_top", lambda *a, **k: called.append(1))
        for q in QUERIES:
            assert _hits(store, q, scope) == beside[q], q
        assert not called
        monkeypatch.setattr(_pg_gather, "vector_top", real)
    finally:
        store.close()


NO_CONTEXT = SearchConfig(
    context_prev_weight=0.0, context_next_weight=0.0, context_prev2_weight=0.0
)


def _conversation(n: int) -> list[NewMemory]:
    words = ["kayak", "lantern", "meadow", "nectar", "orchid", "pepper", "quartz", "raven"]
    return [
        NewMemory(content=f"{words[i % 8]} {words[(i * 3) % 8]} turn {i}", kind="episode")
        for i in range(n)
    ]


@pytest.mark.parametrize("large_scope", [False, True])
def test_episodes_written_after_a_search_without_them_get_their_context(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, large_scope: bool
) -> None:
    if large_scope:
        monkeypatch.setattr(_postgres, "SMALL_SCOPE", 50)
    scope = Namespace(user_id="u")
    a, b = _open(pg_dsn), _open(pg_dsn)
    try:
        a.add_many(Namespace(user_id="u", session_id="facts"), _texts(80))
        a.search("kayak meadow", scope, 5, touch=False)
        a.search("kayak meadow", scope, 5, touch=False)  # learnt: large, and without episodes
        assert a._gatherer._no_episodes
        b.add_many(Namespace(user_id="u", session_id="talk"), _conversation(60))
        fresh = _open(pg_dsn)  # knows nothing: the statement with its context branch
        try:
            fresh.search("kayak meadow", scope, 5, touch=False)
            for q in ["kayak meadow", "orchid turn 7", "raven pepper"]:
                want = _hits(fresh, q, scope)
                assert _hits(a, q, scope) == want, q
                plain = _hits(a, q, scope, config=NO_CONTEXT)
                assert plain != want, "the context changes these answers"
        finally:
            fresh.close()
        assert not a._gatherer._no_episodes
    finally:
        a.close()
        b.close()
