"""One scope's first-stage copy in a process: vectors, BM25 postings and filter columns.

:class:`ScopeIndex` holds the live rows of one searched scope as the
PostgreSQL backend's search cache copied them (:mod:`actormem.store._pg_cache`
keeps it exact through the database's change feed): ids, the embeddings as
one float32 matrix, per-term postings built from the rows' stored ``terms``
/ ``tfs`` / ``doclen`` (never tokenized again), and the columns the search
filters read.  It answers the *first stage* of a search exactly as the SQL
path (:func:`actormem.store._pg_search.collect`) does -- the same candidates
in the same order: the scope's BM25 statistics (live rows, total length,
document frequencies) over the scope's live rows, BM25 in float64 with the
SQL statement's formula and order of operations, each retriever's best
``pool`` ordered by score then id, a keyword candidate only with a score
above 0.  Vector candidates are ranked by float32 products of the stored
(normalised) vectors; the reported cosines are pgvector's, read with the
candidates' rows.

A changed row is killed and appended again (rows never change in place), so
postings and tag lists only grow between compactions and a row's entries are
always its current values; killed rows are skipped by the ``alive`` mask and
compacted away once they outnumber the live ones.  The top-``k`` selection
and the tie rule are shared with the DuckDB index's (:func:`top_k`).
"""

from __future__ import annotations

import math
import sys
import threading
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from actormem.store._blas import SINGLE_THREAD_MAX_ROWS, unsplit_matmul
from actormem.store._index_vectors import top_k
from actormem.store._pg_search import FirstStageQuery
from actormem.store._types import Namespace, SearchFilters

