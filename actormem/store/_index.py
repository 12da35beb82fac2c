"""The in-memory search index that sits beside the DuckDB file.

DuckDB is the store of record; this index is a derived copy of the *live*
memories (not deleted, not superseded), rebuilt from the file on open and
updated by the store right after every committed write, before the write
returns -- so a memory is found by the very next search (read-your-writes).

Layout: rows are append-only.  Each row holds one live memory version: its
vector in a growing ``(capacity, dim)`` float32 matrix (rows pre-normalised,
so cosine is a dot product), interned namespace/kind codes and the numbers the
relevance formula needs in numpy arrays, and the :class:`MemoryRecord` (to
answer a search without a round trip to DuckDB).  An update appends a new row
and kills the old one; killed rows are skipped by a boolean ``alive`` mask and
reclaimed by :meth:`MemoryIndex.compact`.

Keyword search is BM25 over an inverted index kept here (``term -> rows,
term frequencies`` in compact ``array`` buffers, read as numpy views).  DuckDB's
FTS extension was not used: its index must be rebuilt to see new rows (~1 s at
100k) and its tokenizer drops digits.  Document frequencies and the average
length count killed rows until the next compaction -- a small, deliberate
approximation that keeps writes O(terms).

All methods take the index's own lock; numpy releases the GIL in the matrix
product, the lock keeps the arrays consistent.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec
import numpy as np
import numpy.typing as npt
import structlog

from actormem.store._ranking import Scored, rank_candidates
from actormem.store._relevance import RelevanceWeights, relevance
from actormem.store._types import MemoryRecord, Namespace, SearchConfig, SearchFilters, SearchMode

if TYPE_CHECKING:
    from actormem.store._rerank import QueryRerank

__all__ = ["STOPWORDS", "MemoryIndex", "Prepared", "Scored", "prepare", "tokenize"]

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
#: ``(before, after, before2, after2)`` positions, see :meth:`MemoryIndex._episode_links`.
_Links = tuple[I64, I64, I64, I64]

_TOKEN_RE: Final = re.compile(r"[^\W_]+", re.UNICODE)
_NS_NAMES: Final = ("user_id", "agent_id", "run_id", "session_id")

#: Words too common to carry meaning for BM25 (a short English list).
_STOPWORDS_TEXT: Final = """
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in
into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up
very was we were what when where which while who whom why will with would you your yours
yourself yourselves s t d ll m re ve don didn doesn isn wasn
"""
STOPWORDS: Final = frozenset(_STOPWORDS_TEXT.split())


def _stem(word: str) -> str:
    """A light English suffix stripper: plurals, ``-ing`` and ``-ed``.

    ``painting``/``painted``/``paints`` -> ``paint``, ``running`` -> ``run``,
    ``stories`` -> ``story``.  Words of four letters or fewer and numbers are
    kept as they are.  Measured on LoCoMo it lifts BM25 recall@10 by about
    1.5 points (see ``benchmarks/bench_locomo.py``).
    """
    if len(word) <= 4 or word.isdigit():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            return word
    return word


class _TermCache(dict[str, str]):
    """Casefolded word -> BM25 term (``""`` for a stopword), computed on first use.

    A plain dict read through ``map(cache.__getitem__, words)`` costs one C-level
    lookup per word; :meth:`__missing__` stems a word the first time it is seen.
    Cleared when it reaches ``_TERM_CACHE_SIZE`` words so it stays bounded.
    """

    def __missing__(self, word: str) -> str:
        if len(self) >= _TERM_CACHE_SIZE:
            self.clear()
        term = self[word] = "" if word in STOPWORDS else _stem(word)
        return term


_TERM_CACHE_SIZE: Final = 1 << 18
_TERMS: Final = _TermCache()


def _term(word: str) -> str:
    """The BM25 term of a casefolded word, ``""`` for a stopword."""
    return _TERMS[word]


def tokenize(text: str) -> list[str]:
    """Split ``text`` into BM25 terms: casefolded words and numbers, no stopwords.

    Digits are kept (``"item4242"`` stays one term), underscores split words,
    plurals and ``-ing``/``-ed`` endings are stripped (:func:`_stem`).
    """
    return [t for t in map(_TERMS.__getitem__, _TOKEN_RE.findall(text.casefold())) if t]


class _BatchIds(dict[str, int]):
    """Casefolded word -> id of its term within one batch (0 for a stopword)."""

    def __init__(self) -> None:
        super().__init__()
        self.terms: list[str] = [""]
        self._term_ids: dict[str, int] = {"": 0}

    def __missing__(self, word: str) -> int:
        term = _TERMS[word]
        found = self._term_ids.get(term)
        if found is None:
            found = self._term_ids[term] = len(self.terms)
            self.terms.append(term)
        self[word] = found
        return found


class Prepared(msgspec.Struct, frozen=True):
    """BM25 postings of a batch with rows relative to the batch (see :func:`prepare`).

    Term ``terms[i]`` occurs in batch rows ``rows[starts[i]:starts[i + 1]]``
    (ascending) with term frequencies ``tfs[starts[i]:starts[i + 1]]``.
    """

    count: int
    doclen: npt.NDArray[np.float32]
    terms: list[str]
    starts: I64
    rows: I64
    tfs: npt.NDArray[np.float32]


def prepare(records: Sequence[MemoryRecord]) -> Prepared:
    """Tokenize a batch and build its postings, without touching any index.

    Pure computation (the store runs it while DuckDB commits the batch): one
    regular-expression pass per text, one dict lookup per word, then the
    postings are sorted out with numpy.
    """
    ids = _BatchIds()
    lookup = ids.__getitem__
    findall = _TOKEN_RE.findall
    flat: list[int] = []
    extend = flat.extend
    lengths: list[int] = []
    for rec in records:
        words = findall(rec.content.casefold())
        lengths.append(len(words))
        extend(map(lookup, words))
    count = len(records)
    tids = np.array(flat, dtype=np.int64)
    docs = np.repeat(np.arange(count, dtype=np.int64), lengths)
    keep = tids > 0
    tids, docs = tids[keep], docs[keep]
    doclen = np.bincount(docs, minlength=count).astype(np.float32)
    pairs, tf = np.unique(tids * max(count, 1) + docs, return_counts=True)
    term_of = pairs // max(count, 1)
    bounds = np.flatnonzero(np.diff(term_of)) + 1
    starts = np.concatenate(([0], bounds, [pairs.size])).astype(np.int64)
    present = term_of[starts[:-1]] if pairs.size else np.zeros(0, dtype=np.int64)
    return Prepared(
        count=count,
        doclen=doclen,
        terms=[ids.terms[int(t)] for t in present],
        starts=starts if pairs.size else np.zeros(1, dtype=np.int64),
        rows=pairs % max(count, 1),
        tfs=tf.astype(np.float32),
    )


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


#: Scopes of at least this many rows are searched approximately (see MemoryIndex).
APPROX_MIN_ROWS: Final = 200_000
#: Size of the projected vectors of the approximate first pass.
APPROX_DIMS: Final = 32
#: Rows of the first pass re-scored with the full vectors.
APPROX_RERANK: Final = 1000
_PCA_SAMPLE: Final = 20_000


class MemoryIndex:
    """Vectors, BM25 postings and scoring data of the live memories.

    Approximate vector search: once the index holds ``approx_min_rows`` rows it
    learns an orthogonal projection onto the ``approx_dims`` principal axes of
    a sample of its vectors (the eigenvectors of their second-moment matrix)
    and keeps, beside the full vectors, a contiguous matrix of every row's
    projected vector, renormalised.  A search over a scope of at least
    ``approx_min_rows`` rows ranks the scope by the projected cosine (an
    eighth of the memory traffic of the exact product), re-scores the best
    ``approx_rerank`` of them with the full vectors and takes its vector
    candidates from those; every cosine it reports is exact.  Smaller scopes
    are searched exactly.  The projection is kept in step with every append
    and survives compaction; a rebuild (on open, after a re-embedding)
    learns it anew.  Measured on the store benchmark's 1M corpus (WordLlama):
    recall@10 against exact search 0.98 (see ``benchmarks/bench_store.py``).
    """

    def __init__(
        self,
        dim: int,
        *,
        capacity: int = 1024,
        approx_min_rows: int | None = APPROX_MIN_ROWS,
        approx_dims: int = APPROX_DIMS,
        approx_rerank: int = APPROX_RERANK,
    ) -> None:
        """Create an empty index for ``dim``-sized vectors.

        Args:
            dim: Vector size.
            capacity: Initial number of rows allocated.
            approx_min_rows: Scope size from which vector search takes the
                approximate first pass; ``None`` keeps every search exact.
            approx_dims: Size of the projected vectors (used when smaller than
                ``dim``).
            approx_rerank: Rows of the first pass re-scored exactly.
        """
        self.dim = dim
        self._lock = threading.RLock()
        self._approx_min = approx_min_rows if approx_dims < dim else None
        self._approx_dims = approx_dims
        self._approx_rerank = max(approx_rerank, 1)
        self._proj: F32 | None = None
        self._reset(max(capacity, 16))

    def _reset(self, capacity: int) -> None:
        self._cap = capacity
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
        self._records: list[MemoryRecord | None] = []
        self._row_of: dict[str, int] = {}
        self._hash_row: dict[tuple[tuple[str, str, str, str], str], int] = {}
        self._interners = [_Interner() for _ in range(4)]
        self._kinds = _Interner()
        self._ns_rows: list[dict[int, array[int]]] = [{} for _ in range(4)]
        self._postings: dict[str, tuple[array[int], array[float]]] = {}
        self._tag_rows: dict[str, array[int]] = {}
        self._total_len = 0.0
        self._live = 0
        #: Bumped by every change of the rows' liveness or namespaces.
        self._version = 0
        self._scope_cache: dict[tuple[tuple[int, int], ...], tuple[int, I64]] = {}
        #: namespace key -> (version, before, after): see :meth:`_episode_links`.
        self._links_cache: dict[tuple[str, str, str, str], tuple[int, _Links]] = {}

    # -- size -------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of live memories."""
        return self._live

    @property
    def rows(self) -> int:
        """Number of rows including killed ones."""
        return self._n

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
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
        for name in (
            "_alive",
            "_kind",
            "_importance",
            "_access",
            "_last",
            "_created",
            "_doclen",
        ):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)
        ns = np.zeros((4, cap), dtype=np.int32)
        ns[:, : self._n] = self._ns[:, : self._n]
        self._ns = ns
        self._cap = cap

    # -- writes -----------------------------------------------------------------

    def add(
        self,
        records: Sequence[MemoryRecord],
        vectors: F32,
        prepared: Prepared | None = None,
    ) -> None:
        """Append live records with their (normalised) vectors.

        A record whose id is already indexed replaces the old row.

        Args:
            records: The records.
            vectors: Their vectors, one row each.
            prepared: :func:`prepare` of the same records, when the caller
                computed it already (the store does so while DuckDB commits).
        """
        if not records:
            return
        if prepared is None:
            prepared = prepare(records)
        if prepared.count != len(records):
            raise ValueError("prepared postings do not match the records")
        with self._lock:
            start = self._n
            count = len(records)
            self._grow(start + count)
            end = start + count
            self._vecs[start:end] = vectors
            if self._pvecs is not None:
                self._pvecs[start:end] = self._project(self._vecs[start:end])
            self._alive[start:end] = True
            by_ns: dict[tuple[int, int, int, int], list[int]] = {}
            kinds: list[int] = []
            kind_code = self._kinds.code
            row_of = self._row_of
            hash_row = self._hash_row
            append_record = self._records.append
            last_ns: Namespace | None = None
            key: tuple[str, str, str, str] = ("", "", "", "")
            code4 = (0, 0, 0, 0)
            ns_rows: list[int] = []
            ids = [r.id for r in records]
            first_ns = records[0].namespace
            if (  # one namespace, new ids, no tags: no per-record Python loop
                row_of.keys().isdisjoint(ids)
                and len(set(ids)) == count
                and all(r.namespace is first_ns for r in records)
                and not any(r.tags for r in records)
            ):
                key = first_ns.key()
                code4 = tuple(self._interners[f].code(key[f]) for f in range(4))  # type: ignore[assignment]
                by_ns[code4] = list(range(start, end))
                row_of.update(zip(ids, range(start, end), strict=True))
                self._records.extend(records)
                hash_row.update(
                    zip(
                        zip(itertools.repeat(key), [r.content_hash for r in records], strict=False),
                        range(start, end),
                        strict=True,
                    )
                )
                kinds = list(map(kind_code, [r.kind for r in records]))
                records_loop: Sequence[MemoryRecord] = ()
            else:
                records_loop = records
            for offset, rec in enumerate(records_loop):
                row = start + offset
                old = row_of.get(rec.id)
                if old is not None:
                    self._kill_row(old)
                row_of[rec.id] = row
                append_record(rec)
                if rec.namespace is not last_ns:
                    last_ns = rec.namespace
                    key = last_ns.key()
                    code4 = (
                        self._interners[0].code(key[0]),
                        self._interners[1].code(key[1]),
                        self._interners[2].code(key[2]),
                        self._interners[3].code(key[3]),
                    )
                    ns_rows = by_ns.setdefault(code4, [])
                ns_rows.append(row)
                kinds.append(kind_code(rec.kind))
                hash_row[(key, rec.content_hash)] = row
                if rec.tags:
                    for tag in set(rec.tags):
                        tag_rows = self._tag_rows.get(tag)
                        if tag_rows is None:
                            tag_rows = self._tag_rows[tag] = array("q")
                        tag_rows.append(row)
            self._kind[start:end] = kinds
            self._doclen[start:end] = prepared.doclen
            self._total_len += float(prepared.doclen.sum())
            self._importance[start:end] = [r.importance for r in records]
            self._access[start:end] = [r.access_count for r in records]
            self._last[start:end] = [r.last_accessed for r in records]
            self._created[start:end] = [r.created_at for r in records]
            for code4_key, rows_of_ns in by_ns.items():
                self._ns[:, np.asarray(rows_of_ns, dtype=np.int64)] = np.asarray(
                    code4_key, dtype=np.int32
                )[:, None]
                for field in range(4):
                    posting_rows = self._ns_rows[field].get(code4_key[field])
                    if posting_rows is None:
                        self._ns_rows[field][code4_key[field]] = array("q", rows_of_ns)
                    else:
                        posting_rows.extend(rows_of_ns)
            postings = self._postings
            rows_bytes = (prepared.rows + start).tobytes()
            tfs_bytes = prepared.tfs.tobytes()
            bounds = prepared.starts.tolist()
            for i, term in enumerate(prepared.terms):
                lo, hi = bounds[i], bounds[i + 1]
                posting = postings.get(term)
                if posting is None:
                    posting = postings[term] = (array("q"), array("f"))
                posting[0].frombytes(rows_bytes[lo * 8 : hi * 8])
                posting[1].frombytes(tfs_bytes[lo * 4 : hi * 4])
            self._n = end
            self._version += 1
            self._live += count
            if self._proj is None and self._approx_min is not None and end >= self._approx_min:
                self._learn_projection()

    # -- approximate first pass ------------------------------------------------------

    @property
    def approximate(self) -> bool:
        """Whether the projected vectors of the approximate first pass are kept."""
        return self._pvecs is not None

    def _project(self, vectors: F32) -> F32:
        """Projected, renormalised copies of ``vectors``."""
        assert self._proj is not None
        out: F32 = vectors @ self._proj
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _learn_projection(self) -> None:
        """Learn the projection from a sample of live rows and project every row."""
        live = np.flatnonzero(self._alive[: self._n])
        if live.size == 0:
            return
        rng = np.random.default_rng(0)
        sample = live if live.size <= _PCA_SAMPLE else np.sort(rng.choice(live, _PCA_SAMPLE, False))
        vecs = self._vecs[sample].astype(np.float64)
        moment = vecs.T @ vecs / len(sample)
        _, eigvecs = np.linalg.eigh(moment)  # ascending eigenvalues
        self._proj = np.ascontiguousarray(eigvecs[:, ::-1][:, : self._approx_dims], np.float32)
        pvecs = np.zeros((self._cap, self._approx_dims), dtype=np.float32)
        for start in range(0, self._n, 65_536):
            end = min(start + 65_536, self._n)
            pvecs[start:end] = self._project(self._vecs[start:end])
        self._pvecs = pvecs
        log.info("index.projection_learned", rows=self._n, dims=self._approx_dims)

    def _kill_row(self, row: int) -> None:
        if not self._alive[row]:
            return
        self._version += 1
        self._alive[row] = False
        self._live -= 1
        rec = self._records[row]
        if rec is not None:
            hkey = (rec.namespace.key(), rec.content_hash)
            if self._hash_row.get(hkey) == row:
                del self._hash_row[hkey]
            if self._row_of.get(rec.id) == row:
                del self._row_of[rec.id]

    def remove(self, ids: Iterable[str], *, purge: bool = False) -> int:
        """Drop memories from the index (deleted, superseded or forgotten).

        Args:
            ids: Memory ids.
            purge: Also erase the record and zero the vector in RAM (forget).

        Returns:
            How many were indexed.
        """
        removed = 0
        with self._lock:
            for mid in ids:
                row = self._row_of.get(mid)
                if row is None:
                    continue
                self._kill_row(row)
                removed += 1
                if purge:
                    self._records[row] = None
                    self._vecs[row] = 0.0
                    if self._pvecs is not None:
                        self._pvecs[row] = 0.0
        return removed

    def replace_record(self, record: MemoryRecord) -> None:
        """Swap the record of a live memory whose content did not change."""
        with self._lock:
            row = self._row_of.get(record.id)
            if row is None:
                return
            old = self._records[row]
            self._records[row] = record
            self._importance[row] = record.importance
            kind = self._kinds.code(record.kind)
            if kind != self._kind[row]:
                self._version += 1  # episode links (see _episode_links) follow kinds
            self._kind[row] = kind
            if old is not None:
                for tag in set(record.tags) - set(old.tags):
                    tag_rows = self._tag_rows.get(tag)
                    if tag_rows is None:
                        tag_rows = self._tag_rows[tag] = array("q")
                    tag_rows.append(row)

    def add_access(self, memory_id: str, delta: int) -> None:
        """Add ``delta`` to a live memory's access count (merges absorb counts)."""
        with self._lock:
            row = self._row_of.get(memory_id)
            if row is not None:
                self._access[row] += delta

    @property
    def lock(self) -> threading.RLock:
        """The index's re-entrant lock: hold it to keep row numbers stable across calls."""
        return self._lock

    def touch(self, rows: Sequence[int] | I64, now: float) -> None:
        """Count one retrieval of each row at time ``now``."""
        with self._lock:
            idx = np.asarray(rows, dtype=np.int64)
            self._access[idx] += 1
            self._last[idx] = now

    def purge_all(self) -> None:
        """Forget everything (used before a rebuild)."""
        with self._lock:
            self._proj = None
            self._reset(16)

    def compact(self) -> None:
        """Rebuild without killed rows (reclaims memory, refreshes BM25 stats).

        The learned projection is kept (and applied to the surviving rows).
        """
        with self._lock:
            live = np.flatnonzero(self._alive[: self._n])
            records = [self._current(int(r)) for r in live]
            vectors = self._vecs[live].copy()
            self._reset(max(16, len(records)))
            self.add(records, vectors)

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

    def record(self, memory_id: str) -> MemoryRecord | None:
        """The live record of ``memory_id`` (with current access figures)."""
        with self._lock:
            row = self._row_of.get(memory_id)
            return None if row is None else self._current(row)

    def records(self, rows: Sequence[int] | I64) -> list[MemoryRecord]:
        """Live records of ``rows``."""
        with self._lock:
            return [self._current(int(r)) for r in rows]

    def vector(self, memory_id: str) -> F32 | None:
        """A copy of the vector of a live memory."""
        with self._lock:
            row = self._row_of.get(memory_id)
            return None if row is None else self._vecs[row].copy()

    def row_of(self, memory_id: str) -> int | None:
        """The row of a live memory."""
        return self._row_of.get(memory_id)

    def _live_record(self, row: int) -> MemoryRecord:
        rec = self._records[row]
        assert rec is not None
        return rec

    def _doc_freq(self, term: str) -> int:
        """Rows whose content holds ``term`` (killed rows included until compaction)."""
        posting = self._postings.get(term)
        return 0 if posting is None else len(posting[0])

    def find_hash(self, key: tuple[str, str, str, str], content_hash: str) -> str | None:
        """Id of the live memory with this exact namespace and content hash."""
        with self._lock:
            row = self._hash_row.get((key, content_hash))
            if row is None:
                return None
            rec = self._records[row]
            return None if rec is None else rec.id

    def scope_rows(self, namespace: Namespace, filters: SearchFilters | None = None) -> I64:
        """Rows of live memories inside ``namespace`` that pass ``filters``."""
        with self._lock:
            return self._scope_rows(namespace, filters)

    def exact_rows(self, key: tuple[str, str, str, str]) -> I64:
        """Rows of live memories written into exactly this namespace key."""
        with self._lock:
            fields: list[tuple[int, int]] = []
            for field, value in enumerate(key):
                code = self._interners[field].get(value)
                if code < 0:
                    return np.zeros(0, dtype=np.int64)
                fields.append((field, code))
            return self._rows_matching(fields)

    def _rows_matching(self, fields: list[tuple[int, int]]) -> I64:
        n = self._n
        if not fields:
            return np.flatnonzero(self._alive[:n]).astype(np.int64, copy=False)
        sizes = []
        for field, code in fields:
            posting = self._ns_rows[field].get(code)
            if posting is None:
                return np.zeros(0, dtype=np.int64)
            sizes.append((len(posting), field, code))
        sizes.sort()
        _, field0, code0 = sizes[0]
        base = self._ns_rows[field0][code0]
        if len(base) * 4 > n:
            # A large scope: a pass over every row, so its result is cached until
            # the next change of the rows (searches in one scope repeat).
            cache_key = tuple(fields)
            cached = self._scope_cache.get(cache_key)
            if cached is not None and cached[0] == self._version:
                return cached[1]
            mask = self._alive[:n].copy()
            for field, code in fields:
                mask &= self._ns[field, :n] == code
            found = np.flatnonzero(mask).astype(np.int64, copy=False)
            found.flags.writeable = False
            if len(self._scope_cache) >= 2:
                self._scope_cache.pop(next(iter(self._scope_cache)))
            self._scope_cache[cache_key] = (self._version, found)
            return found
        rows = np.frombuffer(base, dtype=np.int64).copy()
        keep = self._alive[rows]
        for _, field, code in sizes[1:]:
            keep &= self._ns[field, rows] == code
        result: I64 = rows[keep]
        return result

    def _scope_rows(self, namespace: Namespace, filters: SearchFilters | None) -> I64:
        wanted: dict[int, str] = {}
        for field, name in enumerate(_NS_NAMES):
            value = getattr(namespace, name)
            if value is not None:
                wanted[field] = value
        if filters is not None:
            for field, value in (
                (1, filters.agent_id),
                (2, filters.run_id),
                (3, filters.session_id),
            ):
                if value is None:
                    continue
                if wanted.get(field, value) != value:
                    return np.zeros(0, dtype=np.int64)
                wanted[field] = value
        fields: list[tuple[int, int]] = []
        for field, value in wanted.items():
            code = self._interners[field].get(value)
            if code < 0:
                return np.zeros(0, dtype=np.int64)
            fields.append((field, code))
        rows = self._rows_matching(fields)
        if filters is None or rows.size == 0:
            return rows
        keep = np.ones(rows.size, dtype=bool)
        if filters.kinds is not None:
            codes = [self._kinds.get(k) for k in filters.kinds]
            keep &= np.isin(self._kind[rows], np.asarray(codes, dtype=np.int32))
        if filters.tags_any is not None:
            tagged = self._tag_mask(filters.tags_any, any_of=True)
            keep &= tagged[rows]
        if filters.tags_all is not None:
            tagged = self._tag_mask(filters.tags_all, any_of=False)
            keep &= tagged[rows]
        if filters.created_after is not None:
            keep &= self._created[rows] >= filters.created_after
        if filters.created_before is not None:
            keep &= self._created[rows] < filters.created_before
        if filters.min_importance is not None:
            keep &= self._importance[rows] >= filters.min_importance
        result: I64 = rows[keep]
        return result

    def _tag_mask(self, tags: Sequence[str], *, any_of: bool) -> npt.NDArray[np.bool_]:
        n = self._n
        acc = np.zeros(n, dtype=bool) if any_of else np.ones(n, dtype=bool)
        for tag in tags:
            mask = np.zeros(n, dtype=bool)
            posting = self._tag_rows.get(tag)
            if posting is not None:
                rows = np.frombuffer(posting, dtype=np.int64)
                mask[rows] = True
                del rows
            # A row whose tag was later removed keeps its posting entry; check the record.
            for row in np.flatnonzero(mask):
                rec = self._records[int(row)]
                if rec is None or tag not in rec.tags:
                    mask[row] = False
            if any_of:
                acc |= mask
            else:
                acc &= mask
        return acc

    def cosine(self, rows: I64, query: F32) -> F32:
        """Cosine of ``query`` with each row (vectors are normalised)."""
        if rows.size == 0:
            return np.zeros(0, dtype=np.float32)
        if rows.size * 3 > self._n:
            full: F32 = self._vecs[: self._n] @ query
            if rows.size == self._n:  # every row (ascending, unique): no gather
                return full
            out: F32 = full[rows]
            return out
        gathered: F32 = self._vecs[rows] @ query
        return gathered

    def cosine_many(self, rows: I64, queries: F32) -> F32:
        """``(len(rows), len(queries))`` cosines of each row with each query."""
        with self._lock:
            if rows.size * 3 > self._n:
                full: F32 = (self._vecs[: self._n] @ queries.T)[rows]
                return full
            out: F32 = self._vecs[rows] @ queries.T
            return out

    def bm25(self, rows: I64, terms: Sequence[str], k1: float, b: float) -> F32:
        """BM25 score of each of ``rows`` (ascending) for the query ``terms``.

        A large scope accumulates every posting into one array over all rows;
        a small one (under a quarter of the rows) intersects each posting with
        the scope by binary search instead, so its cost follows the scope and
        the posting, not the index.
        """
        n = self._n
        if rows.size == 0 or not terms or n == 0:
            return np.zeros(rows.size, dtype=np.float32)
        avgdl = self._total_len / n if self._total_len > 0 else 1.0
        small = rows.size * 4 < n
        acc = np.zeros(rows.size if small else n, dtype=np.float32)
        qcounts: dict[str, int] = {}
        for term in terms:
            qcounts[term] = qcounts.get(term, 0) + 1
        for term, qtf in qcounts.items():
            posting = self._postings.get(term)
            if posting is None:
                continue
            prow = np.frombuffer(posting[0], dtype=np.int64)
            ptf = np.frombuffer(posting[1], dtype=np.float32)
            df = prow.size
            idf = np.float32(math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * qtf)
            if small:
                # posting rows and scope rows are both ascending
                if prow.size <= rows.size:
                    pos = np.searchsorted(rows, prow)
                    np.minimum(pos, rows.size - 1, out=pos)
                    hit = rows[pos] == prow
                    at, tf, row = pos[hit], ptf[hit], prow[hit]
                else:
                    pos = np.searchsorted(prow, rows)
                    np.minimum(pos, df - 1, out=pos)
                    hit = prow[pos] == rows
                    at, tf, row = np.flatnonzero(hit), ptf[pos[hit]], rows[hit]
                if at.size:
                    acc[at] += _bm25_terms(self._doclen[row], tf, idf, k1, b, avgdl)
            else:
                acc[prow] += _bm25_terms(self._doclen[prow], ptf, idf, k1, b, avgdl)
            del prow, ptf
        if small or rows.size == n:  # (every row, ascending and unique: no gather)
            return acc
        out: F32 = acc[rows]
        return out

    def search(
        self,
        namespace: Namespace,
        terms: Sequence[str],
        query: F32 | None,
        limit: int,
        filters: SearchFilters | None,
        config: SearchConfig,
        mode: SearchMode,
        now: float,
        weights: RelevanceWeights,
        rerank: QueryRerank | None = None,
    ) -> list[Scored]:
        """Score the memories in scope and return the best ``limit``.

        See :class:`SearchConfig` for the fusion formulas; ``rerank`` is the
        optional second stage (hybrid mode).
        """
        with self._lock:
            rows = self._scope_rows(namespace, filters)
            if rows.size == 0:
                return []
            pool = max(config.candidates, limit)
            use_vec = mode in ("hybrid", "vector") and query is not None
            use_kw = mode in ("hybrid", "keyword")
            approx = (
                use_vec
                and self._pvecs is not None
                and self._approx_min is not None
                and rows.size >= self._approx_min
            )
            cos = self.cosine(rows, query) if use_vec and not approx and query is not None else None
            kw = self.bm25(rows, terms, config.bm25_k1, config.bm25_b) if use_kw else None
            cos_own, kw_own = cos, kw
            weights3 = (
                config.context_prev_weight,
                config.context_next_weight,
                config.context_prev2_weight,
            )
            if mode == "hybrid" and sum(weights3) > 0 and (cos is not None or kw is not None):
                links = self._episode_links(namespace, rows, cache=filters is None)
                if links[0].size:
                    if cos is not None:
                        cos = _with_context(cos, links, weights3)
                    if kw is not None:
                        kw = _with_context(kw, links, weights3)
            cand: set[int] = set()
            vec_rank: dict[int, int] = {}
            kw_rank: dict[int, int] = {}
            if cos is not None:
                top = _top(cos, pool)
                for rank, i in enumerate(top, 1):
                    vec_rank[int(i)] = rank
                cand.update(vec_rank)
            elif approx and query is not None:
                top, _ = self._approx_top(rows, query, pool)
                for rank, i in enumerate(top, 1):
                    vec_rank[int(i)] = rank
                cand.update(vec_rank)
            if kw is not None:
                top = _top(kw, pool)
                top = top[kw[top] > 0]
                for rank, i in enumerate(top, 1):
                    kw_rank[int(i)] = rank
                cand.update(kw_rank)
            if not cand:
                return []
            idx = np.fromiter(cand, dtype=np.int64, count=len(cand))
            crow = rows[idx]
            if cos is not None:
                c_cos = cos[idx].astype(np.float64)
            elif approx and query is not None:  # exact cosines of the candidates
                c_cos = (self._vecs[crow] @ query).astype(np.float64)
            else:
                c_cos = np.zeros(idx.size)
            c_kw = kw[idx].astype(np.float64) if kw is not None else np.zeros(idx.size)
            shown_cos = shown_kw = None
            if cos is not cos_own and cos_own is not None:
                shown_cos = cos_own[idx].astype(np.float64)
            if kw is not kw_own and kw_own is not None:
                shown_kw = kw_own[idx].astype(np.float64)
            return rank_candidates(
                rows=crow,
                cosine=c_cos,
                bm25=c_kw,
                vec_rank=np.array([vec_rank.get(int(i), 0) for i in idx], dtype=np.float64),
                kw_rank=np.array([kw_rank.get(int(i), 0) for i in idx], dtype=np.float64),
                importance=self._importance[crow],
                access=self._access[crow],
                last=self._last[crow],
                created=self._created[crow],
                limit=limit,
                config=config,
                use_vec=use_vec,
                use_kw=kw is not None,
                now=now,
                weights=weights,
                rerank=rerank,
                records=lambda top: [self._live_record(int(r)) for r in crow[top]],
                doc_freq=self._doc_freq,
                n_docs=self._n,
                shown_cosine=shown_cos,
                shown_bm25=shown_kw,
            )

    def _episode_links(self, namespace: Namespace, rows: I64, *, cache: bool) -> _Links:
        """Positions ``(a, b)`` in ``rows`` of consecutive episodes (``a`` added just before ``b``).

        Two episodes of one concrete namespace are linked when no other
        episode of that namespace lies between them in the index (the order
        they were added in, which a rebuild keeps: it reads rows by creation
        time, ties in insertion order).  Memories of other kinds, and
        episodes of other namespaces of the scope, between them do not break
        the link.  Cached per scope until the index changes (``cache``: the
        scope has no filters).

        Returns:
            ``(before, after, before2, after2)``: ``before[i]`` is the
            episode just before ``after[i]``; ``before2[i]`` the one two
            episodes before ``after2[i]``.
        """
        key = namespace.key()
        if cache:
            hit = self._links_cache.get(key)
            if hit is not None and hit[0] == self._version:
                return hit[1]
        empty = np.zeros(0, dtype=np.int64)
        before, after = empty, empty
        code = self._kinds.get("episode")
        if code >= 0:
            ep = np.flatnonzero(self._kind[rows] == code)
            if ep.size >= 2:
                # Fields the scope leaves open: its rows may differ in them.
                codes = [self._ns[f, rows[ep]] for f, value in enumerate(key) if not value]
                if codes:  # group by concrete namespace, in row order within each
                    ep = ep[np.lexsort((ep, *codes[::-1]))]
                before, after = ep[:-1], ep[1:]
                same = np.ones(before.size, dtype=bool)
                for field, value in enumerate(key):
                    if not value:
                        same &= self._ns[field, rows[before]] == self._ns[field, rows[after]]
                before, after = before[same], after[same]
        prev = np.full(rows.size, -1, dtype=np.int64)
        prev[after] = before
        two = prev[before]
        has_two = two >= 0
        links = (before, after, two[has_two], after[has_two])
        if cache:
            if len(self._links_cache) >= 64:
                self._links_cache.clear()
            self._links_cache[key] = (self._version, links)
        return links

    def _approx_top(self, rows: I64, query: F32, k: int) -> tuple[I64, F32]:
        """Positions in ``rows`` of the (approximately) ``k`` nearest, best first.

        Ranks by the projected cosine, re-scores the best ``approx_rerank``
        with the full vectors; returns the positions and their exact cosines.
        """
        assert self._proj is not None and self._pvecs is not None
        qp = query @ self._proj
        if rows.size == self._n:
            coarse: F32 = self._pvecs[: self._n] @ qp
        elif rows.size * 3 > self._n:
            coarse = (self._pvecs[: self._n] @ qp)[rows]
        else:
            coarse = self._pvecs[rows] @ qp
        first = _top(coarse, max(self._approx_rerank, k))
        exact: F32 = self._vecs[rows[first]] @ query
        order = _top(exact, k)
        out: I64 = first[order]
        return out, exact[order]

    def nearest(self, namespace: Namespace, query: F32, k: int, *, exact: bool = False) -> I64:
        """Rows of the ``k`` live memories in scope nearest to ``query``, best first.

        Uses the approximate first pass like :meth:`search` unless ``exact``
        (the benchmark compares the two).
        """
        with self._lock:
            rows = self._scope_rows(namespace, None)
            if rows.size == 0:
                return rows
            if (
                not exact
                and self._pvecs is not None
                and self._approx_min is not None
                and rows.size >= self._approx_min
            ):
                top, _ = self._approx_top(rows, query, k)
            else:
                top = _top(self.cosine(rows, query), k)
            out: I64 = rows[top]
            return out

    def relevance_of(self, rows: I64, now: float, weights: RelevanceWeights) -> F64:
        """Relevance of ``rows`` at ``now``."""
        with self._lock:
            return relevance(
                self._importance[rows],
                self._access[rows],
                self._last[rows],
                self._created[rows],
                now,
                weights,
            )

    def arrays(self, rows: I64) -> dict[str, npt.NDArray[np.float64]]:
        """Copies of the scoring arrays for ``rows`` (importance, access, last, created)."""
        with self._lock:
            return {
                "importance": self._importance[rows].copy(),
                "access": self._access[rows].copy(),
                "last": self._last[rows].copy(),
                "created": self._created[rows].copy(),
            }

    def vectors(self, rows: I64) -> F32:
        """Copies of the vectors of ``rows``."""
        with self._lock:
            out: F32 = self._vecs[rows].copy()
            return out


