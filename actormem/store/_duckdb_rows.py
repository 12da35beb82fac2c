"""How DuckDB stores a batch: the Arrow tables of inserts, updates and history rows.

Batches go into DuckDB as registered Arrow tables (``INSERT ... SELECT`` /
``UPDATE ... FROM``), never ``executemany`` (about 54 rows/s with list
parameters against about 100k rows/s from Arrow).  Small batches (a single
``add``, a keyed fact) are written as SQL text with literal values instead
(:mod:`actormem.store._duckdb_sql` says why).  Used by
:class:`~actormem.store.DuckDBStore`'s write path.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from actormem.store._duckdb_sql import UnsafeLiteral, lit, row_sql, vector_lit
from actormem.store._duckdb_vectors import blob_array
from actormem.store._records import Batch, Change, json_text, strs_json, us
from actormem.store._types import MemoryRecord, Namespace
from actormem.store._wire import (
    WireChange,
    WireHistory,
    WireMemory,
    WireWrite,
    wire_change,
    wire_history,
    wire_memory,
)

__all__ = [
    "HISTORY_HEAD",
    "INSERT_HEAD",
    "LITERAL_CHARS",
    "LITERAL_INSERTS",
    "LOG_HEAD",
    "SMALL_BATCH",
    "STATE_HEAD",
    "STATE_TAIL",
    "Tables",
    "change_sql",
    "execute_history",
    "execute_insert",
    "history_row",
    "history_sql",
    "history_table",
    "history_values",
    "import_arrow_scan",
    "insert_sql",
    "insert_table",
    "insert_values",
    "journal_statements",
    "literal_history",
    "literal_inserts",
    "memory_row",
    "moved_sql",
    "small_statements",
    "touches_sql",
    "ts_array",
    "update_rows",
    "update_sql",
    "wire_history_table",
    "write_statements",
]

F32 = npt.NDArray[np.float32]


def ts_array(values: Sequence[float | None]) -> pa.Array:
    if None not in values:  # one numpy pass: round(ts * 1e6) like _us
        micros = np.rint(np.asarray(values, dtype=np.float64) * 1_000_000).astype(np.int64)
        return pa.array(micros, type=pa.int64()).cast(pa.timestamp("us"))
    return pa.array([None if v is None else us(v) for v in values], type=pa.timestamp("us"))


def str_lists(values: Sequence[Sequence[str]]) -> pa.Array:
    """Lists of strings as JSON array text (schema 4), ``'[]'`` built without a loop."""
    if not any(values):
        return pa.array(["[]"] * len(values), type=pa.string())
    return pa.array([strs_json(v) for v in values], type=pa.string())


@dataclass
class Tables:
    """A batch's Arrow tables, built before its transaction."""

    insert: tuple[pa.Table, str, str] | None
    history: pa.Table | None


