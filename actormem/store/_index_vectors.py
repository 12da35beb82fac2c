"""Vector search over the index's matrix: exact cosines and the approximate first pass.

Approximate vector search: once the index holds ``approx_min_rows`` rows
(20k by default) it learns an orthogonal projection onto the principal axes
of a sample of its vectors (the eigenvectors of their second-moment
matrix; a quarter of the dimensions by default, 64 of WordLlama's 256) and
keeps, beside the full vectors, a contiguous matrix of every row's
projected vector, renormalised (+25% of the vectors' memory).  A search
over a scope of at least ``approx_min_rows`` rows ranks the scope by the
projected cosine (a quarter of the memory traffic of the exact product,
which at 100k rows is memory-bound: 100 MB a query), re-scores the best
``approx_rerank`` (2,000) with the full vectors and takes its vector
candidates from those; every cosine it reports is exact, and a hybrid
search over episodes ranks and reports the exact context blend
(:class:`Context`).  Smaller scopes are searched exactly.  The projection
is kept in step with every append and survives compaction; a rebuild (on
open, after a re-embedding) learns it anew.

Why a projection and not an int8 or float16 copy: numpy has no BLAS
product for either (measured here: an int8 100k x 256 matrix-vector
product 2.5x, a float16 one 9-45x the float32 BLAS product it would
replace), while the projected float32 matrix is an ordinary BLAS product
of a quarter of the bytes.

Recall (the share of the exact top-k the first pass returns;
``benchmarks/bench_approx.py`` over ``bench_store``'s corpus and over
WordLlama vectors of LoCoMo text, 200-400 queries, session 11): bench corpus
recall@10 / @50 1.0 / 1.0 at 20k, 50k and 100k; LoCoMo text 0.9995 / 0.999
at 20k, 0.999 / 0.996 at 50k, 0.996 / 0.992 at 100k (32 dims and 1,000
re-scored, the earlier setting, gave 0.937 / 0.923 there).  It depends on
the embedder: vectors that spread evenly over all their dimensions (a
hash embedder) keep little in a quarter of them; text embedders do not.  So
a learnt projection is first checked on the index's own vectors (64
queries, each the mean of two rows, against a sample of up to 50k other
rows, the re-score depth scaled to the sample's share of the index) and
used only when it finds at least ``APPROX_MIN_RECALL`` of their exact top
10; otherwise the index stays exact.  Measured on LoCoMo text: WordLlama
0.998 / 1.0 at 20k / 100k (used); 64-dimension hashed features 0.975 /
0.85 (not used).  The check cannot see the questions a store will be asked:
hashed features of 256 dimensions pass it (0.998) while LoCoMo questions
find 0.95 of their exact top 10, so an embedder that is isotropic by
construction says so (``HashEmbedder.isotropic``) and its store never
learns a pass.  The check costs tens of milliseconds, once per learning (on
open, or when the index reaches ``approx_min_rows``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
import structlog

from actormem.store._blas import SINGLE_THREAD_MAX_ROWS, unsplit_matmul
from actormem.store._index_rows import APPROX_MIN_RECALL, F32, I64, IndexRows, Links
from actormem.store._index_scope import with_context

__all__ = ["Context", "VectorSearch", "top_k"]

log = structlog.get_logger(__name__)

_PCA_SAMPLE: Final = 20_000
#: The projection's check: queries, and the rows they are searched among.
_CHECK_QUERIES: Final = 64
_CHECK_ROWS: Final = 50_000


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
        out: F32 = unsplit_matmul(vectors, self._proj)
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
        recall = self._projection_recall(live, rng)
        if recall < APPROX_MIN_RECALL:
            self._proj = None
            self._approx_min = None  # this index stays exact (learnt again on open)
            log.info("index.projection_rejected", rows=self._n, recall=round(recall, 3))
            return
        pvecs = np.zeros((self._cap, self._approx_dims), dtype=np.float32)
        for start in range(0, self._n, 65_536):
            end = min(start + 65_536, self._n)
            pvecs[start:end] = self._project(self._vecs[start:end])
        self._pvecs = pvecs
        self._base_rows = -1  # every projected row changed: a delta cannot say so
        log.info("index.projection_learned", rows=self._n, dims=self._approx_dims)

    def _projection_recall(self, live: I64, rng: np.random.Generator, k: int = 10) -> float:
        """Share of the exact top ``k`` the first pass finds, on the index's own
        vectors: 64 live rows as queries against a sample of up to 50k others,
        the re-score depth scaled to the sample's share of the live rows."""
        queries_n = min(_CHECK_QUERIES, live.size // 8)
        if queries_n == 0:
            return 1.0
        picked = rng.permutation(live)[: 2 * queries_n + _CHECK_ROWS]
        # a query is the mean of two rows: near no row in particular, as a question
        # is, where a row's own vector would find its near-duplicates
        queries = self._vecs[picked[:queries_n]] + self._vecs[picked[queries_n : 2 * queries_n]]
        base = self._vecs[picked[2 * queries_n :]]
        depth = max(k, round(self._approx_rerank * base.shape[0] / live.size))
        if depth >= base.shape[0]:
            return 1.0
        exact = unsplit_matmul(base, queries.T)  # (rows, queries)
        projected = self._project(base)
        coarse = unsplit_matmul(projected, self._project(queries).T)
        found = 0
        for j in range(queries_n):
            truth = top_k(exact[:, j], k)
            first = top_k(coarse[:, j], depth)
            best = first[top_k(exact[first, j], k)]
            found += np.intersect1d(truth, best).size
        return found / (queries_n * k)

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

    def _approx_top(
        self, rows: I64, query: F32, k: int, context: Context | None = None
    ) -> tuple[I64, F32]:
        """Positions in ``rows`` of the (approximately) ``k`` best, best first, and their
        exact scores.

        Ranks by the projected cosine, re-scores the best ``approx_rerank``
        with the full vectors.  With ``context`` (a hybrid search over
        episodes, see :func:`~actormem.store._index_scope.with_context`) the
        score is the context blend: the first pass ranks the blend of the
        projected cosines, the re-scored rows' blend takes their exact cosines
        and their neighbours' projected ones, and the best ``2 k`` of that are
        blended from exact cosines only (:meth:`_exact_scores`), so every
        score returned is what the exact search computes.
        """
        assert self._proj is not None and self._pvecs is not None
        qp = unsplit_matmul(self._proj.T, query)
        # The projected product's work in full-vector rows (it reads a quarter of
        # the bytes): one thread up to the same work as the exact product's.
        share = self.dim // max(1, self._approx_dims)
        if rows.size == self._n:
            coarse: F32 = _mul(self._n // share)(self._pvecs[: self._n], qp)
        elif rows.size * 3 > self._n:
            coarse = _mul(self._n // share)(self._pvecs[: self._n], qp)[rows]
        else:
            coarse = _mul(rows.size // share)(self._pvecs[rows], qp)
        if context is None:
            first = _best_set(coarse, max(self._approx_rerank, k))
            exact: F32 = unsplit_matmul(self._vecs[rows[first]], query)
            order = top_k(exact, k)
            out: I64 = first[order]
            return out, exact[order]
        first = _best_set(context.blend(coarse), max(self._approx_rerank, k))
        mixed = coarse.copy()  # exact cosines where known, projected ones elsewhere
        mixed[first] = unsplit_matmul(self._vecs[rows[first]], query)
        short = first[top_k(context.blend_at(mixed, first), min(first.size, 2 * k))]
        blended, _ = self._exact_scores(rows, short, query, context)
        order = top_k(blended, k)
        best: I64 = short[order]
        return best, blended[order]

    def _exact_scores(
        self, rows: I64, pos: I64, query: F32, context: Context | None
    ) -> tuple[F32, F32]:
        """``(score, cosine)`` at positions ``pos`` of ``rows`` from the full vectors:
        the cosine, and the score the search ranks by (the context blend of the
        cosines of ``pos`` and their neighbours, or the cosine itself)."""
        own: F32 = unsplit_matmul(self._vecs[rows[pos]], query)
        if context is None:
            return own, own
        nbs = context.neighbours(pos)
        scores = np.zeros(rows.size, dtype=np.float32)  # only pos and nbs are read
        scores[pos] = own
        linked = np.concatenate([nb[nb >= 0] for nb in nbs])
        if linked.size:
            scores[linked] = unsplit_matmul(self._vecs[rows[linked]], query)
        return context.blend_at(scores, pos), own


class Context:
    """The context blend of a hybrid search over episodes, at any positions.

    :func:`~actormem.store._index_scope.with_context` blends a whole array;
    the approximate first pass needs the blend at a few positions, from
    scores known only there and at their neighbours.  ``prev`` / ``nxt``:
    each position's linked episode before / after it (-1: none); the blend
    is computed in the same float32 operations and order, so it equals
    ``with_context``'s value at those positions.
    """

    __slots__ = ("links", "nxt", "prev", "weights")

    def __init__(self, links: Links, weights: tuple[float, float, float], size: int) -> None:
        self.links = links
        self.weights = weights
        before, after = links[0], links[1]
        self.prev = np.full(size, -1, dtype=np.int64)
        self.prev[after] = before
        self.nxt = np.full(size, -1, dtype=np.int64)
        self.nxt[before] = after

    def blend(self, scores: F32) -> F32:
        """The blend of every position (``with_context``)."""
        return with_context(scores, self.links, self.weights)

    def neighbours(self, pos: I64) -> tuple[I64, I64, I64]:
        """Each position's previous, next and second previous episode (-1: none)."""
        p1 = self.prev[pos]
        p2 = np.where(p1 >= 0, self.prev[np.maximum(p1, 0)], -1)
        return p1, self.nxt[pos], p2

    def blend_at(self, scores: F32, pos: I64) -> F32:
        """The blend at ``pos`` of ``scores`` (read at ``pos`` and its neighbours)."""
        out = scores[pos].copy()
        den = np.ones(pos.size, dtype=np.float32)
        for w, nb in zip(self.weights, self.neighbours(pos), strict=True):
            if w:
                has = nb >= 0
                out[has] += np.float32(w) * scores[nb[has]]
                den[has] += np.float32(w)
        out /= den
        return out


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


def _best_set(scores: F32, k: int) -> I64:
    """Positions of the ``k`` largest scores, ascending (not ranked: the first pass's
    candidates are ranked by their exact scores; ascending rows gather faster)."""
    if scores.size <= k:
        every: I64 = np.arange(scores.size, dtype=np.int64)
        return every
    part: I64 = np.argpartition(scores, scores.size - k)[scores.size - k :]
    part.sort()
    return part


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
