"""The PostgreSQL search cache under the conditions a real deployment puts it in: a memory
budget in bytes that holds while scopes grow, scopes that do not fit together, an old
transaction left open on another connection, and a hand-written ``TRUNCATE``.

Each test checks the answers against a store with the cache off (the SQL path, the
reference) and the cache's own counters (loads, feed rows read), never timings.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from actormem.store import Namespace, SearchMode
from actormem.store import _pg_cache as pg_cache
from actormem.store import _pg_schema as schema
from actormem.store._postgres import PostgresStore

from .test_store_pg_cache import (
    NO_CONTEXT,
    SESSIONS,
    USER,
    _compare,
    _fill,
    _ids_of,
    _live_ids,
    _open,
    _same,
)

S3 = Namespace(user_id="u", agent_id="a", session_id="s3")


def _sizes(dsn: str, scopes: list[Namespace]) -> dict[Namespace, int]:
    """The bytes each scope's copy holds, measured by a store with room for all."""
    probe = _open(dsn, search_cache_bytes=2**30)
    try:
        out = {}
        for scope in scopes:
            assert probe.warm_cache(scope) and probe._cache is not None
            entry = probe._cache.entry(scope)
            assert entry is not None
            out[scope] = entry.nbytes()
        return out
    finally:
        probe.close()


def _same_as_sql(
    store: PostgresStore,
    ref: PostgresStore,
    query: str,
    scope: Namespace,
    mode: SearchMode = "hybrid",
) -> None:
    _same(
        store.search(query, scope, 7, config=NO_CONTEXT, mode=mode, touch=False),
        ref.search(query, scope, 7, config=NO_CONTEXT, mode=mode, touch=False),
        f"{scope} {mode} {query!r}",
    )


def test_the_byte_budget_drops_the_least_recently_searched_copy_and_never_loads_a_too_big_one(
    pg_dsn: str,
) -> None:
    rng = random.Random(1)
    ref = _open(pg_dsn, search_cache_bytes=None)
    for ns in SESSIONS:
        _fill(ref, rng, 40, ns)
    _fill(ref, rng, 200, S3)
    size = _sizes(pg_dsn, [*SESSIONS, USER])
    s0, s1, s2 = SESSIONS
    budget = max(size[s0] + size[s1], size[s0] + size[s2]) + size[s2] // 4
    assert size[s0] + size[s1] + size[s2] > budget and size[USER] > budget
    store = _open(pg_dsn, search_cache_bytes=budget)
    try:
        assert store._cache is not None
        assert store.warm_cache(s0) and store.warm_cache(s1)
        store.search("w1", s0, 3, touch=False)  # s0 now the most recent
        assert store.warm_cache(s2)  # no room for three: s1 goes
        assert store._cache.held(s0) and store._cache.held(s2)
        assert not store._cache.held(s1)
        assert store._cache.nbytes <= budget and store._cache.evictions == 1
        assert not store.warm_cache(USER)  # larger than the whole budget
        hits, loads = store._cache.hits, store._cache.loads
        for _ in range(3):  # searched again and again: still never loaded
            _same_as_sql(store, ref, "w1 w2", USER)
        assert store._cache._thread is None and store._cache.loads == loads
        _same_as_sql(store, ref, "w1 w2", s1)
        assert store._cache.hits == hits  # both answered by SQL
    finally:
        store.close()
        ref.close()


def test_a_copy_that_grows_past_the_budget_is_dropped_and_sql_answers_exactly(
    pg_dsn: str,
) -> None:
    """The budget holds while a held scope grows through the catch-up, not only at load:
    first the other copy makes room, then the copy that outgrew the budget alone goes."""
    rng = random.Random(13)
    ref = _open(pg_dsn, search_cache_bytes=None)
    s0, _, s2 = SESSIONS
    _fill(ref, rng, 40, s0)
    _fill(ref, rng, 40, s2)
    size = _sizes(pg_dsn, [s0, s2])
    budget = size[s0] + size[s2] + size[s2] // 4
    store = _open(pg_dsn, search_cache_bytes=budget)
    try:
        assert store._cache is not None
        assert store.warm_cache(s0) and store.warm_cache(s2)
        _fill(ref, rng, 40, s2)  # another worker: s2 no longer fits beside s0
        hits = store._cache.hits
        _same_as_sql(store, ref, "w1 tea", s2)
        assert store._cache.hits == hits + 1  # the grown copy answered
        assert store._cache.held(s2) and not store._cache.held(s0)
        assert store._cache.nbytes <= budget and store._cache.over_budget == 0
        _fill(ref, rng, 300, s2)  # now larger than the whole budget
        _same_as_sql(store, ref, "w2 paris", s2)
        assert not store._cache.held(s2) and store._cache.over_budget == 1
        assert store._cache.nbytes == 0
        loads = store._cache.loads
        for query in ("w1", "w3 river", "green"):
            _same_as_sql(store, ref, query, s2)
        assert store._cache.loads == loads and store._cache._thread is None  # not reloaded
    finally:
        store.close()
        ref.close()


