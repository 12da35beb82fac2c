"""The insert paths of earlier PostgreSQL schema versions, for migration tests.

A test that writes a store "as an older actormem did" opens it with
``PG_SCHEMA_VERSION`` set back and replaces the store's insert path
(``actormem.store._postgres.copy_inserts``) by one of these: the current one
writes columns and tables that only exist from version 8 on
(``memories.pgrp``, ``posting_groups``).  They insert the same column values
as the current writer (through ``INSERT`` instead of binary ``COPY``) and
then do what that version's writer did beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from actormem.store import _pg_groups as groups_v8
from actormem.store import _pg_schema as schema
from actormem.store._pg_search import term_counts
from actormem.store._records import jsonb_text, us

__all__ = ["as_old_writer", "insert_rows_v3", "insert_rows_v7", "insert_rows_v8"]

_NS = "user_id, agent_id, run_id, session_id"
_COLUMNS = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, embedding, "
    "importance, tags, source_ids, created_at, updated_at, last_accessed, access_count, "
    "superseded_by, deleted_at, metadata, terms, tfs, doclen"
)
_VALUES = (
    "%s, %s, %s, %s, %s, %s, %s, %s, %s::vector, %s, %s::text[], %s::text[], %s, %s, %s, "
    "%s, %s, %s, %s::jsonb, %s::text[], %s::int4[], %s"
)


def _insert(conn: Any, inserts: Sequence[tuple[Any, Any]]) -> list[str]:
    """Insert the rows; the ids of the live ones."""
    live = []
    with conn.cursor() as cur:
        for rec, vec in inserts:
            terms, tfs, doclen = term_counts(rec.content)
            key = rec.namespace.key()
            vector = "[" + ",".join(repr(float(x)) for x in np.asarray(vec).ravel()) + "]"
            cur.execute(
                f"INSERT INTO memories ({_COLUMNS}) VALUES ({_VALUES})",
                (
                    rec.id,
                    *key,
                    rec.kind,
                    rec.content,
                    rec.content_hash,
                    vector,
                    float(rec.importance),
                    list(rec.tags),
                    list(rec.source_ids),
                    us(rec.created_at),
                    us(rec.updated_at),
                    us(rec.last_accessed),
                    int(rec.access_count),
                    rec.superseded_by,
                    None if rec.deleted_at is None else us(rec.deleted_at),
                    jsonb_text(rec.metadata),
                    terms,
                    tfs,
                    doclen,
                ),
            )
            if rec.superseded_by is None and rec.deleted_at is None:
                live.append(rec.id)
    return live


def insert_rows_v3(conn: Any, inserts: Sequence[tuple[Any, Any]]) -> None:
    """Versions 3-4: the rows only (their statistics and postings were the triggers')."""
    _insert(conn, inserts)


def insert_rows_v7(conn: Any, inserts: Sequence[tuple[Any, Any]]) -> None:
    """Versions 5-7: the rows, then their statistics, postings and bounds (table
    ``term_bounds``) written by the inserting transaction."""
    ids = _insert(conn, inserts)
    if not ids:
        return
    rows = f"SELECT {_NS}, id, doclen, terms, tfs FROM memories WHERE id = ANY(%s)"
    d = f"WITH d AS (SELECT {_NS}, 1 AS sign, doclen, kind, terms FROM memories WHERE id = ANY(%s))"
    conn.execute(d + schema._DELTA_SCOPES, (ids,))
    conn.execute(d + schema._DELTA_TERMS, (ids,))
    conn.execute(schema.post_sql(rows), (ids,))
    conn.execute(schema.bound_sql(rows), (ids,))


def insert_rows_v8(conn: Any, inserts: Sequence[tuple[Any, Any]]) -> None:
    """Version 8: the batch's posting group declared, the rows, then their statistics
    (``scope_stats``, the table ``term_stats`` with its bounds) and posting groups
    written by the inserting transaction."""
    conn.execute(
        "SELECT set_config(%s, nextval('posting_group_seq')::text, true)",
        (groups_v8.GROUP_SETTING,),
    )
    ids = _insert(conn, inserts)
    if not ids:
        return
    rows = f"SELECT {_NS}, id, pgrp, doclen, terms, tfs FROM memories WHERE id = ANY(%s)"
    d = f"WITH d AS (SELECT {_NS}, 1 AS sign, doclen, kind, terms FROM memories WHERE id = ANY(%s))"
    conn.execute(d + schema._DELTA_SCOPES, (ids,))
    conn.execute(d + schema._DELTA_TERMS, (ids,))
    conn.execute(groups_v8.groups_sql(rows), (ids,))
    conn.execute(groups_v8.raise_bounds_sql(rows), (ids,))


def as_old_writer(store: Any, insert: Any) -> Any:
    """Make ``store`` (opened with ``PG_SCHEMA_VERSION`` set back) insert with ``insert``."""
    from actormem.store import _postgres

    def commit(conn: Any, batch: Any, now: float) -> None:
        if batch.inserts:
            insert(conn, batch.inserts)
        if batch.changes:
            _postgres.update_changes(conn, list(batch.changes.values()))
        if batch.history:
            _postgres.copy_history(conn, batch.history, now)

    store._commit = commit
    return store
