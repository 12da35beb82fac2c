"""The index snapshot: the in-memory index saved beside the database file.

Rebuilding :class:`~actormem.store._index.MemoryIndex` from DuckDB reads
every live row, builds a record per memory and tokenizes every text again:
about 30 s at a million memories.  The snapshot keeps what that work
produces, so reopening a large store costs reading one file.

File ``<database>.index``::

    magic (16 bytes) | header length (8) | header CRC-32 (4) | header (msgpack)
    | sections, each aligned to 64 bytes

The header names the snapshot's identity (see :class:`SnapshotIdentity`),
the index's small state (interned namespaces and kinds, BM25 terms) and a
table of sections: raw numpy arrays and msgpack buffers, each with its
offset, size and checksum (XXH3-64; CRC-32 in format 2).  Only live rows
are written (a snapshot is a compacted index), so row numbers are dense and
every row's record exists.  The checksums are verified while DuckDB opens
(:class:`SnapshotCheck`).

Trust: a snapshot is used only when its identity equals the store's at open
-- the same database (``store_id``), the same commit number (``commit_seq``,
bumped by every write transaction, see :mod:`actormem.store._commits`), the
same schema version, embedder name and vector size, and the same
approximate-search setting -- and when every section's checksum matches.
Anything else (missing, truncated, garbled, stale, another embedder) raises
:class:`SnapshotError` with the reason, and the store rebuilds from DuckDB.

Written atomically: a temporary file in the same folder, ``fsync``, rename
over the old snapshot, ``fsync`` of the folder.  A crash while writing
leaves the old snapshot (stale by then: its commit number is older) or
none; never a half-written one under the real name.

Loaded with one read-only copy-on-write ``mmap``: the arrays are views of
the mapping (the kernel shares the page cache; a row the index later
changes gets a private copy of its page), records stay msgpack bytes until
read (:class:`~actormem.store._index_rows.RecordRows`), BM25 postings stay
views until a write extends them, and the id and hash maps are the sorted
key arrays themselves (:mod:`actormem.store._index_keys`): nothing of a
million entries is built on open.  The vector matrices have spare rows after
their data (``_SPARE``, a hole in the file), so the writes after an open
fill copy-on-write pages instead of copying the matrix into a larger one.

What changed since the snapshot is written on close as its delta
(:mod:`actormem.store._index_delta`), not as a new snapshot.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import stat
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt
import structlog
import xxhash

from actormem.store._index import MemoryIndex
from actormem.store._index_keys import KeyRows, encode_keys, hash_key, id_key, sorted_keys
from actormem.store._index_rows import I64, RecordRows, _Interner

__all__ = [
    "INDEX_SNAPSHOT_MIN_ROWS",
    "SnapshotCheck",
    "SnapshotError",
    "SnapshotIdentity",
    "drop_snapshot",
    "load_index",
    "load_snapshot",
    "save_index",
    "save_snapshot",
]

log = structlog.get_logger(__name__)

#: Live memories from which a store writes its index snapshot on close: below
#: this, rebuilding from DuckDB on open takes well under a second.
INDEX_SNAPSHOT_MIN_ROWS: Final = 20_000

_MAGIC: Final = b"actormem-index\x00\x01"
#: Spare rows after the matrices' data, as a share of the rows: appends after a
#: load land there (copy-on-write pages of the mapping) instead of copying the
#: whole matrix into a larger one.  A hole in the file: no disk space.
_SPARE: Final = 0.25
#: Bytes per CRC-32 call of a section (a cancelled check stops between them).
_CRC_CHUNK: Final = 64 * 1024 * 1024

#: The one-dimensional per-row arrays of a snapshot (written with spare rows).
_ROW_ARRAYS: Final = ("alive", "kind", "importance", "access", "last", "created", "doclen")

K = TypeVar("K")
_PREFIX: Final = struct.Struct("<16sQI")
_ALIGN: Final = 64
#: 3: sections' checksums are XXH3-64 (2: CRC-32, see section_sum).  4: BM25 terms
#: are cut to ``MAX_TERM_CHARS`` (:mod:`actormem.store._tokenize`); a file of an
#: older format may hold longer terms, so it is not read: the store rebuilds.
FORMAT: Final = 4
_READS: Final = (4,)


class SnapshotError(Exception):
    """The snapshot cannot be used; ``reason`` says why (logged by the store)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SnapshotIdentity(msgspec.Struct, frozen=True):
    """What a snapshot must match to be used (see the module docstring)."""

    store_id: str
    schema_version: int
    embedder: str
    dim: int
    approx_min_rows: int | None
    commit_seq: int


