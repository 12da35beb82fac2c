"""The direct write path of a DuckDB store: plan, commit, update the index, access counts.

A mixin of :class:`~actormem.store.DuckDBStore`, split out of
:mod:`actormem.store._duckdb` (connection, lifecycle, transactions' plumbing,
search) so the write path reads as one piece: :meth:`DuckDBWrites._write`
plans a write against the index and hands its :class:`Batch` to
:meth:`DuckDBWrites._commit`, which sends a small batch through the
acknowledgement log (:mod:`actormem.store._duckdb_logged`) and commits a large
one directly as Arrow tables, then applies it to the index before returning.
Pending access counts of searches ride along in the next write's transaction
(or :meth:`DuckDBWrites.flush`).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, TypeVar

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import structlog

from actormem.store._base import Plan
from actormem.store._duckdb_queries import _one
from actormem.store._duckdb_rows import (
    Tables,
    execute_history,
    execute_insert,
    history_table,
    insert_table,
    small_statements,
    touches_sql,
    ts_array,
    update_rows,
)
from actormem.store._duckdb_sql import UnsafeLiteral
from actormem.store._duckdb_view import IndexView as _IndexView
from actormem.store._group_commit import GroupCommit
from actormem.store._index import MemoryIndex, Prepared, prepare
from actormem.store._planning import Planner
from actormem.store._records import Batch
from actormem.store._relevance import RelevanceWeights
from actormem.store._types import Namespace

if TYPE_CHECKING:
    from actormem.store._acklog import AckLog
    from actormem.store._duckdb_logged import Logged

__all__ = ["DuckDBWrites", "batch_ids"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
F32 = npt.NDArray[np.float32]

#: Up to this many pending access counts are written as SQL literals.
_LITERAL_TOUCHES: Final = 64


def batch_ids(batch: Batch) -> list[str]:
    """The ids of the memories a batch writes (inserted, changed, removed from the index)."""
    return [*(r.id for r, _ in batch.inserts), *batch.changes, *batch.removed]


class DuckDBWrites:
    """The direct write path and access-count flushing of :class:`~actormem.store.DuckDBStore`."""

    path: str
    _dim: int
    _index: MemoryIndex
    _index_stale: bool
    _write_lock: threading.RLock
    _wcur: Any
    _pool: ThreadPoolExecutor | None
    _group: GroupCommit
    _weights: RelevanceWeights
    _near: float | None
    _acklog: AckLog | None
    _apply_wake: threading.Event
    _clock: Callable[[], float]
    _txn_ids: set[str] | None

    if TYPE_CHECKING:  # provided by DuckDBStore, DuckDBLogged and StoreBase

        def _check_open(self) -> None: ...

        def _drain(self) -> None: ...

        def _log_entry(self, batch: Batch, now: float) -> Logged | None: ...

        def _append_logged(self, entry: Logged) -> None: ...

        def _rebuild_index(self, progress: Any = None) -> None: ...

        def _take_pending(self) -> dict[str, tuple[int, float]]: ...

        def _restore_pending(self, pending: dict[str, tuple[int, float]]) -> None: ...

        def _commit_txn(self, cur: Any) -> None: ...

        def _run_script(
            self, what: str, statements: builtins.list[str], ids: Iterable[str] | None = None
        ) -> None: ...

        def _run_txn(
            self, what: str, fn: Callable[[Any], Any], ids: Iterable[str] | None = None
        ) -> Any: ...

        def _declare(self, ids: Iterable[str]) -> None: ...

    def flush(self) -> None:
        """Write pending access counters and acknowledged writes to the file now."""
        with self._write_lock:
            self._check_open()
            self._drain()
            self._flush_touches(self._wcur, own_txn=True)

    def _flush_touches(self, cur: Any, *, own_txn: bool) -> int:
        if own_txn:
            self._drain()
        pending = self._take_pending()
        if not pending:
            return 0
        ids = list(pending)
        literal = self._touches_literal(pending)
        try:
            if own_txn:
                cur.execute("BEGIN TRANSACTION")
                self._txn_ids = set(ids)
            else:
                self._declare(ids)
            if literal is not None:
                cur.execute(literal)
            else:
                tbl = pa.table(
                    {
                        "id": pa.array(ids, type=pa.string()),
                        "n": pa.array([pending[i][0] for i in ids], type=pa.int64()),
                        "ts": ts_array([pending[i][1] for i in ids]),
                    }
                )
                cur.register("_touch", tbl)
                try:
                    cur.execute(
                        "UPDATE memories SET "
                        "access_count = least(memories.access_count + t.n, 9007199254740991), "
                        "last_accessed = greatest(memories.last_accessed, t.ts) "
                        "FROM _touch t WHERE memories.id = t.id"
                    )
                finally:
                    cur.unregister("_touch")
            if own_txn:
                self._commit_txn(cur)
        except BaseException:
            if own_txn:
                self._txn_ids = None
                with suppress(duckdb.Error):
                    cur.execute("ROLLBACK")
            self._restore_pending(pending)
            raise
        return len(ids)

    @staticmethod
    def _touches_literal(pending: dict[str, tuple[int, float]]) -> str | None:
        """The update of a few pending access counts as SQL text (no Arrow table, so
        no pandas look-ups), or None for many or for ids with no literal."""
        if not pending or len(pending) > _LITERAL_TOUCHES:
            return None
        try:
            return touches_sql(pending)
        except UnsafeLiteral:
            return None

    # -- writes ------------------------------------------------------------------------

    def _write(self, what: str, plan: Plan[T], *, lock: Namespace | None = None) -> T:
        """Plan and commit one write under the writer lock (one process owns the file).

        Writes of one concrete namespace (``lock``) may share a transaction with
        other namespaces' concurrent writes (:mod:`actormem.store._group_commit`).
        """
        if lock is not None:

            def planned(now: float, batch: Batch) -> T:
                return plan(Planner(_IndexView(self), self._weights, self._near), now, batch)

            return self._group.write(lock.key(), planned)
        with self._write_lock:
            self._check_open()
            now = self._clock()
            batch = Batch()
            out = plan(Planner(_IndexView(self), self._weights, self._near), now, batch)
            self._commit(batch, now)
            return out

    def _exists(self, mid: str) -> bool:
        self._drain()
        row = _one(self._wcur, "SELECT 1 FROM memories WHERE id = ?", [mid])
        return row is not None

    def _commit(self, batch: Batch, now: float) -> None:
        """Write ``batch`` in one transaction, then apply it to the index.

        For large batches the transaction runs on the store's writer thread
        while this thread tokenizes the new memories for the index: DuckDB
        releases the GIL while it inserts and syncs the WAL, so the two overlap.
        The index changes only after the commit succeeded.
        """
        if not (batch.inserts or batch.changes or batch.history):
            return
        entry = self._log_entry(batch, now) if self._acklog is not None else None
        if entry is not None:  # durable once synced in the log; DuckDB gets it later
            self._append_logged(entry)
            try:
                self._apply_to_index(batch)
            except Exception as exc:  # keep the index in step with the file no matter what
                log.error("store.index_apply_failed", path=self.path, error=str(exc))
                # The write is acknowledged (synced in the log): never report it as
                # failed.  The index is rebuilt now, or at the next drain if DuckDB
                # cannot take the log right now.
                self._index_stale = True
                try:
                    self._drain()
                except Exception as again:
                    self._apply_wake.set()  # the applier retries, then rebuilds
                    log.error(
                        "store.index_rebuild_deferred",
                        path=self.path,
                        error=str(again),
                        reason="the write is acknowledged; the index is rebuilt once the "
                        "log is applied",
                    )
            return
        self._drain()
        prepared: Prepared | None = None
        stacked: F32 | None = None
        if len(batch.inserts) >= 512:
            # The Arrow tables are built here first, so the writer thread runs
            # nothing but DuckDB (which releases the GIL) while this one tokenizes.
            # The vectors are stacked once, for the table and the index.
            stacked = np.stack([v for _, v in batch.inserts])
            tables = self._tables(batch, now, stacked)
            future = self._writer_pool().submit(self._transaction, batch, now, tables)
            try:
                prepared = prepare([r for r, _ in batch.inserts])
            finally:
                error = future.exception()
            if error is not None:
                raise error
        else:
            self._transaction(batch, now)
        try:
            self._apply_to_index(batch, prepared, stacked)
        except Exception as exc:  # keep the index in step with the file no matter what
            log.error("store.index_apply_failed", path=self.path, error=str(exc))
            self._rebuild_index()

    def _writer_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="actormem-store-writer")
        return self._pool

    def _tables(self, batch: Batch, now: float, stacked: F32 | None = None) -> Tables:
        """The Arrow tables of a batch's inserts and history rows (``stacked``: their vectors)."""
        return Tables(
            insert=insert_table(
                self._dim,
                [r for r, _ in batch.inserts],
                [v for _, v in batch.inserts] if stacked is None else stacked,
            )
            if batch.inserts
            else None,
            history=history_table(batch.history, now) if batch.history else None,
        )

    def _transaction(self, batch: Batch, now: float, tables: Tables | None = None) -> None:
        if tables is None:
            parts = small_statements(self._dim, batch, now)
            script = [p for p in parts if isinstance(p, str)]
            if len(script) == len(parts):  # all literal: one call, touches included
                pending = self._take_pending()
                touch = self._touches_literal(pending)
                if touch is not None or not pending:
                    try:
                        self._run_script(
                            "write",
                            [touch, *script] if touch else script,
                            [*batch_ids(batch), *pending],
                        )
                    except BaseException:
                        self._restore_pending(pending)
                        raise
                    return
                self._restore_pending(pending)

            def write_parts(cur: Any) -> None:
                self._flush_touches(cur, own_txn=False)
                for part in parts:
                    if isinstance(part, str):
                        cur.execute(part)
                    else:
                        self._write_arrow(cur, part, self._tables(part, now))

            self._run_txn("write", write_parts, batch_ids(batch))
            return
        built = tables

        def write(cur: Any) -> None:
            self._flush_touches(cur, own_txn=False)
            self._write_arrow(cur, batch, built)

        self._run_txn("write", write, batch_ids(batch))

    def _write_arrow(self, cur: Any, batch: Batch, built: Tables) -> None:
        """Write ``batch`` through its Arrow tables ``built`` (inside a transaction)."""
        if built.insert is not None:
            execute_insert(cur, built.insert)
        if batch.changes:
            update_rows(cur, self._dim, list(batch.changes.values()))
        if built.history is not None:
            execute_history(cur, built.history)

    def _apply_to_index(
        self, batch: Batch, prepared: Prepared | None = None, stacked: F32 | None = None
    ) -> None:
        index = self._index
        if batch.removed:
            index.remove(batch.removed)
        for change in batch.changes.values():
            rec = change.record
            if not rec.alive:
                continue
            if change.content_vector is not None:
                index.add([rec], change.content_vector[None, :])
            else:
                index.replace_record(rec)
            if change.access_delta:  # a merge: the survivor absorbed the loser's count
                index.add_access(rec.id, change.access_delta)
        if batch.inserts:
            if stacked is not None:
                vectors = stacked
            elif len(batch.inserts) == 1:
                vectors = batch.inserts[0][1][None, :]
            else:
                vectors = np.stack([v for _, v in batch.inserts])
            index.add([r for r, _ in batch.inserts], vectors, prepared)
            # deleted or superseded rows (an import) are kept in the file, not searchable
            dead = [r.id for r, _ in batch.inserts if not r.alive]
            if dead:
                index.remove(dead)
        if index.dead_fraction > 0.3 and index.rows > 10_000:
            index.compact()
