"""Schema version 8 of the PostgreSQL store: postings stored by groups, bounds beside the
statistics, new rows only through the store's writer.

Kept apart from :mod:`actormem.store._pg_schema` (the tables and the shipped
steps) because this step brings its own triggers, and the writer
(:mod:`actormem.store._pg_write`) and the tests use its names.

Why: at 100k memories about 11 postings a memory (one row and one btree
entry per memory and distinct term, schema v4) were most of the server's
ingest work (measured, 100k rows in 1,000-row batches: of 21.5 s in the
write transactions, 8.1 s went to the postings' insert and 3.2 s to the
bounds').  Here a batch writes **one row per (term, concrete namespace,
posting group)** holding the arrays of its memories' ids, counts and
lengths: a batch of 1,000 memories of one namespace writes ~2,500 rows
instead of ~11,000 (3.2 s instead of 8.1 s in the same measurement).

``posting_groups``
    ``(term, user_id, agent_id, run_id, session_id, pgrp)`` is the key;
    ``ids``, ``tfs``, ``doclens`` are parallel arrays, one element per live
    memory of that namespace and group holding the term.  ``memories.pgrp``
    says which group a row's postings are in: every batch the store inserts
    takes a fresh number from ``posting_group_seq``; rows that were there
    before this step are grouped by 1,024 consecutive ``seq`` numbers (negative
    group numbers, so they never meet the sequence's).
``postings`` (a view)
    The groups unnested: one row per (live memory, term) with the columns of
    the former table (term, namespace, id, tf, doclen), so the readers
    (:mod:`actormem.store._pg_search`, :mod:`actormem.store._pg_keyword`)
    read it as before; a condition on the term and the namespace is applied
    to the groups' primary key before the arrays are unnested.
``term_stats`` with ``max_tf`` / ``min_doclen``; ``term_bounds`` (a view)
    The bounds (largest count, shortest length of a row that ever held the
    term; only ever loosened) now live in the statistics' row of the same
    (term, namespace): the insert path writes a batch's document frequencies
    and bounds in one statement instead of two.  ``term_bounds`` is a view of
    those columns, for the readers.
Inserts only through the store
    New rows are counted and posted by the store's insert path
    (:func:`~actormem.store._pg_write.copy_inserts`), not by a trigger: a
    trigger that reads the inserted rows (a transition table) makes
    PostgreSQL store copied rows one at a time (see
    :func:`~actormem.store._pg_write.add_insert_stats`).  A row inserted by
    hand-written SQL would therefore be stored without statistics or
    postings: invisible to keyword search and wrong for every BM25 score of
    its scope.  Such an ``INSERT`` (or ``COPY``) is refused by a statement
    trigger with an error saying so: the store's writer declares its posting
    group in the transaction-local setting ``actormem.posting_group`` before
    it copies, nothing else does.  Hand-written ``UPDATE`` and ``DELETE`` keep
    everything in step (statement triggers, as before).
No GIN index on ``memories.terms``
    Its readers (a filtered keyword search of a large scope, a term's document
    frequency) read the postings and ``term_stats`` instead; keeping it cost
    about 12% of the ingest time at 100k (measured: 23.0 -> 20.1 s without it).
Version 9
    moves the statistics and bounds of ``term_stats`` into the group rows
    (:mod:`actormem.store._pg_group_stats`); this module's SQL is the shipped
    step 7 -> 8 and stays as it was.
Updates and deletes
    Statement triggers take a deleted, superseded or rewritten row's
    postings out of its group's arrays (and drop a group left empty); a
    row that becomes live or is rewritten is appended to its group's arrays
    (``memories.pgrp``) and raises its bounds.
"""

from __future__ import annotations

from typing import Any, Final

from actormem.store._pg_queries import PG_LIVE, PG_NS

__all__ = ["GROUP_SETTING", "group_postings", "groups_sql"]

#: The transaction-local setting in which the store's insert path declares its posting group.
GROUP_SETTING: Final = "actormem.posting_group"

_KEY_EQ: Final = (
    "g.term = d.term AND g.user_id = d.user_id AND g.agent_id = d.agent_id "
    "AND g.run_id = d.run_id AND g.session_id = d.session_id AND g.pgrp = d.pgrp"
)
#: rows migrated from the per-memory postings are grouped by this many ``seq`` numbers
_MIGRATED_GROUP: Final = 1024


def groups_sql(rows: str) -> str:
    """``INSERT`` of the posting groups of ``rows`` (new groups: a query of namespace,
    ``id``, ``pgrp``, ``doclen``, ``terms``, ``tfs`` columns)."""
    return (
        f"INSERT INTO posting_groups (term, {PG_NS}, pgrp, ids, tfs, doclens) "
        f"SELECT u.term, {PG_NS}, r.pgrp, array_agg(r.id), array_agg(u.tf), array_agg(r.doclen) "
        f"FROM ({rows}) AS r, unnest(r.terms, r.tfs) AS u(term, tf) "
        f"GROUP BY u.term, {PG_NS}, r.pgrp"
    )


