"""How PostgreSQL stores a batch: binary COPY of inserts and history, updates, locks.

Used inside the write transaction of :class:`~actormem.store._postgres.PostgresStore`
(kept apart from its connection handling).  New memories and history rows go
in with binary ``COPY`` (pgvector's adapter writes the vectors); changed rows
with one ``UPDATE ... FROM unnest(...)`` per batch, so a merge or a
maintenance run of thousands of rows is one statement.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from actormem.store._pg_search import term_counts
from actormem.store._records import Change, json_text, jsonb_text, us
from actormem.store._types import MemoryRecord, Namespace

__all__ = ["copy_history", "copy_inserts", "key_text", "lock_keys", "update_changes"]

F32 = npt.NDArray[np.float32]

_INSERT_COLUMNS: Final = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, embedding, "
    "importance, tags, source_ids, created_at, updated_at, last_accessed, access_count, "
    "superseded_by, deleted_at, metadata, terms, tfs, doclen"
)
_INSERT_TYPES: Final = [
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "vector",
    "float8",
    "text[]",
    "text[]",
    "int8",
    "int8",
    "int8",
    "int8",
    "text",
    "int8",
    "jsonb",
    "text[]",
    "int4[]",
    "int4",
]


def key_text(key: Sequence[str]) -> str:
    """The text of a concrete namespace key whose hash is its advisory lock."""
    return "actormem.ns\x1f" + "\x1f".join(key)


def lock_keys(conn: Any, keys: Sequence[Sequence[str]]) -> None:
    """Take the transaction-scoped advisory locks of ``keys`` (in the order given)."""
    for key in keys:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key_text(key),))


def _jsonb(value: dict[str, Any]) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value, dumps=jsonb_text)


def copy_inserts(conn: Any, inserts: Sequence[tuple[MemoryRecord, F32]]) -> None:
    """Insert new memory rows (with their BM25 term counts) by binary COPY."""
    sql = f"COPY memories ({_INSERT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
    with conn.cursor() as cur, cur.copy(sql) as copy:
        copy.set_types(_INSERT_TYPES)
        for rec, vec in inserts:
            json_text(rec.metadata)  # a clear error for what JSON cannot hold
            terms, tfs, doclen = term_counts(rec.content)
            key = rec.namespace.key()
            copy.write_row(
                (
                    rec.id,
                    key[0],
                    key[1],
                    key[2],
                    key[3],
                    rec.kind,
                    rec.content,
                    rec.content_hash,
                    np.asarray(vec, dtype=np.float32),
                    float(rec.importance),
                    list(rec.tags),
                    list(rec.source_ids),
                    us(rec.created_at),
                    us(rec.updated_at),
                    us(rec.last_accessed),
                    int(rec.access_count),
                    rec.superseded_by,
                    None if rec.deleted_at is None else us(rec.deleted_at),
                    _jsonb(rec.metadata),
                    terms,
                    tfs,
                    doclen,
                )
            )


def update_changes(conn: Any, changes: Sequence[Change]) -> None:
    """Apply the changed rows of a batch (absolute fields, access count as a delta)."""
    recs = [c.record for c in changes]
    counted = [term_counts(r.content) for r in recs]
    conn.execute(
        "UPDATE memories m SET kind = u.kind, content = u.content, "
        "content_hash = u.content_hash, importance = u.importance, "
        "tags = u.tags::text[], source_ids = u.source_ids::text[], updated_at = u.updated_at, "
        "access_count = m.access_count + u.access_delta, superseded_by = u.superseded_by, "
        "deleted_at = u.deleted_at, metadata = u.metadata::jsonb, "
        "terms = u.terms::text[], tfs = u.tfs::int4[], doclen = u.doclen "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::float8[], %s::text[], "
        "%s::text[], %s::int8[], %s::int8[], %s::text[], %s::int8[], %s::text[], %s::text[], "
        "%s::text[], %s::int4[]) AS u(id, kind, content, content_hash, importance, tags, "
        "source_ids, updated_at, access_delta, superseded_by, deleted_at, metadata, terms, tfs, "
        "doclen) WHERE m.id = u.id",
        (
            [r.id for r in recs],
            [r.kind for r in recs],
            [r.content for r in recs],
            [r.content_hash for r in recs],
            [float(r.importance) for r in recs],
            [_array_text(r.tags) for r in recs],
            [_array_text(r.source_ids) for r in recs],
            [us(r.updated_at) for r in recs],
            [int(c.access_delta) for c in changes],
            [r.superseded_by for r in recs],
            [None if r.deleted_at is None else us(r.deleted_at) for r in recs],
            [jsonb_text(r.metadata) for r in recs],
            [_array_text(t) for t, _, _ in counted],
            ["{" + ",".join(map(str, tf)) + "}" for _, tf, _ in counted],
            [n for _, _, n in counted],
        ),
    )
    with_vec = [c for c in changes if c.content_vector is not None]
    for change in with_vec:
        conn.execute(
            "UPDATE memories SET embedding = %s WHERE id = %s",
            (np.asarray(change.content_vector, dtype=np.float32), change.record.id),
        )


def _array_text(values: Sequence[str]) -> str:
    """A PostgreSQL array literal of strings (every element quoted and escaped)."""
    parts = []
    for v in values:
        parts.append('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(parts) + "}"


def copy_history(
    conn: Any,
    rows: Sequence[tuple[str, Namespace, str, str | None, str | None, str]],
    now: float,
) -> None:
    """Append history rows written at ``now`` by binary COPY."""
    prefix = uuid.uuid4().hex
    ts = us(now)
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY history (id, memory_id, user_id, agent_id, run_id, session_id, op, "
            "old_content, new_content, ts, reason) FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(["text"] * 9 + ["int8", "text"])
        for i, (mid, ns, op, old, new, reason) in enumerate(rows):
            key = ns.key()
            copy.write_row(
                (f"{prefix}-{i}", mid, key[0], key[1], key[2], key[3], op, old, new, ts, reason)
            )
