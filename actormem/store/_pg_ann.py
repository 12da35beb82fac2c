"""Approximate (HNSW) vector indexes for the large scopes of a PostgreSQL store.

Why per scope, and only for large ones
    Exact search reads every row of the scope: ~2 ms for a 1k-row tenant,
    64-76 ms for 100k rows.  An HNSW index over the whole table answers in
    1-2 ms but is a trap for a tenant's search (the planner walks the graph
    first and filters after: recall 0.04) and drops ingest from ~20k rows/s
    to ~540 rows/s.  So a scope gets an index of its own, a *partial* HNSW
    index whose predicate is the scope (``agent_id = 'bench' AND deleted_at
    IS NULL AND superseded_by IS NULL``), once it holds ``min_rows`` live
    rows (20,000 by default: there exact search costs ~15 ms on this machine
    while the index answers in ~2).  Only writes into that scope pay the
    index's cost; every other scope keeps exact search on its btree.

How an index comes to be
    A search of a scope past the threshold, without filters, that knows of
    no ready index looks its scope up in ``vector_indexes`` (at most every
    ``recheck`` seconds per scope and process).  If none is ready, a
    background thread of that process builds it: it takes a *session*
    advisory lock of the scope (so only one worker of all builds it; a
    builder that dies frees the lock), records ``building``, drops an
    invalid left-over of a crashed build, runs ``CREATE INDEX CONCURRENTLY
    IF NOT EXISTS`` (writers go on meanwhile) and records ``ready``.  Until
    then, and whenever anything fails, searches stay exact: correct, only
    slower.  :meth:`AnnIndexes.build` does the same in the caller's thread
    (after a bulk load, or in a deployment script).

How it is searched
    ``ORDER BY embedding <=> $q LIMIT k`` under the index's own predicate,
    written with the same literal values so the planner can prove the
    partial index applies, with ``hnsw.iterative_scan = relaxed_order`` and
    ``hnsw.ef_search`` set on the store's connections (they affect nothing but
    HNSW scans).  The candidates' exact cosines are computed afterwards and
    fusion ranks them, so the order the graph returns them in does not
    matter.  A search with filters stays exact.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import structlog

from actormem.store._pg_queries import PG_LIVE
from actormem.store._types import Namespace, StoreError

__all__ = ["DEFAULT_MIN_ROWS", "EF_SEARCH", "AnnIndexes", "scope_text"]

log = structlog.get_logger(__name__)

#: Live rows from which a scope gets its own HNSW index.
DEFAULT_MIN_ROWS: Final = 20_000
#: ``hnsw.ef_search`` of the store's connections (recall 0.996 at 100k in the issue).
EF_SEARCH: Final = 100
#: The advisory lock of the one index build of ``memories`` at a time (``_table_lock``).
_TABLE_LOCK: Final = "actormem.ann\x1f(memories)"
#: Seconds between two tries for it.
_TABLE_POLL: Final = 0.2


def scope_text(scope: Namespace) -> str:
    """A stable text naming the scope (its fixed columns and values)."""
    return "\x1f".join(f"{k}={v}" for k, v in sorted(scope.items()))


def _literal(value: str) -> str:
    """A SQL string literal (``standard_conforming_strings`` is on since PostgreSQL 9.1)."""
    if "\x00" in value:
        raise ValueError("NUL in a namespace value")
    return "'" + value.replace("'", "''") + "'"


def predicate(scope: Namespace) -> str:
    """The partial index's predicate: the scope's live rows, values as literals."""
    parts = [f"{k} = {_literal(v)}" for k, v in sorted(scope.items())]
    return " AND ".join([*parts, PG_LIVE])


class AnnIndexes:
    """Which scopes have a ready HNSW index, and building the missing ones.

    Args:
        connect: Opens a new autocommit connection (not from the pool: a build
            holds its connection for minutes).
        where: The database, for messages.
        min_rows: Live rows from which a scope gets an index (``None``: never).
        recheck: Seconds between two looks at ``vector_indexes`` for one scope.
        clock: Monotonic time.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        where: str,
        min_rows: int | None,
        recheck: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self._where = where
        self.min_rows = min_rows
        self._recheck = recheck
        self._clock = clock
        self._lock = threading.Lock()
        self._ready: dict[str, str] = {}  # scope text -> predicate
        self._looked: dict[str, float] = {}  # scope text -> when it was last looked up
        self._threads: list[threading.Thread] = []
        self._closed = False

    def predicate(self, scope: Namespace) -> str | None:
        """The predicate of the scope's ready index, if this process knows of one."""
        return self._ready.get(scope_text(scope)) if self.min_rows is not None else None

    def consider(self, scope: Namespace, live_rows: int) -> None:
        """After an exact search of ``scope``: look for (or start) its index if it is large."""
        if self.min_rows is None or live_rows < self.min_rows or self._closed:
            return
        key = scope_text(scope)
        now = self._clock()
        with self._lock:
            if key in self._ready or now - self._looked.get(key, -1e18) < self._recheck:
                return
            self._looked[key] = now
            self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(
            target=self._build_quietly, args=(scope,), name="actormem-ann-index", daemon=True
        )
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _build_quietly(self, scope: Namespace) -> None:
        try:
            self.build(scope, wait=False)
        except Exception as exc:  # searches stay exact; said once per attempt
            log.warning(
                "store.ann_index_failed", where=self._where, scope=str(scope), error=str(exc)
            )

    def build(self, scope: Namespace, *, wait: bool = True) -> str:
        """Make sure the scope has a ready HNSW index; return its state.

        Args:
            scope: The scope.
            wait: When another worker is building it, wait for that build
                (``False``: return ``"building"`` at once).

        Returns:
            ``"ready"`` (built now or before) or ``"building"`` (elsewhere).

        Raises:
            StoreError: The build failed (the left-over index is dropped).
        """
        key = scope_text(scope)
        pred = predicate(scope)
        name = "memories_ann_" + hashlib.sha1(key.encode()).hexdigest()[:16]
        lock = "actormem.ann\x1f" + key
        conn = self._connect()
        try:
            if wait:
                conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock,))
            else:
                got = conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (lock,)
                ).fetchone()[0]
                if not got:
                    return "building"
            try:
                if not self._table_lock(conn):
                    return "building"  # closing: another process or a later look builds it
                try:
                    state = self._build_locked(conn, key, name, pred)
                finally:
                    conn.execute(
                        "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (_TABLE_LOCK,)
                    )
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))
        finally:
            conn.close()
        if state == "ready":
            with self._lock:
                self._ready[key] = pred
        return state

    def _table_lock(self, conn: Any) -> bool:
        """Wait for the one build of ``memories`` at a time; False if the store closes first.

        Two ``CREATE INDEX CONCURRENTLY`` on one table wait for each other's
        snapshots: builds of different scopes that overlapped failed with
        "deadlock detected" and left an invalid index behind.  Polled with
        ``pg_try_advisory_lock`` between short pauses: a statement blocked in
        ``pg_advisory_lock`` holds a snapshot the running build would wait
        for, the same deadlock again.
        """
        while not self._closed:
            got = conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (_TABLE_LOCK,)
            ).fetchone()[0]
            if got:
                return True
            time.sleep(_TABLE_POLL)
        return False

    def _build_locked(self, conn: Any, key: str, name: str, pred: str) -> str:
        row = conn.execute(
            "SELECT v.state, i.indisvalid FROM vector_indexes v LEFT JOIN pg_index i "
            "ON i.indexrelid = to_regclass(quote_ident(v.index_name)) WHERE v.scope = %s",
            (key,),
        ).fetchone()
        if row is not None and row[0] == "ready" and row[1]:
            return "ready"
        started = time.time()
        rows = int(conn.execute(f"SELECT count(*) FROM memories WHERE {pred}").fetchone()[0])
        conn.execute(
            "INSERT INTO vector_indexes (scope, index_name, predicate, state, rows, started_at) "
            "VALUES (%s, %s, %s, 'building', %s, %s) ON CONFLICT (scope) DO UPDATE SET "
            "state = 'building', rows = excluded.rows, started_at = excluded.started_at, "
            "ready_at = NULL",
            (key, name, pred, rows, int(started * 1e6)),
        )
        # a build that died half way leaves an invalid index behind
        conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
        log.info("store.ann_index_building", where=self._where, scope=key, rows=rows)
        conn.execute("SET maintenance_work_mem = '512MB'")
        try:
            conn.execute(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON memories '
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
                f"WHERE {pred}"
            )
        except Exception as exc:
            # forget the build first: a scope never stays 'building' because the
            # clean-up of its left-over failed too (a later build drops that)
            for cleanup in (
                "DELETE FROM vector_indexes WHERE scope = %s",
                f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"',
            ):
                try:
                    conn.execute(cleanup, (key,) if "%s" in cleanup else None)
                except Exception as again:
                    log.warning("store.ann_cleanup_failed", where=self._where, error=str(again))
            raise StoreError(
                f"building the vector index of scope {key!r} in {self._where} failed: {exc}"
            ) from None
        conn.execute(
            "UPDATE vector_indexes SET state = 'ready', ready_at = %s WHERE scope = %s",
            (int(time.time() * 1e6), key),
        )
        log.info(
            "store.ann_index_ready",
            where=self._where,
            scope=key,
            rows=rows,
            seconds=round(time.time() - started, 1),
        )
        return "ready"

    def refresh(self, conn: Any) -> None:
        """Learn every ready index from ``vector_indexes`` (on open)."""
        rows = conn.execute(
            "SELECT v.scope, v.predicate FROM vector_indexes v JOIN pg_index i "
            "ON i.indexrelid = to_regclass(quote_ident(v.index_name)) "
            "WHERE v.state = 'ready' AND i.indisvalid"
        ).fetchall()
        with self._lock:
            self._ready.update({str(k): str(p) for k, p in rows})

    def close(self, timeout: float = 0.0) -> None:
        """Stop starting builds (a running one finishes on its own connection)."""
        self._closed = True
        for t in list(self._threads):
            t.join(timeout)
