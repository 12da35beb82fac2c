"""The DuckDB backend's journal tables: the activity log, its compactions, journal state.

A mixin of :class:`~actormem.store.DuckDBStore`, split out of
:mod:`~actormem.store._duckdb_queries` (records, history, analytics and
export stay there) because the journal's writes are their own concern: small
transactions on the agent's turn, written as SQL literals where they can be
(:mod:`~actormem.store._duckdb_sql`), sequenced per namespace
(``activity_log.seq``) and, for :meth:`DuckDBJournal.journal_write`, sent
through the store's acknowledgement log like the other small writes.
"""

from __future__ import annotations

import builtins
import os
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from actormem.store._duckdb_queries import _one, inline
from actormem.store._duckdb_rows import LOG_HEAD, STATE_HEAD, STATE_TAIL
from actormem.store._duckdb_sql import UnsafeLiteral, lit, row_sql
from actormem.store._journal_rows import check_compaction, check_entry, check_state, log_entries_sql
from actormem.store._records import (
    NS_COLS,
    check_namespace,
    json_text,
    row_to_compaction,
    row_to_log,
    us,
)
from actormem.store._types import (
    InvalidMemoryError,
    LogCompaction,
    LogRecord,
    Namespace,
)

__all__ = ["DuckDBJournal"]

#: Ids of a turn's log entries: 128 random bits from a generator seeded by the
#: system (again in a forked child), not an ``os.urandom`` call per entry --
#: each releases the GIL, and with the store's and the journal's threads busy
#: getting it back cost about 0.2 ms per call on the agent's turn.
_ids = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def _entry_id() -> str:
    return f"{_ids.getrandbits(128):032x}"


def _exact_sql(namespace: Namespace) -> tuple[str, list[Any]]:
    """``(where_clause, params)`` selecting rows of exactly ``namespace`` (journal tables)."""
    check_namespace(namespace)
    return " AND ".join(f"{c} = ?" for c in NS_COLS), list(namespace.key())


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