def insert_table(
    dim: int, records: Sequence[MemoryRecord], vectors: Sequence[F32] | F32
) -> tuple[pa.Table, str, str]:
    """``(table, column list, select list)`` of an insert into ``memories``."""
    n = len(records)
    namespaces = {id(r.namespace): r.namespace for r in records}
    if len(namespaces) == 1:  # the usual batch: one namespace, constant columns
        key = next(iter(namespaces.values())).key()
        keys_cols = [pa.array([k] * n, type=pa.string()) for k in key]
    else:
        keys = [r.namespace.key() for r in records]
        keys_cols = [pa.array([k[i] for k in keys], type=pa.string()) for i in range(4)]
    deleted = [r.deleted_at for r in records]
    superseded = [r.superseded_by for r in records]
    metadata = [r.metadata for r in records]
    columns = {
        "id": pa.array([r.id for r in records], type=pa.string()),
        "user_id": keys_cols[0],
        "agent_id": keys_cols[1],
        "run_id": keys_cols[2],
        "session_id": keys_cols[3],
        "kind": pa.array([r.kind for r in records], type=pa.string()),
        "content": pa.array([r.content for r in records], type=pa.string()),
        "content_hash": pa.array([r.content_hash for r in records], type=pa.string()),
        "embedding": blob_array(vectors if isinstance(vectors, np.ndarray) else list(vectors), dim),
        "importance": pa.array([r.importance for r in records], type=pa.float64()),
        "tags": str_lists([r.tags for r in records]),
        "source_ids": str_lists([r.source_ids for r in records]),
        "created_at": ts_array([r.created_at for r in records]),
        "updated_at": ts_array([r.updated_at for r in records]),
        "last_accessed": ts_array([r.last_accessed for r in records]),
        "access_count": pa.array([r.access_count for r in records], type=pa.int64()),
        "superseded_by": (
            pa.nulls(n, type=pa.string())
            if superseded.count(None) == n
            else pa.array(superseded, type=pa.string())
        ),
        "deleted_at": (
            pa.nulls(n, type=pa.timestamp("us")) if deleted.count(None) == n else ts_array(deleted)
        ),
    }
    names = ", ".join(columns)
    select = names
    if any(metadata):  # else the column default '{}' (no JSON parse of n empty objects)
        columns["metadata"] = pa.array([json_text(m) for m in metadata], type=pa.string())
        names += ", metadata"
        select += ", CAST(metadata AS JSON)"
    tbl = pa.table(columns)
    assert tbl.num_rows == n
    return tbl, names, select


def execute_insert(cur: Any, insert: tuple[pa.Table, str, str]) -> None:
    tbl, names, select = insert
    cur.register("_ins", tbl)
    try:
        cur.execute(f"INSERT INTO memories ({names}) SELECT {select} FROM _ins")
    finally:
        cur.unregister("_ins")


def update_rows(cur: Any, dim: int, changes: Sequence[Change]) -> None:
    recs = [c.record for c in changes]
    tbl = pa.table(
        {
            "id": pa.array([r.id for r in recs], type=pa.string()),
            "kind": pa.array([r.kind for r in recs], type=pa.string()),
            "content": pa.array([r.content for r in recs], type=pa.string()),
            "content_hash": pa.array([r.content_hash for r in recs], type=pa.string()),
            "importance": pa.array([r.importance for r in recs], type=pa.float64()),
            "tags": str_lists([r.tags for r in recs]),
            "source_ids": str_lists([r.source_ids for r in recs]),
            "updated_at": ts_array([r.updated_at for r in recs]),
            "access_delta": pa.array([c.access_delta for c in changes], type=pa.int64()),
            "superseded_by": pa.array([r.superseded_by for r in recs], type=pa.string()),
            "deleted_at": ts_array([r.deleted_at for r in recs]),
            "metadata": pa.array([json_text(r.metadata) for r in recs], type=pa.string()),
        }
    )
    cur.register("_upd", tbl)
    try:
        cur.execute(
            "UPDATE memories SET kind = u.kind, content = u.content, "
            "content_hash = u.content_hash, importance = u.importance, "
            "tags = u.tags, source_ids = u.source_ids, updated_at = u.updated_at, "
            "access_count = least(memories.access_count + u.access_delta, 9007199254740991), "
            "superseded_by = u.superseded_by, deleted_at = u.deleted_at, "
            "metadata = CAST(u.metadata AS JSON) FROM _upd u WHERE memories.id = u.id"
        )
    finally:
        cur.unregister("_upd")
    with_vec = [c for c in changes if c.content_vector is not None]
    if with_vec:
        flat = np.stack([c.content_vector for c in with_vec if c.content_vector is not None])
        vtbl = pa.table(
            {
                "id": pa.array([c.record.id for c in with_vec], type=pa.string()),
                "embedding": blob_array(flat, dim),
                "ord": pa.array(range(len(with_vec)), type=pa.int64()),
            }
        )
        cur.register("_vec", vtbl)
        try:
            cur.execute(
                f"CREATE OR REPLACE TEMP TABLE {_MOVED} AS SELECT memories.* REPLACE "
                "(v.embedding AS embedding), v.ord AS _ord FROM memories JOIN _vec v "
                f"ON memories.id = v.id; "
                "DELETE FROM memories WHERE id IN (SELECT id FROM _vec); "
                f"INSERT INTO memories SELECT * EXCLUDE (_ord) FROM {_MOVED} ORDER BY _ord; "
                f"DROP TABLE {_MOVED}"
            )
        finally:
            cur.unregister("_vec")


