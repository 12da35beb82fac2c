"""How one PostgreSQL search runs its statements: which connection, which snapshot, what
runs beside what.

Why a module of its own
    :mod:`actormem.store._pg_search` builds the search's statement and
    :mod:`actormem.store._pg_keyword` prunes a large scope's keyword side;
    this module only orders them, so that the SQL and the schedule can be
    read (and measured) apart.  :class:`~actormem.store._postgres.PostgresStore`
    calls :meth:`Gatherer.gather` inside its retrying read.

A small scope
    One statement on one pooled connection (:func:`~actormem.store._pg_search.collect`):
    one round trip, one moment of the database.

A large scope (keyword side pruned beforehand)
    Everything reads one ``REPEATABLE READ, READ ONLY`` snapshot.  The first
    connection exports it (``pg_export_snapshot()``); a second pooled
    connection, when one is free at once, imports it (``SET TRANSACTION
    SNAPSHOT``) and runs the vector side (:func:`~actormem.store._pg_search.vector_top`:
    the HNSW walk or the exact scan) in a thread of the store while the first
    connection prunes the keyword side; the search's statement then takes
    both sides' rows and fetches, blends and scores them.  (The store's pool
    keeps two connections open for this, see
    :class:`~actormem.store._postgres.PostgresStore`.)  The two sides run
    on two server processes at once, and they read the same moment: a row
    committed or deleted by another worker meanwhile is seen by neither or
    by both.  With no connection free (every pooled connection busy) the
    vector side runs inside the statement as for a small scope: a search
    never waits for a busy pool (at most :data:`WAIT_ASIDE` when another
    thread took the idle connection first).

Neighbouring episodes as context
    The statement's context branch (see :mod:`actormem.store._pg_search`) is
    the larger part of its planning time.  A scope the last search found
    without episodes is searched without the branch; the statement still
    returns the scope's episode count of its own snapshot, and when episodes
    have appeared since (another worker wrote them) the statement runs again
    with the branch, in the same snapshot for a large scope.  So the answer
    is always the one with the branch; only scopes without episodes skip it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final, TypeVar

import structlog

from actormem.store._pg_ann import scope_text
from actormem.store._pg_keyword import keyword_top
from actormem.store._pg_queries import read_snapshot
from actormem.store._pg_search import Candidates, FirstStageQuery, collect, vector_top

__all__ = ["Aside", "Gatherer"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: Seconds a search waits for a second connection when the pool had one idle a moment
#: before (another thread may take it first); with none idle it does not wait at all.
WAIT_ASIDE: Final = 0.01

#: Scopes remembered as holding no episodes at most (then forgotten at once).
_REMEMBERED: Final = 10_000

#: What ``pg_export_snapshot()`` returns (checked before it is written into SQL).
_SNAPSHOT: Final = re.compile(r"^[0-9A-F]+-[0-9A-F]+(-[0-9]+)?$")


class Aside:
    """A second pooled connection and a thread to run one read on it, when one is free.

    Args:
        pool: Returns the store's connection pool (of this process).
        workers: Threads at most (the pool's size: more could never get a connection).
    """

    def __init__(self, pool: Callable[[], Any], workers: int) -> None:
        self._pool = pool
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def start(self, snapshot: str, fn: Callable[[Any], T]) -> Future[T] | None:
        """Run ``fn(conn)`` in a thread on a free pooled connection inside ``snapshot``.

        Returns ``None`` (nothing started) when no pooled connection is idle
        (or none could be had within :data:`WAIT_ASIDE`).
        """
        if not _SNAPSHOT.match(snapshot):
            raise ValueError(f"not a snapshot id: {snapshot!r}")
        pool = self._pool()
        if int(pool.get_stats().get("pool_available", 0)) <= 0:
            return None  # every connection busy: never wait for one
        try:
            conn = pool.getconn(timeout=WAIT_ASIDE)
        except Exception:  # PoolTimeout: none free; the caller goes on alone
            return None
        try:
            with self._lock:
                if self._closed:
                    raise RuntimeError("closed")
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(
                        self._workers, thread_name_prefix="actormem-pg-aside"
                    )
                return self._executor.submit(self._run, pool, conn, snapshot, fn)
        except BaseException:
            pool.putconn(conn)
            raise

    @staticmethod
    def _run(pool: Any, conn: Any, snapshot: str, fn: Callable[[Any], T]) -> T:
        try:
            conn.execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; "
                f"SET TRANSACTION SNAPSHOT '{snapshot}'"
            )
            out = fn(conn)
            conn.execute("COMMIT")
            return out
        finally:
            try:
                if int(conn.info.transaction_status) != 0:  # a failure left it in a transaction
                    conn.rollback()
            except Exception:  # a lost connection: the pool drops it
                pass
            pool.putconn(conn)

    def close(self) -> None:
        """Wait for running reads and stop the threads (idempotent)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


class Gatherer:
    """Runs one search's statements (module docstring) and remembers what helps the next.

    Args:
        aside: Where the vector side of a large scope's search runs
            (``None``: always inside the statement).
    """

    def __init__(self, aside: Aside | None) -> None:
        self._aside = aside
        self._no_episodes: set[str] = set()  # scopes whose last search saw no episode

    def gather(self, conn: Any, q: FirstStageQuery, *, ann: str | None, large: bool) -> Candidates:
        """The candidates of one search on ``conn`` (a pooled autocommit connection).

        Args:
            q: The search's question.
            ann: As :func:`~actormem.store._pg_search.collect`.
            large: The keyword side is pruned beforehand (a scope this process
                saw larger than :data:`~actormem.store._pg_search.SMALL_SCOPE`,
                no filters).
        """
        key = scope_text(q.scope)
        context = q.context
        skip_ctx = context is not None and key in self._no_episodes

        def statement(
            kw: tuple[list[str], list[float]] | None,
            vec: tuple[list[str], list[float]] | None,
            with_context: bool,
        ) -> Candidates:
            return collect(conn, q, ann=ann, with_context=with_context, kw_given=kw, vec_given=vec)

        def checked(
            kw: tuple[list[str], list[float]] | None, vec: tuple[list[str], list[float]] | None
        ) -> Candidates:
            out = statement(kw, vec, not skip_ctx)
            if skip_ctx and out.episodes:  # episodes appeared: the answer with the branch
                out = statement(kw, vec, True)
            if context is not None and out.episodes is not None:
                if out.episodes:
                    self._no_episodes.discard(key)
                else:
                    if len(self._no_episodes) >= _REMEMBERED:  # bounded: forget, search again
                        self._no_episodes.clear()
                    self._no_episodes.add(key)
            return out

        if not large:  # one statement: one snapshot already
            return checked(None, None)
        beside = q.vec_on and self._aside is not None
        with read_snapshot(conn, export=beside) as snapshot:
            vec_side = None
            if snapshot is not None and self._aside is not None and q.qvec is not None:
                qv = q.qvec
                vec_side = self._aside.start(
                    snapshot, lambda c: vector_top(c, q.scope, q.filters, qv, q.pool, ann)
                )
            try:
                kw = keyword_top(conn, q.scope, list(q.terms), q.pool, q.k1, q.b)[:2]
            except BaseException:
                if vec_side is not None:
                    vec_side.exception()  # let it end (it holds a pooled connection)
                raise
            vec = vec_side.result() if vec_side is not None else None
            return checked(kw, vec)
