"""How a search is ranked: fusion, relevance blend and the second stage.

Every backend first collects candidates -- the top ``config.candidates`` of
the vector retriever and of the keyword retriever inside the scope, with
their cosines and BM25 scores -- its own way (the DuckDB backend from its
in-memory index, PostgreSQL with SQL).  :func:`rank_candidates` turns them
into the final order: the fusion of :class:`~actormem.store.SearchConfig`
(weighted scores or reciprocal ranks), the blend with seed 000's relevance,
then in hybrid mode the second stage (:mod:`actormem.store._rerank`).

Ties are settled here, once for every backend: equal scores are ordered by
memory id (:func:`_ties_by_id`), and in reciprocal-rank fusion candidates
whose retriever scores are equal share that retriever's rank
(:func:`_shared_ranks`).  Each backend finds its candidates in its own order
(DuckDB's rows, a table's heap, a cached copy's), so leaving ties to a stable
sort returned different memories at the limit on DuckDB, PostgreSQL's SQL
path and its search cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import numpy as np
import numpy.typing as npt

from actormem.store._relevance import RelevanceWeights, relevance
from actormem.store._types import MemoryRecord, SearchConfig

if TYPE_CHECKING:
    from actormem.store._rerank import QueryRerank

__all__ = ["Scored", "rank_candidates"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class Scored(msgspec.Struct, frozen=True):
    """A scored row before it becomes a :class:`SearchHit`."""

    row: int
    score: float
    bm25: float
    cosine: float
    fused: float
    relevance: float
    soft_match: float = 0.0
    speaker_match: float = 0.0
    time_match: float = 0.0


def rank_candidates(
    *,
    rows: I64,
    cosine: F64,
    bm25: F64,
    vec_rank: F64,
    kw_rank: F64,
    importance: F64,
    access: F64,
    last: F64,
    created: F64,
    limit: int,
    config: SearchConfig,
    use_vec: bool,
    use_kw: bool,
    now: float,
    weights: RelevanceWeights,
    rerank: QueryRerank | None,
    records: Callable[[I64], list[MemoryRecord]],
    doc_freq: Callable[[str], int],
    n_docs: int,
    shown_cosine: F64 | None = None,
    shown_bm25: F64 | None = None,
    ids: Callable[[I64], list[str]] | None = None,
) -> list[Scored]:
    """The best ``limit`` candidates, best first.

    Args:
        rows: The candidates' identifiers in the caller's numbering
            (returned as :attr:`Scored.row`).
        cosine: Exact cosine of each candidate (zeros without a vector query).
        bm25: BM25 score of each candidate (zeros without keyword search).
        vec_rank: 1-based rank among the vector retriever's top, 0 if absent.
        kw_rank: 1-based rank among the keyword retriever's top, 0 if absent.
        importance: The relevance inputs of each candidate.
        access: ...
        last: ...
        created: ...
        limit: Hits wanted.
        config: Fusion settings.
        use_vec: The vector retriever ran.
        use_kw: The keyword retriever ran.
        now: The time relevance is computed at.
        weights: Relevance weights.
        rerank: The second stage (hybrid mode) or ``None``.
        records: The records of candidate positions (second stage only).
        doc_freq: Documents holding a term (second stage only).
        n_docs: Documents in the collection (second stage only).
        shown_cosine: The cosines to report in the hits when ``cosine`` is not
            the memory's own (blended with its neighbouring episodes').
        shown_bm25: The same for ``bm25``.
        ids: The memory ids of candidate positions: equal final scores are
            ordered by id (asked only for the positions of such ties).
    """
    wv = config.vector_weight if use_vec else 0.0
    wk = config.keyword_weight if use_kw else 0.0
    if wv + wk == 0:
        wv, wk = (1.0, 0.0) if use_vec else (0.0, 1.0)
    if config.method == "rrf":
        k = config.rrf_k
        vec_rank, kw_rank = _shared_ranks(vec_rank, cosine), _shared_ranks(kw_rank, bm25)
        fused = np.where(vec_rank > 0, wv / (k + vec_rank), 0.0) + np.where(
            kw_rank > 0, wk / (k + kw_rank), 0.0
        )
        fused = fused / ((wv + wk) / (k + 1.0))
    else:
        kmax = float(bm25.max()) if bm25.size else 0.0
        kn = bm25 / kmax if kmax > 0 else np.zeros_like(bm25)
        fused = (wv * np.clip(cosine, 0.0, 1.0) + wk * kn) / (wv + wk)
    rel = relevance(importance, access, last, created, now, weights)
    rw = config.relevance_weight
    final = (1.0 - rw) * fused + rw * rel
    ranked = np.argsort(-final, kind="stable")
    if ids is not None:
        ranked = _ties_by_id(ranked, final, ids, max(limit, rerank.depth if rerank else 0))
    order = ranked[:limit]
    extra = None
    if rerank is not None and use_vec and use_kw:  # second stage (exact or approx)
        top = ranked[: max(limit, rerank.depth)]
        recs = records(top)
        extra = rerank.apply(top, recs, fused, rel, wv + wk, doc_freq, n_docs)
        order, fused, final = extra.order[:limit], fused.copy(), final.copy()
        fused[extra.order], final[extra.order] = extra.fused, extra.final
        if ids is not None:
            order = _ties_by_id(extra.order, final, ids, limit)[:limit]
    out_bm25 = bm25 if shown_bm25 is None else shown_bm25
    out_cos = cosine if shown_cosine is None else shown_cosine
    # One gather per column, read as Python values (a numpy scalar per field and
    # hit was most of this step's time).
    pick = np.asarray(order, dtype=np.int64)
    nil = [0.0] * pick.size
    signals: list[list[float]] = [nil, nil, nil]
    if extra is not None:  # by candidate (the tie order above may differ from extra.order)
        for at, values in enumerate((extra.soft, extra.speaker, extra.time)):
            by_candidate = np.zeros(rows.size, dtype=np.float64)
            by_candidate[extra.order] = values
            signals[at] = by_candidate[pick].tolist()
    columns = zip(
        rows[pick].tolist(),
        final[pick].tolist(),
        out_bm25[pick].tolist(),
        out_cos[pick].tolist(),
        fused[pick].tolist(),
        rel[pick].tolist(),
        *signals,
        strict=True,
    )
    return [
        Scored(
            row=int(row),
            score=score,
            bm25=kw,
            cosine=cos,
            fused=fu,
            relevance=re,
            soft_match=soft,
            speaker_match=speaker,
            time_match=when,
        )
        for row, score, kw, cos, fu, re, soft, speaker, when in columns
    ]


def _ties_by_id(order: I64, score: F64, ids: Callable[[I64], list[str]], upto: int) -> I64:
    """``order`` (best first by ``score``) with each run of equal scores that starts in
    the first ``upto`` positions sorted by memory id; the ids of other runs are never
    asked for (exact ties are rare: most searches ask none)."""
    s = score[order]
    eq = np.flatnonzero(s[1:] == s[:-1])  # i: positions i and i + 1 tie
    eq = eq[eq < upto]
    if not eq.size:
        return order
    out = order.copy()
    n = order.size
    i = 0
    while i < eq.size:
        start = int(eq[i])
        end = start + 1
        while end < n and s[end] == s[start]:
            end += 1
        run = order[start:end]
        keys = ids(run)
        out[start:end] = run[sorted(range(len(keys)), key=keys.__getitem__)]
        i = int(np.searchsorted(eq, end))
    return out


def _shared_ranks(rank: F64, score: F64) -> F64:
    """Ranks (1-based, 0: not ranked) where ranked candidates of equal ``score`` share the
    best rank among them: who of a tie a retriever listed first says nothing."""
    ranked = rank > 0
    if int(ranked.sum()) < 2:
        return rank
    values, inverse = np.unique(score[ranked], return_inverse=True)
    if values.size == int(ranked.sum()):
        return rank
    best = np.full(values.size, np.inf)
    np.minimum.at(best, inverse, rank[ranked])
    out = rank.copy()
    out[ranked] = best[inverse]
    return out