#: The temporary table a row with a new vector passes through (see :func:`moved_sql`).
_MOVED = "_actormem_moved"


def moved_sql(id_lit: str, vector: str) -> str:
    """Give the row ``id_lit`` the vector literal ``vector`` as a new row (a new rowid).

    A rebuilt index reads rows in ``created_at, rowid`` order while the live
    index appends a row whose vector changed; ``FLOAT[dim]`` columns moved
    the row (DuckDB updates array columns as a delete and an insert), so a
    ``BLOB`` vector is moved the same way to keep both orders one.
    """
    return (
        f"CREATE OR REPLACE TEMP TABLE {_MOVED} AS SELECT * REPLACE ({vector} AS embedding) "
        f"FROM memories WHERE id = {id_lit}; DELETE FROM memories WHERE id = {id_lit}; "
        f"INSERT INTO memories SELECT * FROM {_MOVED}; DROP TABLE {_MOVED}"
    )


def history_table(
    rows: Sequence[tuple[str, Namespace, str, str | None, str | None, str]],
    now: float,
) -> pa.Table:
    """The Arrow table of history rows written at ``now``."""
    keys = [r[1].key() for r in rows]
    prefix = uuid.uuid4().hex
    tbl = pa.table(
        {
            "id": pa.array([f"{prefix}-{i}" for i in range(len(rows))], type=pa.string()),
            "memory_id": pa.array([r[0] for r in rows], type=pa.string()),
            "user_id": pa.array([k[0] for k in keys], type=pa.string()),
            "agent_id": pa.array([k[1] for k in keys], type=pa.string()),
            "run_id": pa.array([k[2] for k in keys], type=pa.string()),
            "session_id": pa.array([k[3] for k in keys], type=pa.string()),
            "op": pa.array([r[2] for r in rows], type=pa.string()),
            "old_content": pa.array([r[3] for r in rows], type=pa.string()),
            "new_content": pa.array([r[4] for r in rows], type=pa.string()),
            "ts": ts_array([now] * len(rows)),
            "reason": pa.array([r[5] for r in rows], type=pa.string()),
        }
    )
    return tbl


def wire_history_table(rows: Sequence[tuple[WireHistory, str, float]]) -> pa.Table:
    """The Arrow table of logged history rows, each ``(row, id, written at)``.

    For rows whose texts add up past :data:`LITERAL_CHARS` (see there); the
    columns of :func:`history_table`.
    """

    def col(i: int) -> pa.Array:
        return pa.array([getattr(h, _WIRE_HISTORY[i]) for h, _, _ in rows], type=pa.string())

    return pa.table(
        {
            "id": pa.array([rid for _, rid, _ in rows], type=pa.string()),
            **{name: col(i) for i, name in enumerate(_WIRE_HISTORY) if name != "reason"},
            "ts": ts_array([ts for _, _, ts in rows]),
            "reason": col(_WIRE_HISTORY.index("reason")),
        }
    )


_WIRE_HISTORY = WireHistory.__struct_fields__


def execute_history(cur: Any, tbl: pa.Table) -> None:
    cur.register("_hist", tbl)
    try:
        cur.execute(
            "INSERT INTO history (id, memory_id, user_id, agent_id, run_id, session_id, op, "
            "old_content, new_content, ts, reason) SELECT id, memory_id, user_id, agent_id, "
            "run_id, session_id, op, old_content, new_content, ts, reason FROM _hist"
        )
    finally:
        cur.unregister("_hist")


# -- small batches as SQL text (see actormem.store._duckdb_sql) ---------------------------

#: Batches up to this many rows are written as SQL literals, larger ones through Arrow.
SMALL_BATCH = 32