def _with_context(scores: F32, links: _Links, weights: tuple[float, float, float]) -> F32:
    """Blend each linked position's score with its neighbours' (see ``context_prev_weight``).

    ``(s + wp * s_prev + wn * s_next + wp2 * s_prev2) / (1 + wp + wn + wp2)``,
    where a position without such a neighbour leaves that term out of both
    sums, so memories that are not episodes keep their score.
    """
    before, after, before2, after2 = links
    out = scores.copy()
    den = np.ones(scores.size, dtype=np.float32)
    for w, src, dst in (
        (weights[0], before, after),
        (weights[1], after, before),
        (weights[2], before2, after2),
    ):
        if w:
            out[dst] += np.float32(w) * scores[src]
            den[dst] += np.float32(w)
    out /= den
    return out


def _bm25_terms(dl: F32, tf: F32, idf: np.float32, k1: float, b: float, avgdl: float) -> F32:
    """``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``, computed in ``dl``."""
    dl *= np.float32(k1 * b / avgdl)
    dl += np.float32(k1 * (1.0 - b))
    dl += tf
    np.divide(tf, dl, out=dl)
    dl *= idf * np.float32(k1 + 1.0)
    return dl


def _top(scores: F32, k: int) -> I64:
    """Indices of the ``k`` largest scores, best first.

    On large arrays a threshold taken from a strided subsample (its ``k``-th
    largest value, so at least ``k`` scores reach it) cuts the array down to
    a few thousand candidates before the exact selection.
    """
    n = scores.size
    if n <= k:
        order: I64 = np.argsort(-scores, kind="stable")
        return order
    cand: I64 | None = None
    stride = min(32, n // (16 * k))
    if stride >= 4:
        sub = scores[::stride]
        threshold = np.partition(sub, sub.size - k)[sub.size - k]
        cand = np.flatnonzero(scores >= threshold)
    if cand is None or cand.size > n // 4:
        part = np.argpartition(-scores, k - 1)[:k]
        part.sort()
    else:
        vals = scores[cand]
        if cand.size > k:
            keep = np.argpartition(-vals, k - 1)[:k]
            keep.sort()
            cand, vals = cand[keep], vals[keep]
        part = cand
    result: I64 = part[np.argsort(-scores[part], kind="stable")]
    return result
