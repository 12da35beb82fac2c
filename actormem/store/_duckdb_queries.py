"""The DuckDB backend's reads: records, history, analytics, export.

A mixin of :class:`~actormem.store.DuckDBStore` (kept apart from its
connection handling and write path in :mod:`actormem.store._duckdb`, and from
the journal's tables in :mod:`actormem.store._duckdb_journal`): every method
here is one or two parameterised SQL queries on the calling thread's read
cursor.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa

from actormem.store._base_keyed import keyed_order
from actormem.store._checks import check_str_tuple
from actormem.store._duckdb_sql import UnsafeLiteral, lit
from actormem.store._duckdb_vectors import fixed_list
from actormem.store._kinds import KEYED_KIND
from actormem.store._limits import MAX_COUNT
from actormem.store._records import (
    LIVE,
    check_limit,
    check_memory_id,
    check_namespace,
    row_to_history,
    row_to_record,
    rows_to_stats,
    stats_sql,
)
from actormem.store._types import (
    HistoryRecord,
    InvalidMemoryError,
    MemoryRecord,
    Namespace,
    NamespaceStats,
    stored_namespace,
)

__all__ = ["DuckDBQueries"]

_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, importance, "
    "tags, source_ids, epoch_us(created_at), epoch_us(updated_at), epoch_us(last_accessed), "
    "access_count, superseded_by, epoch_us(deleted_at), CAST(metadata AS VARCHAR)"
)


def _one(cur: Any, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    """The first row of a query, reading the result to its end.

    ``fetchone()`` leaves an auto-commit query's result open, and with it the
    query's transaction, until the cursor runs its next statement.  A thread
    that reads once and then goes quiet would keep that transaction open for
    good: DuckDB then cannot checkpoint (the WAL grows past
    ``checkpoint_threshold``) and keeps every later commit's undo data in
    memory.  ``fetchall()`` completes the query and ends its transaction.
    """
    rows = cur.execute(*inline(sql, params)).fetchall()
    return tuple(rows[0]) if rows else None


def inline(sql: str, params: Sequence[Any]) -> tuple[str, Sequence[Any]]:
    """``sql`` with its ``?`` placeholders replaced by literals of ``params`` when it can.

    Bound parameters make DuckDB's Python client look for pandas (see
    :mod:`actormem.store._duckdb_sql`); reads on the agent's turn (a memory by
    id, its history) are sent as text instead.  Left as it is when the
    statement holds a quote (a ``?`` could sit inside a string) or a value
    has no literal (lists, a NUL character).
    """
    if not params or "'" in sql:
        return sql, params
    pieces = sql.split("?")
    if len(pieces) != len(params) + 1:
        return sql, params
    try:
        values = [lit(v) for v in params]
    except UnsafeLiteral:
        return sql, params
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:], strict=True):
        out += [value, piece]
    return "".join(out), ()


def _scope_sql(namespace: Namespace, prefix: str = "") -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows inside the scope ``namespace``."""
    check_namespace(namespace)
    parts = []
    params: list[Any] = []
    for name, value in namespace.items():
        parts.append(f"{prefix}{name} = ?")
        params.append(value)
    return " AND ".join(parts), params