def _ts_lit(value: float | None) -> str:
    return "NULL" if value is None else f"make_timestamp({us(value)})"


def import_arrow_scan() -> None:
    """Import the pyarrow modules DuckDB's first scan of an Arrow table imports.

    ``pyarrow.compute`` (for :func:`ts_array`) and ``pyarrow.dataset`` (DuckDB's
    ``register``) take 30-300 ms to import here, with the GIL held throughout,
    and the first batched insert imported them on the store's applier thread in
    the middle of the application's work (an asyncio loop beside it stalled
    for as long).  The store imports them while it opens instead (in the worker
    thread of ``MemoryRuntime.aopen``), once per process.  ``numpy.ma`` too:
    ``pa.array`` of a numpy array imports it (7.8 ms on the applier thread at
    the first Arrow insert, beside an asyncio loop).
    """
    import numpy.ma  # noqa: F401
    import pyarrow.compute
    import pyarrow.dataset  # noqa: F401


#: The head of a literal insert of memories; :func:`insert_values` gives its rows.
INSERT_HEAD = (
    "INSERT INTO memories (id, user_id, agent_id, run_id, session_id, kind, content, "
    "content_hash, embedding, importance, tags, source_ids, created_at, updated_at, "
    "last_accessed, access_count, superseded_by, deleted_at, metadata) VALUES "
)

#: The head of a literal insert of history rows; :func:`history_values` gives its rows.
HISTORY_HEAD = (
    "INSERT INTO history (id, memory_id, user_id, agent_id, run_id, session_id, op, "
    "old_content, new_content, ts, reason) VALUES "
)

#: The head of a literal insert of activity log rows (the journal's LOG entries).
LOG_HEAD = (
    "INSERT INTO activity_log (id, user_id, agent_id, run_id, session_id, seq, ts, "
    "entry_type, content, metadata) VALUES "
)

#: The head and tail of a literal upsert of journal state rows.  One statement
#: may not name a key twice (DuckDB refuses to update a row twice in one
#: command), so merged rows keep only the last value of each key.
STATE_HEAD = (
    "INSERT INTO journal_state (user_id, agent_id, run_id, session_id, key, "
    "value, updated_at) VALUES "
)
STATE_TAIL = (
    " ON CONFLICT (user_id, agent_id, run_id, session_id, key) "
    "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
)


def insert_sql(dim: int, records: Sequence[MemoryRecord], vectors: Sequence[F32]) -> str:
    """An ``INSERT ... VALUES`` of ``records`` with literal values.

    Raises:
        UnsafeLiteral: A value cannot be written as a literal (use :func:`insert_table`).
    """
    return INSERT_HEAD + ", ".join(insert_values(dim, records, vectors))