def _append_sql(rows: str) -> str:
    """Append ``rows`` to their groups (created when missing)."""
    return (
        groups_sql(rows) + f" ON CONFLICT (term, {PG_NS}, pgrp) DO UPDATE SET "
        "ids = g.ids || excluded.ids, tfs = g.tfs || excluded.tfs, "
        "doclens = g.doclens || excluded.doclens"
    ).replace("INSERT INTO posting_groups ", "INSERT INTO posting_groups AS g ", 1)


def _remove_sql(rows: str) -> str:
    """Take ``rows`` (namespace, ``id``, ``pgrp``, ``terms``) out of their groups: drop
    the groups they empty, rewrite the others' arrays (two statements)."""
    gone = (
        f"SELECT u.term, {PG_NS}, r.pgrp, array_agg(r.id) AS gone FROM ({rows}) AS r, "
        f"unnest(r.terms) AS u(term) GROUP BY u.term, {PG_NS}, r.pgrp"
    )
    # the groups losing every row go first (a namespace forgotten, a batch deleted),
    # then the others are rewritten without the rows that went
    return (
        f"WITH d AS ({gone}) DELETE FROM posting_groups g USING d "
        f"WHERE {_KEY_EQ} AND g.ids <@ d.gone;\n"
        f"WITH d AS ({gone}) UPDATE posting_groups g SET (ids, tfs, doclens) = ("
        "SELECT array_agg(e.id ORDER BY e.o), array_agg(e.tf ORDER BY e.o), "
        "array_agg(e.dl ORDER BY e.o) "
        "FROM unnest(g.ids, g.tfs, g.doclens) WITH ORDINALITY AS e(id, tf, dl, o) "
        f"WHERE e.id <> ALL(d.gone)) FROM d WHERE {_KEY_EQ};"
    )


def raise_bounds_sql(rows: str) -> str:
    """Raise the bounds in ``term_stats`` to cover ``rows`` (namespace, ``doclen``,
    ``terms``, ``tfs``); a missing statistics row is created with ``df`` 0 (the
    statistics' own trigger counts the row)."""
    return (
        f"INSERT INTO term_stats AS t (term, {PG_NS}, df, max_tf, min_doclen) "
        f"SELECT u.term, {PG_NS}, 0, max(u.tf), min(r.doclen) FROM ({rows}) AS r, "
        f"unnest(r.terms, r.tfs) AS u(term, tf) GROUP BY u.term, {PG_NS} "
        f"ORDER BY u.term, {PG_NS} ON CONFLICT (term, {PG_NS}) DO UPDATE SET "
        "max_tf = greatest(t.max_tf, excluded.max_tf), "
        "min_doclen = least(t.min_doclen, excluded.min_doclen) "
        "WHERE t.max_tf < excluded.max_tf OR t.min_doclen > excluded.min_doclen"
    )


_POSTED: Final = f"{PG_NS}, id, pgrp, doclen, terms, tfs"
# an update's rows whose postings go (``_GONE``) or come (``_CAME``): as in version 4
_SAME: Final = """(n.terms, n.tfs, n.doclen, n.user_id, n.agent_id, n.run_id, n.session_id,
        n.pgrp) IS NOT DISTINCT FROM
        (o.terms, o.tfs, o.doclen, o.user_id, o.agent_id, o.run_id, o.session_id, o.pgrp)"""
_GONE: Final = f"""o.deleted_at IS NULL AND o.superseded_by IS NULL AND NOT (
        n.deleted_at IS NULL AND n.superseded_by IS NULL AND {_SAME})"""
_CAME: Final = f"""n.deleted_at IS NULL AND n.superseded_by IS NULL AND NOT (
        o.deleted_at IS NULL AND o.superseded_by IS NULL AND {_SAME})"""


def _cols(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in _POSTED.split(","))


