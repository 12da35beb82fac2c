"""A write as data: the payload of the acknowledgement log's format-4 records.

Why not SQL text (formats 1-3): a single ``add``'s record was its statements
with every value written as a literal -- the 256 floats of its vector as
decimal text, ~3 KB -- built on the caller's path before the record could be
synced (~55 us of an add's ~700 us of Python, measured with ``timeit``, and
DuckDB parsed the vector text again later).  A format-4 record is the write's
values packed by msgspec (msgpack; a vector as its float32 bytes, ~1.3 KB
for one memory): a few microseconds.  The SQL is written from these values
off the caller's path, by the applier (:mod:`actormem.store._duckdb_logged`)
and at replay (:mod:`actormem.store._acklog`), with the same literal writers
as the direct path (:mod:`actormem.store._duckdb_rows`), so a record's SQL is
what the direct path would have run.

The structs are positional (``array_like``): a field added later goes last,
with a default, so records written now stay readable.  :func:`encode_write`
decodes what it encoded before the record is appended, so a record that
could not be read back at replay is never acknowledged (the write takes the
direct path instead).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from actormem.store._records import Batch, Change, json_text
from actormem.store._types import MemoryRecord, Namespace

__all__ = [
    "WireChange",
    "WireError",
    "WireHistory",
    "WireMemory",
    "WireWrite",
    "decode_write",
    "encode_write",
    "literal_safe",
    "wire_write",
]

F32 = npt.NDArray[np.float32]
History = tuple[str, Namespace, str, str | None, str | None, str]


class WireError(ValueError):
    """A record that does not encode, or does not decode to what was encoded."""


class WireMemory(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One row of ``memories``; ``vector``: float32 bytes (empty: unchanged, in a change)."""

    id: str
    user_id: str
    agent_id: str
    run_id: str
    session_id: str
    kind: str
    content: str
    content_hash: str
    vector: bytes
    importance: float
    tags: tuple[str, ...]
    source_ids: tuple[str, ...]
    created_at: float
    updated_at: float
    last_accessed: float
    access_count: int
    superseded_by: str | None
    deleted_at: float | None
    #: JSON text, as stored.
    metadata: str


class WireChange(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """An update of a stored row: its new values and the access count it absorbs."""

    memory: WireMemory
    access_delta: int


class WireHistory(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One row of ``history`` (its id and time are given when it is written)."""

    memory_id: str
    user_id: str
    agent_id: str
    run_id: str
    session_id: str
    op: str
    old_content: str | None
    new_content: str | None
    reason: str


class WireWrite(msgspec.Struct, array_like=True, gc=False):
    """What one record writes, in the order it is written.

    ``now``: the write's time (its history rows' ``ts``).  ``log_rows`` and
    ``state_rows`` are the journal's rows as literal value tuples
    (``state_rows`` with their keys, see
    :meth:`actormem.store._duckdb_logged.Logged`), ``statements`` literal SQL.
    """

    now: float
    inserts: list[WireMemory] = msgspec.field(default_factory=list)
    changes: list[WireChange] = msgspec.field(default_factory=list)
    history: list[WireHistory] = msgspec.field(default_factory=list)
    log_rows: list[str] = msgspec.field(default_factory=list)
    state_rows: list[tuple[str, str]] = msgspec.field(default_factory=list)
    statements: list[str] = msgspec.field(default_factory=list)


_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder(WireWrite)


def _text(value: str) -> str:
    """``value`` as an exact ``str``.

    A ``str`` subclass (a ``StrEnum`` kind, namespace id or reason) encodes
    as its value and passes the read-back check, but ``_duckdb_sql.lit``
    writes only exact ``str``: the live applier then failed on a write the
    caller had been told was committed (and a clean close cut the log under
    it).  The record holds what the replay will read: plain text.
    """
    return value if value.__class__ is str else str.__str__(value)


def wire_memory(rec: MemoryRecord, vector: F32 | None) -> WireMemory:
    """``rec`` (and its vector, if written) as a row's values."""
    key = rec.namespace.key()
    return WireMemory(
        _text(rec.id),
        _text(key[0]),
        _text(key[1]),
        _text(key[2]),
        _text(key[3]),
        _text(rec.kind),
        _text(rec.content),
        _text(rec.content_hash),
        b"" if vector is None else np.asarray(vector, dtype=np.float32).tobytes(),
        float(rec.importance),
        tuple(_text(t) for t in rec.tags),
        tuple(_text(t) for t in rec.source_ids),
        rec.created_at,
        rec.updated_at,
        rec.last_accessed,
        int(rec.access_count),
        None if rec.superseded_by is None else _text(rec.superseded_by),
        rec.deleted_at,
        json_text(rec.metadata),
    )


def wire_change(change: Change) -> WireChange:
    return WireChange(wire_memory(change.record, change.content_vector), int(change.access_delta))


def wire_history(rows: Iterable[History]) -> list[WireHistory]:
    out = []
    for mid, ns, op, old, new, reason in rows:
        user, agent, run, session = (_text(k) for k in ns.key())
        out.append(
            WireHistory(
                _text(mid),
                user,
                agent,
                run,
                session,
                _text(op),
                None if old is None else _text(old),
                None if new is None else _text(new),
                _text(reason),
            )
        )
    return out


def wire_write(batch: Batch, now: float) -> WireWrite:
    """The values ``batch`` writes at ``now``."""
    return WireWrite(
        now,
        [wire_memory(r, v) for r, v in batch.inserts],
        [wire_change(c) for c in batch.changes.values()],
        wire_history(batch.history),
    )


def _finite(*values: float | None) -> bool:
    for v in values:  # a loop, not all() over a generator: called for every record
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)):
            return False
    return True


