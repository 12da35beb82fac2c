"""The PostgreSQL backend's reads: records, history, the journal's tables, analytics, export.

A mixin of :class:`~actormem.store._postgres.PostgresStore` (kept apart from
its connection handling, write path and search): every method here is one or
two parameterised SQL statements on a pooled connection, or a small write
transaction of the journal.  Every statement names the namespace in its
``WHERE`` clause: isolation is enforced by the SQL, not by the caller.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from actormem.store._checks import check_str_tuple
from actormem.store._journal_rows import check_compaction, check_entry, check_state, log_entries_sql
from actormem.store._limits import MAX_COUNT
from actormem.store._records import (
    HISTORY_SELECT,
    LIVE,
    NS_COLS,
    check_limit,
    check_memory_id,
    check_namespace,
    jsonb_text,
    row_to_compaction,
    row_to_history,
    row_to_log,
    row_to_record,
    rows_to_stats,
    stats_sql,
    us,
)
from actormem.store._types import (
    HistoryRecord,
    InvalidMemoryError,
    LogCompaction,
    LogRecord,
    MemoryRecord,
    Namespace,
    NamespaceStats,
    stored_namespace,
)

__all__ = [
    "PG_LIVE",
    "PG_NS",
    "PG_SELECT",
    "PgQueries",
    "cosine_sql",
    "distance_sql",
    "exact_sql",
    "read_snapshot",
    "scope_sql",
    "vec",
]

#: The columns :func:`~actormem.store._records.row_to_record` reads, in order.
PG_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, importance, "
    "tags, source_ids, created_at, updated_at, last_accessed, access_count, superseded_by, "
    "deleted_at, metadata::text"
)
PG_LIVE: Final = LIVE
#: The namespace columns, in the order of every namespace index.
PG_NS: Final = ", ".join(NS_COLS)


def cosine_sql(col: str = "embedding") -> str:
    """Cosine of ``col`` to the next ``%s`` parameter, 0 where pgvector gives NaN.

    pgvector's ``<=>`` is NaN when either vector is all zeros (an embedder's
    answer for text without letters or digits).  NaN compared with a
    threshold is neither below nor above it and sorts above every number in
    PostgreSQL, so a zero vector read as NaN could pass for a near duplicate
    or top a vector ranking; DuckDB's index reads it as 0, and so does this.
    """
    return f"coalesce(nullif(1 - ({col} <=> %s), 'NaN'::float8), 0)"


def distance_sql(col: str = "embedding") -> str:
    """Cosine distance of ``col`` to the next ``%s`` parameter, 1 where pgvector gives NaN
    (:func:`cosine_sql`: a zero vector is at cosine 0)."""
    return f"coalesce(nullif({col} <=> %s, 'NaN'::float8), 1)"


@contextmanager
def read_snapshot(conn: Any, *, export: bool = False) -> Iterator[str | None]:
    """Run the block in one ``REPEATABLE READ, READ ONLY`` transaction on ``conn``.

    Every statement of the block then sees the database at one moment: a
    search that reads statistics, prunes with what one statement found and
    fetches rows in another cannot mix rows from before and after another
    worker's commit (a row deleted meanwhile returned, a bound read before a
    row was added).  A read-only snapshot takes no row locks and never
    fails with a serialization error.  On a connection already inside a
    transaction the block runs in that one (the caller chose its snapshot).

    With ``export`` the block gets the snapshot's id (``pg_export_snapshot()``)
    for another connection to import; else ``None``.  The transaction starts
    (and exports) in one round trip (a search pays each round trip, and on a
    busy machine each costs a wait for the CPU), ``conn`` an autocommit
    connection.
    """
    if int(conn.info.transaction_status) != 0:  # not IDLE: already in a transaction
        yield _exported(conn.execute("SELECT pg_export_snapshot()")) if export else None
        return
    cur = conn.execute(
        "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        + ("; SELECT pg_export_snapshot()" if export else "")
    )
    snapshot = None
    if export:
        cur.nextset()
        snapshot = _exported(cur)
    try:
        yield snapshot
    except BaseException:
        if int(conn.info.transaction_status) != 0:
            conn.rollback()
        raise
    if int(conn.info.transaction_status) == 3:  # INERROR: a failure the block swallowed
        conn.rollback()
    else:
        conn.execute("COMMIT")


def _exported(cur: Any) -> str:
    row = cur.fetchone()
    if row is None:  # pragma: no cover - the function always returns a row
        raise RuntimeError("pg_export_snapshot() returned nothing")
    return str(row[0])


def vec(value: Any) -> npt.NDArray[np.float32]:
    """A stored vector (pgvector returns ``Vector`` in binary results, numpy in text) as
    float32."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def scope_sql(namespace: Namespace, prefix: str = "") -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows inside the scope ``namespace``."""
    check_namespace(namespace)
    parts = []
    params: list[Any] = []
    for name, value in namespace.items():
        parts.append(f"{prefix}{name} = %s")
        params.append(value)
    return " AND ".join(parts), params


