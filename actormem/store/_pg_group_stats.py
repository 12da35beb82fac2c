"""Schema version 9 of the PostgreSQL store: the keyword statistics of a term are read
from its posting groups; ``term_stats`` is no longer written.

Kept apart from :mod:`actormem.store._pg_groups` (version 8, a shipped step whose
SQL must not change) because this step brings new bodies for the triggers that
version made, and the store's insert path (:mod:`actormem.store._pg_write`) builds
its statement from here.

Why: in version 8 a batch wrote, per (term, concrete namespace), one row of
``posting_groups`` and one upsert of ``term_stats`` (document frequency and
bounds), both from the same aggregation.  At 100k memories that is ~2,600 rows
of each per 1,000 memories; the upserts (a speculative insertion each, with its
own index probe, heap tuple and WAL) were a large share of the server's work per
batch while every number in them is already known to the group row.  Readers
need, per query term and searched scope, the number of live rows holding it and
two bounds; the group rows of that term and scope are the same index range of
``posting_groups``' primary key that ``term_stats``' rows were of theirs.

``posting_groups`` gains
    ``df`` (how many live memories the group holds: ``cardinality(ids)``, kept as
    a column so that a reader never de-TOASTs a common term's arrays to count
    them), ``max_tf`` and ``min_doclen`` (the largest count and the shortest
    length of a memory the group ever held: bounds, only loosened when a memory
    leaves the group, raised when one is appended).
``term_stats`` and ``term_bounds`` become views
    ``term_stats`` sums the groups per (term, concrete namespace); ``term_bounds``
    shows its bounds.  Kept for whoever reads them by SQL; the store's readers
    (:mod:`actormem.store._pg_search`, :mod:`actormem.store._pg_keyword`) read
    ``posting_groups`` directly with the same condition on term and scope.
Triggers
    The statistics' triggers on update and delete keep ``scope_stats`` only;
    the groups' triggers keep ``df`` and the bounds with the arrays.  A term whose
    last memory goes has no group left (a group emptied is dropped), so no row
    with ``df`` 0 stays behind, as it did in ``term_stats``.

What it costs readers: one row per (term, namespace, group) instead of one per
(term, namespace).  A namespace filled by a few large batches has a group or a
few per term; one filled by single adds has a group per add holding the term,
and its document frequency is then summed over those rows (an index range
scan, the same rows the term's postings are read from).
"""

from __future__ import annotations

from typing import Any, Final

from actormem.store._pg_queries import PG_LIVE, PG_NS

__all__ = ["append_sql", "groups_sql", "stats_from_groups"]

_KEY_EQ: Final = (
    "g.term = d.term AND g.user_id = d.user_id AND g.agent_id = d.agent_id "
    "AND g.run_id = d.run_id AND g.session_id = d.session_id AND g.pgrp = d.pgrp"
)
_GROUP_COLUMNS: Final = f"term, {PG_NS}, pgrp, ids, tfs, doclens, df, max_tf, min_doclen"


def groups_sql(rows: str) -> str:
    """``INSERT`` of the posting groups of ``rows`` (a query of namespace, ``id``,
    ``pgrp``, ``doclen``, ``terms``, ``tfs`` columns, live rows only), with each
    group's ``df`` and bounds."""
    return (
        f"INSERT INTO posting_groups ({_GROUP_COLUMNS}) "
        f"SELECT u.term, {PG_NS}, r.pgrp, array_agg(r.id), array_agg(u.tf), array_agg(r.doclen), "
        "count(*), max(u.tf), min(r.doclen) "
        f"FROM ({rows}) AS r, unnest(r.terms, r.tfs) AS u(term, tf) "
        f"GROUP BY u.term, {PG_NS}, r.pgrp"
    )


def _append_sql(rows: str) -> str:
    """Append ``rows`` to their groups (created when missing), raising the bounds."""
    return (
        groups_sql(rows).replace(
            "INSERT INTO posting_groups ", "INSERT INTO posting_groups AS g ", 1
        )
        + f" ON CONFLICT (term, {PG_NS}, pgrp) DO UPDATE SET "
        "ids = g.ids || excluded.ids, tfs = g.tfs || excluded.tfs, "
        "doclens = g.doclens || excluded.doclens, df = g.df + excluded.df, "
        "max_tf = greatest(g.max_tf, excluded.max_tf), "
        "min_doclen = least(g.min_doclen, excluded.min_doclen)"
    )


