"""The DuckDB backend's reads: records, history, the journal's tables, analytics, export.

A mixin of :class:`~actormem.store.DuckDBStore` (kept apart from its
connection handling and write path in :mod:`actormem.store._duckdb`): every
method here is one or two parameterised SQL queries on the calling thread's
read cursor, or a small write transaction of the journal.
"""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa

from actormem.store._duckdb_sql import UnsafeLiteral, lit, row_sql
from actormem.store._limits import MAX_COUNT, TIMESTAMP
from actormem.store._records import (
    NS_COLS,
    check_limit,
    check_namespace,
    json_text,
    row_to_compaction,
    row_to_history,
    row_to_log,
    row_to_record,
    sec,
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
    NewMemory,
    check_str_tuple,
)

__all__ = ["DuckDBQueries"]

_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, importance, "
    "tags, source_ids, epoch_us(created_at), epoch_us(updated_at), epoch_us(last_accessed), "
    "access_count, superseded_by, epoch_us(deleted_at), CAST(metadata AS VARCHAR)"
)
_LIVE: Final = "deleted_at IS NULL AND superseded_by IS NULL"


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


def _exact_sql(namespace: Namespace) -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows of exactly ``namespace`` (journal tables)."""
    check_namespace(namespace)
    return " AND ".join(f"{c} = ?" for c in NS_COLS), list(namespace.key())


def _entry_metadata(metadata: object, name: str) -> dict[str, Any]:
    """A journal entry's metadata as a new dict; :class:`InvalidMemoryError` naming ``name``."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidMemoryError(f"{name} must be a dict or None, got {type(metadata).__name__}")
    return dict(metadata)


def _exact_lit(namespace: Namespace) -> str:
    """The where clause of :func:`_exact_sql` with literal values."""
    return " AND ".join(f"{c} = {lit(v)}" for c, v in zip(NS_COLS, namespace.key(), strict=True))


_LOG_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, seq, epoch_us(ts), entry_type, content, "
    "CAST(metadata AS VARCHAR), compaction_id"
)
_COMPACTION_SELECT: Final = (
    "id, user_id, agent_id, run_id, session_id, epoch_us(ts), entries, first_seq, last_seq, "
    "summary_id, summary, summarizer, bytes_before, bytes_after"
)


