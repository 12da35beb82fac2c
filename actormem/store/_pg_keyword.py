"""The keyword side of a large scope's PostgreSQL search: exact BM25 top rows, pruned.

Why a module of its own
    A scope of a few thousand rows is scored whole from ``postings`` inside the
    search's one statement (:mod:`actormem.store._pg_search`).  In a scope of
    100k rows the common words of a query are held by tens of thousands of
    rows (measured: 80k postings for a three-word query, 380 ms when scored
    from the rows, ~170 ms from the postings).  This module finds the same
    top rows while reading the postings of the rare terms only, with the
    *MaxScore* argument, in one or a few statements.

The argument
    A term's contribution to a row's BM25 is ``w * tf / (tf + c1 + c2 * len)``
    (``w``: its IDF times its count in the query times ``k1 + 1``).  It is at
    most ``U = w * T / (T + c1 + c2 * L)`` where ``T`` is the largest count and
    ``L`` the shortest length of a memory of the scope that ever held the term
    (the ``max_tf`` / ``min_doclen`` of its posting groups; deletions only loosen
    them).  Sort the
    terms by ``U``; call the cheapest ones, whose bounds add up to ``S``, the
    *skipped* terms and the others the *read* ones.  A statement reads the
    postings of the read terms only, sums each row's partial score, adds the
    skipped terms' contributions of the ``pool`` best rows (point lookups in
    ``postings``) and so knows ``pool`` rows scoring at least ``theta``.  A
    row holding none of the read terms scores at most ``S``: when
    ``S < theta`` it cannot be among the best ``pool``, and a row whose
    partial score plus ``S`` stays under ``theta`` neither; the others get
    their full score and the best ``pool`` are exact (a read row's own length,
    which its postings carry, tightens its bound: the skipped terms' largest counts
    at that length).  When ``S >= theta`` the
    next attempt skips fewer terms (those whose bounds add up to less than the
    best ``theta`` seen: that is a true lower bound of the pool's last score),
    down to skipping none, which is the full computation.  Exact in every
    case; the tests compare it with BM25 computed from the rows.

Weights are computed here from the scope's statistics, with the same formula
as the statement's (float64), so the displayed scores come from the statement
and the ranks from here agree.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Final

from actormem.store._pg_queries import read_snapshot, scope_sql
from actormem.store._types import Namespace

__all__ = ["FIRST_READ_DF", "keyword_top"]

#: The first attempt reads the rarest terms until their postings number this many
#: times ``pool`` (enough rows to know ``pool`` good scores).
FIRST_READ_DF: Final = 2

#: A term held by more than this share of the scope's rows is skipped at first.
COMMON: Final = 0.2

#: Safety margin on the bounds (float rounding of the sums).
_SLACK: Final = 1e-9

#: Set (transaction-local) by the statistics' statement and before any further attempt;
#: each attempt gives the previous value back as it runs (its own plan is made by then),
#: so the statements that follow in the caller's transaction plan as usual, without a
#: round trip of its own.
#: An attempt sums the postings per memory id.  Its planner expects a few hundred
#: postings (a posting group's arrays hold 4-5 ids on average, a common term's hundreds)
#: and sorts them by id, and a text sort under a libc collation (``C.UTF-8`` too)
#: compares with ``strcoll`` and without abbreviated keys.  Measured at 100k rows (one
#: scope, 5,000-14,000 postings a query; 40 benchmark queries x 3, which variant runs
#: first alternating, load ~5): the grouping alone 16.4 -> 10.6 ms p50, the attempt
#: 33 -> 26 ms.  With sorts
#: disabled the planner hashes the grouping; the top-N orderings, which have no other
#: plan, stay sorts.
_HASHED: Final = "set_config('enable_sort', 'off', true)"
#: The setting as it was: read in the ``FROM`` clause, so before the projection turns it off.
_BEFORE: Final = "(SELECT current_setting('enable_sort') AS was OFFSET 0) AS before"


def _stats(conn: Any, scope: Namespace, terms: list[str]) -> tuple[float, float, list[Any], str]:
    """The scope's rows and length, each term's ``[df, max_tf, min_doclen]``, and the
    ``enable_sort`` setting before this statement turned it off (see :data:`_HASHED`)."""
    swhere, sparams = scope_sql(scope)
    gw, gparams = scope_sql(scope, "g.")
    row = conn.execute(
        # hash, not sort, the postings by id in the attempts that follow (see _HASHED)
        f"SELECT {_HASHED}, (SELECT coalesce(sum(docs), 0)::float8 FROM scope_stats WHERE "
        f"{swhere}), (SELECT coalesce(sum(doclen), 0)::float8 FROM scope_stats WHERE {swhere}), "
        "(SELECT coalesce(array_agg(ARRAY[coalesce(x.df, 0), coalesce(x.tf, -1), "
        "coalesce(x.len, 0)] ORDER BY q.i), '{}') "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS q(term, i) CROSS JOIN LATERAL ("
        # schema v9: a term's statistics and bounds are its posting groups' in the scope
        "SELECT sum(g.df)::float8 AS df, max(g.max_tf)::float8 AS tf, "
        "min(g.min_doclen)::float8 AS len FROM posting_groups g WHERE g.term = q.term "
        f"AND {gw}) AS x), before.was FROM {_BEFORE}",
        [*sparams, *sparams, terms, *gparams],
    ).fetchone()
    return float(row[1]), float(row[2]), list(row[3]), str(row[4])


def _attempt(
    conn: Any,
    scope: Namespace,
    read: list[tuple[str, float]],
    skip: list[tuple[str, float, float | None]],
    known: float,
    c1: float,
    c2: float,
    pool: int,
    was: str,
    again: bool = False,
) -> tuple[float, list[str], list[float]]:
    """One statement: ``(theta, ids, scores)`` reading the postings of ``read`` only.

    The partial scores come from the postings (an index-only scan per read
    term, grouped by id); the skipped terms' contributions of the few rows
    that need them are read from those rows (primary key lookups).  Which
    rows need them: a row whose partial score plus the skipped terms' bounds
    *at its own length* (the postings carry it; ``skip`` gives each term's
    largest count, ``None``: unbounded) reaches ``theta``.  (The rows holding
    no read term, which no posting names, are bounded by the caller: the
    skipped terms' bounds at the scope's shortest length.)  ``was``: the
    ``enable_sort`` setting it gives back; ``again``: a later attempt, which
    turns it off first (:data:`_HASHED`).
    """
    pw, pparams = scope_sql(scope, "p.")
    # the norm added as one term, as the statement's BM25 does (same rounding)
    f = f"p.tf / (p.tf + ({c1!r}::float8 + {c2!r}::float8 * p.doclen))"
    norm = f"({c1!r}::float8 + {c2!r}::float8 * m.doclen)"
    extra, xparams = [], list[Any]()
    room = []  # each skipped term's bound at the row's own length
    for term, w, top_tf in skip:
        tf = "m.tfs[array_position(m.terms, %s::text)]"
        extra.append(f"coalesce({w!r}::float8 * {tf} / ({tf} + {norm}), 0)")
        xparams += [term, term]
        if top_tf is None:
            room.append(f"{w * (1 + _SLACK)!r}::float8")
        else:
            t = float(top_tf)
            room.append(
                f"{w * t * (1 + _SLACK)!r}::float8 / ({t!r}::float8 + {c1!r}::float8 "
                f"+ {c2!r}::float8 * dl)"
            )
    more = " + ".join(extra) if extra else "0.0::float8"
    rest = " + ".join(room) if room else "0.0::float8"

    def rows_of(cte: str) -> str:
        # the rows by primary key, one lookup per row of the CTE (a join on the CTE let
        # the planner hash the table; with the postings unnested from their groups it
        # misjudged the CTE's size and compared every row with every row: 60 s at 100k)
        return (
            f"SELECT m.id, d.ps + {more} AS fs FROM {cte} d CROSS JOIN LATERAL "
            "(SELECT id, terms, tfs, doclen FROM memories WHERE id = d.id OFFSET 0) m"
        )

    sql = (
        "WITH e AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS e(term, w)), "
        f"part AS MATERIALIZED (SELECT p.id, sum(e.w * {f}) AS ps, min(p.doclen) AS dl FROM e "
        f"JOIN postings p ON p.term = e.term WHERE {pw} GROUP BY p.id), "
        "top AS MATERIALIZED (SELECT id, ps FROM part ORDER BY ps DESC, id LIMIT %s), "
        f"topfull AS ({rows_of('top')}), "
        "th AS MATERIALIZED (SELECT greatest(%s::float8, coalesce((SELECT fs FROM topfull "
        "ORDER BY fs DESC OFFSET %s LIMIT 1), 0)) AS t), "
        f"surv AS MATERIALIZED (SELECT id, ps FROM part WHERE ps + {rest} >= "
        "(SELECT t FROM th)), "
        f"full_ AS ({rows_of('surv')}), "
        "best AS (SELECT id, fs FROM full_ ORDER BY fs DESC, id LIMIT %s) "
        "SELECT (SELECT t FROM th), coalesce(array_agg(id ORDER BY fs DESC, id), '{}'), "
        "coalesce(array_agg(fs ORDER BY fs DESC, id), '{}'), "
        # planned by now: the statements after this one plan with the setting as it was
        "set_config('enable_sort', %s, true) FROM best"
    )
    params = [
        [t for t, _ in read],
        [w for _, w in read],
        *pparams,
        pool,
        *xparams,
        known,
        pool - 1,
        *xparams,
        pool,
        was,
    ]
    if again:  # sent together with the attempt: one round trip
        with conn.pipeline():
            conn.execute(f"SELECT {_HASHED}")
            row = conn.execute(sql, params).fetchone()
    else:
        row = conn.execute(sql, params).fetchone()
    return float(row[0]), list(row[1]), [float(x) for x in row[2]]


def keyword_top(
    conn: Any,
    scope: Namespace,
    terms: list[str],
    pool: int,
    k1: float,
    b: float,
) -> tuple[list[str], list[float], int]:
    """The ``pool`` live rows of ``scope`` with the best BM25 for ``terms`` (module docstring).

    All its statements read one snapshot (:func:`read_snapshot`; the caller's
    transaction when ``conn`` is in one): the statistics, the bounds and each
    attempt's ``theta`` describe the same rows, so a threshold learnt in one
    attempt never prunes rows of a later moment (rows deleted meanwhile, or a
    row committed after the bounds were read).

    Args:
        conn: A pooled connection (autocommit, or inside the caller's snapshot).
        scope: The searched namespace scope.
        terms: The query's BM25 terms, with repeats.
        pool: How many rows.
        k1: BM25 ``k1``.
        b: BM25 ``b``.

    Returns:
        ``(ids, scores, statements)``: best first (ties by id); rows scoring 0
        are left out; ``statements`` is how many attempts it took.
    """
    qcounts = Counter(terms)
    if not qcounts or pool <= 0:
        return [], [], 0
    with read_snapshot(conn):
        return _top(conn, scope, qcounts, pool, k1, b)


def _top(
    conn: Any,
    scope: Namespace,
    qcounts: Counter[str],
    pool: int,
    k1: float,
    b: float,
) -> tuple[list[str], list[float], int]:
    qterms = list(qcounts)
    n, tot, per_term, was = _stats(conn, scope, qterms)
    if n <= 0:
        return [], [], 0
    c1 = float(k1 * (1.0 - b))
    c2 = float(k1 * b) / (tot / n if tot > 0 else 1.0)
    # (bound, df, term, weight, largest count or None)
    scored: list[tuple[float, float, str, float, float | None]] = []
    for term, (df, max_tf, min_len) in zip(qterms, per_term, strict=True):
        df = float(df)
        if df <= 0:
            continue  # no row of the scope holds it
        w = math.log(1 + (n - df + 0.5) / (df + 0.5)) * qcounts[term] * float(k1 + 1.0)
        if max_tf < 0:
            # no bounds row (a database written around the bounds): the contribution's
            # limit as tf grows, w, bounds every row
            bound, top_tf = w * (1 + _SLACK), None
        else:
            top_tf = max(float(max_tf), 1.0)
            bound = w * top_tf / (top_tf + c1 + c2 * float(min_len)) * (1 + _SLACK)
        scored.append((bound, df, term, w, top_tf))
    if not scored:
        return [], [], 0
    scored.sort(key=lambda x: (x[0], -x[1], x[2]))  # cheapest bound first
    # first attempt: skip the terms held by more than COMMON of the scope's rows (the
    # costly ones), but read enough postings to fill the pool
    read_from = len(scored) - 1
    have = scored[-1][1]
    while read_from > 0 and (have < FIRST_READ_DF * pool or scored[read_from - 1][1] <= COMMON * n):
        read_from -= 1
        have += scored[read_from][1]
    known = 0.0
    statements = 0
    while True:
        skip, read = scored[:read_from], scored[read_from:]
        skip_bound = sum(x[0] for x in skip)
        theta, ids, scores = _attempt(
            conn,
            scope,
            [(x[2], x[3]) for x in read],
            [(x[2], x[3], x[4]) for x in skip],
            known,
            c1,
            c2,
            pool,
            was,
            again=statements > 0,
        )
        statements += 1
        known = max(known, theta)
        if not skip or skip_bound < known:
            keep = [(i, s) for i, s in zip(ids, scores, strict=True) if s > 0]
            return [i for i, _ in keep], [s for _, s in keep], statements
        # skip fewer: only terms whose bounds add up to less than the best theta seen
        total, cut = 0.0, 0
        while cut < read_from and total + scored[cut][0] < known:
            total += scored[cut][0]
            cut += 1
        read_from = min(cut, read_from - 1)