__all__ = ["LOAD_COLUMNS", "FirstStage", "ScopeIndex"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: The columns a copy is built from, in the order :meth:`ScopeIndex.apply` reads them.
LOAD_COLUMNS: Final = (
    "id, agent_id, run_id, session_id, kind, tags, importance, created_at, "
    "(deleted_at IS NULL AND superseded_by IS NULL), terms, tfs, doclen, embedding"
)

_EPISODE: Final = "episode"
_FILTER_NS: Final = ((0, "agent_id"), (1, "run_id"), (2, "session_id"))


class FirstStage:
    """Candidates of one search: ids (vector side first), ranks, BM25 and statistics."""

    __slots__ = ("bm25", "df", "episodes", "ids", "kw_rank", "n_docs", "vec_rank")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.vec_rank: dict[str, int] = {}
        self.kw_rank: dict[str, int] = {}
        self.bm25: dict[str, float] = {}
        self.df: dict[str, int] = {}
        self.n_docs = 0
        self.episodes = 0


class ScopeIndex:
    """The live rows of one scope (module docstring); methods hold :attr:`lock`."""

    def __init__(self, scope: Namespace, dim: int, snapshot: str, xmin: int) -> None:
        self.scope = scope
        self.dim = dim
        self.lock = threading.RLock()
        #: The database snapshot this copy is exact for (``pg_current_snapshot()`` text).
        self.snapshot = snapshot
        self.xmin = xmin
        #: The storage files of the tables the copy was read from (``_pg_cache._EPOCH``).
        self.epoch = ""
        self._reset(64)

    def _reset(self, cap: int) -> None:
        self._cap = cap
        self._n = 0
        self._live = 0
        self._total_len = 0.0
        self._episodes = 0
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}
        self._alive = np.zeros(cap, dtype=bool)
        self._vecs = np.zeros((cap, self.dim), dtype=np.float32)
        self._ns = np.zeros((3, cap), dtype=np.int32)
        self._kind = np.zeros(cap, dtype=np.int32)
        self._importance = np.zeros(cap, dtype=np.float64)
        self._created = np.zeros(cap, dtype=np.int64)
        self._doclen = np.zeros(cap, dtype=np.float64)
        self._codes: list[dict[str, int]] = [{}, {}, {}]
        self._kinds: dict[str, int] = {}
        self._tags: dict[str, array[int]] = {}
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
        #: Bytes of the Python objects held (id, term, tag and code strings, the postings'
        #: and tag lists' arrays), kept as rows are appended (:meth:`nbytes`).
        self._obj_bytes = 0

    # -- size -------------------------------------------------------------------------

    @property
    def live(self) -> int:
        """Live rows held."""
        return self._live

    @property
    def rows(self) -> int:
        """Rows held, killed ones included (what the memory budget counts)."""
        return self._n

    @property
    def episodes(self) -> int:
        """Live episodes held."""
        return self._episodes

    def nbytes(self) -> int:
        """Bytes this copy holds -- what the cache's budget counts.

        The numpy arrays' buffers (allocated capacity), the id strings with
        their list and map, the postings' and tag lists' ``array`` objects with
        their terms and maps, and the filter columns' codes: each object's
        ``sys.getsizeof`` when it was added, an array's entries as they are
        appended (its spare capacity is counted when the copy is loaded or
        compacted: :meth:`measure`).  Constant time.  What it leaves out --
        the allocator's own overhead and free lists -- is what a process's
        resident memory adds on top (measured by ``benchmarks/bench_pg_cache.py``).
        """
        arrays = (
            self._alive.nbytes
            + self._vecs.nbytes
            + self._ns.nbytes
            + self._kind.nbytes
            + self._importance.nbytes
            + self._created.nbytes
            + self._doclen.nbytes
        )
        maps = sys.getsizeof(self._ids) + sys.getsizeof(self._row_of)
        maps += sys.getsizeof(self._postings) + sys.getsizeof(self._tags)
        return arrays + maps + self._obj_bytes

    def measure(self) -> int:
        """Count the Python objects' bytes again, exactly (spare array capacity included);
        returns :meth:`nbytes`.  Linear in the terms and rows held: run after a load."""
        with self.lock:
            size = sys.getsizeof
            total = sum(size(mid) for mid in self._ids)  # killed rows' ids stay until compacted
            for term, (rows, tfs) in self._postings.items():
                total += size(term) + size((rows, tfs)) + size(rows) + size(tfs)
            for tag, tag_rows in self._tags.items():
                total += size(tag) + size(tag_rows)
            for codes in (*self._codes, self._kinds):
                total += size(codes) + sum(size(v) for v in codes)
            self._obj_bytes = total
        return self.nbytes()

    # -- changes ----------------------------------------------------------------------

    def apply(self, rows: Iterable[Sequence[Any]], gone: Iterable[str] = ()) -> int:
        """Apply hard deletes (``gone`` ids), then rows in :data:`LOAD_COLUMNS` order.

        A row replaces the held row of its id; a row that is no longer live
        (deleted or superseded) only removes it.  Returns the rows applied.
        """
        count = 0
        with self.lock:
            for mid in gone:
                self._kill(mid)
                count += 1
            batch = [r for r in rows]
            count += len(batch)
            for r in batch:
                self._kill(str(r[0]))
            fresh = [r for r in batch if r[8]]
            if fresh:
                self._append(fresh)
            if self._n - self._live > max(1024, self._live):
                self._compact()
                self.measure()
        return count

    def _kill(self, mid: str) -> None:
        row = self._row_of.pop(mid, None)
        if row is None:
            return
        self._alive[row] = False
        self._live -= 1
        self._total_len -= float(self._doclen[row])
        if self._kind[row] == self._kinds.get(_EPISODE, -1):
            self._episodes -= 1

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, self._cap * 2)
        for name in ("_alive", "_kind", "_importance", "_created", "_doclen"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)
        vecs = np.zeros((cap, self.dim), dtype=np.float32)
        vecs[: self._n] = self._vecs[: self._n]
        self._vecs = vecs
        ns = np.zeros((3, cap), dtype=np.int32)
        ns[:, : self._n] = self._ns[:, : self._n]
        self._ns = ns
        self._cap = cap

    def _code(self, field: int, value: str) -> int:
        codes = self._codes[field]
        code = codes.get(value)
        if code is None:
            code = codes[value] = len(codes)
            self._obj_bytes += sys.getsizeof(value) + 64  # the map's entry, amortised
        return code

    def _append(self, rows: Sequence[Sequence[Any]]) -> None:
        start = self._n
        end = start + len(rows)
        self._grow(end)
        kinds = self._kinds
        size = sys.getsizeof
        empty = size(array("q")) + size(array("i")) + size((0, 0))
        added = 0
        for offset, r in enumerate(rows):
            row = start + offset
            mid = str(r[0])
            added += size(mid)
            self._ids.append(mid)
            self._row_of[mid] = row
            for field, col in ((0, 1), (1, 2), (2, 3)):
                self._ns[field, row] = self._code(field, r[col])
            kind = kinds.get(r[4])
            if kind is None:
                kind = kinds[r[4]] = len(kinds)
                added += size(r[4]) + 64
            self._kind[row] = kind
            if r[4] == _EPISODE:
                self._episodes += 1
            for tag in set(r[5] or ()):
                tag_rows = self._tags.get(tag)
                if tag_rows is None:
                    tag_rows = self._tags[tag] = array("q")
                    added += size(tag) + size(tag_rows)
                tag_rows.append(row)
                added += 8
            self._importance[row] = float(r[6])
            self._created[row] = int(r[7])
            self._doclen[row] = float(r[11])
            self._total_len += float(r[11])
            postings = self._postings
            for term, tf in zip(r[9], r[10], strict=True):
                posting = postings.get(term)
                if posting is None:
                    posting = postings[term] = (array("q"), array("i"))
                    added += size(term) + empty
                posting[0].append(row)
                posting[1].append(tf)
                added += 12
            vec = r[12]
            if vec is not None:  # pgvector's binary loader gives a Vector, text an array
                self._vecs[row] = vec.to_numpy() if hasattr(vec, "to_numpy") else vec
        self._alive[start:end] = True
        self._live += len(rows)
        self._n = end
        self._obj_bytes += added

    def _compact(self) -> None:
        """Rebuild without killed rows."""
        live = np.flatnonzero(self._alive[: self._n])
        kind_names = {code: name for name, code in self._kinds.items()}
        names = [{c: v for v, c in codes.items()} for codes in self._codes]
        row_tags: dict[int, list[str]] = {}
        for tag, tag_rows in self._tags.items():
            for row in tag_rows:
                if self._alive[row]:
                    row_tags.setdefault(row, []).append(tag)
        row_terms: dict[int, tuple[list[str], list[int]]] = {}
        for term, (prow, ptf) in self._postings.items():
            for row, tf in zip(prow, ptf, strict=True):
                if self._alive[row]:
                    got = row_terms.setdefault(row, ([], []))
                    got[0].append(term)
                    got[1].append(tf)
        rows = []
        for row in live.tolist():
            terms, tfs = row_terms.get(row, ([], []))
            rows.append(
                (
                    self._ids[row],
                    names[0][int(self._ns[0, row])],
                    names[1][int(self._ns[1, row])],
                    names[2][int(self._ns[2, row])],
                    kind_names[int(self._kind[row])],
                    row_tags.get(row, []),
                    float(self._importance[row]),
                    int(self._created[row]),
                    True,
                    terms,
                    tfs,
                    int(self._doclen[row]),
                    self._vecs[row].copy(),
                )
            )
        self._reset(max(64, len(rows)))
        if rows:
            self._append(rows)

    # -- search -----------------------------------------------------------------------

    def _scope_mask(self, filters: SearchFilters | None) -> npt.NDArray[np.bool_] | None:
        """Live rows passing ``filters`` (``None``: the filters exclude everything)."""
        n = self._n
        mask = self._alive[:n].copy()
        if filters is None:
            return mask
        for field, name in _FILTER_NS:
            value = getattr(filters, name)
            if value is None:
                continue
            fixed = getattr(self.scope, name)
            if fixed is not None:
                if fixed != value:
                    return None
                continue
            code = self._codes[field].get(value)
            if code is None:
                return None
            mask &= self._ns[field, :n] == code
        if filters.kinds is not None:
            codes = [self._kinds[k] for k in filters.kinds if k in self._kinds]
            mask &= np.isin(self._kind[:n], np.asarray(codes, dtype=np.int32))
        if filters.tags_any is not None:
            any_mask = np.zeros(n, dtype=bool)
            for tag in filters.tags_any:
                tag_rows = self._tags.get(tag)
                if tag_rows is not None:
                    any_mask[np.frombuffer(tag_rows, dtype=np.int64)] = True
            mask &= any_mask
        if filters.tags_all is not None:
            for tag in filters.tags_all:
                tag_rows = self._tags.get(tag)
                all_mask = np.zeros(n, dtype=bool)
                if tag_rows is not None:
                    all_mask[np.frombuffer(tag_rows, dtype=np.int64)] = True
                mask &= all_mask
        # as the SQL filters compare: microseconds / 1e6 in float8
        created = self._created[:n].astype(np.float64) / 1_000_000
        if filters.created_after is not None:
            mask &= created >= float(filters.created_after)
        if filters.created_before is not None:
            mask &= created < float(filters.created_before)
        if filters.min_importance is not None:
            mask &= self._importance[:n] >= float(filters.min_importance)
        return mask

    def _best(self, scores: F64 | F32, rows: I64, pool: int) -> list[int]:
        """Up to ``pool`` of ``rows`` by ``scores`` (descending), ties by id, as ``ORDER BY
        score DESC, id``."""
        if rows.size == 0:
            return []
        take = min(rows.size, pool)
        top = top_k(scores, take)  # type: ignore[arg-type]
        kth = scores[top[-1]]
        # every row tied with the last one taken competes on its id
        tied = np.flatnonzero(scores == kth)
        sure = top[scores[top] > kth]
        ids = self._ids
        rest = sorted(tied.tolist(), key=lambda i: ids[int(rows[i])])
        chosen = sure.tolist() + rest[: take - sure.size]
        chosen.sort(key=lambda i: (-float(scores[i]), ids[int(rows[i])]))
        return [int(rows[i]) for i in chosen]

    def first_stage(self, q: FirstStageQuery) -> FirstStage:
        """The candidates of one search, as :func:`~actormem.store._pg_search.collect`'s
        plain branch finds them (module docstring); call with :attr:`lock` held."""
        terms, pool, filters, df_terms = q.terms, q.pool, q.filters, q.df_terms
        use_vec, use_kw, k1, b = q.vec_on, q.use_kw, q.k1, q.b
        qvec = q.qvec if use_vec else None
        out = FirstStage()
        out.n_docs = self._live
        out.episodes = self._episodes
        qcounts: dict[str, int] = {}
        if use_kw:
            for term in terms:
                qcounts[term] = qcounts.get(term, 0) + 1
        n = self._n
        alive = self._alive[:n]
        docs = float(self._live)
        wanted = list(qcounts) + [t for t in dict.fromkeys(df_terms) if t not in qcounts]
        postings: dict[str, tuple[I64, npt.NDArray[np.int32]]] = {}
        for term in wanted:
            posting = self._postings.get(term)
            if posting is None:
                out.df[term] = 0
                continue
            prow = np.frombuffer(posting[0], dtype=np.int64)
            ptf = np.frombuffer(posting[1], dtype=np.int32)
            keep = alive[prow]
            prow, ptf = prow[keep], ptf[keep]
            out.df[term] = int(prow.size)
            if term in qcounts:
                postings[term] = (prow, ptf)
        mask = self._scope_mask(filters)
        if mask is None or n == 0 or self._live == 0:
            return out
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return out
        chosen: dict[int, None] = {}
        if use_vec and qvec is not None:
            qvec = np.asarray(qvec, dtype=np.float32)  # a float64 query would copy the matrix
            # the DuckDB index's BLAS rule: a small product in blocks OpenBLAS
            # does not split, on any thread (see actormem.store._blas)
            product = n if rows.size * 3 > n else int(rows.size)
            mul = np.matmul if product > SINGLE_THREAD_MAX_ROWS else unsplit_matmul
            if rows.size * 3 > n:
                cos: F32 = mul(self._vecs[:n], qvec)[rows]
            else:
                cos = mul(self._vecs[rows], qvec)
            for rank, row in enumerate(self._best(cos, rows, pool), 1):
                out.vec_rank[self._ids[row]] = rank
                chosen[row] = None
        if qcounts:
            c1 = float(k1 * (1.0 - b))
            c2 = float(k1 * b) / (self._total_len / docs if self._total_len > 0 else 1.0)
            acc = np.zeros(n, dtype=np.float64)
            for term, qc in qcounts.items():
                got = postings.get(term)
                if got is None:
                    continue
                prow, ptf = got
                df = float(prow.size)
                w = math.log(1 + (docs - df + 0.5) / (df + 0.5)) * qc * float(k1 + 1.0)
                tf = ptf.astype(np.float64)
                acc[prow] += w * tf / (tf + (c1 + c2 * self._doclen[prow]))
            kw = acc[rows]
            hit = kw > 0
            for rank, row in enumerate(self._best(kw[hit], rows[hit], pool), 1):
                out.kw_rank[self._ids[row]] = rank
                chosen[row] = None
            for row in chosen:
                out.bm25[self._ids[row]] = float(acc[row])
        out.ids = [self._ids[row] for row in chosen]
        return out