def group_postings(conn: Any, dim: int) -> None:
    """Schema step 7 -> 8 (module docstring): posting groups, bounds in ``term_stats``,
    inserts only through the store."""
    # -- bounds into term_stats ------------------------------------------------------------
    # a row without bounds of its own (none of the store's paths leaves one) is bounded
    # as loosely as can be: any count, any length (a term's weight bounds it)
    conn.execute(
        "ALTER TABLE term_stats ADD COLUMN max_tf integer NOT NULL DEFAULT 2147483647, "
        "ADD COLUMN min_doclen integer NOT NULL DEFAULT 0"
    )
    conn.execute(
        "UPDATE term_stats t SET max_tf = b.max_tf, min_doclen = b.min_doclen "
        "FROM term_bounds b WHERE (b.term, b.user_id, b.agent_id, b.run_id, b.session_id) = "
        "(t.term, t.user_id, t.agent_id, t.run_id, t.session_id)"
    )
    conn.execute(
        f"INSERT INTO term_stats (term, {PG_NS}, df, max_tf, min_doclen) "
        f"SELECT term, {PG_NS}, 0, max_tf, min_doclen FROM term_bounds "
        f"ON CONFLICT (term, {PG_NS}) DO NOTHING"
    )
    # -- the postings' triggers of versions 4 and 7 go ---------------------------------------
    for op in ("update", "delete"):
        conn.execute(f"DROP TRIGGER IF EXISTS memories_postings_{op} ON memories")
        conn.execute(f"DROP FUNCTION IF EXISTS actormem_postings_{op}()")
    conn.execute("DROP TABLE term_bounds")
    conn.execute(
        f"CREATE VIEW term_bounds AS SELECT term, {PG_NS}, max_tf, min_doclen FROM term_stats"
    )
    # -- groups -----------------------------------------------------------------------------
    conn.execute("ALTER TABLE memories ADD COLUMN pgrp bigint")
    conn.execute(f"UPDATE memories SET pgrp = -1 - seq / {_MIGRATED_GROUP}")
    conn.execute(
        "ALTER TABLE memories ALTER COLUMN pgrp SET NOT NULL, ALTER COLUMN pgrp SET DEFAULT "
        f"current_setting('{GROUP_SETTING}', true)::bigint"
    )
    conn.execute("CREATE SEQUENCE posting_group_seq")
    conn.execute(
        f"""
        CREATE TABLE posting_groups (
            term text NOT NULL, user_id text NOT NULL, agent_id text NOT NULL,
            run_id text NOT NULL, session_id text NOT NULL, pgrp bigint NOT NULL,
            ids text[] NOT NULL, tfs integer[] NOT NULL, doclens integer[] NOT NULL,
            PRIMARY KEY (term, {PG_NS}, pgrp))"""
    )
    conn.execute(groups_sql(f"SELECT {_POSTED} FROM memories WHERE {PG_LIVE} ORDER BY seq"))
    conn.execute("DROP TABLE postings")
    conn.execute(
        "CREATE VIEW postings AS SELECT g.term, g.user_id, g.agent_id, g.run_id, "
        "g.session_id, e.id, e.tf, e.doclen FROM posting_groups g, "
        "unnest(g.ids, g.tfs, g.doclens) AS e(id, tf, doclen)"
    )
    came = f"SELECT {_cols('n')} FROM new_rows n JOIN old_rows o USING (id) WHERE {_CAME}"
    bodies = {
        "delete": _remove_sql(f"SELECT {_POSTED} FROM old_rows WHERE {PG_LIVE}"),
        "update": _remove_sql(
            f"SELECT {_cols('o')} FROM new_rows n JOIN old_rows o USING (id) WHERE {_GONE}"
        )
        + "\n"
        + _append_sql(came)
        + ";\n"
        + raise_bounds_sql(came)
        + ";",
    }
    # named as before: fires before the statistics' trigger of the same event
    statement_triggers(conn, "groups", "postings", bodies)
    # -- inserts only through the store ---------------------------------------------------------
    conn.execute(
        f"""
        CREATE FUNCTION actormem_insert_check() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF coalesce(current_setting('{GROUP_SETTING}', true), '') !~ '^[0-9]{{1,18}}$' THEN
                RAISE EXCEPTION 'rows enter the table memories only through the actormem '
                    'store (add, add_many, import): it counts their keyword statistics and '
                    'writes their postings in the same transaction, and a row inserted by '
                    'other SQL would be stored without them (invisible to keyword search, '
                    'wrong BM25 scores for its namespace); nothing was inserted. '
                    'Updates and deletes by SQL are kept in step by triggers.';
            END IF;
            RETURN NULL;
        END $fn$"""
    )
    # after memories_writer_version (triggers of one event fire in name order), so a
    # worker of an older actormem still gets the error telling it to upgrade
    conn.execute(
        "CREATE TRIGGER memories_writes_by_store BEFORE INSERT ON memories "
        "FOR EACH STATEMENT EXECUTE FUNCTION actormem_insert_check()"
    )
    # the keyword side reads the postings; nothing needs the GIN index on ``terms`` now
    conn.execute("DROP INDEX memories_terms")
    conn.execute("ANALYZE posting_groups")
    conn.execute("ANALYZE term_stats")


#: The transition tables a statement trigger on ``memories`` reads, per event.
_TRANSITION: Final = {
    "insert": "NEW TABLE AS new_rows",
    "delete": "OLD TABLE AS old_rows",
    "update": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
}


def statement_triggers(conn: Any, function: str, trigger: str, bodies: dict[str, str]) -> None:
    """Create, per event of ``bodies``, the PL/pgSQL function ``actormem_<function>_<op>``
    running that body once per statement and the trigger ``memories_<trigger>_<op>``
    calling it with the statement's transition tables (``new_rows`` / ``old_rows``).

    Every migration step that keeps derived tables in step with ``memories``
    (statistics, postings, posting groups) creates its triggers this way.
    """
    for op, body in bodies.items():
        conn.execute(
            f"""
            CREATE FUNCTION actormem_{function}_{op}() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
                {body}
                RETURN NULL;
            END $fn$"""
        )
        conn.execute(
            f"CREATE TRIGGER memories_{trigger}_{op} AFTER {op.upper()} ON memories "
            f"REFERENCING {_TRANSITION[op]} FOR EACH STATEMENT "
            f"EXECUTE FUNCTION actormem_{function}_{op}()"
        )