def insert_values(dim: int, records: Sequence[MemoryRecord], vectors: Sequence[F32]) -> list[str]:
    """The ``(...)`` rows of :func:`insert_sql`.

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    return [memory_row(wire_memory(r, v), dim) for r, v in zip(records, vectors, strict=True)]


def memory_row(m: WireMemory, dim: int) -> str:
    """One ``(...)`` row of ``memories`` (:data:`INSERT_HEAD`'s columns) from its values.

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    return row_sql(
        [
            lit(m.id),
            lit(m.user_id),
            lit(m.agent_id),
            lit(m.run_id),
            lit(m.session_id),
            lit(m.kind),
            lit(m.content),
            lit(m.content_hash),
            vector_lit(np.frombuffer(m.vector, dtype=np.float32), dim),
            lit(float(m.importance)),
            lit(strs_json(m.tags)),
            lit(strs_json(m.source_ids)),
            _ts_lit(m.created_at),
            _ts_lit(m.updated_at),
            _ts_lit(m.last_accessed),
            lit(int(m.access_count)),
            lit(m.superseded_by),
            _ts_lit(m.deleted_at),
            f"CAST({lit(m.metadata)} AS JSON)",
        ]
    )


def update_sql(dim: int, change: Change) -> str:
    """The ``UPDATE`` of one changed row with literal values (see :func:`update_rows`).

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    return change_sql(wire_change(change), dim)


def change_sql(change: WireChange, dim: int) -> str:
    """:func:`update_sql` from the change's values.

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    r = change.memory
    sets = [
        f"kind = {lit(r.kind)}",
        f"content = {lit(r.content)}",
        f"content_hash = {lit(r.content_hash)}",
        f"importance = {lit(float(r.importance))}",
        f"tags = {lit(strs_json(r.tags))}",
        f"source_ids = {lit(strs_json(r.source_ids))}",
        f"updated_at = {_ts_lit(r.updated_at)}",
        f"access_count = least(access_count + {lit(int(change.access_delta))}, 9007199254740991)",
        f"superseded_by = {lit(r.superseded_by)}",
        f"deleted_at = {_ts_lit(r.deleted_at)}",
        f"metadata = CAST({lit(r.metadata)} AS JSON)",
    ]
    out = f"UPDATE memories SET {', '.join(sets)} WHERE id = {lit(r.id)}"
    if r.vector:
        vector = vector_lit(np.frombuffer(r.vector, dtype=np.float32), dim)
        out += "; " + moved_sql(lit(r.id), vector)
    return out


def history_sql(
    rows: Sequence[tuple[str, Namespace, str, str | None, str | None, str]], now: float
) -> str:
    """An ``INSERT ... VALUES`` of history rows written at ``now`` (see :func:`history_table`).

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    return HISTORY_HEAD + ", ".join(history_values(rows, now))


def history_values(
    rows: Sequence[tuple[str, Namespace, str, str | None, str | None, str]], now: float
) -> list[str]:
    """The ``(...)`` rows of :func:`history_sql` (ids unique per call).

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    prefix = uuid.uuid4().hex
    return [history_row(h, f"{prefix}-{i}", now) for i, h in enumerate(wire_history(rows))]


def history_row(h: WireHistory, row_id: str, now: float) -> str:
    """One ``(...)`` row of ``history`` (:data:`HISTORY_HEAD`'s columns).

    Raises:
        UnsafeLiteral: A value cannot be written as a literal.
    """
    return row_sql(
        [
            lit(row_id),
            lit(h.memory_id),
            lit(h.user_id),
            lit(h.agent_id),
            lit(h.run_id),
            lit(h.session_id),
            lit(h.op),
            lit(h.old_content),
            lit(h.new_content),
            _ts_lit(now),
            lit(h.reason),
        ]
    )


def journal_statements(log_rows: Sequence[str], state_rows: Iterable[str]) -> list[str]:
    """One insert of ``log_rows`` and one upsert of ``state_rows`` (when there are any)."""
    out: list[str] = []
    if log_rows:
        out.append(LOG_HEAD + ", ".join(log_rows))
    states = list(state_rows)
    if states:
        out.append(STATE_HEAD + ", ".join(states) + STATE_TAIL)
    return out


def write_statements(write: WireWrite, dim: int | None = None) -> list[str]:
    """The statements of one logged write, in the order the direct path runs them.

    ``dim``: the store's vector size (default: each vector's own).

    Raises:
        UnsafeLiteral: A value cannot be written as a literal (never for a
            write that passed :func:`~actormem.store._wire.literal_safe`).
    """
    out: list[str] = []
    if write.inserts:
        out.append(
            INSERT_HEAD + ", ".join(memory_row(m, dim or len(m.vector) // 4) for m in write.inserts)
        )
    out.extend(change_sql(c, dim or len(c.memory.vector) // 4) for c in write.changes)
    if write.history:
        prefix = uuid.uuid4().hex
        out.append(
            HISTORY_HEAD
            + ", ".join(
                history_row(h, f"{prefix}-{i}", write.now) for i, h in enumerate(write.history)
            )
        )
    out.extend(journal_statements(write.log_rows, (row for _, row in write.state_rows)))
    out.extend(write.statements)
    return out


#: Inserts up to this many rows carry their vectors as literals; larger ones go
#: through Arrow.  DuckDB parsing a 256-float vector literal costs about 0.5 ms
#: of CPU per row here; registering an Arrow table costs 4-5 ms of CPU whatever
#: its size (mostly DuckDB's failed ``import pandas`` look-ups).  Measured in
#: one run (CPU time, load 7): literal 3.4 / 5.0 / 7.6 ms for 1 / 4 / 8 rows,
#: Arrow 7.9 / 7.2 / 7.0 ms.
LITERAL_INSERTS = 8
#: ... and their texts as literals while these add up to at most this many
#: characters.  DuckDB parses a statement's text with the GIL held: the
#: compressor's offloaded conversation (one memory of 343k characters) as a
#: literal held an asyncio loop beside it 10-32 ms (median / p90 over 12
#: alternating runs at load 8; through Arrow 2.3 / 8.7 ms, a short literal
#: row 3.8 / 7.3 ms: the machine's noise).
LITERAL_CHARS = 1 << 16


def _history_chars(rows: Iterable[tuple[Any, ...]]) -> int:
    """The characters of the old and new texts of history rows (fields 3 and 4)."""
    return sum(len(r[3] or "") + len(r[4] or "") for r in rows)


def literal_history(rows: Sequence[WireHistory]) -> bool:
    """Whether logged history rows are written as SQL literals (see :data:`LITERAL_CHARS`)."""
    return sum(len(h.old_content or "") + len(h.new_content or "") for h in rows) <= LITERAL_CHARS


def literal_inserts(records: Sequence[MemoryRecord]) -> bool:
    """Whether an insert of ``records`` is written as SQL literals (else through Arrow)."""
    if len(records) > LITERAL_INSERTS:
        return False
    return sum(len(r.content) for r in records) <= LITERAL_CHARS


def small_statements(dim: int, batch: Batch, now: float) -> list[str | Batch]:
    """``batch`` as ordered parts: SQL text with literal values where it pays.

    A one-row write through Arrow costs a table registration and DuckDB's
    look-ups of pandas for it; as literals it is one parse (see
    :mod:`actormem.store._duckdb_sql`).  Each part is a statement, or a
    :class:`Batch` holding the inserts, changes or history rows to write
    through Arrow tables instead (large parts, and parts holding a value
    with no literal, e.g. a NUL character).  Parts keep the order inserts,
    changes, history.
    """
    out: list[str | Batch] = []
    if batch.inserts:
        part: str | Batch = Batch(inserts=batch.inserts)
        if literal_inserts([r for r, _ in batch.inserts]):
            with contextlib.suppress(UnsafeLiteral):
                part = insert_sql(dim, [r for r, _ in batch.inserts], [v for _, v in batch.inserts])
        out.append(part)
    if batch.changes:
        try:
            if len(batch.changes) > SMALL_BATCH:
                raise UnsafeLiteral("too many")
            out.extend([update_sql(dim, change) for change in batch.changes.values()])
        except UnsafeLiteral:
            out.append(Batch(changes=batch.changes))
    if batch.history:
        part = Batch(history=batch.history)
        if len(batch.history) <= 4 * SMALL_BATCH and _history_chars(batch.history) <= LITERAL_CHARS:
            with contextlib.suppress(UnsafeLiteral):
                part = history_sql(batch.history, now)
        out.append(part)
    return out


def touches_sql(pending: dict[str, tuple[int, float]]) -> str:
    """The ``UPDATE`` adding pending access counts, with literal values.

    Raises:
        UnsafeLiteral: An id cannot be written as a literal.
    """
    rows = ", ".join(
        row_sql([lit(mid), lit(int(n)), _ts_lit(ts)]) for mid, (n, ts) in pending.items()
    )
    return (
        "UPDATE memories SET access_count = least(memories.access_count + t.n, 9007199254740991), "
        "last_accessed = greatest(memories.last_accessed, t.ts) "
        f"FROM (VALUES {rows}) t(id, n, ts) WHERE memories.id = t.id"
    )
