"""The PostgreSQL schema of the long-term store and its forward migrations.

Tables (all in the connection's ``search_path`` schema):

* ``memories`` -- one row per memory version, as in DuckDB, plus the BM25
  terms of its content (``terms``: the distinct terms of
  :func:`~actormem.store._index.tokenize`, ``tfs``: how often each occurs,
  ``doclen``: the number of terms), so keyword search ranks exactly like the
  DuckDB backend's in-memory BM25.  Timestamps are integer Unix microseconds
  (``bigint``), the rounding DuckDB applies, so both backends return the
  same values; the embedding is a pgvector ``vector(dim)``.
* ``history`` -- the audit trail (``seq`` orders rows written in one
  transaction).
* ``activity_log``, ``log_compactions``, ``journal_state`` -- the journal's
  tables (:mod:`actormem.journal`), keyed by the concrete namespace.
* ``store_meta`` (embedder name and dimension) and ``schema_version``.

Indexes: a partial btree over the live rows' namespace columns and content
hash (exact-duplicate lookups, and the scan a tenant's search runs), a
partial GIN index over ``terms`` (keyword candidates), btrees for history
and the journal.  No HNSW index is created here: see
:mod:`actormem.store._postgres` on why an approximate index over the whole
table is a trap.

:func:`ensure_schema` creates the tables at :data:`PG_SCHEMA_VERSION` or runs
the pending migrations, in one transaction under an advisory lock, so two
workers starting at once migrate once; a database written by a newer
actormem raises :class:`SchemaVersionError` and is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import structlog

from actormem.store._types import SchemaVersionError, StoreError

__all__ = ["PG_SCHEMA_VERSION", "ensure_schema", "read_meta", "write_meta"]

log = structlog.get_logger(__name__)

#: Version history: **1** -- the tables above; **2** -- ``memories.seq``, the order
#: rows were added in (neighbouring episodes as search context).
PG_SCHEMA_VERSION: Final = 2

#: The advisory lock taken while creating or migrating the schema.
_MIGRATE_LOCK: Final = "actormem.store.schema"


def _create_v1(conn: Any, dim: int) -> None:
    conn.execute(
        f"""
        CREATE TABLE memories (
            id text PRIMARY KEY,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            kind text NOT NULL,
            content text NOT NULL,
            content_hash text NOT NULL,
            embedding vector({int(dim)}),
            importance double precision NOT NULL,
            tags text[] NOT NULL DEFAULT '{{}}',
            source_ids text[] NOT NULL DEFAULT '{{}}',
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL,
            last_accessed bigint NOT NULL,
            access_count bigint NOT NULL DEFAULT 0,
            superseded_by text,
            deleted_at bigint,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            terms text[] NOT NULL DEFAULT '{{}}',
            tfs integer[] NOT NULL DEFAULT '{{}}',
            doclen integer NOT NULL DEFAULT 0
        )"""
    )
    live = "WHERE deleted_at IS NULL AND superseded_by IS NULL"
    conn.execute(
        "CREATE INDEX memories_live_key ON memories "
        f"(user_id, agent_id, run_id, session_id, content_hash) {live}"
    )
    conn.execute(f"CREATE INDEX memories_live_agent ON memories (agent_id) {live}")
    conn.execute(f"CREATE INDEX memories_terms ON memories USING gin (terms) {live}")
    conn.execute(
        "CREATE INDEX memories_key_all ON memories (user_id, agent_id, run_id, session_id)"
    )
    conn.execute(
        """
        CREATE TABLE history (
            seq bigserial PRIMARY KEY,
            id text NOT NULL,
            memory_id text NOT NULL,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            op text NOT NULL,
            old_content text,
            new_content text,
            ts bigint NOT NULL,
            reason text NOT NULL DEFAULT ''
        )"""
    )
    conn.execute("CREATE INDEX history_key ON history (user_id, agent_id, run_id, session_id)")
    conn.execute("CREATE INDEX history_memory ON history (memory_id)")
    conn.execute(
        """
        CREATE TABLE activity_log (
            id text PRIMARY KEY,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            seq bigint NOT NULL,
            ts bigint NOT NULL,
            entry_type text NOT NULL,
            content text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{}',
            compaction_id text,
            UNIQUE (user_id, agent_id, run_id, session_id, seq)
        )"""
    )
    conn.execute(
        """
        CREATE TABLE log_compactions (
            id text PRIMARY KEY,
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            ts bigint NOT NULL,
            entries bigint NOT NULL,
            first_seq bigint NOT NULL,
            last_seq bigint NOT NULL,
            summary_id text NOT NULL,
            summary text NOT NULL,
            summarizer text NOT NULL DEFAULT '',
            bytes_before bigint NOT NULL DEFAULT 0,
            bytes_after bigint NOT NULL DEFAULT 0
        )"""
    )
    conn.execute(
        "CREATE INDEX log_compactions_key ON log_compactions "
        "(user_id, agent_id, run_id, session_id)"
    )
    conn.execute(
        """
        CREATE TABLE journal_state (
            user_id text NOT NULL DEFAULT '',
            agent_id text NOT NULL DEFAULT '',
            run_id text NOT NULL DEFAULT '',
            session_id text NOT NULL DEFAULT '',
            key text NOT NULL,
            value text NOT NULL,
            updated_at bigint NOT NULL,
            PRIMARY KEY (user_id, agent_id, run_id, session_id, key)
        )"""
    )
    conn.execute("CREATE TABLE store_meta (key text PRIMARY KEY, value text NOT NULL)")


def _add_seq(conn: Any, dim: int) -> None:
    # Existing rows are numbered in their physical order, close to the order
    # they were added in.
    conn.execute("ALTER TABLE memories ADD COLUMN seq bigserial")


#: ``MIGRATIONS[v]`` moves a database from version ``v`` to ``v + 1`` (0: a new one).
MIGRATIONS: Final[dict[int, Callable[[Any, int], None]]] = {0: _create_v1, 1: _add_seq}


def ensure_schema(conn: Any, dim: int, where: str) -> tuple[int, int]:
    """Create or upgrade the schema on ``conn`` (an autocommit psycopg connection).

    Args:
        conn: The connection.
        dim: The embedding dimension of a new database.
        where: The database, for messages (no password).

    Returns:
        ``(version_found, version_now)``; ``version_found`` is 0 for a new database.

    Raises:
        SchemaVersionError: The database is newer than :data:`PG_SCHEMA_VERSION`.
        StoreError: A migration failed (nothing was changed).
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_MIGRATE_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        found = int(row[0]) if row and row[0] is not None else 0
        if found > PG_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{where} has store schema version {found}; this actormem understands up to "
                f"{PG_SCHEMA_VERSION} -- upgrade actormem to open it"
            )
        for version in range(found, PG_SCHEMA_VERSION):
            try:
                MIGRATIONS[version](conn, dim)
            except Exception as exc:
                raise StoreError(
                    f"migrating {where} from store schema version {version} to {version + 1} "
                    f"failed (nothing was changed): {exc}"
                ) from exc
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version + 1,))
    if found < PG_SCHEMA_VERSION:
        log.info("store.schema_migrated", where=where, old=found, new=PG_SCHEMA_VERSION)
    return found, PG_SCHEMA_VERSION


def read_meta(conn: Any) -> dict[str, str]:
    """All rows of ``store_meta`` as a dict."""
    rows = conn.execute("SELECT key, value FROM store_meta").fetchall()
    return {str(k): str(v) for k, v in rows}


def write_meta(conn: Any, values: dict[str, str]) -> None:
    """Upsert ``values`` into ``store_meta`` (the caller manages the transaction)."""
    for key, value in values.items():
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