class _Section(msgspec.Struct, frozen=True, array_like=True):
    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    crc: int
    #: Zero bytes reserved after the data (a hole in the file, see ``_SPARE``).
    spare: int = 0


class _Header(msgspec.Struct, frozen=True):
    format: int
    identity: SnapshotIdentity
    rows: int
    total_len: float
    ns_values: list[list[str]]
    kind_values: list[str]
    terms: list[str]
    tags: list[str]
    sections: list[_Section]
    #: Names this file: a delta names the snapshot it applies to.
    token: str = ""


def _groups(codes: I64, count: int) -> tuple[I64, I64]:
    """Rows grouped by code: ``(starts, rows)``; code ``c`` has ``rows[starts[c]:starts[c+1]]``."""
    order = np.argsort(codes, kind="stable").astype(np.int64)
    starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=count), out=starts[1:])
    return starts, order


def _remap_postings(
    postings: list[tuple[npt.NDArray[Any], npt.NDArray[Any] | None]], remap: I64
) -> tuple[list[int], I64, I64, npt.NDArray[np.float32]]:
    """Postings renumbered to the compacted rows, dropping killed rows and emptied lists.

    Returns:
        ``(kept, starts, rows, tfs)``: which of the input postings are kept,
        and their concatenation (``tfs`` empty when no input had any).
    """
    lengths = np.array([p[0].size for p in postings], dtype=np.int64)
    if not postings:
        return [], np.zeros(1, dtype=np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    rows = remap[np.concatenate([p[0] for p in postings])]
    with_tf = postings[0][1] is not None
    tfs = (
        np.concatenate([p[1] for p in postings if p[1] is not None])
        if with_tf
        else np.zeros(0, dtype=np.float32)
    )
    owner = np.repeat(np.arange(lengths.size), lengths)
    keep = rows >= 0
    counts = np.bincount(owner[keep], minlength=lengths.size)
    kept = np.flatnonzero(counts)
    starts = np.zeros(kept.size + 1, dtype=np.int64)
    np.cumsum(counts[kept], out=starts[1:])
    return (
        kept.tolist(),
        starts,
        rows[keep],
        tfs[keep].astype(np.float32) if with_tf else tfs,
    )


def save_snapshot(index: MemoryIndex, path: str, identity: SnapshotIdentity) -> int:
    """Write ``index`` to ``path`` atomically; returns the number of rows written.

    The caller holds whatever keeps the index still (the store's write lock);
    this takes the index's own lock for the copy of its state.
    """
    with index.lock:
        n = index.rows
        live = np.flatnonzero(index._alive[:n])
        every = live.size == n
        remap = np.full(n, -1, dtype=np.int64)
        remap[live] = np.arange(live.size, dtype=np.int64)

        def pick(arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return arr[..., :n] if every else arr[..., live]

        arrays: dict[str, npt.NDArray[Any]] = {
            "vecs": index._vecs[:n] if every else index._vecs[live],
            "alive": np.ones(live.size, dtype=bool),
            "ns": np.ascontiguousarray(pick(index._ns)),
            "kind": pick(index._kind),
            "importance": pick(index._importance),
            "access": pick(index._access),
            "last": pick(index._last),
            "created": pick(index._created),
            "doclen": pick(index._doclen),
        }
        if index._pvecs is not None and index._proj is not None:
            arrays["pvecs"] = index._pvecs[:n] if every else index._pvecs[live]
            arrays["proj"] = index._proj
        terms = list(index._postings)
        kept, starts, prow, ptf = _remap_postings(
            [
                (np.frombuffer(r, dtype=np.int64), np.frombuffer(t, dtype=np.float32))
                for r, t in index._postings.values()
            ],
            remap,
        )
        arrays.update(term_starts=starts, term_rows=prow, term_tfs=ptf)
        tags_all = list(index._tag_rows)
        tkept, tstarts, trows, _ = _remap_postings(
            [(np.frombuffer(index._tag_rows[t], dtype=np.int64), None) for t in tags_all], remap
        )
        arrays.update(tag_starts=tstarts, tag_rows=trows)
        for field in range(4):
            fstarts, frows = _groups(
                arrays["ns"][field].astype(np.int64), len(index._interners[field].values)
            )
            arrays[f"ns{field}_starts"], arrays[f"ns{field}_rows"] = fstarts, frows
        record_buffer, arrays["record_offsets"] = index._records.encode_rows(live.tolist())
        # Every live row has exactly one id in row_of; hash_row holds the row
        # that a hash lookup finds (the latest of exact duplicates).  Both are
        # written sorted by key, read by binary search (see _index_keys).
        for name, (raw, rows) in (
            ("id", _encoded_keys(index._row_of, id_key)),
            ("hash", _encoded_keys(index._hash_row, hash_key)),
        ):
            arrays[f"{name}_keys"], arrays[f"{name}_key_rows"] = sorted_keys(raw, remap[rows])
        buffers = {"records": record_buffer}
        header: dict[str, Any] = {
            "format": FORMAT,
            "identity": identity,
            "rows": int(live.size),
            "total_len": float(arrays["doclen"].sum(dtype=np.float64)),
            "ns_values": [list(i.values) for i in index._interners],
            "kind_values": list(index._kinds.values),
            "terms": [terms[i] for i in kept],
            "tags": [tags_all[i] for i in tkept],
            "token": secrets.token_hex(8),
        }
        row_bytes = {"vecs": index.dim * 4}
        # the per-row arrays get their spare rows too: the first write after
        # a load then copies none of them (about 60 MB at 1M, 0.1-0.25 s)
        row_bytes.update((name, arrays[name].dtype.itemsize) for name in _ROW_ARRAYS)
        if "pvecs" in arrays:
            row_bytes["pvecs"] = arrays["pvecs"].shape[1] * 4
        spare_rows = max(1024, int(live.size * _SPARE))
        spare = {name: b * spare_rows for name, b in row_bytes.items()}

        def encode(sections: list[_Section]) -> bytes:
            return msgspec.msgpack.encode(_Header(sections=sections, **header))

        write_sections(path, _MAGIC, encode, arrays, buffers, spare)
        return int(live.size)


def _encoded_keys(
    keymap: MutableMapping[K, int], encode: Callable[[K], bytes]
) -> tuple[list[bytes], I64]:
    """A key map's keys (encoded for the sorted array) and rows."""
    if isinstance(keymap, KeyRows):
        return keymap.encoded_items()
    raw = encode_keys(keymap, encode)
    return raw, np.fromiter(keymap.values(), np.int64, len(raw))


def write_sections(
    path: str,
    magic: bytes,
    encode: Callable[[list[_Section]], bytes],
    arrays: dict[str, npt.NDArray[Any]],
    buffers: Mapping[str, bytes | bytearray],
    spare: dict[str, int] | None = None,
) -> None:
    """Write ``magic | header | sections`` to ``path`` atomically (see the module docstring).

    ``encode(sections)`` makes the header; ``spare[name]`` zero bytes are
    reserved after that section's data (skipped over: a hole in the file).
    """
    spare = spare or {}
    parts: list[tuple[str, str, tuple[int, ...], memoryview]] = []
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        parts.append((name, arr.dtype.str, arr.shape, arr.reshape(-1).view(np.uint8).data))
    for name, buf in buffers.items():
        parts.append((name, "bytes", (len(buf),), memoryview(buf)))
    sections = []
    offset = 0
    for name, dtype, shape, view in parts:
        room = spare.get(name, 0)
        sections.append(
            _Section(name, dtype, shape, offset, view.nbytes, section_sum(view, FORMAT), room)
        )
        offset += -(-(view.nbytes + room) // _ALIGN) * _ALIGN
    head = encode(sections)
    start = -(-(_PREFIX.size + len(head)) // _ALIGN) * _ALIGN
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.write(_PREFIX.pack(magic, len(head), zlib.crc32(head)))
                out.write(head)
                out.write(b"\x00" * (start - _PREFIX.size - len(head)))
                for (_, _, _, view), section in zip(parts, sections, strict=True):
                    out.write(view)
                    pad = -(section.nbytes + section.spare) % _ALIGN
                    if section.spare:
                        out.seek(section.spare, os.SEEK_CUR)
                    out.write(b"\x00" * pad)
                out.truncate(start + offset)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def section_sum(view: memoryview, fmt: int, cancelled: Callable[[], bool] = lambda: False) -> int:
    """The checksum of a section in files of format ``fmt``: XXH3-64 from format 3.

    Format 2 used CRC-32 (still read): zlib's runs at ~2 GB/s here, so
    verifying a 1M-memory snapshot (2.2 GB) took 1.0-1.4 s of CPU at every
    open; XXH3 runs ~3x as fast.  ``cancelled()`` is asked between chunks:
    True stops with a :class:`SnapshotError`.
    """
    hasher = xxhash.xxh3_64() if fmt >= 3 else None
    value = 0
    for lo in range(0, view.nbytes, _CRC_CHUNK):
        if cancelled():
            raise SnapshotError("check cancelled")
        chunk = view[lo : lo + _CRC_CHUNK]
        if hasher is not None:
            hasher.update(chunk)
        else:
            value = zlib.crc32(chunk, value)
    return hasher.intdigest() if hasher is not None else value


class Mapped(msgspec.Struct):
    """A snapshot or delta file mapped in memory, its header read, its sections located."""

    header: Any
    parts: dict[str, memoryview]
    #: Each section with its spare room after the data.
    rooms: dict[str, memoryview]
    sections: list[_Section]

    def check(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Verify every section's checksum (both sums release the GIL: two threads).

        ``cancelled()`` is asked between chunks: True stops the check with a
        :class:`SnapshotError` (the snapshot is not used after all).
        """

        fmt = int(self.header.format)

        def one(view: memoryview) -> int:
            return section_sum(view, fmt, cancelled)

        with ThreadPoolExecutor(2, thread_name_prefix="actormem-index-crc") as pool:
            sums = dict(zip(self.parts, pool.map(one, self.parts.values()), strict=True))
        for s in self.sections:
            if sums[s.name] != s.crc:
                raise SnapshotError(f"checksum mismatch in section {s.name}")

    def arr(self, name: str, *, room: bool = False) -> npt.NDArray[Any]:
        """Section ``name`` as a numpy view (``room``: with its spare rows)."""
        if name not in self.parts:
            raise SnapshotError(f"section {name} missing")
        found = next(s for s in self.sections if s.name == name)
        try:
            if room:
                flat = np.frombuffer(self.rooms[name], dtype=np.dtype(found.dtype))
                return flat.reshape((-1, *found.shape[1:]))
            return np.frombuffer(self.parts[name], dtype=np.dtype(found.dtype)).reshape(found.shape)
        except (TypeError, ValueError) as exc:
            raise SnapshotError(f"section {name}: {exc}") from exc


class SnapshotCheck:
    """A snapshot mapped and its checksums verified on a thread while the store opens.

    Started before DuckDB opens its file (and replays its WAL), so the
    checksums of a large snapshot (about 2 GB at 1M memories, 0.5-1.4 s of
    CRC-32 here) are computed while DuckDB opens, the snapshot's identity
    is compared and a crash's catch-up re-reads its rows.  The index filled
    from the mapping is not used before :meth:`verified` says the sums
    matched: the store answers nothing until its open returns.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._mapped: Mapped | None = None
        self._error: BaseException | None = None
        self._header_read = threading.Event()
        self._cancel = False
        self._thread = threading.Thread(target=self._run, name="actormem-index-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            mapped = map_sections(self.path, _MAGIC, _Header)
        except BaseException as exc:  # FileNotFoundError, SnapshotError, OSError
            self._error = exc
            self._header_read.set()
            return
        self._mapped = mapped
        self._header_read.set()
        try:
            mapped.check(lambda: self._cancel)
        except BaseException as exc:
            self._error = exc

    def mapped(self) -> Mapped:
        """The mapped file with its header (checksums perhaps still being verified).

        Raises:
            FileNotFoundError, SnapshotError, OSError: As :func:`map_sections`.
        """
        self._header_read.wait()
        if self._mapped is None:
            assert self._error is not None
            raise self._error
        return self._mapped

    def verified(self) -> None:
        """Wait for the checksums.

        Raises:
            SnapshotError: A section's checksum does not match.
        """
        self._thread.join()
        if self._error is not None:
            if isinstance(self._error, SnapshotError):
                raise self._error
            raise SnapshotError(f"unreadable: {self._error}")

    def cancel(self) -> None:
        """Stop verifying (the snapshot is not used) and wait for the thread."""
        self._cancel = True
        self._thread.join()


def map_sections(path: str, magic: bytes, header_type: type[Any]) -> Mapped:
    """Map ``path`` copy-on-write and read its header and section table.

    Raises:
        SnapshotError: Not such a file, truncated, or a damaged header.
        FileNotFoundError: There is no file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO there must not block
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SnapshotError("not a regular file")
        size = info.st_size
        if size < _PREFIX.size:
            raise SnapshotError(f"truncated: {size} bytes")
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)
    view = memoryview(mapped)
    found, head_len, head_crc = _PREFIX.unpack_from(view)
    if found != magic:
        raise SnapshotError("not an actormem index snapshot (bad magic)")
    start = -(-(_PREFIX.size + head_len) // _ALIGN) * _ALIGN
    if start > size:
        raise SnapshotError(f"truncated: header of {head_len} bytes, file of {size}")
    head = view[_PREFIX.size : _PREFIX.size + head_len]
    if zlib.crc32(head) != head_crc:
        raise SnapshotError("header checksum mismatch")
    try:
        header = msgspec.msgpack.decode(head, type=header_type)
    except msgspec.DecodeError as exc:
        raise SnapshotError(f"unreadable header: {exc}") from exc
    if header.format not in _READS:
        raise SnapshotError(f"format {header.format}, this actormem reads {FORMAT}")
    parts: dict[str, memoryview] = {}
    rooms: dict[str, memoryview] = {}
    for s in header.sections:
        lo = start + s.offset
        if lo + s.nbytes + s.spare > size:
            raise SnapshotError(f"truncated: section {s.name} ends past the file's {size} bytes")
        parts[s.name] = view[lo : lo + s.nbytes]
        rooms[s.name] = view[lo : lo + s.nbytes + s.spare]
    return Mapped(header=header, parts=parts, rooms=rooms, sections=list(header.sections))


def load_snapshot(
    path: str, identity: SnapshotIdentity, index: MemoryIndex, check: SnapshotCheck | None = None
) -> bool:
    """Fill the empty ``index`` from the snapshot at ``path`` and its delta, if any.

    The snapshot alone is used when its identity is the store's; else a delta
    (``<path>.delta``, see :mod:`actormem.store._index_delta`) made for this
    very snapshot must bring it to the store's commit number.  With
    ``check`` (started on ``path``) the file is the one it mapped, and its
    checksums are left to it: the caller calls ``check.verified()`` before
    the index is used.

    Returns:
        Whether a delta was applied.

    Raises:
        SnapshotError: The snapshot or its delta is missing, damaged or stale;
            the reason says which.  ``index`` is then left as it was.
        FileNotFoundError: There is no snapshot.
    """
    from actormem.store._index_delta import apply_delta, map_delta  # builds on this module

    base = map_sections(path, _MAGIC, _Header) if check is None else check.mapped()
    header: _Header = base.header
    delta: Mapped | None = None
    if header.identity != identity:
        if msgspec.structs.replace(header.identity, commit_seq=identity.commit_seq) != identity:
            raise SnapshotError(_difference(header.identity, identity))
        try:
            delta = map_delta(path + ".delta", header.token, header.identity.commit_seq, identity)
        except FileNotFoundError:
            raise SnapshotError(_difference(header.identity, identity)) from None
    if check is None:
        base.check()
    if delta is not None:
        delta.check()
    try:
        _fill(index, header, base.arr, base.parts, base.arr("vecs", room=True))
        index._base_token = header.token
        index._base_seq = header.identity.commit_seq
        index._base_rows = index.rows
        if delta is not None:
            apply_delta(index, delta)
    except SnapshotError:
        index.purge_all()
        raise
    except (ValueError, IndexError, KeyError, msgspec.DecodeError) as exc:
        index.purge_all()
        raise SnapshotError(f"inconsistent contents: {exc}") from exc
    return delta is not None


def _difference(found: SnapshotIdentity, wanted: SnapshotIdentity) -> str:
    for field in SnapshotIdentity.__struct_fields__:
        a, b = getattr(found, field), getattr(wanted, field)
        if a != b:
            what = "stale" if field == "commit_seq" else "another " + field.replace("_", " ")
            return f"{what}: snapshot has {field}={a!r}, the store {b!r}"
    return "identity differs"  # pragma: no cover - the caller compared them unequal


def _fill(
    index: MemoryIndex,
    header: _Header,
    arr: Any,
    parts: dict[str, memoryview],
    room: npt.NDArray[Any],
) -> None:
    """Fill the index from the snapshot's sections."""
    n = header.rows
    vecs = arr("vecs")
    if vecs.shape != (n, index.dim) or room.shape[0] < n:
        raise SnapshotError(f"vectors of shape {vecs.shape}, expected {(n, index.dim)}")
    proj = arr("proj") if "proj" in parts else None
    if proj is not None and proj.shape != (index.dim, index._approx_dims):
        # A file of an earlier release projects to fewer dimensions (32 before
        # the first pass was widened): rebuilt, never mixed with this index's.
        raise SnapshotError(
            f"a projection of shape {proj.shape}, this index projects "
            f"{index.dim} to {index._approx_dims} dims"
        )
    offsets = arr("record_offsets")
    if offsets.shape != (n + 1,) or (n and int(offsets[-1]) != parts["records"].nbytes):
        raise SnapshotError("record offsets do not match the records")
    id_keys, id_rows = arr("id_keys"), arr("id_key_rows")
    hash_keys, hash_rows = arr("hash_keys"), arr("hash_key_rows")
    if id_rows.shape != (n,) or id_keys.shape != (n,) or hash_keys.shape != hash_rows.shape:
        raise SnapshotError("id or hash rows do not match the rows")
    with index.lock:
        if n == 0:
            return
        index._reset(16)
        index._cap = room.shape[0]
        index._vecs = room
        for name in ("ns", *_ROW_ARRAYS):
            a = arr(name)
            if a.shape[-1] != n:
                raise SnapshotError(f"section {name} has {a.shape[-1]} rows, expected {n}")
            if name != "ns":  # with its spare rows (none in older snapshots)
                a = arr(name, room=True)[: room.shape[0]]
            setattr(index, f"_{name}", a)
        if proj is not None:
            index._proj = proj
            index._pvecs = arr("pvecs", room=True)
            if index._pvecs.shape != (room.shape[0], index._approx_dims):
                raise SnapshotError("projected vectors of another shape than the vectors")
        index._n = n
        index._live = n
        index._total_len = header.total_len
        index._records = RecordRows(parts["records"], offsets)
        interners = []
        for values in header.ns_values:
            interner = _Interner()
            interner.values = list(values)
            interner.codes = {v: i for i, v in enumerate(values)}
            interners.append(interner)
        index._interners = interners
        index._kinds.values = list(header.kind_values)
        index._kinds.codes = {v: i for i, v in enumerate(header.kind_values)}
        index._row_of = KeyRows(id_keys, id_rows, id_key)
        index._hash_row = KeyRows(hash_keys, hash_rows, hash_key)
        index._ns_rows = [
            _split_rows(arr(f"ns{f}_starts"), arr(f"ns{f}_rows"), range(len(header.ns_values[f])))
            for f in range(4)
        ]
        rows_bytes, tfs_bytes = parts["term_rows"], parts["term_tfs"]
        bounds = arr("term_starts").tolist()
        # views of the mapping, copied into arrays when a write extends them
        index._postings = {
            term: (  # type: ignore[misc]
                rows_bytes[lo * 8 : hi * 8].cast("q"),
                tfs_bytes[lo * 4 : hi * 4].cast("f"),
            )
            for term, lo, hi in zip(header.terms, bounds, bounds[1:], strict=False)
        }
        index._tag_rows = _split_rows(arr("tag_starts"), arr("tag_rows"), header.tags)


def _split_rows(starts: I64, rows: I64, keys: Any) -> dict[Any, array[int]]:
    bounds = starts.tolist()
    data = memoryview(np.ascontiguousarray(rows, dtype=np.int64).data).cast("B")
    out: dict[Any, array[int]] = {}
    for i, key in enumerate(keys):
        lo, hi = bounds[i], bounds[i + 1]
        if hi > lo:
            found = array("q")
            found.frombytes(data[lo * 8 : hi * 8])
            out[key] = found
    return out


def drop_snapshot(path: str) -> None:
    """Remove the snapshot at ``path`` and its delta (regular files only: never a FIFO or such)."""
    for p in (path, path + ".delta"):
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(p).st_mode):
                os.unlink(p)


def load_index(
    index: MemoryIndex, path: str, identity: SnapshotIdentity, check: SnapshotCheck | None = None
) -> bool:
    """Fill ``index`` from the snapshot when it is valid; log why not otherwise.

    An invalid snapshot is deleted, so that it cannot be taken for valid later
    (say a database restored from an older copy that reaches the same commit
    number with other writes).  With ``check``, see :func:`load_snapshot`
    (when this returns False the check is cancelled).

    Returns:
        Whether the index was loaded (``False``: the caller rebuilds it).
    """
    t0 = time.perf_counter()
    try:
        with_delta = load_snapshot(path, identity, index, check)
    except FileNotFoundError:
        drop_snapshot(path)  # a delta without its snapshot is of no use
        return False
    except (SnapshotError, OSError) as exc:
        if check is not None:
            check.cancel()
        reason = exc.reason if isinstance(exc, SnapshotError) else f"unreadable: {exc}"
        log.warning("store.index_snapshot_rebuilt", path=path, reason=reason)
        drop_snapshot(path)
        return False
    if not with_delta:  # one left over from before the snapshot was written
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path + ".delta").st_mode):
                os.unlink(path + ".delta")
    log.info(
        "store.index_snapshot_loaded",
        path=path,
        memories=len(index),
        delta=with_delta,
        seconds=round(time.perf_counter() - t0, 3),
    )
    return True


def save_index(index: MemoryIndex, path: str, identity: SnapshotIdentity) -> bool:
    """Write the snapshot (or only its delta); on failure log it, remove any stale one.

    A delta is written when the index came from the snapshot on disk and its
    changes since are small (see :func:`~actormem.store._index_delta.save_delta`);
    else the whole snapshot, and any delta is removed.

    Returns:
        Whether the index is saved.
    """
    from actormem.store._index_delta import save_delta  # builds on this module

    t0 = time.perf_counter()
    try:
        written = save_delta(index, path + ".delta", identity)
        if written is not None:
            log.info(
                "store.index_delta_written",
                path=path,
                rows=written,
                seconds=round(time.perf_counter() - t0, 3),
            )
            return True
        rows = save_snapshot(index, path, identity)
        with contextlib.suppress(OSError):  # of the snapshot just replaced
            os.unlink(path + ".delta")
    except OSError as exc:
        log.warning("store.index_snapshot_failed", path=path, error=str(exc))
        drop_snapshot(path)
        return False
    log.info(
        "store.index_snapshot_written",
        path=path,
        memories=rows,
        seconds=round(time.perf_counter() - t0, 3),
    )
    return True
