"""The PostgreSQL search cache under the conditions a real deployment puts it in: a memory
budget in bytes that holds while scopes grow, scopes that do not fit together, an old
transaction left open on another connection, and a hand-written ``TRUNCATE``.

Each test checks the answers against a store with the cache off (the SQL path, the
reference) and the cache's own counters (loads, feed rows read), never timings.
"""

from __future__ import annotations

import random

import psycopg

from actormem.store import _pg_schema as schema

from .test_store_pg_cache import (
    SESSIONS,
    USER,
    _compare,
    _fill,
    _ids_of,
    _live_ids,
    _open,
)


def test_an_idle_transaction_does_not_make_every_check_read_the_writes_since(
    pg_dsn: str,
) -> None:
    """A connection idle in a transaction holds every snapshot's xmin back.  The checks
    must read the rows written since the copy's snapshot and the stamps it saw in
    progress, not every row written since that transaction began -- and the in-progress
    write, once committed, is still caught."""
    cached = _open(pg_dsn, search_cache_rows=100_000)
    ref = _open(pg_dsn, search_cache_rows=None)
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
