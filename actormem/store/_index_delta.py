"""The index snapshot's delta: what changed since the snapshot, so close stays cheap.

Writing the whole snapshot (:mod:`actormem.store._index_file`) costs seconds
at a million memories (a gigabyte of vectors, every record), and any change
makes the snapshot stale -- one search's access counts included.  So a store
whose index was loaded from a snapshot writes on close only what changed
since, in ``<database>.index.delta`` (same layout: magic, checksummed header,
checksummed sections; written atomically the same way):

* ``dead``: the snapshot's rows that are no longer live;
* ``dirty_*``: the snapshot's live rows whose record or access figures
  changed (their current records);
* ``new_*``: the live rows added since (records and vectors).

The delta is cumulative -- each close rewrites it from the snapshot, never
appends to an older one -- so there is no chain to get wrong.  It names the
snapshot it applies to (the snapshot's random ``token`` and commit number)
and carries the store's identity at close (:class:`SnapshotIdentity`, with
the commit number): it is used only for that snapshot and that commit
number.  A delta that is stale (the store moved on: a crash before close, or
an older delta put back), torn or garbled, or that names another snapshot
makes the store rebuild its index from DuckDB, with a warning naming the
reason, and both files are removed.

When the changes grow past :data:`DELTA_MAX_SHARE` of the snapshot's rows
(re-adding them on open costs tokenizing them again), after a forget (the
snapshot still holds the forgotten text: it must be rewritten) or when the
index learned a new projection, close writes the whole snapshot instead and
removes the delta.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
import numpy as np

from actormem.store._index_file import (
    FORMAT,
    Mapped,
    SnapshotError,
    SnapshotIdentity,
    _difference,
    _Section,
    map_sections,
    write_sections,
)
from actormem.store._index_rows import _ENCODE, RecordRows

if TYPE_CHECKING:
    from actormem.store._index import MemoryIndex

__all__ = ["DELTA_MAX_SHARE", "apply_delta", "map_delta", "save_delta"]

_DELTA_MAGIC: Final = b"actormem-idelta\x01"

#: Changed and new rows, as a share of the snapshot's, up to which close
#: writes a delta rather than the whole snapshot.
DELTA_MAX_SHARE: Final = 0.05

#: ... and at least this many (small stores).
DELTA_MIN_ROWS: Final = 1_000


class _DeltaHeader(msgspec.Struct, frozen=True):
    format: int
    identity: SnapshotIdentity
    base_token: str
    base_seq: int
    sections: list[_Section]


def save_delta(index: MemoryIndex, path: str, identity: SnapshotIdentity) -> int | None:
    """Write the delta of ``index`` from its snapshot to ``path``.

    Returns:
        The rows written (changed and new), or ``None`` when a delta will not
        do (no snapshot loaded, a forget or a new projection since, or too
        many changes): the caller writes the whole snapshot.
    """
    with index.lock:
        base = index._base_rows
        if base <= 0 or not index._base_token:
            return None
        n = index.rows
        alive = index._alive
        new = np.flatnonzero(alive[base:n]) + base
        dirty = np.array(sorted(r for r in index._dirty if alive[r]), dtype=np.int64)
        if new.size + dirty.size > max(DELTA_MIN_ROWS, int(base * DELTA_MAX_SHARE)):
            return None
        dead = np.flatnonzero(~alive[:base]).astype(np.int64)
        dirty_blobs = [_ENCODE(index._current(int(r))) for r in dirty]
        new_blobs = [_ENCODE(index._current(int(r))) for r in new]
        arrays = {
            "dead": dead,
            "dirty_rows": dirty,
            "dirty_offsets": _offsets(dirty_blobs),
            "new_offsets": _offsets(new_blobs),
            "new_vecs": np.ascontiguousarray(index._vecs[new]),
        }
        buffers = {"dirty_records": b"".join(dirty_blobs), "new_records": b"".join(new_blobs)}
        token, base_seq = index._base_token, index._base_seq

    def encode(sections: list[_Section]) -> bytes:
        return msgspec.msgpack.encode(_DeltaHeader(FORMAT, identity, token, base_seq, sections))

    write_sections(path, _DELTA_MAGIC, encode, arrays, buffers)
    return int(dirty.size + new.size)


def _offsets(blobs: list[bytes]) -> Any:
    out = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in blobs], out=out[1:])
    return out


def map_delta(path: str, token: str, base_seq: int, identity: SnapshotIdentity) -> Mapped:
    """Map the delta at ``path`` and check that it brings that snapshot to ``identity``.

    Raises:
        SnapshotError: Torn, garbled, made for another snapshot, or stale.
        FileNotFoundError: There is no delta.
    """
    try:
        mapped = map_sections(path, _DELTA_MAGIC, _DeltaHeader)
    except SnapshotError as exc:
        raise SnapshotError(f"delta: {exc.reason}") from exc
    header: _DeltaHeader = mapped.header
    if header.base_token != token or header.base_seq != base_seq:
        raise SnapshotError(
            f"delta made for another snapshot (commit_seq={header.base_seq}), "
            f"the snapshot has commit_seq={base_seq}"
        )
    if header.identity != identity:
        raise SnapshotError("delta " + _difference(header.identity, identity))
    return mapped


def apply_delta(index: MemoryIndex, delta: Mapped) -> None:
    """Bring ``index``, just filled from its snapshot, to the delta's state."""
    base = index.rows
    dead = delta.arr("dead")
    dirty = delta.arr("dirty_rows")
    for name, rows in (("dead", dead), ("dirty_rows", dirty)):
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= base):
            raise SnapshotError(f"delta section {name} names rows past the snapshot's {base}")
    dirty_recs = RecordRows(delta.parts["dirty_records"], delta.arr("dirty_offsets"))
    new_offsets = delta.arr("new_offsets")
    new_recs = RecordRows(delta.parts["new_records"], new_offsets)
    count = new_offsets.size - 1
    new_vecs = delta.arr("new_vecs")
    if new_vecs.shape != (count, index.dim) or dirty.size + 1 != delta.arr("dirty_offsets").size:
        raise SnapshotError("delta sections do not match each other")
    with index.lock:
        for row in dead.tolist():
            if not index._alive[row]:
                raise SnapshotError(f"delta kills row {row} twice")
            index._kill_row(row)
        for i, row in enumerate(dirty.tolist()):
            rec = dirty_recs[i]
            old = index._records[row]
            if rec is None or old is None or old.id != rec.id or not index._alive[row]:
                raise SnapshotError(f"delta changes row {row}, which is not that memory's")
            index.replace_record(rec, row=row)
            index._access[row] = rec.access_count
            index._last[row] = rec.last_accessed
        index._dirty = set(dirty.tolist())
        added = [new_recs[i] for i in range(count)]
        index.add([r for r in added if r is not None], np.asarray(new_vecs))