class DuckDBJournal:
    """The activity log and journal state of :class:`~actormem.store.DuckDBStore`."""

    _clock: Callable[[], float]

    if TYPE_CHECKING:  # provided by DuckDBStore and StoreBase

        def _reader(self) -> Any: ...

        def _check_open(self) -> None: ...

        def _write_txn(
            self, what: str, fn: Callable[[Any], Any], ids: Iterable[str] | None = None
        ) -> Any: ...

        def _run_txn(
            self, what: str, fn: Callable[[Any], Any], ids: Iterable[str] | None = None
        ) -> Any: ...

        def _run_script(
            self, what: str, statements: builtins.list[str], ids: Iterable[str] | None = None
        ) -> None: ...

        def _drain(self) -> None: ...

        def _write_script(self, what: str, statements: builtins.list[str]) -> None: ...

        def _write_journal_rows(
            self,
            what: str,
            log_rows: builtins.list[str],
            state_rows: dict[str, str],
            *,
            sync: bool = True,
            log_ids: dict[str, int] | None = None,
        ) -> None: ...

        def _drain_locked(self) -> None: ...

        def _cursor(self) -> Any: ...

        def _pending_log_ids(self, ids: builtins.list[str]) -> dict[str, int] | None: ...

        _logged: builtins.list[Any]
        _write_lock: threading.RLock
        _wcur: Any
        #: The last ``seq`` of each namespace's activity log (see :meth:`journal_write`).
        _log_seqs: dict[tuple[str, str, str, str], int]

    #: Compactions written through the store's log by this store (see :meth:`log_compact`).
    _compactions_written = 0

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
        meta, when = check_entry(entry_type, content, metadata, ts, self._clock)
        meta_json = json_text(meta)
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

        seq = self._write_txn("log append", write, ())
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
        sql, params = log_entries_sql(
            _LOG_SELECT,
            where,
            params,
            compacted=compacted,
            after_seq=after_seq,
            limit=limit,
            mark="?",
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
        nothing changes.  Entries are never deleted.  Acknowledged when it
        returns: one record of the store's log (see
        :mod:`actormem.store._acklog`), like the journal's other writes, so the
        writer lock is not held for a DuckDB transaction; the entries are checked
        against DuckDB after the pending writes that name them are applied.

        Raises:
            InvalidMemoryError: ``entry_ids`` is empty, or one of them is not a
                live entry of ``namespace``.
        """
        where, params = _exact_sql(namespace)
        ids, summary_id, summary, summarizer, bytes_before, bytes_after = check_compaction(
            entry_ids, summary_id, summary, summarizer, bytes_before, bytes_after
        )
        cid = os.urandom(16).hex()
        now = self._clock()

        try:  # literals, not an Arrow table and parameters: no pandas look-ups
            id_list = ", ".join(lit(i) for i in ids)
            cid_lit = lit(cid)
            ns_where = _exact_lit(namespace)
        except UnsafeLiteral:
            id_list = ""

        def record(row: tuple[Any, ...] | None) -> LogCompaction:
            if row is None or int(row[0]) != len(ids):
                raise InvalidMemoryError(
                    f"{len(ids) - int(row[0] if row else 0)} of the {len(ids)} entries are "
                    f"not live log entries of {namespace}"
                )
            return LogCompaction(
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

        def insert_sql(rec: LogCompaction) -> tuple[str, Sequence[Any]]:
            return inline(
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

        if id_list:
            check = (
                f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE {ns_where} "
                f"AND compaction_id IS NULL AND id IN ({id_list})"
            )
            # Through the store's log like the journal's other writes: no DuckDB
            # transaction under the writer lock (a turn's journal write would wait
            # for it).  The entries are checked without that lock (a read of
            # 10-30 ms on a busy machine held up the turn's journal write) and
            # without applying the pending writes first (a DuckDB transaction of
            # 10-40 ms of CPU per compaction, every ~22 turns of an agent): an
            # entry still pending is known from its record, the others are read
            # from DuckDB.  An entry leaves the pending records only once DuckDB
            # committed it, compactions of a namespace run one at a time, and
            # nothing else changes ``compaction_id``.
            seen = self._compactions_written
            row = self._compaction_check(ids, ns_where)
            if row is None or int(row[0]) != len(ids):  # e.g. an entry from log_append
                row = _one(self._reader(), check)  # the read applies pending writes first
            with self._write_lock:
                self._check_open()
                fresh = seen == self._compactions_written  # no other compaction came between
                if not (fresh and row is not None and int(row[0]) == len(ids)):
                    self._drain()  # (and the error names what is wrong now)
                    row = _one(self._wcur, check)
                rec = record(row)
                insert, left = insert_sql(rec)
                if not left:
                    update = (
                        f"UPDATE activity_log SET compaction_id = {cid_lit} WHERE {ns_where} "
                        f"AND id IN ({id_list})"
                    )
                    self._write_script("log compaction", [update, insert])
                    self._compactions_written += 1
                    return rec

        def write(cur: Any) -> LogCompaction:
            if id_list:
                rec = record(_one(cur, check))
                cur.execute(
                    f"UPDATE activity_log SET compaction_id = {cid_lit} WHERE {ns_where} "
                    f"AND id IN ({id_list})"
                )
            else:
                tbl = pa.table({"id": pa.array(ids, type=pa.string())})
                cur.register("_ids", tbl)
                try:
                    rec = record(
                        cur.execute(
                            f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE "
                            f"{where} AND compaction_id IS NULL AND id IN (SELECT id FROM _ids)",
                            params,
                        ).fetchone()
                    )
                    cur.execute(
                        f"UPDATE activity_log SET compaction_id = ? WHERE {where} "
                        "AND id IN (SELECT id FROM _ids)",
                        [cid, *params],
                    )
                finally:
                    cur.unregister("_ids")
            cur.execute(*insert_sql(rec))
            return rec

        result: LogCompaction = self._write_txn("log compaction", write, ())
        return result

    def _compaction_check(self, ids: builtins.list[str], ns_where: str) -> tuple[Any, ...] | None:
        """``(count, min(seq), max(seq))`` of ``ids`` among the live entries, or None.

        Pending entries from their records, the rest from DuckDB as it is (no
        drain); None when a pending compaction names one of them.
        """
        known = self._pending_log_ids(ids)
        if known is None:
            return None
        rest = [i for i in ids if i not in known]
        count, seqs = len(known), list(known.values())
        if rest:
            row = _one(
                self._cursor(),
                f"SELECT count(*), min(seq), max(seq) FROM activity_log WHERE {ns_where} "
                f"AND compaction_id IS NULL AND id IN ({', '.join(lit(i) for i in rest)})",
            )
            if row is None:
                return None
            count += int(row[0])
            seqs += [int(s) for s in row[1:] if s is not None]
        return (count, min(seqs, default=None), max(seqs, default=None))

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
        *,
        sync: bool = True,
    ) -> builtins.list[LogRecord]:
        """Append log entries and upsert journal state in one transaction.

        The journal's writes of one call (a NOW update with its log entries, the
        messages of a turn) commit together: one WAL sync instead of one per
        entry.  Committed when it returns; with ``sync=False``, written (not
        synced) to the store's start slot when it returns (a killed process
        loses nothing) and made durable by the next synced journal write, which
        carries its rows in one record, or before any other write of the store
        (:meth:`sync_log` does it at once; see :mod:`actormem.store._acklog_start`).

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
            meta, when = check_entry(
                entry_type, content, metadata, ts, self._clock, f"entries[{i}]."
            )
            rows.append(
                (
                    _entry_id(),
                    entry_type,
                    content,
                    meta,
                    json_text(meta),
                    us(when),
                )
            )
        values = dict(state or {})
        check_state(values)
        now = us(self._clock())

        def literal_rows(first: int) -> tuple[builtins.list[str], dict[str, str]]:
            ns = [lit(p) for p in params]
            log_rows = [
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
            ]
            state_rows = {
                ", ".join(
                    [*ns, lit(k)]
                ): f"({', '.join([*ns, lit(k), lit(v), f'make_timestamp({now})'])})"
                for k, v in values.items()
            }
            return log_rows, state_rows

        def bound(first: int) -> Callable[[Any], None]:
            def write(cur: Any) -> None:
                for i, (rid, kind, text, _, meta_json, ts) in enumerate(rows):
                    cur.execute(
                        LOG_HEAD + "(?, ?, ?, ?, ?, ?, make_timestamp(?), ?, ?, ?)",
                        [rid, *params, first + 1 + i, ts, kind, text, meta_json],
                    )
                for key, value in values.items():
                    cur.execute(
                        STATE_HEAD + "(?, ?, ?, ?, ?, ?, make_timestamp(?))" + STATE_TAIL,
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
                log_rows, state_rows = literal_rows(first)
            except UnsafeLiteral:  # e.g. a NUL character: bound parameters
                self._run_txn("journal write", bound(first), ())
            else:  # acknowledged once in the store's log (see actormem.store._acklog)
                ids = {rid: first + 1 + i for i, (rid, *_) in enumerate(rows)}
                self._write_journal_rows(
                    "journal write", log_rows, state_rows, sync=sync, log_ids=ids
                )
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
        check_state(values)
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
                self._write_txn("journal state write", write, ())
            return
        with self._write_lock:
            self._check_open()
            self._write_script("journal state write", [statement])
