"""Vector search over the index's matrix: exact cosines and the approximate first pass.

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

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
import structlog

from actormem.store._blas import SINGLE_THREAD_MAX_ROWS, unsplit_matmul
from actormem.store._index_rows import F32, I64, IndexRows

__all__ = ["VectorSearch", "top_k"]

log = structlog.get_logger(__name__)

_PCA_SAMPLE: Final = 20_000


class VectorSearch(IndexRows):
    """Cosines of rows with a query, exact or through the projected first pass."""

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
        self._base_rows = -1  # every projected row changed: a delta cannot say so
        log.info("index.projection_learned", rows=self._n, dims=self._approx_dims)

    def cosine(self, rows: I64, query: F32) -> F32:
        """Cosine of ``query`` with each row (vectors are normalised).

        Products of at most :data:`~actormem.store._blas.SINGLE_THREAD_MAX_ROWS`
        rows are computed in blocks OpenBLAS does not split: the search's thread
        limit holds only on the process's main thread (see :mod:`._blas`).
        """
        if rows.size == 0:
            return np.zeros(0, dtype=np.float32)
        if rows.size * 3 > self._n:
            full: F32 = _mul(self._n)(self._vecs[: self._n], query)
            if rows.size == self._n:  # every row (ascending, unique): no gather
                return full
            out: F32 = full[rows]
            return out
        gathered: F32 = _mul(rows.size)(self._vecs[rows], query)
        return gathered

    def cosine_many(self, rows: I64, queries: F32, *, ascending: bool = False) -> F32:
        """``(len(rows), len(queries))`` cosines of each row with each query.

        A write's near-duplicate check (its new memories, one namespace): the
        product is computed in blocks OpenBLAS does not split when it is still
        small (counted over every query: 300 rows x 20 queries was split, on the
        recorder's thread, where a thread limit does not hold)
        (see :mod:`actormem.store._blas`:
        two threads on a busy machine put 12 ms at p90 on a 3,000-row product
        that takes 0.3 ms on one), and rows lying in a few runs of consecutive
        rows -- a namespace written in order -- are multiplied in place
        instead of copied out first (the copy was 90% of the product's time).
        """
        big = rows.size * 3 > self._n
        product = self._n if big else rows.size
        mul = _mul(product)
        qt = queries.T
        with self._lock:
            if big:
                full: F32 = mul(self._vecs[: self._n], qt)[rows]
                return full
            runs = _runs(rows, ascending)
            if runs is not None:
                parts = [mul(self._vecs[a:b], qt) for a, b in runs]
                joined: F32 = parts[0] if len(parts) == 1 else np.concatenate(parts)
                return joined
            out: F32 = mul(self._vecs[rows], qt)
            return out

    def _approx_top(self, rows: I64, query: F32, k: int) -> tuple[I64, F32]:
        """Positions in ``rows`` of the (approximately) ``k`` nearest, best first.

        Ranks by the projected cosine, re-scores the best ``approx_rerank``
        with the full vectors; returns the positions and their exact cosines.
        """
        assert self._proj is not None and self._pvecs is not None
        qp = query @ self._proj
        if rows.size == self._n:
            coarse: F32 = _mul(self._n)(self._pvecs[: self._n], qp)
        elif rows.size * 3 > self._n:
            coarse = _mul(self._n)(self._pvecs[: self._n], qp)[rows]
        else:
            coarse = _mul(rows.size)(self._pvecs[rows], qp)
        first = top_k(coarse, max(self._approx_rerank, k))
        exact: F32 = self._vecs[rows[first]] @ query
        order = top_k(exact, k)
        out: I64 = first[order]
        return out, exact[order]


def _mul(rows: int) -> Callable[[F32, F32], F32]:
    """The product for ``rows`` rows: unsplit in any thread, or the BLAS library's
    threads for a large one (see :mod:`actormem.store._blas`)."""
    return np.matmul if rows > SINGLE_THREAD_MAX_ROWS else unsplit_matmul


#: Rows in more runs of consecutive rows than this are gathered into a copy.
_MAX_RUNS: Final = 16


def _runs(rows: I64, ascending: bool = False) -> list[tuple[int, int]] | None:
    """``rows`` as at most :data:`_MAX_RUNS` ``[start, end)`` runs of consecutive rows, or None.

    ``ascending``: the caller knows ``rows`` strictly ascending (an exact key's
    rows), so its first and last row alone tell one run.
    """
    if rows.size == 0:
        return None
    first, last = int(rows[0]), int(rows[-1])
    if last - first + 1 == rows.size and (ascending or bool((rows[1:] > rows[:-1]).all())):
        return [(first, last + 1)]  # one run: a namespace written in order
    breaks = np.flatnonzero(np.diff(rows) != 1)
    if breaks.size >= _MAX_RUNS:
        return None
    starts = [0, *(int(b) + 1 for b in breaks)]
    ends = [*(int(b) + 1 for b in breaks), int(rows.size)]
    return [(int(rows[a]), int(rows[b - 1]) + 1) for a, b in zip(starts, ends, strict=True)]


def top_k(scores: F32, k: int) -> I64:
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
