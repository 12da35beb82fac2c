"""The row storage of :class:`~actormem.store._index.MemoryIndex`.

One place declares every array, map and cache the index keeps, with how it
grows and how a row dies, so the search mixins (:mod:`._index_vectors`,
:mod:`._index_scope`) and the writes (:mod:`._index`) read one layout.

Layout: rows are append-only.  Each row holds one live memory version: its
vector in a growing ``(capacity, dim)`` float32 matrix (rows pre-normalised,
so cosine is a dot product), interned namespace/kind codes and the numbers the
relevance formula needs in numpy arrays, and the :class:`MemoryRecord` (to
answer a search without a round trip to DuckDB).  An update appends a new row
and kills the old one; killed rows are skipped by a boolean ``alive`` mask and
reclaimed by compaction.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import MutableMapping, Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt
import structlog

from actormem.store._tokenize import tokenize
from actormem.store._types import MemoryRecord

__all__ = [
    "APPROX_DIM_SHARE",
    "APPROX_MIN_RECALL",
    "APPROX_MIN_ROWS",
    "APPROX_RERANK",
    "F32",
    "F64",
    "I64",
    "IndexRows",
    "Links",
    "RecordRows",
]

log = structlog.get_logger("actormem.store._index")

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
HashRows = dict[tuple[tuple[str, str, str, str], str], int]
#: ``(before, after, before2, after2)`` positions, see :meth:`ScopeSearch._episode_links`.
Links = tuple[I64, I64, I64, I64]


class _Interner:
    __slots__ = ("codes", "values")

    def __init__(self) -> None:
        self.codes: dict[str, int] = {"": 0}
        self.values: list[str] = [""]

    def code(self, value: str) -> int:
        found = self.codes.get(value)
        if found is None:
            found = self.codes[value] = len(self.values)
            self.values.append(value)
        return found

    def get(self, value: str) -> int:
        return self.codes.get(value, -1)


#: The per-row arrays :meth:`IndexRows._grow` extends.
_ROW_ARRAY_NAMES: Final = (
    "_alive",
    "_kind",
    "_importance",
    "_access",
    "_last",
    "_created",
    "_doclen",
)
#: Scopes of at least this many rows are searched approximately (see MemoryIndex).
APPROX_MIN_ROWS: Final = 20_000
#: The projected vectors of the approximate first pass have a quarter of the
#: vectors' dimensions (64 of WordLlama's 256: a quarter of the bytes read).
APPROX_DIM_SHARE: Final = 4
#: Rows of the first pass re-scored with the full vectors.
APPROX_RERANK: Final = 2000
#: A learnt projection is used only when, measured on the index's own vectors,
#: the first pass finds at least this share of the exact top 10 (else every
#: search stays exact: an embedder whose vectors spread over all dimensions).
APPROX_MIN_RECALL: Final = 0.98


_DECODE_RECORD: Final = msgspec.msgpack.Decoder(MemoryRecord).decode
_ENCODER: Final = msgspec.msgpack.Encoder()
_ENCODE: Final = _ENCODER.encode


class RecordRows:
    """The records of the rows, by row number (``None`` for a purged row).

    A plain list for rows added in this process; rows loaded from an index
    snapshot (:mod:`actormem.store._index_file`) stay msgpack bytes in the
    snapshot's buffer and are decoded when first read, so reopening a large
    store does not build a million records up front.
    """

    __slots__ = ("_base", "_blob", "_cache", "_offsets", "_tail")

    def __init__(self, blob: memoryview | None = None, offsets: I64 | None = None) -> None:
        self._blob = blob
        self._offsets = offsets
        self._base = 0 if offsets is None else int(offsets.size) - 1
        self._cache: dict[int, MemoryRecord | None] = {}
        self._tail: list[MemoryRecord | None] = []

    def __len__(self) -> int:
        return self._base + len(self._tail)

    def __getitem__(self, row: int) -> MemoryRecord | None:
        if row >= self._base:
            return self._tail[row - self._base]
        try:
            return self._cache[row]
        except KeyError:
            pass
        assert self._blob is not None and self._offsets is not None
        rec = _DECODE_RECORD(self._blob[self._offsets[row] : self._offsets[row + 1]])
        self._cache[row] = rec
        return rec

    def __setitem__(self, row: int, rec: MemoryRecord | None) -> None:
        if row >= self._base:
            self._tail[row - self._base] = rec
        else:
            self._cache[row] = rec

    def append(self, rec: MemoryRecord | None) -> None:
        """Add the record of the next row."""
        self._tail.append(rec)

    def extend(self, recs: Sequence[MemoryRecord]) -> None:
        """Add the records of the next rows."""
        self._tail.extend(recs)

    def encode_rows(self, rows: Sequence[int]) -> tuple[bytearray, I64]:
        """The msgpack bytes of ``rows``' records, concatenated, and their offsets.

        One buffer, appended to in place (a snapshot's records section): a
        loaded row not read since is copied as loaded, any other is encoded
        into the buffer -- no bytes object per row and no join of a million
        of them afterwards.
        """
        out = bytearray()
        ends = np.zeros(len(rows) + 1, dtype=np.int64)
        into = _ENCODER.encode_into
        base, tail, cache = self._base, self._tail, self._cache
        blob, offsets = self._blob, self._offsets
        starts = offsets.tolist() if offsets is not None and base else []
        for i, row in enumerate(rows, 1):
            if row >= base:
                into(tail[row - base], out, -1)
            elif row in cache:
                into(cache[row], out, -1)
            else:
                assert blob is not None
                out += blob[starts[row] : starts[row + 1]]
            ends[i] = len(out)
        return out, ends


class IndexRows:
    """Rows, their arrays and the maps from ids, hashes, namespaces and terms to rows."""

    def __init__(
        self,
        dim: int,
        *,
        capacity: int = 1024,
        approx_min_rows: int | None = APPROX_MIN_ROWS,
        approx_dims: int | None = None,
        approx_rerank: int = APPROX_RERANK,
    ) -> None:
        """Create an empty index for ``dim``-sized vectors.

        Args:
            dim: Vector size.
            capacity: Initial number of rows allocated.
            approx_min_rows: Scope size from which vector search takes the
                approximate first pass; ``None`` keeps every search exact.
            approx_dims: Size of the projected vectors (used when smaller than
                ``dim``); by default ``dim // APPROX_DIM_SHARE``.
            approx_rerank: Rows of the first pass re-scored exactly.
        """
        self.dim = dim
        self._lock = threading.RLock()
        if approx_dims is None:
            approx_dims = max(1, dim // APPROX_DIM_SHARE)
        self._approx_min = approx_min_rows if approx_dims < dim else None
        self._approx_dims = approx_dims
        self._approx_rerank = max(approx_rerank, 1)
        self._proj: F32 | None = None
        self._reset(max(capacity, 16))

    def _reset(self, capacity: int) -> None:
        self._cap = capacity
        #: Rows every array has room for, as :meth:`_grow` last found it (0: look
        #: again; a snapshot's load replaces the arrays after this reset).
        self._room_rows = 0
        self._n = 0
        self._vecs: F32 = np.zeros((capacity, self.dim), dtype=np.float32)
        self._pvecs: F32 | None = (
            None
            if self._proj is None
            else np.zeros((capacity, self._approx_dims), dtype=np.float32)
        )
        self._alive = np.zeros(capacity, dtype=bool)
        self._ns = np.zeros((4, capacity), dtype=np.int32)
        self._kind = np.zeros(capacity, dtype=np.int32)
        self._importance = np.zeros(capacity, dtype=np.float64)
        self._access = np.zeros(capacity, dtype=np.float64)
        self._last = np.zeros(capacity, dtype=np.float64)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._doclen = np.zeros(capacity, dtype=np.float32)
        self._records = RecordRows()
        self._row_of_map: MutableMapping[str, int] = {}
        self._hash_row_map: MutableMapping[tuple[tuple[str, str, str, str], str], int] = {}
        self._interners = [_Interner() for _ in range(4)]
        self._kinds = _Interner()
        self._ns_rows: list[dict[int, array[int]]] = [{} for _ in range(4)]
        #: Term -> (rows, term frequencies): arrays, or read-only views of a
        #: loaded snapshot until a write extends them.
        self._postings: dict[str, tuple[array[int] | memoryview, array[float] | memoryview]] = {}
        self._tag_rows: dict[str, array[int]] = {}
        self._total_len = 0.0
        #: Term -> killed rows holding it, and the killed rows' total length:
        #: BM25 counts live rows only without rewriting postings on a kill.
        self._dead_df: dict[str, int] = {}
        self._dead_len = 0.0
        self._live = 0
        #: Rows loaded from an index snapshot's base file (-1: none, or the
        #: base can no longer be brought up to date by a delta: a purge, a new
        #: projection); ``_dirty``: those of them whose record or access
        #: figures changed since (see :mod:`actormem.store._index_delta`).
        self._base_rows = -1
        self._dirty: set[int] = set()
        #: The loaded snapshot's token and commit number (a delta names them).
        self._base_token = ""
        self._base_seq = -1
        #: Bumped by every change of the rows' liveness or namespaces.
        self._version = 0
        self._scope_cache: dict[tuple[tuple[int, int], ...], tuple[int, I64]] = {}
        #: Exact namespace key (its four codes) -> every row written into it,
        #: live or not, in order: kept for the keys a write's duplicate check
        #: asked for (see :meth:`ScopeSearch.exact_rows`), extended by ``add``.
        self._exact_rows: dict[tuple[int, ...], array[int]] = {}
        #: namespace key -> (version, before, after): see :meth:`_episode_links`.
        self._links_cache: dict[tuple[str, str, str, str], tuple[int, Links]] = {}

    # -- key maps ---------------------------------------------------------------

    @property
    def _row_of(self) -> MutableMapping[str, int]:
        """Memory id -> row of the live memories (see :mod:`._index_keys`)."""
        return self._row_of_map

    @_row_of.setter
    def _row_of(self, value: MutableMapping[str, int]) -> None:
        self._row_of_map = value

    @property
    def _hash_row(self) -> MutableMapping[tuple[tuple[str, str, str, str], str], int]:
        """(namespace key, content hash) -> the live row an exact-duplicate check finds."""
        return self._hash_row_map

    @_hash_row.setter
    def _hash_row(self, value: MutableMapping[tuple[tuple[str, str, str, str], str], int]) -> None:
        self._hash_row_map = value

    # -- size -------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of live memories."""
        return self._live

    @property
    def rows(self) -> int:
        """Number of rows including killed ones."""
        return self._n

    def _grow(self, need: int) -> None:
        """Make room for ``need`` rows.

        The matrices double when full.  The per-row arrays follow the
        matrices' capacity separately: after a snapshot load the matrices
        come with spare rows (see :mod:`actormem.store._index_file`) while
        the small arrays hold exactly the loaded rows.
        """
        if need <= self._room_rows:  # a single write: no array to look at
            return
        if need > self._cap:
            cap = self._cap
            while cap < need:
                cap *= 2
            vecs = np.zeros((cap, self.dim), dtype=np.float32)
            vecs[: self._n] = self._vecs[: self._n]
            self._vecs = vecs
            if self._pvecs is not None:
                pvecs = np.zeros((cap, self._approx_dims), dtype=np.float32)
                pvecs[: self._n] = self._pvecs[: self._n]
                self._pvecs = pvecs
            self._cap = cap
        cap = self._cap
        for name in _ROW_ARRAY_NAMES:
            old = getattr(self, name)
            if old.shape[0] < need:
                new = np.zeros(cap, dtype=old.dtype)
                new[: self._n] = old[: self._n]
                setattr(self, name, new)
        if self._ns.shape[1] < need:
            ns = np.zeros((4, cap), dtype=np.int32)
            ns[:, : self._n] = self._ns[:, : self._n]
            self._ns = ns
        self._room_rows = min(
            self._vecs.shape[0],
            self._ns.shape[1],
            *(getattr(self, name).shape[0] for name in _ROW_ARRAY_NAMES),
            self._cap if self._pvecs is None else self._pvecs.shape[0],
        )

    def _kill_row(self, row: int) -> None:
        if not self._alive[row]:
            return
        self._version += 1
        self._alive[row] = False
        self._live -= 1
        rec = self._records[row]
        if rec is not None:
            self._count_dead(rec.content, row)
            hkey = (rec.namespace.key(), rec.content_hash)
            if self._hash_row.get(hkey) == row:
                del self._hash_row[hkey]
            if self._row_of.get(rec.id) == row:
                del self._row_of[rec.id]

    def _count_dead(self, content: str, row: int) -> None:
        """Take a killed row out of the BM25 statistics (its terms and length)."""
        dead_df = self._dead_df
        for term in set(tokenize(content)):
            dead_df[term] = dead_df.get(term, 0) + 1
        self._dead_len += float(self._doclen[row])

    @property
    def lock(self) -> threading.RLock:
        """The index's re-entrant lock: hold it to keep row numbers stable across calls."""
        return self._lock

    @property
    def dead_fraction(self) -> float:
        """Share of killed rows."""
        return 0.0 if self._n == 0 else 1.0 - self._live / self._n

    # -- reads ------------------------------------------------------------------

    def _current(self, row: int) -> MemoryRecord:
        rec = self._records[row]
        assert rec is not None
        access = int(self._access[row])
        last = float(self._last[row])
        if access != rec.access_count or last != rec.last_accessed:
            rec = msgspec.structs.replace(rec, access_count=access, last_accessed=last)
        return rec

    def _live_record(self, row: int) -> MemoryRecord:
        rec = self._records[row]
        assert rec is not None
        return rec

    def _doc_freq(self, term: str) -> int:
        """Live rows whose content holds ``term``."""
        posting = self._postings.get(term)
        return 0 if posting is None else len(posting[0]) - self._dead_df.get(term, 0)