class DuckDBQueries:
    """Reads, journal tables and analytics of :class:`~actormem.store.DuckDBStore`."""

    _clock: Callable[[], float]

    if TYPE_CHECKING:  # provided by DuckDBStore and StoreBase

        def _reader(self) -> Any: ...

        def _check_open(self) -> None: ...

        def _indexed_record(self, memory_id: str) -> MemoryRecord | None: ...

        def _write_txn(self, what: str, fn: Callable[[Any], Any]) -> Any: ...

        def _run_txn(self, what: str, fn: Callable[[Any], Any]) -> Any: ...

        def _run_script(self, what: str, statements: builtins.list[str]) -> None: ...

        def _drain(self) -> None: ...

        def _write_script(self, what: str, statements: builtins.list[str]) -> None: ...

        _write_lock: threading.RLock
        _wcur: Any
        #: The last ``seq`` of each namespace's activity log (see :meth:`journal_write`).
        _log_seqs: dict[tuple[str, str, str, str], int]

        def _with_pending(self, rec: MemoryRecord) -> MemoryRecord: ...

        def flush(self) -> None: ...

    def get(
        self, namespace: Namespace, memory_id: str, *, include_deleted: bool = False
    ) -> MemoryRecord | None:
        """The memory ``memory_id`` if it lies in the scope, else ``None``.

        Args:
            namespace: A scope.
            memory_id: The id.
            include_deleted: Also return deleted or superseded memories.
        """
        if not isinstance(memory_id, str):
            raise InvalidMemoryError(f"memory_id must be a str, got {type(memory_id).__name__}")
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
            where += f" AND {_LIVE}"
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
            where += f" AND {_LIVE}"
        row = _one(self._reader(), f"SELECT count(*) FROM memories WHERE {where}", params)
        return int(row[0]) if row else 0

    def history(
        self, namespace: Namespace, memory_id: str | None = None
    ) -> builtins.list[HistoryRecord]:
        """The audit trail in the scope (optionally of one memory), oldest first."""
        where, params = _scope_sql(namespace)
        if memory_id is not None:
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

        Committed when it returns.

        Args:
            namespace: The agent's namespace (exact, not a scope).
            entry_type: ``TOOL_USE``, ``THOUGHT``, ``USER_FEEDBACK``, ``ERROR``, ``SYSTEM``
                (any non-empty name of at most 32 characters is accepted).
            content: The text (non-empty).
            metadata: Extra JSON fields.
            ts: When (default: the store's clock).

        Returns:
            The stored entry with its ``seq``.

        Raises:
            InvalidMemoryError: A bad type, content or metadata.
        """
        where, params = _exact_sql(namespace)
        if not isinstance(entry_type, str) or not 0 < len(entry_type) <= 32:
            raise InvalidMemoryError(f"entry_type must be a str of 1-32 chars: {entry_type!r}")
        NewMemory(content=content).validate()
        meta = _entry_metadata(metadata, "metadata")
        meta_json = json_text(meta)
        when = (
            self._clock()
            if ts is None
            else float(TIMESTAMP.check(ts, "ts", error=InvalidMemoryError) or 0)
        )
        rid = os.urandom(16).hex()

        insert = (
            "INSERT INTO activity_log (id, user_id, agent_id, run_id, session_id, seq, ts, "
            "entry_type, content, metadata) VALUES (?, ?, ?, ?, ?, ?, make_timestamp(?), ?, ?, ?)"
        )
        try:  # literals, not parameters: see actormem.store._duckdb_sql
            exact = _exact_lit(namespace)
            values = [lit(v) for v in (rid, *params)]
            tail = [f"make_timestamp({us(when)})", lit(entry_type), lit(content), lit(meta_json)]
        except UnsafeLiteral:
            exact = None

        def write(cur: Any) -> int:
            if exact is None:
                row = cur.execute(
                    f"SELECT coalesce(max(seq), 0) FROM activity_log WHERE {where}", params
                ).fetchall()[0]
                seq = int(row[0]) + 1
                cur.execute(insert, [rid, *params, seq, us(when), entry_type, content, meta_json])
                return seq
            row = cur.execute(
                f"SELECT coalesce(max(seq), 0) FROM activity_log WHERE {exact}"
            ).fetchall()[0]
            seq = int(row[0]) + 1
            cur.execute(
                "INSERT INTO activity_log (id, user_id, agent_id, run_id, session_id, seq, ts, "
                f"entry_type, content, metadata) VALUES ({', '.join([*values, str(seq), *tail])})"
            )
            return seq

        seq = self._write_txn("log append", write)
        self._log_seqs.pop(namespace.key(), None)
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
        """Entries of the activity log of ``namespace``, oldest first.

        Args:
            namespace: The agent's namespace (exact).
            compacted: ``False``: only live (not yet compacted) entries; ``True``:
                only compacted ones; ``None``: all.
            after_seq: Only entries with ``seq > after_seq``.
            limit: At most this many (the *latest* ones when set).
        """
        where, params = _exact_sql(namespace)
        if compacted is not None:
            where += " AND compaction_id IS " + ("NOT NULL" if compacted else "NULL")
        where += " AND seq > ?"
        params.append(int(after_seq))
        sql = f"SELECT {_LOG_SELECT} FROM activity_log WHERE {where} ORDER BY seq"
        if limit is not None:
            check_limit(limit)
            sql = (
                f"SELECT * FROM (SELECT {_LOG_SELECT} FROM activity_log WHERE {where} "
                f"ORDER BY seq DESC LIMIT {int(limit)}) ORDER BY seq"
            )
        return [row_to_log(r) for r in self._reader().execute(sql, params).fetchall()]

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
        nothing changes.  Entries are never deleted.

        Raises:
            InvalidMemoryError: ``entry_ids`` is empty, or one of them is not a
                live entry of ``namespace``.
        """
        where, params = _exact_sql(namespace)
        ids = builtins.list(dict.fromkeys(check_str_tuple("entry_ids", tuple(entry_ids))))
        if not ids:
            raise InvalidMemoryError("log_compact needs at least one entry id")
        cid = os.urandom(16).hex()
        now = self._clock()

        try:  # literals, not an Arrow table and parameters: no pandas look-ups
            id_list = ", ".join(lit(i) for i in ids)
            cid_lit = lit(cid)
            ns_where = _exact_lit(namespace)
        except UnsafeLiteral:
            id_list = ""

        def write(cur: Any) -> LogCompaction:
            if id_list:
                row = _one(
                    cur,
                    f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE {ns_where} "
                    f"AND compaction_id IS NULL AND id IN ({id_list})",
                )
                if row is None or int(row[0]) != len(ids):
                    raise InvalidMemoryError(
                        f"{len(ids) - int(row[0] if row else 0)} of the {len(ids)} entries are "
                        f"not live log entries of {namespace}"
                    )
                cur.execute(
                    f"UPDATE activity_log SET compaction_id = {cid_lit} WHERE {ns_where} "
                    f"AND id IN ({id_list})"
                )
            else:
                tbl = pa.table({"id": pa.array(ids, type=pa.string())})
                cur.register("_ids", tbl)
                try:
                    row = cur.execute(
                        f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE {where} "
                        "AND compaction_id IS NULL AND id IN (SELECT id FROM _ids)",
                        params,
                    ).fetchone()
                    if row is None or int(row[0]) != len(ids):
                        raise InvalidMemoryError(
                            f"{len(ids) - int(row[0] if row else 0)} of the {len(ids)} entries "
                            f"are not live log entries of {namespace}"
                        )
                    cur.execute(
                        f"UPDATE activity_log SET compaction_id = ? WHERE {where} "
                        "AND id IN (SELECT id FROM _ids)",
                        [cid, *params],
                    )
                finally:
                    cur.unregister("_ids")
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
            cur.execute(
                *inline(
                    "INSERT INTO log_compactions (id, user_id, agent_id, run_id, session_id, "
                    "ts, entries, first_seq, last_seq, summary_id, summary, summarizer, "
                    "bytes_before, bytes_after) "
                    "VALUES (?, ?, ?, ?, ?, make_timestamp(?), ?, ?, ?, ?, ?, ?, ?, ?)",
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
            )
            return rec

        result: LogCompaction = self._write_txn("log compaction", write)
        return result

    def log_compactions(self, namespace: Namespace) -> builtins.list[LogCompaction]:
        """The compactions of the activity log of ``namespace``, oldest first."""
        where, params = _exact_sql(namespace)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_COMPACTION_SELECT} FROM log_compactions WHERE {where} ORDER BY ts, "
                "first_seq",
                params,
            )
            .fetchall()
        )
        return [row_to_compaction(r) for r in rows]

    def journal_write(
        self,
        namespace: Namespace,
        entries: Sequence[tuple[str, str, dict[str, Any], float]],
        state: dict[str, str] | None = None,
    ) -> builtins.list[LogRecord]:
        """Append log entries and upsert journal state in one transaction.

        The journal's writes of one call (a NOW update with its log entries, the
        messages of a turn) commit together: one WAL sync instead of one per
        entry.  Committed when it returns.

        Args:
            namespace: The agent's namespace (exact, not a scope).
            entries: ``(entry_type, content, metadata, ts)`` in order (see
                :meth:`log_append` for what is accepted).
            state: Journal state to upsert (see :meth:`set_journal_state`).

        Returns:
            The stored entries, with consecutive ``seq`` numbers.

        Raises:
            InvalidMemoryError: A bad entry or state; nothing is written.
        """
        where, params = _exact_sql(namespace)
        rows: builtins.list[tuple[str, str, str, dict[str, Any], str, int]] = []
        # Every value is checked here, before the write is acknowledged in the
        # store's log: nothing DuckDB could refuse when it applies the record
        # later may get past this point (a timestamp past year 9999 did).
        for i, (entry_type, content, metadata, ts) in enumerate(entries):
            if not isinstance(entry_type, str) or not 0 < len(entry_type) <= 32:
                raise InvalidMemoryError(f"entry_type must be a str of 1-32 chars: {entry_type!r}")
            NewMemory(content=content).validate()
            meta = _entry_metadata(metadata, f"entries[{i}].metadata")
            when = TIMESTAMP.check(ts, f"entries[{i}].ts", error=InvalidMemoryError)
            rows.append(
                (
                    os.urandom(16).hex(),
                    entry_type,
                    content,
                    meta,
                    json_text(meta),
                    us(float(when or 0)),
                )
            )
        values = dict(state or {})
        for key, value in values.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise InvalidMemoryError(f"journal state needs str keys and values: {key!r}")
        now = us(self._clock())
        insert = (
            "INSERT INTO activity_log (id, user_id, agent_id, run_id, session_id, seq, ts, "
            "entry_type, content, metadata) VALUES "
        )
        upsert = (
            "INSERT INTO journal_state (user_id, agent_id, run_id, session_id, key, "
            "value, updated_at) VALUES {} "
            "ON CONFLICT (user_id, agent_id, run_id, session_id, key) "
            "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
        )

        def statements(first: int) -> builtins.list[str]:
            ns = [lit(p) for p in params]
            out = []
            if rows:
                out.append(
                    insert
                    + ", ".join(
                        row_sql(
                            [
                                lit(rid),
                                *ns,
                                str(first + 1 + i),
                                f"make_timestamp({ts})",
                                lit(kind),
                                lit(text),
                                lit(meta_json),
                            ]
                        )
                        for i, (rid, kind, text, _, meta_json, ts) in enumerate(rows)
                    )
                )
            if values:
                out.append(
                    upsert.format(
                        ", ".join(
                            f"({', '.join([*ns, lit(k), lit(v), f'make_timestamp({now})'])})"
                            for k, v in values.items()
                        )
                    )
                )
            return out

        def bound(first: int) -> Callable[[Any], None]:
            def write(cur: Any) -> None:
                for i, (rid, kind, text, _, meta_json, ts) in enumerate(rows):
                    cur.execute(
                        insert + "(?, ?, ?, ?, ?, ?, make_timestamp(?), ?, ?, ?)",
                        [rid, *params, first + 1 + i, ts, kind, text, meta_json],
                    )
                for key, value in values.items():
                    cur.execute(
                        upsert.format("(?, ?, ?, ?, ?, ?, make_timestamp(?))"),
                        [*params, key, value, now],
                    )

            return write

        ns_key = namespace.key()
        with self._write_lock:
            self._check_open()
            # The last seq of each namespace is kept after the first read: every
            # write of activity_log goes through this store under the writer lock.
            first = self._log_seqs.get(ns_key)
            if first is None:
                sql = f"SELECT coalesce(max(seq), 0) FROM activity_log WHERE {where}"
                self._drain()
                row = _one(self._wcur, sql, params)
                first = int(row[0]) if row else 0
            try:  # literals, not parameters (see actormem.store._duckdb_sql): one call
                script = statements(first)
            except UnsafeLiteral:  # e.g. a NUL character: bound parameters
                self._run_txn("journal write", bound(first))
            else:  # acknowledged once in the store's log (see actormem.store._acklog)
                self._write_script("journal write", script)
            self._log_seqs[ns_key] = first + len(rows)
        return [
            LogRecord(
                id=rid,
                namespace=namespace,
                seq=first + 1 + i,
                ts=ts / 1_000_000,
                entry_type=kind,
                content=text,
                metadata=meta,
            )
            for i, (rid, kind, text, meta, _, ts) in enumerate(rows)
        ]

    def journal_state(self, namespace: Namespace) -> dict[str, str]:
        """The journal's key/value state of the concrete ``namespace``."""
        where, params = _exact_sql(namespace)
        rows = (
            self._reader()
            .execute(f"SELECT key, value FROM journal_state WHERE {where}", params)
            .fetchall()
        )
        return {str(k): str(v) for k, v in rows}

    def set_journal_state(self, namespace: Namespace, values: dict[str, str]) -> None:
        """Upsert ``values`` into the journal state of ``namespace`` (one transaction)."""
        _, params = _exact_sql(namespace)
        for key, value in values.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise InvalidMemoryError(f"journal state needs str keys and values: {key!r}")
        now = us(self._clock())

        upsert = (
            "INSERT INTO journal_state (user_id, agent_id, run_id, session_id, key, "
            "value, updated_at) VALUES ({}) "
            "ON CONFLICT (user_id, agent_id, run_id, session_id, key) "
            "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
        )
        try:  # one statement of literals, not parameters: see actormem.store._duckdb_sql
            ns_lits = [lit(p) for p in params]
            rows = [
                ", ".join([*ns_lits, lit(k), lit(v), f"make_timestamp({now})"])
                for k, v in values.items()
            ]
            statement: str | None = upsert.format("), (".join(rows)) if rows else None
        except UnsafeLiteral:
            statement = None

        def write(cur: Any) -> None:
            for key, value in values.items():
                cur.execute(
                    upsert.format("?, ?, ?, ?, ?, ?, make_timestamp(?)"), [*params, key, value, now]
                )

        if statement is None:
            if values:
                self._write_txn("journal state write", write)
            return
        with self._write_lock:
            self._check_open()
            self._write_script("journal state write", [statement])

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
                f"SELECT {field}, count(*) FROM memories WHERE {where} AND {_LIVE} "
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
                f"FROM memories WHERE {where} AND {_LIVE} GROUP BY day ORDER BY day",
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
                f"count(*) FROM memories WHERE {where} AND {_LIVE} GROUP BY day, kind "
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
        return [Namespace.from_key((r[0], r[1], r[2], r[3])) for r in rows]

    def top_tags(self, namespace: Namespace, limit: int = 10) -> builtins.list[tuple[str, int]]:
        """The most used tags in the scope."""
        check_limit(limit)
        where, params = _scope_sql(namespace)
        rows = (
            self._reader()
            .execute(
                "SELECT tag, count(*) AS n FROM (SELECT unnest(json_extract_string(tags, '$[*]')) "
                f"AS tag FROM memories "
                f"WHERE {where} AND {_LIVE}) GROUP BY tag ORDER BY n DESC, tag LIMIT ?",
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
                f"SELECT {_SELECT} FROM memories WHERE {where} AND {_LIVE} "
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
        rows = (
            self._reader()
            .execute(
                "SELECT user_id, agent_id, run_id, session_id, "
                f"count(*) FILTER (WHERE {_LIVE}), "
                "count(*) FILTER (WHERE deleted_at IS NOT NULL), "
                "count(*) FILTER (WHERE superseded_by IS NOT NULL AND deleted_at IS NULL), "
                f"coalesce(avg(importance) FILTER (WHERE {_LIVE}), 0), "
                f"coalesce(sum(access_count) FILTER (WHERE {_LIVE}), 0), "
                f"epoch_us(min(created_at) FILTER (WHERE {_LIVE})), "
                f"epoch_us(max(created_at) FILTER (WHERE {_LIVE})) "
                f"FROM memories WHERE {where} GROUP BY ALL ORDER BY ALL",
                params,
            )
            .fetchall()
        )
        kinds_rows = (
            self._reader()
            .execute(
                f"SELECT user_id, agent_id, run_id, session_id, kind, count(*) FROM memories "
                f"WHERE {where} AND {_LIVE} GROUP BY ALL",
                params,
            )
            .fetchall()
        )
        kinds: dict[tuple[str, str, str, str], dict[str, int]] = {}
        for u, a, r, s, k, c in kinds_rows:
            kinds.setdefault((u, a, r, s), {})[k] = int(c)
        return [
            NamespaceStats(
                namespace=Namespace.from_key((row[0], row[1], row[2], row[3])),
                live=int(row[4]),
                deleted=int(row[5]),
                superseded=int(row[6]),
                kinds=kinds.get((row[0], row[1], row[2], row[3]), {}),
                avg_importance=float(row[7]),
                total_access=int(row[8]),
                first_created=sec(row[9]),
                last_created=sec(row[10]),
            )
            for row in rows
        ]

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
        return total, reader, reader.schema