def _finite_vector(data: bytes) -> bool:
    """Whether the float32 values in ``data`` are all finite.

    One dot product: a NaN or an infinity makes the sum of squares NaN or
    infinite; only then (or when finite values square past float32) is
    every value looked at.
    """
    v = np.frombuffer(data, dtype=np.float32)
    return math.isfinite(float(np.dot(v, v))) or bool(np.isfinite(v).all())


def literal_safe(write: WireWrite, dim: int) -> bool:
    """Whether every value of ``write`` has a SQL literal (see ``_duckdb_sql.lit``).

    What has none -- a NUL character in a text written as a literal, a
    non-finite number, a vector of another size -- takes the direct path
    (bound through Arrow), as before the log held values.
    """
    texts: list[str] = []
    size = 4 * dim
    memories = [*write.inserts, *(c.memory for c in write.changes)]
    for m in memories:
        texts += (m.id, m.user_id, m.agent_id, m.run_id, m.session_id, m.kind, m.content)
        texts += (m.content_hash, m.superseded_by or "", m.metadata)
        if m.vector and (len(m.vector) != size or not _finite_vector(m.vector)):
            return False
        if not _finite(m.importance, m.created_at, m.updated_at, m.last_accessed, m.deleted_at):
            return False
    for m in write.inserts:
        if len(m.vector) != size:
            return False
    for h in write.history:
        texts += (h.memory_id, h.user_id, h.agent_id, h.run_id, h.session_id, h.op, h.reason)
        texts += (h.old_content or "", h.new_content or "")
    exact = all(t.__class__ is str for t in texts) and all(
        t.__class__ is str for m in memories for t in (*m.tags, *m.source_ids)
    )
    return exact and _finite(write.now) and "\x00" not in "".join(texts)


def _vector(m: WireMemory) -> F32:
    return np.frombuffer(m.vector, dtype=np.float32)


def encode_write(write: WireWrite) -> bytes:
    """The record's payload; checked to decode to ``write`` again.

    Raises:
        UnicodeEncodeError: A text is not valid Unicode (a lone surrogate).
        WireError: Anything else that would not read back.
    """
    try:
        data = _ENCODER.encode(write)
    except UnicodeEncodeError:
        raise
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise WireError(f"the write does not encode: {exc}") from exc
    try:
        same = _DECODER.decode(data) == write
    except msgspec.DecodeError as exc:
        raise WireError(f"the write does not read back: {exc}") from exc
    if not same:
        raise WireError("the write reads back as different values")
    return data


def decode_write(data: bytes) -> WireWrite:
    """A format-4 record's payload.

    Raises:
        WireError: It is not one.
    """
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise WireError(f"not a record of this format: {exc}") from exc


def vectors_of(memories: Sequence[WireMemory]) -> list[F32]:
    """The vectors of ``memories`` (float32 views of their bytes)."""
    return [_vector(m) for m in memories]
