"""PostgresStore: long-term memory in PostgreSQL + pgvector, shared by many processes.

Storage
    One database (schema in :mod:`actormem.store._pg_schema`) is the store
    of record.  A process keeps in-memory copies of the scopes it searches
    (:mod:`actormem.store._pg_cache`), but every search checks its copy
    against the database's change feed in the statement that fetches the
    candidates' rows and catches up first when another writer changed the
    scope: what one process commits is found by every other process's next
    search.  A
    ``psycopg_pool.ConnectionPool`` serves the store's threads; every write
    method is one transaction, committed when it returns.  Rows go in with
    binary ``COPY`` (inserts, history) and parameterised statements.

Search
    A scope held in this process's search cache: the first stage on its copy
    and one statement (:mod:`actormem.store._pg_cache`).  Otherwise
    :mod:`actormem.store._pg_search`: one statement per search (scope
    statistics from trigger-kept tables, exact vector search inside the scope
    with ``ORDER BY (embedding <=> $q) + 0``, BM25 over the rows holding a
    query term), fusion and the second stage shared with DuckDB
    (:mod:`actormem.store._ranking`).

Read snapshot
    A search is one statement, except in a large scope whose keyword side is
    pruned first (:mod:`actormem.store._pg_keyword`: statistics, one or a few
    pruning statements, then the search's statement).  Those run in one
    ``REPEATABLE READ, READ ONLY`` transaction on one connection, and the
    vector side, run meanwhile on a second connection, imports that
    transaction's snapshot (:mod:`actormem.store._pg_gather`), so all of
    them see the database at one moment: a row another worker deletes
    meanwhile is not returned, and a pruning threshold or a term's bound
    never comes from a different moment than the rows it prunes.  The final
    row fetch checks again that each row is live and in the scope.  A
    search sees every write committed before it started (READ COMMITTED
    would add nothing for a read of a few milliseconds).

Large scopes
    A scope past ``hnsw_min_rows`` live rows (20k by default) gets a
    *partial* HNSW index of its own, built once in the background by the
    first worker that searches it (:mod:`actormem.store._pg_ann`); small
    scopes never pay an index's ingest cost.  The recall tests for the trap
    are in ``tests/store/test_store_pg_ann.py`` and
    ``test_tenant_search_stays_exact_when_an_hnsw_index_exists``.

Concurrency (several workers writing one namespace at once)
    Every write that decides against stored rows (dedup of adds, merges,
    updates, deletes, maintenance, imports, journal appends) takes a
    *transaction-scoped advisory lock per concrete namespace*
    (``pg_advisory_xact_lock(hashtextextended(<namespace key>, 0))``) before
    it reads the rows it decides on: an add locks its namespace; an update or
    delete locks the namespace of the memory it changes; maintenance over a
    scope locks every concrete namespace in it (in a fixed order) and only
    touches rows of those.  Under READ COMMITTED each statement after the
    lock sees everything the previous holder committed, so two workers adding
    the same fact produce one ``ADD`` and one ``MERGE``, and a merge never
    works from a stale copy.  Writers of different namespaces never wait for
    each other.  Advisory locks were chosen over row locks because the
    decisions depend on rows that do not exist yet (an exact or near
    duplicate another worker is inserting).  A deadlock between two
    multi-namespace writes (PostgreSQL detects it and aborts one), a
    serialization failure or an id taken meanwhile aborts the transaction;
    it is planned again from scratch (3 attempts).

Upgrades while workers run
    Opening the store migrates the schema (:mod:`actormem.store._pg_schema`)
    under an advisory lock, and the migration locks ``memories`` against
    writes while it runs: workers of the older version that are still running
    wait for it to commit.  Every pooled connection then declares the schema
    version of its code in the ``actormem.writer_version`` setting, and a
    statement trigger refuses an ``INSERT``/``UPDATE`` of ``memories`` from a
    connection declaring an older version (or none) with an error naming both
    versions and telling that worker to restart with a current actormem: an
    old worker cannot write rows without what the new version keeps beside
    them.  Its reads go on.

Faults (implemented in :mod:`actormem.store._pg_txn`, with the pool)
    A connection lost during a write: the transaction's id is read first,
    so on a fresh connection ``pg_xact_status`` tells whether it committed
    (done), was rolled back (planned and run again) or is still running on a
    backend whose client is gone (that backend is terminated, then retried).
    Reads are retried once.  Anything else raises :class:`StoreError` naming
    the database (never the password) and the cause.  Nothing is half
    written: each write is one transaction.

Planner statistics
    Each time the rows a process inserted may have doubled the table, it
    runs ``ANALYZE memories`` in the background
    (:mod:`actormem.store._pg_analyze`): a table loaded faster than
    autovacuum looks at it otherwise gets plans made for an empty table.

Access statistics
    As for DuckDB: counted in a pending buffer and written in one batched
    ``UPDATE ... access_count = access_count + n`` (increments from several
    processes add up) on the next write, :meth:`flush`, :meth:`close` and
    every ``touch_flush_interval`` seconds.
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt
import structlog

from actormem.models.base import Embedder
from actormem.store._base import Plan, StoreBase
from actormem.store._limits import STORE_SETTINGS
from actormem.store._pg_analyze import PlannerStats
from actormem.store._pg_ann import DEFAULT_MIN_ROWS, AnnIndexes, scope_text
from actormem.store._pg_cache import SearchCache
from actormem.store._pg_conn import redacted, secrets_of
from actormem.store._pg_fence import PgFence, StoreFencedError
from actormem.store._pg_gather import Aside, Gatherer
from actormem.store._pg_open_groups import small_namespaces
from actormem.store._pg_queries import PgQueries, scope_sql
from actormem.store._pg_schema import read_meta, write_meta
from actormem.store._pg_search import SMALL_SCOPE, Candidates, FirstStageQuery
from actormem.store._pg_txn import PgConnections
from actormem.store._pg_view import PgView
from actormem.store._pg_write import (
    copy_history,
    copy_inserts,
    key_text,
    live_counts,
    lock_keys,
    update_changes,
)
from actormem.store._planning import Planner
from actormem.store._protocol import ProgressCallback
from actormem.store._ranking import Scored, rank_candidates
from actormem.store._records import Batch, check_namespace, row_to_record, us
from actormem.store._relevance import RelevanceWeights
from actormem.store._rerank import QueryRerank
from actormem.store._types import (
    EmbedderMismatchError,
    ForgetReport,
    InvalidMemoryError,
    MemoryRecord,
    Namespace,
    ReembedReport,
    SearchConfig,
    SearchFilters,
    SearchMode,
    StoreClosedError,
    StoreError,
)

__all__ = ["PostgresStore"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
T = TypeVar("T")
Key = tuple[str, str, str, str]

_INSTALL_HINT: Final = "pip install 'actormem[postgres]'"

#: ``search_cache_bytes``'s default: 256 MiB per process (module :mod:`~actormem.store._pg_cache`
#: says why).
DEFAULT_CACHE_BYTES: Final = 256 * 2**20


class PostgresStore(PgConnections, PgQueries, PgFence, StoreBase):
    """Long-term memory in PostgreSQL with pgvector, for many processes and hosts.

    Example:
        >>> store = PostgresStore("postgresql://app@db/memories")   # doctest: +SKIP
        >>> store.add(Namespace(user_id="u1"), "Alice prefers green tea")  # doctest: +SKIP
    """

    def __init__(
        self,
        dsn: str,
        *,
        embedder: Embedder | None = None,
        near_duplicate_threshold: float | None = 0.95,
        max_memories: int | None = None,
        search_config: SearchConfig | None = None,
        relevance_weights: RelevanceWeights | None = None,
        on_embedder_mismatch: Literal["error", "reembed"] = "error",
        touch_flush_interval: float | None = 5.0,
        clock: Callable[[], float] = time.time,
        progress: ProgressCallback | None = None,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        hnsw_min_rows: int | None = DEFAULT_MIN_ROWS,
        search_cache_bytes: int | None = DEFAULT_CACHE_BYTES,
    ) -> None:
        """Connect to (and if needed set up) the store in the database ``dsn``.

        Args:
            dsn: A ``postgresql://`` URL or libpq key/value string (libpq's
                environment variables and ``~/.pgpass`` apply).
            embedder, near_duplicate_threshold, max_memories, search_config,
                relevance_weights, on_embedder_mismatch, touch_flush_interval,
                clock, progress: As for :class:`~actormem.store.DuckDBStore`.
            pool_size: Connections this store keeps at most (two stay open:
                a large scope's search uses a second one, :mod:`actormem.store._pg_gather`).
            connect_timeout: Seconds to wait for the server.
            hnsw_min_rows: Live rows from which a scope gets a partial HNSW
                index of its own, built in the background by the first
                worker that searches it (see :mod:`actormem.store._pg_ann`);
                ``None``: every search stays exact.
            search_cache_bytes: Bytes this process's search cache may hold
                over all scopes it searches (256 MiB by default), counted from
                the arrays and objects the copies hold, at load and as they
                grow; least recently searched copies are dropped first, a
                copy that outgrows the budget alone is dropped.  The copies
                are kept exact through the database on every search
                (:mod:`actormem.store._pg_cache`, which gives the measured
                memory per row); ``None``: every search is answered by SQL
                alone.

        Raises:
            ImportError: The ``postgres`` extra is not installed.
            StoreError: The server cannot be reached, the login or database is
                wrong, or the ``vector`` extension is missing or cannot be
                enabled (the message says which, and names the database).
            SchemaVersionError: The database was set up by a newer actormem.
            EmbedderMismatchError: See ``on_embedder_mismatch``.
        """
        try:
            import psycopg
            from pgvector.psycopg import register_vector
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise ImportError(
                f"PostgresStore needs the postgres extra (psycopg, psycopg-pool, pgvector): "
                f"{_INSTALL_HINT}"
            ) from exc

        def check_pg_args() -> None:
            for name, value in (
                ("touch_flush_interval", touch_flush_interval),
                ("pool_size", pool_size),
                ("connect_timeout", connect_timeout),
                ("hnsw_min_rows", hnsw_min_rows),
                ("search_cache_bytes", search_cache_bytes),
            ):
                STORE_SETTINGS[name].check(value, name, error=InvalidMemoryError)
            if on_embedder_mismatch not in ("error", "reembed"):
                raise InvalidMemoryError(
                    "on_embedder_mismatch must be 'error' or 'reembed', "
                    f"got {on_embedder_mismatch!r}"
                )
            if not isinstance(dsn, str) or not dsn:
                raise InvalidMemoryError("dsn must be a non-empty str")

        self._init_common(
            embedder,
            near_duplicate_threshold,
            max_memories,
            search_config,
            relevance_weights,
            clock,
            check_pg_args,
        )
        self._pg = psycopg
        self.dsn = dsn
        self.url = redacted(dsn)
        self._secrets = secrets_of(dsn)  # hidden in the driver's messages
        self._closed = False
        self._connect_timeout = max(1, round(connect_timeout))
        self._pool_size = pool_size
        self._pid = os.getpid()
        self._pool_lock = threading.Lock()
        self._register_vector = register_vector
        self._pool_cls = ConnectionPool
        self._prepare_database()
        self._pool: Any = self._new_pool()
        self._ann = AnnIndexes(self._connect, self.url, hnsw_min_rows)
        self._scope_docs: dict[str, int] = {}  # live rows of the large scopes searched
        self._aside = Aside(lambda: self._pool, pool_size)
        self._gatherer = Gatherer(self._aside)
        self._planner_stats = PlannerStats(self._connect, self.url)
        self._cache = (
            None
            if search_cache_bytes is None
            else SearchCache(self._read, lambda: self._dim, search_cache_bytes)
        )
        try:
            self._read("open", self._ann.refresh)
            self.last_reembed: ReembedReport | None = None
            self._check_embedder(on_embedder_mismatch, progress)
        except BaseException:
            self._pool.close()
            raise
        self._start_flusher(touch_flush_interval, "actormem-store-flush:postgres")
        log.info("store.opened", backend="postgres", where=self.url, dim=self._dim)

    # -- transactions (the machinery is in _pg_txn) ---------------------------------------

    def _txn(self, what: str, fn: Callable[[Any], T], keys: Sequence[Sequence[str]] = ()) -> T:
        """Run ``fn(conn)`` in one transaction holding the advisory locks of ``keys``."""

        def body(conn: Any, locked: set[Key]) -> T:
            PgView(self, conn, locked).lock([(k[0], k[1], k[2], k[3]) for k in keys])
            return fn(conn)

        return self._transaction(what, body)

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r}{', closed' if self._closed else ''})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.url} is closed")

    def close(self) -> None:
        """Flush access counters, stop the flusher and close the connections (idempotent)."""
        if self._closed:
            return
        self._stop_flusher()
        try:
            self.flush()
        except StoreError as exc:
            log.warning("store.flush_failed_on_close", where=self.url, error=str(exc))
        self._closed = True
        self._ann.close()
        if self._cache is not None:
            self._cache.close()
        self._planner_stats.close()
        self._aside.close()
        if self._pid == os.getpid():
            self._pool.close()
        log.info("store.closed", where=self.url)

    def flush(self) -> None:
        """Write pending access counters to the database now."""
        self._check_open()
        pending = self._take_pending()
        if not pending:
            return
        ids = sorted(pending)

        def write(conn: Any, locked: set[Key]) -> None:
            conn.execute(
                "UPDATE memories m SET "
                "access_count = least(m.access_count + t.n, 9007199254740991), "
                "last_accessed = greatest(m.last_accessed, t.ts) "
                "FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS t(id, n, ts) "
                "WHERE m.id = t.id",
                (ids, [pending[i][0] for i in ids], [us(pending[i][1]) for i in ids]),
            )

        try:
            self._transaction("access counters", write)
        except StoreFencedError:
            # a replaced holder's counts are dropped, not kept to retry (_pg_fence says why)
            log.warning("store.fenced_counts_dropped", where=self.url, memories=len(ids))
        except BaseException:
            self._restore_pending(pending)
            raise

    # -- embedder -------------------------------------------------------------------------

    def _column_dim(self, conn: Any) -> int:
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories'::regclass "
            "AND attname = 'embedding'"
        ).fetchone()
        return int(row[0])

    def _check_embedder(
        self, on_mismatch: Literal["error", "reembed"], progress: ProgressCallback | None
    ) -> None:
        meta = self._read("open", read_meta)
        name = meta.get("embedder_name")
        dim = int(meta.get("embedder_dim", "0") or 0)
        if name is None:

            def claim(conn: Any, locked: set[Key]) -> None:
                lock_keys(conn, [("", "", "", "actormem.embedder")])
                current = read_meta(conn)
                if "embedder_name" in current:  # another worker was first
                    return
                column_dim = self._column_dim(conn)
                if column_dim != self._dim:
                    n = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
                    if n:
                        raise EmbedderMismatchError(
                            f"{self.url} holds {column_dim}-d vectors but embedder "
                            f"{self._embedder.name!r} makes {self._dim}-d vectors"
                        )
                    self._set_column_dim(conn, self._dim)
                write_meta(
                    conn, {"embedder_name": self._embedder.name, "embedder_dim": str(self._dim)}
                )

            self._transaction("open", claim)
            meta = self._read("open", read_meta)
            name = meta.get("embedder_name")
            dim = int(meta.get("embedder_dim", "0") or 0)
        if name == self._embedder.name and dim == self._dim:
            return
        if on_mismatch != "reembed":
            raise EmbedderMismatchError(
                f"{self.url} was built with embedder {name!r} ({dim}-d); the store was opened "
                f"with {self._embedder.name!r} ({self._dim}-d). Open it with the old embedder, "
                "or pass on_embedder_mismatch='reembed' to rebuild every vector",
                stored_name=None if name is None else str(name),
                stored_dim=dim,
            )
        self.last_reembed = self._reembed(str(name), dim, progress)

    def _set_column_dim(self, conn: Any, dim: int) -> None:
        conn.execute(
            f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)}) USING NULL"
        )

    def reembed(
        self, *, embedder: Embedder | None = None, progress: ProgressCallback | None = None
    ) -> ReembedReport:
        """Rebuild every vector with ``embedder`` (default: the current one), in one
        transaction."""
        self._check_open()
        self.flush()
        meta = self._read("reembed", read_meta)
        if embedder is not None:
            self._embedder = embedder
            self._dim = int(embedder.dim)
            from actormem.store._rerank import Reranker

            self._reranker = Reranker(embedder)
        return self._reembed(
            meta.get("embedder_name", ""), int(meta.get("embedder_dim", "0") or 0), progress
        )

    def _reembed(
        self, old_name: str, old_dim: int, progress: ProgressCallback | None
    ) -> ReembedReport:
        started = time.perf_counter()
        total_box = [0]

        def body(conn: Any, locked: set[Key]) -> None:
            lock_keys(conn, [("", "", "", "actormem.embedder")])
            conn.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")  # writers wait
            rows = conn.execute("SELECT id, content FROM memories ORDER BY id").fetchall()
            total_box[0] = total = len(rows)
            if self._column_dim(conn) != self._dim:
                self._set_column_dim(conn, self._dim)
            done = 0
            for start in range(0, total, 4096):
                chunk = rows[start : start + 4096]
                vecs = self._embed([c for _, c in chunk])
                conn.execute(
                    "UPDATE memories m SET embedding = v.e::vector FROM "
                    "unnest(%s::text[], %s::text[]) AS v(id, e) WHERE m.id = v.id",
                    (
                        [i for i, _ in chunk],
                        ["[" + ",".join(map(repr, v.tolist())) + "]" for v in vecs],
                    ),
                )
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
            write_meta(conn, {"embedder_name": self._embedder.name, "embedder_dim": str(self._dim)})

        self._transaction("reembed", body)
        cache: SearchCache | None = getattr(self, "_cache", None)
        if cache is not None:
            cache.clear()  # every row changed (and maybe the dimension)
        log.info(
            "store.reembedded",
            where=self.url,
            old=old_name,
            new=self._embedder.name,
            memories=total_box[0],
        )
        return ReembedReport(
            embedder=self._embedder.name,
            dim=self._dim,
            previous_embedder=old_name,
            previous_dim=old_dim,
            memories=total_box[0],
            seconds=time.perf_counter() - started,
        )

    # -- writes ---------------------------------------------------------------------------

    def _write(self, what: str, plan: Plan[T], *, lock: Namespace | None = None) -> T:
        """Plan and commit one write in one transaction (see "Concurrency" above)."""
        self._check_open()
        self.flush()

        def body(conn: Any, locked: set[Key]) -> T:
            view = PgView(self, conn, locked)
            if lock is not None:
                view.lock([lock.key()])
            now = self._clock()
            batch = Batch()
            out = plan(Planner(view, self._weights, self._near), now, batch)
            # rows joining a namespace's open posting group append to its group rows:
            # under the namespace's lock, as every other write of them (an add holds it)
            small = small_namespaces(live_counts(batch.inserts))
            view.lock([(k[0], k[1], k[2], k[3]) for k in small])
            self._commit(conn, batch, now)
            inserted[0] = len(batch.inserts)
            return out

        inserted = [0]
        out = self._transaction(what, body)
        self._planner_stats.wrote(inserted[0])
        return out

    def _commit(self, conn: Any, batch: Batch, now: float) -> None:
        written = copy_inserts(conn, batch.inserts, batch.history, now) if batch.inserts else 0
        if batch.changes:
            update_changes(conn, builtins.list(batch.changes.values()))
        if len(batch.history) > written:
            copy_history(conn, batch.history[written:], now)

    def forget(self, namespace: Namespace) -> ForgetReport:
        """Remove every memory in the scope, its history and its journal rows, for good."""
        self._check_open()
        scope = check_namespace(namespace)
        where, params = scope_sql(scope)

        def body(conn: Any, locked: set[Key]) -> tuple[builtins.list[str], int]:
            keys = conn.execute(
                f"SELECT DISTINCT user_id, agent_id, run_id, session_id FROM memories "
                f"WHERE {where}",
                params,
            ).fetchall()
            PgView(self, conn, locked).lock([(k[0], k[1], k[2], k[3]) for k in keys])
            ids = [
                str(r[0])
                for r in conn.execute(
                    f"DELETE FROM memories WHERE {where} RETURNING id", params
                ).fetchall()
            ]
            cur = conn.execute(f"DELETE FROM history WHERE {where}", params)
            n_hist = cur.rowcount
            # posting_open: the namespace's open posting group (its key names the user)
            for table in ("activity_log", "log_compactions", "journal_state", "posting_open"):
                conn.execute(f"DELETE FROM {table} WHERE {where}", params)
            return ids, int(n_hist)

        self.flush()
        ids, n_hist = self._transaction("forget", body)
        self._reranker.clear()
        self._drop_pending(ids)
        report = ForgetReport(namespace=namespace, memories=len(ids), history=n_hist)
        log.info("store.forgot", namespace=str(namespace), memories=report.memories, history=n_hist)
        return report

    # -- search ---------------------------------------------------------------------------

    def _scored(
        self,
        scope: Namespace,
        terms: builtins.list[str],
        qvec: F32 | None,
        limit: int,
        filters: SearchFilters | None,
        cfg: SearchConfig,
        mode: SearchMode,
        now: float,
        rerank: QueryRerank | None,
        touch: bool,
    ) -> builtins.list[tuple[Scored, MemoryRecord]]:
        use_vec = mode in ("hybrid", "vector") and qvec is not None
        use_kw = mode in ("hybrid", "keyword")
        wp, wn, w2 = cfg.context_prev_weight, cfg.context_next_weight, cfg.context_prev2_weight
        q = FirstStageQuery(
            scope=scope,
            filters=filters,
            terms=terms,
            qvec=qvec,
            pool=max(cfg.candidates, limit),
            use_vec=use_vec,
            use_kw=use_kw,
            k1=cfg.bm25_k1,
            b=cfg.bm25_b,
            context=(wp, wn, w2) if mode == "hybrid" and wp + wn + w2 > 0 else None,
            df_terms=rerank.idf_terms if rerank is not None else (),
        )
        cands = None
        entry = self._cache.entry(scope) if self._cache is not None else None
        # the copy serves every search but a context blend over a scope with episodes
        # (decided again by the copy once it is current)
        if entry is not None and (q.context is None or entry.episodes == 0):
            assert self._cache is not None
            try:
                cands = self._cache.candidates(entry, q)
            except StoreError:
                raise
            except Exception as exc:  # a copy that cannot answer never fails the search
                # (a query vector of another size after a reembed, a damaged copy):
                # it is dropped and the SQL path, the reference, answers
                log.warning("store.cache_failed", scope=str(scope), error=repr(exc))
                self._cache.discard(entry)
                cands = None
        if cands is None:
            t0 = time.perf_counter()
            cands = self._sql_candidates(q)
            if self._cache is not None and entry is None:
                self._cache.consider(scope, cands.n_docs, time.perf_counter() - t0)
        if not cands.rows:
            return []
        rows = cands.rows
        ids = [str(r[0]) for r in rows]
        n = len(ids)
        # the relevance inputs straight from the columns (with this process's pending
        # retrievals and this one); full records are decoded only for the rows the
        # second stage reads and the hits
        pend = [self._pending.get(i) for i in ids]
        access = np.array(
            [int(r[14]) + (p[0] if p else 0) + touch for r, p in zip(rows, pend, strict=True)],
            dtype=np.float64,
        )
        last = np.array(
            [
                max(r[13] / 1_000_000, p[1] if p else 0.0, now if touch else 0.0)
                for r, p in zip(rows, pend, strict=True)
            ],
            dtype=np.float64,
        )
        decoded: dict[int, MemoryRecord] = {}

        def record(i: int) -> MemoryRecord:
            rec = decoded.get(i)
            if rec is None:
                rec = self._with_pending(row_to_record(rows[i][:18]))
                if touch:
                    rec = msgspec.structs.replace(
                        rec,
                        access_count=rec.access_count + 1,
                        last_accessed=max(rec.last_accessed, now),
                    )
                decoded[i] = rec
            return rec

        bm25 = np.array([float(r[18]) for r in cands.rows], dtype=np.float64)
        cosine = np.array([float(r[19]) for r in cands.rows], dtype=np.float64)
        shown_cos = shown_kw = None
        if cands.blended:  # ranked by the blended scores, the hits show their own
            shown_cos, shown_kw = cosine, bm25
            cosine = np.array([cands.blended[i][0] for i in ids], dtype=np.float64)
            bm25 = np.array([cands.blended[i][1] for i in ids], dtype=np.float64)
        # the second stage's document frequencies were read by the search's own statement
        # (df_terms above): the same moment as the candidates
        doc_freq = cands.df.__getitem__

        scored = rank_candidates(
            rows=np.arange(n, dtype=np.int64),
            cosine=cosine,
            bm25=bm25,
            vec_rank=np.array([cands.vec_rank.get(i, 0) for i in ids], dtype=np.float64),
            kw_rank=np.array([cands.kw_rank.get(i, 0) for i in ids], dtype=np.float64),
            importance=np.array([float(r[8]) for r in rows], dtype=np.float64),
            access=access,
            last=last,
            created=np.array([r[11] / 1_000_000 for r in rows], dtype=np.float64),
            limit=limit,
            config=cfg,
            use_vec=use_vec,
            use_kw=use_kw,
            now=now,
            weights=self._weights,
            rerank=rerank,
            records=lambda top: [record(int(i)) for i in top],
            ids=lambda pos: [ids[int(i)] for i in pos],
            doc_freq=doc_freq,
            n_docs=cands.n_docs,
            shown_cosine=shown_cos if use_vec else None,
            shown_bm25=shown_kw,
        )
        return [(s, record(s.row)) for s in scored]

    def _sql_candidates(self, q: FirstStageQuery) -> Candidates:
        """The first stage in SQL (:mod:`actormem.store._pg_search`): the fallback of the
        search cache and the reference its tests compare with."""
        scope, no_filters = q.scope, q.filters is None
        ann = self._ann.predicate(scope) if q.use_vec and no_filters else None
        key = scope_text(scope)
        # a scope this process saw large: its keyword side is pruned beforehand
        large = q.use_kw and no_filters and self._scope_docs.get(key, 0) > SMALL_SCOPE
        cands: Candidates = self._read(
            "search", lambda conn: self._gatherer.gather(conn, q, ann=ann, large=large)
        )
        if cands.rows and cands.n_docs > SMALL_SCOPE:  # only large scopes are remembered
            self._scope_docs[key] = cands.n_docs
        elif cands.rows:
            self._scope_docs.pop(key, None)
        if q.use_vec and no_filters and ann is None:
            self._ann.consider(scope, cands.n_docs)
        return cands

    def warm_cache(self, namespace: Namespace) -> bool:
        """Load this process's search-cache copy of the scope ``namespace`` now.

        A scope is otherwise loaded in the background once its searches ask
        for it (see :mod:`actormem.store._pg_cache`); this one drops the
        least recently searched copies if it needs their room.

        Returns:
            Whether the scope is now held (``False``: no cache, or its copy
            alone is larger than ``search_cache_bytes``).
        """
        self._check_open()
        if self._cache is None:
            return False
        return self._cache.warm(check_namespace(namespace)) is not None

    # -- misc -----------------------------------------------------------------------------

    def build_vector_index(self, namespace: Namespace) -> str:
        """Build the partial HNSW index of the scope ``namespace`` now (idempotent).

        A search builds it in the background once the scope holds
        ``hnsw_min_rows`` live rows; call this after a bulk load to have it
        at once.  Another worker's build of the same scope is waited for.

        Returns:
            ``"ready"``.

        Raises:
            StoreError: The build failed.
        """
        self._check_open()
        return self._ann.build(check_namespace(namespace), wait=True)

    @staticmethod
    def lock_name(namespace: Namespace) -> str:
        """The text whose ``hashtextextended`` is the advisory lock of a concrete namespace."""
        return key_text(namespace.key())
