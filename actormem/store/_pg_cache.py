"""The PostgreSQL backend's per-process search cache, kept exact through the database.

Why
    The SQL first stage (:mod:`actormem.store._pg_search`) of a large scope
    sums thousands of postings and looks up hundreds of rows by primary key
    per search (~30 ms at 100k rows on one scope, where DuckDB's in-memory
    index takes ~5).  This module gives each process an in-memory copy of the
    scopes it searches (:class:`~actormem.store._pg_cache_index.ScopeIndex`)
    and runs the first stage on it, while the database stays the one store
    of record.

Exact on every search, never "eventually"
    A copy is exact for one database snapshot (``pg_current_snapshot()``).
    Every search sends **one statement** that (a) fetches the candidates'
    rows (liveness and scope checked again, the relevance columns
    ``access_count`` / ``last_accessed`` / ``importance`` as they are now,
    pgvector's cosine) and (b) asks the change feed
    (:mod:`actormem.store._pg_feed`) whether any row of the scope was
    written, or hard-deleted, by a transaction the copy's snapshot did not
    see, in the statement's own snapshot.  When nothing changed, the copy is
    exact for the statement's snapshot too and the answer stands.  When
    something changed, the copy catches up -- the changed rows (and gone
    ids) are read in one ``REPEATABLE READ`` snapshot and applied -- and the
    first stage and the statement run again (at most 3 times, then the search
    goes the SQL way).  So a commit in one process is found by any other's
    very next search, whatever order transactions commit in (the feed is
    ordered by snapshot visibility, not by a counter).  LISTEN/NOTIFY is not
    used: the check costs nothing beyond the statement a search sends anyway.

What is served from the copy and what is not
    Searches in every mode and with every filter over a scope held in the
    copy.  The SQL path (kept whole: the fallback and the reference the
    equivalence tests compare with) serves: scopes not (yet) loaded, scopes
    larger than the budget, hybrid searches whose scope holds episodes while
    neighbouring-episode context is on (that blend is the SQL statement's;
    not moved here yet), and a search whose copy could not catch up.

Memory budget
    ``search_cache_bytes`` (a :class:`~actormem.store.PostgresStore`
    argument, 256 MiB by default) bounds the bytes all copies of the process
    hold, counted from what they hold (:meth:`ScopeIndex.nbytes`: numpy
    buffers, id/term/tag strings, postings arrays and maps), not estimated
    per row.  It is enforced when a copy loads (the load stops once the copy
    alone passes it) and each time a catch-up adds rows: the least recently
    searched copies are dropped first, then a copy that outgrew the budget
    alone; its searches go the SQL way, and it is not loaded again while its
    rows would not fit.  At 256 dimensions a copy counts ~1.6 KB per row
    (163 MB per 100k rows; the float32 vector is 1 KB of it) and the
    process's resident memory grew 129 MB per 100k rows loaded
    (``benchmarks/bench_pg_cache.py``); at 1536 dimensions the vector alone
    is 6 KB.  The default is what a worker process can afford beside its
    model client and framework -- eight workers stay near 2 GB -- and holds
    one 100k-row scope at 256 dimensions with room for its tenants' copies.

Loading (admission)
    Loads run on one background thread per store, from a server-side cursor
    in one ``REPEATABLE READ`` snapshot; until a copy is ready its scope's
    searches go the SQL way (a load measured 8-13 s per 100k rows at load
    ~12).  A load must be paid for by demand (:meth:`SearchCache.consider`):
    into room the budget has free, on the scope's second search; when it
    would drop other copies, after 8 searches *and* once those searches took
    as long as the load is expected to take (this process's measured seconds
    per row loaded) -- rent-or-buy: the loads never cost more than the SQL
    searches spent waiting for them, so two scopes that do not fit together
    cannot reload each other on every search (184 loads in 200 alternating
    searches before).  :meth:`SearchCache.warm` loads one now.  A copy whose
    snapshot is older than the feed's trim horizon (``feed_trimmed``) is
    dropped and loaded again.

Checks under long transactions
    A check reads the feed rows stamped at or after the copy's snapshot's
    ``xmax`` and those of the transactions that snapshot saw in progress
    (:func:`~actormem.store._pg_feed.snapshot_unseen`); it never reads every
    row written since the oldest open transaction, so a session idle in a
    transaction elsewhere costs the checks nothing (``feed_rows`` counts what
    they read).  What it does cost: the rows that transaction itself wrote
    are looked up (and found invisible) by each check until it ends.

Hand-written ``TRUNCATE``
    It writes no stamp and fires no row trigger.  A copy remembers the
    storage files of ``memories`` and ``memory_gone`` (``_EPOCH``), which a
    ``TRUNCATE`` replaces (so do ``VACUUM FULL``, ``CLUSTER`` and a rewriting
    ``ALTER``): the next search drops the copy and goes the SQL way.  The SQL
    path's statistics are kept by the store's writes and row triggers, so a
    ``TRUNCATE`` of ``memories`` alone leaves them stale (README).

Processes
    A forked child starts with an empty cache (the parent's copies are not
    used: their loader thread and locks did not survive the fork).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, TypeVar

import structlog

from actormem.store._pg_ann import scope_text
from actormem.store._pg_cache_index import LOAD_COLUMNS, FirstStage, ScopeIndex
from actormem.store._pg_feed import TRIMMED_KEY, snapshot_unseen, snapshot_xmin
from actormem.store._pg_queries import (
    PG_LIVE,
    PG_NS,
    PG_SELECT,
    cosine_sql,
    read_snapshot,
    scope_sql,
)
from actormem.store._pg_search import Candidates, FirstStageQuery
from actormem.store._types import Namespace

__all__ = ["SearchCache"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
Reader = Callable[[str, Callable[[Any], Any]], Any]

#: Times a search catches up and runs again before it goes the SQL way.
_ATTEMPTS: Final = 3
#: Searches the SQL way before a scope's copy is loaded into room the budget has free,
#: and at least before one that would drop other copies is (:meth:`SearchCache.consider`).
_ADMIT_FREE: Final = 2
_ADMIT_EVICT: Final = 8
#: Scopes whose demand is remembered (the least recently searched forgotten first).
_DEMAND_KEPT: Final = 4096
#: Seconds a row's load is expected to take before this process measured one (about 3x
#: an idle machine's, measured at 256 dimensions).
_LOAD_S_PER_ROW: Final = 1e-4
#: Bytes a row's copy takes beside its float32 vector, before one was measured.
_GUESS_ROW_BYTES: Final = 1024
#: Rows a load reads per fetch from its server-side cursor.
_LOAD_CHUNK: Final = 2048
_SELECT_M: Final = ", ".join("m." + c.strip() for c in PG_SELECT.split(","))
_N_SELECT: Final = len(PG_SELECT.split(","))
#: Columns of a search statement's row before the candidate's (snapshot, changed, ...).
_HEAD: Final = 5
#: What a hand-written ``TRUNCATE`` (or ``VACUUM FULL``, ``CLUSTER``, a rewriting ``ALTER``)
#: changes and no row stamp records: the tables' storage files.  A copy remembers it
#: from its load; a search that reads another is answered by SQL and the copy dropped.
_EPOCH: Final = (
    "pg_relation_filenode('memories')::text || '/' || pg_relation_filenode('memory_gone')::text"
)


def _changed_sql(table: str, columns: str = PG_NS) -> str:
    """``columns`` of the rows of ``table`` whose stamp a snapshot did not see (passed as
    its xmax, its in-progress list, then itself: :func:`snapshot_unseen`).  Planned
    alone (the callers materialize it), so it is two index conditions on ``chg`` --
    the rows written since the snapshot and those of the transactions it saw in
    progress -- never a scan of the scope, nor of everything written since an old
    transaction that is still open."""
    return (
        f"SELECT {columns} FROM {table} WHERE (chg >= %s::xid8 OR chg = ANY(%s::xid8[])) "
        "AND NOT pg_visible_in_snapshot(chg, %s::pg_snapshot)"
    )


def _feed_sql(table: str) -> str:
    """The rows of ``table`` a search's check reads: those stamped at or past a snapshot's
    xmax or by one of its in-progress transactions (``%s`` twice:
    :func:`snapshot_unseen`), with their stamp and namespace."""
    return (
        f"SELECT chg, user_id, agent_id, run_id, session_id FROM {table} "
        "WHERE chg >= %s::xid8 OR chg = ANY(%s::xid8[])"
    )


def _fetch(sql: str, args: list[Any]) -> Callable[[Any], list[Any]]:
    return lambda conn: list(conn.execute(sql, args).fetchall())


class _Demand:
    """Searches of a scope not held, answered the SQL way, since it was last loaded."""

    __slots__ = ("searches", "sql_s")

    def __init__(self) -> None:
        self.searches = 0
        self.sql_s = 0.0


class SearchCache:
    """The copies of one store in one process (module docstring)."""

    def __init__(self, read: Reader, dim: Callable[[], int], budget_bytes: int) -> None:
        self._read = read
        self._dim = dim
        self.budget_bytes = budget_bytes
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, ScopeIndex] = OrderedDict()
        self._loading: dict[str, int] = {}  # scope -> bytes expected
        self._demand: OrderedDict[str, _Demand] = OrderedDict()
        self._queue: queue.SimpleQueue[Namespace | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._row_bytes = 0.0  # measured bytes per row of the last copy loaded or held
        #: Searches answered from a copy, and copies loaded (tests and benchmarks read them).
        self.hits = 0
        self.loads = 0
        #: Seconds the loads took and rows they read (the admission's cost of a load).
        self.load_seconds = 0.0
        self.load_rows = 0
        #: Copies dropped to make room or because they outgrew the budget alone.
        self.evictions = 0
        self.over_budget = 0
        #: Feed rows (``memories`` and ``memory_gone``) the searches' checks read: the
        #: rows written since each copy's snapshot and those of the transactions it saw
        #: in progress -- never every row written while an old transaction stays open.
        self.feed_rows = 0

    # -- process and lifecycle --------------------------------------------------------

    def _check_pid(self) -> None:
        if self._pid != os.getpid():  # a forked child: start empty
            self._pid = os.getpid()
            self._lock = threading.Lock()
            self._entries = OrderedDict()
            self._loading = {}
            self._demand = OrderedDict()
            self._queue = queue.SimpleQueue()
            self._thread = None

    def close(self) -> None:
        """Stop the loader thread and drop every copy."""
        self._closed = True
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            self._queue.put(None)
            thread.join()
        self._thread = None
        self._entries.clear()

    def clear(self) -> None:
        """Drop every copy (a re-embedding changed every vector and maybe the dimension)."""
        with self._lock:
            self._entries.clear()

    @property
    def rows(self) -> int:
        """Rows held by all copies."""
        return sum(e.rows for e in list(self._entries.values()))

    @property
    def nbytes(self) -> int:
        """Bytes held by all copies (:meth:`ScopeIndex.nbytes`): what the budget bounds."""
        return sum(e.nbytes() for e in list(self._entries.values()))

    def held(self, scope: Namespace) -> bool:
        """Whether a copy of ``scope`` is held."""
        return scope_text(scope) in self._entries

    # -- budget -----------------------------------------------------------------------

    def _bytes_per_row(self) -> float | None:
        """Bytes a row takes in a copy: measured on the copies held, else on the last one
        loaded (or given up as too big); ``None`` before this process measured one."""
        held = list(self._entries.values())
        rows = sum(e.rows for e in held)
        if rows:
            self._row_bytes = sum(e.nbytes() for e in held) / rows
        return self._row_bytes if self._row_bytes > 0 else None

    def _fit(self, keep: ScopeIndex | None) -> bool:
        """With :attr:`_lock` held: drop the least recently searched copies (not ``keep``)
        until all fit the budget, then ``keep`` itself if it alone does not; returns
        whether ``keep`` is still held."""
        sizes = {key: e.nbytes() for key, e in self._entries.items()}
        total = sum(sizes.values())
        for key in list(self._entries):
            if total <= self.budget_bytes:
                break
            old = self._entries[key]
            if old is keep:
                continue
            del self._entries[key]
            total -= sizes[key]
            self.evictions += 1
            log.info("store.cache_evicted", scope=str(old.scope), bytes=sizes[key])
        if keep is None:
            return False
        key = scope_text(keep.scope)
        if total > self.budget_bytes and self._entries.get(key) is keep:
            del self._entries[key]
            self.over_budget += 1
            log.info(
                "store.cache_over_budget",
                scope=str(keep.scope),
                bytes=sizes.get(key, keep.nbytes()),
                budget=self.budget_bytes,
            )
        return self._entries.get(key) is keep

    # -- loading ----------------------------------------------------------------------

    def consider(self, scope: Namespace, n_docs: int, sql_seconds: float) -> None:
        """After a search of ``scope`` (``n_docs`` live rows) went the SQL way in
        ``sql_seconds``: load its copy in the background once the demand pays for it.

        Into room the budget has free, a copy is loaded on the scope's second such
        search.  A copy that would drop others is loaded only after
        :data:`_ADMIT_EVICT` searches *and* once those searches took as long as its
        load is expected to take (this process's measured seconds per row loaded):
        the loads never cost more than the SQL searches spent waiting for them, so
        two scopes that do not fit together cannot reload each other on every
        search.  A scope larger than the whole budget is never loaded.
        """
        self._check_pid()
        if self._closed or n_docs == 0:
            return
        key = scope_text(scope)
        with self._lock:
            if key in self._entries or key in self._loading:
                return
            per_row = self._bytes_per_row()
            # before any copy was measured, the load itself finds out whether it fits
            expect = int(n_docs * (per_row or 4.0 * self._dim() + _GUESS_ROW_BYTES))
            if per_row is not None and expect > self.budget_bytes:
                return
            demand = self._demand.pop(key, None) or _Demand()
            demand.searches += 1
            demand.sql_s += sql_seconds
            free = self.budget_bytes - self.nbytes - sum(self._loading.values())
            if expect <= free or per_row is None:
                admit = demand.searches >= _ADMIT_FREE
            else:
                secs = self.load_seconds / self.load_rows if self.load_rows else _LOAD_S_PER_ROW
                admit = demand.searches >= _ADMIT_EVICT and demand.sql_s >= n_docs * secs
            if not admit:
                self._demand[key] = demand
                while len(self._demand) > _DEMAND_KEPT:
                    self._demand.popitem(last=False)
                return
            self._loading[key] = expect
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loader, name="actormem-store-cache", daemon=True
                )
                self._thread.start()
        self._queue.put(scope)

    def _loader(self) -> None:
        while True:
            scope = self._queue.get()
            if scope is None or self._closed:
                return
            try:
                self.warm(scope)
            except Exception as exc:  # the SQL path goes on serving the scope
                log.warning("store.cache_load_failed", scope=str(scope), error=str(exc))
            finally:
                with self._lock:
                    self._loading.pop(scope_text(scope), None)

    def warm(self, scope: Namespace) -> ScopeIndex | None:
        """Load the copy of ``scope`` now (replacing a held one; the least recently
        searched copies make room); ``None`` when it alone is larger than the budget
        (the load stops as soon as it is)."""
        self._check_pid()
        dim = self._dim()
        budget = self.budget_bytes
        key = scope_text(scope)
        with self._lock:  # a load the demand asked for makes its room first: never two
            expect = self._loading.get(key, 0)  # copies' worth of memory at once
            total = self.nbytes
            for old_key in list(self._entries):
                if total + expect <= budget:
                    break
                old = self._entries.pop(old_key)
                total -= old.nbytes()
                self.evictions += 1
                log.info("store.cache_evicted", scope=str(old.scope), bytes=old.nbytes())

        def load(conn: Any) -> tuple[ScopeIndex, bool]:
            """The copy and whether it holds every row (False: cut short at the budget)."""
            where, params = scope_sql(scope)
            with read_snapshot(conn):
                snap, epoch = conn.execute(
                    f"SELECT pg_current_snapshot()::text, {_EPOCH}"
                ).fetchone()
                entry = ScopeIndex(scope, dim, str(snap), snapshot_xmin(str(snap)))
                entry.epoch = str(epoch)
                # a server-side cursor: the client holds one chunk of rows at a time,
                # never the whole result (it was the peak of a load's memory)
                with conn.cursor(name="actormem_cache_load", binary=True) as cur:
                    cur.execute(
                        f"SELECT {LOAD_COLUMNS} FROM memories WHERE {where} AND {PG_LIVE}",
                        params,
                    )
                    whole = False
                    while True:
                        chunk = cur.fetchmany(_LOAD_CHUNK)
                        if not chunk:
                            whole = True
                            break
                        entry.apply(chunk)
                        if entry.nbytes() > budget:
                            break
                entry.measure()
                return entry, whole

        t0 = time.perf_counter()
        read: tuple[ScopeIndex, bool] = self._read("search cache load", load)
        entry, whole = read
        seconds = time.perf_counter() - t0
        with self._lock:
            # A read cut short is never a copy, even when the exact count after it
            # (measure) comes out under the budget: it would miss the rows not read.
            if not whole or entry.nbytes() > budget:  # given up part way: too big alone
                self._row_bytes = entry.nbytes() / max(1, entry.rows)
                log.info("store.cache_too_big", scope=str(scope), budget=budget)
                return None
            self._entries.pop(key, None)
            self._entries[key] = entry
            self._demand.pop(key, None)
            self.loads += 1
            self.load_seconds += seconds
            self.load_rows += entry.rows
            self._row_bytes = entry.nbytes() / max(1, entry.rows)
            if not self._fit(entry):
                return None
        log.info("store.cache_loaded", scope=str(scope), rows=entry.live, bytes=entry.nbytes())
        return entry

    def entry(self, scope: Namespace) -> ScopeIndex | None:
        """The held copy of ``scope`` (marked as recently searched), or ``None``."""
        self._check_pid()
        key = scope_text(scope)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def discard(self, entry: ScopeIndex) -> None:
        """Forget ``entry`` (its next search goes the SQL way, and may load it again)."""
        self._drop(entry)

    def _drop(self, entry: ScopeIndex) -> None:
        key = scope_text(entry.scope)
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]

    # -- searching --------------------------------------------------------------------

    def _catch_up(self, entry: ScopeIndex, seen: str) -> bool:
        """Bring ``entry`` from the snapshot ``seen`` to a current one; ``False`` when it
        is older than the feed (dropped)."""
        with entry.lock:
            if entry.snapshot != seen:  # another thread caught it up meanwhile
                return True
            where, params = scope_sql(entry.scope)

            def read(conn: Any) -> tuple[str, str | None, list[Any], list[str], str]:
                prev = (*snapshot_unseen(entry.snapshot), entry.snapshot)
                with read_snapshot(conn):
                    snap, trimmed, epoch = conn.execute(
                        "SELECT pg_current_snapshot()::text, "
                        f"(SELECT value FROM store_meta WHERE key = %s), {_EPOCH}",
                        (TRIMMED_KEY,),
                    ).fetchone()
                    gone = [
                        str(r[0])
                        for r in conn.execute(
                            f"WITH g AS MATERIALIZED ({_changed_sql('memory_gone', '*')}) "
                            f"SELECT id FROM g WHERE {where}",
                            (*prev, *params),
                        ).fetchall()
                    ]
                    cur = conn.cursor(binary=True)
                    cur.execute(
                        f"WITH c AS MATERIALIZED ({_changed_sql('memories', '*')}) "
                        f"SELECT {LOAD_COLUMNS} FROM c WHERE {where}",
                        (*prev, *params),
                    )
                    rows = cur.fetchall()
                return str(snap), trimmed, rows, gone, str(epoch)

            snap, trimmed, rows, gone, epoch = self._read("search cache catch-up", read)
            if (trimmed is not None and int(trimmed) >= entry.xmin) or epoch != entry.epoch:
                self._drop(entry)
                return False
            if entry.dim != self._dim():
                self._drop(entry)
                return False
            try:
                entry.apply(rows, gone)
            except Exception as exc:  # e.g. vectors of another size (a reembed elsewhere)
                # apply may have changed part of the copy: it is no longer exact
                log.warning("store.cache_dropped", scope=str(entry.scope), error=repr(exc))
                self._drop(entry)
                return False
            entry.snapshot = snap
            entry.xmin = snapshot_xmin(snap)
            if rows:  # the copy grew: the budget holds while scopes grow, not only at load
                with self._lock:
                    return self._fit(entry)
            return True

    def candidates(self, entry: ScopeIndex, q: FirstStageQuery) -> Candidates | None:
        """The search's candidates from ``entry`` (the copy of ``q.scope``), exact as of
        the statement that fetched their rows (module docstring); ``None``: go the SQL way
        -- also when ``q`` blends neighbouring episodes and the scope holds episodes at
        that moment."""
        scope = entry.scope
        qvec = q.qvec
        where, params = scope_sql(scope, "m.")
        cw, cparams = scope_sql(scope, "c.")
        gw, gparams = scope_sql(scope, "g.")
        vec_on = q.vec_on
        for _ in range(_ATTEMPTS):
            with entry.lock:
                seen, xmin = entry.snapshot, entry.xmin
                stage: FirstStage = entry.first_stage(q)
            # c, g: the feed rows the two index conditions read (counted: ``feed_rows``);
            # the copy missed those its snapshot did not see (all of them, by the
            # conditions; the visibility test says so again)
            sql = (
                f"WITH c AS MATERIALIZED ({_feed_sql('memories')}), "
                f"g AS MATERIALIZED ({_feed_sql('memory_gone')}), "
                "z AS MATERIALIZED (SELECT pg_current_snapshot()::text AS snap, "
                "(EXISTS (SELECT 1 FROM c WHERE NOT pg_visible_in_snapshot(c.chg, "
                f"%s::pg_snapshot) AND {cw}) OR EXISTS (SELECT 1 FROM g WHERE NOT "
                f"pg_visible_in_snapshot(g.chg, %s::pg_snapshot) AND {gw})) "
                "AS changed, (SELECT value FROM store_meta WHERE key = %s) AS trimmed, "
                f"(SELECT count(*) FROM c) + (SELECT count(*) FROM g) AS feed, {_EPOCH} AS epoch) "
                f"SELECT z.snap, z.changed, z.trimmed, z.feed, z.epoch, {_SELECT_M}, "
                + (f"{cosine_sql('m.embedding')} " if vec_on else "0.0::float8 ")
                + f"FROM z LEFT JOIN memories m ON m.id = ANY(%s::text[]) AND {where} "
                f"AND m.deleted_at IS NULL AND m.superseded_by IS NULL"
            )
            xmax, xip = snapshot_unseen(seen)
            args: list[Any] = [xmax, xip, xmax, xip, seen, *cparams, seen, *gparams]
            args.append(TRIMMED_KEY)
            if vec_on:
                args.append(qvec)
            args += [stage.ids, *params]
            got = self._read("search", _fetch(sql, args))
            self.feed_rows += int(got[0][3])
            trimmed = got[0][2]
            if (trimmed is not None and int(trimmed) >= xmin) or got[0][4] != entry.epoch:
                if got[0][4] != entry.epoch:
                    log.warning("store.cache_table_rewritten", scope=str(scope))
                self._drop(entry)
                return None
            if got[0][1]:  # something in the scope changed since the copy's snapshot
                if not self._catch_up(entry, seen):
                    return None
                continue
            if q.context is not None and stage.episodes > 0:  # the SQL statement's blend
                return None
            found = [r for r in got if r[_HEAD] is not None]
            if len(found) != len(stage.ids):  # cannot be with an exact copy: say so
                log.warning(
                    "store.cache_mismatch",
                    scope=str(scope),
                    wanted=len(stage.ids),
                    found=len(found),
                )
                self._drop(entry)
                return None
            with entry.lock:
                if entry.snapshot == seen:  # the copy is exact for this later snapshot too
                    entry.snapshot = str(got[0][0])
                    entry.xmin = snapshot_xmin(entry.snapshot)
            out = Candidates()
            out.n_docs = stage.n_docs
            out.episodes = stage.episodes
            out.df = stage.df
            out.vec_rank = stage.vec_rank
            out.kw_rank = stage.kw_rank
            bm25 = stage.bm25
            out.rows = [
                (
                    *r[_HEAD : _HEAD + _N_SELECT],
                    bm25.get(r[_HEAD], 0.0),
                    float(r[_HEAD + _N_SELECT]),
                )
                for r in found
            ]
            self.hits += 1
            return out
        return None
