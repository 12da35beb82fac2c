"""How PostgreSQL stores a batch: binary COPY of inserts and history, updates, locks.

Used inside the write transaction of :class:`~actormem.store._postgres.PostgresStore`
(kept apart from its connection handling).  New memories and history rows go
in with binary ``COPY`` (the memories' rows encoded here in one pass, see
:func:`encode_inserts`); changed rows
with one ``UPDATE ... FROM unnest(...)`` per batch, so a merge or a
maintenance run of thousands of rows is one statement.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from actormem.store._pg_group_stats import append_sql, groups_sql
from actormem.store._pg_open_groups import claim_open_groups, small_namespaces
from actormem.store._pg_queries import PG_LIVE, PG_NS
from actormem.store._pg_search import term_counts
from actormem.store._records import Change, jsonb_text, us
from actormem.store._types import MemoryRecord, Namespace

__all__ = [
    "InsertStats",
    "add_insert_stats",
    "array_text",
    "copy_history",
    "copy_inserts",
    "encode_inserts",
    "encode_rows",
    "key_text",
    "live_counts",
    "lock_keys",
    "update_changes",
]

F32 = npt.NDArray[np.float32]

_INSERT_COLUMNS: Final = (
    "id, user_id, agent_id, run_id, session_id, kind, content, content_hash, embedding, "
    "importance, tags, source_ids, created_at, updated_at, last_accessed, access_count, "
    "superseded_by, deleted_at, metadata, terms, tfs, doclen, pgrp"
)


def key_text(key: Sequence[str]) -> str:
    """The text of a concrete namespace key whose hash is its advisory lock."""
    return "actormem.ns\x1f" + "\x1f".join(key)


def lock_keys(conn: Any, keys: Sequence[Sequence[str]]) -> None:
    """Take the transaction-scoped advisory locks of ``keys`` (in the order given)."""
    for key in keys:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key_text(key),))


def copy_inserts(
    conn: Any,
    inserts: Sequence[tuple[MemoryRecord, F32]],
    history: Sequence[HistoryRow] = (),
    now: float = 0.0,
) -> int:
    """Insert new memory rows (with their BM25 term counts) by binary COPY, add them to
    the keyword statistics and postings, and write the history rows that record them.

    The batch takes a posting group number (``posting_group_seq``) and declares
    it in the transaction-local setting that the schema's insert check asks for
    (:mod:`actormem.store._pg_groups`: rows enter ``memories`` only here); the
    rows of a namespace that gets only a few of them join that namespace's open
    group instead (schema v11, :mod:`actormem.store._pg_open_groups`: a namespace
    filled one add at a time would otherwise hold a group per add).  The
    rows are encoded here into PostgreSQL's binary COPY format
    (:func:`encode_rows`; psycopg's per-row ``write_row`` encoded arrays element
    by element: 4.5 s of client CPU for 100k rows, 3.7 s then).  Then one
    statement (:func:`add_insert_stats`) adds the live rows' statistics to
    ``scope_stats`` (counted while encoding), their postings to
    ``posting_groups`` with each group's document frequency and bounds (schema
    v9: ``term_stats`` is a view of the groups; built by the server from the
    rows just copied) and
    the leading ``ADD`` rows of ``history`` (see :func:`added_history`), in the
    same transaction: see :func:`add_insert_stats` for why not by triggers.

    Returns:
        How many rows of ``history``, from the first, were written (the caller
        writes the rest after them, with :func:`copy_history`).
    """
    pgrp, opened = claim_open_groups(conn, small_namespaces(live_counts(inserts)))
    stats = InsertStats()
    sql = f"COPY memories ({_INSERT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
    with conn.cursor() as cur, cur.copy(sql) as copy:
        copy.write(_SIGNATURE)
        # sent as encoded, a chunk at a time: the server stores one chunk while the
        # client encodes the next (one buffer at the end left it idle meanwhile)
        for start in range(0, len(inserts), _CHUNK):
            copy.write(encode_rows(inserts[start : start + _CHUNK], pgrp, stats, opened))
    added = added_history(inserts, history)
    add_insert_stats(conn, stats, [rec.id for rec, _ in inserts[:added]], now, append=bool(opened))
    return added


def live_counts(inserts: Sequence[tuple[MemoryRecord, F32]]) -> dict[tuple[str, ...], int]:
    """How many live rows of ``inserts`` each concrete namespace gets."""
    counts: dict[tuple[str, ...], int] = {}
    for rec, _ in inserts:
        if rec.superseded_by is None and rec.deleted_at is None:
            key = rec.namespace.key()
            counts[key] = counts.get(key, 0) + 1
    return counts


HistoryRow = tuple[str, Namespace, str, str | None, str | None, str]


def added_history(
    inserts: Sequence[tuple[MemoryRecord, F32]], history: Sequence[HistoryRow]
) -> int:
    """How many rows at the start of ``history`` record exactly the addition of the
    inserts in order: ``ADD`` of the memory's id, in its namespace, no old content,
    its content as the new one, no reason (what an ``add``/``add_many`` logs first).

    Those are written by the server from the copied rows instead of being sent
    again (:func:`add_insert_stats`); anything else in ``history`` is copied by
    :func:`copy_history` after them, so the history keeps the batch's order.
    """
    n = 0
    for (rec, _), row in zip(inserts, history):  # noqa: B905 - the shorter one ends it
        if row != (rec.id, rec.namespace, "ADD", None, rec.content, ""):
            break
        n += 1
    return n


class InsertStats:
    """What a batch's new live rows add to the keyword tables: the counts of
    ``scope_stats``, and the ids whose postings and term statistics are due."""

    __slots__ = ("ids", "scopes")

    def __init__(self) -> None:
        self.scopes: dict[tuple[str, ...], list[int]] = {}  # key -> [docs, doclen, episodes]
        self.ids: list[str] = []

    def add(self, key: tuple[str, ...], memory_id: str, kind: str, doclen: int) -> None:
        scope = self.scopes.setdefault(key, [0, 0, 0])
        scope[0] += 1
        scope[1] += doclen
        scope[2] += kind == "episode"
        self.ids.append(memory_id)


def add_insert_stats(
    conn: Any,
    stats: InsertStats,
    added: Sequence[str] = (),
    now: float = 0.0,
    *,
    append: bool = False,
) -> None:
    """Add a batch's new live rows to the keyword tables, and write the ``ADD`` history
    rows of the memories ``added`` (ids in the batch's order) at ``now``: one statement,
    in the caller's transaction.

    Updates and deletes are handled by statement triggers (schema v3 and v4);
    new rows are added here since schema v5 (statistics), v7 (postings and
    their bounds), v8 (posting groups, bounds in ``term_stats``, and other
    inserts refused: :mod:`actormem.store._pg_groups`) and v9 (document
    frequencies and bounds in the groups, no ``term_stats`` rows:
    :mod:`actormem.store._pg_group_stats`).  A trigger on inserts needs the
    inserted rows as a transition table, which makes PostgreSQL store each
    copied row on its own instead of in multi-row batches and queue a copy of
    it for the trigger: measured at 50k rows, a 1,000-row insert took 28 ms
    without the statistics trigger and 170-280 ms with it.  Rows reach
    ``memories`` only through :func:`copy_inserts`, so the tables still match
    the committed rows (``test_keyword_statistics_kept_by_triggers_match_the_live_rows``
    and the postings tests recount them after every kind of write).  Keys are
    written in sorted order, so two batches never wait for each other in
    opposite orders.

    The statistics, the postings and the history rows go in one statement (its
    parts are common table expressions) instead of three round trips and a
    second ``COPY`` that sent every memory's content again; the copied rows
    are read back once (one primary-key lookup per row) for both, and the
    history rows are written in the order of ``added``, so their ``seq``
    follows the batch as before.

    ``append``: some rows joined an existing (open) posting group, so their
    postings are appended to its rows (an upsert) rather than inserted as new
    group rows (a plain insert, which costs less: no speculative insertion).
    """
    # arrays go as literals built here: psycopg's list adapter quoted them element
    # by element (as much client time as encoding the rows)
    parts: list[tuple[str, str]] = []  # (name, statement) of each part but the postings'
    params: list[Any] = []
    if stats.scopes:
        keys = sorted(stats.scopes)
        cols = list(zip(*keys, strict=True))
        parts.append(
            (
                "s",
                f"""INSERT INTO scope_stats AS s ({PG_NS}, docs, doclen, episodes)
            SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[],
                %s::int8[], %s::int8[], %s::int8[])
            ON CONFLICT ({PG_NS}) DO UPDATE SET docs = s.docs + excluded.docs,
                doclen = s.doclen + excluded.doclen, episodes = s.episodes + excluded.episodes""",
            )
        )
        params += [
            *[array_text(c) for c in cols],
            _int_array_text(stats.scopes[k][0] for k in keys),
            _int_array_text(stats.scopes[k][1] for k in keys),
            _int_array_text(stats.scopes[k][2] for k in keys),
        ]
    ids = [*added, *sorted(set(stats.ids).difference(added))]
    if ids:
        # the batch's rows, read back once by primary key for the history and the postings
        parts.insert(
            0,
            (
                "r",
                f"SELECT {PG_NS}, id, pgrp, doclen, terms, tfs, content, {PG_LIVE} AS live "
                "FROM memories WHERE id = ANY(%s::text[])",
            ),
        )
        params.insert(0, array_text(ids))
    if added:
        parts.append(
            (
                "h",
                f"INSERT INTO history (id, memory_id, {PG_NS}, op, old_content, new_content, ts, "
                f"reason) SELECT %s::text || (u.o - 1), r.id, {PG_NS}, 'ADD', NULL, r.content, "
                "%s::int8, '' FROM unnest(%s::text[]) WITH ORDINALITY AS u(id, o) "
                "JOIN r USING (id) ORDER BY u.o",
            )
        )
        params += [uuid.uuid4().hex + "-", us(now), array_text(added)]
    if stats.ids:
        # the postings, one group row per term and namespace with its document
        # frequency and bounds (schema v9), built by the server from the rows just copied
        sql = "WITH " + ", ".join(f"{n} AS ({q})" for n, q in parts) + " "
        posted = f"SELECT {PG_NS}, id, pgrp, doclen, terms, tfs FROM r WHERE live"
        sql += append_sql(posted) if append else groups_sql(posted)
    elif parts:
        # no live row: the last part is the statement, the others its expressions
        *first, (_, sql) = parts
        if first:
            sql = "WITH " + ", ".join(f"{n} AS ({q})" for n, q in first) + " " + sql
    else:
        return
    conn.execute(sql, params)


# PostgreSQL's binary COPY format: a signature, then per row the number of
# fields and each field as its length (-1: NULL) and its binary value (what
# the type's ``recv`` function reads), then -1 as the trailer (psycopg adds it).
_SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
_NULL: Final = b"\xff\xff\xff\xff"
_TEXT_OID: Final = 25
_INT4_OID: Final = 23
_I2 = struct.Struct("!h").pack
_I4 = struct.Struct("!i").pack
_I8 = struct.Struct("!q").pack
_FIELDS: Final = _I2(23)
_CHUNK: Final = 100  # rows encoded and sent at a time
_EMPTY_TEXT_ARRAY: Final = _I4(12) + _I4(0) + _I4(0) + _I4(_TEXT_OID)


def _text(value: str) -> bytes:
    data = value.encode("utf-8")
    return _I4(len(data)) + data


def _int8(value: int) -> bytes:
    return b"\x00\x00\x00\x08" + _I8(value)


def _text_array(values: Sequence[str]) -> bytes:
    """A one-dimensional ``text[]`` (``int4[]`` with ``oid``) field, no NULL elements."""
    if not values:
        return _EMPTY_TEXT_ARRAY
    body = [_I4(1), _I4(0), _I4(_TEXT_OID), _I4(len(values)), _I4(1)]
    for v in values:
        data = v.encode("utf-8")
        body.append(_I4(len(data)))
        body.append(data)
    out = b"".join(body)
    return _I4(len(out)) + out


def encode_inserts(
    inserts: Sequence[tuple[MemoryRecord, F32]], pgrp: int
) -> tuple[bytes, InsertStats]:
    """The binary COPY stream (signature and rows, no trailer) of new memory rows of the
    posting group ``pgrp``, and what its live rows add to the keyword statistics."""
    stats = InsertStats()
    return _SIGNATURE + encode_rows(inserts, pgrp, stats), stats


def encode_rows(
    inserts: Sequence[tuple[MemoryRecord, F32]],
    pgrp: int,
    stats: InsertStats,
    opened: Mapping[tuple[str, ...], int] | None = None,
) -> bytes:
    """The binary COPY rows of ``inserts`` (posting group ``pgrp``, or for the
    namespaces of ``opened`` their open group); their live rows are added to ``stats``.

    Written for the client's CPU (it was a third of the process's time in an
    ingest): the parts every row shares (namespace, kind, empty arrays and
    metadata, the posting group) are encoded once per call, each term once per
    process (:data:`_TERM_FIELDS`), the vectors by one numpy conversion, and each
    row's fixed-width fields by one ``struct`` call per run of adjacent fields.
    """
    if not inserts:
        return b""
    # pgvector's binary value: dimensions (int2), an unused int2, big-endian float4s
    mat = np.ascontiguousarray(np.stack([v for _, v in inserts]), dtype=">f4")
    dim = int(mat.shape[1])
    vec_head = _I4(4 + 4 * dim) + _I2(dim) + _I2(0)
    tail = b"\x00\x00\x00\x08" + _I8(pgrp)
    tails = {k: b"\x00\x00\x00\x08" + _I8(g) for k, g in (opened or {}).items()}
    shared: dict[Any, bytes] = {}  # namespace keys and kinds of this call, encoded
    out: list[bytes] = []
    push = out.extend
    for (rec, _), vec in zip(inserts, mat, strict=True):
        terms, tfs, doclen = term_counts(rec.content)
        key = rec.namespace.key()
        ns = shared.get(key)
        if ns is None:
            ns = shared[key] = b"".join(map(_text, key))
        kind = shared.get(rec.kind)
        if kind is None:
            kind = shared[rec.kind] = _text(rec.kind)
        if rec.superseded_by is None and rec.deleted_at is None:
            stats.add(key, rec.id, rec.kind, doclen)
        if rec.metadata:
            meta = jsonb_text(rec.metadata).encode(
                "utf-8"
            )  # a clear error for what JSON cannot hold
            meta_field = _I4(len(meta) + 1) + b"\x01" + meta  # jsonb: a version byte, then the text
        else:
            meta_field = _EMPTY_JSONB
        mid = rec.id.encode("utf-8")
        content = rec.content.encode("utf-8")
        chash = rec.content_hash.encode("utf-8")
        n = len(terms)
        if n:
            term_body = b"".join(map(_TERM_FIELDS.__getitem__, terms))
            terms_field = _ARRAY_HEAD.pack(20 + len(term_body), 1, 0, _TEXT_OID, n, 1) + term_body
            tfs_field = struct.pack(
                f"!iiiiii{2 * n}i",
                20 + 8 * n,
                1,
                0,
                _INT4_OID,
                n,
                1,
                *[x for tf in tfs for x in (4, tf)],
            )
        else:
            terms_field, tfs_field = _EMPTY_TEXT_ARRAY, _EMPTY_INT4_ARRAY
        push(
            (
                _FIELDS,
                _I4(len(mid)),
                mid,
                ns,
                kind,
                _I4(len(content)),
                content,
                _I4(len(chash)),
                chash,
                vec_head,
                vec.tobytes(),
                _IMPORTANCE(8, float(rec.importance)),
                _text_array(rec.tags),
                _text_array(rec.source_ids),
                _TIMES(
                    8,
                    us(rec.created_at),
                    8,
                    us(rec.updated_at),
                    8,
                    us(rec.last_accessed),
                    8,
                    int(rec.access_count),
                ),
                _NULL if rec.superseded_by is None else _text(rec.superseded_by),
                _NULL if rec.deleted_at is None else _int8(us(rec.deleted_at)),
                meta_field,
                terms_field,
                tfs_field,
                _DOCLEN(4, doclen),
                tails.get(key, tail) if tails else tail,
            )
        )
    return b"".join(out)


class _TermFields(dict[str, bytes]):
    """Term -> its element in a binary ``text[]`` (length, UTF-8 bytes), kept for the
    process up to :data:`_TERM_CACHE` terms (a vocabulary repeats; past the cap a new
    term is encoded each time)."""

    def __missing__(self, term: str) -> bytes:
        data = term.encode("utf-8")
        field = _I4(len(data)) + data
        if len(self) < _TERM_CACHE:
            self[term] = field
        return field


_TERM_CACHE: Final = 200_000
_TERM_FIELDS: Final = _TermFields()
_ARRAY_HEAD: Final = struct.Struct("!iiiiii")  # field length, ndim, flags, oid, n, lower bound
_IMPORTANCE: Final = struct.Struct("!id").pack
_TIMES: Final = struct.Struct("!iqiqiqiq").pack
_DOCLEN: Final = struct.Struct("!ii").pack
_EMPTY_JSONB: Final = _I4(3) + b"\x01{}"
_EMPTY_INT4_ARRAY: Final = _I4(12) + _I4(0) + _I4(0) + _I4(_INT4_OID)


def update_changes(conn: Any, changes: Sequence[Change]) -> None:
    """Apply the changed rows of a batch (absolute fields, access count as a delta)."""
    recs = [c.record for c in changes]
    counted = [term_counts(r.content) for r in recs]
    conn.execute(
        "UPDATE memories m SET kind = u.kind, content = u.content, "
        "content_hash = u.content_hash, importance = u.importance, "
        "tags = u.tags::text[], source_ids = u.source_ids::text[], updated_at = u.updated_at, "
        "access_count = least(m.access_count + u.access_delta, 9007199254740991), "
        "superseded_by = u.superseded_by, "
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
            [array_text(r.tags) for r in recs],
            [array_text(r.source_ids) for r in recs],
            [us(r.updated_at) for r in recs],
            [int(c.access_delta) for c in changes],
            [r.superseded_by for r in recs],
            [None if r.deleted_at is None else us(r.deleted_at) for r in recs],
            [jsonb_text(r.metadata) for r in recs],
            [array_text(t) for t, _, _ in counted],
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


def _int_array_text(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers."""
    return "{" + ",".join(map(str, values)) + "}"


def array_text(values: Sequence[str]) -> str:
    """A PostgreSQL array literal of strings (every element quoted and escaped)."""
    parts = []
    for v in values:
        parts.append('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(parts) + "}"


def copy_history(conn: Any, rows: Sequence[HistoryRow], now: float) -> None:
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
