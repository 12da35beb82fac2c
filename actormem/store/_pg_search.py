"""How the PostgreSQL backend collects a search's candidates.

Everything is read from the database at query time (no per-process index
that another worker's commit could leave stale):

Vector side
    ``ORDER BY (embedding <=> $q) + 0 LIMIT k`` inside the scope: the ``+ 0``
    makes the order an expression no vector index can serve, so the planner
    stays on the tenant's btree (``memories_live_key``) and ranks the scope's
    rows exactly.  With an HNSW index present, the plain ``ORDER BY embedding
    <=> $q`` is answered from the graph *before* the ``WHERE`` and returned
    0.4 of 10 rows on a 1k-row tenant of a 100k table (measured on this
    machine, see the issue's figures): the store creates no HNSW index.
    Exact search costs about 2 ms for a 1k-row tenant and grows with the
    scope (64-76 ms over 100k rows).

Keyword side
    BM25 with the DuckDB backend's tokenizer and formula
    (:func:`~actormem.store._index.tokenize`, ``SearchConfig.bm25_k1`` /
    ``bm25_b``), computed in SQL from each row's stored ``terms`` / ``tfs`` /
    ``doclen`` over the rows holding a query term (GIN index on ``terms``).
    Collection statistics (document count, average length, document
    frequencies) are those of the searched scope, not of the whole table:
    a tenant's scores never depend on another tenant's memories.

The two candidate lists are merged, every candidate's exact cosine and BM25
is computed, and :func:`~actormem.store._ranking.rank_candidates` does the
fusion, the relevance blend and the second stage, as for DuckDB.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from actormem.store._pg_queries import PG_LIVE, PG_SELECT, scope_sql
from actormem.store._types import Namespace, SearchFilters

__all__ = ["Candidates", "bm25_expr", "collect", "filters_sql", "term_counts"]

_EPISODE = "episode"

F32 = npt.NDArray[np.float32]


def term_counts(content: str) -> tuple[list[str], list[int], int]:
    """``(terms, counts, length)`` of a memory's content for the ``terms``/``tfs``/``doclen``
    columns."""
    from actormem.store._index import tokenize

    tokens = tokenize(content)
    counts = Counter(tokens)
    return list(counts), list(counts.values()), len(tokens)


def filters_sql(
    namespace: Namespace, filters: SearchFilters | None
) -> tuple[str, list[Any]] | None:
    """``(where, params)`` of the live rows in scope passing ``filters``; ``None`` when the
    filters contradict the namespace (nothing can match)."""
    where, params = scope_sql(namespace)
    where += f" AND {PG_LIVE}"
    if filters is None:
        return where, params
    for name in ("agent_id", "run_id", "session_id"):
        value = getattr(filters, name)
        if value is None:
            continue
        fixed = getattr(namespace, name)
        if fixed is not None and fixed != value:
            return None
        if fixed is None:
            where += f" AND {name} = %s"
            params.append(value)
    if filters.kinds is not None:
        where += " AND kind = ANY(%s)"
        params.append(list(filters.kinds))
    if filters.tags_any is not None:
        where += " AND tags && %s::text[]"
        params.append(list(filters.tags_any))
    if filters.tags_all is not None:
        where += " AND tags @> %s::text[]"
        params.append(list(filters.tags_all))
    if filters.created_after is not None:
        where += " AND created_at::float8 / 1000000 >= %s"
        params.append(float(filters.created_after))
    if filters.created_before is not None:
        where += " AND created_at::float8 / 1000000 < %s"
        params.append(float(filters.created_before))
    if filters.min_importance is not None:
        where += " AND importance >= %s"
        params.append(float(filters.min_importance))
    return where, params


class Candidates:
    """The outcome of :func:`collect`: candidate rows and the scope's statistics."""

    def __init__(self) -> None:
        self.vec_rank: dict[str, int] = {}
        self.kw_rank: dict[str, int] = {}
        self.rows: list[tuple[Any, ...]] = []  # PG_SELECT + bm25, cosine
        self.n_docs = 0
        self.avgdl = 1.0
        self.df: dict[str, int] = {}
        self.weights: dict[str, float] = {}
        # with neighbouring episodes as context: id -> (blended cosine, blended bm25)
        self.blended: dict[str, tuple[float, float]] = {}