def _remove_sql(rows: str) -> str:
    """Take ``rows`` (namespace, ``id``, ``pgrp``, ``terms``) out of their groups: drop
    the groups they empty, rewrite the others' arrays and ``df`` (two statements; the
    bounds stay, a looser bound is still a bound)."""
    gone = (
        f"SELECT u.term, {PG_NS}, r.pgrp, array_agg(r.id) AS gone FROM ({rows}) AS r, "
        f"unnest(r.terms) AS u(term) GROUP BY u.term, {PG_NS}, r.pgrp"
    )
    return (
        f"WITH d AS ({gone}) DELETE FROM posting_groups g USING d "
        f"WHERE {_KEY_EQ} AND g.ids <@ d.gone;\n"
        f"WITH d AS ({gone}) UPDATE posting_groups g SET (ids, tfs, doclens, df) = ("
        "SELECT array_agg(e.id ORDER BY e.o), array_agg(e.tf ORDER BY e.o), "
        "array_agg(e.dl ORDER BY e.o), count(*) "
        "FROM unnest(g.ids, g.tfs, g.doclens) WITH ORDINALITY AS e(id, tf, dl, o) "
        f"WHERE e.id <> ALL(d.gone)) FROM d WHERE {_KEY_EQ};"
    )


_POSTED: Final = f"{PG_NS}, id, pgrp, doclen, terms, tfs"
# an update's rows whose postings go (``_GONE``) or come (``_CAME``): as in version 8
_SAME: Final = """(n.terms, n.tfs, n.doclen, n.user_id, n.agent_id, n.run_id, n.session_id,
        n.pgrp) IS NOT DISTINCT FROM
        (o.terms, o.tfs, o.doclen, o.user_id, o.agent_id, o.run_id, o.session_id, o.pgrp)"""
_GONE: Final = f"""o.deleted_at IS NULL AND o.superseded_by IS NULL AND NOT (
        n.deleted_at IS NULL AND n.superseded_by IS NULL AND {_SAME})"""
_CAME: Final = f"""n.deleted_at IS NULL AND n.superseded_by IS NULL AND NOT (
        o.deleted_at IS NULL AND o.superseded_by IS NULL AND {_SAME})"""


def _cols(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in _POSTED.split(","))


#: Public name of the append (schema v11's insert path appends a small batch's rows to
#: their namespace's open group with it: :mod:`actormem.store._pg_open_groups`).
append_sql: Final = _append_sql


def _replace_function(conn: Any, name: str, body: str) -> None:
    """Give the trigger function ``name`` a new body (its triggers stay as they are)."""
    conn.execute(
        f"""
        CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            {body}
            RETURN NULL;
        END $fn$"""
    )


def stats_from_groups(conn: Any, dim: int) -> None:
    """Schema step 8 -> 9 (module docstring): ``df`` and bounds in the posting groups,
    ``term_stats`` / ``term_bounds`` views of them."""
    # imported here: the schema module imports this one for its list of steps
    from actormem.store._pg_schema import _DELTA_SCOPES, STATS_ROWS

    # -- the groups' own statistics, from their arrays ----------------------------------------
    conn.execute(
        "ALTER TABLE posting_groups ADD COLUMN df integer, ADD COLUMN max_tf integer, "
        "ADD COLUMN min_doclen integer"
    )
    # the group's own largest count and shortest length: bounds of what it holds (the
    # v8 bounds of the whole (term, namespace) were these or looser)
    conn.execute(
        "UPDATE posting_groups SET df = cardinality(ids), "
        "max_tf = (SELECT max(x) FROM unnest(tfs) AS x), "
        "min_doclen = (SELECT min(x) FROM unnest(doclens) AS x)"
    )
    conn.execute(
        "ALTER TABLE posting_groups ALTER COLUMN df SET NOT NULL, "
        "ALTER COLUMN max_tf SET NOT NULL, ALTER COLUMN min_doclen SET NOT NULL"
    )
    # -- triggers: scope statistics only; groups with their statistics ------------------------
    for op in ("update", "delete"):
        _replace_function(
            conn, f"actormem_stats_{op}", f"WITH d AS ({STATS_ROWS[op]}) {_DELTA_SCOPES};"
        )
    came = f"SELECT {_cols('n')} FROM new_rows n JOIN old_rows o USING (id) WHERE {_CAME}"
    _replace_function(
        conn,
        "actormem_groups_delete",
        _remove_sql(f"SELECT {_POSTED} FROM old_rows WHERE {PG_LIVE}"),
    )
    _replace_function(
        conn,
        "actormem_groups_update",
        _remove_sql(f"SELECT {_cols('o')} FROM new_rows n JOIN old_rows o USING (id) WHERE {_GONE}")
        + "\n"
        + _append_sql(came)
        + ";",
    )
    # -- term_stats and term_bounds: views of the groups ---------------------------------------
    conn.execute("DROP VIEW term_bounds")
    conn.execute("DROP TABLE term_stats")
    conn.execute(
        f"CREATE VIEW term_stats AS SELECT term, {PG_NS}, sum(df)::bigint AS df, "
        "max(max_tf) AS max_tf, min(min_doclen) AS min_doclen FROM posting_groups "
        f"GROUP BY term, {PG_NS}"
    )
    conn.execute(
        f"CREATE VIEW term_bounds AS SELECT term, {PG_NS}, max_tf, min_doclen FROM term_stats"
    )
    conn.execute("ANALYZE posting_groups")
