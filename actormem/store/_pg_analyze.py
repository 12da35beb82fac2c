"""Keeping PostgreSQL's planner statistics of ``memories`` current while it grows.

Why the store does this itself
    The planner picks indexes from the statistics ``ANALYZE`` gathers.  A
    table loaded faster than autovacuum looks at it (its naptime is a minute)
    has none, or statistics of a table a fraction of its size, and then the
    planner errs badly: measured at 100k rows loaded in 1,000-row batches, a
    batch's duplicate check (five equality columns, all in one partial btree)
    walked the ``agent_id`` index over every row instead -- 94 ms a batch at
    first, 25 s for the same question asked per hash -- and a tenant's search
    scanned the whole table (61 ms against 21 ms analyzed).  Both are plans
    for a table the planner believes is empty.

What it does
    Each store counts the rows its committed writes inserted.  Once they
    reach the table's size at its last analysis (``pg_class.reltuples``;
    at least ``min_rows``), i.e. each time the table may have doubled, a
    background thread of that process runs ``ANALYZE memories`` on a
    connection of its own -- about a dozen times while a table grows to
    100k rows, each reading a sample of at most 30,000 rows.  A session
    advisory lock (``pg_try_advisory_lock``) keeps two workers from
    analyzing at once: the second one skips.  Writes never wait for it.  A
    login that does not own the table gets a warning from the server and
    no statistics; anything that fails is logged once per attempt and
    changes nothing stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

import structlog

__all__ = ["PlannerStats"]

log = structlog.get_logger(__name__)

_LOCK: Final = "actormem.store.analyze"


class PlannerStats:
    """Runs ``ANALYZE memories`` in the background each time the table may have doubled.

    Args:
        connect: Opens a new autocommit connection.
        where: The database, for messages.
        min_rows: Inserted rows before the first analysis of a table never analyzed.
    """

    def __init__(self, connect: Callable[[], Any], where: str, min_rows: int = 1000) -> None:
        self._connect = connect
        self._where = where
        self._min_rows = min_rows
        self._lock = threading.Lock()
        self._pending = 0  # rows this process inserted since its last analysis
        self._known = 0.0  # the table's rows at its last analysis, as far as we know
        self._thread: threading.Thread | None = None
        self._closed = False
        self.analyzed = 0  # analyses this process ran (for tests and logs)

    def wrote(self, rows: int) -> None:
        """Note ``rows`` inserted by a committed write; start an analysis when due."""
        if rows <= 0:
            return
        with self._lock:
            self._pending += rows
            if self._closed or self._pending < max(self._min_rows, self._known):
                return
            if self._thread is not None and self._thread.is_alive():
                return
            pending, self._pending = self._pending, 0
            self._thread = threading.Thread(
                target=self._run, args=(pending,), name="actormem-analyze", daemon=True
            )
            self._thread.start()

    def _run(self, pending: int) -> None:
        try:
            conn = self._connect()
        except Exception as exc:
            log.warning("store.analyze_failed", where=self._where, error=str(exc))
            return
        try:
            got = conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (_LOCK,)
            ).fetchone()[0]
            if not got:  # another worker is analyzing right now
                return
            try:
                before = self._reltuples(conn)
                # another worker may have analyzed since: due only if what this
                # process inserted is still as much as the table held then
                if before <= 0 or pending >= before / 2:
                    conn.execute("ANALYZE memories")
                    self.analyzed += 1
                after = self._reltuples(conn)
                with self._lock:
                    self._known = max(after, 0.0)
                log.debug("store.analyzed", where=self._where, rows=after, inserted=pending)
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (_LOCK,))
        except Exception as exc:
            log.warning("store.analyze_failed", where=self._where, error=str(exc))
        finally:
            conn.close()

    @staticmethod
    def _reltuples(conn: Any) -> float:
        row = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass"
        ).fetchone()
        return float(row[0])

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a running analysis to end."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Start no more analyses; wait (at most ``timeout`` s) for a running one."""
        with self._lock:
            self._closed = True
        self.wait(timeout)