def collect(
    conn: Any,
    scope: Namespace,
    filters: SearchFilters | None,
    terms: Sequence[str],
    qvec: F32 | None,
    pool: int,
    use_vec: bool,
    use_kw: bool,
    k1: float,
    b: float,
    hnsw: Any = None,
    context: tuple[float, float, float] | None = None,
) -> Candidates:
    """Find the candidates of one search on ``conn`` (see the module docstring).

    ``hnsw`` is a callable ``hnsw(conn, where, params, qvec, k) -> list[id] | None``
    that answers from a scope's approximate index (``None``: search exactly).
    """
    out = Candidates()
    cond = filters_sql(scope, filters)
    if cond is None:
        return out
    where, params = cond
    if context is not None:
        return _collect_in_context(
            conn, scope, where, params, terms, qvec, pool, use_vec, use_kw, k1, b, context
        )
    if use_vec and qvec is not None:
        ids: list[str] | None = hnsw(conn, where, params, qvec, pool) if hnsw else None
        if ids is None:
            rows = conn.execute(
                f"SELECT id FROM memories WHERE {where} "
                "ORDER BY (embedding <=> %s) + 0, id LIMIT %s",
                [*params, qvec, pool],
            ).fetchall()
            ids = [r[0] for r in rows]
        out.vec_rank = {mid: i for i, mid in enumerate(ids, 1)}
    qcounts = Counter(terms)
    bm25_sql, bm25_params = "0.0", list[Any]()
    if use_kw and qcounts:
        _keyword_stats(conn, scope, terms, out)
        if out.weights:
            bm25_sql, bm25_params = bm25_expr(out.weights, k1, b, out.avgdl)
            wterms = list(out.weights)
            rows = conn.execute(
                f"SELECT id, {bm25_sql} AS s FROM memories WHERE {where} "
                "AND terms && %s::text[] ORDER BY s DESC, id LIMIT %s",
                [*bm25_params, *params, wterms, pool],
            ).fetchall()
            out.kw_rank = {r[0]: i for i, r in enumerate(rows, 1) if float(r[1]) > 0}
    ids_all = list(dict.fromkeys([*out.vec_rank, *out.kw_rank]))
    if not ids_all:
        return out
    cos_sql = "1 - (embedding <=> %s)" if use_vec and qvec is not None else "0.0"
    cos_param = [qvec] if use_vec and qvec is not None else []
    out.rows = conn.execute(
        f"SELECT {PG_SELECT}, {bm25_sql}, {cos_sql} FROM memories WHERE id = ANY(%s) AND {where}",
        [*bm25_params, *cos_param, ids_all, *params],
    ).fetchall()
    return out


#: Up to this many distinct query terms, each is scored by its own expression;
#: a longer query (a pasted document) joins its terms with the row's instead.
_FEW_TERMS = 32


def bm25_expr(
    weights: dict[str, float], k1: float, b: float, avgdl: float
) -> tuple[str, list[Any]]:
    """``(sql, params)``: a row's BM25 score from its ``terms``/``tfs``/``doclen`` columns.

    Each query term's frequency is looked up with ``array_position`` (the term
    arrays are short: the distinct words of one memory).  Same formula as
    the DuckDB index (:meth:`~actormem.store._index.MemoryIndex.bm25`).
    """
    # float8 literals: a bare 2.2 is numeric in PostgreSQL, and numeric arithmetic
    # made this expression ten times slower.
    norm = f"({float(k1 * (1.0 - b))!r}::float8 + {float(k1 * b / avgdl)!r}::float8 * doclen)"
    k = float(k1 + 1.0)
    if len(weights) > _FEW_TERMS:
        sql = (
            f"(SELECT coalesce(sum(q.w * {k!r}::float8 * u.tf / (u.tf + {norm})), 0) "
            "FROM unnest(terms, tfs) AS u(term, tf) "
            "JOIN unnest(%s::text[], %s::float8[]) AS q(term, w) ON q.term = u.term)"
        )
        return sql, [list(weights), list(weights.values())]
    parts = []
    params: list[Any] = []
    for term, w in weights.items():
        tf = "tfs[array_position(terms, %s::text)]"
        parts.append(f"coalesce({float(w * k)!r}::float8 * {tf} / ({tf} + {norm}), 0)")
        params.extend([term, term])
    return "(" + " + ".join(parts) + ")", params


