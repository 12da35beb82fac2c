"""How the PostgreSQL backend collects a search's candidates in SQL: one statement.

This is the SQL first stage: the path of a scope this process holds no copy
of (cold, larger than the cache's budget, or a hybrid search blending the
scope's episodes), and the reference the search cache is tested against.  A
scope the process holds is searched by its in-memory copy instead, kept exact
through the database on every search (:mod:`actormem.store._pg_cache`).
Here everything is read from the database at query time, in **one statement
on one pooled connection** (one round trip), built by :func:`collect`:

Statistics
    The scope's live row count, total term count and episode count come from
    ``scope_stats`` (one row per concrete namespace, kept by triggers, see
    :mod:`actormem.store._pg_schema`) and each query term's document
    frequency from the ``df`` of its ``posting_groups`` rows in the scope
    (schema v9, :mod:`actormem.store._pg_group_stats`): summing rows of the
    namespaces in the scope, never reading the scope's memories.  BM25 uses the searched
    scope's statistics, not the whole table's: a tenant's scores never depend
    on another tenant's memories.

Vector side
    Exact by default: ``ORDER BY (embedding <=> $q) + 0 LIMIT k`` inside the
    scope.  The ``+ 0`` makes the order an expression no vector index can
    serve, so the planner stays on the scope's btree and ranks the scope's
    rows exactly.  With an HNSW index present, the plain ``ORDER BY embedding
    <=> $q`` is answered from the graph *before* the ``WHERE`` and returned
    0.4 of 10 rows on a 1k-row tenant of a 100k table (the issue's trap).
    A scope past ``hnsw_min_rows`` live rows gets a partial HNSW index of its
    own (:mod:`actormem.store._pg_ann`); its searches (without filters) then
    order by the plain distance with the index's own predicate written as
    literals, so the planner can prove the partial index applies, with
    ``hnsw.iterative_scan = relaxed_order`` on the store's connections.

Keyword side
    BM25 with the DuckDB backend's tokenizer and formula
    (:func:`~actormem.store._index.tokenize`, ``SearchConfig.bm25_k1`` /
    ``bm25_b``), computed from ``postings`` (one row per live memory and
    term, kept by triggers: :mod:`actormem.store._pg_schema`): an index-only
    scan of each query term's postings inside the scope, summed per memory.
    The cost follows the postings of the query's terms, not the scope's rows.
    In a scope this process has seen holding more than :data:`SMALL_SCOPE`
    rows, the best rows are found beforehand by
    :func:`~actormem.store._pg_keyword.keyword_top`, which skips the postings
    of common terms that cannot change them (exact, a few more statements)
    and passes them in.  A search with filters on other columns (kinds, tags,
    dates, importance) scores the rows themselves from their stored
    ``terms`` / ``tfs`` / ``doclen``: a small scope through its btree, a
    large one through its postings of the query terms.

Neighbouring episodes as context
    When the search blends episodes with their neighbours
    (``SearchConfig.context_*``) and the scope holds episodes, the candidates
    of both retrievers are taken as above, then for each candidate episode up
    to 3 episodes before and after it in its concrete namespace (``seq``
    order, the episodes' index); those rows are scored and blended in a
    window, the DuckDB index's formula, and the blends that are complete
    (the candidates, the episode before and the two after each) are ranked,
    the best ``pool`` of each retriever kept.  DuckDB blends every episode of
    the scope: an episode none of whose neighbours is a candidate can rank
    there and not here; ``test_context_blends_neighbours_of_the_candidates_like_duckdb``
    and the LoCoMo recall bound that difference.  A scope without episodes
    skips the branch (a gate in the statement).

The candidates come back with their rows, exact cosine and BM25, and
:func:`~actormem.store._ranking.rank_candidates` does the fusion, the
relevance blend and the second stage, as for DuckDB.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from actormem.store._pg_queries import (
    PG_LIVE,
    PG_NS,
    PG_SELECT,
    cosine_sql,
    distance_sql,
    scope_sql,
)
from actormem.store._types import Namespace, SearchFilters

__all__ = ["Candidates", "FirstStageQuery", "collect", "filters_sql", "term_counts", "vector_top"]

_EPISODE: Final = "episode"
# the episodes' index order (namespace, seq), backwards and forwards
_E_NS: Final = "e.user_id DESC, e.agent_id DESC, e.run_id DESC, e.session_id"
_E_NS_ASC: Final = "e.user_id, e.agent_id, e.run_id, e.session_id"

#: Scopes of up to this many live rows are read whole for the keyword side.
SMALL_SCOPE: Final = 5_000

#: Up to this many distinct query terms, each is scored by its own expression;
#: a longer query (a pasted document) joins its terms with the row's instead.
_FEW_TERMS: Final = 32

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class FirstStageQuery:
    """What one search asks of its first stage, whichever path answers it.

    A search's candidates come from this process's copy of the scope
    (:meth:`~actormem.store._pg_cache.SearchCache.candidates`) or from SQL
    (:meth:`~actormem.store._pg_gather.Gatherer.gather`, then :func:`collect`);
    both read the same question, built once by the store's search.

    Attributes:
        scope: The searched namespace scope.
        filters: Extra conditions.
        terms: The query's BM25 terms (with repeats).
        qvec: The query vector (``None``: no vector side).
        pool: Candidates taken from each retriever.
        use_vec: Run the vector retriever (only with a ``qvec``).
        use_kw: Run the keyword retriever.
        k1: BM25 ``k1``.
        b: BM25 ``b``.
        context: ``(prev, next, prev2)`` weights of neighbouring episodes,
            or ``None``.
        df_terms: More terms whose document frequency in the scope the
            caller needs (the second stage's soft match): read by the same
            statement, so from the same moment as the candidates.
    """

    scope: Namespace
    filters: SearchFilters | None
    terms: Sequence[str]
    qvec: F32 | None
    pool: int
    use_vec: bool
    use_kw: bool
    k1: float
    b: float
    context: tuple[float, float, float] | None = None
    df_terms: Sequence[str] = ()

    @property
    def vec_on(self) -> bool:
        """The vector side runs: asked for, with a query vector."""
        return self.use_vec and self.qvec is not None


def term_counts(content: str) -> tuple[list[str], list[int], int]:
    """``(terms, counts, length)`` of a memory's content for the ``terms``/``tfs``/``doclen``
    columns."""
    from actormem.store._index import tokenize

    tokens = tokenize(content)
    n = len(tokens)
    if len(set(tokens)) == n:  # most contents repeat no term: nothing to count
        return tokens, [1] * n, n
    counts = Counter(tokens)
    return list(counts), list(counts.values()), n


def filters_sql(
    namespace: Namespace, filters: SearchFilters | None
) -> tuple[str, list[Any]] | None:
    """``(where, params)`` of the live rows in scope passing ``filters``; ``None`` when the
    filters contradict the namespace (nothing can match)."""
    where, params = scope_sql(namespace)
    where += f" AND {PG_LIVE}"
    extra = _filter_sql(namespace, filters)
    if extra is None:
        return None
    return where + extra[0], params + extra[1]


def _filter_sql(
    namespace: Namespace, filters: SearchFilters | None
) -> tuple[str, list[Any]] | None:
    """The ``AND ...`` conditions of ``filters`` alone (``None``: nothing can match)."""
    where, params = "", list[Any]()
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
        #: The scope's live episodes (``None``: no row came back to say).
        self.episodes: int | None = None
        self.df: dict[str, int] = {}
        # with neighbouring episodes as context: id -> (blended cosine, blended bm25)
        self.blended: dict[str, tuple[float, float]] = {}


class _Sql:
    """A statement built in pieces, its ``%s`` parameters kept in textual order."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.params: list[Any] = []

    def add(self, text: str, *params: Any) -> None:
        self.parts.append(text)
        self.params.extend(params)

    def text(self) -> str:
        return "".join(self.parts)


def _bm25(sql: _Sql, qterms: Sequence[str], k1: float, b: float, row: str = "") -> None:
    """Append a row's BM25 score, from the weights and length norm of the ``w`` CTE.

    ``w.w[i]`` is query term ``i``'s IDF times its count in the query times
    ``k1 + 1``; the norm is ``k1 * (1 - b) + k1 * b / avgdl * doclen``.  Each
    term's frequency in the row is looked up with ``array_position`` (the
    arrays are short: the distinct words of one memory).  float8 throughout:
    numeric arithmetic made this expression ten times slower.
    """
    c1 = float(k1 * (1.0 - b))
    norm = f"({c1!r}::float8 + (SELECT c2 FROM w) * {row}doclen)"
    if not qterms:
        sql.add("0.0::float8")
        return
    if len(qterms) > _FEW_TERMS:
        sql.add(
            f"(SELECT coalesce(sum(q.w * u.tf / (u.tf + {norm})), 0) "
            f"FROM unnest({row}terms, {row}tfs) AS u(term, tf) "
            "JOIN unnest(%s::text[], (SELECT wt FROM w)) AS q(term, w) ON q.term = u.term)",
            list(qterms),
        )
        return
    sql.add("(")
    for i, term in enumerate(qterms, 1):
        tf = f"{row}tfs[array_position({row}terms, %s::text)]"
        plus = " + " if i > 1 else ""
        sql.add(
            f"{plus}coalesce((SELECT wt[{i}] FROM w) * {tf} / ({tf} + {norm}), 0)",
            term,
            term,
        )
    sql.add(")")


def _vector_sql(
    where: str, wparams: list[Any], qvec: F32, pool: int, ann: str | None
) -> tuple[str, list[Any]]:
    """The vector side's best ``pool`` rows ``(id, d)``: through the scope's HNSW index
    when ``ann`` names its predicate, else exact (module docstring)."""
    if ann is not None:
        return (
            # ordered by the bare operator: the index answers it; the distance read
            # back is NaN-free (a zero vector is at distance 1, as on DuckDB)
            f"SELECT id, {distance_sql()} AS d FROM memories WHERE {ann} "
            "ORDER BY embedding <=> %s LIMIT %s",
            [qvec, qvec, pool],
        )
    return (
        f"SELECT id, {distance_sql()} AS d FROM memories WHERE {where} ORDER BY d, id LIMIT %s",
        [qvec, *wparams, pool],
    )


def vector_top(
    conn: Any,
    scope: Namespace,
    filters: SearchFilters | None,
    qvec: F32,
    pool: int,
    ann: str | None = None,
) -> tuple[list[str], list[float]]:
    """The vector side alone, ``(ids, distances)`` best first, as :func:`collect` runs it.

    For a search that runs it on a second connection while the first one
    prunes the keyword side; ``collect(..., vec_given=...)`` takes the result.
    """
    cond = filters_sql(scope, filters)
    if cond is None:
        return [], []
    text, params = _vector_sql(cond[0], cond[1], qvec, pool, ann if filters is None else None)
    rows = conn.execute(text, params).fetchall()
    return [str(r[0]) for r in rows], [float(r[1]) for r in rows]


def collect(
    conn: Any,
    q: FirstStageQuery,
    *,
    ann: str | None = None,
    with_context: bool = True,
    kw_given: tuple[list[str], list[float]] | None = None,
    vec_given: tuple[list[str], list[float]] | None = None,
) -> Candidates:
    """Find the candidates of one search on ``conn`` in one statement (module docstring).

    Args:
        conn: A pooled connection (autocommit).
        q: The search's question.
        ann: The scope's approximate index predicate, as SQL with literal
            values, when the scope has a ready one (used without filters).
        with_context: Run the context branch when ``q`` has context weights
            (``False``: a scope known to hold no episodes skips it).
        kw_given: The keyword side's best rows and scores, found beforehand
            (:func:`~actormem.store._pg_keyword.keyword_top`, large scopes).
        vec_given: The vector side's best rows and distances, found beforehand
            in the same snapshot (:func:`vector_top`, on another connection).
    """
    scope, filters, terms, qvec, pool = q.scope, q.filters, q.terms, q.qvec, q.pool
    use_vec, use_kw, k1, b, df_terms = q.use_vec, q.use_kw, q.k1, q.b, q.df_terms
    context = q.context if with_context else None
    out = Candidates()
    cond = filters_sql(scope, filters)
    if cond is None:
        return out
    where, wparams = cond
    swhere, sparams = scope_sql(scope)
    tw, tparams = scope_sql(scope, "t.")
    qcounts = Counter(terms) if use_kw else Counter[str]()
    qterms = list(qcounts)
    vec_on = use_vec and qvec is not None
    kw_on = bool(qterms)
    ctx_on = context is not None and sum(context) > 0

    s = _Sql()
    # -- statistics (scope_stats / posting_groups) --------------------------------------
    s.add(
        "WITH st AS MATERIALIZED (SELECT coalesce(sum(docs), 0)::float8 AS n, "
        "coalesce(sum(doclen), 0)::float8 AS tot, coalesce(sum(episodes), 0) AS eps "
        f"FROM scope_stats WHERE {swhere}), ",
        *sparams,
    )
    s.add(
        "cfg AS MATERIALIZED (SELECT %s AND eps > 0 AS ctx, n <= %s AS small FROM st), ",
        ctx_on,
        SMALL_SCOPE,
    )
    # the query's terms (qc: count in the query), then the caller's others (qc 0)
    extra = [t for t in dict.fromkeys(df_terms) if t not in qcounts]
    s.add(
        # (schema v9: a term's statistics are its posting groups' in the scope)
        "df AS MATERIALIZED (SELECT q.i, q.term, q.qc, coalesce((SELECT sum(t.df) FROM "
        f"posting_groups t WHERE t.term = q.term AND {tw}), 0)::float8 AS df "
        "FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS q(term, qc, i)), ",
        *tparams,
        qterms + extra,
        [qcounts[t] for t in qterms] + [0] * len(extra),
    )
    s.add(
        "w AS MATERIALIZED (SELECT coalesce(array_agg(CASE WHEN df.df > 0 THEN "
        "ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * df.qc * %s::float8 ELSE 0 END "
        "ORDER BY df.i) FILTER (WHERE df.qc > 0), '{}') AS wt, "
        "%s::float8 / (CASE WHEN st.tot > 0 THEN st.tot / st.n ELSE 1 END) AS c2 "
        "FROM st LEFT JOIN df ON true GROUP BY st.n, st.tot), ",
        float(k1 + 1.0),
        float(k1 * b),
    )
    # -- plain branch: each retriever's top rows by their own score --------------------
    if vec_on and vec_given is not None:
        s.add(
            "vc AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS g(id, d)), ",
            vec_given[0],
            vec_given[1],
        )
    elif vec_on:
        assert qvec is not None
        text, params = _vector_sql(where, wparams, qvec, pool, ann if filters is None else None)
        s.add(f"vc AS ({text}), ", *params)
    else:
        s.add("vc AS (SELECT NULL::text AS id, 0::float8 AS d WHERE false), ")
    if kw_on and kw_given is not None:
        s.add(
            "kw AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS g(id, k)), ",
            kw_given[0],
            kw_given[1],
        )
    elif kw_on and filters is None:
        # every row of the scope holding a query term, scored from its postings alone
        pw, pparams = scope_sql(scope, "p.")
        c1 = float(k1 * (1.0 - b))
        s.add(
            # the norm added as one term, as _bm25 does (same rounding, same ties)
            "kw AS (SELECT p.id, sum(q.w * p.tf / (p.tf + ("
            f"{c1!r}::float8 + (SELECT c2 FROM w) * p.doclen))) AS k "
            "FROM unnest(%s::text[], (SELECT wt FROM w)) AS q(term, w) "
            f"JOIN postings p ON p.term = q.term WHERE {pw} "
            "GROUP BY p.id ORDER BY k DESC, p.id LIMIT %s), ",
            qterms,
            *pparams,
            pool,
        )
    elif kw_on:
        # with filters on other columns: the rows themselves.  A small scope is read
        # whole through its btree; a large one by the ids of its postings of the query
        # terms (primary key lookups; schema v8 dropped the GIN index on ``terms``)
        pw, pparams = scope_sql(scope, "p.")
        s.add("kw AS (")
        for i, (match, gate, mparams) in enumerate(
            (
                ("terms && %s::text[]", "NOT", []),
                (
                    f"id IN (SELECT p.id FROM postings p WHERE p.term = ANY(%s::text[]) AND {pw})",
                    "",
                    pparams,
                ),
            )
        ):
            s.add(" UNION ALL (SELECT id, " if i else "(SELECT id, ")
            _bm25(s, qterms, k1, b)
            s.add(
                f" AS k FROM memories WHERE {where} AND {match} "
                f"AND {gate} (SELECT small FROM cfg) ORDER BY k DESC, id LIMIT %s)",
                *wparams,
                qterms,
                *mparams,
                pool,
            )
        s.add("), ")
    else:
        s.add("kw AS (SELECT NULL::text AS id, 0::float8 AS k WHERE false), ")
    s.add(
        "pc AS (SELECT id, v.r AS vr, k.r AS kr FROM "
        "(SELECT id, row_number() OVER (ORDER BY d, id) AS r FROM vc) v FULL JOIN "
        "(SELECT id, row_number() OVER (ORDER BY k DESC, id) AS r FROM kw WHERE k > 0) k "
        "USING (id)), "
    )
    # -- context branch: the candidates' neighbourhoods, blended ------------------------
    if ctx_on:
        assert context is not None
        # the candidate episodes, then up to 3 episodes before and after each (same
        # namespace and filters, ``seq`` order, through the episodes' index); a row's
        # blend reads its previous, next and second previous episode, so the blends of
        # the candidates and of the rows 1 before and 1-2 after them are complete
        s.add(
            "c0 AS MATERIALIZED (SELECT id FROM vc UNION SELECT id FROM kw), "
            f"ce AS MATERIALIZED (SELECT id, {PG_NS}, seq FROM memories "
            "WHERE id = ANY((SELECT coalesce(array_agg(id), '{}') FROM c0)::text[]) "
            f"AND kind = '{_EPISODE}' AND (SELECT ctx FROM cfg)), "
            "nb AS MATERIALIZED (SELECT z.id, bool_or(z.o BETWEEN -1 AND 2) AS trusted "
            "FROM ce, LATERAL ("
            "(SELECT id, -row_number() OVER (ORDER BY seq DESC) AS o FROM (SELECT id, seq "
            "FROM memories e WHERE e.user_id = ce.user_id AND e.agent_id = ce.agent_id "
            "AND e.run_id = ce.run_id AND e.session_id = ce.session_id "
            f"AND e.kind = '{_EPISODE}' AND e.seq < ce.seq AND {where} "
            f"ORDER BY {_E_NS} DESC, e.seq DESC LIMIT 3) b) UNION ALL "
            "(SELECT id, row_number() OVER (ORDER BY seq) AS o FROM (SELECT id, seq "
            "FROM memories e WHERE e.user_id = ce.user_id AND e.agent_id = ce.agent_id "
            "AND e.run_id = ce.run_id AND e.session_id = ce.session_id "
            f"AND e.kind = '{_EPISODE}' AND e.seq > ce.seq AND {where} "
            f"ORDER BY {_E_NS_ASC}, e.seq LIMIT 3) a) UNION ALL SELECT ce.id, 0) AS z "
            # the candidates that are not episodes: their own scores, complete
            "GROUP BY z.id UNION ALL SELECT id, true FROM c0 WHERE (SELECT ctx FROM cfg) "
            "AND id NOT IN (SELECT id FROM ce)), ",
            *wparams,
            *wparams,
        )
        cos = cosine_sql() if vec_on else "0.0::float8"
        # the rows by primary key, driven by ``nb`` (which also says whose blend is complete)
        s.add(
            f"cs AS (SELECT id, kind, {PG_NS}, seq, nb.trusted, {cos} AS c, ",
            *([qvec] if vec_on else []),
        )
        _bm25(s, qterms if kw_on else [], k1, b)
        s.add(f" AS k FROM nb JOIN memories USING (id) WHERE {where}), ", *wparams)
        wp, wn, w2 = (float(context[0]), float(context[1]), float(context[2]))

        def blend(own: str) -> str:
            parts = (
                (wp, f"lag({own}) OVER w"),
                (wn, f"lead({own}) OVER w"),
                (w2, f"lag({own}, 2) OVER w"),
            )
            num = " + ".join(f"{x!r}::float8 * coalesce({e}, 0)" for x, e in parts)
            den = " + ".join(f"{x!r}::float8 * ({e} IS NOT NULL)::int" for x, e in parts)
            return (
                f"CASE WHEN kind = '{_EPISODE}' THEN ({own} + {num}) / (1 + {den}) ELSE {own} END"
            )

        s.add(
            f"cl AS (SELECT id, trusted, {blend('c')} AS bc, {blend('k')} AS bk FROM cs "
            f"WINDOW w AS (PARTITION BY {PG_NS}, kind = '{_EPISODE}' ORDER BY seq)), "
            # only complete blends: the candidates and their trusted neighbours
            "ct AS (SELECT id, bc, bk FROM cl WHERE trusted), "
            "cr AS (SELECT id, bc, bk, row_number() OVER (ORDER BY bc DESC, id) AS vr, "
            "row_number() OVER (ORDER BY bk DESC, id) AS kr FROM ct), "
            "cx AS (SELECT id, bc, bk, CASE WHEN %s AND vr <= %s THEN vr END AS vr, "
            "CASE WHEN %s AND bk > 0 AND kr <= %s THEN kr END AS kr FROM cr), ",
            vec_on,
            pool,
            kw_on,
            pool,
        )
        s.add(
            "x AS MATERIALIZED (SELECT id, vr, kr, NULL::float8 AS bc, NULL::float8 AS bk FROM pc "
            "WHERE NOT (SELECT ctx FROM cfg) UNION ALL SELECT id, vr, kr, bc, bk FROM cx "
            "WHERE vr IS NOT NULL OR kr IS NOT NULL), "
        )
    else:
        s.add(
            "x AS MATERIALIZED (SELECT id, vr, kr, NULL::float8 AS bc, NULL::float8 AS bk "
            "FROM pc), "
        )
    # the ids as one array: the rows are then fetched by primary key (a join on the
    # CTE let the planner, expecting the whole scope, hash the whole table)
    s.add("xa AS MATERIALIZED (SELECT coalesce(array_agg(id), '{}') AS ids FROM x) ")
    # -- the candidates' rows, own scores, ranks and the statistics --------------------
    s.add(f"SELECT {', '.join('m.' + c.strip() for c in PG_SELECT.split(','))}, ")
    _bm25(s, qterms, k1, b, row="m.")
    if vec_on:
        s.add(f", {cosine_sql('m.embedding')}", qvec)
    else:
        s.add(", 0.0::float8")
    s.add(
        ", x.vr, x.kr, x.bc, x.bk, (SELECT n FROM st), "
        "(SELECT coalesce(array_agg(df ORDER BY i), '{}') FROM df), (SELECT eps FROM st) "
        "FROM memories m JOIN x USING (id) WHERE m.id = ANY((SELECT ids FROM xa)::text[]) "
        # the candidates again as live rows of the scope: a row found by keyword_top's
        # statements is returned only if it is still one here
        f"AND {where}",
        *wparams,
    )
    rows = conn.execute(s.text(), s.params).fetchall()
    if not rows:
        return out
    out.n_docs = int(rows[0][24])
    out.df = {t: int(d) for t, d in zip(qterms + extra, rows[0][25], strict=True)}
    out.episodes = int(rows[0][26])
    n = len(PG_SELECT.split(","))
    for r in rows:
        mid = r[0]
        if r[20] is not None:
            out.vec_rank[mid] = int(r[20])
        if r[21] is not None:
            out.kw_rank[mid] = int(r[21])
        if r[22] is not None:
            out.blended[mid] = (float(r[22]), float(r[23]))
    out.rows = [r[: n + 2] for r in rows]
    return out