class DuckDBQueries:
    """Reads and analytics of :class:`~actormem.store.DuckDBStore`."""

    _clock: Callable[[], float]
    _dim: int

    if TYPE_CHECKING:  # provided by DuckDBStore and StoreBase

        def _reader(self) -> Any: ...

        def _cursor(self) -> Any: ...

        def _pending_ops(self, scope: Namespace, ids: set[str]) -> dict[str, tuple[int, str]]: ...

        def _check_open(self) -> None: ...

        def _indexed_record(self, memory_id: str) -> MemoryRecord | None: ...

        def _indexed_tagged(
            self, namespace: Namespace, kind: str, tag: str
        ) -> builtins.list[MemoryRecord]: ...

        def _with_pending(self, rec: MemoryRecord) -> MemoryRecord: ...

        def flush(self) -> None: ...

    def _keyed_live(self, namespace: Namespace, key: str) -> builtins.list[MemoryRecord]:
        """The live keyed-fact rows of ``key`` in exactly ``namespace``, the oldest
        first: from the index (no query, so no pending write applied first)."""
        ns = check_namespace(namespace)
        rows = [
            r
            for r in self._indexed_tagged(ns, KEYED_KIND, f"key:{key}")
            if r.namespace == ns and r.metadata.get("key") == key
        ]
        return keyed_order(rows)

    def get(
        self, namespace: Namespace, memory_id: str, *, include_deleted: bool = False
    ) -> MemoryRecord | None:
        """The memory ``memory_id`` if it lies in the scope, else ``None``.

        Args:
            namespace: A scope.
            memory_id: The id.
            include_deleted: Also return deleted or superseded memories.
        """
        check_memory_id(memory_id)
        where, params = _scope_sql(namespace)
        # The index holds every live memory, updated before a write returns:
        # a dict lookup instead of a query (keyed facts read this way).
        self._check_open()
        rec = self._indexed_record(memory_id)
        if rec is not None or not include_deleted:
            return rec if rec is not None and namespace.contains(rec.namespace) else None
        live = ""
        row = _one(
            self._reader(),
            f"SELECT {_SELECT} FROM memories WHERE id = ? AND {where}{live}",
            [memory_id, *params],
        )
        if row is None:
            return None
        return self._with_pending(row_to_record(row))

    def list(
        self,
        namespace: Namespace,
        *,
        kinds: Sequence[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_deleted: bool = False,
    ) -> builtins.list[MemoryRecord]:
        """Memories in the scope, newest first.

        Args:
            namespace: A scope.
            kinds: Only these kinds.
            limit: At most this many (1..100,000).
            offset: Skip this many.
            include_deleted: Also list deleted and superseded memories.
        """
        check_limit(limit)
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= MAX_COUNT:
            raise InvalidMemoryError(f"offset must be an int from 0 to {MAX_COUNT}, got {offset!r}")
        where, params = _scope_sql(namespace)
        if not include_deleted:
            where += f" AND {LIVE}"
        if kinds is not None:
            where += " AND list_contains(?, kind)"
            params.append(list(check_str_tuple("kinds", kinds)))
        rows = (
            self._reader()
            .execute(
                f"SELECT {_SELECT} FROM memories WHERE {where} "
                "ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                [*params, limit, offset],
            )
            .fetchall()
        )
        return [row_to_record(r) for r in rows]

    def count(self, namespace: Namespace, *, include_deleted: bool = False) -> int:
        """Number of memories in the scope."""
        where, params = _scope_sql(namespace)
        if not include_deleted:
            where += f" AND {LIVE}"
        row = _one(self._reader(), f"SELECT count(*) FROM memories WHERE {where}", params)
        return int(row[0]) if row else 0

    def history(
        self, namespace: Namespace, memory_id: str | None = None
    ) -> builtins.list[HistoryRecord]:
        """The audit trail in the scope (optionally of one memory), oldest first."""
        where, params = _scope_sql(namespace)
        if memory_id is not None:
            check_memory_id(memory_id)
            where += " AND memory_id = ?"
            params.append(memory_id)
        rows = (
            self._reader()
            .execute(
                *inline(
                    "SELECT id, memory_id, user_id, agent_id, run_id, session_id, op, "
                    "old_content, new_content, epoch_us(ts), reason FROM history "
                    f"WHERE {where} ORDER BY ts, rowid",
                    params,
                )
            )
            .fetchall()
        )
        return [row_to_history(r) for r in rows]

    def last_ops(self, namespace: Namespace, memory_ids: Sequence[str]) -> dict[str, str]:
        """The last history operation of each of ``memory_ids`` in the scope (one read).

        What :meth:`history` gives as ``[-1].op`` for each id, in one query:
        the daily journal labels the memories of a recorded batch with it.
        Unlike the other reads it does not first apply the store's pending
        writes to DuckDB (a DuckDB commit, on the journal's thread after every
        recorded batch: about a fifth of a journaled turn's CPU): their history
        rows are read from the records kept in memory (see
        :meth:`~actormem.store._duckdb_logged.DuckDBLogged._pending_ops`), taken
        before DuckDB is asked, so a record applied in between is seen either way.
        Ids without history are left out.
        """
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return {}
        where, params = _scope_sql(namespace)
        pending = self._pending_ops(namespace, set(ids))
        marks = ", ".join("?" for _ in ids)
        rows = (
            self._cursor()
            .execute(
                *inline(
                    "SELECT memory_id, arg_max(op, (epoch_us(ts), rowid)), max(epoch_us(ts)) "
                    f"FROM history WHERE {where} AND memory_id IN ({marks}) GROUP BY memory_id",
                    [*params, *ids],
                )
            )
            .fetchall()
        )
        last = {str(mid): (int(when), str(op)) for mid, op, when in rows}
        for mid, (when, op) in pending.items():
            committed = last.get(mid)
            if committed is None or when >= committed[0]:  # pending rows come after
                last[mid] = (when, op)
        return {mid: op for mid, (_, op) in last.items()}

    # -- analytics ------------------------------------------------------------------------

    def counts_by(
        self, namespace: Namespace, field: Literal["agent_id", "run_id", "session_id", "kind"]
    ) -> dict[str, int]:
        """Live memories per agent, run, session or kind inside the scope."""
        if field not in ("agent_id", "run_id", "session_id", "kind"):
            raise InvalidMemoryError(f"cannot count by {field!r}")
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT {field}, count(*) FROM memories WHERE {where} AND {LIVE} "
                f"GROUP BY {field} ORDER BY count(*) DESC, {field}",
                params,
            )
            .fetchall()
        )
        return {str(k): int(v) for k, v in rows}

    def timeline(self, namespace: Namespace) -> builtins.list[tuple[str, int]]:
        """Memories created per day (UTC, ``YYYY-MM-DD``) in the scope, oldest first."""
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT strftime(date_trunc('day', created_at), '%Y-%m-%d') AS day, count(*) "
                f"FROM memories WHERE {where} AND {LIVE} GROUP BY day ORDER BY day",
                params,
            )
            .fetchall()
        )
        return [(str(d), int(c)) for d, c in rows]

    def timeline_by_kind(self, namespace: Namespace) -> builtins.list[tuple[str, str, int]]:
        """Live memories per day (UTC, ``YYYY-MM-DD``) and kind in the scope, oldest first."""
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT strftime(date_trunc('day', created_at), '%Y-%m-%d') AS day, kind, "
                f"count(*) FROM memories WHERE {where} AND {LIVE} GROUP BY day, kind "
                "ORDER BY day, kind",
                params,
            )
            .fetchall()
        )
        return [(str(d), str(k), int(c)) for d, k, c in rows]

    def namespaces(self, limit: int = 1000) -> builtins.list[Namespace]:
        """The concrete namespaces that hold memories (live or not), at most ``limit``."""
        check_limit(limit)
        rows = (
            self._reader()
            .execute(
                "SELECT DISTINCT user_id, agent_id, run_id, session_id FROM memories "
                "ORDER BY ALL LIMIT ?",
                [limit],
            )
            .fetchall()
        )
        return [stored_namespace((r[0], r[1], r[2], r[3])) for r in rows]

    def top_tags(self, namespace: Namespace, limit: int = 10) -> builtins.list[tuple[str, int]]:
        """The most used tags in the scope."""
        check_limit(limit)
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                "SELECT tag, count(*) AS n FROM (SELECT unnest(json_extract_string(tags, '$[*]')) "
                f"AS tag FROM memories "
                f"WHERE {where} AND {LIVE}) GROUP BY tag ORDER BY n DESC, tag LIMIT ?",
                [*params, limit],
            )
            .fetchall()
        )
        return [(str(t), int(n)) for t, n in rows]

    def most_accessed(self, namespace: Namespace, limit: int = 10) -> builtins.list[MemoryRecord]:
        """The most retrieved live memories in the scope."""
        check_limit(limit)
        self.flush()
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_SELECT} FROM memories WHERE {where} AND {LIVE} "
                "ORDER BY access_count DESC, last_accessed DESC, id LIMIT ?",
                [*params, limit],
            )
            .fetchall()
        )
        return [row_to_record(r) for r in rows]

    def stats(self, namespace: Namespace) -> builtins.list[NamespaceStats]:
        """Figures per concrete namespace inside the scope."""
        self.flush()
        where, params = _scope_sql(namespace)
        totals, kinds = stats_sql(where, "epoch_us({})")
        cur = self._reader()
        return rows_to_stats(
            cur.execute(totals, params).fetchall(), cur.execute(kinds, params).fetchall()
        )

    def _export_source(
        self, namespace: Namespace
    ) -> tuple[int, Iterable[pa.RecordBatch], pa.Schema]:
        where, params = _scope_sql(namespace)
        cur = self._reader()
        total_row = _one(cur, f"SELECT count(*) FROM memories WHERE {where}", params)
        total = int(total_row[0]) if total_row else 0
        reader = cur.execute(
            "SELECT id, user_id, agent_id, run_id, session_id, kind, content, content_hash, "
            "embedding, importance, json_extract_string(tags, '$[*]') AS tags, "
            "json_extract_string(source_ids, '$[*]') AS source_ids, "
            "epoch_us(created_at) AS created_at, "
            "epoch_us(updated_at) AS updated_at, epoch_us(last_accessed) AS last_accessed, "
            "access_count, superseded_by, epoch_us(deleted_at) AS deleted_at, "
            "CAST(metadata AS VARCHAR) AS metadata "
            f"FROM memories WHERE {where} ORDER BY created_at, id",
            params,
        ).to_arrow_reader(10_000)
        # the stored bytes (schema 5) go out as the float lists exports always held
        dim = self._dim
        at = reader.schema.get_field_index("embedding")
        schema = reader.schema.set(at, pa.field("embedding", pa.list_(pa.float32(), dim)))

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in reader:
                columns = builtins.list(batch.columns)
                columns[at] = fixed_list(columns[at], dim)
                yield pa.RecordBatch.from_arrays(columns, schema=schema)

        return total, batches(), schema