def _keyword_stats(conn: Any, scope: Namespace, terms: Sequence[str], out: Candidates) -> None:
    """Fill ``out``'s document count, average length, document frequencies and
    term weights from one pass over the scope."""
    qcounts = Counter(terms)
    swhere, sparams = scope_sql(scope)
    swhere += f" AND {PG_LIVE}"
    qterms = list(qcounts)
    if len(qterms) <= _FEW_TERMS:
        counts = ", ".join("count(*) FILTER (WHERE terms @> ARRAY[%s]::text[])" for _ in qterms)
        row = conn.execute(
            f"SELECT count(*), coalesce(sum(doclen), 0), {counts} FROM memories WHERE {swhere}",
            [*qterms, *sparams],
        ).fetchone()
        out.df = {t: int(c) for t, c in zip(qterms, row[2:], strict=True)}
    else:
        row = conn.execute(
            f"SELECT count(*), coalesce(sum(doclen), 0) FROM memories WHERE {swhere}", sparams
        ).fetchone()
        df_rows = conn.execute(
            f"SELECT t, count(*) FROM memories, unnest(terms) AS t WHERE {swhere} "
            "AND terms && %s::text[] AND t = ANY(%s::text[]) GROUP BY t",
            [*sparams, qterms, qterms],
        ).fetchall()
        found = {str(t): int(c) for t, c in df_rows}
        out.df = {t: found.get(t, 0) for t in qterms}
    n, total = int(row[0]), int(row[1])
    out.n_docs = n
    out.avgdl = total / n if total > 0 else 1.0
    for term in qterms:
        df = out.df[term]
        if df:
            out.weights[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * qcounts[term]


def _collect_in_context(
    conn: Any,
    scope: Namespace,
    where: str,
    params: list[Any],
    terms: Sequence[str],
    qvec: F32 | None,
    pool: int,
    use_vec: bool,
    use_kw: bool,
    k1: float,
    b: float,
    context: tuple[float, float, float],
) -> Candidates:
    """Candidates with neighbouring episodes as context (``SearchConfig.context_*``).

    Every row of the scope is scored (cosine and BM25); each episode's scores
    are blended with those of the episodes of its concrete namespace added
    just before, just after and two before it (``seq`` order, a window over the scope's
    episodes) before the best ``pool`` of each retriever are picked -- the
    DuckDB index's formula, computed in one statement.
    """
    out = Candidates()
    vec_on = use_vec and qvec is not None
    if use_kw and terms:
        _keyword_stats(conn, scope, terms, out)
    bm25_sql, bm25_params = (
        bm25_expr(out.weights, k1, b, out.avgdl) if out.weights else ("0.0::float8", [])
    )
    cos_sql = "1 - (embedding <=> %s)" if vec_on else "0.0::float8"
    cos_params = [qvec] if vec_on else []
    wp, wn, w2 = (float(context[0]), float(context[1]), float(context[2]))
    ns = "user_id, agent_id, run_id, session_id"

    def blend(own: str) -> str:
        terms = (
            (wp, f"lag({own}) OVER w"),
            (wn, f"lead({own}) OVER w"),
            (w2, f"lag({own}, 2) OVER w"),
        )
        num = " + ".join(f"{w!r}::float8 * coalesce({x}, 0)" for w, x in terms)
        den = " + ".join(f"{w!r}::float8 * ({x} IS NOT NULL)::int" for w, x in terms)
        return f"CASE WHEN kind = '{_EPISODE}' THEN ({own} + {num}) / (1 + {den}) ELSE {own} END"

    rows = conn.execute(
        f"""
        WITH s AS (
            SELECT id, kind, {ns}, seq, {cos_sql} AS c, {bm25_sql} AS k
            FROM memories WHERE {where}
        ), l AS (
            SELECT id, c, k,
                {blend("c")} AS bc,
                {blend("k")} AS bk
            FROM s
            WINDOW w AS (PARTITION BY {ns}, kind = '{_EPISODE}' ORDER BY seq)
        ), r AS (
            SELECT id, c, k, bc, bk,
                row_number() OVER (ORDER BY bc DESC, id) AS vr,
                row_number() OVER (ORDER BY bk DESC, id) AS kr
            FROM l
        )
        SELECT id, c, k, bc, bk, vr, kr FROM r
        WHERE (%s AND vr <= %s) OR (%s AND bk > 0 AND kr <= %s)
        """,
        [*cos_params, *bm25_params, *params, vec_on, pool, bool(out.weights), pool],
    ).fetchall()
    if not rows:
        return out
    own: dict[str, tuple[float, float]] = {}
    for mid, c, k, bc, bk, vr, kr in rows:
        own[mid] = (float(c), float(k))
        out.blended[mid] = (float(bc), float(bk))
        if vec_on and vr <= pool:
            out.vec_rank[mid] = int(vr)
        if out.weights and float(bk) > 0 and kr <= pool:
            out.kw_rank[mid] = int(kr)
    recs = conn.execute(
        f"SELECT {PG_SELECT} FROM memories WHERE id = ANY(%s) AND {where}",
        [list(own), *params],
    ).fetchall()
    out.rows = [(*r, own[r[0]][1], own[r[0]][0]) for r in recs]  # + bm25, cosine
    return out