def exact_sql(namespace: Namespace) -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows of exactly ``namespace`` (journal tables)."""
    check_namespace(namespace)
    return " AND ".join(f"{c} = %s" for c in NS_COLS), list(namespace.key())


_LOG_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, seq, ts, entry_type, content, "
    "metadata::text, compaction_id"
)
_COMPACTION_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, ts, entries, first_seq, last_seq, "
    "summary_id, summary, summarizer, bytes_before, bytes_after"
)
_DAY: Final = "to_char(to_timestamp(created_at / 1e6) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"

#: The Arrow schema of an export (the columns of :data:`~actormem.store._files.EXPORT_COLUMNS`).
_EXPORT_FIELDS: Final = (
    ("id", pa.string()),
    ("user_id", pa.string()),
    ("agent_id", pa.string()),
    ("run_id", pa.string()),
    ("session_id", pa.string()),
    ("kind", pa.string()),
    ("content", pa.string()),
    ("content_hash", pa.string()),
    ("embedding", None),
    ("importance", pa.float64()),
    ("tags", pa.list_(pa.string())),
    ("source_ids", pa.list_(pa.string())),
    ("created_at", pa.int64()),
    ("updated_at", pa.int64()),
    ("last_accessed", pa.int64()),
    ("access_count", pa.int64()),
    ("superseded_by", pa.string()),
    ("deleted_at", pa.int64()),
    ("metadata", pa.string()),
)


class PgQueries:
    """Reads, journal tables and analytics of the PostgreSQL store."""

    _clock: Callable[[], float]
    _dim: int

    if TYPE_CHECKING:  # provided by PostgresStore and StoreBase

        def _read(self, what: str, fn: Callable[[Any], Any]) -> Any: ...

        def _txn(
            self, what: str, fn: Callable[[Any], Any], keys: Sequence[tuple[str, ...]] = ()
        ) -> Any: ...

        def _with_pending(self, rec: MemoryRecord) -> MemoryRecord: ...

        def flush(self) -> None: ...

    def _rows(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._read(
            what, lambda conn: conn.execute(sql, params).fetchall()
        )
        return rows

    def _keyed_live(self, namespace: Namespace, key: str) -> list[MemoryRecord]:
        """The live keyed-fact rows of ``key`` in exactly ``namespace``, oldest first."""
        where, params = exact_sql(namespace)
        rows = self._rows(
            "get_fact",
            f"SELECT {PG_SELECT} FROM memories WHERE {where} AND kind = 'keyed_fact' "
            f"AND metadata->>'key' = %s AND {PG_LIVE} ORDER BY created_at, id",
            [*params, key],
        )
        return [self._with_pending(row_to_record(r)) for r in rows]

    def get(
        self, namespace: Namespace, memory_id: str, *, include_deleted: bool = False
    ) -> MemoryRecord | None:
        """The memory ``memory_id`` if it lies in the scope, else ``None``."""
        check_memory_id(memory_id)
        where, params = scope_sql(namespace)
        live = "" if include_deleted else f" AND {PG_LIVE}"
        rows = self._rows(
            "get",
            f"SELECT {PG_SELECT} FROM memories WHERE id = %s AND {where}{live}",
            [memory_id, *params],
        )
        return self._with_pending(row_to_record(rows[0])) if rows else None

    def list(
        self,
        namespace: Namespace,
        *,
        kinds: Sequence[str] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_deleted: bool = False,
    ) -> builtins.list[MemoryRecord]:
        """Memories in the scope, newest first."""
        check_limit(limit)
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= MAX_COUNT:
            raise InvalidMemoryError(f"offset must be an int from 0 to {MAX_COUNT}, got {offset!r}")
        where, params = scope_sql(namespace)
        if not include_deleted:
            where += f" AND {PG_LIVE}"
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(builtins.list(check_str_tuple("kinds", kinds)))
        rows = self._rows(
            "list",
            f"SELECT {PG_SELECT} FROM memories WHERE {where} "
            "ORDER BY created_at DESC, id LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        return [row_to_record(r) for r in rows]

    def count(self, namespace: Namespace, *, include_deleted: bool = False) -> int:
        """Number of memories in the scope."""
        where, params = scope_sql(namespace)
        if not include_deleted:
            where += f" AND {PG_LIVE}"
        rows = self._rows("count", f"SELECT count(*) FROM memories WHERE {where}", params)
        return int(rows[0][0])

    def history(
        self, namespace: Namespace, memory_id: str | None = None
    ) -> builtins.list[HistoryRecord]:
        """The audit trail in the scope (optionally of one memory), oldest first."""
        where, params = scope_sql(namespace)
        if memory_id is not None:
            check_memory_id(memory_id)
            where += " AND memory_id = %s"
            params.append(memory_id)
        rows = self._rows(
            "history",
            f"SELECT {HISTORY_SELECT} FROM history WHERE {where} ORDER BY ts, seq",
            params,
        )
        return [row_to_history(r) for r in rows]

    # -- activity log and journal state (actormem.journal) --------------------------------

    def log_append(
        self,
        namespace: Namespace,
        entry_type: str,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> LogRecord:
        """Append one entry to the activity log of the concrete ``namespace``.

        The entry's ``seq`` is taken under the namespace's advisory lock, so
        two workers appending at once get consecutive numbers.
        """
        where, params = exact_sql(namespace)
        meta, when = check_entry(entry_type, content, metadata, ts, self._clock)
        meta_json = jsonb_text(meta)
        rid = os.urandom(16).hex()

        def write(conn: Any) -> int:
            row = conn.execute(
                f"SELECT coalesce(max(seq), 0) FROM activity_log WHERE {where}", params
            ).fetchone()
            seq = int(row[0]) + 1
            conn.execute(
                "INSERT INTO activity_log (id, user_id, agent_id, run_id, session_id, seq, ts, "
                "entry_type, content, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s::jsonb)",
                [rid, *params, seq, us(when), entry_type, content, meta_json],
            )
            return seq

        seq = self._txn("log append", write, [namespace.key()])
        return LogRecord(
            id=rid,
            namespace=namespace,
            seq=seq,
            ts=us(when) / 1_000_000,
            entry_type=entry_type,
            content=content,
            metadata=meta,
        )

    def log_entries(
        self,
        namespace: Namespace,
        *,
        compacted: bool | None = False,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> builtins.list[LogRecord]:
        """Entries of the activity log of ``namespace``, oldest first (see DuckDBStore)."""
        where, params = exact_sql(namespace)
        sql, params = log_entries_sql(
            _LOG_SELECT,
            where,
            params,
            compacted=compacted,
            after_seq=after_seq,
            limit=limit,
            mark="%s",
        )
        return [row_to_log(r) for r in self._rows("log entries", sql, params)]

    def log_compact(
        self,
        namespace: Namespace,
        entry_ids: Sequence[str],
        *,
        summary_id: str,
        summary: str,
        summarizer: str = "",
        bytes_before: int = 0,
        bytes_after: int = 0,
    ) -> LogCompaction:
        """Mark live entries as summarized by ``summary_id`` and record the compaction.

        One transaction: either every entry is marked and the row written, or
        nothing changes.

        Raises:
            InvalidMemoryError: ``entry_ids`` is empty, or one of them is not a
                live entry of ``namespace``.
        """
        where, params = exact_sql(namespace)
        ids, summary_id, summary, summarizer, bytes_before, bytes_after = check_compaction(
            entry_ids, summary_id, summary, summarizer, bytes_before, bytes_after
        )
        cid = os.urandom(16).hex()
        now = self._clock()

        def write(conn: Any) -> LogCompaction:
            row = conn.execute(
                f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE {where} "
                "AND compaction_id IS NULL AND id = ANY(%s)",
                [*params, ids],
            ).fetchone()
            if row is None or int(row[0]) != len(ids):
                raise InvalidMemoryError(
                    f"{len(ids) - int(row[0] if row else 0)} of the {len(ids)} entries are "
                    f"not live log entries of {namespace}"
                )
            conn.execute(
                f"UPDATE activity_log SET compaction_id = %s WHERE {where} AND id = ANY(%s)",
                [cid, *params, ids],
            )
            rec = LogCompaction(
                id=cid,
                namespace=namespace,
                ts=us(now) / 1_000_000,
                entries=len(ids),
                first_seq=int(row[1]),
                last_seq=int(row[2]),
                summary_id=summary_id,
                summary=summary,
                summarizer=summarizer,
                bytes_before=int(bytes_before),
                bytes_after=int(bytes_after),
            )
            conn.execute(
                "INSERT INTO log_compactions (id, user_id, agent_id, run_id, session_id, ts, "
                "entries, first_seq, last_seq, summary_id, summary, summarizer, bytes_before, "
                "bytes_after) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    cid,
                    *params,
                    us(now),
                    rec.entries,
                    rec.first_seq,
                    rec.last_seq,
                    summary_id,
                    summary,
                    summarizer,
                    rec.bytes_before,
                    rec.bytes_after,
                ],
            )
            return rec

        result: LogCompaction = self._txn("log compaction", write, [namespace.key()])
        return result

    def log_compactions(self, namespace: Namespace) -> builtins.list[LogCompaction]:
        """The compactions of the activity log of ``namespace``, oldest first."""
        where, params = exact_sql(namespace)
        rows = self._rows(
            "log compactions",
            f"SELECT {_COMPACTION_SELECT} FROM log_compactions WHERE {where} "
            "ORDER BY ts, first_seq",
            params,
        )
        return [row_to_compaction(r) for r in rows]

    def journal_state(self, namespace: Namespace) -> dict[str, str]:
        """The journal's key/value state of the concrete ``namespace``."""
        where, params = exact_sql(namespace)
        rows = self._rows(
            "journal state", f"SELECT key, value FROM journal_state WHERE {where}", params
        )
        return {str(k): str(v) for k, v in rows}

    def set_journal_state(self, namespace: Namespace, values: dict[str, str]) -> None:
        """Upsert ``values`` into the journal state of ``namespace`` (one transaction)."""
        _, params = exact_sql(namespace)
        check_state(values)
        now = us(self._clock())

        def write(conn: Any) -> None:
            for key, value in values.items():
                conn.execute(
                    "INSERT INTO journal_state (user_id, agent_id, run_id, session_id, key, "
                    "value, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (user_id, agent_id, run_id, session_id, key) "
                    "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    [*params, key, value, now],
                )

        self._txn("journal state write", write, [namespace.key()])

    # -- analytics ------------------------------------------------------------------------

    def counts_by(
        self, namespace: Namespace, field: Literal["agent_id", "run_id", "session_id", "kind"]
    ) -> dict[str, int]:
        """Live memories per agent, run, session or kind inside the scope."""
        if field not in ("agent_id", "run_id", "session_id", "kind"):
            raise InvalidMemoryError(f"cannot count by {field!r}")
        where, params = scope_sql(namespace)
        rows = self._rows(
            "counts",
            f"SELECT {field}, count(*) FROM memories WHERE {where} AND {PG_LIVE} "
            f"GROUP BY {field} ORDER BY count(*) DESC, {field}",
            params,
        )
        return {str(k): int(v) for k, v in rows}

    def timeline(self, namespace: Namespace) -> builtins.list[tuple[str, int]]:
        """Memories created per day (UTC, ``YYYY-MM-DD``) in the scope, oldest first."""
        where, params = scope_sql(namespace)
        rows = self._rows(
            "timeline",
            f"SELECT {_DAY} AS day, count(*) FROM memories WHERE {where} AND {PG_LIVE} "
            "GROUP BY day ORDER BY day",
            params,
        )
        return [(str(d), int(c)) for d, c in rows]

    def timeline_by_kind(self, namespace: Namespace) -> builtins.list[tuple[str, str, int]]:
        """Live memories per day (UTC, ``YYYY-MM-DD``) and kind in the scope, oldest first."""
        where, params = scope_sql(namespace)
        rows = self._rows(
            "timeline",
            f"SELECT {_DAY} AS day, kind, count(*) FROM memories WHERE {where} AND {PG_LIVE} "
            "GROUP BY day, kind ORDER BY day, kind",
            params,
        )
        return [(str(d), str(k), int(c)) for d, k, c in rows]

    def namespaces(self, limit: int = 1000) -> builtins.list[Namespace]:
        """The concrete namespaces that hold memories (live or not), at most ``limit``."""
        check_limit(limit)
        rows = self._rows(
            "namespaces",
            "SELECT DISTINCT user_id, agent_id, run_id, session_id FROM memories "
            "ORDER BY 1, 2, 3, 4 LIMIT %s",
            [limit],
        )
        return [stored_namespace((r[0], r[1], r[2], r[3])) for r in rows]

    def top_tags(self, namespace: Namespace, limit: int = 10) -> builtins.list[tuple[str, int]]:
        """The most used tags in the scope."""
        check_limit(limit)
        where, params = scope_sql(namespace)
        rows = self._rows(
            "top tags",
            "SELECT tag, count(*) AS n FROM memories, unnest(tags) AS tag "
            f"WHERE {where} AND {PG_LIVE} GROUP BY tag ORDER BY n DESC, tag LIMIT %s",
            [*params, limit],
        )
        return [(str(t), int(n)) for t, n in rows]

    def most_accessed(self, namespace: Namespace, limit: int = 10) -> builtins.list[MemoryRecord]:
        """The most retrieved live memories in the scope."""
        check_limit(limit)
        self.flush()
        where, params = scope_sql(namespace)
        rows = self._rows(
            "most accessed",
            f"SELECT {PG_SELECT} FROM memories WHERE {where} AND {PG_LIVE} "
            "ORDER BY access_count DESC, last_accessed DESC, id LIMIT %s",
            [*params, limit],
        )
        return [row_to_record(r) for r in rows]

    def stats(self, namespace: Namespace) -> builtins.list[NamespaceStats]:
        """Figures per concrete namespace inside the scope."""
        self.flush()
        where, params = scope_sql(namespace)
        totals, kinds = stats_sql(where)
        return rows_to_stats(
            self._rows("stats", totals, params), self._rows("stats", kinds, params)
        )

    def _export_source(
        self, namespace: Namespace
    ) -> tuple[int, Iterable[pa.RecordBatch], pa.Schema]:
        where, params = scope_sql(namespace)
        total = int(
            self._rows("export", f"SELECT count(*) FROM memories WHERE {where}", params)[0][0]
        )
        dim = self._dim
        schema = pa.schema(
            [
                (name, typ if typ is not None else pa.list_(pa.float32(), dim))
                for name, typ in _EXPORT_FIELDS
            ]
        )
        sql = (
            "SELECT id, user_id, agent_id, run_id, session_id, kind, content, content_hash, "
            "embedding, importance, tags, source_ids, created_at, updated_at, last_accessed, "
            "access_count, superseded_by, deleted_at, metadata::text "
            f"FROM memories WHERE {where} AND (created_at, id) > (%s, %s) "
            "ORDER BY created_at, id LIMIT 5000"
        )

        def batches() -> Iterator[pa.RecordBatch]:
            after: tuple[int, str] = (-(2**62), "")
            while True:
                rows = self._rows("export", sql, [*params, *after])
                if not rows:
                    return
                cols = builtins.list(zip(*rows, strict=True))
                emb = [None if v is None else vec(v) for v in cols[8]]
                arrays = []
                for i, (_, typ) in enumerate(_EXPORT_FIELDS):
                    if i == 8:
                        arrays.append(
                            pa.array(
                                [None if v is None else v.tolist() for v in emb],
                                type=schema.field(8).type,
                            )
                        )
                    else:
                        values: Sequence[Any] = cols[i]
                        if i in (10, 11):
                            values = [builtins.list(v or ()) for v in values]
                        arrays.append(pa.array(values, type=typ))
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
                last = rows[-1]
                after = (int(last[12]), str(last[0]))

        return total, batches(), schema