def test_two_scopes_that_do_not_fit_together_do_not_reload_each_other_on_every_search(
    pg_dsn: str,
) -> None:
    """Alternating searches over two scopes the budget holds one of: a copy that would
    drop the other is loaded only after its SQL searches paid for a load (184 loads in
    200 such searches before), and every answer stays the SQL path's."""
    rng = random.Random(14)
    ref = _open(pg_dsn, search_cache_bytes=None)
    a, b = SESSIONS[0], SESSIONS[2]
    _fill(ref, rng, 1_000, a)
    _fill(ref, rng, 1_000, b)
    size = _sizes(pg_dsn, [a, b])
    store = _open(pg_dsn, search_cache_bytes=max(size.values()) * 3 // 2)
    try:
        assert store._cache is not None
        searches = 200
        for i in range(searches):
            scope = a if i % 2 == 0 else b
            query = " ".join(rng.sample(["w1", "w2", "tea", "green", "paris", "w5"], 2))
            _same_as_sql(store, ref, query, scope)
        thread = store._cache._thread
        if thread is not None:
            store._cache._queue.put(None)
            thread.join()
        # the first copy fills free room; each later one needed _ADMIT_EVICT searches
        # of its scope since that scope was last dropped, and their time
        bound = 1 + searches // pg_cache._ADMIT_EVICT
        assert 1 <= store._cache.loads <= bound
        assert store._cache.nbytes <= store._cache.budget_bytes
    finally:
        store.close()
        ref.close()


def test_an_idle_transaction_does_not_make_every_check_read_the_writes_since(
    pg_dsn: str,
) -> None:
    """A connection idle in a transaction holds every snapshot's xmin back.  The checks
    must read the rows written since the copy's snapshot and the stamps it saw in
    progress, not every row written since that transaction began -- and the in-progress
    write, once committed, is still caught."""
    cached = _open(pg_dsn, search_cache_bytes=2**26)
    ref = _open(pg_dsn, search_cache_bytes=None)
    rng = random.Random(12)
    try:
        _fill(cached, rng, 50, SESSIONS[0])
        assert cached.warm_cache(USER) and cached._cache is not None
        victim = _live_ids(cached, SESSIONS[0])[0]
        word = "zz" + str(rng.randint(0, 10**9))
        cached.update(SESSIONS[0], victim, content=f"{word} kept by an open transaction")
        victim = _ids_of(cached, word, USER)[0]
        with psycopg.connect(pg_dsn) as idle:  # not autocommit: its transaction stays open
            idle.execute(
                "SELECT set_config('actormem.writer_version', %s, false)",
                (str(schema.PG_SCHEMA_VERSION),),
            )
            idle.execute("UPDATE memories SET deleted_at = 1 WHERE id = %s", (victim,))
            for _ in range(20):  # 2,000 rows, 20 transactions, by another worker
                _fill(ref, rng, 100, SESSIONS[1])
            before = cached._cache.feed_rows
            assert _ids_of(cached, word, USER) == [victim]  # catches up the 2,000 rows
            caught = cached._cache.feed_rows - before
            assert 2_000 <= caught <= 2_100
            _compare(cached, ref, rng, "an old transaction open")
            before, hits = cached._cache.feed_rows, cached._cache.hits
            for _ in range(10):
                assert _ids_of(cached, word, USER) == [victim]
            # nothing was written: the checks read no feed row (the open transaction's
            # own row is not visible to them)
            assert cached._cache.feed_rows == before
            assert cached._cache.hits - hits == 10
            idle.commit()
        # the stamp the copy saw in progress committed: the next search catches it up
        assert _ids_of(cached, word, USER) == []
        hits = cached._cache.hits
        _compare(cached, ref, rng, "the old transaction committed")
        assert cached._cache.hits > hits
    finally:
        cached.close()
        ref.close()


#: A hand-written TRUNCATE that keeps the SQL path right must empty, with ``memories``,
#: the tables its triggers keep in step (README, "Running several workers").
TRUNCATE_ALL = "TRUNCATE memories, scope_stats, posting_groups, memory_gone"


def test_a_hand_written_truncate_drops_every_copy_read_before_it(pg_dsn: str) -> None:
    """TRUNCATE writes no row stamp and fires no row trigger: the feed cannot tell a copy.
    The copy remembers the tables' storage files, which a TRUNCATE replaces, and a search
    that finds others is answered by SQL (and the copy loaded again)."""
    rng = random.Random(15)
    cached = _open(pg_dsn, search_cache_bytes=2**26)
    ref = _open(pg_dsn, search_cache_bytes=None)
    try:
        _fill(cached, rng, 60, SESSIONS[0])
        assert cached.warm_cache(USER) and cached._cache is not None
        _same_as_sql(cached, ref, "w1 tea", USER)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(TRUNCATE_ALL)
        fresh = [f"quokka {w}" for w in ("numbat", "bilby numbat", "w1", "dingo", "w1 paris")]
        for text in fresh:
            ref.add(SESSIONS[0], text)
        hits = cached._cache.hits
        # keyword searches whose candidates are all new rows: the copy's BM25
        # statistics would still count the 60 truncated rows
        for query in ("quokka", "numbat", "quokka bilby"):
            _same_as_sql(cached, ref, query, USER, "keyword")
        assert cached._cache.hits == hits  # the copy read before the TRUNCATE never answered
        thread = cached._cache._thread
        assert thread is not None  # searched again: loaded anew
        cached._cache._queue.put(None)
        thread.join()
        assert cached._cache.held(USER)
        _compare(cached, ref, rng, "after a TRUNCATE")
        assert cached._cache.hits > hits
    finally:
        cached.close()
        ref.close()


def test_a_load_cut_short_at_the_budget_is_never_kept_as_a_copy(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load stops reading when its running size passes the budget; the exact count
    taken after it (``measure``) can come out smaller than that running estimate (a
    filter value counted at its object size plus a margin).  A copy of the rows read
    so far must then still be refused: held, it would answer every later search
    without the rows it never read (the change feed only brings rows written after
    its snapshot).  Simulated with a small load chunk and a re-count that drops the
    objects' estimate."""
    mp = monkeypatch
    rng = random.Random(7)
    ref = _open(pg_dsn, search_cache_bytes=None)
    _fill(ref, rng, 200, S3)
    full = _sizes(pg_dsn, [S3])[S3]
    mp.setattr(pg_cache, "_LOAD_CHUNK", 16)
    real_measure = pg_cache.ScopeIndex.measure

    def undercount(self: pg_cache.ScopeIndex) -> int:
        real_measure(self)
        self._obj_bytes = 0  # the exact count came out (much) smaller than the estimate
        return self.nbytes()

    mp.setattr(pg_cache.ScopeIndex, "measure", undercount)
    store = _open(pg_dsn, search_cache_bytes=full // 2)
    try:
        assert store._cache is not None
        assert not store.warm_cache(S3)
        assert not store._cache.held(S3)
        for query in ("w1 w2", "w3", "w5 w7"):
            _same_as_sql(store, ref, query, S3)
    finally:
        store.close()
        ref.close()
