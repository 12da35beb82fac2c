"""Schema version 11 of the PostgreSQL store: small batches share a posting group per namespace.

Kept apart from :mod:`actormem.store._pg_group_stats` (version 9, a shipped step
whose SQL must not change) and from the insert path
(:mod:`actormem.store._pg_write`, which calls :func:`claim_open_groups`): this is
the rule that decides which posting group a new row's postings join, and the
migration that applies it to the rows already stored.

Why: up to version 10 every inserted batch took a posting group of its own
(``posting_group_seq``).  A namespace an agent fills one memory at a time (the
recorder turn by turn, ``save_fact``, ``on_session_end``: one ``add``, one
transaction each) then held one ``posting_groups`` row per add and term, and a
search sums a query term's ``df`` and bounds over every group of the term in
its scope (:mod:`actormem.store._pg_keyword`, :mod:`actormem.store._pg_search`):
a reviewer measured 4,086 group rows for one term at 6,000 single adds, 1,260
buffer hits and 5.8 ms for that sum alone.

The rule
    A batch's live rows of one concrete namespace that number fewer than
    :data:`SMALL_BATCH` join that namespace's *open group* (``posting_open``:
    one row per namespace naming its open group and how many rows were put in
    it, ``taken``); their postings are appended to the group's rows (``ON CONFLICT``
    append, as the update trigger of version 9 appends a rewritten row).  When
    the open group would pass :data:`OPEN_GROUP_ROWS` rows the namespace opens
    a fresh one.  Larger batches keep a group of their own, as before (no
    append, no extra statement).  So a namespace of N memories added one at a
    time holds about N / :data:`OPEN_GROUP_ROWS` groups per common term instead
    of one per add.
Why at write time, and not a background merge
    A merge moves rows between groups, which means rewriting ``memories.pgrp``
    of every moved row (the delete and update triggers find a row's postings
    through it): a new version of each row, its vector included.  Joining a
    group at insert costs only the append, which rewrites the arrays of the
    group rows the new row's terms fall in: at most :data:`OPEN_GROUP_ROWS`
    elements each (the cap bounds that cost), and nothing runs later.  The
    price: the groups of a namespace filled one add at a time still grow in
    number with it (linearly, 1 / :data:`OPEN_GROUP_ROWS` of the adds), and an
    add writes more WAL (each group row it appends to is a new row version with
    its arrays).  The cap is that trade: measured (1,000-1,600 single adds, a
    word in every memory, load 11-14) 6.9 KB of WAL per add with a group per
    add, 10.0 / 13.1 / 19.8 KB with caps of 64 / 128 / 256 rows.
Concurrency
    The ``posting_open`` row of a namespace is locked by the transaction that
    claims it (an upsert) until it commits, and the store's writer also holds
    the namespace's advisory lock (``lock_keys``) for every namespace whose
    rows join an open group, so two writers never append to one group at
    once, and an update's trigger appending to the same group waits as well.
    The statistics stay exact: each group's ``df`` and bounds are appended
    with its arrays in the same statement.  Nothing here is read by a search
    or by the per-process search cache (it reads the rows' own terms), and no
    column the change feed stamps changes.
The migration (:func:`share_small_groups`)
    Live rows in groups of fewer than :data:`SMALL_BATCH` live rows, in
    namespaces holding two or more such groups, are regrouped by namespace in
    ``seq`` order into groups of :data:`OPEN_GROUP_ROWS` (an ``UPDATE`` of
    ``memories.pgrp``: the version-9 triggers move their postings, ``df`` and
    bounds), and each regrouped namespace's last group becomes its open group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from actormem.store._pg_groups import GROUP_SETTING
from actormem.store._pg_queries import PG_LIVE, PG_NS

__all__ = [
    "OPEN_GROUP_ROWS",
    "SMALL_BATCH",
    "claim_open_groups",
    "share_small_groups",
    "small_namespaces",
]

#: A namespace's open group takes rows until it would hold more than this many.
OPEN_GROUP_ROWS: Final = 128

#: A batch's live rows of one namespace fewer than this join the namespace's open group.
SMALL_BATCH: int = 32

#: The step's own numbers (what the rule was when it shipped; it never changes).
_STEP_SMALL: Final = 32
_STEP_ROWS: Final = 128


Key = tuple[str, ...]


def small_namespaces(counts: Mapping[Key, int]) -> dict[Key, int]:
    """The namespaces of ``counts`` (live rows of a batch per concrete namespace) whose
    rows join their open group (fewer than :data:`SMALL_BATCH`)."""
    return {k: n for k, n in counts.items() if 0 < n < SMALL_BATCH}


def claim_open_groups(conn: Any, small: Mapping[Key, int]) -> tuple[int, dict[Key, int]]:
    """Take the batch's own posting group and the open groups of ``small`` (namespace ->
    how many live rows of the batch join it), in one statement.

    Declares the batch's group in the transaction-local setting the schema's
    insert check asks for (:mod:`actormem.store._pg_groups`).  Each open group's
    ``posting_open`` row is locked until the caller's transaction ends (module
    docstring); namespaces are claimed in sorted order.

    Returns:
        ``(batch group, {namespace: its open group})``.
    """
    batch = "set_config(%s, nextval('posting_group_seq')::text, true)"
    if not small:
        row = conn.execute(f"SELECT {batch}", (GROUP_SETTING,)).fetchone()
        return int(row[0]), {}
    keys = sorted(small)
    cols = [list(c) for c in zip(*keys, strict=True)]
    row = conn.execute(
        f"WITH o AS (INSERT INTO posting_open AS o ({PG_NS}, pgrp, taken) "
        "SELECT u.user_id, u.agent_id, u.run_id, u.session_id, nextval('posting_group_seq'), u.n "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::int4[]) "
        "AS u(user_id, agent_id, run_id, session_id, n) ORDER BY 1, 2, 3, 4 "
        f"ON CONFLICT ({PG_NS}) DO UPDATE SET "
        "pgrp = CASE WHEN o.taken + excluded.taken > %s THEN excluded.pgrp ELSE o.pgrp END, "
        "taken = CASE WHEN o.taken + excluded.taken > %s THEN excluded.taken "
        "ELSE o.taken + excluded.taken END "
        f"RETURNING {PG_NS}, pgrp) "
        f"SELECT {batch}, (SELECT array_agg(ARRAY[{PG_NS}, pgrp::text]) FROM o)",
        (*cols, [small[k] for k in keys], OPEN_GROUP_ROWS, OPEN_GROUP_ROWS, GROUP_SETTING),
    ).fetchone()
    opened = {tuple(r[:4]): int(r[4]) for r in row[1]}
    return int(row[0]), opened


def share_small_groups(conn: Any, dim: int) -> None:
    """Schema step 10 -> 11 (module docstring): ``posting_open``, and the small groups
    already stored regrouped."""
    conn.execute(
        "CREATE TABLE posting_open (user_id text NOT NULL, agent_id text NOT NULL, "
        "run_id text NOT NULL, session_id text NOT NULL, pgrp bigint NOT NULL, "
        f"taken integer NOT NULL, PRIMARY KEY ({PG_NS}))"
    )
    # the live rows of small groups, in namespaces with two or more of them, bucketed
    # by namespace in seq order; a bucket's group number from the sequence
    conn.execute(
        f"""
        CREATE TEMP TABLE actormem_regroup ON COMMIT DROP AS
        WITH sizes AS (
            SELECT {PG_NS}, pgrp, count(*) AS n FROM memories WHERE {PG_LIVE}
            GROUP BY {PG_NS}, pgrp),
        small AS (SELECT {PG_NS}, pgrp FROM sizes WHERE n < {_STEP_SMALL}),
        many AS (SELECT {PG_NS} FROM small GROUP BY {PG_NS} HAVING count(*) > 1),
        rows_ AS (
            SELECT m.id, m.user_id, m.agent_id, m.run_id, m.session_id,
                (row_number() OVER (PARTITION BY m.user_id, m.agent_id, m.run_id, m.session_id
                    ORDER BY m.seq) - 1) / {_STEP_ROWS} AS bucket
            FROM memories m JOIN small s USING ({PG_NS}, pgrp) JOIN many USING ({PG_NS})
            WHERE m.{PG_LIVE.replace(" AND ", " AND m.")}),
        buckets AS MATERIALIZED (
            SELECT b.*, nextval('posting_group_seq') AS pgrp FROM (
                SELECT {PG_NS}, bucket, count(*) AS n FROM rows_ GROUP BY {PG_NS}, bucket
                ORDER BY {PG_NS}, bucket) AS b)
        SELECT r.id, b.* FROM rows_ r JOIN buckets b USING ({PG_NS}, bucket)"""
    )
    # the version-9 triggers move each row's postings with their df and bounds
    conn.execute("UPDATE memories m SET pgrp = r.pgrp FROM actormem_regroup r WHERE m.id = r.id")
    conn.execute(
        f"INSERT INTO posting_open ({PG_NS}, pgrp, taken) "
        f"SELECT DISTINCT ON ({PG_NS}) {PG_NS}, pgrp, n FROM actormem_regroup "
        f"ORDER BY {PG_NS}, bucket DESC"
    )
    conn.execute("DROP TABLE actormem_regroup")
    conn.execute("ANALYZE posting_groups")
