"""The in-memory search index that sits beside the DuckDB file.

DuckDB is the store of record; this index is a derived copy of the *live*
memories (not deleted, not superseded), rebuilt from the file on open and
updated by the store right after every committed write, before the write
returns -- so a memory is found by the very next search (read-your-writes).

The index is one class, :class:`MemoryIndex`, assembled from private modules
by responsibility: the row layout (:mod:`._index_rows`), vector search and
its approximate first pass (:mod:`._index_vectors`), scopes and episode
links (:mod:`._index_scope`), and BM25 tokenizing (:mod:`._tokenize`).  This
module holds the writes, BM25 scoring and the search that fuses them.

Keyword search is BM25 over an inverted index kept here (``term -> rows,
term frequencies`` in compact ``array`` buffers, read as numpy views).  DuckDB's
FTS extension was not used: its index must be rebuilt to see new rows (~1 s at
100k) and its tokenizer drops digits.  A killed row stays in the postings
until the next compaction, but not in the statistics: its terms (tokenized
again when it is killed) and its length are counted out, so document
frequencies, the collection size and the average length are those of the live
rows, as in an index rebuilt from the file, and writes stay O(terms).

All methods take the index's own lock; numpy releases the GIL in the matrix
product, the lock keeps the arrays consistent.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from actormem.store._index_keys import KeyRows, rows_of
from actormem.store._index_rows import APPROX_MIN_ROWS, F32, F64, I64
from actormem.store._index_scope import ScopeSearch, with_context
from actormem.store._index_vectors import Context, VectorSearch, top_k
from actormem.store._ranking import Scored, rank_candidates
from actormem.store._relevance import RelevanceWeights, relevance
from actormem.store._tokenize import STOPWORDS, Prepared, prepare, tokenize
from actormem.store._types import MemoryRecord, Namespace, SearchConfig, SearchFilters, SearchMode

if TYPE_CHECKING:
    from actormem.store._rerank import QueryRerank

__all__ = [
    "APPROX_MIN_ROWS",
    "STOPWORDS",
    "MemoryIndex",
    "Prepared",
    "Scored",
    "prepare",
    "tokenize",
]


def _all_new(row_of: MutableMapping[str, int], ids: list[str]) -> bool:
    """Whether none of ``ids`` has a row (a loaded key map is searched once for all)."""
    if isinstance(row_of, KeyRows):
        return all(row is None for row in row_of.rows_of(ids))
    return row_of.keys().isdisjoint(ids)


class MemoryIndex(ScopeSearch, VectorSearch):
    """Vectors, BM25 postings and scoring data of the live memories.

    See :mod:`actormem.store._index_vectors` for the approximate first pass
    of large scopes and :mod:`actormem.store._index_rows` for the layout.
    """

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
                all(r.namespace is first_ns or r.namespace == first_ns for r in records)
                and not any(r.tags for r in records)
                and len(set(ids)) == count
                and _all_new(row_of, ids)
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
            if count == 1:  # a single write: scalar stores, no list per array
                rec = records[0]
                self._kind[start] = kinds[0]
                doclen = float(prepared.doclen[0])
                self._doclen[start] = doclen
                self._total_len += doclen
                self._importance[start] = rec.importance
                self._access[start] = rec.access_count
                self._last[start] = rec.last_accessed
                self._created[start] = rec.created_at
            else:
                self._kind[start:end] = kinds
                self._doclen[start:end] = prepared.doclen
                self._total_len += float(prepared.doclen.sum())
                self._importance[start:end] = [r.importance for r in records]
                self._access[start:end] = [r.access_count for r in records]
                self._last[start:end] = [r.last_accessed for r in records]
                self._created[start:end] = [r.created_at for r in records]
            for code4_key, rows_of_ns in by_ns.items():
                if len(rows_of_ns) == 1:  # a single write: four scalar stores, no fancy index
                    for field in range(4):
                        self._ns[field, rows_of_ns[0]] = code4_key[field]
                else:
                    self._ns[:, np.asarray(rows_of_ns, dtype=np.int64)] = np.asarray(
                        code4_key, dtype=np.int32
                    )[:, None]
                exact = self._exact_rows.get(code4_key)
                if exact is not None:
                    exact.extend(rows_of_ns)
                for field in range(4):
                    posting_rows = self._ns_rows[field].get(code4_key[field])
                    if posting_rows is None:
                        self._ns_rows[field][code4_key[field]] = array("q", rows_of_ns)
                    else:
                        posting_rows.extend(rows_of_ns)
            postings = self._postings
            if prepared.counts is not None and count == 1:  # one record: one row per term
                for term, tf in zip(prepared.terms, prepared.counts, strict=True):
                    posting = postings.get(term)
                    if posting is None or not isinstance(posting[0], array):
                        posting = self._own_posting(term)
                    posting[0].append(start)  # type: ignore[union-attr]
                    posting[1].append(tf)  # type: ignore[union-attr]
            else:
                rows_bytes = (prepared.rows + start).tobytes()
                tfs_bytes = prepared.tfs.tobytes()
                bounds = prepared.starts.tolist()
                for i, term in enumerate(prepared.terms):
                    lo, hi = bounds[i], bounds[i + 1]
                    posting = postings.get(term)
                    if posting is None or not isinstance(posting[0], array):
                        posting = self._own_posting(term)
                    posting[0].frombytes(rows_bytes[lo * 8 : hi * 8])  # type: ignore[union-attr]
                    posting[1].frombytes(tfs_bytes[lo * 4 : hi * 4])  # type: ignore[union-attr]
            self._n = end
            self._version += 1
            self._live += count
            if self._proj is None and self._approx_min is not None and end >= self._approx_min:
                self._learn_projection()

    def _own_posting(self, term: str) -> tuple[array[int], array[float]]:
        """The posting of ``term`` as arrays a write can extend (new, or copied out
        of a loaded snapshot's read-only view)."""
        posting = self._postings.get(term)
        rows, tfs = array("q"), array("f")
        if posting is not None:  # a view of a loaded snapshot
            rows.frombytes(posting[0].cast("B"))  # type: ignore[union-attr]
            tfs.frombytes(posting[1].cast("B"))  # type: ignore[union-attr]
        self._postings[term] = (rows, tfs)
        return rows, tfs

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
            wanted = list(dict.fromkeys(ids))  # each id once
            for row in rows_of(self._row_of, wanted):
                if row is None:
                    continue
                self._kill_row(row)
                removed += 1
                if purge:
                    if row < self._base_rows:  # the base file still holds it: rewrite
                        self._base_rows = -1
                    self._records[row] = None
                    self._vecs[row] = 0.0
                    if self._pvecs is not None:
                        self._pvecs[row] = 0.0
        return removed

    def replace_record(self, record: MemoryRecord, *, row: int | None = None) -> None:
        """Swap the record of a live memory whose content did not change.

        ``row``: the memory's row, when the caller knows it (a delta's load).
        """
        with self._lock:
            if row is None:
                row = self._row_of.get(record.id)
            if row is None:
                return
            old = self._records[row]
            self._records[row] = record
            if row < self._base_rows:
                self._dirty.add(row)
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
                if row < self._base_rows:
                    self._dirty.add(row)

    def touch(self, rows: Sequence[int] | I64, now: float) -> None:
        """Count one retrieval of each row at time ``now``."""
        with self._lock:
            idx = np.asarray(rows, dtype=np.int64)
            self._access[idx] += 1
            self._last[idx] = now
            if self._base_rows > 0:
                self._dirty.update(idx[idx < self._base_rows].tolist())

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

    def find_hash(self, key: tuple[str, str, str, str], content_hash: str) -> str | None:
        """Id of the live memory with this exact namespace and content hash."""
        with self._lock:
            row = self._hash_row.get((key, content_hash))
            if row is None:
                return None
            rec = self._records[row]
            return None if rec is None else rec.id

    def bm25(self, rows: I64, terms: Sequence[str], k1: float, b: float) -> F32:
        """BM25 score of each of ``rows`` (ascending) for the query ``terms``.

        A large scope accumulates every posting into one array over all rows;
        a small one (under a quarter of the rows) intersects each posting with
        the scope by binary search instead, so its cost follows the scope and
        the posting, not the index.
        """
        n = self._n
        if rows.size == 0 or not terms or n == 0 or self._live == 0:
            return np.zeros(rows.size, dtype=np.float32)
        # the collection is the live rows: killed ones are counted out
        docs = self._live
        live_len = self._total_len - self._dead_len
        avgdl = live_len / docs if live_len > 0 else 1.0
        dead_df = self._dead_df
        small = rows.size * 4 < n
        acc = np.zeros(rows.size if small else n, dtype=np.float32)
        qcounts: dict[str, int] = {}
        for term in terms:
            qcounts[term] = qcounts.get(term, 0) + 1
        found = [(term, qtf, p) for term, qtf in qcounts.items() if (p := self._postings.get(term))]
        # The longest posting first: over all rows it is written, not added (a
        # scatter-add reads and writes every row again: ~0.13 ms for a term in
        # 37% of 100k rows, against ~0.05 ms written).
        found.sort(key=lambda tp: -len(tp[2][0]))
        written = small
        for term, qtf, posting in found:
            prow = np.frombuffer(posting[0], dtype=np.int64)
            ptf = np.frombuffer(posting[1], dtype=np.float32)
            df = prow.size - dead_df.get(term, 0)
            idf = np.float32(math.log(1.0 + (docs - df + 0.5) / (df + 0.5)) * qtf)
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
            elif written:
                acc[prow] += _bm25_terms(self._doclen[prow], ptf, idf, k1, b, avgdl)
            else:  # a posting's rows are unique: the first one is written into zeros
                acc[prow] = _bm25_terms(self._doclen[prow], ptf, idf, k1, b, avgdl)
                written = True
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
            context: Context | None = None
            if mode == "hybrid" and sum(weights3) > 0 and (use_vec or kw is not None):
                links = self._episode_links(namespace, rows, cache=filters is None)
                if links[0].size:
                    if cos is not None:
                        cos = with_context(cos, links, weights3)
                    elif approx:  # the first pass blends the cosines it computes
                        context = Context(links, weights3, rows.size)
                    if kw is not None:
                        kw = with_context(kw, links, weights3)
            # Each retriever's best ``pool`` positions, best first; the candidates
            # are their union (ascending) and each one's 1-based rank in either
            # list (0: absent) is found by binary search, not a dict per position.
            vec_top: I64 | None = None
            kw_top: I64 | None = None
            if cos is not None:
                vec_top = top_k(cos, pool)
            elif approx and query is not None:
                vec_top, _ = self._approx_top(rows, query, pool, context)
            if kw is not None:
                kw_top = top_k(kw, pool)
                kw_top = kw_top[kw[kw_top] > 0]
            idx, vec_rank, kw_rank = _union_ranks(vec_top, kw_top)
            if idx.size == 0:
                return []
            crow = rows[idx]
            shown_cos = shown_kw = None
            if cos is not None:
                c_cos = cos[idx].astype(np.float64)
            elif approx and query is not None:  # exact scores of the candidates
                blended, own = self._exact_scores(rows, idx, query, context)
                c_cos = blended.astype(np.float64)
                if context is not None:
                    shown_cos = own.astype(np.float64)
            else:
                c_cos = np.zeros(idx.size)
            c_kw = kw[idx].astype(np.float64) if kw is not None else np.zeros(idx.size)
            if cos is not cos_own and cos_own is not None:
                shown_cos = cos_own[idx].astype(np.float64)
            if kw is not kw_own and kw_own is not None:
                shown_kw = kw_own[idx].astype(np.float64)
            return rank_candidates(
                rows=crow,
                cosine=c_cos,
                bm25=c_kw,
                vec_rank=vec_rank,
                kw_rank=kw_rank,
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
                records=lambda top: [self._live_record(r) for r in crow[top].tolist()],
                ids=lambda pos: [self._live_record(r).id for r in crow[pos].tolist()],
                doc_freq=self._doc_freq,
                n_docs=self._live,
                shown_cosine=shown_cos,
                shown_bm25=shown_kw,
            )

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
                top = top_k(self.cosine(rows, query), k)
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


def _union_ranks(vec_top: I64 | None, kw_top: I64 | None) -> tuple[I64, F64, F64]:
    """The union (ascending) of the two retrievers' best positions, and each union
    member's 1-based rank in ``vec_top`` and in ``kw_top`` (0: not in that list).

    A few numpy calls over the ~200 positions (``np.unique``'s own overhead is
    several times its work at this size; a dict per position was ~0.25 ms).
    """
    tops = [t for t in (vec_top, kw_top) if t is not None and t.size]
    if not tops:
        empty = np.zeros(0, dtype=np.float64)
        return np.zeros(0, dtype=np.int64), empty, empty
    both = np.concatenate(tops) if len(tops) > 1 else tops[0].copy()
    both.sort()
    first = np.empty(both.size, dtype=bool)
    first[0] = True
    np.not_equal(both[1:], both[:-1], out=first[1:])
    union: I64 = both[first]

    def ranks(top: I64 | None) -> F64:
        rank = np.zeros(union.size, dtype=np.float64)
        if top is not None and top.size:
            rank[np.searchsorted(union, top)] = np.arange(1, top.size + 1, dtype=np.float64)
        return rank

    return union, ranks(vec_top), ranks(kw_top)


def _bm25_terms(dl: F32, tf: F32, idf: np.float32, k1: float, b: float, avgdl: float) -> F32:
    """``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``, computed in ``dl``."""
    dl *= np.float32(k1 * b / avgdl)
    dl += np.float32(k1 * (1.0 - b))
    dl += tf
    np.divide(tf, dl, out=dl)
    dl *= idf * np.float32(k1 + 1.0)
    return dl
