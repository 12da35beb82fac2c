"""The DuckDB schema of the long-term store and its forward migrations.

Version history:

* **1** -- memories (no ``session_id``, no ``metadata``), history without
  ``reason``, ``schema_version``, ``store_meta``.
* **2** -- ``memories.session_id``, ``memories.metadata`` (JSON) and
  ``history.reason`` / ``history.namespace`` columns.
* **3** -- the journal's tables: ``activity_log`` (typed LOG entries),
  ``log_compactions`` (one row per LOG compaction) and ``journal_state``
  (per-namespace key/value: NOW, file hashes, dream input hashes).
* **4** -- ``memories.tags`` and ``memories.source_ids`` are JSON arrays in
  ``VARCHAR`` columns instead of ``VARCHAR[]``.  With a primary key and a
  non-empty LIST column, DuckDB 1.5 wrote the list data of the neighbouring
  rows into the WAL on every commit (5 KB per one-row insert at 2,000 rows,
  13 KB at 20,000; 1.2 KB as text) and rewrote the whole row (delete +
  insert) whenever a list was updated.  Side tables were measured too: the
  same WAL bytes as text but twice the commit time (a second insert).
* **5** -- ``memories.embedding`` is a ``BLOB`` of little-endian float32
  values instead of ``FLOAT[dim]``: DuckDB kept min/max statistics of every
  element, about 20 us of CPU per inserted 256-d row and a scan of every
  float at each checkpoint (see :mod:`actormem.store._duckdb_vectors`).  The
  dimension is the one ``store_meta`` records (``embedder_dim``).

:func:`ensure_schema` creates a fresh file at :data:`SCHEMA_VERSION` or
upgrades an older one step by step inside one transaction; a file written by a
newer actormem raises :class:`SchemaVersionError` and is left untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import pyarrow as pa
import structlog

from actormem.store._duckdb_vectors import blob_array
from actormem.store._types import SchemaVersionError, StoreError

__all__ = ["SCHEMA_VERSION", "ensure_schema", "memories_ddl", "read_meta", "write_meta"]

log = structlog.get_logger(__name__)

SCHEMA_VERSION: Final = 5


#: The vectors' column.  Float32 bytes with random low bits never compress:
#: at each checkpoint DuckDB still tried a dictionary (hashing every 1 KB
#: value) and FSST on them before storing them as they are -- 0.33 s of the
#: checkpoint's CPU per 100k rows of ids and vectors against 0.15 s with the
#: method named (one DuckDB thread, four pairs).  DuckDB keeps the choice in
#: its catalog; files created before keep analysing (no ALTER sets it).  It
#: also keeps it through ``ALTER ... SET DATA TYPE``: a future migration that
#: changes the column's type must drop and add the column instead.
EMBEDDING_COLUMN: Final = "BLOB USING COMPRESSION uncompressed"


def memories_ddl(dim: int) -> str:
    """The ``CREATE TABLE`` statement of the memories table (current version).

    ``dim`` no longer shapes the table: the vectors are bytes (schema 5) and
    their size is the one ``store_meta`` records.
    """
    del dim
    return f"""
    CREATE TABLE memories (
        id VARCHAR PRIMARY KEY,
        user_id VARCHAR NOT NULL DEFAULT '',
        agent_id VARCHAR NOT NULL DEFAULT '',
        run_id VARCHAR NOT NULL DEFAULT '',
        session_id VARCHAR NOT NULL DEFAULT '',
        kind VARCHAR NOT NULL,
        content VARCHAR NOT NULL,
        content_hash VARCHAR NOT NULL,
        embedding {EMBEDDING_COLUMN},
        importance DOUBLE NOT NULL,
        tags VARCHAR NOT NULL DEFAULT '[]',
        source_ids VARCHAR NOT NULL DEFAULT '[]',
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        last_accessed TIMESTAMP NOT NULL,
        access_count BIGINT NOT NULL DEFAULT 0,
        superseded_by VARCHAR,
        deleted_at TIMESTAMP,
        metadata JSON NOT NULL DEFAULT '{{}}'
    )"""


_HISTORY_DDL: Final = """
    CREATE TABLE history (
        id VARCHAR NOT NULL,
        memory_id VARCHAR NOT NULL,
        user_id VARCHAR NOT NULL DEFAULT '',
        agent_id VARCHAR NOT NULL DEFAULT '',
        run_id VARCHAR NOT NULL DEFAULT '',
        session_id VARCHAR NOT NULL DEFAULT '',
        op VARCHAR NOT NULL,
        old_content VARCHAR,
        new_content VARCHAR,
        ts TIMESTAMP NOT NULL,
        reason VARCHAR NOT NULL DEFAULT ''
    )"""

#: The journal's tables (schema version 3).  Rows are keyed by the concrete
#: namespace (all four columns, ``""`` for unset), never by a scope.
_JOURNAL_DDL: Final[tuple[str, ...]] = (
    """
    CREATE TABLE IF NOT EXISTS activity_log (
        id VARCHAR PRIMARY KEY,
        user_id VARCHAR NOT NULL DEFAULT '',
        agent_id VARCHAR NOT NULL DEFAULT '',
        run_id VARCHAR NOT NULL DEFAULT '',
        session_id VARCHAR NOT NULL DEFAULT '',
        seq BIGINT NOT NULL,
        ts TIMESTAMP NOT NULL,
        entry_type VARCHAR NOT NULL,
        content VARCHAR NOT NULL,
        metadata JSON NOT NULL DEFAULT '{}',
        compaction_id VARCHAR
    )""",
    """
    CREATE TABLE IF NOT EXISTS log_compactions (
        id VARCHAR PRIMARY KEY,
        user_id VARCHAR NOT NULL DEFAULT '',
        agent_id VARCHAR NOT NULL DEFAULT '',
        run_id VARCHAR NOT NULL DEFAULT '',
        session_id VARCHAR NOT NULL DEFAULT '',
        ts TIMESTAMP NOT NULL,
        entries BIGINT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        summary_id VARCHAR NOT NULL,
        summary VARCHAR NOT NULL,
        summarizer VARCHAR NOT NULL DEFAULT '',
        bytes_before BIGINT NOT NULL DEFAULT 0,
        bytes_after BIGINT NOT NULL DEFAULT 0
    )""",
    """
    CREATE TABLE IF NOT EXISTS journal_state (
        user_id VARCHAR NOT NULL DEFAULT '',
        agent_id VARCHAR NOT NULL DEFAULT '',
        run_id VARCHAR NOT NULL DEFAULT '',
        session_id VARCHAR NOT NULL DEFAULT '',
        key VARCHAR NOT NULL,
        value VARCHAR NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (user_id, agent_id, run_id, session_id, key)
    )""",
)

_META_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS store_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)"
)
_VERSION_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS schema_version "
    "(version INTEGER NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
)

# No secondary indexes: DuckDB refuses ALTER TABLE on a table with one, which
# would block later migrations; history is read by scans (analytic queries).
_INDEX_DDL: Final[tuple[str, ...]] = ()


def _migrate_1_to_2(con: Any) -> None:
    # DuckDB cannot add a column with a NOT NULL constraint; the defaults fill
    # existing rows and the store always writes the columns.
    con.execute("ALTER TABLE memories ADD COLUMN session_id VARCHAR DEFAULT ''")
    con.execute("ALTER TABLE memories ADD COLUMN metadata JSON DEFAULT '{}'")
    for column in ("user_id", "agent_id", "run_id", "session_id"):
        con.execute(f"ALTER TABLE history ADD COLUMN {column} VARCHAR DEFAULT ''")
    con.execute("ALTER TABLE history ADD COLUMN reason VARCHAR DEFAULT ''")
    # Carry the namespace of each memory onto its history rows.
    con.execute(
        "UPDATE history SET user_id = m.user_id, agent_id = m.agent_id, run_id = m.run_id "
        "FROM memories m WHERE history.memory_id = m.id"
    )


def _migrate_2_to_3(con: Any) -> None:
    for ddl in _JOURNAL_DDL:
        con.execute(ddl)


def _migrate_3_to_4(con: Any) -> None:
    # The lists become their JSON text (to_json writes the compact form that
    # msgspec writes, so old and new rows read back alike).
    for column in ("tags", "source_ids"):
        con.execute(
            f"ALTER TABLE memories ALTER {column} SET DATA TYPE VARCHAR "
            f"USING CAST(to_json(coalesce({column}, [])) AS VARCHAR)"
        )
        con.execute(f"ALTER TABLE memories ALTER {column} SET DEFAULT '[]'")


def _migrate_4_to_5(con: Any) -> None:
    # The vectors become their float32 bytes.  SQL has no float -> bytes
    # conversion, so a vectorised Python function (Arrow in, Arrow out) turns
    # each chunk's FixedSizeList into one binary array, inside the ALTER.
    row = con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'memories' AND column_name = 'embedding'"
    ).fetchall()
    found = re.search(r"FLOAT\[(\d+)\]", str(row[0][0])) if row else None
    if found is None:  # no vector column of a known size: a new one (re-embedding fills it)
        if row:
            con.execute("ALTER TABLE memories DROP COLUMN embedding")
        con.execute(f"ALTER TABLE memories ADD COLUMN embedding {EMBEDDING_COLUMN}")
        return
    dim = int(found.group(1))

    def to_blob(column: Any) -> pa.Array:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        n = len(column)
        values = column.values.slice(column.offset * dim, n * dim)
        out = blob_array(values.to_numpy(zero_copy_only=False).reshape(n, dim), dim)
        if not column.null_count:
            return out
        valid = pa.array(column.is_valid().to_numpy(zero_copy_only=False))
        return pa.Array.from_buffers(
            out.type, n, [valid.buffers()[1], *out.buffers()[1:]], null_count=column.null_count
        )

    con.create_function(
        "_actormem_vector_blob", to_blob, [con.dtype(f"FLOAT[{dim}]")], con.dtype("BLOB"),
        type="arrow",
    )  # fmt: skip
    try:
        con.execute(
            "ALTER TABLE memories ALTER embedding SET DATA TYPE BLOB "
            "USING _actormem_vector_blob(embedding)"
        )
    finally:
        con.remove_function("_actormem_vector_blob")


#: ``MIGRATIONS[v]`` upgrades a file from version ``v`` to ``v + 1``.
MIGRATIONS: Final[dict[int, Callable[[Any], None]]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
}


def _current_version(con: Any) -> int | None:
    tables = {
        row[0]
        for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
    }
    if "schema_version" not in tables:
        return None if "memories" not in tables else 1
    rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else 1


def ensure_schema(con: Any, dim: int, path: str) -> tuple[int, int]:
    """Create or upgrade the schema.

    Args:
        con: A DuckDB connection or cursor.
        dim: The embedding dimension used when creating a fresh file.
        path: The file name (for messages).

    Returns:
        ``(version_found, version_now)``; ``version_found`` is 0 for a new file.

    Raises:
        SchemaVersionError: The file is newer than :data:`SCHEMA_VERSION`.
    """
    found = _current_version(con)
    if found is None:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(memories_ddl(dim))
            con.execute(_HISTORY_DDL)
            con.execute(_META_DDL)
            con.execute(_VERSION_DDL)
            for ddl in (*_JOURNAL_DDL, *_INDEX_DDL):
                con.execute(ddl)
            con.execute("INSERT INTO schema_version (version) VALUES (?)", [SCHEMA_VERSION])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        log.info("store.schema_created", path=path, version=SCHEMA_VERSION, dim=dim)
        return 0, SCHEMA_VERSION
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} has schema version {found}; this actormem understands up to "
            f"{SCHEMA_VERSION} -- upgrade actormem to open it"
        )
    if found < SCHEMA_VERSION:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(_META_DDL)
            con.execute(_VERSION_DDL)
            for version in range(found, SCHEMA_VERSION):
                try:
                    MIGRATIONS[version](con)
                except Exception as exc:
                    raise StoreError(
                        f"migrating {path} from schema version {version} to {version + 1} "
                        f"failed (the file is unchanged): {exc}"
                    ) from exc
                con.execute("INSERT INTO schema_version (version) VALUES (?)", [version + 1])
            for ddl in _INDEX_DDL:
                con.execute(ddl)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        log.info("store.schema_migrated", path=path, old=found, new=SCHEMA_VERSION)
    return found, SCHEMA_VERSION


def read_meta(con: Any) -> dict[str, str]:
    """All rows of ``store_meta`` as a dict."""
    return {str(k): str(v) for k, v in con.execute("SELECT key, value FROM store_meta").fetchall()}


def write_meta(con: Any, values: dict[str, str]) -> None:
    """Upsert ``values`` into ``store_meta`` (caller manages the transaction)."""
    for key, value in values.items():
        con.execute(
            "INSERT INTO store_meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )
